/*
 * The state of an open cache index (struct cidx), shared by its three
 * files, calls going one way: index.c (entries, chunks, pins, eviction,
 * stats, stamps, open and close) calls owner.c (owner ids, lock files,
 * liveness, reaping of dead owners), and both call index-db.c (schema,
 * statements, SQL plumbing, small helpers, directories and cache files,
 * opening the database).  Types only: the functions are declared by
 * index.h, owner.h and index-db.h.  Not part of the module's interface:
 * include it from those three files only.
 */
#ifndef CKPTFS_CACHE_INDEX_STATE_H
#define CKPTFS_CACHE_INDEX_STATE_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache/index-types.h"
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

/* The index's write lock is held: x->mu, inside BEGIN IMMEDIATE. */
#define CIDX_ASSERT_WRITING(x)                                                \
	(CKPTFS_ASSERT_HELD(&(x)->mu),                                        \
	 CKPTFS_ASSERT(sqlite3_txn_state((x)->db, NULL) == SQLITE_TXN_WRITE))

#endif
