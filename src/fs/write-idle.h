/*
 * fs/write-idle.c: the idle thread, the upload hold.  Every function requires the inode table locked unless it says otherwise;
 * some drop it around network I/O or copies.
 */
#ifndef CKPTFS_FS_WRITE_IDLE_H
#define CKPTFS_FS_WRITE_IDLE_H

#include "fs/ctx.h"

/* Attaches the commit engine (fs_ctx_set_engine) and starts the idle
 * thread.  No lock. */
void wr_set_engine(fs_ctx *fs, eng *e, double commit_delay);
/* Stops the idle thread.  No lock. */
void wr_shutdown(fs_ctx *fs);

void wr_writer_opened(fs_ctx *fs); /* a writable handle was opened */
/* Drops at once the local nodes of transactions the engine has made
 * visible (the idle thread does it within 250 ms), so the names are
 * remote ones again: a rename right after a commit renames the committed
 * directory. */
void wr_reap(fs_ctx *fs);
/* Drops local node o of a transaction the engine has made visible, as the
 * reap does (its inode shows what was committed and asks for the version
 * again), when the reap found it still held (a handle released late). */
void wr_drop_committed(fs_ctx *fs, ov_node *o);
/* Drops the node at path when it is a file its commit made remote and
 * nothing changed since: its transaction is done, or the engine finished
 * it since the last reap (a rename then renames the committed name; the
 * engine has no transaction left to move).  Whether it did. */
bool wr_drop_if_done(fs_ctx *fs, const char *path);

#endif
