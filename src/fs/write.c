/*
 * The write path of the FUSE operations (doc/commit.md).
 *
 * Everything written lands in staging files of the commit engine
 * (commit/engine.h) and in the overlay (fs/overlay.h), which lookups and
 * listings consult before the remote listing.  This file decides what a
 * call means for the bucket — which transaction a name belongs to, when a
 * transaction commits, what a rename or an unlink of a remote name does —
 * and tells the engine, in the order the application issued the calls.
 *
 * Transactions: a directory created here whose parent is not local roots
 * one, with everything under it; a file written outside any local
 * directory is one by itself and commits when its last writer closes it.
 * A directory transaction commits on rename of its root, fsync of its
 * root, `ckptfs commit`, sync, unmount, or after commit_delay seconds with
 * no open handle and no change (the idle thread).  A root with a temp name
 * (eng_is_temp_name) only commits once renamed to a final one.
 *
 * Remote deletes are batched (struct wr_deletes): `rm -r` unlinks every
 * file before it removes the directory, and a directory delete is atomic
 * for readers while file-by-file deletes are not, so unlinks of remote
 * names are held until the directory above them goes (then one directory
 * delete replaces them), until any other change reaches the engine (order
 * is kept), or for a second of quiet.
 *
 * Locking: the inode table's mutex guards the overlay too; it is dropped
 * around every engine call that can wait on the network (marker PUTs,
 * waits) and around data copies.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "commit/engine.h"
#include "fs/ops-internal.h"
#include "util/log.h"

#define DELETE_QUIET_S 1.0

typedef struct wr_del {
	char *path;
	bool is_dir;
} wr_del;

struct wr_deletes {
	wr_del *v;
	size_t n, cap;
	double last;
};

/* ---- setup ------------------------------------------------------------- */

void wr_init(fs_ctx *fs)
{
	ov_init(&fs->ov);
	pthread_cond_init(&fs->idle_cv, NULL);
	fs->dels = calloc(1, sizeof *fs->dels);
}

static void dels_clear(struct wr_deletes *d)
{
	for (size_t i = 0; d && i < d->n; i++)
		free(d->v[i].path);
	if (d)
		d->n = 0;
}

void wr_destroy(fs_ctx *fs)
{
	wr_shutdown(fs);
	ov_destroy(&fs->ov);
	pthread_cond_destroy(&fs->idle_cv);
	if (fs->dels) {
		dels_clear(fs->dels);
		free(fs->dels->v);
		free(fs->dels);
	}
}

eng *fs_ctx_engine(fs_ctx *fs)
{
	return fs->eng;
}

static char *child_path(const fs_inode *p, const char *name)
{
	return ov_join(p->path, name);
}

static double now_s(void)
{
	return fs_now();
}

/* ---- attributes -------------------------------------------------------- */

static ov_node *local_of(fs_ctx *fs, const fs_inode *n)
{
	if (!fs->eng && !fs->ov.n)
		return NULL;
	ov_node *o = ov_get(&fs->ov, n->path);
	return o && o->kind != OV_WHITEOUT ? o : NULL;
}

bool wr_fill_stat(fs_ctx *fs, const fs_inode *n, struct stat *st)
{
	ov_node *o = local_of(fs, n);
	if (!o)
		return false;
	memset(st, 0, sizeof *st);
	st->st_ino = n->ino;
	st->st_uid = o->uid;
	st->st_gid = o->gid;
	switch (o->kind) {
	case OV_DIR:
		st->st_mode = S_IFDIR | (o->mode & 07777);
		st->st_nlink = 2;
		st->st_size = 4096;
		break;
	case OV_LINK:
		st->st_mode = S_IFLNK | 0777;
		st->st_nlink = 1;
		st->st_size = (off_t)strlen(o->target);
		break;
	default:
		st->st_mode = S_IFREG | (o->mode & 07777);
		st->st_nlink = 1;
		st->st_size = (off_t)o->size;
		st->st_blocks = (blkcnt_t)((o->size + 511) / 512);
	}
	st->st_blksize = 1 << 20;
	st->st_mtim = st->st_atim = o->mtime;
	st->st_ctim = o->ctime;
	return true;
}

bool wr_is_local_dir(fs_ctx *fs, const fs_inode *n)
{
	ov_node *o = local_of(fs, n);
	return o && o->kind == OV_DIR && !o->merge;
}

int wr_lookup(fs_ctx *fs, fs_inode *p, const char *name, fs_inode **out)
{
	*out = NULL;
	if (!fs->ov.n)
		return 0;
	char *path = child_path(p, name);
	if (!path)
		return 0;
	ov_node *o = ov_get(&fs->ov, path);
	free(path);
	if (!o)
		return 0;
	if (o->kind == OV_WHITEOUT)
		return 1;
	*out = fs_itable_child(fs->it, p, name, o->kind == OV_DIR);
	return *out ? 1 : 0;
}

typedef struct merge_ctx {
	fs_dirhandle *dh;
	size_t cap;
	int rc;
} merge_ctx;

static void merge_one(void *arg, ov_node *o)
{
	merge_ctx *m = arg;
	fs_dirhandle *dh = m->dh;
	const char *name = strrchr(o->path, '/');
	name = name ? name + 1 : o->path;
	for (size_t i = 0; i < dh->n; i++) {
		if (strcmp(dh->v[i].name, name))
			continue;
		free(dh->v[i].name);
		free(dh->v[i].etag);
		dh->v[i] = dh->v[--dh->n];
		break;
	}
	if (o->kind == OV_WHITEOUT || m->rc)
		return;
	if (dh->n == m->cap || !dh->v) {
		size_t cap = m->cap ? 2 * m->cap : 16;
		if (cap < dh->n + 1)
			cap = dh->n + 16;
		fs_dirent_snap *v = realloc(dh->v, cap * sizeof *v);
		if (!v) {
			m->rc = -1;
			return;
		}
		dh->v = v;
		m->cap = cap;
	}
	fs_dirent_snap *s = &dh->v[dh->n];
	memset(s, 0, sizeof *s);
	s->name = strdup(name);
	if (!s->name) {
		m->rc = -1;
		return;
	}
	s->is_dir = o->kind == OV_DIR;
	s->size = o->size;
	s->mtime = o->mtime;
	dh->n++;
}

int wr_merge_listing(fs_ctx *fs, fs_inode *d, fs_dirhandle *dh)
{
	if (!fs->ov.n)
		return 0;
	merge_ctx m = {dh, dh->n, 0};
	ov_children(&fs->ov, d->path, merge_one, &m);
	return m.rc;
}

void wr_statfs(fs_ctx *fs, struct statvfs *sv)
{
	if (!fs->eng || !fs->cache)
		return;
	struct statvfs real;
	if (statvfs(cache_dir(fs->cache), &real) == 0) {
		/* what can still be written is what the staging disk holds */
		uint64_t avail = (uint64_t)real.f_bavail * real.f_frsize;
		sv->f_bavail = sv->f_bfree = (fsblkcnt_t)(avail / sv->f_frsize);
	}
}

/* ---- transactions ------------------------------------------------------ */

static void meta_of(const ov_node *o, eng_meta *m, buf *xa)
{
	memset(m, 0, sizeof *m);
	m->mode = o->mode & 07777;
	m->uid = o->uid;
	m->gid = o->gid;
	m->mtime = o->mtime;
	/* the engine takes the overlay's own record format */
	(void)xa;
	if (o->xattrs.len) {
		m->xattrs = o->xattrs.data;
		m->xattrs_len = o->xattrs.len;
	}
	m->symlink = o->kind == OV_LINK ? o->target : NULL;
}

/* Sends the held remote deletes to the engine, in order.  Table locked. */
static void flush_deletes(fs_ctx *fs)
{
	struct wr_deletes *d = fs->dels;
	for (size_t i = 0; d && i < d->n; i++) {
		int rc = eng_remote_delete(fs->eng, d->v[i].path,
					   d->v[i].is_dir);
		if (rc < 0)
			log_error("delete of %s could not be journaled: %s",
				  d->v[i].path, strerror(-rc));
	}
	dels_clear(d);
}

