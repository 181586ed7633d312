/*
 * ctl request prefetch: fetches what the mount shows into the read cache.
 * It reads directories through the mount's listing path
 * (fs_listing_fetch: the namespace rules, children of live pending
 * markers hidden, transaction roots' manifests) and filters them by the
 * manifests of the nearest transaction root, as the mount's lookups do
 * (fs/nodes.c), so files of pending transactions are never downloaded.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl/internal.h"
#include "fs/listing.h"
#include "proto/complete.h"
#include "proto/keys.h"
#include "proto/namespace.h"
#include "proto/visibility.h"
#include "util/buf.h"

typedef struct pf_file {
	cache_file *cf;
	uint64_t size;
} pf_file;

typedef struct pf_set {
	pf_file *v;
	size_t n, cap;
	uint64_t total;
} pf_set;

static int pf_add(const ctl_req *r, pf_set *set, const char *key,
		  const char *etag, uint64_t size)
{
	if (size == 0)
		return 0;
	if (set->n == set->cap) {
		size_t nc = set->cap ? set->cap * 2 : 64;
		pf_file *nv = realloc(set->v, nc * sizeof *nv);
		if (!nv)
			return -ENOMEM;
		set->v = nv;
		set->cap = nc;
	}
	bool hit;
	cache_file *cf;
	int rc = cache_file_open(r->t->cache, key, etag, size, &cf, &hit);
	if (rc < 0)
		return rc;
	set->v[set->n++] = (pf_file){cf, size};
	set->total += size;
	return 0;
}

/* The manifests in force for a directory: those of the nearest transaction
 * root at or above it within the mount (m NULL: none), and the length of
 * that root's path relative to the mount (a leading part of the
 * directory's). */
typedef struct pf_scope {
	const vis_manifest *m;
	size_t root_len;
} pf_scope;

static void manifest_free(vis_manifest *m)
{
	if (m) {
		vis_manifest_free(m);
		free(m);
	}
}

/*
 * Directory rel of the mount ("" or without trailing '/') as the mount
 * shows it: *out (finished and filtered; the caller frees it), *own its
 * manifests when it is a transaction root (the caller frees them; *sc then
 * points at them), *sc the scope for rel.  Returns 0, or a negative errno
 * with e filled.
 */
static int pf_list(const ctl_req *r, const char *rel, pf_scope *sc, ns_dir *out,
		   vis_manifest **own, s3_err *e)
{
	buf p = BUF_INIT;
	buf_printf(&p, "%s%s%s", r->t->prefix, rel, rel[0] ? "/" : "");
	int rc = fs_listing_fetch(r->t->s3, NULL, buf_cstr(&p), false, NULL,
				  NULL, out, own, e);
	buf_free(&p);
	if (rc < 0)
		return -(e->err ? e->err : EIO);
	if (*own)
		*sc = (pf_scope){*own, strlen(rel)};
	if (sc->m) {
		const char *in_root = rel + sc->root_len;
		if (*in_root == '/')
			in_root++;
		vis_filter_listing(out, sc->m, in_root);
	}
	/* a checkpoint without its last file is empty here too */
	fs_ctx *fs = ctl_target_fs(r->t);
	if (fs)
		vis_rules_apply(out, fs_ctx_complete(fs));
	return 0;
}

/* Opens every visible file under directory rel, recursively. */
static int pf_add_dir(const ctl_req *r, pf_set *set, const char *rel,
		      pf_scope sc, s3_err *e)
{
	ns_dir d;
	vis_manifest *own = NULL;
	int rc = pf_list(r, rel, &sc, &d, &own, e);
	if (rc < 0)
		return rc;
	buf child = BUF_INIT;
	for (size_t i = 0; i < d.n && rc == 0; i++) {
		const ns_entry *en = &d.v[i];
		buf_reset(&child);
		buf_printf(&child, "%s%s%s", rel, rel[0] ? "/" : "", en->name);
		if (en->is_dir) {
			rc = pf_add_dir(r, set, buf_cstr(&child), sc, e);
		} else {
			char *key = proto_key(r->t->prefix, buf_cstr(&child));
			rc = key ? pf_add(r, set, key, en->etag, en->size)
				 : -ENOMEM;
			free(key);
		}
	}
	buf_free(&child);
	ns_dir_free(&d);
	manifest_free(own);
	return rc;
}

