/*
 * fs_ops: FUSE low-level operations.
 *
 * Concurrency: libfuse's multi-threaded loop calls these from several
 * worker threads.  The inode table (and everything hanging off inodes:
 * attributes, listings) is guarded by the table mutex, which is never held
 * across network I/O: a thread that needs a listing marks the directory
 * busy, drops the lock, lists, and publishes the result; others wait on the
 * table's condition variable instead of listing the same directory twice.
 * Open handles are owned by one fs_handle each with its own mutex for the
 * read window.
 *
 * Directory mtime: the newest LastModified among the objects of its own
 * listing (marker included), known once the directory has been listed.
 * Until then the entry is returned with attr_timeout 0 so that a stat asks
 * again (getattr lists the directory to learn it).
 */
#include "fs/ops.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "fs/inode.h"
#include "fs/ops-internal.h"
#include "fs/listing.h"
#include "proto/crc.h"
#include "proto/meta.h"
#include "proto/namespace.h"
#include "util/buf.h"
#include "s3/retry.h"
#include "util/log.h"

/* ---- context ---------------------------------------------------------- */

/* The kernel forgot an inode: its passthrough backing can go. */
static void inode_freed(void *arg, fs_inode *n)
{
	fs_ctx *fs = arg;
	if (n->pt_backing_id > 0)
		fs_pt_backing_close(&fs->pt, n->pt_backing_id);
}

fs_ctx *fs_ctx_new(s3_client *s3, cache *rc, const char *prefix,
		   const fs_opts *o)
{
	fs_ctx *fs = calloc(1, sizeof *fs);
	if (!fs)
		return NULL;
	fs->s3 = s3;
	fs->cache = rc;
	fs->prefix = strdup(prefix);
	fs->pt.wanted = o->passthrough;
	fs->it = fs_itable_new();
	fs->mcache = fs_mcache_new(0);
	fs->o = *o;
	if (!fs->o.readahead_max)
		fs->o.readahead_max = 8u << 20;
	clock_gettime(CLOCK_REALTIME, &fs->mount_time);
	pthread_mutex_init(&fs->log_mu, NULL);
	if (!fs->prefix || !fs->it || !fs->mcache) {
		fs_ctx_free(fs);
		return NULL;
	}
	fs_itable_root(fs->it)->mtime = fs->mount_time;
	fs_itable_set_free_hook(fs->it, inode_freed, fs);
	wr_init(fs);
	return fs;
}

void fs_ctx_free(fs_ctx *fs)
{
	if (!fs)
		return;
	wr_destroy(fs);
	fs_itable_free(fs->it);
	fs_mcache_free(fs->mcache);
	pthread_mutex_destroy(&fs->log_mu);
	free(fs->prefix);
	free(fs);
}

static void handle_free(fs_ctx *fs, fs_handle *h, bool counted);
static void dirhandle_free(fs_dirhandle *dh);
static void dirhandle_unlink(fs_ctx *fs, fs_dirhandle *dh);

void fs_ctx_close_handles(fs_ctx *fs)
{
	if (!fs)
		return;
	for (;;) {
		fs_itable_lock(fs->it);
		fs_handle *h = fs->handles;
		fs_dirhandle *dh = fs->dirhandles;
		if (dh)
			dirhandle_unlink(fs, dh);
		fs_itable_unlock(fs->it);
		if (h)
			handle_free(fs, h, true); /* unlinks it */
		if (dh)
			dirhandle_free(dh);
		if (!h && !dh)
			break;
	}
}

fs_pt *fs_ctx_pt(fs_ctx *fs)
{
	return &fs->pt;
}