/* Holds a remote delete of path (see the top of the file). */
static int hold_delete(fs_ctx *fs, const char *path, bool is_dir)
{
	struct wr_deletes *d = fs->dels;
	size_t pl = strlen(path);
	/* a directory delete replaces the deletes of what it holds */
	if (is_dir) {
		size_t k = 0;
		for (size_t i = 0; i < d->n; i++) {
			if (!strncmp(d->v[i].path, path, pl) &&
			    d->v[i].path[pl] == '/')
				free(d->v[i].path);
			else
				d->v[k++] = d->v[i];
		}
		d->n = k;
	}
	/* deletes of unrelated trees keep their order: send what is held */
	if (d->n) {
		char *top = strdup(d->v[0].path);
		char *slash = top ? strchr(top, '/') : NULL;
		if (slash)
			*slash = 0;
		bool related = top && !strncmp(path, top, strlen(top)) &&
			       (path[strlen(top)] == '/' ||
				path[strlen(top)] == 0);
		free(top);
		if (!related)
			flush_deletes(fs);
	}
	if (d->n == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 64;
		wr_del *v = realloc(d->v, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		d->v = v;
		d->cap = cap;
	}
	d->v[d->n].path = strdup(path);
	if (!d->v[d->n].path)
		return -ENOMEM;
	d->v[d->n++].is_dir = is_dir;
	d->last = now_s();
	return 0;
}

/* Before any other fact reaches the engine.  Table locked. */
static void ordered(fs_ctx *fs)
{
	if (fs->dels && fs->dels->n)
		flush_deletes(fs);
}

/* Nearest ancestor of directory inode p (p included) that readers filter
 * by manifests, or NULL (malloc'd).  Table locked. */
static char *manifest_root(fs_ctx *fs, fs_inode *p)
{
	for (fs_inode *a = p; a; a = a->parent) {
		ov_node *o = local_of(fs, a);
		if (o && o->kind == OV_DIR && o->txn && o->txn->is_dir &&
		    !strcmp(o->txn->root, a->path) && o->txn->sealed)
			return strdup(a->path); /* committing: has a manifest */
		if (o)
			continue;
		if (a->manifest && a->manifest->committed)
			return strdup(a->path);
	}
	return NULL;
}

/*
 * The transaction a new name at path (child of directory inode p) joins:
 * the one of a local parent directory still open, else a new one rooted
 * at path.  Table locked; drops it while the engine PUTs a marker.
 */
static int txn_for_new(fs_ctx *fs, fs_inode *p, const char *path, bool is_dir,
		       ov_txn **out)
{
	ov_node *pd = local_of(fs, p);
	if (pd && pd->kind == OV_DIR && pd->txn && !pd->txn->sealed) {
		*out = pd->txn;
		return 0;
	}
	ordered(fs);
	char *mroot = manifest_root(fs, p);
	fs_itable_unlock(fs->it);
	uint64_t id = 0;
	int rc = eng_txn_begin(fs->eng, path, is_dir, mroot, &id);
	free(mroot);
	fs_itable_lock(fs->it);
	if (rc < 0) {
		log_error("%s: cannot start its transaction: %s", path,
			  strerror(-rc));
		return rc;
	}
	ov_txn *x = ov_txn_add(&fs->ov, id, path, is_dir);
	if (!x)
		return -ENOMEM;
	x->last_change = now_s();
	*out = x;
	return 0;
}

static void touch(ov_txn *x)
{
	if (x)
		x->last_change = now_s();
}

static bool is_single_root(const ov_node *o)
{
	return o->txn && !o->txn->is_dir && !strcmp(o->txn->root, o->path);
}

/* Seals x (a commit trigger).  Table locked. */
static int seal(fs_ctx *fs, ov_txn *x)
{
	if (x->sealed)
		return 0;
	if (x->is_dir && eng_is_temp_name(fs->eng, x->root))
		return 0; /* waits for a final name */
	ordered(fs);
	int rc = eng_txn_seal(fs->eng, x->id);
	if (rc == 0)
		x->sealed = true;
	else
		log_error("commit of %s could not be journaled: %s", x->root,
			  strerror(-rc));
	return rc;
}

/*
 * Hands o's staging file to the engine (its bytes are final for now).  A
 * single-file transaction then commits.  Table locked.
 */
static int put_file(fs_ctx *fs, ov_node *o)
{
	if (!o->dirty || !o->st || !o->txn)
		return 0;
	/* a file of a transaction already committing gets its own */
	if (o->txn->sealed && !is_single_root(o)) {
		ov_txn *nx = NULL;
		char *mroot = strdup(o->txn->root);
		ordered(fs);
		fs_itable_unlock(fs->it);
		uint64_t id = 0;
		int rc = eng_txn_begin(fs->eng, o->path, false, mroot, &id);
		free(mroot);
		fs_itable_lock(fs->it);
		if (rc < 0)
			return rc;
		nx = ov_txn_add(&fs->ov, id, o->path, false);
		if (!nx)
			return -ENOMEM;
		o->txn->nodes--;
		o->txn = nx;
		nx->nodes++;
	} else if (o->txn->sealed) {
		/* a rewrite of a committing single file: a new transaction,
		 * ordered after the first */
		ordered(fs);
		fs_itable_unlock(fs->it);
		uint64_t id = 0;
		int rc = eng_txn_begin(fs->eng, o->path, false, NULL, &id);
		fs_itable_lock(fs->it);
		if (rc < 0)
			return rc;
		ov_txn *nx = ov_txn_add(&fs->ov, id, o->path, false);
		if (!nx)
			return -ENOMEM;
		o->txn->nodes--;
		o->txn = nx;
		nx->nodes++;
	}
	ordered(fs);
	eng_meta m;
	buf xa = BUF_INIT;
	meta_of(o, &m, &xa);
	int rc = eng_file_put(fs->eng, o->txn->id, o->path, o->st->sid,
			      o->size, &m);
	buf_free(&xa);
	if (rc < 0) {
		log_error("%s: cannot hand the file to the commit engine: %s",
			  o->path, strerror(-rc));
		return rc;
	}
	o->st->handed = true;
	o->put = true;
	o->dirty = false;
	touch(o->txn);
	if (is_single_root(o) && o->writers == 0)
		return seal(fs, o->txn);
	return 0;
}

/* ---- staging ----------------------------------------------------------- */

static void stage_discard_cb(void *arg, uint64_t sid)
{
	eng_stage_discard(arg, sid);
}

static ov_stage *stage_new(fs_ctx *fs, int fd, uint64_t sid)
{
	ov_stage *s = ov_stage_new(fd, sid);
	if (s) {
		s->discard = stage_discard_cb;
		s->discard_arg = fs->eng;
	}
	return s;
}

/* A new empty staging file for o.  Table locked (creation is local). */
static int new_stage(fs_ctx *fs, ov_node *o)
{
	uint64_t sid = 0;
	int fd = eng_stage_create(fs->eng, &sid);
	if (fd < 0)
		return fd;
	ov_stage *s = stage_new(fs, fd, sid);
	if (!s) {
		close(fd);
		eng_stage_discard(fs->eng, sid);
		return -ENOMEM;
	}
	ov_set_stage(o, s);
	return 0;
}

static int copy_fd(int in, int out, uint64_t len)
{
	loff_t io = 0, oo = 0;
	while ((uint64_t)io < len) {
		ssize_t n = copy_file_range(in, &io, out, &oo,
					    (size_t)(len - (uint64_t)io), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EXDEV || errno == ENOSYS ||
			      errno == EOPNOTSUPP || errno == EINVAL)) {
			/* plain copy */
			char *b = malloc(1 << 20);
			if (!b)
				return -ENOMEM;
			while ((uint64_t)io < len) {
				size_t want = len - (uint64_t)io > (1 << 20)
						      ? (1 << 20)
						      : (size_t)(len - (uint64_t)io);
				ssize_t r = pread(in, b, want, io);
				if (r <= 0) {
					free(b);
					return r < 0 ? -errno : -EIO;
				}
				if (pwrite(out, b, (size_t)r, oo) != r) {
					free(b);
					return -errno ? -errno : -EIO;
				}
				io += r;
				oo += r;
			}
			free(b);
			return 0;
		}
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO; /* the source is shorter than recorded */
	}
	return 0;
}

/*
 * Makes o's staging file writable: one handed to the engine is copied
 * first (keep bytes [0, keep)).  Table locked; drops it for the copy.
 */
static int writable_stage(fs_ctx *fs, ov_node *o, uint64_t keep)
{
	if (o->st && !o->st->handed)
		return 0;
	ov_stage *old = o->st;
	if (old)
		ov_stage_ref(old);
	uint64_t sid = 0;
	int fd = eng_stage_create(fs->eng, &sid);
	if (fd < 0) {
		if (old)
			ov_stage_unref(old);
		return fd;
	}
	int rc = 0;
	if (old && keep) {
		fs_itable_unlock(fs->it);
		rc = copy_fd(old->fd, fd, keep);
		fs_itable_lock(fs->it);
	}
	if (old)
		ov_stage_unref(old);
	ov_stage *s = rc == 0 ? stage_new(fs, fd, sid) : NULL;
	if (!s) {
		close(fd);
		eng_stage_discard(fs->eng, sid);
		return rc < 0 ? rc : -ENOMEM;
	}
	if (o->st != old && o->st && !o->st->handed) {
		/* another thread made one meanwhile */
		ov_stage_unref(s); /* discards it */
		return 0;
	}
	ov_set_stage(o, s);
	return 0;
}

/*
 * Copy-on-write of a remote file into staging file fd: its bytes come
 * through the read cache (or ranged GETs without one), never guessed.
 */
