/*
 * http loop: a single thread that owns the CURLM handle.
 *
 * Submissions go onto a mutex-protected queue and the thread is woken with
 * curl_multi_wakeup.  The thread moves queued transfers into the multi
 * handle, drives curl_multi_perform/curl_multi_poll, and on completion fills
 * the result fields and calls the transfer's done callback.  Easy handles
 * are pooled (curl_easy_reset keeps their connection-independent caches);
 * connections live in the multi handle's pool and are reused by host.
 * Streamed request bodies (http_upload) go through read_cb/seek_cb: the
 * position lives in the transfer and restarts at 0 on every start.
 *
 * Stall deadlines (loop.h) are checked here rather than with curl's
 * low-speed options, which cannot tell waiting for a reply from a slow
 * body and average over a window: every 100 ms (the poll timeout while
 * transfers run) each transfer's bytes moved (curl's upload counter plus
 * what the header and body callbacks received) are compared with the last
 * window.  A transfer that missed a deadline is removed from the multi
 * handle, which closes its connection (a premature removal is never kept
 * for reuse), and completes with CURLE_OPERATION_TIMEDOUT.
 */
#include "http/loop.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/log.h"
#include "util/metrics.h"

#define EASY_POOL_MAX 64
/* stall checks: how often, and how much of a body may sit in socket
 * buffers after curl handed it over (its sending time is allowed again) */
#define STALL_CHECK_S 0.09 /* a poll timeout of 100 ms may wake a bit early */
#define STALL_POLL_MS 100
#define STALL_BUFFER (8.0 * 1024 * 1024)
/* curl's upload buffer (default 64 KiB): bigger means fewer read callbacks
 * and larger writes to the socket on fast links */
#define HTTP_UPLOAD_BUFFER (512 * 1024)

struct http_loop {
	CURLM *multi;
	pthread_t thread;
	pthread_mutex_t mu;
	http_xfer *q_head, *q_tail; /* submitted, not yet started */
	http_xfer *active;          /* in the multi handle (loop thread) */
	bool stopping;
	http_loop_opts opts;
	char *ca_bundle;
	CURL *pool[EASY_POOL_MAX]; /* loop thread only */
	int pool_n;
	double last_check; /* loop thread: stall checks */
	metrics *metrics;
};

static size_t body_cb(char *p, size_t sz, size_t nm, void *arg)
{
	http_xfer *x = arg;
	size_t n = sz * nm;
	x->rx += n;
	/* Error bodies always go to resp_body so callers can parse them. */
	if (x->sink && x->status < 300)
		return x->sink(x->sink_arg, p, n);
	return buf_append(&x->resp_body, p, n) == 0 ? n : 0;
}

static size_t header_cb(char *p, size_t sz, size_t nm, void *arg)
{
	http_xfer *x = arg;
	size_t n = sz * nm;
	x->rx += n;
	/* A new status line starts a new response (redirects, 100-continue). */
	if (n >= 5 && memcmp(p, "HTTP/", 5) == 0) {
		buf_reset(&x->resp_headers);
		const char *sp = memchr(p, ' ', n);
		x->status = sp ? strtol(sp + 1, NULL, 10) : 0;
	}
	return buf_append(&x->resp_headers, p, n) == 0 ? n : 0;
}

/* Streams x->upload: pread from the fd range, or a copy from memory. */
static size_t read_cb(char *p, size_t sz, size_t nm, void *arg)
{
	http_xfer *x = arg;
	const http_upload *u = &x->upload;
	size_t want = sz * nm;
	uint64_t left = u->len - x->upload_pos;
	if (want > left)
		want = (size_t)left;
	if (want == 0)
		return 0;
	if (u->kind == HTTP_UPLOAD_MEM) {
		memcpy(p, (const char *)u->mem + x->upload_pos, want);
		x->upload_pos += want;
		return want;
	}
	ssize_t n;
	do
		n = pread(u->fd, p, want, (off_t)(u->off + x->upload_pos));
	while (n < 0 && errno == EINTR);
	if (n <= 0) {
		/* a source that shrank or fails to read: sending fewer bytes
		 * than announced would only time out, so stop now */
		x->upload_errno = n < 0 ? errno : ENODATA;
		return CURL_READFUNC_ABORT;
	}
	x->upload_pos += (uint64_t)n;
	return (size_t)n;
}