static fs_ctx *ctx(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* Logs each skipped key once per mount (bounded memory). */
static void report_key(void *arg, const char *key, size_t key_len,
		       ns_reason why)
{
	fs_ctx *fs = arg;
	uint64_t h = 1469598103934665603ULL;
	for (size_t i = 0; i < key_len; i++)
		h = (h ^ (unsigned char)key[i]) * 1099511628211ULL;
	pthread_mutex_lock(&fs->log_mu);
	bool seen = false;
	for (size_t i = 0; i < fs->n_logged && !seen; i++)
		seen = fs->logged[i] == h;
	if (!seen && fs->n_logged < LOGGED_MAX)
		fs->logged[fs->n_logged++] = h;
	pthread_mutex_unlock(&fs->log_mu);
	if (seen)
		return;
	log_warn("skipping key \"%.*s\": %s", (int)key_len, key,
		 why == NS_SKIP_SHADOWED_BY_DIR
			 ? "a directory of the same name hides it"
			 : "it cannot be a path (empty, '.', '..' or over 255 bytes component)");
}

/* ---- keys and attributes ---------------------------------------------- */

static char *object_key(fs_ctx *fs, const fs_inode *n)
{
	buf b = BUF_INIT;
	buf_printf(&b, "%s%s", fs->prefix, n->path);
	return buf_steal(&b);
}

static char *dir_prefix(fs_ctx *fs, const fs_inode *d)
{
	buf b = BUF_INIT;
	buf_puts(&b, fs->prefix);
	if (d->path[0])
		buf_printf(&b, "%s/", d->path);
	return buf_steal(&b);
}

static void fill_stat(fs_ctx *fs, const fs_inode *n, struct stat *st)
{
	if (wr_fill_stat(fs, n, st))
		return;
	memset(st, 0, sizeof *st);
	st->st_ino = n->ino;
	st->st_uid = fs->o.uid;
	st->st_gid = fs->o.gid;
	if (n->is_dir) {
		st->st_mode = S_IFDIR | (0777 & ~fs->o.umask);
		st->st_nlink = 2;
		st->st_size = 4096;
	} else {
		st->st_mode = S_IFREG | (0666 & ~fs->o.umask);
		st->st_nlink = 1;
		st->st_size = (off_t)n->size;
		st->st_blocks = (blkcnt_t)((n->size + 511) / 512);
	}
	if (n->has_attrs && !n->is_dir) {
		/* what the writer recorded in the manifest */
		st->st_mode = (n->symlink ? S_IFLNK : S_IFREG) |
			      (n->symlink ? 0777 : (n->mode & 07777));
		st->st_uid = n->uid;
		st->st_gid = n->gid;
		if (n->symlink)
			st->st_size = (off_t)strlen(n->symlink);
	}
	st->st_blksize = 1 << 20;
	struct timespec t = n->mtime;
	if (t.tv_sec == 0 && t.tv_nsec == 0)
		t = fs->mount_time;
	st->st_mtim = st->st_ctim = st->st_atim = t;
}

static void set_file_attrs(fs_inode *n, const ns_entry *e)
{
	n->size = e->size;
	/* the writer's mtime, read from this version's metadata, stays */
	if (!(n->has_attrs && n->meta_etag && e->etag &&
	      !strcmp(n->meta_etag, e->etag)))
		n->mtime = e->mtime;
	if (!n->etag || !e->etag || strcmp(n->etag, e->etag) != 0) {
		free(n->etag);
		n->etag = e->etag ? strdup(e->etag) : NULL;
	}
	n->attr_time = fs_now();
}

/* ---- listings --------------------------------------------------------- */

static void set_manifest(fs_inode *d, vis_manifest *man)
{
	if (d->manifest) {
		vis_manifest_free(d->manifest);
		free(d->manifest);
	}
	d->manifest = man;
}

/* Inside a transaction root only the files of its committed manifests
 * show (proto/visibility.h).  Table locked. */
static void apply_manifest(fs_inode *d, ns_dir *nd)
{
	fs_inode *r = d;
	while (r && !r->manifest)
		r = r->parent;
	if (!r)
		return;
	const char *rel = d->path + strlen(r->path);
	if (*rel == '/')
		rel++;
	vis_filter_listing(nd, r->manifest, rel);
}

/*
 * Makes d->listing fresh.  Called and returns with the table locked; drops
 * the lock while listing.  Returns 0 or a negative errno.
 */
static int dir_load(fs_ctx *fs, fs_inode *d)
{
	for (;;) {
		if (d->listing && d->listing_gen == fs->listing_gen &&
		    fs_now() - d->listing_time < fs->o.dir_timeout)
			return 0;
		if (!d->listing_busy)
			break;
		fs_itable_wait(fs->it);
	}
	d->listing_busy = true;
	uint64_t gen = fs->listing_gen;
	fs_inode_ref(d);
	char *prefix = dir_prefix(fs, d);
	fs->fetching++;
	fs_itable_unlock(fs->it);

	ns_dir *nd = calloc(1, sizeof *nd);
	vis_manifest *man = NULL;
	s3_err e = {0};
	int rc = nd ? fs_listing_fetch(fs->s3, fs->mcache, prefix, report_key, fs, nd, &man,
				       &e)
		    : -1;
	/* the store unreachable or failing (transport, 5xx, throttled) and
	 * a listing from before: keep serving that one, so what is cached
	 * stays readable through an outage; it counts as fresh for another
	 * dir_timeout, so a path's lookups do not each wait out the retries.
	 * A final answer (403, no such bucket) is an error. */
	bool stale = false;
	if (rc < 0) {
		free(nd);
		nd = NULL;
		rc = -(e.err ? e.err : EIO);
		stale = e.err != ENOMEM &&
			retry_is_transient(e.curl_code, e.http_status,
					   e.code[0] ? e.code : NULL);
		if (stale)
			log_warn("%s (serving the last listing of /%s)", e.msg,
				 d->path);
		else
			log_error("%s", e.msg[0] ? e.msg : "out of memory listing");
	}
	free(prefix);

	fs_itable_lock(fs->it);
	d->listing_busy = false;
	if (--fs->fetching == 0)
		wr_fetch_done(fs);
	fs_itable_broadcast(fs->it);
	if (stale && d->listing) {
		d->listing_time = fs_now();
		rc = 0;
	}
	if (nd) {
		if (d->listing) {
			ns_dir_free(d->listing);
			free(d->listing);
		}
		set_manifest(d, man);
		apply_manifest(d, nd);
		d->listing = nd;
		d->listing_time = fs_now();
		d->listing_gen = gen;
		if (nd->newest.tv_sec)
			d->mtime = nd->newest;
		d->attr_time = d->listing_time;
	}
	fs_itable_unref(fs->it, d);
	return rc;
}

/* An inode bound to a passthrough backing file of another version of its
 * object, or whose pages the kernel may hold for another version, cannot
 * serve the new one: the path gets a new inode, so old handles keep the
 * old size and bytes, as a file replaced by rename keeps them on a disk
 * filesystem.  Open handles are not the only holders: a mapping outlives
 * its file's close (safetensors keeps its mmap), and the new, maybe
 * shorter, size on the same inode would SIGBUS it. */
static bool bound_to_other_version(const fs_inode *n, const char *etag)
{
	if (!etag)
		return false;
	if (n->pt_backing_id > 0 && n->pt_etag && strcmp(n->pt_etag, etag))
		return true;
	return n->kc_etag && strcmp(n->kc_etag, etag);
}

/* Attributes of file c from the manifests of its transaction root, when
 * they recorded some (mode, owner, mtime, symlink, xattrs).  Table locked. */
static void remote_attrs(fs_inode *parent, fs_inode *c)
{
	fs_inode *r = parent;
	while (r && !r->manifest)
		r = r->parent;
	const vis_file *v = NULL;
	if (r) {
		const char *rel = c->path + strlen(r->path);
		if (*rel == '/')
			rel++;
		v = vis_manifest_find(r->manifest, rel);
	}
	if (!v || !v->has_attrs) {
		if (!c->meta_etag)
			c->has_attrs = false;
		return;
	}
	free(c->meta_etag);
	c->meta_etag = NULL; /* the manifest speaks for it */
	c->has_attrs = true;
	c->mode = v->mode;
	c->uid = v->uid;
	c->gid = v->gid;
	if (v->mtime_ns > 0) {
		c->mtime.tv_sec = (time_t)(v->mtime_ns / 1000000000);
		c->mtime.tv_nsec = (long)(v->mtime_ns % 1000000000);
	}
	if (!c->symlink != !v->symlink ||
	    (v->symlink && strcmp(c->symlink, v->symlink))) {
		free(c->symlink);
		c->symlink = v->symlink ? strdup(v->symlink) : NULL;
	}
	if (!c->xattrs_json != !v->xattrs_json ||
	    (v->xattrs_json && strcmp(c->xattrs_json, v->xattrs_json))) {
		free(c->xattrs_json);
		c->xattrs_json = v->xattrs_json ? strdup(v->xattrs_json) : NULL;
	}
}

/* ETags as S3 sends them, quoted or not. */
static bool etag_same(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la >= 2 && a[0] == '"' && a[la - 1] == '"')
		a++, la -= 2;
	if (lb >= 2 && b[0] == '"' && b[lb - 1] == '"')
		b++, lb -= 2;
	return la == lb && !strncmp(a, b, la);
}

