/*
 * proto/manifest: the manifest document written (proto_manifest_json) and
 * read (vis_manifest_*), with jansson (manifest.h).  Pure functions but
 * for one log_warn per document with malformed block lists.
 */
#include "proto/manifest.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "proto/crc.h"
#include "util/buf.h"
#include "util/log.h"
#include "util/vec.h"

/* ---- writer ------------------------------------------------------------ */

static int put_attrs(json_t *o, const proto_meta *m)
{
	if (!m)
		return 0;
	int rc = json_object_set_new(o, "mode", json_integer(m->mode)) |
		 json_object_set_new(o, "uid", json_integer(m->uid)) |
		 json_object_set_new(o, "gid", json_integer(m->gid)) |
		 json_object_set_new(o, "mtime", json_integer(m->mtime_ns));
	uint32_t t = proto_mode_type(m->mode);
	if (t == S_IFCHR || t == S_IFBLK)
		rc |= json_object_set_new(o, "rdev",
					  json_integer((json_int_t)m->rdev));
	if (m->symlink) {
		json_t *s = json_string(m->symlink);
		if (!s)
			return -1;
		rc |= json_object_set_new(o, "symlink", s);
	}
	if (m->xattrs_len) {
		json_t *x = proto_xattrs_json(m->xattrs, m->xattrs_len);
		rc |= x ? json_object_set_new(o, "xattrs", x) : -1;
	}
	return rc ? -1 : 0;
}

static json_t *manifest_head(const char *writer, uint64_t txn,
			     const char *state)
{
	return json_pack("{s:i,s:s,s:s,s:I}", "version", PROTO_FORMAT, "writer",
			 writer,
			 "state", state, "txn", (json_int_t)txn);
}

char *proto_manifest_json(const char *writer, uint64_t txn, int64_t time_ns,
			  const proto_mfile *f, size_t nf, const proto_mdir *d,
			  size_t nd)
{
	json_t *root = manifest_head(writer, txn, "committed");
	json_t *files = json_array(), *dirs = json_array();
	bool ok = root && files && dirs &&
		  !json_object_set_new(root, "time", json_integer(time_ns));
	char crc[9];
	for (size_t i = 0; ok && i < nf; i++) {
		json_t *p = json_string(f[i].path);
		json_t *o = p ? json_pack("{s:o,s:I,s:s}", "path", p, "size",
					  (json_int_t)f[i].size, "etag",
					  f[i].etag ? f[i].etag : "")
			      : NULL;
		if (o && f[i].has_crc) {
			snprintf(crc, sizeof crc, "%08" PRIx32, f[i].crc32c);
			json_object_set_new(o, "crc32c", json_string(crc));
		}
		if (o && proto_blocks_valid(f[i].blocks, f[i].size, f[i].block)) {
			json_object_set_new(o, "block", json_integer(f[i].block));
			json_object_set_new(o, "blocks",
					    json_string(f[i].blocks));
		}
		ok = o && !put_attrs(o, f[i].m) && !json_array_append_new(files, o);
	}
	for (size_t i = 0; ok && i < nd; i++) {
		if (!d[i].path[0]) { /* the root's own attributes */
			json_t *o = json_object();
			if (o && d[i].parent)
				json_object_set_new(o, "parent", json_true());
			ok = o && !put_attrs(o, d[i].m) &&
			     !json_object_set_new(root, "dir", o);
			continue;
		}
		json_t *p = json_string(d[i].path);
		json_t *o = p ? json_pack("{s:o}", "path", p) : NULL;
		if (o && d[i].parent)
			json_object_set_new(o, "parent", json_true());
		ok = o && !put_attrs(o, d[i].m) && !json_array_append_new(dirs, o);
	}
	char *s = NULL;
	if (ok) {
		json_object_set(root, "files", files);
		json_object_set(root, "dirs", dirs);
		s = json_dumps(root, JSON_COMPACT);
	}
	json_decref(files);
	json_decref(dirs);
	json_decref(root);
	return s;
}

char *proto_intent_json(const char *writer, uint64_t txn)
{
	json_t *root = manifest_head(writer, txn, "pending");
	char *s = root ? json_dumps(root, JSON_COMPACT) : NULL;
	json_decref(root);
	return s;
}

