/*
 * fetch: the download scheduler of the cache.
 *
 * Every entry that this process fills is on the active list.  Whenever a
 * slot is free (fewer than global_conns transfers in flight, fewer than
 * per_file_conns for the entry) fetch_schedule starts the next chunk:
 * chunks a reader is waiting for (the urgent ring) first, then each active
 * entry's sequential sweep, round-robin between entries.  Transfers run on
 * the http loop; their sinks pwrite straight into the cache file at the
 * chunk's offset and fold the bytes into the chunk's CRC32C as they arrive,
 * so no chunk is ever buffered in memory.  A chunk whose CRC is not the
 * one its manifest recorded is not marked done (chunk_expected, entry.c):
 * it goes back to missing and is fetched again, or fails with EIO.
 *
 * Completions are recorded in the SQLite index by a writer thread in
 * batches (the loop thread never touches SQLite).  Failed chunks are retried
 * under the client's retry policy (s3/retry.h: which failures, the backoff
 * delay kept in not_before, the attempt limit and the time budget counted
 * from first_try, doubled deadlines and a fresh connection for a retry), so
 * a reader gets EIO within the policy's budget when the server is gone; the
 * writer thread wakes every 100 ms and reschedules, which is what starts
 * delayed retries.
 */
#include <errno.h>
#include <isa-l.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/internal.h"
#include "util/clock.h"
#include "util/log.h"

/*
 * One ranged GET covering `count` consecutive chunks starting at `idx`.
 * The sequential sweep of a large object asks for several chunks at once
 * (fewer requests, each paying the first-byte latency once); a reader's
 * urgent chunk goes alone.  Chunks land one by one as the bytes arrive:
 * each is written, CRC'd and marked done the moment its last byte is in,
 * so readers never wait for the rest of the range.
 */
struct chunk_xfer {
	cache *c;
	centry *e;
	uint32_t idx, count; /* chunks [idx, idx + count) */
	uint32_t cur;        /* chunks of the range already landed */
	uint64_t off;        /* offset of the range */
	size_t len, got;     /* range length, bytes received */
	size_t cur_got;      /* bytes of chunk idx + cur received */
	uint32_t crc;        /* of chunk idx + cur so far */
	int werr;
	char *wbuf; /* curl hands over 16 KiB at a time: batch the pwrites */
	size_t wlen;
	http_xfer x;
};

#define WBUF_SIZE (256u * 1024)
#define CRC_SEED 0xFFFFFFFFu
#define SPAN_MAX 4 /* chunks per sweep request: 32 MiB with 8 MiB chunks */

/* Writes the batched bytes to the cache file at their offset. */
static void chunk_flush(struct chunk_xfer *t)
{
	uint64_t at = t->off + t->got - t->wlen;
	size_t w = 0;
	while (w < t->wlen && !t->werr) {
		ssize_t r = pwrite(t->e->fd, t->wbuf + w, t->wlen - w,
				   (off_t)(at + w));
		if (r < 0 && errno != EINTR)
			t->werr = errno;
		else if (r > 0)
			w += (size_t)r;
	}
	t->wlen = 0;
}

static void rate_add(cache *c, uint64_t bytes)
{
	int64_t now = (int64_t)clock_mono();
	unsigned s = (unsigned)(now % RATE_SLOTS);
	if (c->rate_sec[s] != now) {
		c->rate_sec[s] = now;
		c->rate_bytes[s] = 0;
	}
	c->rate_bytes[s] += bytes;
	c->downloaded += bytes;
}

/* Chunk i of e is written with this CRC.  mu held. */
static void chunk_succeeded(cache *c, centry *e, uint32_t i, uint32_t crc)
{
	CKPTFS_ASSERT_HELD(&c->mu);
	CKPTFS_ASSERT(e->n_done < e->n_chunks); /* never counted twice */
	e->state[i] = CH_DONE;
	e->crc[i] = crc;
	e->verified[i] = 1;
	e->first_try[i] = 0;
	e->n_done++;
	rate_add(c, chunk_len(e, i));
	struct done_rec *r = malloc(sizeof *r);
	if (r) {
		e->refs++; /* until the writer has recorded it */
		*r = (struct done_rec){e, i, crc, c->pending};
		c->pending = r;
		pthread_cond_signal(&c->writer_cv);
	}
}