/*
 * Opens rel: a file, or every file under a directory.  Walks down from the
 * mount root one listing per component, so the manifests of a transaction
 * root above rel apply and a name hidden anywhere on the way is ENOENT.
 */
static int pf_add_path(const ctl_req *r, pf_set *set, const char *rel, s3_err *e)
{
	pf_scope sc = {NULL, 0};
	vis_manifest *held = NULL; /* sc.m, once a directory had manifests */
	buf dir = BUF_INIT;        /* the path walked so far */
	int rc = 0;
	const char *p = rel;
	while (*p == '/')
		p++;
	if (!*p)
		rc = 1; /* the mount root */
	while (rc == 0) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		const char *next = p + len;
		while (*next == '/')
			next++;
		ns_dir d;
		vis_manifest *own = NULL;
		rc = pf_list(r, buf_cstr(&dir), &sc, &d, &own, e);
		if (rc < 0)
			break;
		if (own) {
			manifest_free(held);
			held = own;
		}
		char *name = strndup(p, len);
		const ns_entry *en = name ? ns_dir_find(&d, name) : NULL;
		if (dir.len)
			buf_putc(&dir, '/');
		buf_printf(&dir, "%s", name ? name : "");
		free(name);
		if (!en || (!en->is_dir && *next)) {
			rc = -ENOENT;
		} else if (!en->is_dir) {
			char *key = proto_key(r->t->prefix, buf_cstr(&dir));
			rc = key ? pf_add(r, set, key, en->etag, en->size)
				 : -ENOMEM;
			free(key);
			rc = rc < 0 ? rc : 2; /* done */
		} else if (!*next) {
			rc = 1; /* the directory to fetch */
		}
		ns_dir_free(&d);
		p = next;
	}
	if (rc == 1) {
		rc = pf_add_dir(r, set, buf_cstr(&dir), sc, e);
		if (rc == 0 && set->n == 0 && dir.len)
			rc = -ENOENT;
	}
	manifest_free(held);
	buf_free(&dir);
	return rc < 0 ? rc : 0;
}

static bool pf_progress(pf_set *set, uint64_t *done, int *err)
{
	*done = 0;
	*err = 0;
	for (size_t i = 0; i < set->n; i++) {
		uint64_t d, t;
		cache_file_progress(set->v[i].cf, &d, &t);
		*done += d;
		int e = cache_file_error(set->v[i].cf);
		if (e == ESTALE) /* replaced while prefetched */
			e = EIO;
		if (e)
			*err = e;
	}
	return *done == set->total;
}

static bool stopping(const ctl_req *r)
{
	return r->stopping && r->stopping(r->arg);
}

static void pf_wait(const ctl_req *r, int fd, pf_set *set)
{
	uint64_t done;
	int err;
	while (!pf_progress(set, &done, &err) && !err && !stopping(r)) {
		if (ctl_send_json(fd, json_pack("{s:I, s:I, s:I}", "done_bytes",
					    (json_int_t)done, "total_bytes",
					    (json_int_t)set->total, "files",
					    (json_int_t)set->n)) < 0)
			return; /* client went away; downloads go on */
		usleep(200 * 1000);
	}
	if (err)
		ctl_send_error(fd, strerror(err));
	else if (stopping(r))
		ctl_send_error(fd, "the filesystem is being unmounted");
	else
		ctl_send_json(fd, json_pack("{s:I, s:I, s:I, s:b}", "done_bytes",
					(json_int_t)done, "total_bytes",
					(json_int_t)set->total, "files",
					(json_int_t)set->n, "done", 1));
}

/* {"cmd":"prefetch","path":REL} (requests.c checked REL) */
void ctl_req_prefetch(const ctl_req *r)
{
	pf_set set = {0};
	s3_err e = {0};
	int fd = r->fd;
	int rc = pf_add_path(r, &set, r->path, &e);
	if (rc < 0)
		ctl_send_error(fd, e.msg[0] ? e.msg : strerror(-rc));
	else
		pf_wait(r, fd, &set);
	for (size_t i = 0; i < set.n; i++)
		cache_file_close(set.v[i].cf);
	free(set.v);
}