/* curl rewinds when it must resend the body (a reused connection that was
 * closed under it, an auth or redirect round): only SEEK_SET is used. */
static int seek_cb(void *arg, curl_off_t off, int origin)
{
	http_xfer *x = arg;
	if (origin != SEEK_SET || off < 0 || (uint64_t)off > x->upload.len)
		return CURL_SEEKFUNC_CANTSEEK;
	x->upload_pos = (uint64_t)off;
	return CURL_SEEKFUNC_OK;
}

static CURL *easy_get(http_loop *l)
{
	if (l->pool_n > 0)
		return l->pool[--l->pool_n];
	return curl_easy_init();
}

static void easy_put(http_loop *l, CURL *e)
{
	curl_easy_reset(e);
	if (l->pool_n < EASY_POOL_MAX)
		l->pool[l->pool_n++] = e;
	else
		curl_easy_cleanup(e);
}

static void setup_method(CURL *e, http_xfer *x)
{
	if (strcmp(x->method, "HEAD") == 0) {
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	} else if (strcmp(x->method, "GET") != 0) {
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, x->method);
	}
	if (x->upload.kind != HTTP_UPLOAD_NONE) {
		x->upload_pos = 0;
		x->upload_errno = 0;
		curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE,
				 (curl_off_t)x->upload.len);
		curl_easy_setopt(e, CURLOPT_READFUNCTION, read_cb);
		curl_easy_setopt(e, CURLOPT_READDATA, x);
		curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, seek_cb);
		curl_easy_setopt(e, CURLOPT_SEEKDATA, x);
		curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE,
				 (long)HTTP_UPLOAD_BUFFER);
	} else if (x->body || strcmp(x->method, "PUT") == 0 ||
		   strcmp(x->method, "POST") == 0) {
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)x->body_len);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, x->body ? x->body : "");
	}
}

static CURL *xfer_start(http_loop *l, http_xfer *x)
{
	CURL *e = easy_get(l);
	if (!e)
		return NULL;
	x->errbuf[0] = '\0';
	x->rx = 0;
	x->watching = x->waiting = x->stalled = false;
	x->ttfb_us = -1;
	curl_easy_setopt(e, CURLOPT_URL, x->url);
	curl_easy_setopt(e, CURLOPT_PRIVATE, x);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->headers);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, body_cb);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS,
			 x->timeout_ms ? x->timeout_ms
				       : l->opts.default_timeout_ms);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
			 x->connect_timeout_ms ? x->connect_timeout_ms
					       : l->opts.connect_timeout_ms);
	if (x->fresh_connect)
		curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
	/* 256 KiB receive buffer: 16x fewer recv/write callbacks (and cache
	 * pwrites) per GiB than curl's 16 KiB default */
	curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 256L * 1024);
	if (l->ca_bundle)
		curl_easy_setopt(e, CURLOPT_CAINFO, l->ca_bundle);
	if (l->opts.insecure) {
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	setup_method(e, x);
	return e;
}

static void xfer_fail_now(http_xfer *x, int code, const char *why)
{
	x->curl_code = code;
	x->status = 0;
	snprintf(x->errbuf, sizeof x->errbuf, "%s", why);
	if (x->done)
		x->done(x, x->done_arg);
}

/* Takes the whole submission queue (oldest first) off the loop. */
static http_xfer *take_queued(http_loop *l)
{
	pthread_mutex_lock(&l->mu);
	http_xfer *q = l->q_head;
	l->q_head = l->q_tail = NULL;
	pthread_mutex_unlock(&l->mu);
	return q;
}

static void start_queued(http_loop *l)
{
	http_xfer *q = take_queued(l);
	while (q) {
		http_xfer *x = q;
		q = q->next;
		x->next = NULL;
		CURL *e = xfer_start(l, x);
		if (!e) {
			xfer_fail_now(x, CURLE_OUT_OF_MEMORY, "out of memory");
			continue;
		}
		if (curl_multi_add_handle(l->multi, e) != CURLM_OK) {
			easy_put(l, e);
			xfer_fail_now(x, CURLE_FAILED_INIT, "cannot add transfer");
			continue;
		}
		x->easy = e;
		x->t_start = clock_mono();
		x->next = l->active;
		l->active = x;
	}
}

