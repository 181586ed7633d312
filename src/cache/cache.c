/*
 * cache: the read cache's handles (cache/cache.h): opening and closing the
 * cache (cache_open, cache_shutdown, cache_free), opening a handle on an
 * object version (cache_file_open_expect: the entry found or acquired in
 * the index, room made from idle entries when the cache is full, the
 * manifest's block CRCs set as what downloads must match), following an
 * entry another process fills, making a range ready for a read
 * (cache_file_ready: waiting for its chunks, verifying them when reads
 * are checked), adopting a file written through the mount as a complete
 * entry (cache_adopt), and the cap, free-disk and statistics queries.
 *
 * A centry is this process's view of one cached object version; its life
 * and its chunks' bookkeeping are entry.c's, the downloads fetch.c's, the
 * complete entries no handle holds idle.c's (cache/internal.h).  Handles
 * share the centry; it lives while handles, transfers or unrecorded
 * completions hold references, so a download continues after the last
 * close and the entry stays pinned until it is complete.
 */
#include "cache/cache.h"

#include <errno.h>
#include <fcntl.h>
#include <isa-l.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cache/index-db.h"
#include "cache/internal.h"
#include "proto/crc.h"
#include "util/clock.h"
#include "util/log.h"

struct cache_file {
	cache *c;
	centry *e;
};

/* What cache_open set up besides the entries: the index, the lock, the
 * strings, the struct. */
static void cache_destroy(cache *c)
{
	cidx_close(c->idx);
	free(c->idle_ask_path);
	pthread_cond_destroy(&c->cv);
	ckpt_mutex_destroy(&c->mu);
	free(c->dir);
	free(c->bucket);
	free(c);
}

int cache_open(const cache_opts *o, s3_client *s3, const char *bucket,
	       cache **out, char **err)
{
	cache *c = calloc(1, sizeof *c);
	if (!c)
		return -1;
	c->o = *o;
	if (!c->o.chunk_size)
		c->o.chunk_size = 8u << 20;
	if (!c->o.per_file_conns)
		c->o.per_file_conns = 8;
	if (!c->o.global_conns)
		c->o.global_conns = 16;
	c->dir = strdup(o->dir);
	c->bucket = strdup(bucket);
	c->o.dir = c->dir;
	c->s3 = s3;
	ckpt_mutex_init(&c->mu);
	pthread_cond_init(&c->cv, NULL);
	cidx_limits lim = {o->cap, o->min_free};
	if (cidx_open(c->dir, &lim, &c->idx, err) < 0 ||
	    cache_idle_init(c) < 0 || fetch_start_writer(c) < 0) {
		cache_destroy(c);
		return -1;
	}
	*out = c;
	return 0;
}

void cache_shutdown(cache *c)
{
	if (c)
		fetch_stop_writer(c);
}

/* The memory of a centry; its fd and index pin are the caller's. */
void cache_free(cache *c)
{
	if (!c)
		return;
	fetch_drain(c);
	ckpt_lock(&c->mu);
	while (c->entries)
		centry_free(c, c->entries);
	ckpt_unlock(&c->mu);
	cache_destroy(c);
}

const char *cache_dir(const cache *c)
{
	return c->dir;
}

static centry *find_entry(cache *c, const char *name)
{
	for (centry *e = c->entries; e; e = e->next)
		if (strcmp(e->name, name) == 0)
			return e;
	return NULL;
}

/* Acquires the entry in the index and builds the centry; a new entry gets
 * chunks of chunk_size bytes.  mu not held. */
static int entry_create(cache *c, const char *key, const char *etag,
			uint64_t size, uint32_t chunk_size, centry **out)
{
	CKPTFS_ASSERT_NOT_HELD(&c->mu);
	cidx_entry ie;
	memset(&ie, 0, sizeof ie);
	enum cidx_role role;
	int rc = cidx_acquire(c->idx, c->bucket, key, strlen(key), etag, size,
			      chunk_size, &ie, &role);
	if (rc < 0)
		return rc;
	char *path = cidx_path(c->idx, ie.name);
	int fd = path ? open(path, O_RDWR | O_CLOEXEC) : -1;
	if (fd < 0) {
		rc = -errno;
		log_error("cache file of %s: %s", key, strerror(errno));
	}
	free(path);
	centry *e = fd >= 0 ? centry_new(c, key, etag, &ie, role, fd) : NULL;
	if (fd >= 0 && !e) {
		close(fd);
		rc = -ENOMEM;
	}
	if (!e)
		cidx_release(c->idx, ie.name);
	cidx_entry_free(&ie);
	*out = e;
	return e ? 0 : (rc ? rc : -EIO);
}