/*
 * The block checksums the manifests of n's transaction root recorded for
 * the version (etag, size) a handle opened (doc/commit.md, "Block
 * checksums"), for the cache to check downloads against: x->crc is
 * *crc, malloc'd.  False when there are none: not in a manifest, a manifest of
 * another version (the object was replaced by other means), no list.
 * Table locked.
 */
bool fs_manifest_blocks(const fs_inode *n, const char *etag, uint64_t size,
			cache_expect *x, uint32_t **crc)
{
	const fs_inode *r = n->parent;
	while (r && !r->manifest)
		r = r->parent;
	if (!r)
		return false;
	const char *rel = n->path + strlen(r->path);
	if (*rel == '/')
		rel++;
	const vis_file *v = vis_manifest_find(r->manifest, rel);
	if (!v || !v->blocks)
		return false;
	if (v->size != size || !v->etag || !etag_same(v->etag, etag)) {
		log_debug("open %s: its manifest names another version; not "
			  "checked against it",
			  n->path);
		return false;
	}
	if (vis_file_blocks(v, crc, &x->n) < 0)
		return false;
	x->crc = *crc;
	x->block = v->block;
	return true;
}

/*
 * A file outside any manifest keeps its attributes in its object's
 * metadata (x-amz-meta-mode/uid/gid/mtime/symlink, proto/meta.h):
 * read once per version, on lookup, getattr and open.  Listings never
 * carry metadata, so readdirplus gives such files no attribute lifetime
 * (fill_entry) and a stat comes here.  Table locked; dropped for the HEAD.
 */
void fs_check_meta(fs_ctx *fs, fs_inode *n)
{
	if (n->is_dir || !n->etag || !n->etag[0] ||
	    (n->has_attrs && !n->meta_etag))
		return; /* no version known, or the manifest said */
	if (n->meta_etag && !strcmp(n->meta_etag, n->etag))
		return;
	char *etag = strdup(n->etag);
	char *key = object_key(fs, n);
	fs_inode_ref(n);
	fs_itable_unlock(fs->it);
	s3_head_ext_result hr;
	s3_err e;
	int rc = key && etag ? s3_head_ext(fs->s3, key, &hr, &e) : -1;
	fs_itable_lock(fs->it);
	if (rc == 0 && etag && !strcmp(hr.etag, etag)) {
		proto_meta m;
		char *xattrs = NULL;
		unsigned has =
		    proto_object_meta_parse(hr.meta, hr.n_meta, &m, &xattrs);
		if (has & PROTO_HAS_MODE)
			n->mode = m.mode;
		if (has & PROTO_HAS_UID)
			n->uid = m.uid;
		if (has & PROTO_HAS_GID)
			n->gid = m.gid;
		if ((has & PROTO_HAS_MTIME) && m.mtime_ns > 0) {
			n->mtime.tv_sec = (time_t)(m.mtime_ns / 1000000000);
			n->mtime.tv_nsec = (long)(m.mtime_ns % 1000000000);
		}
		if (has & PROTO_HAS_XATTRS) {
			free(n->xattrs_json);
			n->xattrs_json = xattrs;
			xattrs = NULL;
		}
		if (has & PROTO_HAS_MODE) {
			n->has_attrs = true;
			free(n->symlink);
			n->symlink = m.symlink;
			m.symlink = NULL;
		}
		free(xattrs);
		proto_meta_free(&m);
		free(n->meta_etag);
		n->meta_etag = strdup(etag);
	}
	if (rc == 0)
		s3_head_ext_result_free(&hr);
	free(key);
	free(etag);
	fs_itable_unref(fs->it, n);
}

/* Child inode for a listing entry, attributes updated. Table locked. */
static fs_inode *child_for(fs_ctx *fs, fs_inode *parent, const ns_entry *e)
{
	fs_inode *c = fs_itable_child(fs->it, parent, e->name, e->is_dir);
	if (c && !e->is_dir && bound_to_other_version(c, e->etag)) {
		fs_itable_detach(fs->it, c);
		c = fs_itable_child(fs->it, parent, e->name, false);
	}
	if (!c)
		return NULL;
	if (!e->is_dir) {
		set_file_attrs(c, e);
		remote_attrs(parent, c);
	} else if (!c->listing && (e->mtime.tv_sec || e->mtime.tv_nsec))
		c->mtime = e->mtime;
	return c;
}

static double entry_attr_timeout(fs_ctx *fs, const fs_inode *n)
{
	/* a directory whose mtime is not known yet: make stat ask again */
	if (n->is_dir && !n->listing)
		return 0.0;
	/* a file whose object metadata was not read yet (fs_check_meta) */
	if (!n->is_dir && !n->has_attrs && n->etag &&
	    (!n->meta_etag || strcmp(n->meta_etag, n->etag)) &&
	    !wr_fill_stat(fs, n, &(struct stat){0}))
		return 0.0;
	return fs->o.attr_timeout;
}

static void fill_entry(fs_ctx *fs, fs_inode *n, struct fuse_entry_param *ep)
{
	memset(ep, 0, sizeof *ep);
	ep->ino = n->ino;
	ep->generation = 0;
	ep->entry_timeout = fs->o.entry_timeout;
	ep->attr_timeout = entry_attr_timeout(fs, n);
	fill_stat(fs, n, &ep->attr);
}