static void active_remove(http_loop *l, http_xfer *x)
{
	for (http_xfer **pp = &l->active; *pp; pp = &(*pp)->next) {
		if (*pp == x) {
			*pp = x->next;
			break;
		}
	}
	x->next = NULL;
	x->easy = NULL;
}

/* Bytes of the request body. */
static uint64_t body_len(const http_xfer *x)
{
	if (x->upload.kind != HTTP_UPLOAD_NONE)
		return x->upload.len;
	return x->body ? x->body_len : 0;
}

static void note_ttfb(CURL *e, http_xfer *x)
{
	curl_off_t pre = 0, start = 0;
	if (x->curl_code != CURLE_OK || body_len(x) ||
	    curl_easy_getinfo(e, CURLINFO_PRETRANSFER_TIME_T, &pre) ||
	    curl_easy_getinfo(e, CURLINFO_STARTTRANSFER_TIME_T, &start) ||
	    start < pre || pre <= 0)
		return;
	x->ttfb_us = (long)(start - pre);
}

/* Counts the finished attempt (util/metrics.h). */
static void note_metrics(http_loop *l, CURL *e, const http_xfer *x)
{
	if (!x->metric_op || !l->metrics)
		return;
	curl_off_t up = 0, down = 0, total = 0;
	curl_easy_getinfo(e, CURLINFO_SIZE_UPLOAD_T, &up);
	curl_easy_getinfo(e, CURLINFO_SIZE_DOWNLOAD_T, &down);
	curl_easy_getinfo(e, CURLINFO_TOTAL_TIME_T, &total);
	metrics_attempt(l->metrics, (metric_op)x->metric_op,
			x->curl_code == CURLE_OK ? x->status : 0, x->attempt,
			up > 0 ? (uint64_t)up : 0, down > 0 ? (uint64_t)down : 0,
			total > 0 ? (uint64_t)total : 0, x->stalled);
}

static void finish_done(http_loop *l)
{
	CURLMsg *m;
	int left;
	while ((m = curl_multi_info_read(l->multi, &left))) {
		if (m->msg != CURLMSG_DONE)
			continue;
		CURL *e = m->easy_handle;
		http_xfer *x = NULL;
		curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&x);
		x->curl_code = m->data.result;
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &x->status);
		note_ttfb(e, x);
		note_metrics(l, e, x);
		if (x->curl_code != CURLE_OK && x->upload_errno)
			snprintf(x->errbuf, sizeof x->errbuf,
				 "reading the local source: %s",
				 x->upload_errno == ENODATA
					 ? "it ended before the announced length"
					 : strerror(x->upload_errno));
		else if (x->curl_code != CURLE_OK && !x->errbuf[0])
			snprintf(x->errbuf, sizeof x->errbuf, "%s",
				 curl_easy_strerror(x->curl_code));
		curl_multi_remove_handle(l->multi, e);
		easy_put(l, e);
		active_remove(l, x);
		if (x->done)
			x->done(x, x->done_arg);
	}
}

static void abort_all(http_loop *l)
{
	while (l->active) {
		http_xfer *x = l->active;
		CURL *e = x->easy;
		curl_multi_remove_handle(l->multi, e);
		easy_put(l, e);
		active_remove(l, x);
		xfer_fail_now(x, CURLE_ABORTED_BY_CALLBACK, "shutting down");
	}
	http_xfer *q = take_queued(l);
	while (q) {
		http_xfer *x = q;
		q = q->next;
		xfer_fail_now(x, CURLE_ABORTED_BY_CALLBACK, "shutting down");
	}
}

/*
 * Whether x missed a stall deadline (loop.h); *why says which.  The clock
 * starts when curl begins sending the request (PRETRANSFER): connecting is
 * CURLOPT_CONNECTTIMEOUT's business, waiting for a pooled connection
 * CURLOPT_TIMEOUT's.
 */
