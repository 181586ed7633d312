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
#include <time.h>
#include <unistd.h>

#include "fs/write-internal.h"
#include "proto/meta.h"
#include "util/log.h"

/* ---- attributes -------------------------------------------------------- */

ov_node *wr_local_of(fs_ctx *fs, const fs_inode *n)
{
	if (!fs->eng && !fs->ov.n)
		return NULL;
	ov_node *o = ov_get(&fs->ov, n->path);
	return o && o->kind != OV_WHITEOUT ? o : NULL;
}

bool wr_fill_stat(fs_ctx *fs, const fs_inode *n, struct stat *st)
{
	ov_node *o = wr_local_of(fs, n);
	if (!o)
		return false;
	wr_pt_absorb(o);
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
	ov_node *o = wr_local_of(fs, n);
	return o && o->kind == OV_DIR && !o->merge;
}

bool wr_has_local_node(fs_ctx *fs, const fs_inode *n)
{
	return wr_local_of(fs, n) != NULL;
}

int wr_lookup(fs_ctx *fs, fs_inode *p, const char *name, fs_inode **out)
{
	*out = NULL;
	if (!fs->ov.n)
		return 0;
	char *path = wr_child_path(p, name);
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

/* ---- write passthrough ------------------------------------------------ */

/*
 * A file written through the mount is written by the kernel straight into
 * its staging file (FUSE passthrough, fs/passthrough.h): no round trip
 * through ckptfs per write, so close() returns at local-disk speed.  The
 * price is that ckptfs no longer sees the writes.  It learns of them from
 * the staging file's ctime and size (wr_pt_absorb) at getattr, setattr,
 * fsync, flush and release.  The last writer's flush hands the file to the
 * commit engine as before; a dup'd descriptor or a shared mapping can still
 * write after that close, which release finds and answers by storing a
 * copy; the commit triggers first wait for releases still in flight
 * (wr_pt_wait_releases); fsync hands a copy, since the kernel may write on.  While any passthrough handle of an
 * inode is open the kernel binds the inode to that one backing file, so
 * every handle opened meanwhile passes through to the same staging file;
 * the binding ends with the inode's last handle (wr_pt_unbind).  Writes go
 * through ckptfs instead when it must be able to hold or retry them: with
 * max_staged set, and when the staging disk is nearly full.
 */

#define PT_WRITE_HEADROOM (1ull << 30)

static bool same_ts(struct timespec a, struct timespec b)
{
	return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

/* Records what the staging file looks like now, as seen. */
static void pt_snap(ov_node *o)
{
	struct stat st;
	if (o->st && fstat(o->st->fd, &st) == 0) {
		o->pt_ctime = st.st_ctim;
		o->pt_size = (uint64_t)st.st_size;
	}
}

void wr_pt_absorb(ov_node *o)
{
	struct stat st;
	if (!o->pt_writers || !o->st || fstat(o->st->fd, &st) < 0)
		return;
	if (same_ts(st.st_ctim, o->pt_ctime) &&
	    (uint64_t)st.st_size == o->pt_size)
		return;
	o->pt_ctime = st.st_ctim;
	o->pt_size = o->size = (uint64_t)st.st_size;
	o->mtime = st.st_mtim;
	o->dirty = true;
	wr_touch(o->txn);
}

/* Whether writes may bypass ckptfs (see above). */
static bool pt_room(fs_ctx *fs)
{
	struct statvfs sv;
	if (!fs->cache || eng_max_staged(fs->eng) ||
	    statvfs(cache_dir(fs->cache), &sv) < 0)
		return false;
	uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	return avail > cache_min_free(fs->cache) + PT_WRITE_HEADROOM;
}

/*
 * Whether a new handle of local file o at inode n can be opened at all:
 * false when n is bound to a staging file o no longer writes to (a handle
 * opened while the file was written is still open, and the file was
 * committed since).  Table locked.
 */
static bool pt_compatible(const fs_inode *n, const ov_node *o)
{
	return !n->pt_stage || n->pt_backing_id <= 0 || !n->open_handles ||
	       (o->st && n->pt_sid == o->st->sid);
}

/* Chooses passthrough for h, new and counted in n->open_handles.  Table
 * locked. */
static void pt_choose(fs_ctx *fs, fs_inode *n, ov_node *o, fs_handle *h)
{
	if (!fs->pt.enabled || o->kind != OV_FILE || !o->st)
		return;
	if (n->pt_stage && n->pt_backing_id > 0 && n->pt_sid == o->st->sid) {
		h->backing_id = n->pt_backing_id; /* must: the inode is bound */
	} else if (h->writable && n->open_handles == 1 && !o->st->handed &&
		   pt_room(fs)) {
		int id = fs_pt_backing_open(&fs->pt, o->st->fd);
		if (id <= 0) {
			log_debug("write passthrough for %s: %s", o->path,
				  strerror(-id));
			return;
		}
		if (n->pt_backing_id > 0)
			fs_pt_backing_close(&fs->pt, n->pt_backing_id);
		free(n->pt_etag);
		n->pt_etag = NULL;
		n->pt_backing_id = id;
		n->pt_stage = true;
		n->pt_sid = o->st->sid;
		h->backing_id = id;
	} else {
		return;
	}
	log_debug("%s: passthrough to staging file %llu (backing %d)",
		  o->path, (unsigned long long)o->st->sid, h->backing_id);
	if (h->writable) {
		h->pt_write = true;
		if (o->pt_writers++ == 0)
			pt_snap(o);
	}
}

void wr_pt_unbind(fs_ctx *fs, fs_inode *n)
{
	if (n->pt_backing_id > 0)
		fs_pt_backing_close(&fs->pt, n->pt_backing_id);
	n->pt_backing_id = 0;
	n->pt_stage = false;
	n->pt_sid = 0;
}

void wr_pt_wait_releases(fs_ctx *fs)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 2;
	while (fs->pt_closing > 0 &&
	       fs_itable_timedwait(fs->it, &until) == 0)
		;
}

/*
 * fsync of a file the kernel may go on writing: hands the engine a copy of
 * the staging file.  Table locked; dropped for the copy.
 */
static int pt_put_copy(fs_ctx *fs, ov_node *o)
{
	uint64_t sid = 0, size = o->size;
	int fd = eng_stage_create(fs->eng, &sid);
	if (fd < 0)
		return fd;
	ov_stage *c = wr_stage_new(fs, fd, sid);
	if (!c) {
		close(fd);
		eng_stage_discard(fs->eng, sid);
		return -ENOMEM;
	}
	ov_stage *s = o->st;
	ov_stage_ref(s);
	ov_node_ref(o);
	fs_itable_unlock(fs->it);
	int rc = wr_copy_fd(s->fd, c->fd, size);
	fs_itable_lock(fs->it);
	ov_stage_unref(s);
	/* writes during the copy show in the staging file's ctime: the
	 * next absorb finds the file dirty again */
	if (rc == 0 && o->linked)
		rc = wr_put_stage(fs, o, c, size);
	ov_node_unref(o);
	ov_stage_unref(c);
	return rc;
}

/* ---- handles ----------------------------------------------------------- */

fs_handle *wr_local_handle(fs_ctx *fs, fs_inode *n, ov_node *o,
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
	if (writable) {
		o->writers++;
		wr_writer_opened(fs);
	}
	pthread_mutex_init(&h->mu, NULL);
	pthread_rwlock_init(&h->busy, NULL);
	fs_handle_link(fs, h);
	pt_choose(fs, n, o, h);
	return h;
}

void wr_open_reply(fuse_req_t req, fs_handle *h, struct fuse_file_info *fi)
{
	fi->fh = (uint64_t)(uintptr_t)h;
	fi->direct_io = 0;
	fi->keep_cache = 0;
	fs_pt_mark_next_open(h->backing_id);
	if (fuse_reply_open(req, fi) == -ENOENT)
		fs_handle_free(fs_req_ctx(req), h, true);
}

/* A remote file becomes local (copy-on-write).  Table locked; dropped for
 * the download. */
int wr_make_local_file(fs_ctx *fs, fs_inode *n, bool truncate,
			   ov_node **out)
{
	ov_txn *x = NULL;
	fs_inode *p = n->parent;
	int rc = wr_txn_for_new(fs, p, n->path, false, &x);
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
	rc = wr_new_stage(fs, o);
	if (rc == 0 && !truncate) {
		char *key = fs_object_key(fs, n);
		ov_node_ref(o);
		ov_stage *s = o->st;
		ov_stage_ref(s);
		o->writers++; /* keeps the idle thread away */
		fs_itable_unlock(fs->it);
		uint64_t size = 0;
		rc = key ? wr_fetch_remote(fs, n, key, s->fd, &size) : -ENOMEM;
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
	ov_node *o = n ? wr_local_of(fs, n) : NULL;
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
		rc = wr_make_local_file(fs, n, trunc, &o);
	if (rc == 0 && wr) {
		ov_node_ref(o);
		rc = wr_writable_stage(fs, o, trunc ? 0 : o->size);
		if (rc == 0 && trunc && o->size) {
			if (ftruncate(o->st->fd, 0) < 0)
				rc = -errno;
			o->size = 0;
		}
		if (rc == 0 && trunc) {
			o->dirty = true;
			clock_gettime(CLOCK_REALTIME, &o->mtime);
			wr_touch(o->txn);
		}
		ov_node_unref(o);
	}
	/* the handles still bound to a staging file handed over since are
	 * usually closed already, their release in flight */
	if (rc == 0 && !pt_compatible(n, o)) {
		ov_node_ref(o);
		wr_pt_wait_releases(fs);
		bool gone = !o->linked;
		ov_node_unref(o);
		if (gone)
			rc = -ENOENT; /* removed meanwhile */
	}
	if (rc == 0 && !pt_compatible(n, o)) {
		log_warn("open %s: a handle opened while it was written is still "
			 "open, and the file was committed since; close it first",
			 o->path);
		rc = -ETXTBSY;
	}
	fs_handle *h = rc == 0 ? wr_local_handle(fs, n, o, wr) : NULL;
	fs_itable_unref(fs->it, n);
	fs_itable_unlock(fs->it);
	if (!h) {
		fuse_reply_err(req, rc < 0 ? -rc : ENOMEM);
		return true;
	}
	wr_open_reply(req, h, fi);
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

/*
 * A full staging disk is often full only for a moment: the kernel sends
 * release after close() returns, so a file just closed and unlinked still
 * holds its staging space, and committed files adopted into the read
 * cache can be evicted.  Makes what room it can; whether to try again.
 */
static bool wait_for_space(fs_ctx *fs, size_t len, int attempt)
{
	if (attempt > 250) /* 5 s */
		return false;
	if (fs->cache && cache_free_disk(fs->cache, len) == 0)
		return true;
	if (!fs_closing_handles(fs) && !eng_space_pending(fs->eng))
		return false;
	struct timespec ts = {0, 20 * 1000000L};
	nanosleep(&ts, NULL);
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
	rc = wr_writable_stage(fs, o, o->size);
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
		for (int attempt = 1; (n == -ENOSPC || n == -EDQUOT) &&
				      wait_for_space(fs, len, attempt);
		     attempt++)
			n = fuse_buf_copy(&dst, bufv, FUSE_BUF_SPLICE_NONBLOCK);
	}
	fs_itable_lock(fs->it);
	if (n > 0) {
		if ((uint64_t)off + (uint64_t)n > o->size)
			o->size = (uint64_t)off + (uint64_t)n;
		o->dirty = true;
		h->wrote = true;
		clock_gettime(CLOCK_REALTIME, &o->mtime);
		wr_touch(o->txn);
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

/* What a change of a file's bytes or owner does to its set-id bits. */
static void kill_suid(ov_node *o)
{
	o->mode &= ~(mode_t)S_ISUID;
	if (o->mode & S_IXGRP)
		o->mode &= ~(mode_t)S_ISGID;
}

void wr_flush(fs_ctx *fs, fs_handle *h, uid_t uid)
{
	if (!h->writable)
		return;
	fs_itable_lock(fs->it);
	ov_node *o = h->ov;
	wr_pt_absorb(o);
	/* FUSE_HANDLE_KILLPRIV_V2 (fs/passthrough.c) leaves this to us */
	if (o->dirty && uid != 0 && (o->mode & (S_ISUID | S_ISGID)))
		kill_suid(o);
	/* the last writer's close: the bytes are final, and journaled before
	 * close returns (with passthrough the kernel may still write through
	 * a dup or a mapping: release finds that and stores a copy) */
	if (o->writers == 1 && o->dirty && o->linked)
		wr_put_file(fs, o);
	fs_itable_unlock(fs->it);
}

void wr_release(fs_ctx *fs, fs_handle *h, bool counted)
{
	fs_itable_lock(fs->it);
	ov_node *o = h->ov;
	if (h->pt_write) {
		wr_pt_absorb(o);
		o->pt_writers--;
	}
	if (counted && !--h->node->open_handles && h->node->pt_stage)
		wr_pt_unbind(fs, h->node);
	if (h->writable) {
		o->writers--;
		if (!--fs->writers)
			fs->writers_idle_at = wr_now_s();
	}
	o->opens--;
	if (o->txn) {
		o->txn->open--;
		wr_touch(o->txn);
	}
	if (h->writable && o->writers == 0 && o->linked) {
		/* written after its flush handed it over: a copy goes */
		if (o->dirty && o->st && o->st->handed)
			wr_writable_stage(fs, o, o->size);
		if (o->dirty)
			wr_put_file(fs, o);
		else if (wr_is_single_root(o) && !o->txn->sealed)
			wr_seal(fs, o->txn);
	}
	if (o->txn && o->txn->done && o->linked && o->refs == 1 &&
	    o->kind == OV_FILE)
		ov_remove(&fs->ov, o);
	ov_node_unref(o);
	h->ov = NULL;
	fs_itable_unlock(fs->it);
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
	ov_node *o = wr_local_of(fs, n);
	if (o)
		wr_pt_absorb(o);
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
		rc = wr_make_local_file(fs, n, truncating, &o);
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
			rc = wr_writable_stage(fs, o, keep);
			if (rc == 0 && ftruncate(o->st->fd, attr->st_size) < 0)
				rc = -errno;
			if (rc == 0 && o->pt_writers)
				pt_snap(o); /* seen: ours */
			if (rc == 0) {
				o->size = (uint64_t)attr->st_size;
				o->dirty = true;
				clock_gettime(CLOCK_REALTIME, &o->mtime);
				wr_touch(o->txn);
				if (o->writers == 0)
					rc = wr_put_file(fs, o);
			}
			ov_node_unref(o);
		}
	}
	if (rc == 0 && o) {
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		if (to_set & FUSE_SET_ATTR_MODE)
			o->mode = attr->st_mode & 07777;
		/* truncate or chown by an unprivileged caller, under
		 * FUSE_HANDLE_KILLPRIV_V2 */
		if ((to_set & FUSE_SET_ATTR_KILL_SUID) &&
		    (o->mode & (S_ISUID | S_ISGID))) {
			kill_suid(o);
			to_set |= FUSE_SET_ATTR_MODE;
		}
		if (to_set & FUSE_SET_ATTR_UID)
			o->uid = attr->st_uid;
		if (to_set & FUSE_SET_ATTR_GID)
			o->gid = attr->st_gid;
		if (to_set & FUSE_SET_ATTR_MTIME)
			o->mtime = attr->st_mtim;
		if (to_set & FUSE_SET_ATTR_MTIME_NOW)
			o->mtime = now;
		o->ctime = now;
		wr_touch(o->txn);
		bool meta = to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID |
				      FUSE_SET_ATTR_GID | FUSE_SET_ATTR_MTIME |
				      FUSE_SET_ATTR_MTIME_NOW);
		if (meta && o->kind == OV_FILE && o->writers == 0 && o->txn &&
		    o->txn->sealed && !o->dirty) {
			/* committing or committed: store it again with the
			 * new attributes (a copy of the staged bytes) */
			ov_node_ref(o);
			rc = wr_writable_stage(fs, o, o->size);
			if (rc == 0) {
				o->dirty = true;
				rc = wr_put_file(fs, o);
			}
			ov_node_unref(o);
		} else if (meta && o->kind == OV_FILE && o->dirty &&
			   o->writers == 0 && o->st && !o->st->handed) {
			rc = wr_put_file(fs, o);
		} else if (meta && o->txn && o->st && o->st->handed && !o->dirty) {
			wr_ordered(fs);
			eng_meta m;
			buf xa = BUF_INIT;
			wr_meta_of(o, &m, &xa);
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
	wr_pt_absorb(o);
	int rc = wr_writable_stage(fs, o, o->size);
	if (rc == 0 && fallocate(o->st->fd, mode, offset, length) < 0)
		rc = -errno;
	if (rc == 0 && o->pt_writers)
		pt_snap(o);
	if (rc == 0 && !(mode & FALLOC_FL_KEEP_SIZE) &&
	    (uint64_t)(offset + length) > o->size)
		o->size = (uint64_t)(offset + length);
	if (rc == 0) {
		o->dirty = true;
		wr_touch(o->txn);
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
	wr_pt_absorb(o);
	if (o->dirty && o->linked && o->pt_writers)
		rc = pt_put_copy(fs, o);
	else if (o->dirty && o->linked)
		rc = wr_put_file(fs, o); /* later writes copy the stage */
	/* a file that is a transaction of its own is stored by committing
	 * it (its PUT is its commit); later writes start a new one */
	if (rc == 0 && o->linked && wr_is_single_root(o) && !o->txn->sealed)
		rc = wr_seal(fs, o->txn);
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
	wr_pt_wait_releases(fs);
	fs_inode *n = fs_itable_get(fs->it, ino);
	ov_node *o = n ? wr_local_of(fs, n) : NULL;
	ov_txn *x = o ? o->txn : NULL;
	int rc = 0;
	uint64_t id = 0;
	/* fsync of a transaction root with a final name commits it; of any
	 * other directory it only makes its entries durable, which the
	 * journal already did */
	if (x && x->is_dir && !strcmp(x->root, o->path) &&
	    !eng_is_temp_name(fs->eng, x->root)) {
		rc = wr_seal(fs, x);
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
	buf blob = BUF_INIT;
	proto_xattrs_decode(n->xattrs_json, &blob);
	size_t pos = 0;
	const char *name, *val;
	uint32_t vlen;
	while (proto_xattr_next(blob.data, blob.len, &pos, &name, &val, &vlen))
		ov_xattr_set(tmp, name, val, vlen, 0);
	buf_free(&blob);
	return 0;
}

/* getxattr (name) or listxattr (name NULL): the overlay node's xattrs, or
 * what the manifest or object metadata recorded for a remote file. */
static void xattr_query(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	fs_ctx *fs = fs_req_ctx(req);
	fs_itable_lock(fs->it);
	fs_inode *n = fs_itable_get(fs->it, ino);
	ov_node *o = n ? wr_local_of(fs, n) : NULL;
	ov_node tmp;
	if (!o && n && n->xattrs_json) {
		remote_xattrs(n, &tmp);
		o = &tmp;
	}
	char *v = size ? malloc(size) : NULL;
	int rc = !o ? (name ? -ENODATA : 0)
	       : size && !v ? -ENOMEM
	       : name	    ? ov_xattr_get(o, name, v, size)
			    : ov_xattr_list(o, v, size);
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

void wr_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		 size_t size)
{
	xattr_query(req, ino, name, size);
}

void wr_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	xattr_query(req, ino, NULL, size);
}

static void xattr_changed(fs_ctx *fs, ov_node *o)
{
	wr_touch(o->txn);
	if (o->txn && o->st && o->st->handed && !o->dirty) {
		wr_ordered(fs);
		eng_meta m;
		buf xa = BUF_INIT;
		wr_meta_of(o, &m, &xa);
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
	ov_node *o = n ? wr_local_of(fs, n) : NULL;
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
	if (!wr_require_engine(req))
		return;
	fs_ctx *fs = fs_req_ctx(req);
	fs_itable_lock(fs->it);
	fs_inode *n = fs_itable_get(fs->it, ino);
	ov_node *o = n ? wr_local_of(fs, n) : NULL;
	int rc = !o ? -ENODATA : ov_xattr_remove(o, name);
	if (rc == 0)
		xattr_changed(fs, o);
	fs_itable_unlock(fs->it);
	fuse_reply_err(req, -rc);
}

