/*
 * Shared between cache.c (handles, opening, verification, stats), fetch.c
 * (the download scheduler), idle.c (entries no handle holds) and entry.c
 * (a centry's life, chunk bookkeeping).  Calls go one way: cache.c ->
 * fetch.c -> idle.c -> entry.c, and cache.c -> idle.c, cache.c ->
 * entry.c.  Not part of the cache interface.
 *
 * Locking: one mutex (cache.mu) guards every centry field marked [mu] and
 * the scheduler state; `cv` is broadcast whenever a chunk changes state.
 * The cache file descriptor is written by the http loop thread (chunk
 * sinks, no lock: each chunk range has exactly one writer) and read by
 * FUSE workers only for chunks in state CH_DONE.
 */
#ifndef CKPTFS_CACHE_INTERNAL_H
#define CKPTFS_CACHE_INTERNAL_H

#include <pthread.h>
#include <sys/stat.h>

#include "cache/cache.h"
#include "cache/index.h"
#include "util/assert.h"

enum chunk_state {
	CH_MISSING = 0,
	CH_INFLIGHT,
	CH_DONE,
	CH_FAILED,
};

typedef struct centry centry;
struct centry {
	char name[CIDX_NAME_LEN];
	char *key;
	char *etag;
	uint64_t size;
	uint32_t chunk_size, n_chunks;
	int fd;
	enum cidx_role role;   /* [mu] */
	uint8_t *state;        /* [mu] enum chunk_state per chunk */
	uint8_t *verified;     /* [mu] bytes known good to this process */
	uint8_t *attempts;     /* [mu] */
	uint32_t *crc;         /* [mu] */
	/* [mu] the CRC each chunk must have (cache convention), from the
	 * manifest (cache_file_open_expect); NULL: not checked */
	uint32_t *expect;
	uint8_t *mismatches;   /* [mu] downloads that did not match expect */
	double *not_before;    /* [mu] retry time per chunk, monotonic s */
	/* [mu] when the chunk's first attempt since it was last missing began
	 * (monotonic s; 0: none): the retry budget runs from there */
	double *first_try;
	uint32_t cursor;       /* [mu] next chunk for the sequential sweep */
	uint32_t n_done;       /* [mu] */
	unsigned inflight;     /* [mu] */
	/* [mu] open handles, transfers in flight, completions not yet
	 * recorded: the entry (and its pin) lives while any holds it */
	unsigned refs;
	unsigned handles;      /* [mu] of refs: open cache_files */
	/* [mu] complete, no handle since then (monotonic s; 0: not idle): the
	 * entry and its pin are kept (idle.c), so a reopen (a warm or hot
	 * read, the next rank) costs no index transaction */
	double idle_since;
	struct stat idle_st;   /* [mu] its file's fstat when it went idle */
	bool active;           /* [mu] on the scheduler's list */
	bool failed;           /* [mu] cannot complete (err says why) */
	bool stamped;          /* [mu] known good file recorded in the index */
	int err;               /* [mu] */
	centry *next;          /* [mu] all entries */
	centry *next_active;   /* [mu] scheduler list */
};

typedef struct urgent {
	centry *e;
	uint32_t idx;
} urgent;

#define URGENT_MAX 256
#define RATE_SLOTS 8