static int fetch_remote(fs_ctx *fs, const char *key, int fd, uint64_t *size)
{
	s3_head_result hr;
	s3_err e;
	if (s3_head(fs->s3, key, &hr, &e) < 0) {
		log_error("copy-on-write of %s: %s", key, e.msg);
		return -(e.err ? e.err : EIO);
	}
	*size = hr.size;
	if (hr.size == 0)
		return 0;
	if (fs->cache) {
		cache_file *cf = NULL;
		bool hit = false;
		int rc = cache_file_open(fs->cache, key, hr.etag, hr.size, &cf,
					 &hit);
		if (rc == 0) {
			int in = cache_file_ready(cf, 0, (size_t)hr.size);
			rc = in < 0 ? in : copy_fd(in, fd, hr.size);
			cache_file_close(cf);
			if (rc == 0)
				return 0;
		}
		log_info("copy-on-write of %s: cache unavailable (%s); "
			 "downloading directly",
			 key, strerror(-rc));
	}
	size_t chunk = 8u << 20;
	char *b = malloc(chunk);
	if (!b)
		return -ENOMEM;
	for (uint64_t off = 0; off < hr.size;) {
		size_t want = hr.size - off > chunk ? chunk
						    : (size_t)(hr.size - off);
		size_t got = 0;
		if (s3_get_range(fs->s3, key, off, want, hr.etag, b, &got,
				 &e) < 0 || got == 0) {
			free(b);
			log_error("copy-on-write of %s: %s", key, e.msg);
			return -(e.err ? e.err : EIO);
		}
		if (pwrite(fd, b, got, (off_t)off) != (ssize_t)got) {
			int err = errno;
			free(b);
			return -err;
		}
		off += got;
	}
	free(b);
	return 0;
}

/* ---- handles ----------------------------------------------------------- */

static fs_handle *local_handle(fs_ctx *fs, fs_inode *n, ov_node *o,
			       bool writable)
{
	fs_handle *h = calloc(1, sizeof *h);
	if (!h)
		return NULL;
	h->node = n;
	fs_inode_ref(n);
	n->open_handles++;
	h->ov = o;
	ov_node_ref(o);
	o->opens++;
	if (o->txn)
		o->txn->open++;
	h->writable = writable;
	if (writable)
		o->writers++;
	pthread_mutex_init(&h->mu, NULL);
	pthread_rwlock_init(&h->busy, NULL);
	fs_handle_link(fs, h);
	return h;
}

static void open_reply(fuse_req_t req, fs_handle *h, struct fuse_file_info *fi)
{
	fi->fh = (uint64_t)(uintptr_t)h;
	fi->direct_io = 0;
	fi->keep_cache = 0;
	if (fuse_reply_open(req, fi) == -ENOENT)
		fs_handle_free(fs_req_ctx(req), h, true);
}

/* A remote file becomes local (copy-on-write).  Table locked; dropped for
 * the download. */
static int make_local_file(fs_ctx *fs, fs_inode *n, bool truncate,
			   ov_node **out)
{
	ov_txn *x = NULL;
	fs_inode *p = n->parent;
	int rc = txn_for_new(fs, p, n->path, false, &x);
	if (rc < 0)
		return rc;
	ov_node *o = ov_get(&fs->ov, n->path);
	if (o && o->kind != OV_WHITEOUT) { /* raced with another open */
		*out = o;
		return 0;
	}
	if (o)
		ov_remove(&fs->ov, o);
	o = ov_add(&fs->ov, n->path, OV_FILE, x);
	if (!o)
		return -ENOMEM;
	o->shadows = true;
	o->mode = 0644;
	o->uid = getuid();
	o->gid = getgid();
	o->mtime = o->ctime = n->mtime;
	rc = new_stage(fs, o);
	if (rc == 0 && !truncate) {
		char *key = fs_object_key(fs, n);
		ov_node_ref(o);
		ov_stage *s = o->st;
		ov_stage_ref(s);
		o->writers++; /* keeps the idle thread away */
		fs_itable_unlock(fs->it);
		uint64_t size = 0;
		rc = key ? fetch_remote(fs, key, s->fd, &size) : -ENOMEM;
		free(key);
		fs_itable_lock(fs->it);
		o->writers--;
		if (rc == 0)
			o->size = size;
		ov_stage_unref(s);
		ov_node_unref(o);
	}
	if (rc < 0) {
		if (o->linked)
			ov_remove(&fs->ov, o);
		return rc;
	}
	o->dirty = truncate;
	*out = o;
	return 0;
}

bool wr_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fs_ctx *fs = fs_req_ctx(req);
	bool wr = (fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC);
	if (!fs->eng) {
		if (wr)
			fuse_reply_err(req, EROFS);
		return wr;
	}
	fs_itable_lock(fs->it);
	fs_inode *n = fs_itable_get(fs->it, ino);
	ov_node *o = n ? local_of(fs, n) : NULL;
	if (!n || n->is_dir || (!o && !wr)) {
		fs_itable_unlock(fs->it);
		return false; /* the read path answers */
	}
	if (o && o->kind != OV_FILE) {
		fs_itable_unlock(fs->it);
		fuse_reply_err(req, o->kind == OV_DIR ? EISDIR : ELOOP);
		return true;
	}
	int rc = 0;
	bool trunc = (fi->flags & O_TRUNC) != 0;
	fs_inode_ref(n);
	if (!o)
		rc = make_local_file(fs, n, trunc, &o);
	if (rc == 0 && wr) {
		ov_node_ref(o);
		rc = writable_stage(fs, o, trunc ? 0 : o->size);
		if (rc == 0 && trunc && o->size) {
			if (ftruncate(o->st->fd, 0) < 0)
				rc = -errno;
			o->size = 0;
		}
		if (rc == 0 && trunc) {
			o->dirty = true;
			clock_gettime(CLOCK_REALTIME, &o->mtime);
			touch(o->txn);
		}
		ov_node_unref(o);
	}
	fs_handle *h = rc == 0 ? local_handle(fs, n, o, wr) : NULL;
	fs_itable_unref(fs->it, n);
	fs_itable_unlock(fs->it);
	if (!h) {
		fuse_reply_err(req, rc < 0 ? -rc : ENOMEM);
		return true;
	}
	open_reply(req, h, fi);
	return true;
}

bool wr_read(fuse_req_t req, fs_handle *h, size_t size, off_t off)
{
	fs_ctx *fs = fs_req_ctx(req);
	fs_itable_lock(fs->it);
	ov_stage *s = h->ov->st;
	uint64_t fsize = h->ov->size;
	if (s)
		ov_stage_ref(s);
	fs_itable_unlock(fs->it);
	if (!s || off < 0 || (uint64_t)off >= fsize) {
		if (s) {
			fs_itable_lock(fs->it);
			ov_stage_unref(s);
			fs_itable_unlock(fs->it);
		}
		fuse_reply_buf(req, NULL, 0);
		return true;
	}
	if (size > fsize - (uint64_t)off)
		size = (size_t)(fsize - (uint64_t)off);
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(size);
	bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	bv.buf[0].fd = s->fd;
	bv.buf[0].pos = off;
	fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
	fs_itable_lock(fs->it);
	ov_stage_unref(s);
	fs_itable_unlock(fs->it);
	return true;
}

void wr_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *bufv,
		  off_t off, struct fuse_file_info *fi)
{
	fs_ctx *fs = fs_req_ctx(req);
	fs_handle *h = (fs_handle *)(uintptr_t)fi->fh;
	if (!h->ov || !h->writable) {
		fuse_reply_err(req, EBADF);
		return;
	}
	size_t len = fuse_buf_size(bufv);
	int rc = eng_stage_reserve(fs->eng, len);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	pthread_rwlock_rdlock(&h->busy);
	fs_itable_lock(fs->it);
	ov_node *o = h->ov;
	rc = writable_stage(fs, o, o->size);
	ov_stage *s = rc == 0 ? o->st : NULL;
	if (s)
		ov_stage_ref(s);
	fs_itable_unlock(fs->it);
	ssize_t n = rc;
	if (s) {
		struct fuse_bufvec dst = FUSE_BUFVEC_INIT(len);
		dst.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
		dst.buf[0].fd = s->fd;
		dst.buf[0].pos = off;
		n = fuse_buf_copy(&dst, bufv, FUSE_BUF_SPLICE_NONBLOCK);
	}
	fs_itable_lock(fs->it);
	if (n > 0) {
		if ((uint64_t)off + (uint64_t)n > o->size)
			o->size = (uint64_t)off + (uint64_t)n;
		o->dirty = true;
		h->wrote = true;
		clock_gettime(CLOCK_REALTIME, &o->mtime);
		touch(o->txn);
	}
	if (s)
		ov_stage_unref(s);
	fs_itable_unlock(fs->it);
	pthread_rwlock_unlock(&h->busy);
	if (n < 0) {
		if (n == -ENOSPC || n == -EDQUOT)
			log_warn("%s: the staging disk is full", o->path);
		fuse_reply_err(req, (int)-n);
	} else {
		fuse_reply_write(req, (size_t)n);
	}
}

void wr_flush(fs_ctx *fs, fs_handle *h)
{
	if (!h->writable)
		return;
	fs_itable_lock(fs->it);
	ov_node *o = h->ov;
	/* the last writer's close: the bytes are final */
	if (o->writers == 1 && o->dirty && o->linked)
		put_file(fs, o);
	fs_itable_unlock(fs->it);
}

