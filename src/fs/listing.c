/*
 * fs_listing: the S3 side of a directory listing.  The plain listing is
 * one delimiter ListObjectsV2 loop; the protocol's extra listings happen
 * only when the plain listing showed their hidden prefixes, so directories
 * never written through a ckptfs mount cost nothing extra (pending
 * markers, manifests, metadata hints).
 */
#include "fs/listing.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto/keys.h"
#include "proto/mindex.h"
#include "s3/upload.h"
#include "util/buf.h"
#include "util/log.h"
#include "util/vec.h"

/* Runs every page of a listing through fn (s3_list_all). */
static int list_all(s3_client *s3, const char *prefix, const char *delim,
		    s3_page_fn fn, void *arg, s3_err *e)
{
	return s3_list_all(s3, prefix, delim, fn, arg, e);
}

static int page_into_dir(void *arg, const char *prefix,
			 const s3_list_result *p)
{
	return ns_dir_add_page(arg, prefix, p) < 0 ? -ENOMEM : 0;
}

/* ---- pending markers -------------------------------------------------- */

/* Live markers and delete records, as (child, writer).  base_len: where
 * "C/W@lease" starts in a key, when the listed prefix is not the markers
 * directory itself (0: it is). */
struct mark {
	char *child, *writer;
	bool gone;    /* a delete record: hides whatever its age */
	bool expired; /* a marker whose lease ran out (its writer died) */
	time_t mtime;
};
struct hidden {
	struct mark *v;
	size_t n;
	size_t base_len;
	size_t cap; /* of v */
};

static void hidden_free(struct hidden *h)
{
	for (size_t i = 0; i < h->n; i++) {
		free(h->v[i].child);
		free(h->v[i].writer);
	}
	free(h->v);
}

static int page_markers(void *arg, const char *prefix,
			const s3_list_result *p)
{
	struct hidden *h = arg;
	size_t plen = h->base_len ? h->base_len : strlen(prefix);
	time_t now = p->server_time ? p->server_time : time(NULL);
	for (size_t i = 0; i < p->n_objects; i++) {
		const s3_object *o = &p->objects[i];
		char *child;
		unsigned lease;
		if (o->key_len <= plen ||
		    vis_parse_marker(o->key + plen, &child, &lease) < 0)
			continue;
		bool gone = vis_marker_is_gone(o->key + plen);
		bool expired = !gone &&
			       !vis_marker_live(o->mtime.tv_sec, lease, now);
		const char *w = o->key + plen + strlen(child) + 1;
		struct mark *nv = h->n < h->cap
					  ? h->v
					  : vec_grow(h->v, &h->cap, sizeof *nv, 16);
		char *writer = strndup(w, (size_t)(strrchr(w, '@') - w));
		if (!nv || !writer) {
			if (nv)
				h->v = nv;
			free(child);
			free(writer);
			return -ENOMEM;
		}
		h->v = nv;
		h->v[h->n++] = (struct mark){child, writer, gone, expired,
					     o->mtime.tv_sec};
	}
	return 0;
}

/* The writers whose own manifest (manifest.W.json) in a directory is
 * committed, written by format 2 (proto/manifest.h), and when: a live
 * marker of such a writer no newer than it hides nothing any more. */
struct writers {
	char **v;
	time_t *at;
	size_t n;
	size_t cap; /* of v and at */
};

static void writers_free(struct writers *w)
{
	for (size_t i = 0; i < w->n; i++)
		free(w->v[i]);
	free(w->v);
	free(w->at);
	w->v = NULL;
	w->at = NULL;
	w->n = w->cap = 0;
}

/* Whether writer committed its own manifest at or after t. */
static bool writers_has(const struct writers *w, const char *writer, time_t t)
{
	for (size_t i = 0; i < w->n; i++)
		if (!strcmp(w->v[i], writer) && w->at[i] >= t)
			return true;
	return false;
}