char *proto_manifest_with_from(const char *json, const char *from)
{
	json_t *root = json_loads(json, 0, NULL);
	char *s = NULL;
	if (json_is_object(root) &&
	    !json_object_set_new(root, "renamed_from", json_string(from)))
		s = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	return s;
}

int proto_manifest_renamed_from(const char *json, size_t len, char **from,
				char **writer)
{
	*from = *writer = NULL;
	json_t *root = json_loadb(json, len, 0, NULL);
	if (!root)
		return -1;
	const char *f = json_string_value(json_object_get(root, "renamed_from"));
	const char *w = json_string_value(json_object_get(root, "writer"));
	int rc = 0;
	if (f && w) {
		*from = strdup(f);
		*writer = strdup(w);
		rc = *from && *writer ? 1 : -1;
	}
	json_decref(root);
	return rc;
}

int proto_manifest_version(const char *json, size_t len)
{
	json_t *root = json_loadb(json, len, 0, NULL);
	json_t *v = json_object_get(root, "version");
	int n = json_is_integer(v) && json_integer_value(v) > 0 &&
			json_integer_value(v) < 1000
		    ? (int)json_integer_value(v)
		    : 1;
	json_decref(root);
	return n;
}

int proto_manifest_state(const char *json, size_t len, bool *committed,
			 uint64_t *txn)
{
	json_t *root = json_loadb(json, len, 0, NULL);
	const char *st = json_string_value(json_object_get(root, "state"));
	json_t *t = json_object_get(root, "txn");
	int rc = st && (!strcmp(st, "pending") || !strcmp(st, "committed"))
			 ? 0
			 : -1;
	*committed = rc == 0 && !strcmp(st, "committed");
	*txn = json_is_integer(t) && json_integer_value(t) > 0
		       ? (uint64_t)json_integer_value(t)
		       : 0;
	json_decref(root);
	return rc;
}

/* ---- reader ------------------------------------------------------------ */

void vis_manifest_init(vis_manifest *m)
{
	memset(m, 0, sizeof *m);
}

static void file_free(vis_file *f)
{
	free(f->path);
	free(f->etag);
	free(f->symlink);
	free(f->xattrs_json);
	free(f->blocks);
}

void vis_manifest_free(vis_manifest *m)
{
	for (size_t i = 0; i < m->n; i++)
		file_free(&m->files[i]);
	free(m->files);
	for (size_t i = 0; i < m->n_dirs; i++)
		free(m->dirs[i]);
	free(m->dirs);
	for (size_t i = 0; i < m->n_dattrs; i++)
		file_free(&m->dattrs[i]);
	free(m->dattrs);
	vis_manifest_init(m);
}

static char *errmsg(const char *what, const char *detail)
{
	buf b = BUF_INIT;
	buf_printf(&b, "manifest: %s%s%s", what, detail ? ": " : "",
		   detail ? detail : "");
	return buf_steal(&b);
}

