/*
 * fs_ops: the FUSE low-level operation table (fs/ops.h), and the
 * operations that only choose between the two sides: open, read, flush and
 * release go to the write path (fs/write.c) for files held locally or
 * opened for writing, else to the read path (fs/read.c).  Lookups,
 * attributes and listings are in fs/dirs.c, file reads in fs/read.c, the
 * write path in fs/write*.c.
 *
 * Concurrency: libfuse's multi-threaded loop calls these from several
 * worker threads.  The inode table (and everything hanging off inodes:
 * attributes, listings, the overlay) is guarded by the table mutex, which
 * is never held across network I/O.  Open handles are owned by one
 * fs_handle each, with its own mutex for the read window.
 */
#include "fs/ops.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "fs/ctx.h"
#include "fs/dirs.h"
#include "fs/handles.h"
#include "fs/read.h"
#include "fs/write-attrs.h"
#include "fs/write-names.h"
#include "fs/write.h"

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (!wr_open(req, ino, fi)) /* a local file, or opened for writing */
		rd_open(req, ino, fi);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	fs_handle *h = (fs_handle *)(uintptr_t)fi->fh;
	pthread_rwlock_rdlock(&h->busy);
	if (h->ov)
		wr_read(req, h, size, off);
	else
		rd_read(req, size, off, fi);
	pthread_rwlock_unlock(&h->busy);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino,
		     struct fuse_file_info *fi)
{
	fs_ctx *fs = fs_req_ctx(req);
	fs_handle *h = (fs_handle *)(uintptr_t)fi->fh;
	/* a fork's copy of the descriptor closing is no close of the
	 * handle's: it stays open in the opener (fs/write.c wr_flush) */
	bool own = fs_same_process(h->opener, fuse_req_ctx(req)->pid);
	fs_itable_lock(fs->it);
	if (own && !h->flushed) {
		h->flushed = true;
		fs->closing++;
		if (h->writable)
			fs->wr_closing++;
	}
	fs_itable_unlock(fs->it);
	if (h->ov)
		wr_flush(fs, h, req);
	fuse_reply_err(req, 0);
}

static void op_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	fs_handle *h = (fs_handle *)(uintptr_t)fi->fh;
	if (h->ov)
		wr_handle_free(fs_req_ctx(req), h, true);
	else
		fs_handle_free(fs_req_ctx(req), h, true);
	fuse_reply_err(req, 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;
	memset(&sv, 0, sizeof sv);
	sv.f_bsize = 1 << 20;
	sv.f_frsize = 4096;
	sv.f_blocks = sv.f_bfree = sv.f_bavail = (fsblkcnt_t)1 << 38; /* 1 PiB */
	sv.f_files = sv.f_ffree = sv.f_favail = (fsfilcnt_t)1 << 32;
	sv.f_namemax = 255;
	wr_statfs(fs_req_ctx(req), &sv);
	fuse_reply_statfs(req, &sv);
}

static void op_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	fuse_reply_err(req, (mask & W_OK) && !fs_req_ctx(req)->eng ? EROFS : 0);
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
	.lookup = rd_lookup,
	.forget = rd_forget,
	.forget_multi = rd_forget_multi,
	.getattr = rd_getattr,
	.opendir = rd_opendir,
	.readdir = rd_readdir,
	.readdirplus = rd_readdirplus,
	.releasedir = rd_releasedir,
	.open = op_open,
	.read = op_read,
	.flush = op_flush,
	.release = op_release,
	.statfs = op_statfs,
	.access = op_access,
	/* the write path: fs/write.c, fs/write-attrs.c, fs/write-names.c */
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
