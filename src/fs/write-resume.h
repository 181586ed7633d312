/*
 * fs/write-resume.c: the restart.
 */
#ifndef CKPTFS_FS_WRITE_RESUME_H
#define CKPTFS_FS_WRITE_RESUME_H

#include "fs/ctx.h"

/* After a restart: files the journal still holds show in the mount again
 * (fs_ctx_restore).  No lock. */
void wr_restore(fs_ctx *fs);

#endif