/* The current chunk's last byte arrived: land it.  Loop thread. */
static void chunk_landed(struct chunk_xfer *t)
{
	chunk_flush(t);
	if (t->werr)
		return;
	cache *c = t->c;
	ckpt_lock(&c->mu);
	/* bytes that are not the manifest's are never done: fetched again
	 * (chunk_expected), the rest of the range lands meanwhile */
	if (chunk_expected(c, t->e, t->idx + t->cur, t->crc))
		chunk_succeeded(c, t->e, t->idx + t->cur, t->crc);
	pthread_cond_broadcast(&c->cv);
	ckpt_unlock(&c->mu);
	t->cur++;
	t->cur_got = 0;
	t->crc = CRC_SEED;
}

static size_t chunk_sink(void *arg, const char *data, size_t n)
{
	struct chunk_xfer *t = arg;
	if (n > t->len - t->got || t->werr)
		return 0; /* longer than the range: abort, never overrun */
	char etag[256];
	if (t->got == 0 && s3_reply_etag_differs(&t->x, etag, sizeof etag,
						 NULL)) {
		/* another version (the server ignored If-Match): not one
		 * byte of it lands */
		t->werr = ESTALE;
		return 0;
	}
	if (!t->wbuf && !(t->wbuf = malloc(WBUF_SIZE))) {
		t->werr = ENOMEM;
		return 0;
	}
	for (size_t done = 0; done < n && !t->werr;) {
		size_t clen = chunk_len(t->e, t->idx + t->cur);
		size_t take = n - done;
		if (take > clen - t->cur_got)
			take = clen - t->cur_got;
		if (take > WBUF_SIZE - t->wlen)
			take = WBUF_SIZE - t->wlen;
		t->crc = crc32_iscsi((unsigned char *)data + done, (int)take,
				     t->crc);
		memcpy(t->wbuf + t->wlen, data + done, take);
		t->wlen += take;
		t->got += take;
		t->cur_got += take;
		done += take;
		if (t->cur_got == clen)
			chunk_landed(t);
		else if (t->wlen == WBUF_SIZE)
			chunk_flush(t);
	}
	return t->werr ? 0 : n;
}

/* Chunks of the range that did not land: retry later, or give up.  Each
 * counts the range's attempt as its own.  mu. */
static void range_failed(cache *c, struct chunk_xfer *t, const s3_err *err,
			 unsigned attempt, bool retry, unsigned delay_ms)
{
	centry *e = t->e;
	for (uint32_t k = t->cur; k < t->count; k++) {
		uint32_t i = t->idx + k;
		if (e->attempts[i] < attempt)
			e->attempts[i] = (uint8_t)(attempt < 255 ? attempt : 255);
		if (retry && !c->stopping && e->attempts[i] < 250) {
			e->state[i] = CH_MISSING;
			e->not_before[i] = clock_mono() + delay_ms / 1000.0;
			continue;
		}
		e->first_try[i] = 0;
		e->state[i] = CH_FAILED;
		e->failed = true;
		/* ESTALE: the object changed since it was opened (If-Match
		 * failed); the reader decides (fs/ops.c switch_version) */
		e->err = err->err ? err->err : EIO;
	}
	if (retry && !c->stopping) {
		log_debug("chunks %u-%u of %s: %s; retrying", t->idx + t->cur,
			  t->idx + t->count - 1, e->key, err->msg);
	} else if (!c->stopping) {
		if (err->err == ESTALE)
			log_error("download of %s stopped: the object changed "
				  "since it was opened",
				  e->key);
		else
			log_error("download of %s failed: %s", e->key,
				  err->msg);
	}
}

