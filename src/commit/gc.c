/*
 * gc: the decisions of `ckptfs gc` as pure functions (see gc.h).
 */
#include "commit/gc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "proto/keys.h"
#include "proto/manifest.h"
#include "proto/visibility.h"
#include "util/buf.h"
#include "util/vec.h"

#define PENDING_COMP PROTO_PENDING_DIR "/"
#define META_COMP PROTO_META_DIR "/"

/* ---- keys ------------------------------------------------------------- */

/* Start of the last component `comp` ("x/") of key, or NULL. */
static const char *find_comp(const char *key, const char *comp)
{
	size_t cl = strlen(comp);
	const char *found = NULL;
	for (const char *p = key; *p;) {
		if (!strncmp(p, comp, cl))
			found = p;
		const char *slash = strchr(p, '/');
		if (!slash)
			break;
		p = slash + 1;
	}
	return found;
}

bool gc_is_gone_key(const char *key)
{
	const char *pd = find_comp(key, PENDING_COMP);
	return pd && vis_marker_is_gone(pd + strlen(PENDING_COMP));
}

int gc_parse_marker_key(const char *key, char **root, char **writer,
			unsigned *lease)
{
	const char *pd = find_comp(key, PENDING_COMP);
	if (!pd)
		return -1;
	char *child = NULL;
	unsigned l;
	if (vis_parse_marker(pd + strlen(PENDING_COMP), &child, &l) < 0)
		return -1;
	const char *w = strchr(pd + strlen(PENDING_COMP), '/') + 1;
	const char *at = strrchr(w, '@');
	buf r = BUF_INIT;
	buf_printf(&r, "%.*s%s/", (int)(pd - key), key, child);
	free(child);
	*writer = strndup(w, (size_t)(at - w));
	*root = buf_steal(&r);
	*lease = l;
	if (!*writer || !*root) {
		free(*writer);
		free(*root);
		return -1;
	}
	return 0;
}

/* The directory ("" or "a/b/") whose .ckptfs/ holds manifest key, or NULL
 * when key is not a manifest.  *name: the manifest's file name. */
static char *manifest_dir(const char *key, const char **name)
{
	const char *md = find_comp(key, META_COMP);
	if (!md || (md != key && md[-1] != '/'))
		return NULL;
	const char *n = md + strlen(META_COMP);
	if (!proto_is_manifest_name(n))
		return NULL;
	*name = n;
	return strndup(key, (size_t)(md - key));
}

static bool has_prefix(const char *s, const char *pfx)
{
	return !strncmp(s, pfx, strlen(pfx));
}

/* Directories a and b (each "" or ending in '/') on one branch. */
static bool overlap(const char *a, const char *b)
{
	return has_prefix(a, b) || has_prefix(b, a);
}

/* Whether the part of key after root has a ckptfs-internal component. */
static bool internal_below(const char *key, const char *root)
{
	for (const char *p = key + strlen(root); *p;) {
		if (!strncmp(p, PROTO_RESERVED, strlen(PROTO_RESERVED)))
			return true;
		const char *slash = strchr(p, '/');
		if (!slash)
			break;
		p = slash + 1;
	}
	return false;
}

/* ---- string sets ------------------------------------------------------ */

typedef struct strv {
	char **v;
	size_t n, cap;
} strv;

static int strv_push(strv *s, char *x)
{
	if (!x)
		return -1;
	if (s->n == s->cap) {
		char **nv = vec_grow(s->v, &s->cap, sizeof *nv, 16);
		if (!nv) {
			free(x);
			return -1;
		}
		s->v = nv;
	}
	s->v[s->n++] = x;
	return 0;
}

static void strv_free(strv *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	memset(s, 0, sizeof *s);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void strv_sort_unique(strv *s)
{
	if (s->n)
		qsort(s->v, s->n, sizeof *s->v, cmp_str);
	size_t w = 0;
	for (size_t i = 0; i < s->n; i++) {
		if (w && !strcmp(s->v[w - 1], s->v[i])) {
			free(s->v[i]);
			continue;
		}
		s->v[w++] = s->v[i];
	}
	s->n = w;
}

static bool strv_has(const strv *s, const char *x)
{
	return s->n && bsearch(&x, s->v, s->n, sizeof *s->v, cmp_str);
}

/* ---- markers ------------------------------------------------------------ */

typedef struct marker {
	const char *key;
	char *root, *writer;
	bool live;
	bool gone; /* a delete record (proto_gone_key): never live */
	time_t mtime, expires;
} marker;

static int cmp_marker(const void *a, const void *b)
{
	const marker *x = a, *y = b;
	int c = strcmp(x->root, y->root);
	return c ? c : strcmp(x->key, y->key);
}

static void markers_free(marker *m, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(m[i].root);
		free(m[i].writer);
	}
	free(m);
}

