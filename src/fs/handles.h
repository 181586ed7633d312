/*
 * fs/handles.c: open handles of files and directories.
 */
#ifndef CKPTFS_FS_HANDLES_H
#define CKPTFS_FS_HANDLES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "fs/ctx.h"

void fs_handle_link(fs_ctx *fs, fs_handle *h);     /* table locked */
/* Frees a handle of a remote object; counted: it counts in its inode's
 * open_handles.  A local file's handle: wr_handle_free. */
void fs_handle_free(fs_ctx *fs, fs_handle *h, bool counted);
/* The two halves of a free, for wr_handle_free. */
void fs_handle_settle(fs_handle *h);
void fs_handle_drop(fs_ctx *fs, fs_handle *h, bool counted);
/* Whether a handle was closed (flushed) and its release is still to come:
 * the space it holds is about to be freed. */
bool fs_closing_handles(fs_ctx *fs);
/* Releases of closed handles so far (for fs_wait_release's seen). */
uint64_t fs_releases(fs_ctx *fs);
/* Waits until a release arrives after *seen (fs_releases before the
 * attempt that failed for want of room: one that came during the attempt
 * counts), or until deadline (CLOCK_REALTIME); false when none came and
 * none is to come (nothing closing) or the deadline passed.  Updates
 * *seen.  Handles opened without flush (fs->noflush_open) count as
 * closing, for at most 1 s when no other one is. */
bool fs_wait_release(fs_ctx *fs, const struct timespec *deadline,
		     uint64_t *seen);
void fs_dirhandle_unlink(fs_ctx *fs, fs_dirhandle *dh); /* table locked */
void fs_dirhandle_free(fs_dirhandle *dh);

/* Whether thread ids a and b belong to one process (true when /proc no
 * longer knows one of them): whether a flush closes the handle its opener
 * holds.  No lock: it reads /proc. */
bool fs_same_process(pid_t a, pid_t b);

#endif
