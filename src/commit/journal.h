/*
 * jr: the commit engine's journal, SQLite at STATE_DIR/journal.db (WAL,
 * synchronous=FULL: a change is on disk when the call returns).  The state
 * directory is held with flock(LOCK_EX) on STATE_DIR/lock for as long as the
 * journal is open; a second opener gets -EBUSY.
 *
 * Schema (doc/commit.md, "Journal"):
 *   meta(k, v)         writer id, schema version, poisoned paths
 *   txns(id, kind, root, dest, is_dir, state, manifest_root, error)
 *                      id (AUTOINCREMENT) is the position in the ordered
 *                      visibility queue: visibility steps run in id order
 *   files(id, txn, path, sid, size, mode, uid, gid, mtime_ns, xattrs,
 *         symlink, state, key, upload_id, part_size, etag, crc32c)
 *   parts(file, n, etag, crc32c, len)    done parts of a multipart upload
 *   dirs(txn, path, mode, uid, gid, mtime_ns, xattrs)
 *   garbage(txn, key)  objects to delete once txn is visible
 *   held(id, path, is_dir, keep)
 *                      remote deletes the FUSE layer holds back (not steps
 *                      yet: eng_hold_delete)
 *
 * Not thread-safe: the engine calls it under its mutex.  Statements are
 * built with a tiny format ("i" int64, "t" text or NULL, "b" blob+len) and
 * run at once; errors are negative errno values and are logged.
 *
 * Every statement of the engine's tables is here (jr_txn_*, jr_file_*,
 * jr_part_*, jr_dir_*, jr_garbage_*, and jr_load, which decodes the rows
 * for eng_open through callbacks): the engine (commit/internal.h) keeps
 * its in-memory model and says which fact changed, never how it is
 * stored.  jr_exec stays public for the unit tests' queries.
 */
#ifndef CKPTFS_COMMIT_JOURNAL_H
#define CKPTFS_COMMIT_JOURNAL_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct jr jr;

int jr_open(const char *state_dir, jr **out, char **err);
void jr_close(jr *j);

/*
 * Runs sql with parameters described by fmt: 'i' int64_t, 't' const char *
 * (NULL binds NULL), 'b' const void * then size_t.  For each result row,
 * row(arg, stmt) is called (row may be NULL).  Returns 0 or -errno.
 */
int jr_exec(jr *j, int (*row)(void *arg, sqlite3_stmt *s), void *arg,
	    const char *sql, const char *fmt, ...);
/* rowid of the last INSERT. */
int64_t jr_last_id(jr *j);
int jr_begin(jr *j);
int jr_commit(jr *j);
/* Outside a transaction: whether later commits fsync the WAL (the default,
 * synchronous=FULL).  A commit made with false is on disk once any later
 * FULL commit returns (the WAL is one file, synced whole); a killed
 * process loses neither, a power cut may lose the lazy one. */
int jr_set_durable(jr *j, bool durable);
void jr_rollback(jr *j);
/*
 * The reserve, STATE_DIR/reserve (journal.c): when a write failed with
 * -ENOSPC, frees it and returns true: the caller tries its transaction
 * once more (a single statement outside a transaction jr_exec tries again
 * itself).  False when there was none left to free.
 */
bool jr_free_reserve(jr *j);
/* Whether a transaction (jr_begin) is open: what the checks of "a fact's
 * row is committed before its call returns" look at. */
bool jr_in_txn(jr *j);

/* meta(k) as malloc'd text, or NULL. */
char *jr_meta_get(jr *j, const char *k);
int jr_meta_set(jr *j, const char *k, const char *v);

/* ---- the engine's rows ------------------------------------------------ */

/* A txns row (strings valid during the callback only). */
typedef struct jr_txn_row {
	int64_t id;
	int64_t seq; /* COALESCE(seq, id): its position in the queue */
	int kind, state;
	const char *root, *dest, *mroot; /* dest, mroot may be NULL */
	bool is_dir;
} jr_txn_row;

/* A files row, as loaded and as jr_file_update writes it whole. */
typedef struct jr_file_row {
	int64_t id, txn;
	const char *path;
	uint64_t sid, size;
	uint32_t mode, uid, gid;
	int64_t mtime_ns;
	const void *xattrs; /* NULL: none */
	size_t xattrs_len;
	const char *symlink;
	int state;
	const char *key, *upload_id;
	uint64_t part_size;
	const char *etag; /* NULL: none */
	uint32_t crc;
	const char *blocks;
	uint64_t rdev;
} jr_file_row;