static bool path_ok(const char *p)
{
	/* relative, no empty, "." or ".." components */
	if (!p[0] || p[0] == '/')
		return false;
	for (const char *c = p; *c;) {
		const char *slash = strchr(c, '/');
		size_t len = slash ? (size_t)(slash - c) : strlen(c);
		if (len == 0 || (len == 1 && c[0] == '.') ||
		    (len == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		if (!slash)
			break;
		c = slash + 1;
	}
	return p[strlen(p) - 1] != '/';
}

static bool uint32_of(json_t *j, uint32_t *out)
{
	if (!json_is_integer(j) || json_integer_value(j) < 0 ||
	    json_integer_value(j) > UINT32_MAX)
		return false;
	*out = (uint32_t)json_integer_value(j);
	return true;
}

/* mode, uid, gid, mtime (all four, or none counts), symlink, xattrs */
static void attrs_of(vis_file *v, json_t *f)
{
	json_t *mt = json_object_get(f, "mtime");
	v->has_attrs = uint32_of(json_object_get(f, "mode"), &v->mode) &&
		       uint32_of(json_object_get(f, "uid"), &v->uid) &&
		       uint32_of(json_object_get(f, "gid"), &v->gid) &&
		       json_is_integer(mt);
	if (v->has_attrs)
		v->mtime_ns = (int64_t)json_integer_value(mt);
	json_t *rd = json_object_get(f, "rdev");
	v->rdev = json_is_integer(rd) && json_integer_value(rd) >= 0
			  ? (uint64_t)json_integer_value(rd)
			  : 0;
	const char *sl = json_string_value(json_object_get(f, "symlink"));
	v->symlink = sl ? strdup(sl) : NULL;
	json_t *x = json_object_get(f, "xattrs");
	v->xattrs_json = json_is_object(x) && json_object_size(x)
			     ? json_dumps(x, JSON_COMPACT)
			     : NULL;
}

/* "block" and "blocks", when both are there and fit the size; false when
 * a list is there but malformed (ignored: the file shows unverified). */
static bool blocks_of(vis_file *v, json_t *f)
{
	json_t *jb = json_object_get(f, "block");
	json_t *jl = json_object_get(f, "blocks");
	if (!jb && !jl)
		return true;
	const char *hex = json_string_value(jl);
	json_int_t b = json_is_integer(jb) ? json_integer_value(jb) : 0;
	if (!hex || b < PROTO_BLOCK_MIN || b > PROTO_BLOCK_MAX ||
	    !proto_blocks_valid(hex, v->size, (uint32_t)b))
		return false;
	v->block = (uint32_t)b;
	v->blocks = strdup(hex);
	return true;
}

static int push_file(vis_manifest *m, json_t *f, int64_t time,
		     size_t *bad_blocks, const char **first_bad)
{
	const char *path = json_string_value(json_object_get(f, "path"));
	json_t *size = json_object_get(f, "size");
	const char *etag = json_string_value(json_object_get(f, "etag"));
	const char *crc = json_string_value(json_object_get(f, "crc32c"));
	if (!path || !path_ok(path) || !json_is_integer(size) ||
	    json_integer_value(size) < 0)
		return -1;
	if (m->n == m->cap) {
		vis_file *nv = vec_grow(m->files, &m->cap, sizeof *nv, 16);
		if (!nv)
			return -1;
		m->files = nv;
	}
	vis_file *v = &m->files[m->n];
	memset(v, 0, sizeof *v);
	v->path = strdup(path);
	v->etag = etag ? strdup(etag) : NULL;
	v->size = (uint64_t)json_integer_value(size);
	v->time = time;
	v->order = m->added++;
	attrs_of(v, f);
	if (crc) {
		char *end;
		unsigned long x = strtoul(crc, &end, 16);
		v->has_crc = *crc && !*end;
		v->crc32c = (uint32_t)x;
	}
	if (!blocks_of(v, f) && (*bad_blocks)++ == 0)
		*first_bad = path;
	if (!v->path) {
		file_free(v);
		return -1;
	}
	m->n++;
	return 0;
}

static int push_dir(vis_manifest *m, json_t *d, int64_t time)
{
	const char *path = json_string_value(json_object_get(d, "path"));
	bool root = !path && json_object_get(d, "path") == NULL;
	if (root)
		path = ""; /* "dir": the root's own attributes */
	else if (!path || !path_ok(path))
		return -1;
	vis_file a;
	memset(&a, 0, sizeof a);
	attrs_of(&a, d);
	free(a.symlink);
	if (!a.has_attrs)
		free(a.xattrs_json);
	if (a.has_attrs) {
		if (m->n_dattrs == m->cap_dattrs) {
			vis_file *nv = vec_grow(m->dattrs, &m->cap_dattrs,
						sizeof *nv, 8);
			if (!nv) {
				free(a.xattrs_json);
				return -1;
			}
			m->dattrs = nv;
		}
		vis_file *v = &m->dattrs[m->n_dattrs];
		*v = (vis_file){.path = strdup(path),
				.has_attrs = true,
				.mode = a.mode,
				.uid = a.uid,
				.gid = a.gid,
				.mtime_ns = a.mtime_ns,
				.xattrs_json = a.xattrs_json,
				.parent = json_is_true(json_object_get(d, "parent")),
				.time = time,
				.order = m->added++};
		m->n_dattrs++; /* freed with the others */
		if (!v->path)
			return -1;
	}
	if (root)
		return 0;
	if (m->n_dirs == m->cap_dirs) {
		char **nv = vec_grow(m->dirs, &m->cap_dirs, sizeof *nv, 8);
		if (!nv)
			return -1;
		m->dirs = nv;
	}
	if (!(m->dirs[m->n_dirs] = strdup(path)))
		return -1;
	m->n_dirs++;
	return 0;
}

int vis_manifest_add_json(vis_manifest *m, const char *json, size_t len,
			  char **err)
{
	json_error_t je;
	json_t *root = json_loadb(json, len, 0, &je);
	if (!root) {
		if (err)
			*err = errmsg("not JSON", je.text);
		return -1;
	}
	const char *state = json_string_value(json_object_get(root, "state"));
	json_t *files = json_object_get(root, "files");
	int rc = 0;
	if (!json_is_object(root) || !state ||
	    (strcmp(state, "pending") && strcmp(state, "committed"))) {
		if (err)
			*err = errmsg("no valid \"state\"", NULL);
		rc = -1;
	} else if (!strcmp(state, "pending")) {
		m->pending++;
	} else if (!json_is_array(files)) {
		if (err)
			*err = errmsg("committed without \"files\"", NULL);
		rc = -1;
	} else {
		size_t before = m->n, dbefore = m->n_dirs, abefore = m->n_dattrs;
		size_t i;
		json_t *f;
		json_t *tm = json_object_get(root, "time");
		int64_t time = json_is_integer(tm) ? json_integer_value(tm) : 0;
		json_t *dirs = json_object_get(root, "dirs");
		size_t bad_blocks = 0;
		const char *first_bad = NULL;
		json_array_foreach(files, i, f)
		{
			if (push_file(m, f, time, &bad_blocks, &first_bad) < 0) {
				rc = -1;
				break;
			}
		}
		if (rc == 0 && bad_blocks) {
			const char *w =
			    json_string_value(json_object_get(root, "writer"));
			log_warn("manifest of writer %s: malformed block "
				 "checksums of %zu file(s) (first: %s) "
				 "ignored; their reads are not checked against "
				 "the manifest",
				 w ? w : "?", bad_blocks, first_bad);
		}
		json_t *rootdir = json_object_get(root, "dir");
		if (rc == 0 && json_is_object(rootdir) &&
		    push_dir(m, rootdir, time) < 0)
			rc = -1;
		if (rc == 0 && json_is_array(dirs)) {
			json_array_foreach(dirs, i, f)
			{
				if (push_dir(m, f, time) < 0) {
					rc = -1;
					break;
				}
			}
		}
		if (rc < 0) { /* all or nothing */
			while (m->n > before)
				file_free(&m->files[--m->n]);
			while (m->n_dirs > dbefore)
				free(m->dirs[--m->n_dirs]);
			while (m->n_dattrs > abefore)
				file_free(&m->dattrs[--m->n_dattrs]);
			if (err)
				*err = errmsg("bad entry in \"files\" or "
					      "\"dirs\"",
					      NULL);
		} else {
			m->committed++;
		}
	}
	json_decref(root);
	return rc;
}

/* Paths first; for one path the winner of the time rule first: greatest
 * time, then the one added last. */
static int file_cmp(const void *a, const void *b)
{
	const vis_file *x = a, *y = b;
	int c = strcmp(x->path, y->path);
	if (c)
		return c;
	if (x->time != y->time)
		return x->time > y->time ? -1 : 1;
	return x->order > y->order ? -1 : x->order < y->order;
}

/* Whether two records of a directory hold the same attributes. */
static bool same_dir_attrs(const vis_file *a, const vis_file *b)
{
	return a->mode == b->mode && a->uid == b->uid && a->gid == b->gid &&
	       a->mtime_ns == b->mtime_ns && !a->xattrs_json == !b->xattrs_json &&
	       (!a->xattrs_json || !strcmp(a->xattrs_json, b->xattrs_json));
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void vis_manifest_finish(vis_manifest *m)
{
	if (m->n)
		qsort(m->files, m->n, sizeof *m->files, file_cmp);
	size_t w = 0;
	for (size_t i = 0; i < m->n; i++) {
		if (w && !strcmp(m->files[w - 1].path, m->files[i].path)) {
			file_free(&m->files[i]); /* the time rule's loser */
			continue;
		}
		m->files[w++] = m->files[i];
	}
	m->n = w;
	if (m->n_dirs)
		qsort(m->dirs, m->n_dirs, sizeof *m->dirs, str_cmp);
	w = 0;
	for (size_t i = 0; i < m->n_dirs; i++) {
		if (w && !strcmp(m->dirs[w - 1], m->dirs[i])) {
			free(m->dirs[i]);
			continue;
		}
		m->dirs[w++] = m->dirs[i];
	}
	m->n_dirs = w;
	if (m->n_dattrs)
		qsort(m->dattrs, m->n_dattrs, sizeof *m->dattrs, file_cmp);
	w = 0;
	/* the winner's run of equal records goes on (through parents) */
	bool run = false;
	for (size_t i = 0; i < m->n_dattrs; i++) {
		vis_file *v = &m->dattrs[i];
		if (w && !strcmp(m->dattrs[w - 1].path, v->path)) {
			vis_file *win = &m->dattrs[w - 1];
			if (run && (run = same_dir_attrs(win, v)))
				win->since = v->time;
			run = run && v->parent;
			file_free(v);
			continue;
		}
		v->since = v->time;
		run = v->parent;
		m->dattrs[w++] = *v;
	}
	m->n_dattrs = w;
}

const vis_file *vis_manifest_dir(const vis_manifest *m, const char *path)
{
	size_t lo = 0, hi = m->n_dattrs;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(m->dattrs[mid].path, path);
		if (!c)
			return &m->dattrs[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* First index whose path is >= key. */
static size_t lower_bound(const vis_manifest *m, const char *key)
{
	size_t lo = 0, hi = m->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(m->files[mid].path, key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

const vis_file *vis_manifest_find(const vis_manifest *m, const char *path)
{
	size_t i = lower_bound(m, path);
	return i < m->n && !strcmp(m->files[i].path, path) ? &m->files[i]
							    : NULL;
}

int vis_file_blocks(const vis_file *v, uint32_t **crc, size_t *n)
{
	*crc = NULL;
	*n = 0;
	if (!v->blocks || !v->block)
		return -1;
	uint64_t nb = proto_block_count(v->size, v->block);
	uint32_t *c = malloc((size_t)(nb ? nb : 1) * sizeof *c);
	if (!c || proto_blocks_decode(v->blocks, (size_t)nb, c) < 0) {
		free(c);
		return -1;
	}
	*crc = c;
	*n = (size_t)nb;
	return 0;
}

/* First index of dirs whose path is >= key. */
static size_t dirs_lower_bound(const vis_manifest *m, const char *key)
{
	size_t lo = 0, hi = m->n_dirs;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(m->dirs[mid], key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

bool vis_manifest_has_dir(const vis_manifest *m, const char *rel)
{
	if (!rel[0])
		return m->n > 0 || m->n_dirs > 0;
	size_t d = dirs_lower_bound(m, rel);
	if (d < m->n_dirs && !strcmp(m->dirs[d], rel))
		return true;
	buf b = BUF_INIT;
	buf_printf(&b, "%s/", rel);
	size_t i = lower_bound(m, buf_cstr(&b));
	bool has = i < m->n && !strncmp(m->files[i].path, b.data, b.len);
	d = dirs_lower_bound(m, b.data);
	has = has || (d < m->n_dirs && !strncmp(m->dirs[d], b.data, b.len));
	buf_free(&b);
	return has;
}

void vis_file_meta(const vis_file *v, proto_meta *m)
{
	memset(m, 0, sizeof *m);
	m->mode = v->has_attrs ? v->mode : 0644;
	m->uid = v->uid;
	m->gid = v->gid;
	m->mtime_ns = v->mtime_ns;
	m->rdev = v->rdev;
	m->symlink = v->symlink ? strdup(v->symlink) : NULL;
	buf b = BUF_INIT;
	proto_xattrs_decode(v->xattrs_json, &b);
	m->xattrs_len = b.len;
	m->xattrs = buf_steal(&b);
}
