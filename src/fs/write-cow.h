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
/* Remote file n renamed into a local directory (fs/write-names.c
 * rename_move): made local (wr_make_local_file) and handed to the engine
 * at its old name, in its transaction still open, for the rename to move.
 * Before, nothing handed it over: the move took an empty transaction and
 * the file was lost (mv of a committed file into a new directory; model
 * seed 7405, a symlink into a checkpoint directory just committed). */
int wr_copy_in(fs_ctx *fs, fs_inode *n, ov_node **out);

#endif
