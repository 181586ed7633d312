/*
 * ov: the local overlay of a writable mount (doc/commit.md).
 *
 * What this mount wrote and the bucket does not show yet: per path, a local
 * node (a file with its staging file, a directory created through the
 * mount, a symlink) or a whiteout.  A special file (FIFO, socket, device
 * node) is an OV_FILE whose mode carries its type bits (S_IFIFO...) and
 * whose staging file stays empty (doc/posix.md) (a remote name removed here whose delete
 * has not reached the bucket).  Lookups and listings consult the overlay
 * before the remote listing.  Nodes belong to transactions (ov_txn); when
 * a transaction is visible remotely its nodes go and the remote listing
 * takes over.
 *
 * Staging files are shared by refcount (ov_stage): a node's current one,
 * plus any handle still reading an older one.  Once handed to the commit
 * engine a stage is immutable: a change makes a new one (copy-on-write).
 *
 * Locking: every function requires the caller's lock (the inode table's).
 */
#ifndef CKPTFS_FS_OVERLAY_H
#define CKPTFS_FS_OVERLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "util/buf.h"

typedef enum ov_kind { OV_FILE, OV_DIR, OV_LINK, OV_WHITEOUT } ov_kind;

typedef struct ov_stage {
	int fd;
	uint64_t sid;
	unsigned refs;
	bool handed; /* given to the engine: immutable */
	/* called with sid when the last reference to a stage never handed
	 * over goes (its file is deleted) */
	void (*discard)(void *arg, uint64_t sid);
	void *discard_arg;
} ov_stage;

typedef struct ov_txn ov_txn;

typedef struct ov_node {
	struct ov_node *hnext;
	char *path;
	ov_kind kind;
	ov_txn *txn;   /* NULL for whiteouts */
	bool shadows;  /* a remote object of this path existed before */
	ov_stage *st;  /* files */
	uint64_t size;
	unsigned writers, opens;
	bool dirty;    /* bytes changed since the last put */
	bool meta_dirty; /* attributes or xattrs changed since the last put
	                  * (stored with the next one; unlike dirty, drops
	                  * no set-id bit) */
	bool put;      /* handed to the engine at least once */
	int failed;    /* errno of a write that failed (EIO, ENOSPC, EDQUOT)
	                * since the last O_TRUNC, or -ENOSPC when the disk
	                * filled while it was written through passthrough
	                * (wr_pt_absorb): its transaction poisoned
	                * (eng_file_poison) */
	bool linked;   /* in the table */
	unsigned refs; /* handles */
	uint32_t mode, uid, gid; /* mode: 07777, plus a special file's type */
	uint64_t rdev;           /* device nodes */
	struct timespec mtime, ctime;
	struct timespec atime;   /* set by utimensat only; 0: mtime's.  Not
	                          * stored in the bucket */
	buf xattrs;    /* "name\0value-len(4 bytes LE)value" records */
	char *target;  /* symlinks */
	double wo_time; /* whiteouts: when made */
	bool merge;     /* a directory restored from the journal: its remote
	                 * listing shows too */
	bool placeholder; /* a merge directory whose attributes the journal
	                   * does not hold (a parent of a file's
	                   * transaction): the bucket's show, never these */
	/* files written through passthrough handles (fs/write-pt.c): the
	 * kernel writes the staging file directly; what ckptfs last saw of
	 * it (ctime, size) tells whether it changed since */
	unsigned pt_writers;
	struct timespec pt_ctime;
	uint64_t pt_size;
} ov_node;

struct ov_txn {
	ov_txn *next;
	uint64_t id;
	char *root;
	bool is_dir;
	bool sealed;
	bool done;        /* visible remotely */
	unsigned open;    /* handles open on its files */
	double last_change;
	unsigned nodes;   /* linked nodes belonging to it */
};

typedef struct ov_table {
	ov_node **b;
	size_t nb, n;
	ov_txn *txns;
} ov_table;

int ov_init(ov_table *t);
void ov_destroy(ov_table *t);

ov_node *ov_get(ov_table *t, const char *path);
/* New node at path (replacing nothing: the caller removed any old one). */
ov_node *ov_add(ov_table *t, const char *path, ov_kind kind, ov_txn *txn);
/* Moves n to transaction x, with the handles open on it: they count in
 * the transaction of the node at their release. */
void ov_node_set_txn(ov_node *n, ov_txn *x);
/* Unlinks n from the table; freed when no handle refers to it. */
void ov_remove(ov_table *t, ov_node *n);
void ov_node_ref(ov_node *n);
void ov_node_unref(ov_node *n);
/* Renames n and every node under it (prefix "path/"); -1 on ENOMEM. */
int ov_move(ov_table *t, const char *from, const char *to);
/* Calls fn for every node whose parent directory is dir ("" = root). */
void ov_children(ov_table *t, const char *dir,
		 void (*fn)(void *arg, ov_node *n), void *arg);
/* Whether some linked non-whiteout node lies under dir. */
bool ov_has_children(ov_table *t, const char *dir);
/* Discards now the staging files of the nodes' stages never handed to
 * the engine (their discard callbacks run and are cleared), so that
 * freeing the table later calls nothing: at unmount, before the engine
 * that names their paths closes. */
void ov_discard_unhanded(ov_table *t);
/* Calls fn for every node (fn may not remove nodes). */
void ov_each(ov_table *t, void (*fn)(void *arg, ov_node *n), void *arg);

ov_stage *ov_stage_new(int fd, uint64_t sid);
void ov_stage_ref(ov_stage *s);
/* Closes the fd when the last reference goes. */
void ov_stage_unref(ov_stage *s);
void ov_set_stage(ov_node *n, ov_stage *s);

ov_txn *ov_txn_add(ov_table *t, uint64_t id, const char *root, bool is_dir);
ov_txn *ov_txn_find(ov_table *t, uint64_t id);
void ov_txn_free_done(ov_table *t);

/* Extended attributes of a node. */
int ov_xattr_set(ov_node *n, const char *name, const void *v, size_t len,
		 int flags);
/* Returns the value length, -ENODATA, or -ERANGE when size is too small
 * (size 0: only the length). */
int ov_xattr_get(const ov_node *n, const char *name, void *out, size_t size);
int ov_xattr_remove(ov_node *n, const char *name);
/* Names, NUL-terminated each, as listxattr wants; same size rules. */
int ov_xattr_list(const ov_node *n, char *out, size_t size);
/* Encodes as eng_meta.xattrs wants: "name\0value\0" pairs (values
 * hex-encoded, so they hold no NUL). */
int ov_xattr_encode(const ov_node *n, buf *out);

/* "a/b/c" -> "a/b"; "c" -> "". Returns a malloc'd string. */
char *ov_parent(const char *path);
/* "a/b" + "c" -> "a/b/c"; "" + "c" -> "c". */
char *ov_join(const char *dir, const char *name);

#endif