static void chunk_done_cb(http_xfer *x, void *arg)
{
	struct chunk_xfer *t = arg;
	cache *c = t->c;
	centry *e = t->e;
	s3_err err;
	memset(&err, 0, sizeof err);
	bool retry = false;
	unsigned delay = 0;
	/* start_range numbered it; range_failed records it per chunk */
	unsigned attempt = x->attempt;
	int rc = s3_classify(c->s3, e->key, x, attempt, &err, &retry, &delay);
	if (t->werr == ESTALE) { /* the sink refused another version */
		rc = -1;
		retry = false;
		err.err = ESTALE;
		snprintf(err.msg, sizeof err.msg, "the object changed since it "
			 "was opened (the server ignored If-Match)");
	} else if (t->werr) { /* our sink aborted the transfer: the local error wins */
		rc = -1;
		retry = false;
		err.err = t->werr;
		snprintf(err.msg, sizeof err.msg, "writing the cache file: %s",
			 strerror(t->werr));
	} else if (rc == 0 && t->cur != t->count) {
		/* a body shorter than the range: as a truncated transfer */
		rc = -1;
		err.err = EIO;
		retry = s3_client_retry_next(c->s3, x, attempt, CURLE_PARTIAL_FILE,
					     0, NULL, &delay);
		snprintf(err.msg, sizeof err.msg,
			 "short reply: %zu of %zu bytes", t->got, t->len);
	}
	ckpt_lock(&c->mu);
	e->inflight--;
	c->inflight--;
	if (rc < 0)
		range_failed(c, t, &err, attempt, retry, delay);
	pthread_cond_broadcast(&c->cv);
	fetch_schedule(c);
	centry_put(c, e);
	ckpt_unlock(&c->mu);
	http_xfer_free(x);
	free(t->wbuf);
	free(t);
}

/* Starts one GET for chunks [idx, idx + count).  mu held. */
static void start_range(cache *c, centry *e, uint32_t idx, uint32_t count)
{
	CKPTFS_ASSERT_HELD(&c->mu);
	struct chunk_xfer *t = calloc(1, sizeof *t);
	s3_err err;
	if (!t)
		return;
	t->c = c;
	t->e = e;
	t->idx = idx;
	t->count = count;
	t->off = (uint64_t)idx * e->chunk_size;
	for (uint32_t k = 0; k < count; k++)
		t->len += chunk_len(e, idx + k);
	t->crc = CRC_SEED;
	/* a retry: its attempt number (doubled deadlines), the start of the
	 * first attempt (the budget) and a connection not from the pool */
	double now = clock_mono(), first = now;
	unsigned tried = 0;
	for (uint32_t k = 0; k < count; k++) {
		uint32_t i = idx + k;
		if (!e->first_try[i])
			e->first_try[i] = now;
		first = e->first_try[i] < first ? e->first_try[i] : first;
		tried = e->attempts[i] > tried ? e->attempts[i] : tried;
	}
	t->x.attempt = tried + 1;
	t->x.first_t = first;
	t->x.fresh_connect = tried > 0;
	if (s3_prepare_get(c->s3, e->key, t->off, t->len, e->etag, &t->x,
			   &err) < 0) {
		/* no credentials this moment: a refresh still running is
		 * waited for like a failed attempt, a failed one is final */
		unsigned delay = 0;
		bool retry = s3_client_retry_next(c->s3, &t->x, t->x.attempt, 0,
						  0, err.code, &delay);
		range_failed(c, t, &err, t->x.attempt, retry, delay);
		http_xfer_free(&t->x);
		free(t);
		return;
	}
	t->x.sink = chunk_sink;
	t->x.sink_arg = t;
	t->x.done = chunk_done_cb;
	t->x.done_arg = t;
	for (uint32_t k = 0; k < count; k++) {
		/* each chunk range has exactly one writer (internal.h) */
		CKPTFS_ASSERT(e->state[idx + k] != CH_INFLIGHT &&
			      e->state[idx + k] != CH_DONE);
		e->state[idx + k] = CH_INFLIGHT;
	}
	e->inflight++;
	e->refs++;
	c->inflight++;
	http_submit(s3_client_loop(c->s3), &t->x);
}