/* A parts row: one uploaded part of a multipart upload. */
typedef struct jr_part_row {
	int64_t n;
	const char *etag;
	uint32_t crc;
	uint64_t len;
	const char *segs; /* NULL when journaled without block checksums */
} jr_part_row;

/* A dirs row. */
typedef struct jr_dir_row {
	int64_t txn;
	const char *path;
	uint32_t mode, uid, gid;
	int64_t mtime_ns;
	const void *xattrs; /* NULL: none (journal version 5) */
	size_t xattrs_len;
} jr_dir_row;

/*
 * Reads the whole journal for eng_open: every transaction in queue order
 * (COALESCE(seq, id)), then every file in id order, then every dir.  A
 * callback returning non-zero stops the load with that value.
 */
typedef struct jr_loader {
	int (*txn)(void *arg, const jr_txn_row *r);
	int (*file)(void *arg, const jr_file_row *r);
	int (*dir)(void *arg, const jr_dir_row *r);
	void *arg;
} jr_loader;
int jr_load(jr *j, const jr_loader *l);
/* The uploaded parts of file (may be called from the file callback). */
int jr_load_parts(jr *j, int64_t file,
		  int (*part)(void *arg, const jr_part_row *r), void *arg);

/* txns: a new row (its id, the queue position, in *id). */
int jr_txn_insert(jr *j, int kind, const char *root, const char *dest,
		  bool is_dir, int state, const char *mroot, int64_t *id);
int jr_txn_set_state(jr *j, int64_t id, int state);
/* error NULL: cleared (the step is tried again). */
int jr_txn_set_error(jr *j, int64_t id, const char *error);
/* A transaction root moved: its new root and manifest_root (NULL: none). */
int jr_txn_set_root(jr *j, int64_t id, const char *root, const char *mroot);
/* Gives the transaction a fresh queue position (a new value of the txns id
 * sequence, so later transactions come after it) in *seq. */
int jr_txn_requeue(jr *j, int64_t id, int64_t *seq);
/* Removes a transaction and every row that belongs to it. */
int jr_txn_delete(jr *j, int64_t id);

/* files: a new staged file (its id in *id). */
int jr_file_insert(jr *j, int64_t txn, const char *path, uint64_t sid,
		   uint64_t size, int64_t *id);
/* Every column of row r->id. */
int jr_file_update(jr *j, const jr_file_row *r);
int jr_file_delete(jr *j, int64_t id);
int jr_file_set_state(jr *j, int64_t id, int state);
/* A multipart upload started: its key, id and part size. */
int jr_file_set_upload(jr *j, int64_t id, const char *key,
		       const char *upload_id, uint64_t part_size);
/* Its multipart upload is gone: staged again, parts forgotten. */
int jr_file_upload_gone(jr *j, int64_t id);
/* Stored (state 2) under key with etag/crc/blocks; parts forgotten. */
int jr_file_stored(jr *j, int64_t id, const char *key, const char *etag,
		   uint32_t crc, const char *blocks);

/* parts */
int jr_part_done(jr *j, int64_t file, const jr_part_row *r);
int jr_parts_clear(jr *j, int64_t file);

/* dirs: insert or replace; the attributes of one; delete one. */
int jr_dir_put(jr *j, const jr_dir_row *r);
int jr_dir_set_meta(jr *j, const jr_dir_row *r);
int jr_dir_delete(jr *j, int64_t txn, const char *path);

/* garbage: an object to delete once txn is visible; key made txn's alone
 * (taken from every other transaction's garbage, if any held it); the
 * list of them. */
int jr_garbage_add(jr *j, int64_t txn, const char *key);
int jr_garbage_take(jr *j, int64_t txn, const char *key);
int jr_garbage_list(jr *j, int64_t txn,
		    int (*fn)(void *arg, const char *key), void *arg);

/* held: a remote delete held back (its id in *id); one forgotten; the
 * list in the order they were held. */
int jr_held_insert(jr *j, const char *path, bool is_dir, const char *keep,
		   int64_t *id);
int jr_held_delete(jr *j, int64_t id);
int jr_held_list(jr *j,
		 int (*fn)(void *arg, int64_t id, const char *path,
			   bool is_dir, const char *keep),
		 void *arg);

#endif
