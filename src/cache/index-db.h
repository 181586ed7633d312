/*
 * cache/index-db.c: the bottom of the cache index: the prepared
 * statements and the helpers that run them, small helpers (string lists,
 * paths, hex names, time), the directories and cache files, and opening
 * the database.  Calls nothing of index.c or owner.c.  Private to the
 * index's files, but cidx_path, the path of a cache file, is for the
 * cache's files too.
 *
 * Conventions.  Every statement is prepared once at open (x->st, indexed
 * by enum cidx_sid) and reset by cidx_finish after each use, so no binding
 * outlives its call.  Functions named *_locked, and every helper below
 * that runs a statement, expect a transaction open (cidx_enter takes the
 * mutex and begins one; open and close, which no other thread can race,
 * use cidx_tx_begin alone); changes need the write transaction (BEGIN
 * IMMEDIATE), which is also the cross-process lock.  Errors are negative
 * errno values.
 */
#ifndef CKPTFS_CACHE_INDEX_DB_H
#define CKPTFS_CACHE_INDEX_DB_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/index-state.h"
#include "cache/index-types.h"

int cidx_strs_push(cidx_strs *l, const char *s);
bool cidx_strs_has(const cidx_strs *l, const char *s);
void cidx_strs_free(cidx_strs *l);

/* A malloc'd path (NULL when out of memory). */
char *cidx_pathf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Exactly n lowercase hex digits: the only names we ever build paths from,
 * whatever the database holds. */
bool cidx_is_hex(const char *s, size_t n);
int64_t cidx_now_ns(void);

/* Maps the result of the last step, then makes s reusable. */
int cidx_finish(cidx *x, sqlite3_stmt *s, int src);
void cidx_bind_str(sqlite3_stmt *s, int i, const char *v);
/* Runs statement id with text parameters ?1 = a, ?2 = b (NULL: unbound). */
int cidx_run(cidx *x, enum cidx_sid id, const char *a, const char *b);
/* Appends column 0 of every row of id (parameter ?1 = a) to out. */
int cidx_query_strs(cidx *x, enum cidx_sid id, const char *a, cidx_strs *out);
int cidx_tx_begin(cidx *x, bool write);
/* Commits (when commit) or rolls back; a failed COMMIT is rolled back. */
int cidx_tx_end(cidx *x, bool commit);
/* Takes the mutex and begins a transaction; on error holds nothing. */
int cidx_enter(cidx *x, bool write);
/* Ends what cidx_enter began; returns rc, or the COMMIT's error. */
int cidx_leave(cidx *x, int rc, bool commit);
int cidx_row_get(cidx *x, const char *name, cidx_row *r, bool *found);

void cidx_file_unlink(const cidx *x, const char *name);
/* Deletes every row of name, then its file.  Write lock held. */
int cidx_drop_entry(cidx *x, const char *name);
/* Makes path a directory private to us: created 0700, or, when it exists,
 * used as it is (never chmod'ed) only if it is ours (else -EPERM) and not
 * writable by group or others (else -EACCES). */
int cidx_private_dir(const char *path);
/* The cache file of name is a regular file of this size. */
bool cidx_file_matches(const cidx *x, const char *name, uint64_t size);
/* A fresh inode of the full size, sparse (the old name unlinked first). */
int cidx_file_create(cidx *x, const char *name, uint64_t size);

/* Creates x->dir (parents too) and its objects/ and owners/, all 0700. */
int cidx_db_dirs(cidx *x, char **err);
/* Opens index.db: WAL, synchronous=NORMAL, 0600 files, the schema created
 * or migrated (a foreign version is -EPROTO), every statement prepared. */
int cidx_db_open(cidx *x, char **err);

/* Path of the cache file of name: DIR/objects/<name[0..2]>/<name>. malloc'd */
char *cidx_path(const cidx *x, const char *name);

#endif