void wr_release(fs_ctx *fs, fs_handle *h)
{
	fs_itable_lock(fs->it);
	ov_node *o = h->ov;
	if (h->writable)
		o->writers--;
	o->opens--;
	if (o->txn) {
		o->txn->open--;
		touch(o->txn);
	}
	if (h->writable && o->writers == 0 && o->linked) {
		if (o->dirty)
			put_file(fs, o);
		else if (is_single_root(o) && !o->txn->sealed)
			seal(fs, o->txn);
	}
	if (o->txn && o->txn->done && o->linked && o->refs == 1 &&
	    o->kind == OV_FILE)
		ov_remove(&fs->ov, o);
	ov_node_unref(o);
	h->ov = NULL;
	fs_itable_unlock(fs->it);
}

/* ---- creating names ---------------------------------------------------- */

/* Table locked: whether a name exists at child `name` of p. */
static int name_state(fs_ctx *fs, fs_inode *p, const char *name,
		      bool *remote, bool *local)
{
	*remote = *local = false;
	char *path = child_path(p, name);
	if (!path)
		return -ENOMEM;
	ov_node *o = ov_get(&fs->ov, path);
	free(path);
	if (o) {
		*local = o->kind != OV_WHITEOUT;
		return 0;
	}
	if (wr_is_local_dir(fs, p))
		return 0;
	int rc = fs_dir_load(fs, p);
	if (rc < 0)
		return rc;
	*remote = p->listing && ns_dir_find(p->listing, name);
	return 0;
}

static fs_inode *parent_dir(fs_ctx *fs, fuse_ino_t ino, int *err)
{
	fs_inode *p = fs_itable_get(fs->it, ino);
	*err = !p ? ENOENT : !p->is_dir ? ENOTDIR : 0;
	return *err ? NULL : p;
}

static bool name_ok(const char *name)
{
	return strncmp(name, ".ckptfs", 7) != 0 && strlen(name) <= 255;
}

/*
 * A new local node of kind at child name of p.  Table locked.  Replaces a
 * whiteout (the remote delete is ordered before this name's commit).
 */
static int new_node(fuse_req_t req, fs_ctx *fs, fs_inode *p, const char *name,
		    ov_kind kind, mode_t mode, ov_node **out, fs_inode **nout)
{
	if (!name_ok(name))
		return name[0] == '.' ? -EPERM : -ENAMETOOLONG;
	bool remote, local;
	int rc = name_state(fs, p, name, &remote, &local);
	if (rc < 0)
		return rc;
	if (remote || local)
		return -EEXIST;
	char *path = child_path(p, name);
	if (!path)
		return -ENOMEM;
	fs_inode_ref(p);
	ov_txn *x = NULL;
	rc = txn_for_new(fs, p, path, kind == OV_DIR, &x);
	ov_node *o = NULL;
	if (rc == 0) {
		ov_node *old = ov_get(&fs->ov, path);
		bool wo = old && old->kind == OV_WHITEOUT;
		if (old && !wo)
			rc = -EEXIST; /* raced */
		if (wo)
			ov_remove(&fs->ov, old);
		if (rc == 0 && !(o = ov_add(&fs->ov, path, kind, x)))
			rc = -ENOMEM;
		if (o)
			o->shadows = wo;
	}
	if (rc == 0) {
		const struct fuse_ctx *fc = fuse_req_ctx(req);
		o->mode = mode & 07777;
		o->uid = fc ? fc->uid : 0;
		o->gid = fc ? fc->gid : 0;
		touch(x);
		/* a directory created inside a transaction was not told yet */
		if (kind == OV_DIR && strcmp(x->root, path)) {
			ordered(fs);
			eng_meta m;
			buf xa = BUF_INIT;
			meta_of(o, &m, &xa);
			rc = eng_dir_put(fs->eng, x->id, path, &m);
			buf_free(&xa);
			if (rc < 0)
				ov_remove(&fs->ov, o);
		}
	}
	free(path);
	fs_inode *c = NULL;
	if (rc == 0) {
		c = fs_itable_child(fs->it, p, name, kind == OV_DIR);
		if (!c) {
			ov_remove(&fs->ov, o);
			rc = -ENOMEM;
		}
	}
	/* the parent's listing no longer says everything */
	p->mtime = o && rc == 0 ? o->mtime : p->mtime;
	fs_itable_unref(fs->it, p);
	*out = rc == 0 ? o : NULL;
	*nout = c;
	return rc;
}

static bool require_engine(fuse_req_t req)
{
	if (fs_req_ctx(req)->eng)
		return true;
	fuse_reply_err(req, EROFS);
	return false;
}

void wr_create(fuse_req_t req, fuse_ino_t parent, const char *name,
	       mode_t mode, struct fuse_file_info *fi)
{
	if (!require_engine(req))
		return;
	fs_ctx *fs = fs_req_ctx(req);
	int err;
	fs_itable_lock(fs->it);
	fs_inode *p = parent_dir(fs, parent, &err);
	ov_node *o = NULL;
	fs_inode *c = NULL;
	int rc = p ? new_node(req, fs, p, name, OV_FILE, mode, &o, &c) : -err;
	if (rc == 0 && (rc = new_stage(fs, o)) < 0)
		ov_remove(&fs->ov, o);
	fs_handle *h = NULL;
	if (rc == 0) {
		o->dirty = true; /* an empty file is a file too */
		h = local_handle(fs, c, o, true);
		if (!h)
			rc = -ENOMEM;
	}
	struct fuse_entry_param ep;
	if (rc == 0) {
		c->nlookup++;
		fs_fill_entry(fs, c, &ep);
	}
	fs_itable_unlock(fs->it);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)h;
	fi->direct_io = 0;
	fi->keep_cache = 0;
	if (fuse_reply_create(req, &ep, fi) == -ENOENT)
		fs_handle_free(fs, h, true);
}

void wr_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
	      mode_t mode, dev_t rdev)
{
	if (!require_engine(req))
		return;
	if (!S_ISREG(mode)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	fs_ctx *fs = fs_req_ctx(req);
	int err;
	fs_itable_lock(fs->it);
	fs_inode *p = parent_dir(fs, parent, &err);
	ov_node *o = NULL;
	fs_inode *c = NULL;
	int rc = p ? new_node(req, fs, p, name, OV_FILE, mode, &o, &c) : -err;
	if (rc == 0 && (rc = new_stage(fs, o)) < 0)
		ov_remove(&fs->ov, o);
	struct fuse_entry_param ep;
	if (rc == 0) {
		o->dirty = true;
		rc = put_file(fs, o);
		c->nlookup++;
		fs_fill_entry(fs, c, &ep);
	}
	fs_itable_unlock(fs->it);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_entry(req, &ep);
}

void wr_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
	      mode_t mode)
{
	if (!require_engine(req))
		return;
	fs_ctx *fs = fs_req_ctx(req);
	int err;
	fs_itable_lock(fs->it);
	fs_inode *p = parent_dir(fs, parent, &err);
	ov_node *o = NULL;
	fs_inode *c = NULL;
	int rc = p ? new_node(req, fs, p, name, OV_DIR, mode, &o, &c) : -err;
	struct fuse_entry_param ep;
	if (rc == 0) {
		c->nlookup++;
		fs_fill_entry(fs, c, &ep);
	}
	fs_itable_unlock(fs->it);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_entry(req, &ep);
}

void wr_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		const char *name)
{
	if (!require_engine(req))
		return;
	fs_ctx *fs = fs_req_ctx(req);
	int err;
	fs_itable_lock(fs->it);
	fs_inode *p = parent_dir(fs, parent, &err);
	ov_node *o = NULL;
	fs_inode *c = NULL;
	int rc = p ? new_node(req, fs, p, name, OV_LINK, 0777, &o, &c) : -err;
	struct fuse_entry_param ep;
	if (rc == 0 && !(o->target = strdup(link)))
		rc = -ENOMEM;
	if (rc == 0 && (rc = new_stage(fs, o)) == 0) {
		o->dirty = true;
		rc = put_file(fs, o);
	}
	if (rc == 0) {
		c->nlookup++;
		fs_fill_entry(fs, c, &ep);
	} else if (o) {
		ov_remove(&fs->ov, o);
	}
	fs_itable_unlock(fs->it);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_entry(req, &ep);
}

void wr_readlink(fuse_req_t req, fuse_ino_t ino)
{
	fs_ctx *fs = fs_req_ctx(req);
	fs_itable_lock(fs->it);
	fs_inode *n = fs_itable_get(fs->it, ino);
	ov_node *o = n ? local_of(fs, n) : NULL;
	if (n && !o) {
		fs_inode_ref(n);
		fs_check_meta(fs, n);
		fs_itable_unref(fs->it, n);
	}
	char *t = o && o->kind == OV_LINK ? strdup(o->target)
		  : !o && n && n->symlink ? strdup(n->symlink)
					  : NULL;
	fs_itable_unlock(fs->it);
	if (!t) {
		fuse_reply_err(req, o ? EINVAL : EINVAL);
		return;
	}
	fuse_reply_readlink(req, t);
	free(t);
}

void wr_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
	     const char *newname)
{
	if (require_engine(req))
		fuse_reply_err(req, EPERM); /* S3 has no hard links */
}

/* ---- removing names ---------------------------------------------------- */