static bool stall_check(http_xfer *x, double now, char *why, size_t whysz)
{
	if (x->first_byte_ms <= 0 && x->low_speed_ms <= 0)
		return false;
	curl_off_t pre = 0, up = 0;
	if (curl_easy_getinfo(x->easy, CURLINFO_PRETRANSFER_TIME_T, &pre) !=
		CURLE_OK ||
	    pre <= 0)
		return false;
	curl_easy_getinfo(x->easy, CURLINFO_SIZE_UPLOAD_T, &up);
	uint64_t total = body_len(x);
	uint64_t sent = up > 0 ? (uint64_t)up : 0;
	uint64_t moved = sent + x->rx;
	double sent_t = x->t_start + (double)pre / 1e6;
	if (!x->watching) {
		x->watching = true;
		x->win_t = sent_t;
		x->win_b = moved;
	}
	if (x->rx == 0 && sent >= total) { /* waiting for the reply */
		if (!x->waiting) {
			x->waiting = true;
			x->wait_t = sent_t;
			if (total) {
				double share = (double)total > STALL_BUFFER
						   ? STALL_BUFFER / (double)total
						   : 1.0;
				x->wait_t = now + (now - sent_t) * share;
			}
		}
		x->win_t = now; /* the low-speed window starts with the reply */
		x->win_b = moved;
		if (x->first_byte_ms > 0 &&
		    (now - x->wait_t) * 1000 >= (double)x->first_byte_ms) {
			snprintf(why, whysz, "no reply for %g s",
				 (double)x->first_byte_ms / 1000);
			return true;
		}
		return false;
	}
	x->waiting = false;
	if (x->low_speed_ms <= 0)
		return false;
	uint64_t rate = x->low_speed_bytes > 0 ? (uint64_t)x->low_speed_bytes : 1;
	uint64_t need = rate * (uint64_t)x->low_speed_ms / 1000;
	if (need == 0)
		need = 1;
	if (moved < x->win_b || moved - x->win_b >= need) {
		x->win_t = now;
		x->win_b = moved;
		return false;
	}
	if ((now - x->win_t) * 1000 < (double)x->low_speed_ms)
		return false;
	if (rate <= 1)
		snprintf(why, whysz, "no data moved for %g s",
			 (double)x->low_speed_ms / 1000);
	else
		snprintf(why, whysz, "less than %llu bytes/s for %g s",
			 (unsigned long long)rate,
			 (double)x->low_speed_ms / 1000);
	return true;
}

/* Ends the transfers that missed a stall deadline.  Loop thread. */
static void check_stalls(http_loop *l)
{
	double now = clock_mono();
	if (now - l->last_check < STALL_CHECK_S)
		return;
	l->last_check = now;
	for (http_xfer *x = l->active; x;) {
		http_xfer *nx = x->next;
		char why[128];
		if (stall_check(x, now, why, sizeof why)) {
			CURL *e = x->easy;
			/* removing a running transfer closes its connection */
			curl_multi_remove_handle(l->multi, e);
			easy_put(l, e);
			active_remove(l, x);
			log_debug("%s %s: %s: giving up on the connection",
				  x->method, x->url, why);
			x->stalled = true;
			xfer_fail_now(x, CURLE_OPERATION_TIMEDOUT, why);
		}
		x = nx;
	}
}

static void *loop_main(void *arg)
{
	http_loop *l = arg;
	for (;;) {
		pthread_mutex_lock(&l->mu);
		bool stop = l->stopping;
		pthread_mutex_unlock(&l->mu);
		if (stop)
			break;
		start_queued(l);
		int running = 0;
		curl_multi_perform(l->multi, &running);
		finish_done(l);
		check_stalls(l);
		curl_multi_poll(l->multi, NULL, 0, l->active ? STALL_POLL_MS : 1000,
				NULL);
	}
	abort_all(l);
	return NULL;
}

http_loop *http_loop_new(const http_loop_opts *o)
{
	http_loop *l = calloc(1, sizeof *l);
	if (!l)
		return NULL;
	l->opts = *o;
	if (!l->opts.default_timeout_ms)
		l->opts.default_timeout_ms = 120000;
	if (!l->opts.connect_timeout_ms)
		l->opts.connect_timeout_ms = 5000;
	if (o->ca_bundle)
		l->ca_bundle = strdup(o->ca_bundle);
	pthread_mutex_init(&l->mu, NULL);
	l->metrics = metrics_new(); /* best effort: NULL counts nothing */
	l->multi = curl_multi_init();
	if (!l->multi)
		goto fail;
	curl_multi_setopt(l->multi, CURLMOPT_MAX_HOST_CONNECTIONS,
			  o->max_host_connections ? o->max_host_connections
						  : 64L);
	curl_multi_setopt(l->multi, CURLMOPT_MAXCONNECTS, 128L);
	if (pthread_create(&l->thread, NULL, loop_main, l) != 0)
		goto fail;
	return l;
fail:
	if (l->multi)
		curl_multi_cleanup(l->multi);
	pthread_mutex_destroy(&l->mu);
	metrics_free(l->metrics);
	free(l->ca_bundle);
	free(l);
	return NULL;
}

