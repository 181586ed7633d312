/*
 * index-internal: what the files of the cache index share: struct cidx,
 * the prepared statements and the helpers that run them.  Three files,
 * calls going one way: index.c (entries, chunks, pins, eviction, stats,
 * stamps, open and close) calls owner.c (owner ids, lock files, liveness,
 * reaping of dead owners), and both call index-db.c (schema, statements,
 * SQL plumbing, small helpers, directories and cache files, opening the
 * database).  Not part of the module's interface: include it from those
 * three files only.
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
#ifndef CKPTFS_CACHE_INDEX_INTERNAL_H
#define CKPTFS_CACHE_INDEX_INTERNAL_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/index.h"
#include "util/buf.h"
#include "util/assert.h"

#define CIDX_OWNER_HEX 32

enum cidx_sid {
	S_BEGIN,
	S_BEGIN_READ,
	S_COMMIT,
	S_ROLLBACK,
	S_ENTRY_GET,
	S_ENTRY_INS,
	S_ENTRY_DEL,
	S_ENTRY_SET,
	S_ENTRY_TOUCH,
	S_ENTRY_DOOM,
	S_FILLER_DROP,
	S_CHUNKS_GET,
	S_CHUNK_PUT,
	S_CHUNK_DEL,
	S_CHUNKS_DEL,
	S_CHUNKS_COUNT,
	S_PIN_ADD,
	S_PIN_GET,
	S_PIN_DEC,
	S_PIN_DEL,
	S_PINS_COUNT,
	S_PINS_OTHERS,
	S_PINS_DEL_NAME,
	S_OWNER_INS,
	S_OWNER_DEL,
	S_OWNER_PINS_DEL,
	S_OWNER_FILLS_DROP,
	S_OWNERS_ALL,
	S_USED,
	S_UNEVICTABLE,
	S_OUTSTANDING,
	S_VICTIM,
	S_DOOMED_FREE,
	S_STATS,
	S_STATS_PINS,
	S_STAMP_SET,
	S_STAMP_GET,
	S_STAMP_DEL,
	S_COUNT
};

struct cidx {
	ckpt_mutex mu;
	sqlite3 *db;
	sqlite3_stmt *st[S_COUNT];
	char *dir;
	cidx_limits lim;
	char owner[CIDX_OWNER_HEX + 1];
	int lock_fd; /* flock(LOCK_EX) on owners/<owner>.lock */
	uint64_t evictions;
};

/* One row of entries.  filler is "" when NULL; an over-long id is cut,
 * which leaves it invalid, hence dead. */
typedef struct cidx_row {
	uint64_t size;
	uint32_t chunk_size;
	int state;
	bool doomed;
	char filler[CIDX_OWNER_HEX + 2];
} cidx_row;

/* Strings collected by a SELECT before the rows it read are changed. */
typedef struct cidx_strs {
	char **v;
	size_t n, cap;
} cidx_strs;

/* ---- helpers (index-db.c) ------------------------------------------- */

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
/* The index's write lock is held: x->mu, inside BEGIN IMMEDIATE. */
#define CIDX_ASSERT_WRITING(x)                                                \
	(CKPTFS_ASSERT_HELD(&(x)->mu),                                        \
	 CKPTFS_ASSERT(sqlite3_txn_state((x)->db, NULL) == SQLITE_TXN_WRITE))

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

/* ---- owners (owner.c) ------------------------------------------------ */

/* Picks a fresh owner id and creates and locks owners/<id>.lock. */
int cidx_owner_lock(cidx *x, char **err);
/* Reaps dead owners and removes the doomed entries nobody pins.  Write
 * lock held. */
int cidx_reap_locked(cidx *x);
/* Records this owner, reaps the dead ones and sweeps orphaned files, in
 * one transaction. */
int cidx_register_owner(cidx *x, char **err);
/* An orderly exit is a death without the wait: our pins go, our fills
 * become orphans, and doomed entries only we pinned are removed. */
void cidx_deregister(cidx *x);

#endif