/*
 * Removes local node o (a file or an empty directory).  Table locked.
 */
static int remove_local(fs_ctx *fs, ov_node *o)
{
	ov_txn *x = o->txn;
	int rc = 0;
	bool root = x && !strcmp(x->root, o->path);
	/* bytes nobody else holds go first: on a full disk the journal
	 * needs that space to record the removal */
	if (o->st && !o->st->handed && o->st->refs == 1 && o->opens == 0 &&
	    ftruncate(o->st->fd, 0) == 0)
		o->size = 0;
	ordered(fs);
	if (x && x->sealed) {
		/* it is being committed: delete it after the commit */
		rc = eng_remote_delete(fs->eng, o->path, o->kind == OV_DIR);
	} else if (root) {
		rc = eng_txn_abort(fs->eng, x->id);
		if (rc == 0)
			x->done = true;
	} else if (x && (o->put || o->kind == OV_DIR)) {
		/* (a file never handed over is unknown to the engine: its
		 * staging file goes with the node, which frees the space a
		 * full disk needs first) */
		rc = eng_file_drop(fs->eng, x->id, o->path);
	}
	if (rc == 0 && o->shadows && !(x && x->sealed))
		rc = eng_remote_delete(fs->eng, o->path, o->kind == OV_DIR);
	if (rc < 0)
		return rc;
	char *path = strdup(o->path);
	bool wo = o->shadows || (x && x->sealed);
	ov_remove(&fs->ov, o);
	if (wo && path) {
		ov_node *w = ov_add(&fs->ov, path, OV_WHITEOUT, NULL);
		if (w)
			w->wo_time = now_s();
	}
	free(path);
	return 0;
}

/* Whether remote directory d (with children hidden by whiteouts) is
 * empty.  Table locked. */
static int remote_dir_empty(fs_ctx *fs, fs_inode *d, bool *empty)
{
	*empty = true;
	int rc = fs_dir_load(fs, d);
	if (rc < 0)
		return rc;
	for (size_t i = 0; d->listing && i < d->listing->n; i++) {
		char *cp = child_path(d, d->listing->v[i].name);
		ov_node *o = cp ? ov_get(&fs->ov, cp) : NULL;
		free(cp);
		if (!o || o->kind != OV_WHITEOUT) {
			*empty = false;
			return 0;
		}
	}
	if (ov_has_children(&fs->ov, d->path))
		*empty = false;
	return 0;
}

static int do_remove(fuse_req_t req, fuse_ino_t parent, const char *name,
		     bool dir)
{
	fs_ctx *fs = fs_req_ctx(req);
	int err;
	fs_itable_lock(fs->it);
	fs_inode *p = parent_dir(fs, parent, &err);
	if (!p) {
		fs_itable_unlock(fs->it);
		return -err;
	}
	char *path = child_path(p, name);
	ov_node *o = path ? ov_get(&fs->ov, path) : NULL;
	int rc = 0;
	if (!path) {
		rc = -ENOMEM;
	} else if (o && o->kind == OV_WHITEOUT) {
		rc = -ENOENT;
	} else if (o) {
		if (dir && o->kind != OV_DIR)
			rc = -ENOTDIR;
		else if (!dir && o->kind == OV_DIR)
			rc = -EISDIR;
		else if (dir && ov_has_children(&fs->ov, path))
			rc = -ENOTEMPTY;
		else {
			/* handles still open on it keep its size */
			fs_inode *c = fs_itable_find(fs->it, path);
			if (c && o->kind == OV_FILE) {
				c->size = o->size;
				c->mtime = o->mtime;
			}
			rc = remove_local(fs, o);
		}
	} else {
		/* a remote name */
		bool remote, local;
		rc = name_state(fs, p, name, &remote, &local);
		const ns_entry *e = rc == 0 && remote
					    ? ns_dir_find(p->listing, name)
					    : NULL;
		if (rc == 0 && !e)
			rc = -ENOENT;
		else if (rc == 0 && dir && !e->is_dir)
			rc = -ENOTDIR;
		else if (rc == 0 && !dir && e->is_dir)
			rc = -EISDIR;
		if (rc == 0 && dir) {
			fs_inode *c = fs_itable_child(fs->it, p, name, true);
			bool empty = false;
			if (!c)
				rc = -ENOMEM;
			else {
				fs_inode_ref(c);
				rc = remote_dir_empty(fs, c, &empty);
				fs_itable_unref(fs->it, c);
			}
			if (rc == 0 && !empty)
				rc = -ENOTEMPTY;
		}
		if (rc == 0)
			rc = hold_delete(fs, path, dir);
		if (rc == 0) {
			ov_node *w = ov_add(&fs->ov, path, OV_WHITEOUT, NULL);
			if (w)
				w->wo_time = now_s();
			else
				rc = -ENOMEM;
		}
	}
	if (rc == 0) {
		clock_gettime(CLOCK_REALTIME, &p->mtime);
		ov_node *po = local_of(fs, p);
		if (po)
			po->mtime = p->mtime;
		fs_inode *c = fs_itable_find(fs->it, path);
		if (c)
			fs_itable_detach(fs->it, c);
	}
	free(path);
	fs_itable_unlock(fs->it);
	return rc;
}

void wr_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (!require_engine(req))
		return;
	fuse_reply_err(req, -do_remove(req, parent, name, false));
}

void wr_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (!require_engine(req))
		return;
	fuse_reply_err(req, -do_remove(req, parent, name, true));
}

/* ---- rename ------------------------------------------------------------ */

typedef struct rn_ctx {
	fs_ctx *fs;
	const char *from;
	size_t fl;
	ov_txn *from_txn;
	ov_txn *to_txn;
} rn_ctx;

static void retxn_one(void *arg, ov_node *o)
{
	rn_ctx *r = arg;
	if (o->txn != r->from_txn || o->kind == OV_WHITEOUT)
		return;
	if (strcmp(o->path, r->from) &&
	    !(!strncmp(o->path, r->from, r->fl) && o->path[r->fl] == '/'))
		return;
	o->txn->nodes--;
	o->txn = r->to_txn;
	r->to_txn->nodes++;
}

/*
 * Rename of local node o (and what is under it) to path `to` whose parent
 * directory inode is np.  Table locked.
 */
static int rename_local(fs_ctx *fs, ov_node *o, fs_inode *np, const char *to)
{
	ov_txn *x = o->txn;
	char *from = strdup(o->path);
	if (!from)
		return -ENOMEM;
	bool root = !strcmp(x->root, from);
	ov_node *npo = local_of(fs, np);
	ov_txn *dest = npo && npo->kind == OV_DIR && npo->txn &&
				       !npo->txn->sealed
			       ? npo->txn
			       : NULL;
	int rc = 0;
	bool reseal = false;
	if (x->sealed && !root) {
		free(from);
		return -EBUSY; /* being committed: not worth the complexity */
	}
	if (dest == x || (!dest && root)) {
		/* within the transaction, or the whole transaction moves */
		ordered(fs);
		fs_itable_unlock(fs->it);
		rc = eng_file_move(fs->eng, x->id, from, x->id, to);
		fs_itable_lock(fs->it);
		if (rc == 0 && root) {
			free(x->root);
			x->root = strdup(to);
			reseal = true; /* renaming a root commits it */
			x->sealed = false;
		}
	} else {
		/* into another transaction, or out into a remote directory
		 * as a transaction of its own */
		if (!dest) {
			rc = txn_for_new(fs, np, to, o->kind == OV_DIR, &dest);
			if (rc == 0)
				reseal = o->kind != OV_DIR || o->writers == 0;
		}
		if (rc == 0) {
			ordered(fs);
			fs_itable_unlock(fs->it);
			rc = eng_file_move(fs->eng, x->id, from, dest->id, to);
			fs_itable_lock(fs->it);
		}
		if (rc == 0) {
			rn_ctx r = {fs, from, strlen(from), x, dest};
			ov_each(&fs->ov, retxn_one, &r);
			touch(x);
		}
	}
	if (rc == 0 && o->shadows) {
		/* the remote original of the old name goes */
		rc = hold_delete(fs, from, o->kind == OV_DIR);
		o->shadows = false;
		ov_node *w = ov_add(&fs->ov, from, OV_WHITEOUT, NULL);
		if (w)
			w->wo_time = now_s();
	}
	if (rc == 0 && ov_move(&fs->ov, from, to) < 0)
		rc = -ENOMEM;
	if (rc == 0) {
		ov_node *moved = ov_get(&fs->ov, to);
		ov_txn *nx = moved ? moved->txn : NULL;
		touch(nx);
		if (reseal && nx && nx->open == 0 &&
		    (nx->is_dir || moved->writers == 0))
			rc = seal(fs, nx);
	}
	free(from);
	return rc;
}

