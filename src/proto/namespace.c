/*
 * ns: S3 listing pages -> one directory's entries (contract: namespace.h).
 *
 * Two phases.  ns_dir_add_page appends one candidate entry per usable key in
 * O(1) amortized time, in listing order, without looking for duplicates.
 * ns_dir_finish sorts once (qsort, O(n log n)) and merges each run of equal
 * names in one linear pass, so a directory of 100 000 entries costs the
 * same per entry as one of ten.
 *
 * Where each rule is applied:
 *  - add_page: keys outside dir_prefix are ignored; the marker (key ==
 *    dir_prefix) only updates d->newest; names that cannot be a path
 *    component are reported there, because only the page still has the key
 *    bytes (a name with a NUL byte cannot be kept as a C string); hidden
 *    names are dropped there, silently, so they never cost memory.
 *  - finish: duplicates and file/directory conflicts, which can span pages.
 *
 * Invariants:
 *  - every name stored in d->v is valid per ns_name_valid and not hidden, so
 *    it has no NUL byte and strcmp orders names bytewise (C compares as
 *    unsigned char);
 *  - a file entry's name is one allocation laid out as
 *        name '\0' key '\0' seq
 *    where key is the full S3 key (for the NS_SKIP_SHADOWED_BY_DIR report,
 *    made in finish, which no longer knows dir_prefix) and seq (a size_t,
 *    unaligned) is the entry's position in listing order, so the unstable
 *    qsort can still keep the first of two files with one name.  Callers
 *    see an ordinary C string; free(name) releases all of it;
 *  - directory entries have etag == NULL and size == 0;
 *  - after finish: names strictly increasing, at most one entry per name.
 *  - on ENOMEM, entries added so far stay owned by d; ns_dir_free releases
 *    them.
 */
#include "proto/namespace.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/keys.h"
#include "util/vec.h"

#define NS_NAME_MAX 255
#define NS_HIDDEN PROTO_RESERVED
#define NS_HIDDEN_LEN (sizeof(NS_HIDDEN) - 1)

bool
ns_name_valid(const char *name, size_t len)
{
	if (len == 0 || len > NS_NAME_MAX)
		return false;
	if ((len == 1 && name[0] == '.') ||
	    (len == 2 && name[0] == '.' && name[1] == '.'))
		return false;
	return memchr(name, '\0', len) == NULL && memchr(name, '/', len) == NULL;
}

bool
ns_name_hidden(const char *name, size_t len)
{
	return len >= NS_HIDDEN_LEN && memcmp(name, NS_HIDDEN, NS_HIDDEN_LEN) == 0;
}

void
ns_dir_init(ns_dir *d, ns_report_fn report, void *arg)
{
	memset(d, 0, sizeof(*d));
	d->report = report;
	d->report_arg = arg;
}

void
ns_dir_free(ns_dir *d)
{
	for (size_t i = 0; i < d->n; i++) {
		free(d->v[i].name);
		free(d->v[i].etag);
	}
	free(d->v);
	d->v = NULL;
	d->n = d->cap = 0;
	d->newest = (struct timespec){0, 0};
}

static void
ns_report(const ns_dir *d, const char *key, size_t key_len, ns_reason why)
{
	if (d->report != NULL)
		d->report(d->report_arg, key, key_len, why);
}

static bool
ns_ts_after(struct timespec a, struct timespec b)
{
	return a.tv_sec > b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec > b.tv_nsec);
}

/* Room for `extra` more entries.  Checks the size arithmetic, since a page
 * comes from the network. */
static int
ns_reserve(ns_dir *d, size_t extra)
{
	if (extra > SIZE_MAX / sizeof(ns_entry) - d->n)
		return -1;
	if (d->n + extra <= d->cap)
		return 0; /* d->v may be NULL: nothing yet, nothing needed */
	ns_entry *v = vec_reserve(d->v, &d->cap, sizeof *v, d->n + extra, 16);
	if (v == NULL)
		return -1;
	d->v = v;
	return 0;
}

/* The file-entry name allocation described at the top of the file. */
static char *
ns_file_name(const char *name, size_t len, const char *key, size_t key_len,
	     size_t seq)
{
	char *s = malloc(len + 1 + key_len + 1 + sizeof(seq));
	if (s == NULL)
		return NULL;
	memcpy(s, name, len);
	s[len] = '\0';
	memcpy(s + len + 1, key, key_len);
	s[len + 1 + key_len] = '\0';
	memcpy(s + len + 1 + key_len + 1, &seq, sizeof(seq));
	return s;
}

