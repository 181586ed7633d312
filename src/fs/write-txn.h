/*
 * fs/write-txn.c: transactions and staging files.  Every function requires the inode table locked unless it says otherwise;
 * some drop it around network I/O or copies.
 */
#ifndef CKPTFS_FS_WRITE_TXN_H
#define CKPTFS_FS_WRITE_TXN_H

#include <stdbool.h>
#include <stdint.h>

#include "fs/ctx.h"

/* The transaction root whose manifest governs a name made in directory
 * p (its nearest committed or committing ancestor root), or NULL. */
char *wr_manifest_root(fs_ctx *fs, fs_inode *p);
/* wr_manifest_root once the manifests it reads are known: p and the
 * directories above it up to that root that this mount has not listed
 * (never, or not since a sync or since its own commit of them) are
 * listed first.  A name stored without the root governing it is a plain
 * object the manifest hides from readers (model seed 7303: a rename in a
 * checkpoint directory this mount had just committed; a chmod of a
 * committed file right after a sync).  Drops the lock while listing. */
char *wr_manifest_root_known(fs_ctx *fs, fs_inode *p);
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