void wr_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
	       fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	if (!require_engine(req))
		return;
	if (flags & RENAME_EXCHANGE) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (!name_ok(newname)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	fs_ctx *fs = fs_req_ctx(req);
	int err;
	fs_itable_lock(fs->it);
	fs_inode *p = parent_dir(fs, parent, &err);
	fs_inode *np = p ? parent_dir(fs, newparent, &err) : NULL;
	if (!np) {
		fs_itable_unlock(fs->it);
		fuse_reply_err(req, err);
		return;
	}
	fs_inode_ref(p);
	fs_inode_ref(np);
	char *from = child_path(p, name), *to = child_path(np, newname);
	int rc = from && to ? 0 : -ENOMEM;
	bool src_remote = false, src_local = false, dst_remote = false,
	     dst_local = false;
	if (rc == 0)
		rc = name_state(fs, p, name, &src_remote, &src_local);
	if (rc == 0)
		rc = name_state(fs, np, newname, &dst_remote, &dst_local);
	if (rc == 0 && !src_remote && !src_local)
		rc = -ENOENT;
	if (rc == 0 && (flags & RENAME_NOREPLACE) && (dst_remote || dst_local))
		rc = -EEXIST;
	if (rc == 0 && !strcmp(from, to))
		goto out;
	if (rc == 0 && !strncmp(to, from, strlen(from)) &&
	    to[strlen(from)] == '/')
		rc = -EINVAL;
	bool src_dir = false;
	if (rc == 0) {
		ov_node *so = ov_get(&fs->ov, from);
		const ns_entry *se = !so && p->listing
					     ? ns_dir_find(p->listing, name)
					     : NULL;
		src_dir = so ? so->kind == OV_DIR : se && se->is_dir;
	}
	/* the target goes first (rename over an existing name) */
	if (rc == 0 && (dst_local || dst_remote)) {
		ov_node *dobj = ov_get(&fs->ov, to);
		const ns_entry *de = !dobj && np->listing
					     ? ns_dir_find(np->listing, newname)
					     : NULL;
		bool dst_dir = dobj ? dobj->kind == OV_DIR : de && de->is_dir;
		if (dst_dir && !src_dir)
			rc = -EISDIR;
		else if (!dst_dir && src_dir)
			rc = -ENOTDIR;
		else if (dst_dir && dobj && ov_has_children(&fs->ov, to))
			rc = -ENOTEMPTY;
		else if (dst_dir && !dobj) {
			fs_inode *c = fs_itable_child(fs->it, np, newname, true);
			bool empty = false;
			if (c) {
				fs_inode_ref(c);
				rc = remote_dir_empty(fs, c, &empty);
				fs_itable_unref(fs->it, c);
			}
			if (rc == 0 && !empty)
				rc = -ENOTEMPTY;
		}
		if (rc == 0 && dobj) {
			/* a remote original under the local target is
			 * replaced by what moves in: no delete needed for a
			 * file (the PUT replaces it) */
			bool shadows = dobj->shadows;
			dobj->shadows = false;
			if (!dst_dir && dobj->txn && dobj->txn->sealed)
				/* committing: the file moving in replaces its
				 * object, in order (a delete now would be
				 * queued behind the newer transaction) */
				ov_remove(&fs->ov, dobj);
			else
				rc = remove_local(fs, dobj);
			ov_node *w = ov_get(&fs->ov, to);
			if (w && w->kind == OV_WHITEOUT)
				ov_remove(&fs->ov, w);
			(void)shadows;
		}
	}
	if (rc == 0) {
		ov_node *so = ov_get(&fs->ov, from);
		if (so && so->kind != OV_WHITEOUT) {
			rc = rename_local(fs, so, np, to);
		} else if (wr_is_local_dir(fs, np) && !src_dir) {
			/* a remote file into a local directory: copy it in
			 * (copy-on-write), then the old name goes */
			fs_inode *sc = fs_itable_child(fs->it, p, name, false);
			ov_node *o = NULL;
			if (!sc)
				rc = -ENOMEM;
			if (rc == 0) {
				fs_inode_ref(sc);
				rc = make_local_file(fs, sc, false, &o);
				fs_itable_unref(fs->it, sc);
			}
			if (rc == 0) {
				o->dirty = true;
				rc = rename_local(fs, o, np, to);
			}
		} else if (wr_is_local_dir(fs, np)) {
			rc = -EXDEV; /* mv copies it */
		} else {
			/* remote to remote: server-side, in order */
			ordered(fs);
			char *mroot = manifest_root(fs, np);
			rc = eng_remote_rename(fs->eng, from, to, src_dir,
					       mroot);
			free(mroot);
			if (rc == 0) {
				fs_itable_unlock(fs->it);
				rc = eng_sync(fs->eng, NULL, NULL);
				fs_itable_lock(fs->it);
				fs->listing_gen++;
			}
		}
	}
	if (rc == 0) {
		fs_inode *c = fs_itable_find(fs->it, from);
		if (c)
			fs_itable_move(fs->it, c, np, newname);
		struct timespec t;
		clock_gettime(CLOCK_REALTIME, &t);
		p->mtime = np->mtime = t;
	}
out:
	free(from);
	free(to);
	fs_itable_unref(fs->it, p);
	fs_itable_unref(fs->it, np);
	fs_itable_unlock(fs->it);
	fuse_reply_err(req, -rc);
}

/* ---- attributes and data ---------------------------------------------- */

void wr_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		int to_set, struct fuse_file_info *fi)
{
	fs_ctx *fs = fs_req_ctx(req);
	fs_itable_lock(fs->it);
	fs_inode *n = fs_itable_get(fs->it, ino);
	if (!n) {
		fs_itable_unlock(fs->it);
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (!fs->eng) {
		fs_itable_unlock(fs->it);
		fuse_reply_err(req, EROFS);
		return;
	}
	fs_inode_ref(n);
	ov_node *o = local_of(fs, n);
	int rc = 0;
	bool meta_set = to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID |
				  FUSE_SET_ATTR_GID | FUSE_SET_ATTR_MTIME |
				  FUSE_SET_ATTR_MTIME_NOW);
	bool truncating = (to_set & FUSE_SET_ATTR_SIZE) && attr->st_size == 0;
	if (!o && !n->is_dir && ((to_set & FUSE_SET_ATTR_SIZE) || meta_set)) {
		/* attributes live in the object's metadata or manifest: a
		 * remote file written by someone else is copied in (through
		 * the cache) and stored again with them */
		fs_check_meta(fs, n);
		struct stat cur;
		fs_fill_stat(fs, n, &cur);
		rc = make_local_file(fs, n, truncating, &o);
		if (rc == 0) {
			o->mode = cur.st_mode & 07777;
			o->uid = cur.st_uid;
			o->gid = cur.st_gid;
			o->mtime = cur.st_mtim;
			o->dirty = true;
		}
	}
	if (rc == 0 && o && (to_set & FUSE_SET_ATTR_SIZE)) {
		if (o->kind != OV_FILE) {
			rc = -EISDIR;
		} else {
			ov_node_ref(o);
			uint64_t keep = (uint64_t)attr->st_size < o->size
						? (uint64_t)attr->st_size
						: o->size;
			rc = writable_stage(fs, o, keep);
			if (rc == 0 && ftruncate(o->st->fd, attr->st_size) < 0)
				rc = -errno;
			if (rc == 0) {
				o->size = (uint64_t)attr->st_size;
				o->dirty = true;
				clock_gettime(CLOCK_REALTIME, &o->mtime);
				touch(o->txn);
				if (o->writers == 0)
					rc = put_file(fs, o);
			}
			ov_node_unref(o);
		}
	}
	if (rc == 0 && o) {
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		if (to_set & FUSE_SET_ATTR_MODE)
			o->mode = attr->st_mode & 07777;
		if (to_set & FUSE_SET_ATTR_UID)
			o->uid = attr->st_uid;
		if (to_set & FUSE_SET_ATTR_GID)
			o->gid = attr->st_gid;
		if (to_set & FUSE_SET_ATTR_MTIME)
			o->mtime = attr->st_mtim;
		if (to_set & FUSE_SET_ATTR_MTIME_NOW)
			o->mtime = now;
		o->ctime = now;
		touch(o->txn);
		bool meta = to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID |
				      FUSE_SET_ATTR_GID | FUSE_SET_ATTR_MTIME |
				      FUSE_SET_ATTR_MTIME_NOW);
		if (meta && o->kind == OV_FILE && o->writers == 0 && o->txn &&
		    o->txn->sealed && !o->dirty) {
			/* committing or committed: store it again with the
			 * new attributes (a copy of the staged bytes) */
			ov_node_ref(o);
			rc = writable_stage(fs, o, o->size);
			if (rc == 0) {
				o->dirty = true;
				rc = put_file(fs, o);
			}
			ov_node_unref(o);
		} else if (meta && o->kind == OV_FILE && o->dirty &&
			   o->writers == 0 && o->st && !o->st->handed) {
			rc = put_file(fs, o);
		} else if (meta && o->txn && o->st && o->st->handed && !o->dirty) {
			ordered(fs);
			eng_meta m;
			buf xa = BUF_INIT;
			meta_of(o, &m, &xa);
			rc = eng_file_set_meta(fs->eng, o->txn->id, o->path, &m);
			buf_free(&xa);
		}
	}
	/* remote names: attributes other than the size are not stored
	 * remotely for objects this mount did not write (that would take a
	 * copy of the object); the call succeeds as on s3fs -o complement */
	struct stat st;
	fs_fill_stat(fs, n, &st);
	if (!o && (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_MTIME |
			     FUSE_SET_ATTR_MTIME_NOW))) {
		if (to_set & FUSE_SET_ATTR_MODE)
			st.st_mode = (st.st_mode & S_IFMT) |
				     (attr->st_mode & 07777);
		if (to_set & FUSE_SET_ATTR_MTIME)
			st.st_mtim = attr->st_mtim;
	}
	fs_itable_unref(fs->it, n);
	fs_itable_unlock(fs->it);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, 0);
}