/* Every marker of the listing, sorted by root. */
static int collect_markers(const gc_object *objs, size_t n, time_t now,
			   marker **out, size_t *n_out)
{
	marker *v = NULL;
	size_t k = 0, cap = 0;
	for (size_t i = 0; i < n; i++) {
		char *root, *writer;
		unsigned lease;
		if (gc_parse_marker_key(objs[i].key, &root, &writer, &lease) < 0)
			continue;
		if (k == cap) {
			marker *nv = vec_grow(v, &cap, sizeof *nv, 16);
			if (!nv) {
				free(root);
				free(writer);
				markers_free(v, k);
				return -1;
			}
			v = nv;
		}
		bool gone = gc_is_gone_key(objs[i].key);
		v[k++] = (marker){objs[i].key, root, writer,
				  !gone && vis_marker_live(objs[i].mtime, lease,
							   now),
				  gone, objs[i].mtime,
				  objs[i].mtime + (time_t)lease};
	}
	if (k)
		qsort(v, k, sizeof *v, cmp_marker);
	*out = v;
	*n_out = k;
	return 0;
}

static bool live_overlaps(const marker *m, size_t n, const char *root)
{
	for (size_t i = 0; i < n; i++)
		if (m[i].live && overlap(m[i].root, root))
			return true;
	return false;
}

/* Roots with an expired marker and no live marker on their branch (an
 * unfinished delete needs no manifest: everything under it goes). */
static bool root_collectable(const marker *m, size_t n, size_t i)
{
	return !m[i].live && !m[i].gone && !live_overlaps(m, n, m[i].root);
}

int gc_manifests_needed(const gc_object *objs, size_t n, time_t now,
			size_t **idx, size_t *n_idx)
{
	marker *m;
	size_t nm;
	*idx = NULL;
	*n_idx = 0;
	if (collect_markers(objs, n, now, &m, &nm) < 0)
		return -1;
	strv roots = {0};
	int rc = 0;
	for (size_t i = 0; i < nm && rc == 0; i++)
		if (root_collectable(m, nm, i))
			rc = strv_push(&roots, strdup(m[i].root));
	markers_free(m, nm);
	strv_sort_unique(&roots);
	size_t *v = NULL;
	size_t k = 0, vcap = 0;
	for (size_t i = 0; i < n && rc == 0 && roots.n; i++) {
		const char *name;
		char *dir = manifest_dir(objs[i].key, &name);
		if (!dir)
			continue;
		bool want = false;
		for (size_t r = 0; r < roots.n && !want; r++)
			want = overlap(dir, roots.v[r]);
		free(dir);
		if (!want)
			continue;
		if (k == vcap) {
			size_t *nv = vec_grow(v, &vcap, sizeof *nv, 16);
			if (!nv) {
				rc = -1;
				break;
			}
			v = nv;
		}
		v[k++] = i;
	}
	strv_free(&roots);
	if (rc < 0) {
		free(v);
		return -1;
	}
	*idx = v;
	*n_idx = k;
	return 0;
}

/* ---- the plan ----------------------------------------------------------- */

typedef struct parsed_doc {
	const char *key;
	char *dir;
	const char *name;
	int state; /* 0 unreadable, 1 pending, 2 committed */
	vis_manifest m; /* m.dirs: "dirs" of a committed manifest */
	bool planned; /* already in the plan's deletions */
} parsed_doc;

/* Whether some committed manifest lives in dir's .ckptfs/. */
static bool committed_at(const parsed_doc *docs, size_t n, const char *dir)
{
	for (size_t i = 0; i < n; i++)
		if (docs[i].dir && docs[i].state == 2 &&
		    !strcmp(docs[i].dir, dir))
			return true;
	return false;
}

static void parse_doc(parsed_doc *d, const gc_doc *g)
{
	memset(d, 0, sizeof *d);
	d->key = g->key;
	d->dir = manifest_dir(g->key, &d->name);
	vis_manifest_init(&d->m);
	if (!d->dir)
		return;
	if (vis_manifest_add_json(&d->m, g->body, g->len, NULL) < 0)
		return;
	d->state = d->m.committed ? 2 : d->m.pending ? 1 : 0;
}