void http_loop_free(http_loop *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	l->stopping = true;
	pthread_mutex_unlock(&l->mu);
	curl_multi_wakeup(l->multi);
	pthread_join(l->thread, NULL);
	for (int i = 0; i < l->pool_n; i++)
		curl_easy_cleanup(l->pool[i]);
	curl_multi_cleanup(l->multi);
	pthread_mutex_destroy(&l->mu);
	metrics_free(l->metrics);
	free(l->ca_bundle);
	free(l);
}

void http_submit(http_loop *l, http_xfer *x)
{
	x->next = NULL;
	pthread_mutex_lock(&l->mu);
	bool stopping = l->stopping;
	if (!stopping) {
		if (l->q_tail)
			l->q_tail->next = x;
		else
			l->q_head = x;
		l->q_tail = x;
	}
	pthread_mutex_unlock(&l->mu);
	if (stopping)
		xfer_fail_now(x, CURLE_ABORTED_BY_CALLBACK, "shutting down");
	else
		curl_multi_wakeup(l->multi);
}

struct waiter {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
	http_done_fn inner;
	void *inner_arg;
};

static void waiter_done(http_xfer *x, void *arg)
{
	struct waiter *w = arg;
	if (w->inner)
		w->inner(x, w->inner_arg);
	pthread_mutex_lock(&w->mu);
	w->done = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

int http_perform(http_loop *l, http_xfer *x)
{
	struct waiter w = {.done = false, .inner = x->done,
			   .inner_arg = x->done_arg};
	pthread_mutex_init(&w.mu, NULL);
	pthread_cond_init(&w.cv, NULL);
	x->done = waiter_done;
	x->done_arg = &w;
	http_submit(l, x);
	pthread_mutex_lock(&w.mu);
	while (!w.done)
		pthread_cond_wait(&w.cv, &w.mu);
	pthread_mutex_unlock(&w.mu);
	pthread_cond_destroy(&w.cv);
	pthread_mutex_destroy(&w.mu);
	x->done = w.inner;
	x->done_arg = w.inner_arg;
	return x->curl_code;
}

void http_xfer_reset_result(http_xfer *x)
{
	x->curl_code = 0;
	x->upload_errno = 0;
	x->stalled = false;
	x->ttfb_us = -1;
	x->status = 0;
	buf_reset(&x->resp_body);
	buf_reset(&x->resp_headers);
	x->errbuf[0] = '\0';
}

void http_xfer_free(http_xfer *x)
{
	free(x->url);
	x->url = NULL;
	curl_slist_free_all(x->headers);
	x->headers = NULL;
	buf_free(&x->resp_body);
	buf_free(&x->resp_headers);
}

bool http_xfer_header(const http_xfer *x, const char *name, char *out,
		      size_t outsz)
{
	size_t nl = strlen(name);
	const char *p = buf_cstr(&x->resp_headers);
	while (*p) {
		const char *eol = strchr(p, '\n');
		size_t linelen = eol ? (size_t)(eol - p) : strlen(p);
		if (linelen > nl && p[nl] == ':' && strncasecmp(p, name, nl) == 0) {
			const char *v = p + nl + 1;
			const char *end = p + linelen;
			while (v < end && (*v == ' ' || *v == '\t'))
				v++;
			while (end > v && (end[-1] == '\r' || end[-1] == ' '))
				end--;
			size_t vl = (size_t)(end - v);
			if (vl >= outsz)
				vl = outsz - 1;
			memcpy(out, v, vl);
			out[vl] = '\0';
			return true;
		}
		if (!eol)
			break;
		p = eol + 1;
	}
	return false;
}

metrics *http_loop_metrics(http_loop *l)
{
	return l ? l->metrics : NULL;
}
