/*
 * fs/read.c: open and read of a remote file (wr_open declined it), for
 * fs/ops.c.
 */
#ifndef CKPTFS_FS_READ_H
#define CKPTFS_FS_READ_H

#include <fuse_lowlevel.h>
#include <stddef.h>

void rd_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void rd_read(fuse_req_t req, size_t size, off_t off,
	     struct fuse_file_info *fi);

#endif
