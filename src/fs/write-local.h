/*
 * fs/write-local.c: local nodes, the small facts about them the write files
 * share (the staging file as the kernel wrote it through passthrough, a
 * transaction's last change, the engine's view of a node's attributes, the
 * caller of a request).  Every function requires the inode table locked unless it says otherwise;
 * some drop it around network I/O or copies.
 */
#ifndef CKPTFS_FS_WRITE_LOCAL_H
#define CKPTFS_FS_WRITE_LOCAL_H

#include <stdbool.h>
#include <sys/types.h>

#include "commit/engine.h"
#include "fs/ctx.h"
#include "util/buf.h"

ov_node *wr_local_of(fs_ctx *fs, const fs_inode *n);
char *wr_child_path(const fs_inode *p, const char *name); /* any lock */
double wr_now_s(void);                                  /* any lock */
void wr_touch(ov_txn *x);
bool wr_is_single_root(const ov_node *o);
void wr_meta_of(const ov_node *o, eng_meta *m, buf *xa);
/* An xattr blob (the overlay's record format) as a manifest's "xattrs"
 * JSON text (fs_inode.xattrs_json), malloc'd; NULL when it holds none. */
char *wr_xattrs_text(const char *blob, size_t len);
/* What a change of a file's bytes or owner does to its set-id bits (a
 * file's of any type, never a directory's; in_group: the caller is in the
 * file's group). */
void wr_kill_suid(ov_node *o, bool in_group);
/* Who made a request: ids and supplementary groups (read from /proc by
 * wr_caller_of, so without the table lock; n -1: not known). */
#define WR_CALLER_GROUPS 64
typedef struct wr_caller {
	uid_t uid;
	gid_t gid;
	int n;
	gid_t g[WR_CALLER_GROUPS];
} wr_caller;
void wr_caller_of(fuse_req_t req, wr_caller *c); /* no lock */
/* Whether the caller is in group gid. */
bool wr_caller_in(const wr_caller *c, gid_t gid); /* any lock */
/* A name in directory d came or went: its mtime and ctime are now. */
void wr_dir_changed(fs_ctx *fs, fs_inode *d);
/* wr_dir_changed at time now (a rename's, which its commit recorded). */
void wr_dir_changed_at(fs_ctx *fs, fs_inode *d, const struct timespec *now);
/* The attributes directory d shows (m, its xattrs in xa) when a committed
 * manifest recorded them and it is not held locally, for an addendum to
 * record them again (eng_dir_put, doc/posix.md "Directory attributes");
 * false otherwise (other tools made it). */
bool wr_recorded_dir(fs_ctx *fs, const fs_inode *d, eng_meta *m, buf *xa);
/* What a remote rename records (eng_remote_rename_in): directories p it
 * leaves and np it enters, written through ckptfs, with the rename's time
 * now as mtime (doc/posix.md), and a directory's own attributes as shown
 * (sd, the source; NULL for a file): their record may be in the root
 * above it, which its manifests do not hold.  Returns how many of pd
 * (their xattrs in xa, buf_free after).  Table locked. */
size_t wr_rename_records(fs_ctx *fs, fs_inode *p, fs_inode *np,
			 fs_inode *sd, const struct timespec *now,
			 eng_dir_attrs pd[3], buf xa[3]);
/* Replies EROFS when the mount has no engine; no lock. */
bool wr_require_engine(fuse_req_t req);
/* Write passthrough: what the staging file looks like now, as seen; takes
 * in the kernel's writes since (see fs/write-pt.c), and poisons the file
 * when the staging disk is full (it may be short). */
void wr_pt_snap(ov_node *o);
void wr_pt_absorb(fs_ctx *fs, ov_node *o);

#endif
