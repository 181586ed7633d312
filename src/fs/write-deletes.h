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
	/* held when an earlier mount was killed (wr_dels_revive) */
	bool revived;
} wr_del;

struct wr_deletes {
	wr_del *v;
	size_t n, cap;
	double last;
};

void wr_dels_clear(struct wr_deletes *d);
/* Sends every held delete, revived ones included (sync, unmount). */
void wr_flush_deletes(fs_ctx *fs);
int wr_hold_delete(fs_ctx *fs, const char *path, bool is_dir,
		   const char *keep);
/* Before any other fact reaches the engine, about a and b (either may be
 * NULL): sends the held deletes, revived ones only when they overlap a or
 * b. */
void wr_ordered(fs_ctx *fs, const char *a, const char *b);
/* wr_ordered, for a fact about path only: sends the held deletes only when
 * one of them overlaps path. */
void wr_ordered_for(fs_ctx *fs, const char *path);
/* The idle thread's second of quiet: sends what is held, revived deletes
 * excepted. */
void wr_flush_quiet(fs_ctx *fs);
/* At the restart: the deletes a killed mount held, held again (revived),
 * each one's name a whiteout as before the kill. */
void wr_dels_revive(fs_ctx *fs);
/* The paths of the held deletes at or under dir (NULL-terminated, to
 * free with their strings), or NULL. */
char **wr_dels_under(const fs_ctx *fs, const char *dir);
void wr_dels_free_paths(char **paths);
/* What was removed from sealed transaction txn while it committed (its
 * deletes held, gone: wr_dels_under(from) before the move), now that its
 * root moves from `from` to `to` and it commits again there: dropped
 * from it at their new names (doc/commit.md, "The FUSE layer"). */
int wr_dels_drop_moved(fs_ctx *fs, uint64_t txn, const char *from,
		       const char *to, char **gone);
/* Whether a delete other than a revived one is held. */
bool wr_dels_held_now(const fs_ctx *fs);
/* Whether a revived delete takes path away (its whiteout stays). */
bool wr_dels_revived_at(const fs_ctx *fs, const char *path);

#endif