/* ---- lookup / getattr / forget ---------------------------------------- */

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fs_ctx *fs = ctx(req);
	fs_itable_lock(fs->it);
	fs_inode *p = fs_itable_get(fs->it, parent);
	if (!p || !p->is_dir) {
		fs_itable_unlock(fs->it);
		fuse_reply_err(req, p ? ENOTDIR : ENOENT);
		return;
	}
	fs_inode *local = NULL;
	int wr = wr_lookup(fs, p, name, &local);
	if (wr && local) {
		local->nlookup++;
		struct fuse_entry_param ep;
		fill_entry(fs, local, &ep);
		fs_itable_unlock(fs->it);
		fuse_reply_entry(req, &ep);
		return;
	}
	int rc = wr || wr_is_local_dir(fs, p) ? 0 : dir_load(fs, p);
	const ns_entry *e = rc == 0 && !wr && p->listing && !wr_is_local_dir(fs, p)
				    ? ns_dir_find(p->listing, name)
				    : NULL;
	if (rc < 0 || !e) {
		fs_itable_unlock(fs->it);
		if (rc < 0) {
			fuse_reply_err(req, -rc);
		} else {
			struct fuse_entry_param ep = {0};
			ep.entry_timeout = fs->o.entry_timeout;
			fuse_reply_entry(req, &ep); /* cached negative entry */
		}
		return;
	}
	fs_inode *c = child_for(fs, p, e);
	if (!c) {
		fs_itable_unlock(fs->it);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fs_inode_ref(c);
	fs_check_meta(fs, c);
	c->nlookup++;
	struct fuse_entry_param ep;
	fill_entry(fs, c, &ep);
	fs_itable_unref(fs->it, c);
	fs_itable_unlock(fs->it);
	fuse_reply_entry(req, &ep);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	fs_ctx *fs = ctx(req);
	fs_itable_lock(fs->it);
	fs_inode *n = fs_itable_get(fs->it, ino);
	if (n)
		fs_itable_forget(fs->it, n, nlookup);
	fs_itable_unlock(fs->it);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	fs_ctx *fs = ctx(req);
	fs_itable_lock(fs->it);
	for (size_t i = 0; i < count; i++) {
		fs_inode *n = fs_itable_get(fs->it, forgets[i].ino);
		if (n)
			fs_itable_forget(fs->it, n, forgets[i].nlookup);
	}
	fs_itable_unlock(fs->it);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	fs_ctx *fs = ctx(req);
	fs_itable_lock(fs->it);
	fs_inode *n = fs_itable_get(fs->it, ino);
	if (!n) {
		fs_itable_unlock(fs->it);
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (!n->is_dir && !wr_fill_stat(fs, n, &(struct stat){0})) {
		fs_inode_ref(n);
		fs_check_meta(fs, n);
		fs_itable_unref(fs->it, n);
	}
	/*
	 * A directory's mtime comes from its listing.  Listed before: reply
	 * with what that listing said, then refresh it, so the next stat
	 * sees a new mtime.  The kernel asks for the attributes of every
	 * directory on a path whose attr_timeout ran out (a permission
	 * check), and a writer's open(2) must not wait for a LIST: with a
	 * pending marker a listing is three, ~100 ms on the bench's server.
	 */
	bool refresh = false;
	if (n->is_dir && !wr_is_local_dir(fs, n)) {
		if (n->listing) {
			refresh = true;
			fs_inode_ref(n);
		} else if (dir_load(fs, n) < 0) {
			log_debug("getattr %s: listing failed, mtime unknown",
				  n->path);
		}
	}
	struct stat st;
	fill_stat(fs, n, &st);
	fs_itable_unlock(fs->it);
	fuse_reply_attr(req, &st, fs->o.attr_timeout);
	if (refresh) {
		fs_itable_lock(fs->it);
		if (dir_load(fs, n) < 0)
			log_debug("getattr %s: listing failed, stale mtime",
				  n->path);
		fs_itable_unref(fs->it, n);
		fs_itable_unlock(fs->it);
	}
}

/* ---- directories ------------------------------------------------------ */

/* Table locked. */
static void dirhandle_unlink(fs_ctx *fs, fs_dirhandle *dh)
{
	if (dh->prev)
		dh->prev->next = dh->next;
	else
		fs->dirhandles = dh->next;
	if (dh->next)
		dh->next->prev = dh->prev;
}

static void dirhandle_free(fs_dirhandle *dh)
{
	for (size_t i = 0; i < dh->n; i++) {
		free(dh->v[i].name);
		free(dh->v[i].etag);
	}
	free(dh->v);
	free(dh);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	fs_ctx *fs = ctx(req);
	fs_itable_lock(fs->it);
	fs_inode *d = fs_itable_get(fs->it, ino);
	if (!d || !d->is_dir) {
		fs_itable_unlock(fs->it);
		fuse_reply_err(req, d ? ENOTDIR : ENOENT);
		return;
	}
	bool local = wr_is_local_dir(fs, d);
	int rc = local ? 0 : dir_load(fs, d);
	if (rc < 0) {
		fs_itable_unlock(fs->it);
		fuse_reply_err(req, -rc);
		return;
	}
	/* a snapshot keeps offsets stable while the listing is refreshed */
	fs_dirhandle *dh = calloc(1, sizeof *dh);
	size_t n = local || !d->listing ? 0 : d->listing->n;
	if (dh && n)
		dh->v = calloc(n, sizeof *dh->v);
	if (!dh || (n && !dh->v)) {
		fs_itable_unlock(fs->it);
		free(dh);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const ns_entry *e = &d->listing->v[i];
		dh->v[i] = (fs_dirent_snap){strdup(e->name),
					    e->etag ? strdup(e->etag) : NULL,
					    e->is_dir, e->size, e->mtime};
		if (!dh->v[i].name)
			break;
		dh->n++;
	}
	if (wr_merge_listing(fs, d, dh) < 0) {
		fs_itable_unlock(fs->it);
		dirhandle_free(dh);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* gone from the bucket (deleted since the parent was listed, or
	 * being deleted): ENOENT as for a removed local directory, never an
	 * empty listing; the mount root always exists, and so does a
	 * directory this mount holds in its overlay (a temp-named directory
	 * restored after a crash is in no listing) */
	if (!local && !wr_has_local_node(fs, d) && dh->n == 0 &&
	    d->listing && d->listing->vanished && d->path[0]) {
		fs_itable_unlock(fs->it);
		dirhandle_free(dh);
		fuse_reply_err(req, ENOENT);
		return;
	}
	dh->prev = NULL;
	dh->next = fs->dirhandles;
	if (fs->dirhandles)
		fs->dirhandles->prev = dh;
	fs->dirhandles = dh;
	fs_itable_unlock(fs->it);
	fi->fh = (uint64_t)(uintptr_t)dh;
	fi->cache_readdir = 0;
	fuse_reply_open(req, fi);
}

static fs_inode *snap_child(fs_ctx *fs, fs_inode *d, const fs_dirent_snap *s)
{
	ns_entry e = {.name = s->name, .is_dir = s->is_dir, .size = s->size,
		      .etag = s->etag, .mtime = s->mtime};
	return child_for(fs, d, &e);
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
		       off_t off, struct fuse_file_info *fi, bool plus)
{
	fs_ctx *fs = ctx(req);
	fs_dirhandle *dh = (fs_dirhandle *)(uintptr_t)fi->fh;
	char *out = malloc(size);
	if (!out) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	size_t used = 0;
	fs_itable_lock(fs->it);
	fs_inode *d = fs_itable_get(fs->it, ino);
	for (size_t i = (size_t)off; d && i < dh->n + 2; i++) {
		const char *name;
		fs_inode *c = NULL, *held = NULL;
		struct stat st;
		memset(&st, 0, sizeof st);
		if (i < 2) {
			name = i == 0 ? "." : "..";
			c = i == 0 || !d->parent ? d : d->parent;
		} else {
			name = dh->v[i - 2].name;
			c = snap_child(fs, d, &dh->v[i - 2]);
			if (!c)
				break;
			/* an empty object may be a symlink (its metadata
			 * says): the type must be right from the first
			 * reply, the kernel refuses an inode changing type */
			if (!c->is_dir && c->size == 0 && !c->has_attrs &&
			    !wr_fill_stat(fs, c, &st)) {
				fs_inode_ref(c);
				held = c;
				fs_check_meta(fs, c);
				memset(&st, 0, sizeof st);
			}
		}
		size_t need;
		if (plus) {
			struct fuse_entry_param ep;
			fill_entry(fs, c, &ep);
			if (i < 2) {
				/* "." and "..": no entry, no lookup count */
				ep.ino = 0;
				ep.entry_timeout = ep.attr_timeout = 0;
			}
			need = fuse_add_direntry_plus(req, out + used,
						      size - used, name, &ep,
						      (off_t)(i + 1));
			if (need <= size - used && i >= 2)
				c->nlookup++;
		} else {
			fill_stat(fs, c, &st);
			need = fuse_add_direntry(req, out + used, size - used,
						 name, &st, (off_t)(i + 1));
		}
		if (held) /* after the entry took its lookup count */
			fs_itable_unref(fs->it, held);
		if (need > size - used)
			break;
		used += need;
	}
	fs_itable_unlock(fs->it);
	fuse_reply_buf(req, out, used);
	free(out);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, true);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	fs_ctx *fs = ctx(req);
	fs_dirhandle *dh = (fs_dirhandle *)(uintptr_t)fi->fh;
	fs_itable_lock(fs->it);
	dirhandle_unlink(fs, dh);
	fs_itable_unlock(fs->it);
	dirhandle_free(dh);
	fuse_reply_err(req, 0);
}

/* ---- files ------------------------------------------------------------ */

/* Table locked. */
static void handle_link(fs_ctx *fs, fs_handle *h)
{
	h->prev = NULL;
	h->next = fs->handles;
	if (fs->handles)
		fs->handles->prev = h;
	fs->handles = h;
	h->linked = true;
}

static void handle_unlink(fs_ctx *fs, fs_handle *h)
{
	if (!h->linked)
		return;
	if (h->prev)
		h->prev->next = h->next;
	else
		fs->handles = h->next;
	if (h->next)
		h->next->prev = h->prev;
	h->linked = false;
}

/* counted: the handle was counted in its inode's open_handles. */
static void handle_free(fs_ctx *fs, fs_handle *h, bool counted)
{
	if (h->node) { /* fully set up: wait for reads still replying */
		pthread_rwlock_wrlock(&h->busy);
		pthread_rwlock_unlock(&h->busy);
		pthread_rwlock_destroy(&h->busy);
	}
	if (h->cf)
		cache_file_close(h->cf);
	if (h->stale_cf)
		cache_file_close(h->stale_cf);
	bool local = h->ov != NULL;
	if (local)
		wr_release(fs, h, counted);
	fs_itable_lock(fs->it);
	handle_unlink(fs, h);
	if (h->flushed)
		fs->closing--;
	if (h->flushed && h->pt_write) {
		fs->pt_closing--;
		fs_itable_broadcast(fs->it);
	}
	if (counted && !local)
		h->node->open_handles--;
	fs_itable_unref(fs->it, h->node);
	fs_itable_unlock(fs->it);
	pthread_mutex_destroy(&h->mu);
	free(h->key);
	free(h->win);
	free(h->vcrc);
	free(h);
}

bool fs_closing_handles(fs_ctx *fs)
{
	fs_itable_lock(fs->it);
	bool any = fs->closing > 0;
	fs_itable_unlock(fs->it);
	return any;
}

/* Opens the handle's object in the cache; on failure reads go uncached. */
static void attach_cache(fs_ctx *fs, fs_handle *h)
{
	if (!fs->cache || h->size == 0)
		return;
	/* downloads of a manifest-listed file are checked against it */
	cache_expect x = {0};
	uint32_t *crc = NULL;
	fs_itable_lock(fs->it);
	bool check = fs_manifest_blocks(h->node, h->etag, h->size, &x, &crc);
	fs_itable_unlock(fs->it);
	int rc;
	for (int attempt = 1;; attempt++) {
		rc = cache_file_open_expect(fs->cache, h->key, h->etag, h->size,
					    check ? &x : NULL, &h->cf, &h->hit);
		if (rc != -ENOSPC || attempt > 10 || !fs_closing_handles(fs))
			break;
		/* FUSE sends release after close() returns: a file just
		 * closed may still hold the space this open needs */
		struct timespec ts = {0, 20 * 1000000L};
		nanosleep(&ts, NULL);
	}
	if (check && rc != 0) { /* uncached reads check whole blocks */
		h->vcrc = crc;
		h->vblock = x.block;
		h->vn = x.n;
		crc = NULL;
	}
	free(crc);
	if (rc == 0)
		return;
	h->cf = NULL;
	cache_count_uncached(fs->cache);
	if (rc == -ENOSPC || rc == -EBUSY)
		log_info("open %s: the cache is full of pinned data; reading "
			 "uncached",
			 h->key);
	else
		log_warn("open %s: cache unavailable (%s); reading uncached",
			 h->key, strerror(-rc));
}

/*
 * FUSE passthrough (fs/passthrough.h).  The kernel refuses to mix modes on
 * one inode: while any handle is open without passthrough, a passthrough
 * open fails, and an inode bound to a backing file must be opened with it.
 * So the decision is taken under the table lock together with counting the
 * handle, and an open that registers the backing file makes concurrent
 * opens of the inode wait (pt_pending) until it is known.
 *
 * Table locked; returns true when the caller must register the backing
 * file (register_backing) after dropping the lock.
 */
static bool choose_backing(fs_ctx *fs, fs_inode *n, fs_handle *h)
{
	while (n->pt_pending)
		fs_itable_wait(fs->it);
	if (n->pt_backing_id > 0) {
		/* same version, checked by the caller: the inode stays bound */
		h->backing_id = n->pt_backing_id;
		return false;
	}
	if (!h->cf || !h->hit || !fs->pt.enabled || n->open_handles > 0)
		return false;
	n->pt_pending = true;
	return true;
}

/* Verifies the cached file and registers it as the inode's backing file. */
static void register_backing(fs_ctx *fs, fs_inode *n, fs_handle *h)
{
	int fd = cache_file_ready(h->cf, 0, h->size);
	int id = fd >= 0 ? fs_pt_backing_open(&fs->pt, fd) : fd;
	if (id <= 0)
		log_debug("passthrough for %s: %s", h->key, strerror(-id));
	fs_itable_lock(fs->it);
	n->pt_pending = false;
	if (id > 0) {
		n->pt_backing_id = id;
		free(n->pt_etag);
		n->pt_etag = strdup(h->etag);
		h->backing_id = id;
	}
	fs_itable_broadcast(fs->it);
	fs_itable_unlock(fs->it);
}

/*
 * Kernel page cache policy.  Pages of an inode hold one object version; the
 * inode remembers which (kc_etag).  Reopening the same version keeps them
 * (keep_cache); a new version invalidates them.  (Handles open on another
 * version never share the inode: bound_to_other_version.)  Table locked.
 */
static void set_page_cache_mode(fs_inode *n, const fs_handle *h,
				struct fuse_file_info *fi)
{
	fi->direct_io = 0;
	fi->keep_cache = n->kc_etag && strcmp(n->kc_etag, h->etag) == 0;
	if (!fi->keep_cache) {
		free(n->kc_etag);
		n->kc_etag = strdup(h->etag);
	}
}

/* Copies n's attributes into hr when they are recent enough to pin. */
static bool fresh_attrs(fs_ctx *fs, fs_inode *n, s3_head_result *hr)
{
	fs_itable_lock(fs->it);
	bool fresh = n->etag && n->etag[0] &&
		     fs_now() - n->attr_time < fs->o.attr_timeout;
	if (fresh) {
		hr->size = n->size;
		hr->mtime = n->mtime;
		snprintf(hr->etag, sizeof hr->etag, "%s", n->etag);
	}
	fs_itable_unlock(fs->it);
	return fresh;
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fs_ctx *fs = ctx(req);
	if (wr_open(req, ino, fi))
		return; /* a local file, or opened for writing */
	fs_itable_lock(fs->it);
	fs_inode *n = fs_itable_get(fs->it, ino);
	if (!n || n->is_dir) {
		fs_itable_unlock(fs->it);
		fuse_reply_err(req, n ? EISDIR : ENOENT);
		return;
	}
	fs_inode_ref(n);
	char *key = object_key(fs, n);
	fs_itable_unlock(fs->it);

	/* pin the version this handle reads: the one listed or HEADed within
	 * attr_timeout (the same staleness the kernel's attribute cache has),
	 * else a fresh HEAD */
	s3_head_result hr;
	s3_err e;
	fs_handle *h = calloc(1, sizeof *h);
	bool fresh = fresh_attrs(fs, n, &hr);
	if (!h || !key || (!fresh && s3_head(fs->s3, key, &hr, &e) < 0)) {
		int err = h && key ? e.err : ENOMEM;
		if (h && key)
			log_warn("open %s: %s", key, e.msg);
		free(h);
		free(key);
		fs_itable_lock(fs->it);
		fs_itable_unref(fs->it, n);
		fs_itable_unlock(fs->it);
		fuse_reply_err(req, err);
		return;
	}
	h->node = n;
	h->key = key;
	h->size = hr.size;
	snprintf(h->etag, sizeof h->etag, "%s", hr.etag);
	pthread_mutex_init(&h->mu, NULL);
	pthread_rwlock_init(&h->busy, NULL);
	h->ra = 1u << 20;
	attach_cache(fs, h);

	fs_itable_lock(fs->it);
	if (bound_to_other_version(n, hr.etag)) {
		/* the VFS retries the path walk, whose lookup gets a new inode
		 * (from a fresh listing: the cached one may still name the
		 * old version) */
		fs_itable_detach(fs->it, n);
		if (n->parent)
			n->parent->listing_time = -1e9;
		fs_itable_unlock(fs->it);
		handle_free(fs, h, false);
		fuse_reply_err(req, ESTALE);
		return;
	}
	bool reg = choose_backing(fs, n, h);
	n->open_handles++;
	handle_link(fs, h);
	n->size = hr.size;
	/* HEAD has whole seconds, listings milliseconds: keep the finer one
	 * unless the second changed, or the kernel would see the mtime flip
	 * and drop the file's page cache on every open */
	if (hr.mtime.tv_sec && hr.mtime.tv_sec != n->mtime.tv_sec &&
	    !n->has_attrs)
		n->mtime = hr.mtime;
	free(n->etag);
	n->etag = strdup(hr.etag);
	n->attr_time = fs_now();
	set_page_cache_mode(n, h, fi);
	/* a version new to the inode (no kept pages): may switch to a newer
	 * one if it is gone before the first read (switch_version) */
	h->etag_switchable = !fi->keep_cache;
	fs_itable_unlock(fs->it);
	if (reg)
		register_backing(fs, n, h);
	if (h->backing_id > 0) /* the kernel reads the backing file */
		fi->keep_cache = fi->direct_io = 0;

	fi->fh = (uint64_t)(uintptr_t)h;
	fs_pt_mark_next_open(h->backing_id);
	if (fuse_reply_open(req, fi) == -ENOENT)
		handle_free(fs, h, true); /* interrupted open */
}

/*
 * Fetches the whole blocks [off, off+len) into h->win and checks each
 * against its manifest CRC: 0, -EAGAIN (damaged: try again) or an error
 * (-EIO once attempt is past the retries).  h->mu held.
 */
static int fetch_checked(fs_ctx *fs, fs_handle *h, uint64_t off, size_t len,
			 int attempt)
{
	size_t got = 0;
	s3_err e;
	h->win_len = 0;
	if (s3_get_range(fs->s3, h->key, off, len, h->etag, h->win, &got,
			 &e) < 0 || got != len) {
		log_error("read %s: %s", h->key,
			  got != len ? "short read" : e.msg);
		return got != len || e.err == ESTALE || !e.err ? -EIO : -e.err;
	}
	for (size_t at = 0; at < len; at += h->vblock) {
		uint64_t i = (off + at) / h->vblock;
		size_t n = len - at < h->vblock ? len - at : h->vblock;
		uint32_t crc = proto_crc32c(0, h->win + at, n);
		if (i < h->vn && crc == h->vcrc[i])
			continue;
		if (attempt <= CACHE_VERIFY_RETRIES)
			return -EAGAIN;
		log_error("read %s: bytes at offset %llu (%zu bytes) do not "
			  "match its manifest after %d attempts (CRC-32C %08x, "
			  "the manifest says %08x): reads there fail with EIO",
			  h->key, (unsigned long long)(off + at), n, attempt,
			  crc, i < h->vn ? h->vcrc[i] : 0);
		return -EIO;
	}
	h->win_off = off;
	h->win_len = got;
	return 0;
}

/* Fetches a window starting at off into h->win.  h->mu held. */
static int window_fill(fs_ctx *fs, fs_handle *h, uint64_t off, size_t want)
{
	bool seq = off == h->next_seq;
	h->ra = seq ? h->ra * 2 : (1u << 20);
	if (h->ra > fs->o.readahead_max)
		h->ra = fs->o.readahead_max;
	size_t len = want > h->ra ? want : h->ra;
	if (len > h->size - off)
		len = (size_t)(h->size - off);
	if (h->vcrc) { /* whole blocks, so that each can be checked */
		uint64_t end = off + len;
		off -= off % h->vblock;
		end += (h->vblock - end % h->vblock) % h->vblock;
		len = (size_t)((end < h->size ? end : h->size) - off);
	}
	if (len > h->win_cap) {
		char *p = realloc(h->win, len);
		if (!p)
			return -ENOMEM;
		h->win = p;
		h->win_cap = len;
	}
	size_t got = 0;
	s3_err e;
	for (int attempt = 1; h->vcrc; attempt++) {
		int rc = fetch_checked(fs, h, off, len, attempt);
		if (rc != -EAGAIN)
			return rc;
	}
	if (s3_get_range(fs->s3, h->key, off, len, h->etag, h->win, &got,
			 &e) < 0) {
		h->win_len = 0;
		if (e.err == ESTALE)
			log_error("read %s: the object changed since it was "
				  "opened; reopen to read the new version",
				  h->key);
		else
			log_error("read %s: %s", h->key, e.msg);
		return e.err == ESTALE ? -EIO : -(e.err ? e.err : EIO);
	}
	h->win_off = off;
	h->win_len = got;
	return 0;
}

/* Serves a read from the cache file, spliced when the kernel allows. */
/* Errors of the local cache disk, as opposed to the remote object's. */
static bool local_cache_error(int err)
{
	return err == ENOSPC || err == EDQUOT || err == EROFS || err == EFBIG;
}

/*
 * Returns false, without replying, when the local cache cannot hold the
 * handle's object any more (its disk filled up, ...): the caller then reads
 * uncached — losing the cache never fails a read by itself.  Errors of the
 * object (changed or deleted remotely) are replied as they are.
 */
/*
 * The object was replaced since open pinned its version: the listing that
 * open trusted was up to attr_timeout old, and the old bytes are gone from
 * the bucket (the GET's If-Match failed).  A handle that has returned
 * nothing yet takes the current version when its size is the one the
 * kernel knows, as if it had been opened a moment later: a reader of a
 * `latest` file another host rewrites gets the new text, not EIO.  It
 * was opened without keep_cache (the version was new to the inode), so
 * the kernel holds no pages of the old one.  Otherwise the inode's
 * attributes are dropped, so that the next open sees the new version, and
 * the read fails as before.  Returns 0 when switched.
 */
static int switch_version(fs_ctx *fs, fs_handle *h, bool keep_cache)
{
	s3_head_result hr;
	s3_err e;
	pthread_mutex_lock(&h->mu);
	char was[sizeof h->etag];
	snprintf(was, sizeof was, "%s", h->etag);
	int rc = s3_head(fs->s3, h->key, &hr, &e) < 0 ? -EIO : 0;
	if (!rc && !strcmp(hr.etag, was))
		rc = -EIO; /* the same version: it did not change after all */
	bool can = !rc && hr.size == h->size && !keep_cache &&
		   !atomic_load(&h->served) && !h->stale_cf;
	if (can) {
		cache_file *old = __atomic_load_n(&h->cf, __ATOMIC_ACQUIRE);
		snprintf(h->etag, sizeof h->etag, "%s", hr.etag);
		free(h->vcrc);
		h->vcrc = NULL;
		h->cf = NULL;
		attach_cache(fs, h);
		cache_file *nw = h->cf;
		h->stale_cf = old;
		__atomic_store_n(&h->cf, nw, __ATOMIC_RELEASE);
		log_info("read %s: replaced since it was opened; reading the "
			 "new version",
			 h->key);
	}
	pthread_mutex_unlock(&h->mu);
	fs_itable_lock(fs->it);
	fs_inode *n = h->node;
	if (!rc) {
		free(n->etag);
		n->etag = strdup(hr.etag);
		n->size = hr.size;
		n->attr_time = can ? fs_now() : 0;
	} else {
		n->attr_time = 0;
	}
	if (n->parent)
		n->parent->listing_time = -1e9;
	fs_itable_unlock(fs->it);
	return can ? 0 : -EIO;
}

static bool read_cached(fuse_req_t req, fs_handle *h, uint64_t off,
			size_t size)
{
	cache_file *cf = __atomic_load_n(&h->cf, __ATOMIC_ACQUIRE);
	int fd = cache_file_ready(cf, off, size);
	if (fd == -ESTALE && h->etag_switchable &&
	    switch_version(ctx(req), h, false) == 0) {
		cf = __atomic_load_n(&h->cf, __ATOMIC_ACQUIRE);
		fd = cf ? cache_file_ready(cf, off, size) : -EIO;
	}
	if (fd == -ESTALE)
		fd = -EIO;
	if (fd < 0 && !local_cache_error(-fd)) {
		fuse_reply_err(req, -fd);
		return true;
	}
	if (fd < 0) {
		if (!atomic_exchange(&h->cache_failed, true)) {
			log_warn("read %s: the cache cannot serve it (%s); "
				 "reading uncached",
				 h->key, strerror(-fd));
			cache_count_uncached(ctx(req)->cache);
		}
		return false;
	}
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(size);
	bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	bv.buf[0].fd = fd;
	bv.buf[0].pos = (off_t)off;
	atomic_store(&h->served, true);
	fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
	return true;
}

static void do_read(fuse_req_t req, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	fs_ctx *fs = ctx(req);
	fs_handle *h = (fs_handle *)(uintptr_t)fi->fh;
	uint64_t uoff = (uint64_t)off;
	if (off < 0 || uoff >= h->size || size == 0) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > h->size - uoff)
		size = (size_t)(h->size - uoff);
	if (__atomic_load_n(&h->cf, __ATOMIC_ACQUIRE) &&
	    !atomic_load(&h->cache_failed) && read_cached(req, h, uoff, size))
		return;
	pthread_mutex_lock(&h->mu);
	bool hit = uoff >= h->win_off && uoff + size <= h->win_off + h->win_len;
	int rc = hit ? 0 : window_fill(fs, h, uoff, size);
	if (rc == 0 && uoff + size > h->win_off + h->win_len)
		size = (size_t)(h->win_off + h->win_len - uoff); /* short */
	if (rc < 0) {
		pthread_mutex_unlock(&h->mu);
		fuse_reply_err(req, -rc);
		return;
	}
	h->next_seq = uoff + size;
	atomic_store(&h->served, true);
	fuse_reply_buf(req, h->win + (uoff - h->win_off), size);
	pthread_mutex_unlock(&h->mu);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	fs_handle *h = (fs_handle *)(uintptr_t)fi->fh;
	pthread_rwlock_rdlock(&h->busy);
	if (h->ov)
		wr_read(req, h, size, off);
	else
		do_read(req, size, off, fi);
	pthread_rwlock_unlock(&h->busy);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino,
		     struct fuse_file_info *fi)
{
	fs_ctx *fs = ctx(req);
	fs_handle *h = (fs_handle *)(uintptr_t)fi->fh;
	fs_itable_lock(fs->it);
	if (!h->flushed) {
		h->flushed = true;
		fs->closing++;
		if (h->pt_write)
			fs->pt_closing++;
	}
	fs_itable_unlock(fs->it);
	if (h->ov)
		wr_flush(fs, h, fuse_req_ctx(req)->uid);
	fuse_reply_err(req, 0);
}