/*
 * Whether the marks of one directory hide it, given its committed writers:
 * a delete record always (the delete passed its commit point); a live
 * marker until its writer's manifest there is committed, which is the
 * commit point of a directory commit and, through "renamed_from", of a
 * rename (doc/commit.md, "Commit points").  So what a reader shows never
 * waits for a lease to expire, and a writer that died after its commit
 * point leaves its marker hiding nothing.  Only a format 2 manifest at
 * least as new as the marker counts: a format 1 writer deleting its own
 * checkpoint PUTs a marker after its manifest, and that marker hides.
 */
static bool marks_hide(const struct hidden *h, const char *child,
		       const struct writers *committed)
{
	for (size_t i = 0; i < h->n; i++) {
		const struct mark *m = &h->v[i];
		if ((child && strcmp(m->child, child)) || m->expired)
			continue;
		if (m->gone || !writers_has(committed, m->writer, m->mtime))
			return true;
	}
	return false;
}

/* Whether child has only expired markers: a writer died there.  What it
 * left shows only through a committed manifest; without one (a format 1
 * rename that died copying, a transaction that never committed) the name
 * is hidden until gc removes it, never listed with part of a copy. */
static bool only_expired(const struct hidden *h, const char *child)
{
	bool any = false;
	for (size_t i = 0; i < h->n; i++)
		if (!strcmp(h->v[i].child, child)) {
			if (!h->v[i].expired)
				return false;
			any = true;
		}
	return any;
}

static int load_manifests(s3_client *s3, fs_mcache *mc,
			  const char *dir_prefix, vis_manifest **out,
			  struct writers *cw, s3_err *e);

/* The listing of P without the children its markers hide; a child with
 * only live markers is looked into (its manifests, cached by ETag) to see
 * whether their writers committed. */
static int hide_pending(s3_client *s3, fs_mcache *mc, const char *dir_prefix,
			ns_dir *d, s3_err *e)
{
	buf p = BUF_INIT;
	buf_printf(&p, "%s%s/", dir_prefix, PROTO_PENDING_DIR);
	struct hidden h = {NULL, 0, 0, 0};
	int rc = list_all(s3, buf_cstr(&p), NULL, page_markers, &h, e);
	for (size_t i = 0; rc == 0 && i < h.n; i++) {
		const char *c = h.v[i].child;
		bool first = true;
		for (size_t k = 0; k < i && first; k++)
			first = strcmp(h.v[k].child, c) != 0;
		if (!first || !ns_dir_find(d, c))
			continue;
		struct writers cw = {0};
		vis_manifest *m = NULL;
		bool any_gone = false;
		for (size_t k = i; k < h.n; k++)
			any_gone |= h.v[k].gone && !strcmp(h.v[k].child, c);
		if (!any_gone) {
			buf cp = BUF_INIT;
			buf_printf(&cp, "%s%s/", dir_prefix, c);
			rc = load_manifests(s3, mc, buf_cstr(&cp), &m, &cw, e);
			buf_free(&cp);
		}
		bool dead = only_expired(&h, c);
		if (rc == 0 && (dead ? !m || m->committed == 0
				     : marks_hide(&h, c, &cw))) {
			char *name = (char *)c;
			vis_hide_names(d, &name, 1);
		}
		writers_free(&cw);
		if (m) {
			vis_manifest_free(m);
			free(m);
		}
	}
	hidden_free(&h);
	buf_free(&p);
	return rc;
}

/*
 * The markers were listed after the directory, so a name whose marker was
 * deleted in between may be gone already: an old name of a renamed root or
 * a deleted directory loses its objects before its marker.  Listing the
 * directory again after the markers and keeping only names still there
 * closes that window; a name that appears only in the second listing is
 * dropped too (its marker may have been PUT after the markers were listed).
 * The extra LIST costs only directories with pending markers.
 */
static int relist_after_markers(s3_client *s3, const char *dir_prefix,
				ns_dir *d, s3_err *e)
{
	ns_dir again;
	ns_dir_init(&again, NULL, NULL);
	int rc = list_all(s3, dir_prefix, "/", page_into_dir, &again, e);
	if (rc == 0) {
		ns_dir_finish(&again);
		vis_keep_listed(d, &again);
		if (again.seen == 0)
			d->vanished = true; /* deleted between the listings */
	}
	ns_dir_free(&again);
	return rc;
}

