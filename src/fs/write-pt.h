/*
 * fs/write-pt.c: write passthrough.  Every function requires the inode table locked unless it says otherwise;
 * some drop it around network I/O or copies.
 */
#ifndef CKPTFS_FS_WRITE_PT_H
#define CKPTFS_FS_WRITE_PT_H

#include <stdbool.h>

#include "fs/ctx.h"

bool wr_pt_compatible(const fs_inode *n, const ov_node *o);
void wr_pt_choose(fs_ctx *fs, fs_inode *n, ov_node *o, fs_handle *h);
void wr_pt_unbind(fs_ctx *fs, fs_inode *n); /* n's last handle went */
int wr_pt_put_copy(fs_ctx *fs, ov_node *o);

#endif
