/*
 * vis: manifest parsing (jansson), marker parsing, and listing filters.
 * Pure functions; ops.c fetches the objects and applies the results.
 */
#include "fs/visibility.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "commit/protocol.h"
#include "util/buf.h"
#include "util/log.h"

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
		size_t nc = m->cap ? m->cap * 2 : 16;
		vis_file *nv = realloc(m->files, nc * sizeof *nv);
		if (!nv)
			return -1;
		m->files = nv;
		m->cap = nc;
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

static int push_dir(vis_manifest *m, json_t *d)
{
	const char *path = json_string_value(json_object_get(d, "path"));
	if (!path || !path_ok(path))
		return -1;
	if (m->n_dirs == m->cap_dirs) {
		size_t nc = m->cap_dirs ? m->cap_dirs * 2 : 8;
		char **nv = realloc(m->dirs, nc * sizeof *nv);
		if (!nv)
			return -1;
		m->dirs = nv;
		m->cap_dirs = nc;
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
		size_t before = m->n, dbefore = m->n_dirs;
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
		if (rc == 0 && json_is_array(dirs)) {
			json_array_foreach(dirs, i, f)
			{
				if (push_dir(m, f) < 0) {
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

int vis_parse_marker(const char *rel, char **child, unsigned *lease)
{
	const char *slash = strchr(rel, '/');
	if (!slash || slash == rel)
		return -1;
	const char *writer = slash + 1;
	const char *at = strrchr(writer, '@');
	if (!at || at == writer || strchr(writer, '/'))
		return -1;
	char *end;
	unsigned long l = strtoul(at + 1, &end, 10);
	if (!at[1] || *end || l == 0 || l > 86400)
		return -1;
	*child = strndup(rel, (size_t)(slash - rel));
	*lease = (unsigned)l;
	return *child ? 0 : -1;
}

bool vis_marker_live(time_t last_modified, unsigned lease, time_t now)
{
	return last_modified + (time_t)lease > now;
}

static void remove_at(ns_dir *d, size_t i)
{
	free(d->v[i].name);
	free(d->v[i].etag);
	memmove(&d->v[i], &d->v[i + 1], (d->n - i - 1) * sizeof *d->v);
	d->n--;
}

void vis_filter_listing(ns_dir *d, const vis_manifest *m, const char *rel)
{
	if (!m)
		return;
	buf p = BUF_INIT;
	for (size_t i = 0; i < d->n;) {
		buf_reset(&p);
		if (rel[0])
			buf_printf(&p, "%s/", rel);
		buf_puts(&p, d->v[i].name);
		bool keep = d->v[i].is_dir ? vis_manifest_has_dir(m, p.data)
					   : vis_manifest_find(m, p.data) != NULL;
		if (keep)
			i++;
		else
			remove_at(d, i);
	}
	buf_free(&p);
}

void vis_hide_names(ns_dir *d, char *const *hidden, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		for (size_t i = 0; i < d->n; i++) {
			if (!strcmp(d->v[i].name, hidden[k])) {
				remove_at(d, i);
				break;
			}
		}
	}
}

void vis_keep_listed(ns_dir *d, const ns_dir *again)
{
	for (size_t i = 0; i < d->n;) {
		if (ns_dir_find(again, d->v[i].name))
			i++;
		else
			remove_at(d, i);
	}
}

char *vis_own_markers_prefix(const char *dir_prefix)
{
	size_t n = strlen(dir_prefix);
	if (n < 2 || dir_prefix[n - 1] != '/')
		return NULL;
	size_t start = n - 1; /* the name: dir_prefix[start, n - 1) */
	while (start > 0 && dir_prefix[start - 1] != '/')
		start--;
	buf b = BUF_INIT;
	buf_printf(&b, "%.*s%s/%.*s/", (int)start, dir_prefix, VIS_PENDING_DIR,
		   (int)(n - 1 - start), dir_prefix + start);
	return buf_steal(&b);
}

void vis_hide_all(ns_dir *d)
{
	while (d->n)
		remove_at(d, d->n - 1);
}

bool vis_listing_misses(const ns_dir *d, const vis_manifest *m)
{
	char *name = NULL;
	size_t cap = 0;
	bool miss = false;
	const char *prev = NULL;
	size_t prev_len = 0;
	for (size_t i = 0; i < m->n && !miss; i++) {
		const char *p = m->files[i].path;
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		/* sorted: the files of one subdirectory come together */
		if (prev && len == prev_len && !strncmp(p, prev, len))
			continue;
		prev = p;
		prev_len = len;
		if (len + 1 > cap) {
			char *nn = realloc(name, len + 1);
			if (!nn)
				break;
			name = nn;
			cap = len + 1;
		}
		memcpy(name, p, len);
		name[len] = 0;
		miss = ns_dir_find(d, name) == NULL;
	}
	free(name);
	return miss;
}