/*
 * A ckptfs directory (one with manifests) is hidden in its parent's
 * listing while a marker of its own is live (a writer creating it, a
 * rename onto it) and from the moment a delete record of it exists (a
 * delete past its commit point: doc/commit.md, "Deletes and renames").  A
 * reader already inside (a cwd, a name resolved a moment before) lists it
 * directly, so the same markers are checked here, after the objects and
 * the manifests were listed, and the directory is gone (ENOENT) when one
 * is there: a delete whose writer died right after its commit point must
 * not go on showing its files to a reader inside, and one that removed
 * some objects already must not show the rest.  One LIST per listing of a
 * directory that has manifests; directories of other tools pay nothing.
 */
static int own_marker_live(s3_client *s3, const char *dir_prefix,
			   const struct writers *committed, bool *live,
			   s3_err *e)
{
	*live = false;
	char *mp = vis_own_markers_prefix(dir_prefix);
	if (!mp)
		return 0;
	/* the markers directory: mp without "C/" */
	size_t base = strlen(mp) - 1;
	while (base > 0 && mp[base - 1] != '/')
		base--;
	struct hidden h = {NULL, 0, base, 0};
	int rc = list_all(s3, mp, NULL, page_markers, &h, e);
	free(mp);
	*live = marks_hide(&h, NULL, committed);
	hidden_free(&h);
	return rc;
}

/* ---- manifests -------------------------------------------------------- */

struct manifests {
	s3_client *s3;
	fs_mcache *mc;
	vis_manifest *m;
	s3_err *e;
	int rc;
	bool indexed; /* an index was read (two writers may both write one) */
	struct writers *cw; /* writers of committed own manifests, or NULL */
};

static int page_older(void *arg, const char *prefix, const s3_list_result *p)
{
	time_t *t = arg;
	(void)prefix;
	for (size_t i = 0; i < p->n_objects; i++)
		if (p->objects[i].mtime.tv_sec <= *t) {
			*t = -1; /* found one: stop looking */
			return 1;
		}
	return 0;
}

/*
 * Whether a manifest that names the directory it was renamed from
 * ("renamed_from", proto/manifest.h) counts as committed: the writer's
 * delete record of the old name exists (the rename passed its commit
 * point), or nothing under the old name is older than this manifest (the
 * rename finished and took its record with it).  One HEAD, and a LIST
 * when the record is not there; only for such manifests, which the writer
 * rewrites without the field once its commit point is passed.  Errors
 * answer "not committed": the directory shows a moment later.
 */
static bool rename_passed(s3_client *s3, const s3_object *o,
			  const char *body, size_t len)
{
	char *from, *writer;
	/* nearly every manifest has no such field: no second JSON parse */
	if (!memmem(body, len, "\"renamed_from\"", 14) ||
	    proto_manifest_renamed_from(body, len, &from, &writer) != 1)
		return true;
	bool yes = false;
	/* the directory of .ckptfs/manifest.*.json */
	const char *meta = strstr(o->key, "/" PROTO_META_DIR "/");
	char *dir = NULL, *old = NULL;
	if (meta) {
		const char *last;
		for (last = meta; (meta = strstr(meta + 1, "/" PROTO_META_DIR "/"));)
			last = meta;
		dir = strndup(o->key, (size_t)(last - o->key) + 1);
	}
	old = dir ? proto_key_resolve(dir, from) : NULL;
	size_t ol = old ? strlen(old) : 0;
	if (ol > 1) {
		old[ol - 1] = 0; /* the old root's key, as proto_gone_key wants */
		char *gone = proto_gone_key("", old, writer);
		old[ol - 1] = '/';
		s3_head_result h;
		s3_err e;
		if (gone && s3_head(s3, gone, &h, &e) == 0)
			yes = true;
		else if (gone && e.err == ENOENT) {
			time_t t = o->mtime.tv_sec;
			int rc = s3_list_all(s3, old, NULL, page_older, &t, &e);
			yes = rc == 0 && t != -1;
		}
		free(gone);
	}
	free(old);
	free(dir);
	free(from);
	free(writer);
	return yes;
}

