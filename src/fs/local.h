/*
 * fs/local.c: the door between the two sides.  What the read side (lookups,
 * attributes, listings: fs/dirs.c, fs/nodes.c, fs/metaread.c, fs/read.c)
 * asks about local nodes, those the write side keeps in the overlay
 * (fs/overlay.h) until they are committed; the read side calls nothing
 * else of the write side, and the write side never calls the read side's
 * operations (fs/dirs.c, fs/read.c).  Table locked.
 */
#ifndef CKPTFS_FS_LOCAL_H
#define CKPTFS_FS_LOCAL_H

#include <stdbool.h>
#include <sys/stat.h>

#include "fs/ctx.h"

/* Lookup of name in p answered by the overlay: 1 (found: *out, or
 * *out NULL for a whiteout: ENOENT), 0 (ask the remote listing). */
int fs_local_lookup(fs_ctx *fs, fs_inode *p, const char *name,
		    fs_inode **out);
/* Attributes of a local node; false when n is not one, or is a directory
 * restored from the journal without attributes (the bucket's show). */
bool fs_local_fill_stat(fs_ctx *fs, const fs_inode *n, struct stat *st);
/* Whether the overlay has a local directory at n's path. */
bool fs_local_is_dir(fs_ctx *fs, const fs_inode *n);
/* Whether n has a node in the overlay at all (a directory restored from the
 * journal and merged with the bucket's listing included). */
bool fs_local_has_node(fs_ctx *fs, const fs_inode *n);
/* Merges the overlay into a directory snapshot. */
int fs_local_merge_listing(fs_ctx *fs, fs_inode *d, fs_dirhandle *dh);
/* The last directory listing being fetched returned: the quiet time of
 * held deletes (fs/write-deletes.h) starts again now. */
void fs_local_fetch_done(fs_ctx *fs);

#endif