static int push_del(gc_plan *p, size_t *cap, const char *key, gc_kind kind,
		    uint64_t size, size_t txn)
{
	if (p->n_del == *cap) {
		gc_delete *nv = vec_grow(p->del, cap, sizeof *nv, 32);
		if (!nv)
			return -1;
		p->del = nv;
	}
	char *k = strdup(key);
	if (!k)
		return -1;
	p->del[p->n_del++] = (gc_delete){k, kind, size, txn};
	return 0;
}

/* why + arg (may be NULL), malloc'd */
static char *msg(const char *why, const char *arg)
{
	buf b = BUF_INIT;
	buf_printf(&b, "%s%s", why, arg ? arg : "");
	return buf_steal(&b);
}

/* Plans root t (markers m[first..last) share it). */
static int plan_root(gc_plan *p, size_t *dcap, size_t ti,
		     const gc_object *objs, size_t n, parsed_doc *docs,
		     size_t n_docs, const marker *m, size_t first, size_t last,
		     const strv *live_writers)
{
	gc_txn *t = &p->txns[ti];
	/* the committed files that lie under the root, by key */
	strv keep = {0};
	bool covered = false;
	int rc = 0;
	for (size_t d = 0; d < n_docs && rc == 0; d++) {
		parsed_doc *pd = &docs[d];
		if (!pd->dir || !overlap(pd->dir, t->root))
			continue;
		if (pd->state == 0) {
			t->skip = msg("cannot read its manifest ", pd->key);
			strv_free(&keep);
			return t->skip ? 0 : -1;
		}
		if (pd->state != 2)
			continue;
		for (size_t f = 0; f < pd->m.n && rc == 0; f++) {
			buf k = BUF_INIT;
			buf_printf(&k, "%s%s", pd->dir, pd->m.files[f].path);
			if (has_prefix(buf_cstr(&k), t->root))
				covered = true;
			rc = strv_push(&keep, buf_steal(&k));
		}
		/* directories a committed manifest keeps (empty ones: their
		 * "name/" marker objects are part of the commit) */
		for (size_t f = 0; f < pd->m.n_dirs && rc == 0; f++) {
			buf k = BUF_INIT;
			buf_printf(&k, "%s%s/", pd->dir, pd->m.dirs[f]);
			rc = strv_push(&keep, buf_steal(&k));
		}
	}
	strv_sort_unique(&keep);
	/* 1. stray objects */
	for (size_t i = 0; i < n && rc == 0; i++) {
		const char *k = objs[i].key;
		if (!has_prefix(k, t->root) || internal_below(k, t->root) ||
		    strv_has(&keep, k))
			continue;
		if (k[strlen(k) - 1] == '/' && covered)
			continue; /* a directory marker of committed files */
		rc = push_del(p, dcap, k, GC_OBJECT, objs[i].size, ti);
	}
	strv_free(&keep);
	/* 2. pending manifests of the expired writers: at the root, and
	 * addenda (manifest.W.N.json) in a committed directory above it when
	 * W holds no live marker anywhere (a live W may own them) */
	for (size_t d = 0; d < n_docs && rc == 0; d++) {
		parsed_doc *pd = &docs[d];
		if (!pd->dir || pd->state != 1 || pd->planned)
			continue;
		bool at_root = !strcmp(pd->dir, t->root);
		if (!at_root && !(has_prefix(t->root, pd->dir) &&
				  committed_at(docs, n_docs, pd->dir)))
			continue;
		bool ours = false;
		for (size_t w = 0; w < t->n_writers && !ours; w++)
			ours = proto_manifest_of(pd->name, t->writers[w]) &&
			       (at_root ||
				(strcmp(pd->name + 9 + strlen(t->writers[w]),
					".json") &&
				 !strv_has(live_writers, t->writers[w])));
		if (ours) {
			pd->planned = true;
			rc = push_del(p, dcap, pd->key, GC_MANIFEST, 0, ti);
		}
	}
	/* 3. the markers */
	for (size_t i = first; i < last && rc == 0; i++)
		rc = push_del(p, dcap, m[i].key, GC_MARKER, 0, ti);
	return rc;
}

/*
 * An unfinished delete of root t (a delete record among m[first..last)):
 * every key under it written before the newest record goes, its objects
 * first, then ckptfs' own keys (manifests, hints, markers of directories
 * inside), then the root's markers and records: the order of the writer's
 * own delete (commit/steps.c), so a gc that stops half-way leaves what the
 * next one finishes.  Keys written after the record belong to a new
 * transaction of the same name and stay.
 */