/* Records W when key ends in a writer's own manifest.W.json (not an
 * addendum manifest.W.N.json: writer ids have no '.'). */
static void add_own_writer(struct writers *w, const char *key, time_t at)
{
	const char *n = strrchr(key, '/');
	n = n ? n + 1 : key;
	size_t l = strlen(n);
	if (strncmp(n, "manifest.", 9) || l < 15 || strcmp(n + l - 5, ".json"))
		return;
	char *writer = strndup(n + 9, l - 14);
	if (!writer || strchr(writer, '.')) {
		free(writer);
		return;
	}
	if (w->n == w->cap) { /* v and at grow together */
		size_t cap = w->cap, cap_at = w->cap;
		char **nv = vec_grow(w->v, &cap, sizeof *nv, 16);
		if (nv)
			w->v = nv;
		time_t *na = nv ? vec_grow(w->at, &cap_at, sizeof *na, 16)
				: NULL;
		if (!na) {
			free(writer);
			return;
		}
		w->at = na;
		w->cap = cap;
	}
	w->at[w->n] = at;
	w->v[w->n++] = writer;
}

static void read_manifest(struct manifests *ms, const s3_object *o)
{
	if (o->size > PROTO_MANIFEST_MAX) {
		log_warn("ignoring manifest %s: %llu bytes", o->key,
			 (unsigned long long)o->size);
		return;
	}
	size_t got = 0;
	const char *etag = ms->mc && o->etag && o->etag[0] ? o->etag : NULL;
	char *body = etag ? fs_mcache_get(ms->mc, o->key, etag, &got) : NULL;
	bool keep_if_parsed = false; /* fetched, not kept yet */
	if (!body) {
		s3_err e;
		/* exactly the listed version, so it can be kept under its
		 * ETag; one rewritten since (a writer's manifest goes from
		 * intent to committed, longer) is read whole as it is now,
		 * not kept.  Before, the rewritten one was read to the listed
		 * size: cut, ignored, its names hidden until the next
		 * listing (model seed 8200's logs) */
		int rc = s3_get_object(ms->s3, o->key, PROTO_MANIFEST_MAX, etag,
				       &body, &got, NULL, &e);
		if (rc < 0 && etag && e.err == ESTALE) {
			etag = NULL;
			rc = s3_get_object(ms->s3, o->key, PROTO_MANIFEST_MAX, NULL,
					   &body, &got, NULL, &e);
		}
		if (rc < 0) {
			if (e.err != ENOENT) { /* deleted: fine */
				*ms->e = e;
				ms->rc = -1;
			}
			return;
		}
		/* kept once known whole: its MD5 is the ETag, or (a server
		 * whose ETags are no MD5) it parses.  A server that lists an
		 * object while its PUT is still writing it (s3rver) served a
		 * cut manifest, which was kept under the ETag for good: the
		 * checkpoint stayed hidden on that mount (doc/portability.md) */
		if (etag && s3_etag_matches(etag, body, got))
			fs_mcache_put(ms->mc, o->key, etag, body, got);
		else
			keep_if_parsed = etag != NULL;
	}
	if (!rename_passed(ms->s3, o, body, got)) {
		ms->m->pending++; /* a rename not past its commit point */
		free(body);
		return;
	}
	size_t before = ms->m->committed;
	char *err = NULL;
	if (vis_manifest_add_json(ms->m, body, got, &err) < 0) {
		log_warn("ignoring %s: %s", o->key, err ? err : "invalid");
	} else {
		if (keep_if_parsed)
			fs_mcache_put(ms->mc, o->key, etag, body, got);
		if (ms->cw && ms->m->committed > before &&
		    proto_manifest_version(body, got) >= 2)
			add_own_writer(ms->cw, o->key, o->mtime.tv_sec);
	}
	free(err);
	free(body);
}

/* ---- the manifest index (proto/mindex.h) ------------------------------ */

