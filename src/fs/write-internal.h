/*
 * What the files of the write path share, each function with the file
 * that defines it (fs/write.c has the overview).  Private to src/fs.
 * Every function requires the inode table locked unless it says otherwise;
 * some drop it around network I/O or copies.  The files call downwards
 * only, in this order (a file calls those below it):
 *
 *   fs/write-names.c, fs/write-sync.c     names; `ckptfs commit`/`sync`
 *   fs/write.c, fs/write-attrs.c          handles and data; attributes
 *   fs/write-pt.c, fs/write-cow.c         write passthrough; copy-on-write
 *   fs/write-idle.c, fs/write-resume.c    the idle thread; the restart
 *   fs/write-txn.c                        transactions, staging files
 *   fs/write-deletes.c, fs/local.c        held deletes; local nodes
 */
#ifndef CKPTFS_FS_WRITE_INTERNAL_H
#define CKPTFS_FS_WRITE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "commit/engine.h"
#include "fs/ops-internal.h"

/* ---- fs/local.c: local nodes ------------------------------------------- */

ov_node *wr_local_of(fs_ctx *fs, const fs_inode *n);
char *wr_child_path(const fs_inode *p, const char *name); /* any lock */
double wr_now_s(void);                                  /* any lock */
void wr_touch(ov_txn *x);
bool wr_is_single_root(const ov_node *o);
void wr_meta_of(const ov_node *o, eng_meta *m, buf *xa);
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
/* Replies EROFS when the mount has no engine; no lock. */
bool wr_require_engine(fuse_req_t req);
/* Write passthrough: what the staging file looks like now, as seen; takes
 * in the kernel's writes since (see fs/write-pt.c), and poisons the file
 * when the staging disk is full (it may be short). */
void wr_pt_snap(ov_node *o);
void wr_pt_absorb(fs_ctx *fs, ov_node *o);

/* ---- fs/write-deletes.c: remote deletes held back ---------------------- */

#define DELETE_QUIET_S 1.0

typedef struct wr_del {
	char *path;
	bool is_dir;
	char *keep; /* the parent directory its delete must keep, or NULL */
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

/* ---- fs/write-txn.c: transactions and staging files -------------------- */

char *wr_manifest_root(fs_ctx *fs, fs_inode *p);
int wr_txn_for_new(fs_ctx *fs, fs_inode *p, const char *path, bool is_dir,
		   ov_txn **out);
int wr_seal(fs_ctx *fs, ov_txn *x);
int wr_put_file(fs_ctx *fs, ov_node *o);
int wr_put_stage(fs_ctx *fs, ov_node *o, ov_stage *s, uint64_t size);
ov_stage *wr_stage_new(fs_ctx *fs, int fd, uint64_t sid);
int wr_new_stage(fs_ctx *fs, ov_node *o);
int wr_copy_fd(int in, int out, uint64_t len); /* no lock */
int wr_writable_stage(fs_ctx *fs, ov_node *o, uint64_t keep);

/* ---- fs/write-idle.c: the idle thread, the upload hold ----------------- */

void wr_writer_opened(fs_ctx *fs); /* a writable handle was opened */
/* Drops at once the local nodes of transactions the engine has made
 * visible (the idle thread does it within 250 ms), so the names are
 * remote ones again: a rename right after a commit renames the committed
 * directory. */
void wr_reap(fs_ctx *fs);

/* ---- fs/write-cow.c: copy-on-write ------------------------------------- */

/* Downloads remote file n (key) into staging file fd.  No lock. */
int wr_fetch_remote(fs_ctx *fs, fs_inode *n, const char *key, int fd,
		    uint64_t *size);
int wr_make_local_file(fs_ctx *fs, fs_inode *n, bool truncate,
		       ov_node **out);

/* ---- fs/write-pt.c: write passthrough ---------------------------------- */

bool wr_pt_compatible(const fs_inode *n, const ov_node *o);
void wr_pt_choose(fs_ctx *fs, fs_inode *n, ov_node *o, fs_handle *h);
void wr_pt_unbind(fs_ctx *fs, fs_inode *n); /* n's last handle went */
int wr_pt_put_copy(fs_ctx *fs, ov_node *o);

/* ---- fs/write-sync.c: commit triggers ---------------------------------- */

void wr_wait_releases(fs_ctx *fs); /* before a commit trigger */

/* ---- fs/write.c: handles of local files -------------------------------- */

fs_handle *wr_local_handle(fs_ctx *fs, fs_inode *n, ov_node *o,
			   bool writable);
void wr_open_reply(fuse_req_t req, fs_handle *h, struct fuse_file_info *fi);

#endif
