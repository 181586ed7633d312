/*
 * fs/dirs.c: the read side's operations on names, attributes and
 * directories (for fs/ops.c).
 */
#ifndef CKPTFS_FS_DIRS_H
#define CKPTFS_FS_DIRS_H

#include <fuse_lowlevel.h>
#include <stddef.h>
#include <stdint.h>

void rd_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void rd_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void rd_forget_multi(fuse_req_t req, size_t count,
		     struct fuse_forget_data *forgets);
void rd_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void rd_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void rd_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi);
void rd_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi);
void rd_releasedir(fuse_req_t req, fuse_ino_t ino,
		   struct fuse_file_info *fi);

#endif
