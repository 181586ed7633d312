/*
 * The cache index's types, shared by its three files (index.c, owner.c,
 * index-db.c) and its users: the handle (its fields are in
 * index-state.h), entry names, roles, entries, limits, stats.  Types only:
 * the functions are declared by index.h (index.c), owner.h (owner.c) and
 * index-db.h (index-db.c).
 */
#ifndef CKPTFS_CACHE_INDEX_TYPES_H
#define CKPTFS_CACHE_INDEX_TYPES_H

#include <stdint.h>

typedef struct cidx cidx;

/* 64 hex chars + NUL: SHA-256(bucket NUL key NUL etag). */
#define CIDX_NAME_LEN 65

enum cidx_role {
	CIDX_COMPLETE = 0, /* every byte is in the file */
	CIDX_FILLER,       /* this process downloads the missing chunks */
	CIDX_FOLLOWER,     /* another live process is downloading it */
};

typedef struct cidx_entry {
	char name[CIDX_NAME_LEN];
	uint64_t size;
	uint32_t chunk_size;
	uint32_t n_chunks;
	/* per chunk, n_chunks each, malloc'd by cidx_acquire/cidx_refresh: */
	uint8_t *done;  /* 1 when the chunk has a row */
	uint32_t *crc;  /* its CRC32C when done */
} cidx_entry;

typedef struct cidx_limits {
	uint64_t cap;      /* cache_size in bytes, 0 = unlimited */
	uint64_t min_free; /* bytes of free disk to keep, 0 = none */
} cidx_limits;

typedef struct cidx_stats {
	uint64_t entries;
	uint64_t bytes;        /* sum of entry sizes */
	uint64_t pinned_bytes; /* entries with a live pin */
	uint64_t complete_entries;
	uint64_t evictions;    /* by this process since open */
} cidx_stats;

#endif