struct index_fill {
	fs_mcache *mc;
	const char *prefix;
};

static int index_record(void *arg, const char *name, const char *etag,
			const char *body, size_t len)
{
	struct index_fill *f = arg;
	/* only a body whose MD5 is the ETag the listing will show */
	if (!proto_is_manifest_name(name) || !s3_etag_matches(etag, body, len))
		return 0;
	buf k = BUF_INIT;
	buf_printf(&k, "%s%s", f->prefix, name);
	if (k.data)
		fs_mcache_put(f->mc, k.data, etag, body, len);
	buf_free(&k);
	return 0;
}

/*
 * An index lists before the manifests ("index." < "manifest."): one GET
 * puts the bodies of the manifests it holds into the manifest cache, so
 * read_manifest finds them there.  Once read, the index's own key and
 * ETag stay in the cache (one byte), so later looks do not GET it again.
 * Any failure just leaves the manifests to be read one by one.
 */
static void read_index(struct manifests *ms, const char *prefix,
		       const s3_object *o)
{
	size_t got = 0;
	if (!ms->mc || !o->etag || !o->etag[0] || o->size > PROTO_MANIFEST_MAX)
		return;
	char *seen = fs_mcache_get(ms->mc, o->key, o->etag, &got);
	if (seen) {
		free(seen);
		return;
	}
	char *body = malloc(o->size ? o->size : 1);
	s3_err e;
	if (!body || s3_get_range(ms->s3, o->key, 0, o->size, o->etag, body,
				  &got, &e) < 0) {
		free(body);
		return;
	}
	struct index_fill f = {ms->mc, prefix};
	if (proto_index_parse(body, got, index_record, &f) < 0)
		log_warn("ignoring manifest index %s: malformed", o->key);
	free(body);
	fs_mcache_put(ms->mc, o->key, o->etag, "i", 1);
}

static int page_manifests(void *arg, const char *prefix,
			  const s3_list_result *p)
{
	struct manifests *ms = arg;
	size_t plen = strlen(prefix);
	for (size_t i = 0; i < p->n_objects && ms->rc == 0; i++) {
		const s3_object *o = &p->objects[i];
		if (o->key_len <= plen || o->key_len != strlen(o->key))
			continue;
		if (proto_is_index_name(o->key + plen)) {
			if (!ms->indexed)
				read_index(ms, prefix, o);
			ms->indexed = true;
		}
		else if (proto_is_manifest_name(o->key + plen))
			read_manifest(ms, o);
	}
	return 0;
}

static int load_manifests(s3_client *s3, fs_mcache *mc,
			  const char *dir_prefix, vis_manifest **out,
			  struct writers *cw, s3_err *e)
{
	vis_manifest *m = calloc(1, sizeof *m);
	if (!m)
		return -1;
	vis_manifest_init(m);
	buf p = BUF_INIT;
	buf_printf(&p, "%s%s/", dir_prefix, PROTO_META_DIR);
	struct manifests ms = {s3, mc, m, e, 0, false, cw};
	int rc = list_all(s3, buf_cstr(&p), NULL, page_manifests, &ms, e);
	buf_free(&p);
	if (rc == 0)
		rc = ms.rc;
	if (rc < 0 || (m->committed == 0 && m->pending == 0)) {
		vis_manifest_free(m);
		free(m);
		return rc;
	}
	vis_manifest_finish(m);
	*out = m;
	return 0;
}

static int page_count_manifests(void *arg, const char *prefix,
				const s3_list_result *p)
{
	size_t *n = arg, plen = strlen(prefix);
	for (size_t i = 0; i < p->n_objects; i++) {
		const s3_object *o = &p->objects[i];
		if (o->key_len > plen && o->key_len == strlen(o->key) &&
		    proto_is_manifest_name(o->key + plen))
			(*n)++;
	}
	return 0;
}

