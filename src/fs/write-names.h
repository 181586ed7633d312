/*
 * fs/write-names.c: names (operations, for fs/ops.c).
 */
#ifndef CKPTFS_FS_WRITE_NAMES_H
#define CKPTFS_FS_WRITE_NAMES_H

#include <fuse_lowlevel.h>
#include <sys/types.h>

void wr_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
	      mode_t mode, dev_t rdev);
void wr_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
	      mode_t mode);
void wr_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void wr_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void wr_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		const char *name);
void wr_readlink(fuse_req_t req, fuse_ino_t ino);
void wr_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
	       fuse_ino_t newparent, const char *newname, unsigned int flags);
void wr_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
	     const char *newname);
void wr_create(fuse_req_t req, fuse_ino_t parent, const char *name,
	       mode_t mode, struct fuse_file_info *fi);

#endif
