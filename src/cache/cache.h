/*
 * cache: the local read cache (design: doc/cache.md).
 *
 * cache_file_open pins the object version (key, ETag) in the shared index
 * and, unless the bytes are already on disk, starts parallel ranged GETs
 * of the whole object into its cache file (chunk_size pieces, at most
 * per_file_conns per object and global_conns in all).  cache_file_ready
 * returns as soon as a byte range has landed, moving the chunks it needs to
 * the front of the queue first, so a random reader never waits for the
 * whole file.  Downloads continue after the last handle closes (checkpoints
 * are read whole); the process keeps its pin on the entry until then.
 *
 * Chunks read from disk that this process did not write itself are checked
 * against their CRC32C the first time they are served; a mismatch drops the
 * chunk and fetches it again, so corrupted cache files are never served.
 *
 * Opened with the checksums a manifest recorded (cache_file_open_expect),
 * the bytes themselves are checked too: a downloaded chunk whose CRC
 * differs from the manifest's is never marked done nor served; it is
 * downloaded again (CACHE_VERIFY_RETRIES more times) and then fails with
 * EIO.  Chunks recorded earlier whose CRC differs are dropped and fetched
 * again.  Design: doc/cache.md, "Checking downloads against manifests".
 */
#ifndef CKPTFS_CACHE_CACHE_H
#define CKPTFS_CACHE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "s3/client.h"

typedef struct cache cache;
typedef struct cache_file cache_file;

typedef struct cache_opts {
	const char *dir;
	uint64_t cap;        /* bytes, 0 = unlimited */
	uint64_t min_free;   /* bytes */
	uint32_t chunk_size; /* bytes, default 8 MiB */
	unsigned per_file_conns;
	unsigned global_conns;
	bool verify; /* CRC-check chunks this process did not write */
} cache_opts;

int cache_open(const cache_opts *o, s3_client *s3, const char *bucket,
	       cache **out, char **err);
/* Stops scheduling downloads; call before the http loop is freed. */
void cache_shutdown(cache *c);
/* Frees everything; call after the http loop is freed. */
void cache_free(cache *c);

/*
 * Opens key@etag of the given size.  Returns 0 with *out, or a negative
 * errno: -ENOSPC when the object cannot be cached now (pinned data fills
 * the cache); the caller then reads uncached.  *hit says whether every byte
 * was already on disk.
 */
int cache_file_open(cache *c, const char *key, const char *etag,
		    uint64_t size, cache_file **out, bool *hit);

/* Downloads of a chunk that mismatches the manifest after the first. */
#define CACHE_VERIFY_RETRIES 2

/*
 * What a manifest says the object's bytes are: crc[i] is the standard
 * CRC-32C (RFC 3720) of bytes [i*block, (i+1)*block) (the last block
 * short), n of them.
 */
typedef struct cache_expect {
	uint32_t block;
	size_t n;
	const uint32_t *crc;
} cache_expect;

/*
 * cache_file_open checking downloads against x (NULL: no check).  A new
 * entry gets chunks of x->block bytes (one block each); an existing entry
 * whose chunk size is a multiple of the block size is checked with the
 * blocks' CRCs combined; any other is not checked against x (its chunk
 * CRCs still guard the local copy).  x is copied.
 */
int cache_file_open_expect(cache *c, const char *key, const char *etag,
			   uint64_t size, const cache_expect *x,
			   cache_file **out, bool *hit);

/* Waits until [off, off+len) is in the cache file; returns an fd to pread
 * or splice from, or a negative errno (EIO when the download failed). */
int cache_file_ready(cache_file *f, uint64_t off, size_t len);

/* Starts reading a completely cached file f into the page cache, in the
 * background (POSIX_FADV_WILLNEED): directory read-ahead of a warm cache,
 * so that the disk reads of the next files overlap the reader's. */
void cache_file_willneed(cache_file *f);

/* Download progress of the file's object. */
void cache_file_progress(cache_file *f, uint64_t *done, uint64_t *total);

/* 0, or the errno that stopped the download for good. */
int cache_file_error(cache_file *f);

void cache_file_close(cache_file *f);

/*
 * Makes the finished local file at path (just uploaded as key@etag) the
 * complete cached copy of that object, so reads of a just-committed file
 * stay local: its chunk CRCs are computed, room is made as for a download,
 * and the file is renamed into the cache (path is gone on success; on
 * failure it is left alone).  Returns 0, -EEXIST (already cached),
 * -ENOSPC, -EXDEV (other filesystem) or another negative errno.
 */
int cache_adopt(cache *c, const char *key, const char *etag, const char *path);

typedef struct cache_stats {
	uint64_t hits, misses, uncached_opens, replaced_opens;
	uint64_t downloaded_bytes;
	double download_rate; /* bytes/s over the last few seconds */
	uint64_t active_downloads;
	uint64_t entries, bytes, pinned_bytes, cap, min_free;
	uint64_t evictions, verify_failures;
} cache_stats;

/*
 * Evicts cached files nobody reads until the cache's disk has size bytes
 * free beyond min_free: staged writes share the disk and call this when
 * it is full.  0, or -ENOSPC when nothing evictable is left.
 */
int cache_free_disk(cache *c, uint64_t size);

/* The cache's cap in bytes (cache_size option; 0: none). */
uint64_t cache_cap(const cache *c);

/* The free space the cache keeps on its disk (cache_min_free option). */
uint64_t cache_min_free(const cache *c);

void cache_get_stats(cache *c, cache_stats *st);
void cache_count_uncached(cache *c);
/* An open found the version it pinned replaced before its first chunk. */
void cache_count_replaced(cache *c);
const char *cache_dir(const cache *c);

#endif