static const char *
ns_file_key(const ns_entry *e)
{
	return e->name + strlen(e->name) + 1;
}

static size_t
ns_file_seq(const ns_entry *e)
{
	const char *key = ns_file_key(e);
	size_t seq;
	memcpy(&seq, key + strlen(key) + 1, sizeof(seq));
	return seq;
}

static int
ns_add_file(ns_dir *d, const char *name, size_t len, const s3_object *o)
{
	ns_entry *e = &d->v[d->n];
	*e = (ns_entry){.size = o->size, .mtime = o->mtime};
	e->name = ns_file_name(name, len, o->key, o->key_len, d->n);
	if (e->name == NULL)
		return -1;
	if (o->etag != NULL && (e->etag = strdup(o->etag)) == NULL) {
		free(e->name);
		return -1;
	}
	d->n++;
	return 0;
}

static int
ns_add_dir(ns_dir *d, const char *name, size_t len, struct timespec mtime)
{
	ns_entry *e = &d->v[d->n];
	*e = (ns_entry){.is_dir = true, .mtime = mtime};
	if ((e->name = strndup(name, len)) == NULL)
		return -1;
	d->n++;
	return 0;
}

/* rest: what follows dir_prefix in key; a trailing '/' makes it a
 * directory.  Any other '/' makes it invalid (not a direct child).  o is the
 * object for a file or marker, NULL for a common prefix. */
static int
ns_add_rest(ns_dir *d, const char *key, size_t key_len, const char *rest,
	    size_t rest_len, const s3_object *o)
{
	bool is_dir = rest_len > 0 && rest[rest_len - 1] == '/';
	size_t len = is_dir ? rest_len - 1 : rest_len;

	if (!ns_name_valid(rest, len)) {
		ns_report(d, key, key_len, NS_SKIP_INVALID_NAME);
		return 0;
	}
	if (ns_name_hidden(rest, len)) {
		/* the commit protocol's directories: visibility.h */
		if (is_dir && len == sizeof PROTO_PENDING_DIR - 1 &&
		    !memcmp(rest, PROTO_PENDING_DIR, len))
			d->saw_pending = true;
		if (is_dir && len == sizeof PROTO_META_DIR - 1 &&
		    !memcmp(rest, PROTO_META_DIR, len))
			d->saw_meta = true;
		if (is_dir && len == sizeof PROTO_HINT_DIR - 1 &&
		    !memcmp(rest, PROTO_HINT_DIR, len))
			d->saw_hints = true;
		return 0;
	}
	if (!is_dir)
		return ns_add_file(d, rest, len, o);
	return ns_add_dir(d, rest, len, o ? o->mtime : (struct timespec){0, 0});
}

static int
ns_add_object(ns_dir *d, const char *pfx, size_t plen, const s3_object *o)
{
	if (o->key == NULL || o->key_len < plen || memcmp(o->key, pfx, plen) != 0)
		return 0;
	if (ns_ts_after(o->mtime, d->newest))
		d->newest = o->mtime;
	if (o->key_len == plen)
		return 0; /* the directory's own marker */
	return ns_add_rest(d, o->key, o->key_len, o->key + plen,
			   o->key_len - plen, o);
}

static int
ns_add_prefix(ns_dir *d, const char *pfx, size_t plen, const char *cp,
	      size_t cplen)
{
	if (cp == NULL || cplen <= plen || memcmp(cp, pfx, plen) != 0)
		return 0; /* foreign, or dir_prefix itself */
	if (cp[cplen - 1] != '/') {
		/* Not produced by delimiter '/': no sound reading of it. */
		ns_report(d, cp, cplen, NS_SKIP_INVALID_NAME);
		return 0;
	}
	return ns_add_rest(d, cp, cplen, cp + plen, cplen - plen, NULL);
}