static void op_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	handle_free(ctx(req), (fs_handle *)(uintptr_t)fi->fh, true);
	fuse_reply_err(req, 0);
}

/* ---- misc ------------------------------------------------------------- */

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;
	memset(&sv, 0, sizeof sv);
	sv.f_bsize = 1 << 20;
	sv.f_frsize = 4096;
	sv.f_blocks = sv.f_bfree = sv.f_bavail = (fsblkcnt_t)1 << 38; /* 1 PiB */
	sv.f_files = sv.f_ffree = sv.f_favail = (fsfilcnt_t)1 << 32;
	sv.f_namemax = 255;
	wr_statfs(ctx(req), &sv);
	fuse_reply_statfs(req, &sv);
}

static void op_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	fuse_reply_err(req, (mask & W_OK) && !ctx(req)->eng ? EROFS : 0);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	/* splice cached bytes straight from the cache file to the kernel */
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE;
	if (conn->capable & FUSE_CAP_SPLICE_MOVE)
		conn->want |= FUSE_CAP_SPLICE_MOVE;
	/* written bytes spliced from the kernel into the staging file */
	if (conn->capable & FUSE_CAP_SPLICE_READ)
		conn->want |= FUSE_CAP_SPLICE_READ;
	conn->max_write = 1u << 20;
	conn->max_readahead = conn->max_readahead > (1u << 20)
				      ? conn->max_readahead
				      : (1u << 20);
}