static int plan_gone(gc_plan *p, size_t *dcap, size_t ti,
		     const gc_object *objs, size_t n, const marker *m,
		     size_t first, size_t last)
{
	const gc_txn *t = &p->txns[ti];
	int rc = 0;
	for (int pass = 0; pass < 2 && rc == 0; pass++)
		for (size_t i = 0; i < n && rc == 0; i++) {
			const char *k = objs[i].key;
			if (!has_prefix(k, t->root) || objs[i].mtime > t->gone_at ||
			    internal_below(k, t->root) != (pass == 1))
				continue;
			rc = push_del(p, dcap, k, pass ? GC_MANIFEST : GC_OBJECT,
				      objs[i].size, ti);
		}
	for (size_t i = first; i < last && rc == 0; i++)
		if (!m[i].live)
			rc = push_del(p, dcap, m[i].key, GC_MARKER, 0, ti);
	return rc;
}

/*
 * Format 1 (ckptfs before delete records, doc/commit.md "Format
 * versions") deleted a committed directory by PUTting an ordinary marker
 * W@lease on it, then deleting its objects, its manifests and the marker.
 * A writer that died in between left an expired marker whose writer has no
 * manifest at the root (a format-1 or format-2 transaction PUTs its intent
 * with its marker; a format-2 rename PUTs one at its new name), beside
 * committed manifests some of whose files are gone.  Rolling back is
 * impossible (the objects are gone), so such a root is finished as a
 * delete: everything under it not newer than its newest marker goes
 * (plan_gone).  Nothing missing (killed before its first DeleteObjects):
 * the checkpoint is whole, and plan_root only drops the marker.
 */
static bool v1_delete_left(const gc_object *objs, size_t n,
			   const parsed_doc *docs, size_t n_docs,
			   const marker *m, size_t first, size_t last,
			   const char *root)
{
	bool committed = false;
	for (size_t d = 0; d < n_docs; d++) {
		const parsed_doc *pd = &docs[d];
		if (!pd->dir || strcmp(pd->dir, root))
			continue;
		for (size_t i = first; i < last; i++)
			if (proto_manifest_of(pd->name, m[i].writer))
				return false; /* a transaction of its own */
		committed |= pd->state == 2;
	}
	if (!committed)
		return false;
	strv have = {0};
	for (size_t i = 0; i < n; i++)
		if (has_prefix(objs[i].key, root) &&
		    strv_push(&have, strdup(objs[i].key)) < 0) {
			strv_free(&have);
			return false;
		}
	strv_sort_unique(&have);
	bool missing = false;
	for (size_t d = 0; d < n_docs && !missing; d++) {
		const parsed_doc *pd = &docs[d];
		if (!pd->dir || strcmp(pd->dir, root) || pd->state != 2)
			continue;
		for (size_t f = 0; f < pd->m.n && !missing; f++) {
			buf k = BUF_INIT;
			buf_printf(&k, "%s%s", pd->dir, pd->m.files[f].path);
			missing = k.data && !strv_has(&have, buf_cstr(&k));
			buf_free(&k);
		}
	}
	strv_free(&have);
	return missing;
}

static int add_txn(gc_plan *p, const marker *m, size_t first, size_t last)
{
	if (p->n_txns == p->cap_txns) {
		gc_txn *nv = vec_grow(p->txns, &p->cap_txns, sizeof *nv, 16);
		if (!nv)
			return -1;
		p->txns = nv;
	}
	gc_txn *t = &p->txns[p->n_txns++];
	memset(t, 0, sizeof *t);
	t->root = strdup(m[first].root);
	const char *pd = find_comp(m[first].key, PENDING_COMP);
	const char *slash = strchr(pd + strlen(PENDING_COMP), '/');
	t->pending_dir = strndup(m[first].key,
				 (size_t)(slash - m[first].key) + 1);
	t->writers = calloc(last - first, sizeof *t->writers);
	if (!t->root || !t->pending_dir || !t->writers)
		return -1;
	for (size_t i = first; i < last; i++) {
		if (!(t->writers[t->n_writers++] = strdup(m[i].writer)))
			return -1;
		if (m[i].gone && m[i].mtime >= t->gone_at) {
			t->gone = true;
			t->gone_at = m[i].mtime;
		} else if (!m[i].gone && m[i].expires > t->expired_at) {
			t->expired_at = m[i].expires;
		}
	}
	return 0;
}

