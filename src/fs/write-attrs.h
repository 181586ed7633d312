/*
 * fs/write-attrs.c: attributes and extended attributes (operations, for
 * fs/ops.c).
 */
#ifndef CKPTFS_FS_WRITE_ATTRS_H
#define CKPTFS_FS_WRITE_ATTRS_H

#include <fuse_lowlevel.h>
#include <stddef.h>
#include <sys/stat.h>

void wr_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		 size_t size);
void wr_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void wr_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		 const char *value, size_t size, int flags);
void wr_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);
void wr_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		int to_set, struct fuse_file_info *fi);

#endif