/* How long an open the cache cannot take waits, when other processes
 * sharing it hold pins, for them to release their idle entries (asked
 * through cache/idle.c; their writer threads look every 100 ms). */
#define ASK_TRIES 6
#define ASK_PAUSE_NS (50 * 1000000L)

static bool no_room(int rc)
{
	return rc == -ENOSPC || rc == -EBUSY;
}

/* How long an open waits for room held by entries settling (below). */
#define SETTLE_WAIT_S 2.0

/* Whether an entry is complete and held by no handle, only by a transfer
 * or a completion record still finishing: its pin goes within moments.
 * mu held. */
static bool settling(const cache *c)
{
	CKPTFS_ASSERT_HELD(&c->mu);
	for (const centry *e = c->entries; e; e = e->next)
		if (!e->failed && e->handles == 0 && e->refs > 0 &&
		    e->n_done == e->n_chunks)
			return true;
	return false;
}

/* Makes room held by idle entries: this process's at once, then, when
 * others pin entries too, theirs (asked; when wait, tried again for up to
 * ASK_TRIES * ASK_PAUSE_NS).  try(c, arg) is the operation that needed
 * room; its result.  mu not held. */
static int with_idle_room(cache *c, int (*try)(cache *, void *), void *arg,
			  bool wait)
{
	CKPTFS_ASSERT_NOT_HELD(&c->mu);
	int rc = try(c, arg);
	if (!no_room(rc))
		return rc;
	/* this process's idle entries go at once; complete ones whose last
	 * transfer or completion record is still finishing (settling) are
	 * waited for, up to SETTLE_WAIT_S, when the caller can wait */
	double until = clock_mono() + SETTLE_WAIT_S;
	for (;;) {
		ckpt_lock(&c->mu);
		unsigned freed = cache_idle_free_all(c);
		bool settle = !freed && wait && settling(c) &&
			      clock_mono() < until;
		if (settle) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 20 * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			ckpt_cond_timedwait(&c->cv, &c->mu, &ts);
		}
		ckpt_unlock(&c->mu);
		if (!freed && !settle)
			break;
		if (freed && !no_room(rc = try(c, arg)))
			return rc;
	}
	bool others = false;
	if (!no_room(rc) || cidx_others_pin(c->idx, &others) < 0 || !others)
		return rc;
	cache_idle_ask(c);
	for (int i = 0; wait && i < ASK_TRIES && no_room(rc); i++) {
		struct timespec ts = {0, ASK_PAUSE_NS};
		nanosleep(&ts, NULL);
		rc = try(c, arg);
	}
	return rc;
}

struct create_args {
	const char *key, *etag;
	uint64_t size;
	uint32_t chunk_size;
	centry **out;
};

static int try_create(cache *c, void *arg)
{
	struct create_args *a = arg;
	return entry_create(c, a->key, a->etag, a->size, a->chunk_size,
			    a->out);
}

/* ---- checking downloads against a manifest ----------------------------- */

/*
 * The CRC each chunk of e must have (cache convention: ~standard), from
 * the manifest's block CRCs: one block per chunk, or several combined when
 * the entry's chunks are a multiple of the block size.  NULL when x does
 * not describe e's bytes or cannot be mapped onto its chunks.  e's size,
 * chunk size and count never change: mu not held.
 */
uint32_t *chunk_expect_map(const centry *e, const cache_expect *x)
{
	if (!x || !x->crc || !x->block ||
	    x->n != proto_block_count(e->size, x->block)) {
		if (x)
			log_warn("cache: %s: the manifest's block checksums do "
				 "not fit its size; not checked",
				 e->key);
		return NULL;
	}
	if (e->chunk_size % x->block) {
		log_debug("cache: %s is cached in chunks of %u bytes, not a "
			  "multiple of the manifest's %u-byte blocks: not "
			  "checked against the manifest",
			  e->key, e->chunk_size, x->block);
		return NULL;
	}
	uint32_t *m = calloc(e->n_chunks + 1, sizeof *m);
	if (!m)
		return NULL;
	uint64_t per = e->chunk_size / x->block;
	for (uint32_t i = 0; i < e->n_chunks; i++) {
		uint64_t b = (uint64_t)i * per, end = b + per;
		if (end > x->n)
			end = x->n;
		uint32_t crc = x->crc[b];
		for (uint64_t k = b + 1; k < end; k++) {
			uint64_t len = e->size - k * x->block < x->block
					   ? e->size - k * x->block
					   : x->block;
			crc = proto_crc32c_combine(crc, x->crc[k], len);
		}
		m[i] = ~crc;
	}
	return m;
}

