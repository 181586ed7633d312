/*
 * Attributes of files outside any manifest, from their objects' metadata
 * (x-amz-meta-mode/uid/gid/mtime/symlink, proto/meta.h): read once per
 * version, on lookup, getattr and open, and never one HEAD at a time.
 * Listings carry no metadata, so the first file of a directory that needs
 * its metadata HEADs, in parallel (META_PAR at once), the files that follow
 * it in the directory's listing whose metadata is not known either (32 the
 * first time, doubling while the directory keeps asking, up to
 * META_BATCH): `ls -l` or `find -ls` of a large directory written by
 * another tool stats its entries in listing order, and finds each one's
 * metadata already read.  A node being read is marked meta_busy; another
 * thread that needs it waits for that batch instead of sending its own
 * HEAD.  Which files are read follows -o object_meta= (fs_meta_wanted):
 * auto (the default) reads only objects whose directory holds a metadata
 * hint for them (D/.ckptfs-meta/NAME, doc/commit.md "Metadata hints"), so
 * `ls -l` of objects written by another tool costs its listing only; on
 * reads every one (buckets written by ckptfs before hints); off none.
 * Files not read show the mount's defaults.
 */
#include "fs/metaread.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/ctx.h"
#include "fs/nodes.h"
#include "proto/meta.h"
#include "util/buf.h"
#include "util/log.h"
#include "util/pfor.h"

#define META_BATCH 1024 /* files per batch at most */
#define META_FIRST 32   /* the first batch of a directory */
#define META_PAR 64     /* HEADs in flight at once */

typedef struct meta_item {
	fs_inode *n; /* referenced, meta_busy */
	char *key, *etag, *ver; /* ver: fs_meta_version, the cache's key */
	struct timespec lm;     /* the version's LastModified */
	s3_head_ext_result hr;
	int rc;
} meta_item;

typedef struct meta_batch {
	s3_client *s3;
	meta_item *v;
	size_t n, cap;
} meta_batch;

static void head_one(void *arg, size_t i)
{
	meta_batch *b = arg;
	meta_item *it = &b->v[i];
	s3_err e;
	it->rc = it->key && it->etag && it->ver ? s3_head_ext(b->s3, it->key, &it->hr, &e)
				     : -1;
	if (it->rc < 0 && it->key)
		log_debug("metadata of %s: %s", it->key, e.msg);
}

/* Stores the metadata of n's version (etag, lm).  Table locked. */
static void apply_meta(fs_inode *n, const char *etag, struct timespec lm,
		       const s3_meta *meta,
		       size_t n_meta)
{
	proto_meta m;
	char *xattrs = NULL;
	unsigned has = proto_object_meta_parse(meta, n_meta, &m, &xattrs);
	if (has & PROTO_HAS_MODE)
		n->mode = m.mode;
	n->rdev = m.rdev;
	if (has & PROTO_HAS_UID)
		n->uid = m.uid;
	if (has & PROTO_HAS_GID)
		n->gid = m.gid;
	if ((has & PROTO_HAS_MTIME) && m.mtime_ns) /* 0: not recorded */
		proto_ns_time(m.mtime_ns, &n->mtime);
	/* this version's xattrs, none when its metadata records none: a
	 * removexattr stores the file again without them, and another
	 * mount kept showing the removed name from the version it read
	 * before (model seed 8515) */
	free(n->xattrs_json);
	n->xattrs_json = (has & PROTO_HAS_XATTRS) ? xattrs : NULL;
	if (has & PROTO_HAS_XATTRS)
		xattrs = NULL;
	/* a version without ckptfs's metadata (another tool replaced the
	 * object) shows the mount's defaults, as on a fresh mount, not the
	 * mode, owner or symlink of the version read before */
	n->has_attrs = (has & PROTO_HAS_MODE) != 0;
	free(n->symlink);
	n->symlink = NULL;
	if (n->has_attrs) {
		n->symlink = m.symlink;
		m.symlink = NULL;
	}
	free(xattrs);
	proto_meta_free(&m);
	free(n->meta_etag);
	n->meta_etag = strdup(etag);
	n->meta_mtime = lm;
	n->attrs_committed = false; /* this version's metadata speaks */
}

/*
 * The metadata read for a version is kept by key and ETag in fs->metacache
 * (fs/mcache.h) as "name NUL value NUL" pairs, so an inode the kernel
 * forgot (its dentries dropped under memory pressure or by drop_caches)
 * and looked up again, or a file listed again, costs no new HEAD.
 */
int fs_meta_pack(const s3_meta *v, size_t n, buf *out)
{
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = buf_append(out, v[i].name, strlen(v[i].name) + 1) |
		     buf_append(out, v[i].value, strlen(v[i].value) + 1);
	return rc;
}

size_t fs_meta_unpack(const char *body, size_t len, s3_meta *v, size_t max)
{
	size_t nv = 0;
	for (size_t at = 0; at < len && nv < max;) {
		const char *name = body + at;
		size_t nl = strnlen(name, len - at);
		if (at + nl + 1 >= len)
			break; /* no value */
		const char *value = name + nl + 1;
		size_t vl = strnlen(value, len - at - nl - 1);
		if (at + nl + 1 + vl >= len)
			break; /* value not terminated */
		v[nv++] = (s3_meta){name, value};
		at += nl + 1 + vl + 1;
	}
	return nv;
}