void wr_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset,
		  off_t length, struct fuse_file_info *fi)
{
	fs_ctx *fs = fs_req_ctx(req);
	fs_handle *h = (fs_handle *)(uintptr_t)fi->fh;
	if (!h->ov || !h->writable) {
		fuse_reply_err(req, fs->eng ? EBADF : EROFS);
		return;
	}
	fs_itable_lock(fs->it);
	ov_node *o = h->ov;
	int rc = writable_stage(fs, o, o->size);
	if (rc == 0 && fallocate(o->st->fd, mode, offset, length) < 0)
		rc = -errno;
	if (rc == 0 && !(mode & FALLOC_FL_KEEP_SIZE) &&
	    (uint64_t)(offset + length) > o->size)
		o->size = (uint64_t)(offset + length);
	if (rc == 0) {
		o->dirty = true;
		touch(o->txn);
	}
	fs_itable_unlock(fs->it);
	fuse_reply_err(req, -rc);
}

void wr_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
	      struct fuse_file_info *fi)
{
	fs_ctx *fs = fs_req_ctx(req);
	fs_handle *h = (fs_handle *)(uintptr_t)fi->fh;
	if (!h->ov || !fs->eng) {
		fuse_reply_err(req, 0);
		return;
	}
	fs_itable_lock(fs->it);
	ov_node *o = h->ov;
	int rc = 0;
	if (o->dirty && o->linked)
		rc = put_file(fs, o); /* later writes copy the stage */
	/* a file that is a transaction of its own is stored by committing
	 * it (its PUT is its commit); later writes start a new one */
	if (rc == 0 && o->linked && is_single_root(o) && !o->txn->sealed)
		rc = seal(fs, o->txn);
	char *path = strdup(o->path);
	fs_itable_unlock(fs->it);
	if (rc == 0 && path)
		rc = eng_wait_file(fs->eng, path);
	free(path);
	fuse_reply_err(req, -rc);
}

void wr_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
		 struct fuse_file_info *fi)
{
	fs_ctx *fs = fs_req_ctx(req);
	if (!fs->eng) {
		fuse_reply_err(req, 0);
		return;
	}
	fs_itable_lock(fs->it);
	fs_inode *n = fs_itable_get(fs->it, ino);
	ov_node *o = n ? local_of(fs, n) : NULL;
	ov_txn *x = o ? o->txn : NULL;
	int rc = 0;
	uint64_t id = 0;
	/* fsync of a transaction root with a final name commits it; of any
	 * other directory it only makes its entries durable, which the
	 * journal already did */
	if (x && x->is_dir && !strcmp(x->root, o->path) &&
	    !eng_is_temp_name(fs->eng, x->root)) {
		rc = seal(fs, x);
		id = x->id;
	}
	fs_itable_unlock(fs->it);
	if (rc == 0 && id)
		rc = eng_wait_txn(fs->eng, id);
	fuse_reply_err(req, -rc);
}

/* ---- extended attributes ----------------------------------------------- */

/* The xattrs a manifest recorded for remote file n, in the overlay's
 * record format (so the same get/list code serves both).  Table locked. */
static int remote_xattrs(const fs_inode *n, ov_node *tmp)
{
	memset(tmp, 0, sizeof *tmp);
	if (!n->xattrs_json)
		return 0;
	json_t *x = json_loads(n->xattrs_json, 0, NULL);
	const char *name;
	json_t *val;
	json_object_foreach(x, name, val)
	{
		const char *s = json_string_value(val);
		size_t len = s ? strlen(s) : 0;
		unsigned char *out = malloc(len + 4);
		int k = out ? EVP_DecodeBlock(out, (const unsigned char *)s,
					      (int)len)
			    : -1;
		while (k > 0 && len && s[len - 1] == '=') {
			k--; /* EVP_DecodeBlock counts padding as data */
			len--;
		}
		if (k >= 0)
			ov_xattr_set(tmp, name, out, (size_t)k, 0);
		free(out);
	}
	json_decref(x);
	return 0;
}

void wr_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		 size_t size)
{
	fs_ctx *fs = fs_req_ctx(req);
	fs_itable_lock(fs->it);
	fs_inode *n = fs_itable_get(fs->it, ino);
	ov_node *o = n ? local_of(fs, n) : NULL;
	ov_node tmp;
	if (!o && n && n->xattrs_json) {
		remote_xattrs(n, &tmp);
		o = &tmp;
	}
	char *v = size ? malloc(size) : NULL;
	int rc = !o ? -ENODATA : size && !v ? -ENOMEM
					    : ov_xattr_get(o, name, v, size);
	if (o == &tmp)
		buf_free(&tmp.xattrs);
	fs_itable_unlock(fs->it);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)rc);
	else
		fuse_reply_buf(req, v, (size_t)rc);
	free(v);
}

void wr_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	fs_ctx *fs = fs_req_ctx(req);
	fs_itable_lock(fs->it);
	fs_inode *n = fs_itable_get(fs->it, ino);
	ov_node *o = n ? local_of(fs, n) : NULL;
	ov_node tmp;
	if (!o && n && n->xattrs_json) {
		remote_xattrs(n, &tmp);
		o = &tmp;
	}
	char *v = size ? malloc(size) : NULL;
	int rc = !o ? 0 : size && !v ? -ENOMEM : ov_xattr_list(o, v, size);
	if (o == &tmp)
		buf_free(&tmp.xattrs);
	fs_itable_unlock(fs->it);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)rc);
	else
		fuse_reply_buf(req, v, (size_t)rc);
	free(v);
}

static void xattr_changed(fs_ctx *fs, ov_node *o)
{
	touch(o->txn);
	if (o->txn && o->st && o->st->handed && !o->dirty) {
		ordered(fs);
		eng_meta m;
		buf xa = BUF_INIT;
		meta_of(o, &m, &xa);
		eng_file_set_meta(fs->eng, o->txn->id, o->path, &m);
		buf_free(&xa);
	}
}

void wr_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		 const char *value, size_t size, int flags)
{
	fs_ctx *fs = fs_req_ctx(req);
	if (!fs->eng) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (strncmp(name, "user.", 5)) {
		fuse_reply_err(req, ENOTSUP);
		return;
	}
	fs_itable_lock(fs->it);
	fs_inode *n = fs_itable_get(fs->it, ino);
	ov_node *o = n ? local_of(fs, n) : NULL;
	/* attributes of objects this mount did not write cannot be stored
	 * without copying the object */
	int rc = !o ? -ENOTSUP : ov_xattr_set(o, name, value, size, flags);
	if (rc == 0)
		xattr_changed(fs, o);
	fs_itable_unlock(fs->it);
	fuse_reply_err(req, -rc);
}

void wr_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	if (!require_engine(req))
		return;
	fs_ctx *fs = fs_req_ctx(req);
	fs_itable_lock(fs->it);
	fs_inode *n = fs_itable_get(fs->it, ino);
	ov_node *o = n ? local_of(fs, n) : NULL;
	int rc = !o ? -ENODATA : ov_xattr_remove(o, name);
	if (rc == 0)
		xattr_changed(fs, o);
	fs_itable_unlock(fs->it);
	fuse_reply_err(req, -rc);
}

/* ---- the idle thread ---------------------------------------------------- */

typedef struct drop_ctx {
	fs_ctx *fs;
	uint64_t *pending;
	size_t n;
	bool changed;
} drop_ctx;

static bool pending_has(const drop_ctx *d, uint64_t id)
{
	for (size_t i = 0; i < d->n; i++)
		if (d->pending[i] == id)
			return true;
	return false;
}

/* Removes the nodes of transactions now visible remotely, and whiteouts
 * whose delete went through.  Table locked. */
