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
/* Whether removing a name of directory p keeps p: the delete step PUTs
 * p's empty directory object first (eng_remote_delete_keep), when p was
 * written through ckptfs (its attributes are in a manifest) and is not
 * the mount root.  That object keeps p when the removal leaves nothing
 * else under its prefix, as rmdir of a leaf or unlink of the last file
 * leaves the directory on a local disk (before, `rmdir nested/a/b/c` of
 * a committed tree removed b, a and nested too), and its LastModified
 * moves p's mtime on every mount, as a removal does on a local disk
 * (doc/posix.md, "Directory attributes").  Directories other tools made
 * keep the old rules (a prefix with nothing under it is gone, the mtime
 * is the newest object's).  Table locked. */
bool wr_keeps_parent(const fs_inode *p);
/* A removal of a local node's name that reaches the bucket (held after
 * its transaction's commit, or the remote original it shadows) keeps the
 * parent directory as an unlink of a committed name does (the delete
 * step PUTs the parent's directory object first, so removing its last
 * name leaves it; doc/posix.md, "Removing the last name of a
 * directory"): in_txn, the name is not its transaction's root, so the
 * parent is that transaction's, recorded by its manifest; else the
 * parent is kept when it was written through ckptfs.  Table locked. */
int wr_hold_delete_in(fs_ctx *fs, const char *path, bool is_dir,
		      bool in_txn);
int wr_remote_delete_in(fs_ctx *fs, const char *path, bool is_dir,
			bool in_txn);
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
/* What the journal restored at or under path leaves the overlay, and path
 * becomes a whiteout, as the removal made it before the kill (do_remove):
 * a file of a transaction that was committing when it was removed (the
 * kill came before its held delete was sent), or, before != UINT64_MAX,
 * only the nodes of transactions made before step `before` (a delete
 * journaled behind their commit; a name made again after it stays).
 * Table locked. */
void wr_hide_restored(fs_ctx *fs, const char *path, uint64_t before);
/* The paths of the held deletes at or under dir, a transaction root
 * about to move (NULL-terminated, to free with their strings), or NULL;
 * their parents inside dir are no longer kept (wr_hold_delete_in): the
 * transaction commits at the new name, so keeping them would make them
 * at the old one (model regression
 * rmdir_in_a_committing_root_then_the_root_renamed). */
char **wr_dels_moving(fs_ctx *fs, const char *dir);
void wr_dels_free_paths(char **paths);
/* What was removed from sealed transaction txn while it committed (its
 * deletes held, gone: wr_dels_moving(from) before the move), now that its
 * root moves from `from` to `to` and it commits again there: dropped
 * from it at their new names (doc/commit.md, "The FUSE layer"). */
int wr_dels_drop_moved(fs_ctx *fs, uint64_t txn, const char *from,
		       const char *to, char **gone);
/* Whether a delete other than a revived one is held. */
bool wr_dels_held_now(const fs_ctx *fs);
/* Whether a revived delete takes path away (its whiteout stays). */
bool wr_dels_revived_at(const fs_ctx *fs, const char *path);

#endif