static void remember_meta(fs_ctx *fs, const meta_item *it)
{
	buf b = BUF_INIT;
	if (fs_meta_pack(it->hr.meta, it->hr.n_meta, &b) == 0)
		fs_mcache_put(fs->metacache, it->key, it->ver,
			      b.data ? b.data : "", b.len);
	buf_free(&b);
}

/* Applies what fs->metacache holds for n's version: false when nothing.
 * Table locked. */
static bool recall_meta(fs_ctx *fs, fs_inode *n)
{
	char *key = fs_object_key(fs, n);
	char ver[FS_META_VER_MAX];
	fs_meta_version(ver, n->etag, n->obj_mtime);
	size_t len = 0;
	char *body = key ? fs_mcache_get(fs->metacache, key, ver, &len)
			 : NULL;
	free(key);
	if (!body)
		return false;
	s3_meta v[64];
	size_t nv = fs_meta_unpack(body, len, v, 64);
	apply_meta(n, n->etag, n->obj_mtime, v, nv);
	free(body);
	return true;
}

/* Adds n to the batch (referenced, marked busy).  Table locked. */
static void batch_add(fs_ctx *fs, meta_batch *b, fs_inode *n)
{
	meta_item *it = &b->v[b->n++];
	memset(it, 0, sizeof *it);
	it->n = n;
	char ver[FS_META_VER_MAX];
	fs_meta_version(ver, n->etag, n->obj_mtime);
	it->key = fs_object_key(fs, n);
	it->etag = strdup(n->etag);
	it->ver = strdup(ver);
	it->lm = n->obj_mtime;
	it->rc = -1;
	n->meta_busy = true;
	fs_inode_ref(n);
}

/* The files after n in its parent's listing whose metadata is still to be
 * read and that nobody is reading, into b (n first).  Table locked. */
static void batch_collect(fs_ctx *fs, fs_inode *n, meta_batch *b)
{
	batch_add(fs, b, n);
	fs_inode *d = n->parent;
	const ns_dir *l = d ? d->listing : NULL;
	const ns_entry *at = l ? ns_dir_find(l, n->name) : NULL;
	if (!at)
		return;
	buf path = BUF_INIT;
	for (size_t i = (size_t)(at - l->v) + 1; i < l->n && b->n < b->cap;
	     i++) {
		const ns_entry *e = &l->v[i];
		if (e->is_dir ||
		    (fs->o.object_meta == FS_META_AUTO && !e->hinted))
			continue;
		buf_reset(&path);
		buf_printf(&path, "%s%s%s", d->path, d->path[0] ? "/" : "",
			   e->name);
		fs_inode *c = fs_itable_find(fs->it, buf_cstr(&path));
		if (c && !c->meta_busy && fs_meta_unread(fs, c) &&
		    !recall_meta(fs, c))
			batch_add(fs, b, c);
	}
	buf_free(&path);
}

void fs_check_meta(fs_ctx *fs, fs_inode *n)
{
	while (n->meta_busy) /* in another thread's batch */
		fs_itable_wait(fs->it);
	if (!fs_meta_unread(fs, n) || recall_meta(fs, n))
		return;
	/* a lone stat costs one round of HEADs; a directory whose files keep
	 * needing theirs (ls -l) gets batches growing up to META_BATCH */
	fs_inode *d = n->parent;
	size_t cap = META_FIRST;
	if (d) {
		double now = fs_now();
		d->meta_run = now - d->meta_at < 2.0 ? d->meta_run + 1 : 0;
		d->meta_at = now;
		cap = d->meta_run < 6 ? (size_t)META_FIRST << d->meta_run
				      : META_BATCH;
		cap = cap < META_BATCH ? cap : META_BATCH;
	}
	meta_batch b = {fs->s3, calloc(cap, sizeof(meta_item)), 0, cap};
	meta_item one;
	if (!b.v) { /* out of memory: this one alone */
		b.v = &one;
		b.cap = 1;
	}
	batch_collect(fs, n, &b);
	fs_itable_unlock(fs->it);
	pfor(b.n, META_PAR, head_one, &b);
	fs_itable_lock(fs->it);
	for (size_t i = 0; i < b.n; i++) {
		meta_item *it = &b.v[i];
		bool ok = it->rc == 0 && !strcmp(it->hr.etag, it->etag);
		/* the same bytes: the metadata read is this version's or a
		 * newer one's (a later listing names that one, read again) */
		if (ok) /* else failed, or another version: read it next time */
			remember_meta(fs, it);
		if (ok && it->n->etag && !strcmp(it->n->etag, it->etag))
			apply_meta(it->n, it->etag, it->lm, it->hr.meta,
				   it->hr.n_meta);
		it->n->meta_busy = false;
		if (it->rc == 0)
			s3_head_ext_result_free(&it->hr);
		free(it->key);
		free(it->etag);
		free(it->ver);
		fs_itable_unref(fs->it, it->n);
	}
	if (b.n > 1)
		log_debug("metadata of %zu files of /%s read in one batch",
			  b.n, n->parent ? n->parent->path : "");
	fs_itable_broadcast(fs->it);
	if (b.v != &one)
		free(b.v);
}
