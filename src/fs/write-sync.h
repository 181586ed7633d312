/*
 * fs/write-sync.c: commit triggers.  Every function requires the inode table locked unless it says otherwise;
 * some drop it around network I/O or copies.
 */
#ifndef CKPTFS_FS_WRITE_SYNC_H
#define CKPTFS_FS_WRITE_SYNC_H

#include <stddef.h>
#include <stdint.h>

#include "fs/ctx.h"

/* `ckptfs commit PATH` and `ckptfs sync` (fs_commit_path, fs_sync in
 * fs/ops.h).  No lock. */
int wr_commit_path(fs_ctx *fs, const char *relpath, char *err, size_t errsz);
int wr_sync(fs_ctx *fs,
	    void (*progress)(void *arg, uint64_t done, uint64_t total),
	    void *arg);

void wr_wait_releases(fs_ctx *fs); /* before a commit trigger */

/* Seals every transaction not done: before each eng_sync, which seals the
 * engine's whole queue. */
void wr_seal_all(fs_ctx *fs);

/* A rename of a name inside a transaction being committed (not its root)
 * waits until that commit is done (a rename of a committed name then),
 * sealing every transaction ahead of it as a rename of a committed name
 * does: for a and b, the names it takes and replaces.  0, or the commit's -errno.  Table locked; dropped while
 * waiting. */
int wr_wait_sealed(fs_ctx *fs, const char *a, const char *b);

/* What wr_rename of a to b (in directory np) waits for first: a commit
 * on its way inside either (wr_wait_sealed), and the manifests governing
 * np when this mount does not know them (wr_manifest_root_known), so
 * that a name moved into np's checkpoint is stored in its manifest (model
 * seed 7404: a new symlink renamed into a directory just renamed
 * remotely went out as a plain object, hidden by its manifest).  0 or
 * -errno.  Table locked; dropped while waiting or listing. */
int wr_rename_ready(fs_ctx *fs, fs_inode *np, const char *a, const char *b);

/* A remote rename's wait for its new name `to` to be visible: seals
 * everything, waits for the whole queue (eng_sync), then drops a whiteout
 * at `to` (a removal just before the rename, whose delete ran ahead of
 * it: the reap keeps whiteouts for a second, and this one hid the new
 * name) and counts every listing stale.  0 or -errno.  Table locked;
 * dropped while waiting. */
int wr_sync_shown(fs_ctx *fs, const char *to);

/* Whether wr_rename's move of a to b, which answered *rc, is tried again:
 * the commit of a's transaction ended since wr_wait_sealed (-ENOENT: the
 * engine has no transaction to move; its name is remote now, the node
 * goes: wr_drop_if_done) or began (-EBUSY: the idle commit sealed it
 * while the rename fetched a listing; waited for here, *rc set to the
 * commit's error if it failed).  Table locked; dropped while waiting. */
bool wr_rename_again(fs_ctx *fs, int *rc, const char *a, const char *b);

#endif
