/*
 * fs/write-dirattrs.c: changes of a committed directory's attributes
 * (chmod, chown, utimensat, setxattr, removexattr), stored by a step of
 * their own (doc/posix.md, "Changing a committed directory").
 */
#ifndef CKPTFS_FS_WRITE_DIRATTRS_H
#define CKPTFS_FS_WRITE_DIRATTRS_H

#include <stdbool.h>

#include "fs/ctx.h"

/* Whether n is a committed directory whose attributes a manifest records
 * (written through ckptfs) and that no local node holds (but a
 * placeholder of a single file's transaction, wr_dirattr_adopt): a change
 * of it
 * goes through wr_dirattr_node and wr_dirattr_store.  Lists n first when
 * it was only looked up.  Table locked; dropped while listing. */
bool wr_dirattr_remote(fs_ctx *fs, fs_inode *n);
/* tmp: a node of n's attributes as they show (mode, owner, mtime, ctime,
 * xattrs), for the overlay's code to change; buf_free(&tmp->xattrs)
 * after.  Table locked. */
void wr_dirattr_node(const fs_inode *n, ov_node *tmp);
/* A placeholder directory node o of n (restored from the journal as a
 * parent of a file's transaction, without its attributes: the bucket's
 * show, fs/overlay.h) about to be changed takes the bucket's attributes
 * first, so the change is made to what every host shows, not to the
 * placeholder's defaults (model seed 7800: removexattr of a name the
 * directory showed answered ENODATA).  Nothing when its record cannot be
 * loaded (today's rule).  Returns n's local node as it is now, or NULL
 * for a placeholder of a single file's transaction: a committed
 * directory, changed by a step of its own (wr_dirattr_remote says yes).
 * Table locked; dropped to list n. */
ov_node *wr_dirattr_adopt(fs_ctx *fs, fs_inode *n, ov_node *o);
/* Stores n's attributes as tmp holds them: a step of their own
 * (eng_dir_set), after every fact before it; they show on this mount
 * from now on.  -ENOTSUP when no manifest this mount knows records n (its
 * record is not loaded yet), or another -errno.  Table locked. */
int wr_dirattr_store(fs_ctx *fs, fs_inode *n, const ov_node *tmp);
/* Forgets the changes whose steps are done and whose roots' manifests
 * were listed since (they show the records).  Table locked. */
void wr_dirattr_reap(fs_ctx *fs);
/* After a restart: the changes a journaled step still stores show.
 * Table locked. */
void wr_dirattr_restore(fs_ctx *fs);
/* At unmount. */
void wr_dirattr_free(fs_ctx *fs);

#endif