/* Forgets chunk i of e (its bytes are not the right ones): missing again,
 * fetched again by this process.  mu */
static void chunk_drop(cache *c, centry *e, uint32_t i)
{
	CKPTFS_ASSERT_HELD(&c->mu);
	c->verify_failures++;
	e->state[i] = CH_MISSING;
	e->verified[i] = 0;
	e->n_done--;
	if (cidx_chunk_forget(c->idx, e->name, i) == 0)
		e->role = CIDX_FILLER;
}

/* Drops done chunks of e whose recorded CRC is not the manifest's (filled
 * by an open that had no manifest, or a writer that did not check).  mu */
static void drop_unexpected(cache *c, centry *e)
{
	CKPTFS_ASSERT_HELD(&c->mu);
	if (!e->expect)
		return;
	uint32_t dropped = 0;
	for (uint32_t i = 0; i < e->n_chunks; i++) {
		if (e->state[i] != CH_DONE || e->crc[i] == e->expect[i])
			continue;
		if (!dropped++)
			log_warn("cache file of %s: chunk %u (offset %llu) has "
				 "CRC-32C %08x, the manifest says %08x; "
				 "fetching it again",
				 e->key, i,
				 (unsigned long long)i * e->chunk_size,
				 ~e->crc[i], ~e->expect[i]);
		chunk_drop(c, e, i);
	}
	if (dropped > 1)
		log_warn("cache file of %s: %u chunks differ from the manifest",
			 e->key, dropped);
}

/* Installs the expected CRCs m (taken) on e unless it has some.  mu */
static void set_expect(cache *c, centry *e, uint32_t *m)
{
	CKPTFS_ASSERT_HELD(&c->mu);
	if (!m || e->expect || e->failed) {
		free(m);
		return;
	}
	uint8_t *mm = calloc(e->n_chunks + 1, 1);
	if (!mm) {
		free(m);
		return;
	}
	e->expect = m;
	e->mismatches = mm;
	drop_unexpected(c, e);
	if (e->role == CIDX_FILLER && e->n_done < e->n_chunks) {
		fetch_activate(c, e);
		fetch_schedule(c);
	}
}

int cache_file_open(cache *c, const char *key, const char *etag,
		    uint64_t size, cache_file **out, bool *hit)
{
	return cache_file_open_expect(c, key, etag, size, NULL, out, hit);
}

int cache_file_open_expect(cache *c, const char *key, const char *etag,
			   uint64_t size, const cache_expect *x,
			   cache_file **out, bool *hit)
{
	char name[CIDX_NAME_LEN];
	cidx_name(c->bucket, key, strlen(key), etag, name);
	cache_file *f = calloc(1, sizeof *f);
	if (!f)
		return -ENOMEM;
	ckpt_lock(&c->mu);
	centry *e = find_entry(c, name);
	if (e && e->failed)
		e = NULL; /* a failed download: try afresh */
	if (e) {
		e->refs++;
		e->handles++;
		cache_idle_take(c, e);
	}
	ckpt_unlock(&c->mu);
	if (!e) {
		centry *ne;
		/* a new entry: one chunk per manifest block */
		uint32_t cs = x && x->block ? x->block : c->o.chunk_size;
		/* the room may be held by idle or settling entries */
		struct create_args ca = {key, etag, size, cs, &ne};
		int rc = with_idle_room(c, try_create, &ca, true);
		if (rc < 0) {
			free(f);
			return rc;
		}
		/* known before any of its chunks can land */
		uint32_t *m = x ? chunk_expect_map(ne, x) : NULL;
		ckpt_lock(&c->mu);
		e = find_entry(c, name);
		if (e && !e->failed) { /* another thread won the race */
			bool same = e->chunk_size == ne->chunk_size;
			e->refs++;
			e->handles++;
			cache_idle_take(c, e);
			ne->refs = 1;
			centry_free(c, ne);
			set_expect(c, e, same ? m : NULL);
			m = NULL;
		} else {
			e = ne;
			e->refs = 1;
			e->handles = 1;
			e->next = c->entries;
			c->entries = e;
			set_expect(c, e, m);
			m = NULL;
			if (c->o.verify)
				recall_verified(c, e);
			if (e->role == CIDX_FILLER && e->n_done < e->n_chunks) {
				fetch_activate(c, e);
				fetch_schedule(c);
			}
		}
		ckpt_unlock(&c->mu);
		free(m);
		x = NULL; /* done */
	}
	if (x) { /* an entry this process already had open */
		ckpt_lock(&c->mu);
		bool want = !e->expect;
		ckpt_unlock(&c->mu);
		uint32_t *m = want ? chunk_expect_map(e, x) : NULL;
		ckpt_lock(&c->mu);
		set_expect(c, e, m);
		ckpt_unlock(&c->mu);
	}
	ckpt_lock(&c->mu);
	*hit = e->n_done == e->n_chunks;
	if (*hit)
		c->hits++;
	else
		c->misses++;
	ckpt_unlock(&c->mu);
	f->c = c;
	f->e = e;
	*out = f;
	return 0;
}

