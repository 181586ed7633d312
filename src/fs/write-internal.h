/*
 * What the three files of the write path share (fs/write.c: data and
 * attributes; fs/write-names.c: creating, removing and renaming names;
 * fs/write-txn.c: transactions, staging, the idle thread, commit and sync).
 * Private to src/fs.  Every function requires the inode table locked
 * unless it says otherwise; some drop it around network I/O or copies.
 */
#ifndef CKPTFS_FS_WRITE_INTERNAL_H
#define CKPTFS_FS_WRITE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "commit/engine.h"
#include "fs/ops-internal.h"

#define DELETE_QUIET_S 1.0

typedef struct wr_del {
	char *path;
	bool is_dir;
} wr_del;

/* Remote deletes held back (wr_hold_delete, fs/write-txn.c). */
struct wr_deletes {
	wr_del *v;
	size_t n, cap;
	double last;
};

char *wr_child_path(const fs_inode *p, const char *name);
double wr_now_s(void);
void wr_writer_opened(fs_ctx *fs); /* the upload hold; table locked */
ov_node *wr_local_of(fs_ctx *fs, const fs_inode *n);
void wr_meta_of(const ov_node *o, eng_meta *m, buf *xa);
void wr_flush_deletes(fs_ctx *fs);
int wr_hold_delete(fs_ctx *fs, const char *path, bool is_dir);
void wr_ordered(fs_ctx *fs);
/* wr_ordered, for a fact about path only: sends the held deletes only when
 * one of them overlaps path.  Table locked. */
void wr_ordered_for(fs_ctx *fs, const char *path);
char *wr_manifest_root(fs_ctx *fs, fs_inode *p);
int wr_txn_for_new(fs_ctx *fs, fs_inode *p, const char *path, bool is_dir,
		       ov_txn **out);
void wr_touch(ov_txn *x);
bool wr_is_single_root(const ov_node *o);
int wr_seal(fs_ctx *fs, ov_txn *x);
/* Drops at once the local nodes of transactions the engine has made
 * visible (the idle thread does it within 250 ms), so the names are
 * remote ones again: a rename right after a commit renames the committed
 * directory.  Table locked. */
void wr_reap(fs_ctx *fs);
int wr_put_file(fs_ctx *fs, ov_node *o);
int wr_put_stage(fs_ctx *fs, ov_node *o, ov_stage *s, uint64_t size);
int wr_new_stage(fs_ctx *fs, ov_node *o);
int wr_copy_fd(int in, int out, uint64_t len);
int wr_writable_stage(fs_ctx *fs, ov_node *o, uint64_t keep);
int wr_fetch_remote(fs_ctx *fs, fs_inode *n, const char *key, int fd,
		    uint64_t *size);
fs_handle *wr_local_handle(fs_ctx *fs, fs_inode *n, ov_node *o,
			       bool writable);
void wr_open_reply(fuse_req_t req, fs_handle *h, struct fuse_file_info *fi);
int wr_make_local_file(fs_ctx *fs, fs_inode *n, bool truncate,
			   ov_node **out);
bool wr_require_engine(fuse_req_t req);
int wr_name_state(fs_ctx *fs, fs_inode *p, const char *name,
		      bool *remote, bool *local);
int wr_remove_local(fs_ctx *fs, ov_node *o);
int wr_remote_dir_empty(fs_ctx *fs, fs_inode *d, bool *empty);
ov_stage *wr_stage_new(fs_ctx *fs, int fd, uint64_t sid);
void wr_dels_clear(struct wr_deletes *d);
fs_inode *wr_parent_dir(fs_ctx *fs, fuse_ino_t ino, int *err);
bool wr_name_ok(const char *name);

#endif
