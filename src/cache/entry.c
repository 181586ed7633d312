/*
 * entry: a centry's life and the bookkeeping of its chunks, below both
 * cache.c (handles, opening, following, verification of reads) and fetch.c
 * (the download scheduler), which call it and never each other's way back.
 *
 * centry_new builds this process's view of an acquired index entry (the
 * chunks the index records are done, verified already unless the cache
 * checks reads); centry_put drops a reference, and the last one frees the
 * entry (its pin released in the index) unless this process is still
 * filling it, after stamping the file known good when every chunk was
 * checked or written here.  stamp_good fsyncs and records the file's
 * identity so later opens skip the CRC re-check; recall_verified is the
 * other side, at open.  chunk_expected compares a landed chunk's CRC with
 * the manifest's and decides: done, missing again (retried up to
 * CACHE_VERIFY_RETRIES times) or failed with EIO.  chunk_len is a chunk's
 * length (the last one is short).  All but stamp_good run under cache.mu.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/internal.h"
#include "util/clock.h"
#include "util/log.h"

uint64_t chunk_len(const centry *e, uint32_t idx)
{
	uint64_t off = (uint64_t)idx * e->chunk_size;
	uint64_t rest = e->size - off;
	return rest < e->chunk_size ? rest : e->chunk_size;
}

static void centry_free_mem(centry *e)
{
	free(e->key);
	free(e->etag);
	free(e->state);
	free(e->verified);
	free(e->attempts);
	free(e->crc);
	free(e->not_before);
	free(e->first_try);
	free(e->expect);
	free(e->mismatches);
	free(e);
}

centry *centry_new(cache *c, const char *key, const char *etag,
		   const cidx_entry *ie, enum cidx_role role, int fd)
{
	centry *e = calloc(1, sizeof *e);
	if (!e)
		return NULL;
	uint32_t n = ie->n_chunks;
	memcpy(e->name, ie->name, CIDX_NAME_LEN);
	e->key = strdup(key);
	e->etag = strdup(etag);
	e->size = ie->size;
	e->chunk_size = ie->chunk_size;
	e->n_chunks = n;
	e->fd = fd;
	e->role = role;
	e->state = calloc(n + 1, 1);
	e->verified = calloc(n + 1, 1);
	e->attempts = calloc(n + 1, 1);
	e->crc = calloc(n + 1, sizeof *e->crc);
	e->not_before = calloc(n + 1, sizeof *e->not_before);
	e->first_try = calloc(n + 1, sizeof *e->first_try);
	if (!e->key || !e->etag || !e->state || !e->verified ||
	    !e->attempts || !e->crc || !e->not_before || !e->first_try) {
		centry_free_mem(e);
		return NULL;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (ie->done && ie->done[i]) {
			e->state[i] = CH_DONE;
			e->crc[i] = ie->crc[i];
			e->verified[i] = !c->o.verify;
			e->n_done++;
		}
	}
	return e;
}

void centry_free(cache *c, centry *e)
{
	CKPTFS_ASSERT_HELD(&c->mu);
	for (centry **pp = &c->entries; *pp; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			break;
		}
	}
	for (centry **pp = &c->active; *pp; pp = &(*pp)->next_active) {
		if (*pp == e) {
			*pp = e->next_active;
			break;
		}
	}
	for (unsigned i = 0; i < c->urg_len; i++) {
		urgent *u = &c->urgent[(c->urg_head + i) % URGENT_MAX];
		if (u->e == e)
			u->e = NULL;
	}
	if (e->fd >= 0)
		close(e->fd);
	if (cidx_release(c->idx, e->name) < 0)
		log_warn("cache index: cannot release %s", e->key);
	centry_free_mem(e);
}

/*
 * Records that e's file is known good: its bytes are flushed to disk and
 * its identity stamped in the index, so later opens (by any process, after
 * a remount too) need no CRC re-check while the file stays unchanged.
 */
void stamp_good(cache *c, centry *e)
{
	struct stat st;
	if (fdatasync(e->fd) < 0 || fstat(e->fd, &st) < 0 ||
	    cidx_stamp_set(c->idx, e->name, &st) < 0)
		log_debug("cache file of %s: cannot stamp it", e->key);
}

/* Stamps e if this process has now checked or written all of it.  mu. */
static void remember_verified(cache *c, centry *e)
{
	if (e->n_done != e->n_chunks || e->stamped)
		return;
	for (uint32_t i = 0; i < e->n_chunks; i++)
		if (!e->verified[i])
			return;
	e->stamped = true;
	stamp_good(c, e);
}

/* Marks e's chunks verified if its file is unchanged since stamped. */
void recall_verified(cache *c, centry *e)
{
	struct stat st;
	bool match = false;
	if (fstat(e->fd, &st) < 0 ||
	    cidx_stamp_matches(c->idx, e->name, &st, &match) < 0 || !match)
		return;
	for (uint32_t i = 0; i < e->n_chunks; i++)
		if (e->state[i] == CH_DONE)
			e->verified[i] = 1;
	e->stamped = true;
}

void centry_put(cache *c, centry *e)
{
	CKPTFS_ASSERT_HELD(&c->mu);
	CKPTFS_ASSERT(e->refs > 0);
	e->refs--;
	/* refs counts the open handles among the rest */
	CKPTFS_ASSERT(e->handles <= e->refs);
	if (e->refs > 0)
		return;
	pthread_cond_broadcast(&c->cv); /* an open may wait for it (settling) */
	bool busy = e->role == CIDX_FILLER && !e->failed && !c->stopping &&
		    e->n_done < e->n_chunks;
	if (busy)
		return;
	remember_verified(c, e);
	if (!e->failed && !c->stopping && e->n_done == e->n_chunks) {
		/* kept (cache/idle.c); the file's identity now, checked when
		 * it is taken back (cache_idle_take) */
		if (fstat(e->fd, &e->idle_st) < 0)
			memset(&e->idle_st, 0, sizeof e->idle_st);
		e->idle_since = clock_mono();
		return;
	}
	centry_free(c, e);
}

bool chunk_expected(cache *c, centry *e, uint32_t i, uint32_t crc)
{
	if (!e->expect || e->expect[i] == crc)
		return true;
	c->verify_failures++;
	unsigned long long off = (unsigned long long)i * e->chunk_size;
	unsigned long long len = chunk_len(e, i);
	if (e->mismatches[i] < CACHE_VERIFY_RETRIES) {
		e->mismatches[i]++;
		log_warn("download of %s at offset %llu (%llu bytes): CRC-32C "
			 "%08x, the manifest says %08x; downloading it again",
			 e->key, off, len, ~crc, ~e->expect[i]);
		e->state[i] = CH_MISSING;
		e->not_before[i] = 0;
		return false;
	}
	log_error("download of %s at offset %llu (%llu bytes) does not match "
		  "its manifest after %u attempts (CRC-32C %08x, the manifest "
		  "says %08x): reads there fail with EIO",
		  e->key, off, len, CACHE_VERIFY_RETRIES + 1, ~crc,
		  ~e->expect[i]);
	e->state[i] = CH_FAILED;
	e->failed = true;
	e->err = EIO;
	return false;
}