int gc_make_plan(const gc_object *objs, size_t n, time_t now,
		 const gc_doc *docs, size_t n_docs, gc_plan *out)
{
	memset(out, 0, sizeof *out);
	marker *m;
	size_t nm;
	if (collect_markers(objs, n, now, &m, &nm) < 0)
		return -1;
	parsed_doc *pd = calloc(n_docs ? n_docs : 1, sizeof *pd);
	int rc = pd ? 0 : -1;
	for (size_t d = 0; d < n_docs && rc == 0; d++)
		parse_doc(&pd[d], &docs[d]);
	strv live = {0}, live_writers = {0};
	for (size_t i = 0; i < nm && rc == 0; i++)
		if (m[i].live)
			rc = strv_push(&live, strdup(m[i].root)) < 0 ||
					     strv_push(&live_writers,
						       strdup(m[i].writer)) < 0
				     ? -1
				     : 0;
	strv_sort_unique(&live);
	strv_sort_unique(&live_writers);
	out->live_roots = live.v;
	out->n_live = live.n;
	size_t dcap = 0;
	for (size_t i = 0; i < nm && rc == 0;) {
		size_t j = i;
		bool any_live = false, any_gone = false;
		while (j < nm && !strcmp(m[j].root, m[i].root)) {
			any_gone |= m[j].gone;
			any_live |= m[j++].live;
		}
		if (any_gone) {
			/* a delete past its commit point: finished whoever
			 * holds the name now */
			rc = add_txn(out, m, i, j);
			if (rc == 0)
				rc = plan_gone(out, &dcap, out->n_txns - 1, objs,
					       n, m, i, j);
		} else if (!any_live) {
			rc = add_txn(out, m, i, j);
			size_t ti = out->n_txns - 1;
			if (rc == 0 && live_overlaps(m, nm, m[i].root))
				out->txns[ti].skip = msg(
					"a live writer holds it or a "
					"directory above or below it",
					NULL);
			if (rc == 0 && out->txns[ti].skip == NULL &&
			    v1_delete_left(objs, n, pd, n_docs, m, i, j,
					   m[i].root)) {
				/* finished as a delete record would be */
				gc_txn *t = &out->txns[ti];
				t->gone = true;
				for (size_t k = i; k < j; k++)
					if (m[k].mtime > t->gone_at)
						t->gone_at = m[k].mtime;
				rc = plan_gone(out, &dcap, ti, objs, n, m, i, j);
			} else if (rc == 0 && out->txns[ti].skip == NULL)
				rc = plan_root(out, &dcap, ti, objs, n, pd,
					       n_docs, m, i, j, &live_writers);
		}
		i = j;
	}
	for (size_t d = 0; pd && d < n_docs; d++) {
		free(pd[d].dir);
		vis_manifest_free(&pd[d].m);
	}
	strv_free(&live_writers);
	free(pd);
	markers_free(m, nm);
	if (rc < 0)
		gc_plan_free(out);
	return rc;
}

void gc_plan_free(gc_plan *p)
{
	for (size_t i = 0; i < p->n_txns; i++) {
		gc_txn *t = &p->txns[i];
		free(t->root);
		free(t->pending_dir);
		for (size_t w = 0; w < t->n_writers; w++)
			free(t->writers[w]);
		free(t->writers);
		free(t->skip);
	}
	free(p->txns);
	for (size_t i = 0; i < p->n_del; i++)
		free(p->del[i].key);
	free(p->del);
	for (size_t i = 0; i < p->n_live; i++)
		free(p->live_roots[i]);
	free(p->live_roots);
	memset(p, 0, sizeof *p);
}

bool gc_in_live_root(const gc_plan *p, const char *key)
{
	for (size_t i = 0; i < p->n_live; i++)
		if (has_prefix(key, p->live_roots[i]))
			return true;
	return false;
}

bool gc_upload_expired(time_t initiated, time_t now, double older_than)
{
	return (double)(now - initiated) > older_than;
}

int gc_parse_duration(const char *s, double *seconds)
{
	size_t digits = s ? strspn(s, "0123456789.") : 0;
	if (!digits)
		return -1;
	char *end;
	double v = strtod(s, &end);
	if (end != s + digits || !isfinite(v) || v < 0)
		return -1;
	double mul = 1;
	switch (*end) {
	case '\0': break;
	case 's': mul = 1; end++; break;
	case 'm': mul = 60; end++; break;
	case 'h': mul = 3600; end++; break;
	case 'd': mul = 86400; end++; break;
	default: return -1;
	}
	if (*end)
		return -1;
	*seconds = v * mul;
	return 0;
}
