/*
 * fs/write-cow.c: copy-on-write.  Every function requires the inode table locked unless it says otherwise;
 * some drop it around network I/O or copies.
 */
#ifndef CKPTFS_FS_WRITE_COW_H
#define CKPTFS_FS_WRITE_COW_H

#include <stdbool.h>
#include <stdint.h>

#include "fs/ctx.h"

/* Downloads remote file n (key) into staging file fd.  No lock. */
int wr_fetch_remote(fs_ctx *fs, fs_inode *n, const char *key, int fd,
		    uint64_t *size);
int wr_make_local_file(fs_ctx *fs, fs_inode *n, bool truncate,
		       ov_node **out);

#endif