struct cache {
	cache_opts o;
	char *dir;
	char *bucket;
	s3_client *s3;
	cidx *idx;
	ckpt_mutex mu;
	pthread_cond_t cv;
	centry *entries; /* [mu] */
	centry *active;  /* [mu] entries with chunks to fetch */
	urgent urgent[URGENT_MAX]; /* [mu] ring */
	unsigned urg_head, urg_len; /* [mu] */
	unsigned inflight; /* [mu] */
	bool stopping;     /* [mu] */
	/* index writer: chunk completions waiting to be recorded [mu] */
	struct done_rec *pending;
	/* batches taken from pending and being recorded (their entries still
	 * referenced); cv is broadcast when one is done [mu] */
	unsigned recording;
	pthread_t writer;
	pthread_cond_t writer_cv;
	/* idle entries (idle.c) */
	unsigned idle_max;     /* kept at most (descriptors) */
	char *idle_ask_path;   /* DIR/release-idle */
	struct stat idle_sig;  /* [mu] its stat when last looked at */
	bool idle_sig_ok;      /* [mu] it existed then */
	/* stats [mu] */
	uint64_t hits, misses, uncached_opens, replaced_opens, downloaded;
	uint64_t verify_failures;
	uint64_t rate_bytes[RATE_SLOTS];
	int64_t rate_sec[RATE_SLOTS];
};

struct done_rec {
	centry *e; /* holds a ref (refs++) until recorded */
	uint32_t idx, crc;
	struct done_rec *next;
};

/* fetch.c */
void fetch_activate(cache *c, centry *e);      /* mu held */
void fetch_schedule(cache *c);                 /* mu held */
void fetch_make_urgent(cache *c, centry *e, uint32_t first, uint32_t last);
int fetch_start_writer(cache *c);
void fetch_stop_writer(cache *c);
void fetch_drain(cache *c); /* records what the writer left */

/* entry.c */
/* The centry of an acquired index entry ie (fd: its open cache file);
 * NULL when out of memory. */
centry *centry_new(cache *c, const char *key, const char *etag,
		   const cidx_entry *ie, enum cidx_role role, int fd);
void centry_free(cache *c, centry *e); /* mu held: unlink, unpin, free */
void centry_put(cache *c, centry *e); /* mu held: drop a ref */
/* fsync, then stamp: by the index writer without mu, and by centry_put's
 * last release (remember_verified) with it */
void stamp_good(cache *c, centry *e);

/* idle.c: complete entries no handle holds, kept with their pins */
#define CACHE_IDLE_KEEP 60.0 /* seconds without a handle */
#define CACHE_IDLE_MAX 4096  /* entries at most */
/* How many idle entries a process allowed nofile descriptors keeps. */
unsigned cache_idle_max_for(uint64_t nofile);
int cache_idle_init(cache *c); /* at open: idle_max, the request file */
/* Asks every process sharing the cache to release its idle entries.  mu
 * not needed. */
void cache_idle_ask(cache *c);
/* mu held: releases every idle entry; how many */
unsigned cache_idle_free_all(cache *c);
/* mu held: releases the entries idle for keep seconds at now, then the
 * longest idle while more than max are; how many */
unsigned cache_idle_expire(cache *c, double now, double keep, unsigned max);
/* mu held, every 100 ms (the cache writer): all of them when another
 * process asked (or at shutdown), else those past CACHE_IDLE_KEEP or
 * idle_max */
void cache_idle_tick(cache *c);
uint64_t cache_idle_bytes(cache *c); /* mu held: their sizes */
/* mu held: e is opened again (refs taken); if it was idle and its file
 * changed since (another program wrote it), its chunks are checked again
 * as they are read, as after a reopen by a new process */
void cache_idle_take(cache *c, centry *e);
/* Marks e's done chunks verified if its file is unchanged since it was
 * stamped.  mu */
void recall_verified(cache *c, centry *e);
/* Chunk i landed with this CRC (cache convention): false when it does not
 * match the manifest (the chunk is then missing again, or failed after
 * CACHE_VERIFY_RETRIES).  mu */
bool chunk_expected(cache *c, centry *e, uint32_t i, uint32_t crc);
uint64_t chunk_len(const centry *e, uint32_t idx);

/* cache.c */
/* The CRC (cache convention) each chunk of e must have according to x's
 * blocks, combined when a chunk holds several; NULL when x does not fit
 * e or its chunks are not a multiple of the blocks.  Malloc'd. */
uint32_t *chunk_expect_map(const centry *e, const cache_expect *x);

#endif