/*
 * How many chunks from idx a sweep request takes: several only when the
 * object has many missing chunks left, so that all its connections stay
 * busy and most chunks are still unrequested — a random read must find its
 * chunk free to jump the queue, not buried at the end of a long range.
 */
static uint32_t sweep_span(cache *c, centry *e, uint32_t idx, double now)
{
	uint32_t left = e->n_chunks - e->n_done;
	uint32_t conns = c->o.per_file_conns ? c->o.per_file_conns : 1;
	uint32_t want = left / (conns * SPAN_MAX);
	if (want > SPAN_MAX)
		want = SPAN_MAX;
	uint32_t k = 1;
	while (k < want && idx + k < e->n_chunks &&
	       e->state[idx + k] == CH_MISSING && e->not_before[idx + k] <= now)
		k++;
	return k;
}

/* Next missing chunk of e that may start now, from its cursor, wrapping. */
static bool next_missing(centry *e, double now, uint32_t *out, bool *waiting)
{
	for (uint32_t k = 0; k < e->n_chunks; k++) {
		uint32_t i = (e->cursor + k) % e->n_chunks;
		if (e->state[i] != CH_MISSING)
			continue;
		if (e->not_before[i] > now) {
			*waiting = true;
			continue;
		}
		*out = i;
		e->cursor = i + 1 < e->n_chunks ? i + 1 : 0;
		return true;
	}
	return false;
}

static void deactivate(cache *c, centry *e)
{
	for (centry **pp = &c->active; *pp; pp = &(*pp)->next_active) {
		if (*pp == e) {
			*pp = e->next_active;
			break;
		}
	}
	e->next_active = NULL;
	e->active = false;
}

static bool pick_urgent(cache *c, double now, centry **pe, uint32_t *pidx)
{
	while (c->urg_len) {
		urgent u = c->urgent[c->urg_head];
		c->urg_head = (c->urg_head + 1) % URGENT_MAX;
		c->urg_len--;
		if (u.e && u.e->state[u.idx] == CH_MISSING &&
		    u.e->not_before[u.idx] <= now) {
			*pe = u.e;
			*pidx = u.idx;
			return true;
		}
	}
	return false;
}

static bool pick_sweep(cache *c, double now, centry **pe, uint32_t *pidx)
{
	centry *e = c->active;
	while (e) {
		centry *nx = e->next_active;
		bool waiting = false;
		if (e->failed) {
			deactivate(c, e);
		} else if (e->inflight < c->o.per_file_conns &&
			   next_missing(e, now, pidx, &waiting)) {
			/* round-robin: the chosen entry goes to the tail */
			deactivate(c, e);
			e->active = true;
			centry **tail = &c->active;
			while (*tail)
				tail = &(*tail)->next_active;
			*tail = e;
			*pe = e;
			return true;
		} else if (!waiting && e->inflight == 0 &&
			   e->n_done == e->n_chunks) {
			deactivate(c, e);
		}
		e = nx;
	}
	return false;
}

void fetch_schedule(cache *c)
{
	CKPTFS_ASSERT_HELD(&c->mu);
	double now = clock_mono();
	while (!c->stopping && c->inflight < c->o.global_conns) {
		centry *e;
		uint32_t idx;
		if (pick_urgent(c, now, &e, &idx))
			start_range(c, e, idx, 1);
		else if (pick_sweep(c, now, &e, &idx))
			start_range(c, e, idx, sweep_span(c, e, idx, now));
		else
			break;
	}
}

void fetch_activate(cache *c, centry *e)
{
	CKPTFS_ASSERT_HELD(&c->mu);
	if (e->active || e->failed)
		return;
	/* at the tail: files start in the order they were opened (a
	 * directory read-ahead opens them in the order they will be read) */
	e->active = true;
	e->next_active = NULL;
	centry **tail = &c->active;
	while (*tail)
		tail = &(*tail)->next_active;
	*tail = e;
}

