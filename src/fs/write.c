/*
 * The write path of the FUSE operations (doc/commit.md, "The FUSE layer"):
 * handles of local files — open, read, write, flush, release, fallocate,
 * fsync, fsyncdir — and statfs.
 *
 * Everything written lands in staging files of the commit engine
 * (commit/engine.h) and in the overlay (fs/overlay.h), which lookups and
 * listings consult before the remote listing.  The write files decide what
 * a call means for the bucket — which transaction a name belongs to
 * (fs/write-txn.c), when a transaction commits, what a rename or an unlink
 * of a remote name does (fs/write-names.c, fs/write-deletes.c) — and tell
 * the engine, in the order the application issued the calls.  The others:
 * fs/write-attrs.c (setattr, xattrs), fs/write-cow.c (copy-on-write of
 * remote files), fs/write-pt.c (write passthrough), fs/write-idle.c (the
 * idle-commit thread), fs/write-resume.c (restart from the journal),
 * fs/write-sync.c (`ckptfs commit` and `sync`).
 *
 * Transactions: a directory created here whose parent is not local roots
 * one, with everything under it; a file written outside any local
 * directory is one by itself and commits when its last writer closes it.
 * A directory transaction commits on rename of its root, fsync of its
 * root, `ckptfs commit`, sync, unmount, or after commit_delay seconds with
 * no open handle and no change (the idle thread).  A root with a temp name
 * (eng_is_temp_name) only commits once renamed to a final one.
 *
 * Locking: the inode table's mutex guards the overlay too; it is dropped
 * around every engine call that can wait on the network (marker PUTs,
 * waits) and around data copies.
 */
#include "fs/write.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "commit/engine.h"
#include "fs/ctx.h"
#include "fs/handles.h"
#include "fs/write-cow.h"
#include "fs/write-idle.h"
#include "fs/write-local.h"
#include "fs/write-pt.h"
#include "fs/write-sync.h"
#include "fs/write-txn.h"
#include "util/log.h"

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
	wr_pt_choose(fs, n, o, h);
	return h;
}

void wr_open_reply(fuse_req_t req, fs_handle *h, struct fuse_file_info *fi)
{
	fi->fh = (uint64_t)(uintptr_t)h;
	fi->direct_io = 0;
	fi->keep_cache = 0;
	fs_pt_mark_next_open(h->backing_id);
	if (fuse_reply_open(req, fi) == -ENOENT)
		wr_handle_free(fs_req_ctx(req), h, true);
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
			o->failed = 0; /* written again: its next put clears
					* the poison */
			o->dirty = true;
			clock_gettime(CLOCK_REALTIME, &o->mtime);
			o->ctime = o->mtime;
			wr_touch(o->txn);
		}
		ov_node_unref(o);
	}
	/* the handles still bound to a staging file handed over since are
	 * usually closed already, their release in flight */
	if (rc == 0 && !wr_pt_compatible(n, o)) {
		ov_node_ref(o);
		wr_wait_releases(fs);
		bool gone = !o->linked;
		ov_node_unref(o);
		if (gone)
			rc = -ENOENT; /* removed meanwhile */
	}
	if (rc == 0 && !wr_pt_compatible(n, o)) {
		log_warn("open %s: a handle opened while it was written is still "
			 "open, and the file was committed since; close it first",
			 o->path);
		rc = -ETXTBSY;
	}
	fs_handle *h = rc == 0 ? wr_local_handle(fs, n, o, wr) : NULL;
	if (h)
		h->opener = fuse_req_ctx(req)->pid;
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
		o->ctime = o->mtime;
		wr_touch(o->txn);
	}
	if (n == -ENOSPC || n == -EDQUOT || n == -EIO) {
		/* a short file: never committed as it is (doc/commit.md,
		 * "Failed writes") */
		o->failed = (int)-n;
		if (o->txn && o->linked)
			eng_file_poison(fs->eng, o->txn->id, o->path, (int)-n);
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

void wr_flush(fs_ctx *fs, fs_handle *h, fuse_req_t req)
{
	if (!h->writable)
		return;
	uid_t uid = fuse_req_ctx(req)->uid;
	/* a close by another process than the opener's is a fork's copy of
	 * the descriptor going (a subprocess spawned while the file is
	 * open): the opener still writes, through passthrough straight into
	 * the staging file, so the file is not handed over now; the opener's
	 * own close, or the release of the last descriptor, does it */
	bool own = fs_same_process(h->opener, fuse_req_ctx(req)->pid);
	fs_itable_lock(fs->it);
	ov_node *o = h->ov; /* the handle holds it */
	wr_pt_absorb(fs, o);
	/* FUSE_HANDLE_KILLPRIV_V2 (fs/passthrough.c) leaves this to us */
	if (o->dirty && uid != 0 && (o->mode & (S_ISUID | S_ISGID))) {
		wr_caller who;
		fs_itable_unlock(fs->it); /* it reads /proc */
		wr_caller_of(req, &who);
		fs_itable_lock(fs->it);
		wr_kill_suid(o, wr_caller_in(&who, o->gid));
	}
	/* the last writer's close: the bytes are final, and journaled before
	 * close returns (with passthrough the kernel may still write through
	 * a dup or a mapping: release finds that and stores a copy) */
	if (o->writers == 1 && (o->dirty || o->meta_dirty) && o->linked &&
	    own)
		wr_put_file(fs, o);
	fs_itable_unlock(fs->it);
}

/* counted: as for fs_handle_free; the handle leaves its inode's count
 * here, before the file is handed over (a new open must not find the
 * staging file bound and about to be handed). */
static void release(fs_ctx *fs, fs_handle *h, bool counted)
{
	fs_itable_lock(fs->it);
	ov_node *o = h->ov;
	if (h->pt_write) {
		wr_pt_absorb(fs, o);
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
		bool changed = o->dirty || o->meta_dirty;
		if (changed && o->st && o->st->handed)
			wr_writable_stage(fs, o, o->size);
		if (changed)
			wr_put_file(fs, o);
		else if (wr_is_single_root(o) && !o->txn->sealed)
			wr_seal(fs, o->txn);
	}
	if (o->txn && o->txn->done && o->linked && o->refs == 1 &&
	    o->kind == OV_FILE)
		wr_drop_committed(fs, o);
	ov_node_unref(o);
	h->ov = NULL;
	fs_itable_unlock(fs->it);
}

void wr_handle_free(fs_ctx *fs, fs_handle *h, bool counted)
{
	fs_handle_settle(h);
	release(fs, h, counted);
	fs_handle_drop(fs, h, false);
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
	wr_pt_absorb(fs, o);
	int rc = wr_writable_stage(fs, o, o->size);
	if (rc == 0 && fallocate(o->st->fd, mode, offset, length) < 0)
		rc = -errno;
	if (rc == 0 && o->pt_writers)
		wr_pt_snap(o);
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
	wr_pt_absorb(fs, o);
	bool changed = o->dirty || o->meta_dirty;
	if (changed && o->linked && o->pt_writers)
		rc = wr_pt_put_copy(fs, o);
	else if (changed && o->linked)
		rc = wr_put_file(fs, o); /* later writes copy the stage */
	/* a file that is a transaction of its own is stored by committing
	 * it (its PUT is its commit); later writes start a new one */
	if (rc == 0 && o->linked && wr_is_single_root(o) && !o->txn->sealed)
		rc = wr_seal(fs, o->txn);
	if (rc == 0 && o->failed)
		rc = -EIO; /* a write failed: not stored (eng_file_poison) */
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
	wr_wait_releases(fs);
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