void cache_file_close(cache_file *f)
{
	cache *c = f->c;
	/* completions not yet recorded keep the entry (and its pin) alive;
	 * record them now so the pin goes with the last close, not later.
	 * A batch the writer thread took is waited for (its records hold
	 * references too): else a close right after the last chunk landed
	 * left the pin held after the release, and the next open, finding
	 * no idle entry to free and no release to wait for, read uncached */
	ckpt_lock(&c->mu);
	while (c->recording)
		ckpt_cond_wait(&c->cv, &c->mu);
	bool pending = c->pending != NULL;
	ckpt_unlock(&c->mu);
	if (pending)
		fetch_drain(c);
	ckpt_lock(&c->mu);
	CKPTFS_ASSERT(f->e->handles > 0);
	f->e->handles--;
	centry_put(c, f->e);
	ckpt_unlock(&c->mu);
	free(f);
}

void cache_file_willneed(cache_file *f)
{
	cache *c = f->c;
	ckpt_lock(&c->mu);
	bool whole = f->e->n_done == f->e->n_chunks;
	ckpt_unlock(&c->mu);
	/* fd and size never change while f holds the entry */
	if (whole && f->e->size)
		(void)posix_fadvise(f->e->fd, 0, (off_t)f->e->size,
				    POSIX_FADV_WILLNEED);
}

void cache_file_progress(cache_file *f, uint64_t *done, uint64_t *total)
{
	cache *c = f->c;
	ckpt_lock(&c->mu);
	uint64_t d = 0;
	for (uint32_t i = 0; i < f->e->n_chunks; i++)
		if (f->e->state[i] == CH_DONE)
			d += chunk_len(f->e, i);
	*done = d;
	*total = f->e->size;
	ckpt_unlock(&c->mu);
}

int cache_file_error(cache_file *f)
{
	ckpt_lock(&f->c->mu);
	int err = f->e->failed ? (f->e->err ? f->e->err : EIO) : 0;
	ckpt_unlock(&f->c->mu);
	return err;
}

/* ---- waiting for bytes ------------------------------------------------ */

/* Polls the index for chunks another process wrote.  mu held; drops it. */
static void follow(cache *c, centry *e)
{
	CKPTFS_ASSERT_HELD(&c->mu);
	ckpt_unlock(&c->mu);
	struct timespec ts = {0, 20 * 1000000L};
	nanosleep(&ts, NULL);
	cidx_entry ie;
	memset(&ie, 0, sizeof ie);
	memcpy(ie.name, e->name, CIDX_NAME_LEN);
	ie.size = e->size;
	ie.chunk_size = e->chunk_size;
	ie.n_chunks = e->n_chunks;
	enum cidx_role role = CIDX_FOLLOWER;
	int rc = cidx_refresh(c->idx, &ie, &role);
	ckpt_lock(&c->mu);
	if (rc < 0) {
		cidx_entry_free(&ie);
		return;
	}
	bool unexpected = false;
	for (uint32_t i = 0; i < e->n_chunks && ie.done; i++) {
		if (ie.done[i] && e->state[i] != CH_DONE) {
			e->state[i] = CH_DONE;
			e->crc[i] = ie.crc[i];
			e->verified[i] = !c->o.verify;
			e->n_done++;
			unexpected |= e->expect && e->crc[i] != e->expect[i];
		}
	}
	/* the filler checks what it downloads against the manifest; one
	 * that had none (a prefetch) is caught here */
	if (unexpected)
		drop_unexpected(c, e);
	if (e->role == CIDX_FOLLOWER && role != CIDX_FOLLOWER) {
		e->role = role;
		if (role == CIDX_FILLER) { /* the filler died: take over */
			log_info("resuming the download of %s", e->key);
			fetch_activate(c, e);
			fetch_schedule(c);
		}
	}
	cidx_entry_free(&ie);
}