/* Whether dir_prefix's .ckptfs/ holds no manifest now (a second look). */
static int manifests_gone(s3_client *s3, const char *dir_prefix, bool *gone,
			  s3_err *e)
{
	buf p = BUF_INIT;
	buf_printf(&p, "%s%s/", dir_prefix, PROTO_META_DIR);
	size_t n = 0;
	int rc = list_all(s3, buf_cstr(&p), NULL, page_count_manifests, &n, e);
	buf_free(&p);
	*gone = rc == 0 && n == 0;
	return rc;
}

/* ---- metadata hints (doc/commit.md, "Metadata hints") ----------------- */

static int page_hints(void *arg, const char *prefix, const s3_list_result *p)
{
	ns_dir *d = arg;
	size_t plen = strlen(prefix);
	for (size_t i = 0; i < p->n_objects; i++) {
		const s3_object *o = &p->objects[i];
		if (o->key_len > plen && o->key_len == strlen(o->key) &&
		    !strchr(o->key + plen, '/'))
			ns_dir_hint(d, o->key + plen);
	}
	return 0;
}

/* Marks the entries that D/.ckptfs-meta/ names: one LIST (paged), only
 * for a directory whose listing showed that prefix. */
static int read_hints(s3_client *s3, const char *dir_prefix, ns_dir *d,
		      s3_err *e)
{
	buf p = BUF_INIT;
	buf_printf(&p, "%s%s/", dir_prefix, PROTO_HINT_DIR);
	int rc = list_all(s3, buf_cstr(&p), NULL, page_hints, d, e);
	buf_free(&p);
	return rc;
}

int fs_listing_fetch(s3_client *s3, fs_mcache *mc, const char *dir_prefix,
		     bool hints, ns_report_fn report, void *arg, ns_dir *out,
		     vis_manifest **manifest, s3_err *e)
{
	*manifest = NULL;
	ns_dir_init(out, report, arg);
	int rc = list_all(s3, dir_prefix, "/", page_into_dir, out, e);
	if (rc == 0)
		ns_dir_finish(out);
	if (rc == 0 && out->saw_pending)
		rc = hide_pending(s3, mc, dir_prefix, out, e);
	if (rc == 0 && out->saw_pending)
		rc = relist_after_markers(s3, dir_prefix, out, e);
	struct writers cw = {0};
	if (rc == 0 && out->saw_meta)
		rc = load_manifests(s3, mc, dir_prefix, manifest, &cw, e);
	/* a ckptfs directory: its own markers and delete records decide
	 * whether it is there at all */
	bool hidden = false;
	bool misses = rc == 0 && *manifest && vis_listing_misses(out, *manifest);
	if (rc == 0 && *manifest)
		rc = own_marker_live(s3, dir_prefix, &cw, &hidden, e);
	writers_free(&cw);
	/* files missing and no marker: a delete (objects, then manifests,
	 * then its record) may have finished its last two steps between
	 * the LIST that saw some of its objects left and the marker LIST.
	 * Its manifests are gone then; manifests that stay (files deleted
	 * one by one, addenda naming checkpoints rotated away) leave what
	 * is listed */
	if (rc == 0 && misses && !hidden)
		rc = manifests_gone(s3, dir_prefix, &hidden, e);
	/* .ckptfs/ listed but its manifests gone: deleted meanwhile; or
	 * only pending ones: a transaction not committed yet, or abandoned
	 * by a writer that died (gc removes it): not there at all, never an
	 * empty directory */
	bool uncommitted = rc == 0 && *manifest && (*manifest)->committed == 0;
	if (rc == 0 &&
	    (hidden || uncommitted || (out->saw_meta && !*manifest))) {
		vis_hide_all(out);
		out->vanished = true;
	}
	if (rc == 0 && (out->seen == 0 || ns_dir_only_hints(out)))
		out->vanished = true;
	/* the files outside manifests that carry ckptfs metadata: after the
	 * filters, on the entries that are left */
	if (rc == 0 && hints && out->saw_hints && !out->vanished)
		rc = read_hints(s3, dir_prefix, out, e);
	if (rc < 0) {
		ns_dir_free(out);
		if (*manifest) {
			vis_manifest_free(*manifest);
			free(*manifest);
			*manifest = NULL;
		}
	}
	return rc;
}
