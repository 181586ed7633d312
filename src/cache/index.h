/*
 * cache/index.c: the SQLite index of the read cache, the interface the
 * cache's files use (design: doc/cache.md).  The liveness of the
 * processes sharing it is owner.h's (owner.c), the path of a cache file
 * index-db.h's (cidx_path); the types are in index-types.h (included).
 *
 * One cidx per process.  Opening it creates the cache directory layout
 * (DIR 0700, DIR/objects, DIR/owners), the schema, a random owner id and the
 * owner's lock file held with flock(LOCK_EX) until cidx_close (or death).
 * All functions are thread-safe (one connection guarded by a mutex) and
 * run their writes in BEGIN IMMEDIATE transactions so that several
 * processes on one cache directory see consistent decisions.
 *
 * Invariants kept here:
 *  - a chunks row exists only for bytes already written to the cache file;
 *  - an entry is complete (state 1) only when every chunk has a row;
 *  - an entry with a live pin is never evicted; pins of dead owners are
 *    reaped before any eviction decision;
 *  - entries are named by hash; the index stores keys, file names never do.
 */
#ifndef CKPTFS_CACHE_INDEX_H
#define CKPTFS_CACHE_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "cache/index-types.h"

void cidx_entry_free(cidx_entry *e);

/* Opens (creating if needed) the index under dir.  On error returns -1 and
 * sets *err (malloc'd, names the path). */
int cidx_open(const char *dir, const cidx_limits *lim, cidx **out, char **err);
void cidx_close(cidx *x);
const char *cidx_owner_id(const cidx *x);
const char *cidx_dir(const cidx *x);

/* Fills name with the entry name of (bucket, key, etag). */
void cidx_name(const char *bucket, const char *key, size_t key_len,
	       const char *etag, char name[CIDX_NAME_LEN]);

/*
 * At open: finds or creates the entry of (bucket, key, etag, size), pins it
 * for this process, and says who fills it.  A new entry first reserves its
 * size, evicting LRU unpinned entries (their files are unlinked); if that is
 * impossible returns -ENOSPC and creates nothing (the caller reads
 * uncached).  A complete entry whose file is missing or has the wrong size
 * is reset to filling (all chunks dropped) with this process as filler.
 * A filling entry whose filler is dead (or NULL) is taken over: role
 * CIDX_FILLER with out->done marking the chunks already recorded.
 * The cache file is created (0600, sparse, full size) when needed.
 * Returns 0 or a negative errno.
 */
int cidx_acquire(cidx *x, const char *bucket, const char *key, size_t key_len,
		 const char *etag, uint64_t size, uint32_t chunk_size,
		 cidx_entry *out, enum cidx_role *role);

/*
 * Registers the finished file at src (size bytes; crc[i] the CRC32C of chunk
 * i, chunk_size pieces, in the cache's convention: crc32_iscsi seeded with
 * 0xFFFFFFFF, no final inversion) as the complete entry of (bucket, key,
 * etag): room is reserved as for a download (LRU evictions), the rows are
 * written and src is renamed into the entry's place, in one write
 * transaction.  On success src no longer exists.  -EEXIST: the entry is
 * already complete (src untouched); -EBUSY: another version of the entry
 * is pinned; -ENOSPC: no room; -EXDEV: src is on another filesystem.
 */
int cidx_adopt(cidx *x, const char *bucket, const char *key, size_t key_len,
	       const char *etag, uint64_t size, uint32_t chunk_size,
	       const uint32_t *crc, const char *src);

/* Drops one pin of this process on name and stamps last_use. */
int cidx_release(cidx *x, const char *name);

/* Records that chunk idx of name is written, with its CRC32C.  Marks the
 * entry complete when it was the last.  *completed tells which. */
int cidx_chunk_done(cidx *x, const char *name, uint32_t idx, uint32_t crc,
		    bool *completed);

/* Batch form: n chunks in one transaction. */
int cidx_chunks_done(cidx *x, const char *name, const uint32_t *idx,
		     const uint32_t *crc, size_t n, bool *completed);

/* Forgets chunk idx (its bytes failed verification). */
int cidx_chunk_forget(cidx *x, const char *name, uint32_t idx);

/* Re-reads the done/crc arrays of e (followers poll this). *role is
 * updated: COMPLETE when finished, FILLER when the filler died and this
 * process took over. */
int cidx_refresh(cidx *x, cidx_entry *e, enum cidx_role *role);

/* Removes an entry that can never complete (object changed remotely) once
 * it has no pins; with pins, marks it so the last release removes it. */
int cidx_discard(cidx *x, const char *name);

int cidx_get_stats(cidx *x, cidx_stats *st);
/* Whether other processes sharing the cache hold pins (live or not yet
 * reaped): whether asking them for their idle entries may make room. */
int cidx_others_pin(cidx *x, bool *any);

/*
 * Evicts unpinned entries (least recently used first) until the cache's
 * disk has size bytes free beyond min_free, for data stored beside the
 * cache (staged writes).  -ENOSPC when nothing evictable is left.
 */
int cidx_free_disk(cidx *x, uint64_t size);

/*
 * Stamps: the identity (device, inode, mtime, ctime, size) of a complete
 * cache file at a moment it was known good.  A file whose stat still
 * matches was not changed since and needs no CRC re-check.
 */
int cidx_stamp_set(cidx *x, const char *name, const struct stat *st);
int cidx_stamp_matches(cidx *x, const char *name, const struct stat *st,
		       bool *match);

#endif