/* 0 when every chunk in [first, last] is done, 1 to wait, <0 error. */
static int range_state(centry *e, uint32_t first, uint32_t last)
{
	int rc = 0;
	for (uint32_t i = first; i <= last; i++) {
		if (e->state[i] == CH_FAILED)
			return -e->err;
		if (e->state[i] != CH_DONE)
			rc = 1;
	}
	return rc;
}

static int wait_range(cache *c, centry *e, uint32_t first, uint32_t last)
{
	int rc;
	while ((rc = range_state(e, first, last)) == 1) {
		if (c->stopping)
			return -EIO;
		if (e->role == CIDX_FOLLOWER) {
			follow(c, e);
			continue;
		}
		fetch_activate(c, e);
		fetch_make_urgent(c, e, first, last);
		fetch_schedule(c);
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		ckpt_cond_timedwait(&c->cv, &c->mu, &ts);
	}
	return rc;
}

/* CRC check of one chunk on disk.  mu not held. */
static bool chunk_verify(centry *e, uint32_t idx, uint32_t want)
{
	uint64_t off = (uint64_t)idx * e->chunk_size;
	size_t len = chunk_len(e, idx);
	if (len == 0)
		return true;
	void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, e->fd, (off_t)off);
	if (p == MAP_FAILED)
		return false;
	uint32_t crc = 0xFFFFFFFFu;
	for (size_t done = 0; done < len;) {
		size_t n = len - done > (1u << 30) ? (1u << 30) : len - done;
		crc = crc32_iscsi((unsigned char *)p + done, (int)n, crc);
		done += n;
	}
	munmap(p, len);
	return crc == want;
}

/* Verifies unverified chunks in range.  Returns false if one was bad (it
 * is then marked missing and will be fetched again).  mu held. */
static bool verify_range(cache *c, centry *e, uint32_t first, uint32_t last)
{
	CKPTFS_ASSERT_HELD(&c->mu);
	bool ok = true;
	for (uint32_t i = first; i <= last; i++) {
		if (e->verified[i] || e->state[i] != CH_DONE)
			continue;
		uint32_t want = e->crc[i];
		ckpt_unlock(&c->mu);
		bool good = chunk_verify(e, i, want);
		ckpt_lock(&c->mu);
		if (e->state[i] != CH_DONE) {
			/* another reader found it bad meanwhile: wait again */
			ok = false;
			continue;
		}
		if (e->verified[i]) {
			/* another reader found it bad and its new download
			 * came while this check read the old bytes (or
			 * another reader found it good): nothing to drop */
			continue;
		}
		if (good) {
			e->verified[i] = 1;
			continue;
		}
		log_warn("cache file of %s: chunk %u is corrupt; fetching it "
			 "again",
			 e->key, i);
		chunk_drop(c, e, i);
		ok = false;
	}
	return ok;
}

int cache_file_ready(cache_file *f, uint64_t off, size_t len)
{
	cache *c = f->c;
	centry *e = f->e;
	if (len == 0 || off >= e->size)
		return e->fd;
	uint32_t first = (uint32_t)(off / e->chunk_size);
	uint32_t last = (uint32_t)((off + len - 1) / e->chunk_size);
	if (last >= e->n_chunks)
		last = e->n_chunks - 1;
	ckpt_lock(&c->mu);
	int rc;
	do {
		rc = wait_range(c, e, first, last);
	} while (rc == 0 && !verify_range(c, e, first, last));
	ckpt_unlock(&c->mu);
	return rc < 0 ? rc : e->fd;
}

/* ---- statistics ------------------------------------------------------- */

