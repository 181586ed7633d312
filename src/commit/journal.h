/*
 * jr: the commit engine's journal, SQLite at STATE_DIR/journal.db (WAL,
 * synchronous=FULL: a change is on disk when the call returns).  The state
 * directory is held with flock(LOCK_EX) on STATE_DIR/lock for as long as the
 * journal is open; a second opener gets -EBUSY.
 *
 * Schema (doc/commit.md, "Journal"):
 *   meta(k, v)         writer id, schema version
 *   txns(id, kind, root, dest, is_dir, state, manifest_root, error)
 *                      id (AUTOINCREMENT) is the position in the ordered
 *                      visibility queue: visibility steps run in id order
 *   files(id, txn, path, sid, size, mode, uid, gid, mtime_ns, xattrs,
 *         symlink, state, key, upload_id, part_size, etag, crc32c)
 *   parts(file, n, etag, crc32c, len)    done parts of a multipart upload
 *   dirs(txn, path, mode, uid, gid, mtime_ns)
 *   garbage(txn, key)  objects to delete once txn is visible
 *
 * Not thread-safe: the engine calls it under its mutex.  Statements are
 * built with a tiny format ("i" int64, "t" text or NULL, "b" blob+len) and
 * run at once; errors are negative errno values and are logged.
 */
#ifndef CKPTFS_COMMIT_JOURNAL_H
#define CKPTFS_COMMIT_JOURNAL_H

#include <sqlite3.h>
#include <stdbool.h>
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

/* meta(k) as malloc'd text, or NULL. */
char *jr_meta_get(jr *j, const char *k);
int jr_meta_set(jr *j, const char *k, const char *v);

/* Removes a transaction and every row that belongs to it. */
int jr_txn_delete(jr *j, int64_t id);

#endif