void fetch_make_urgent(cache *c, centry *e, uint32_t first, uint32_t last)
{
	for (uint32_t i = first; i <= last && i < e->n_chunks; i++) {
		if (e->state[i] != CH_MISSING)
			continue;
		if (c->urg_len == URGENT_MAX) { /* drop the oldest */
			c->urg_head = (c->urg_head + 1) % URGENT_MAX;
			c->urg_len--;
		}
		unsigned pos = (c->urg_head + c->urg_len) % URGENT_MAX;
		c->urgent[pos] = (urgent){e, i};
		c->urg_len++;
		/* a chunk backing off after a failure keeps its not_before
		 * (at most retry_max_delay): a reader waiting must not turn
		 * the retries against a throttling or failing server into
		 * a loop without pauses; the sweep or the reader's next
		 * wake starts it once due */
	}
}

/* ---- index writer ----------------------------------------------------- */

static void record_batch(cache *c, struct done_rec *list)
{
	/* group consecutive records of one entry into one transaction */
	while (list) {
		centry *e = list->e;
		uint32_t idx[64], crc[64];
		size_t n = 0;
		struct done_rec *r = list;
		while (r && r->e == e && n < 64) {
			idx[n] = r->idx;
			crc[n++] = r->crc;
			r = r->next;
		}
		bool completed = false;
		if (cidx_chunks_done(c->idx, e->name, idx, crc, n, &completed) < 0)
			log_error("cache index: cannot record chunks of %s",
				  e->key);
		if (completed) /* writer thread: flush and stamp the file */
			stamp_good(c, e);
		ckpt_lock(&c->mu);
		if (completed) {
			e->role = CIDX_COMPLETE;
			e->stamped = true;
		}
		while (list != r) {
			struct done_rec *nx = list->next;
			centry_put(c, list->e);
			free(list);
			list = nx;
		}
		ckpt_unlock(&c->mu);
	}
}

/* Takes the completions recorded so far, oldest first, so chunks are
 * recorded in completion order.  mu. */
static struct done_rec *take_pending(cache *c)
{
	struct done_rec *rev = NULL;
	while (c->pending) {
		struct done_rec *r = c->pending;
		c->pending = r->next;
		r->next = rev;
		rev = r;
	}
	return rev;
}

/* Records the completions pending so far, without mu while it writes
 * (c->recording counts it, waiters hear the end on cv).  Called and
 * returns with mu. */
static void record_pending(cache *c)
{
	CKPTFS_ASSERT_HELD(&c->mu);
	struct done_rec *rev = take_pending(c);
	c->recording++;
	ckpt_unlock(&c->mu);
	record_batch(c, rev);
	ckpt_lock(&c->mu);
	c->recording--;
	pthread_cond_broadcast(&c->cv);
}

static void *writer_main(void *arg)
{
	cache *c = arg;
	ckpt_lock(&c->mu);
	for (;;) {
		if (!c->pending && c->stopping)
			break;
		if (!c->pending) {
			struct timespec ts;
			clock_realtime_in(&ts, 100);
			ckpt_cond_timedwait(&c->writer_cv, &c->mu, &ts);
			fetch_schedule(c); /* delayed retries */
			cache_idle_tick(c); /* their pins go */
			continue;
		}
		record_pending(c);
	}
	ckpt_unlock(&c->mu);
	return NULL;
}

void fetch_drain(cache *c)
{
	ckpt_lock(&c->mu);
	record_pending(c);
	ckpt_unlock(&c->mu);
}

int fetch_start_writer(cache *c)
{
	pthread_cond_init(&c->writer_cv, NULL);
	return pthread_create(&c->writer, NULL, writer_main, c) == 0 ? 0 : -1;
}

void fetch_stop_writer(cache *c)
{
	ckpt_lock(&c->mu);
	c->stopping = true;
	pthread_cond_signal(&c->writer_cv);
	ckpt_unlock(&c->mu);
	pthread_join(c->writer, NULL);
	pthread_cond_destroy(&c->writer_cv);
}