static const struct fuse_lowlevel_ops ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.open = op_open,
	.read = op_read,
	.flush = op_flush,
	.release = op_release,
	.statfs = op_statfs,
	.access = op_access,
	/* the write path: fs/write.c */
	.getxattr = wr_getxattr,
	.listxattr = wr_listxattr,
	.setxattr = wr_setxattr,
	.removexattr = wr_removexattr,
	.mknod = wr_mknod,
	.mkdir = wr_mkdir,
	.unlink = wr_unlink,
	.rmdir = wr_rmdir,
	.symlink = wr_symlink,
	.readlink = wr_readlink,
	.rename = wr_rename,
	.link = wr_link,
	.setattr = wr_setattr,
	.create = wr_create,
	.write_buf = wr_write_buf,
	.fsync = wr_fsync,
	.fsyncdir = wr_fsyncdir,
	.fallocate = wr_fallocate,
};

const struct fuse_lowlevel_ops *fs_lowlevel_ops(void)
{
	return &ops;
}

/* ---- for fs/write.c --------------------------------------------------- */

fs_ctx *fs_req_ctx(fuse_req_t req)
{
	return ctx(req);
}

void fs_fill_stat(fs_ctx *fs, const fs_inode *n, struct stat *st)
{
	fill_stat(fs, n, st);
}

void fs_fill_entry(fs_ctx *fs, fs_inode *n, struct fuse_entry_param *ep)
{
	fill_entry(fs, n, ep);
}

int fs_dir_load(fs_ctx *fs, fs_inode *d)
{
	return dir_load(fs, d);
}

char *fs_object_key(fs_ctx *fs, const fs_inode *n)
{
	return object_key(fs, n);
}

void fs_handle_link(fs_ctx *fs, fs_handle *h)
{
	handle_link(fs, h);
}

void fs_handle_free(fs_ctx *fs, fs_handle *h, bool counted)
{
	handle_free(fs, h, counted);
}