static void reap(fs_ctx *fs, drop_ctx *d)
{
	for (ov_txn *x = fs->ov.txns; x; x = x->next)
		if (x->sealed && !x->done && !pending_has(d, x->id)) {
			x->done = true;
			d->changed = true;
		}
	/* collect nodes first: removing while walking the table is not safe */
	size_t cap = 64, k = 0;
	ov_node **v = malloc(cap * sizeof *v);
	for (size_t i = 0; v && i < fs->ov.nb; i++) {
		for (ov_node *o = fs->ov.b[i]; o; o = o->hnext) {
			bool go = false;
			if (o->kind == OV_WHITEOUT)
				go = d->n == 0 && !fs->dels->n &&
				     now_s() - o->wo_time > 1.0;
			else
				go = o->txn && o->txn->done && o->refs == 0;
			if (!go)
				continue;
			if (k == cap) {
				ov_node **nv = realloc(v, 2 * cap * sizeof *v);
				if (!nv)
					break;
				v = nv;
				cap *= 2;
			}
			v[k++] = o;
		}
	}
	for (size_t i = 0; i < k; i++) {
		/* the remote object is another version than any the inode
		 * saw before it became local: forget its attributes */
		fs_inode *n = fs_itable_find(fs->it, v[i]->path);
		ov_node *o = v[i];
		if (n && o->kind != OV_WHITEOUT) {
			free(n->etag);
			n->etag = NULL;
			n->attr_time = 0;
			/* what was committed, until a listing says more */
			n->has_attrs = o->kind != OV_DIR;
			n->mode = o->mode;
			n->uid = o->uid;
			n->gid = o->gid;
			n->mtime = o->mtime;
			n->size = o->kind == OV_FILE ? o->size : 0;
			free(n->symlink);
			n->symlink = o->kind == OV_LINK && o->target
					     ? strdup(o->target)
					     : NULL;
		}
		ov_remove(&fs->ov, v[i]);
	}
	if (k)
		d->changed = true;
	free(v);
	ov_txn_free_done(&fs->ov);
}

typedef struct files_ctx {
	ov_txn *x;
	bool any;
} files_ctx;

static void has_file_one(void *arg, ov_node *o)
{
	files_ctx *f = arg;
	if (o->txn == f->x && (o->kind == OV_FILE || o->kind == OV_LINK))
		f->any = true;
}

/*
 * Whether x holds a file.  A directory made and not written yet does not
 * commit by idleness: in a multi-host save every host makes the directory
 * first and writes later, and its empty transaction committing early
 * would drop its marker, letting the others' files show without its own.
 * Table locked.
 */
static bool txn_has_files(fs_ctx *fs, ov_txn *x)
{
	if (!x->is_dir)
		return true;
	files_ctx f = {x, false};
	ov_each(&fs->ov, has_file_one, &f);
	return f.any;
}

static void *idle_main(void *arg)
{
	fs_ctx *fs = arg;
	fs_itable_lock(fs->it);
	while (!fs->idle_stop) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 250 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&fs->idle_cv, fs_itable_mutex(fs->it),
				       &ts);
		if (fs->idle_stop)
			break;
		double t = now_s();
		if (fs->dels->n && t - fs->dels->last > DELETE_QUIET_S)
			flush_deletes(fs);
		for (ov_txn *x = fs->ov.txns; x; x = x->next) {
			if (!x->sealed && !x->done && x->open == 0 &&
			    t - x->last_change >= fs->commit_delay &&
			    txn_has_files(fs, x))
				seal(fs, x);
		}
		bool any_sealed = false;
		for (ov_txn *x = fs->ov.txns; x; x = x->next)
			any_sealed |= x->sealed && !x->done;
		bool whiteouts = false;
		if (!any_sealed) {
			for (size_t i = 0; i < fs->ov.nb && !whiteouts; i++)
				for (ov_node *o = fs->ov.b[i]; o; o = o->hnext)
					if (o->kind == OV_WHITEOUT) {
						whiteouts = true;
						break;
					}
		}
		if (!any_sealed && !whiteouts)
			continue;
		fs_itable_unlock(fs->it);
		eng_txn_status *st = NULL;
		size_t n = 0;
		int rc = eng_status(fs->eng, &st, &n);
		drop_ctx d = {fs, NULL, 0, false};
		if (rc == 0 && n)
			d.pending = calloc(n, sizeof *d.pending);
		for (size_t i = 0; d.pending && i < n; i++)
			d.pending[d.n++] = st[i].id;
		if (rc == 0)
			eng_status_free(st, n);
		fs_itable_lock(fs->it);
		if (rc == 0 && (n == 0 || d.pending))
			reap(fs, &d);
		if (d.changed)
			fs->listing_gen++;
		free(d.pending);
	}
	fs_itable_unlock(fs->it);
	return NULL;
}

void fs_ctx_set_engine(fs_ctx *fs, eng *e, double commit_delay)
{
	fs->eng = e;
	fs->commit_delay = commit_delay;
	if (e && !fs->idle_running &&
	    pthread_create(&fs->idle_thread, NULL, idle_main, fs) == 0)
		fs->idle_running = true;
}

void fs_ctx_stop_writes(fs_ctx *fs)
{
	wr_shutdown(fs);
}

typedef struct restore_ctx {
	fs_ctx *fs;
	size_t n;
} restore_ctx;

static void restore_one(void *arg, uint64_t txn, const char *path,
			const char *staging_path, uint64_t size,
			const eng_meta *m)
{
	restore_ctx *r = arg;
	fs_ctx *fs = r->fs;
	if (ov_get(&fs->ov, path))
		return;
	ov_txn *x = ov_txn_find(&fs->ov, txn);
	if (!x && (x = ov_txn_add(&fs->ov, txn, path, false)))
		x->sealed = true; /* the engine resumes it on its own */
	int fd = staging_path ? open(staging_path, O_RDONLY | O_CLOEXEC) : -1;
	ov_node *o = x ? ov_add(&fs->ov, path,
				m && m->symlink ? OV_LINK : OV_FILE, x)
		       : NULL;
	if (!o) {
		if (fd >= 0)
			close(fd);
		return;
	}
	o->size = size;
	/* its directories show too (merged with whatever the bucket has
	 * there: the journal does not say which of them are new) */
	char *dir = ov_parent(path);
	while (dir && dir[0]) {
		ov_node *d = ov_get(&fs->ov, dir);
		if (!d) {
			d = ov_add(&fs->ov, dir, OV_DIR, x);
			if (d) {
				d->merge = true;
				d->mode = 0755;
			}
		}
		char *up = ov_parent(dir);
		free(dir);
		dir = up;
	}
	free(dir);
	if (m) {
		o->mode = m->mode;
		o->uid = m->uid;
		o->gid = m->gid;
		o->mtime = o->ctime = m->mtime;
		if (m->symlink)
			o->target = strdup(m->symlink);
	}
	if (fd >= 0) {
		o->st = ov_stage_new(fd, 0);
		if (o->st)
			o->st->handed = true;
		else
			close(fd);
	}
	r->n++;
}

void fs_ctx_restore(fs_ctx *fs)
{
	if (!fs->eng)
		return;
	restore_ctx r = {fs, 0};
	fs_itable_lock(fs->it);
	eng_foreach_pending_file(fs->eng, restore_one, &r);
	fs_itable_unlock(fs->it);
	if (r.n)
		log_info("resuming %zu journaled file%s", r.n,
			 r.n == 1 ? "" : "s");
}

void wr_shutdown(fs_ctx *fs)
{
	if (!fs->idle_running)
		return;
	fs_itable_lock(fs->it);
	fs->idle_stop = true;
	pthread_cond_broadcast(&fs->idle_cv);
	fs_itable_unlock(fs->it);
	pthread_join(fs->idle_thread, NULL);
	fs->idle_running = false;
}

/* ---- commit and sync ---------------------------------------------------- */

int fs_commit_path(fs_ctx *fs, const char *relpath, char *err, size_t errsz)
{
	if (!fs->eng) {
		snprintf(err, errsz, "the mount is read-only");
		return -EROFS;
	}
	size_t rl = strlen(relpath);
	uint64_t ids[256];
	size_t n = 0;
	bool temp = false;
	fs_itable_lock(fs->it);
	ordered(fs);
	for (ov_txn *x = fs->ov.txns; x && n < 256; x = x->next) {
		if (x->done)
			continue;
		bool at_or_under = rl == 0 || !strcmp(x->root, relpath) ||
				   (!strncmp(x->root, relpath, rl) &&
				    x->root[rl] == '/');
		bool holds = !strncmp(relpath, x->root, strlen(x->root)) &&
			     relpath[strlen(x->root)] == '/';
		if (!at_or_under && !holds)
			continue;
		if (x->is_dir && eng_is_temp_name(fs->eng, x->root)) {
			temp = true;
			continue;
		}
		seal(fs, x);
		ids[n++] = x->id;
	}
	fs_itable_unlock(fs->it);
	if (n == 0) {
		snprintf(err, errsz,
			 temp ? "%s: only temporary names are pending there; "
				"they commit when renamed"
			      : "%s: nothing pending there",
			 relpath[0] ? relpath : "/");
		return -ENOENT;
	}
	for (size_t i = 0; i < n; i++) {
		int rc = eng_wait_txn(fs->eng, ids[i]);
		if (rc < 0) {
			snprintf(err, errsz, "%s: commit failed: %s",
				 relpath[0] ? relpath : "/", strerror(-rc));
			return rc;
		}
	}
	return 0;
}

int fs_sync(fs_ctx *fs,
	    void (*progress)(void *arg, uint64_t done, uint64_t total),
	    void *arg)
{
	if (!fs->eng)
		return 0;
	fs_itable_lock(fs->it);
	flush_deletes(fs);
	for (ov_txn *x = fs->ov.txns; x; x = x->next)
		if (!x->done && x->open == 0)
			seal(fs, x);
	fs_itable_unlock(fs->it);
	return eng_sync(fs->eng, progress, arg);
}
