/*
 * fs/write.c: handles and data of local files, and the write path's
 * operations on them (for fs/ops.c, fs/context.c).  Every function requires the inode table locked unless it says otherwise;
 * some drop it around network I/O or copies.
 */
#ifndef CKPTFS_FS_WRITE_H
#define CKPTFS_FS_WRITE_H

#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/statvfs.h>

#include "fs/ctx.h"

fs_handle *wr_local_handle(fs_ctx *fs, fs_inode *n, ov_node *o,
			   bool writable);
void wr_open_reply(fuse_req_t req, fs_handle *h, struct fuse_file_info *fi);


/* fs/write.c: open of a local file, or for writing: true when it replied */
bool wr_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
bool wr_read(fuse_req_t req, fs_handle *h, size_t size, off_t off);
/* flush of a handle with h->ov.
 * req: the closing process's; a writer other than root loses the file's
 * set-user-ID bit (and set-group-ID, as on a local disk: wr_kill_suid) */
void wr_flush(fs_ctx *fs, fs_handle *h, fuse_req_t req);
/* Frees a handle with h->ov (counted: as for fs_handle_free); the file is
 * handed to the engine if it was its last writer. */
void wr_handle_free(fs_ctx *fs, fs_handle *h, bool counted);
void wr_statfs(fs_ctx *fs, struct statvfs *sv);

void wr_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *bufv,
		  off_t off, struct fuse_file_info *fi);
void wr_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
	      struct fuse_file_info *fi);
void wr_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
		 struct fuse_file_info *fi);
void wr_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset,
		  off_t length, struct fuse_file_info *fi);

#endif