/* Per-chunk CRC32C of fd's size bytes, in the cache's convention. */
static int chunk_crcs(int fd, uint64_t size, uint32_t chunk_size,
		      uint32_t *crc)
{
	size_t bsz = 1u << 20;
	unsigned char *b = malloc(bsz);
	if (!b)
		return -ENOMEM;
	uint64_t off = 0;
	int rc = 0;
	while (!rc && off < size) {
		uint32_t idx = (uint32_t)(off / chunk_size);
		uint64_t end = ((uint64_t)idx + 1) * chunk_size;
		if (end > size)
			end = size;
		uint32_t c = 0xFFFFFFFFu;
		while (off < end) {
			size_t want = end - off < bsz ? (size_t)(end - off) : bsz;
			ssize_t n = pread(fd, b, want, (off_t)off);
			if (n <= 0) {
				rc = n < 0 ? -errno : -EIO;
				break;
			}
			c = crc32_iscsi(b, (int)n, c);
			off += (uint64_t)n;
		}
		crc[idx] = c;
	}
	free(b);
	return rc;
}

int cache_adopt(cache *c, const char *key, const char *etag, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		int rc = -errno;
		if (fd >= 0)
			close(fd);
		return rc;
	}
	uint64_t size = (uint64_t)st.st_size;
	uint32_t cs = c->o.chunk_size;
	uint64_t n = size / cs + 1;
	uint32_t *crc = calloc(n, sizeof *crc);
	int rc = crc ? chunk_crcs(fd, size, cs, crc) : -ENOMEM;
	if (!rc)
		rc = fdatasync(fd) < 0 ? -errno : 0;
	if (!rc)
		rc = cidx_adopt(c->idx, c->bucket, key, strlen(key), etag, size,
				cs, crc, path);
	if (rc == -ENOSPC || rc == -EBUSY) { /* idle entries hold the room */
		ckpt_lock(&c->mu);
		unsigned freed = cache_idle_free_all(c);
		ckpt_unlock(&c->mu);
		if (freed)
			rc = cidx_adopt(c->idx, c->bucket, key, strlen(key), etag,
					size, cs, crc, path);
	}
	free(crc);
	if (!rc) {
		/* known good: the same identity check as after a download */
		char name[CIDX_NAME_LEN];
		cidx_name(c->bucket, key, strlen(key), etag, name);
		if (fstat(fd, &st) < 0 || cidx_stamp_set(c->idx, name, &st) < 0)
			log_debug("cache: cannot stamp adopted %s", key);
	}
	close(fd);
	if (rc && rc != -EEXIST)
		log_debug("cache: cannot adopt %s: %s", key, strerror(-rc));
	return rc;
}

uint64_t cache_cap(const cache *c)
{
	return c->o.cap;
}

uint64_t cache_min_free(const cache *c)
{
	return c->o.min_free;
}

static int try_free_disk(cache *c, void *arg)
{
	return cidx_free_disk(c->idx, *(uint64_t *)arg);
}

int cache_free_disk(cache *c, uint64_t size)
{
	/* room held by idle entries, of this process or others (asked: the
	 * writers' callers try again, fs/write.c wait_for_space) */
	return with_idle_room(c, try_free_disk, &size, false);
}

void cache_count_uncached(cache *c)
{
	ckpt_lock(&c->mu);
	c->uncached_opens++;
	ckpt_unlock(&c->mu);
}

void cache_count_replaced(cache *c)
{
	ckpt_lock(&c->mu);
	c->replaced_opens++;
	ckpt_unlock(&c->mu);
}

void cache_get_stats(cache *c, cache_stats *st)
{
	memset(st, 0, sizeof *st);
	cidx_stats is;
	if (cidx_get_stats(c->idx, &is) == 0) {
		st->entries = is.entries;
		st->bytes = is.bytes;
		st->pinned_bytes = is.pinned_bytes;
		st->evictions = is.evictions;
	}
	ckpt_lock(&c->mu);
	/* idle entries are released on demand (cache/idle.c): not held */
	uint64_t idle = cache_idle_bytes(c);
	st->pinned_bytes -= idle < st->pinned_bytes ? idle : st->pinned_bytes;
	st->hits = c->hits;
	st->misses = c->misses;
	st->uncached_opens = c->uncached_opens;
	st->replaced_opens = c->replaced_opens;
	st->downloaded_bytes = c->downloaded;
	st->verify_failures = c->verify_failures;
	int64_t now = (int64_t)clock_mono();
	uint64_t sum = 0;
	for (int i = 0; i < RATE_SLOTS; i++)
		if (c->rate_sec[i] < now && c->rate_sec[i] >= now - 4)
			sum += c->rate_bytes[i];
	st->download_rate = (double)sum / 4.0;
	for (centry *e = c->active; e; e = e->next_active)
		st->active_downloads++;
	ckpt_unlock(&c->mu);
	st->cap = c->o.cap;
	st->min_free = c->o.min_free;
}
