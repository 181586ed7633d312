/*
 * fs/write-txn.c: transactions and staging files.  Every function requires the inode table locked unless it says otherwise;
 * some drop it around network I/O or copies.
 */
#ifndef CKPTFS_FS_WRITE_TXN_H
#define CKPTFS_FS_WRITE_TXN_H

#include <stdbool.h>
#include <stdint.h>

#include "fs/ctx.h"

char *wr_manifest_root(fs_ctx *fs, fs_inode *p);
int wr_txn_for_new(fs_ctx *fs, fs_inode *p, const char *path, bool is_dir,
		   ov_txn **out);
int wr_seal(fs_ctx *fs, ov_txn *x);
/* Seals every transaction no handle holds open (before eng_sync, which
 * would seal them without what wr_seal records). */
void wr_seal_closed(fs_ctx *fs);
int wr_put_file(fs_ctx *fs, ov_node *o);
int wr_put_stage(fs_ctx *fs, ov_node *o, ov_stage *s, uint64_t size);
ov_stage *wr_stage_new(fs_ctx *fs, int fd, uint64_t sid);
int wr_new_stage(fs_ctx *fs, ov_node *o);
int wr_copy_fd(int in, int out, uint64_t len); /* no lock */
int wr_writable_stage(fs_ctx *fs, ov_node *o, uint64_t keep);

#endif
