/*
 * fs/write-deletes.c: remote deletes held back.  Every function requires the inode table locked unless it says otherwise;
 * some drop it around network I/O or copies.
 */
#ifndef CKPTFS_FS_WRITE_DELETES_H
#define CKPTFS_FS_WRITE_DELETES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fs/ctx.h"

#define DELETE_QUIET_S 1.0

typedef struct wr_del {
	char *path;
	bool is_dir;
	char *keep; /* the parent directory its delete must keep, or NULL */
	uint64_t hid; /* its journal row (eng_hold_delete) */
} wr_del;

struct wr_deletes {
	wr_del *v;
	size_t n, cap;
	double last;
};

void wr_dels_clear(struct wr_deletes *d);
void wr_flush_deletes(fs_ctx *fs);
int wr_hold_delete(fs_ctx *fs, const char *path, bool is_dir,
		   const char *keep);
/* Before any other fact reaches the engine: sends the held deletes. */
void wr_ordered(fs_ctx *fs);
/* wr_ordered, for a fact about path only: sends the held deletes only when
 * one of them overlaps path. */
void wr_ordered_for(fs_ctx *fs, const char *path);

#endif