int
ns_dir_add_page(ns_dir *d, const char *dir_prefix, const s3_list_result *page)
{
	size_t plen = strlen(dir_prefix);

	if (page->n_prefixes > SIZE_MAX - page->n_objects ||
	    ns_reserve(d, page->n_objects + page->n_prefixes) < 0)
		return -1;
	d->seen += page->n_objects + page->n_prefixes;
	for (size_t i = 0; i < page->n_objects; i++)
		if (ns_add_object(d, dir_prefix, plen, &page->objects[i]) < 0)
			return -1;
	for (size_t i = 0; i < page->n_prefixes; i++) {
		const char *cp = page->prefixes[i];
		size_t cplen = page->prefix_lens != NULL ? page->prefix_lens[i]
			     : cp != NULL ? strlen(cp) : 0;
		if (ns_add_prefix(d, dir_prefix, plen, cp, cplen) < 0)
			return -1;
	}
	return 0;
}

/* Name, then directories before files, then files in listing order: the
 * first entry of each run of equal names is the one to keep. */
static int
ns_cmp(const void *pa, const void *pb)
{
	const ns_entry *a = pa, *b = pb;
	int c = strcmp(a->name, b->name);

	if (c != 0)
		return c;
	if (a->is_dir != b->is_dir)
		return a->is_dir ? -1 : 1;
	if (a->is_dir)
		return 0;
	size_t sa = ns_file_seq(a), sb = ns_file_seq(b);
	return (sa > sb) - (sa < sb);
}

/* Folds dup (same name, sorted after keep) into keep and frees it. */
static void
ns_merge(ns_dir *d, ns_entry *keep, ns_entry *dup)
{
	if (dup->is_dir) {
		if (ns_ts_after(dup->mtime, keep->mtime))
			keep->mtime = dup->mtime;
	} else if (keep->is_dir) {
		const char *key = ns_file_key(dup);
		ns_report(d, key, strlen(key), NS_SKIP_SHADOWED_BY_DIR);
	}
	/* else: the same key listed twice; keep the first silently. */
	free(dup->name);
	free(dup->etag);
}

void
ns_dir_finish(ns_dir *d)
{
	size_t w = 0;

	if (d->n > 1)
		qsort(d->v, d->n, sizeof(d->v[0]), ns_cmp);
	for (size_t r = 0; r < d->n; r++) {
		if (w > 0 && strcmp(d->v[w - 1].name, d->v[r].name) == 0)
			ns_merge(d, &d->v[w - 1], &d->v[r]);
		else
			d->v[w++] = d->v[r];
	}
	d->n = w;
}

const ns_entry *
ns_dir_find(const ns_dir *d, const char *name)
{
	size_t lo = 0, hi = d->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, d->v[mid].name);
		if (c == 0)
			return &d->v[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

/* The index where name is or would go in the finished listing. */
static size_t
ns_dir_slot(const ns_dir *d, const char *name)
{
	size_t lo = 0, hi = d->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(name, d->v[mid].name) <= 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

int
ns_dir_put(ns_dir *d, const char *name, bool is_dir, uint64_t size,
	   struct timespec mtime)
{
	size_t i = ns_dir_slot(d, name);
	bool there = i < d->n && strcmp(d->v[i].name, name) == 0;
	char *nm = strdup(name);
	if (nm == NULL || (!there && ns_reserve(d, 1) < 0)) {
		free(nm);
		return -1;
	}
	if (there) {
		free(d->v[i].name);
		free(d->v[i].etag);
	} else {
		memmove(&d->v[i + 1], &d->v[i], (d->n - i) * sizeof *d->v);
		d->n++;
	}
	d->v[i] = (ns_entry){.name = nm, .is_dir = is_dir,
			     .size = is_dir ? 0 : size, .mtime = mtime};
	d->vanished = false;
	return 0;
}

void
ns_dir_drop(ns_dir *d, const char *name)
{
	size_t i = ns_dir_slot(d, name);
	if (i >= d->n || strcmp(d->v[i].name, name) != 0)
		return;
	free(d->v[i].name);
	free(d->v[i].etag);
	memmove(&d->v[i], &d->v[i + 1], (d->n - i - 1) * sizeof *d->v);
	d->n--;
}

bool
ns_dir_hint(ns_dir *d, const char *name)
{
	ns_entry *e = (ns_entry *)ns_dir_find(d, name);
	if (!e || e->is_dir)
		return false;
	e->hinted = true;
	return true;
}

bool
ns_dir_only_hints(const ns_dir *d)
{
	return d->saw_hints && d->seen == 1 && d->n == 0;
}
