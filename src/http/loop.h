/*
 * http: one event-loop thread driving libcurl's multi interface.
 *
 * Any thread submits transfers (http_submit); the loop thread owns every
 * curl handle, runs them concurrently over a shared connection pool
 * (connections are reused across transfers), and calls each transfer's
 * completion callback on the loop thread.  http_perform is the blocking
 * convenience wrapper used by code that runs on FUSE worker threads.
 *
 * Invariants: a transfer is owned by the loop from http_submit until its
 * done callback starts; the caller must not touch it in between.  Every
 * transfer has a deadline (timeout_ms, defaulting to the loop's), so a dead
 * server can never hang a caller.  Nothing here logs header values: the
 * Authorization header must not reach any log.
 *
 * Stall deadlines (first_byte_ms, low_speed_ms) end a transfer whose server
 * went silent long before timeout_ms would: it completes with
 * CURLE_OPERATION_TIMEDOUT, stalled set and errbuf saying what was missed
 * ("no reply for 5 s"), and its connection is closed, never reused.
 */
#ifndef CKPTFS_HTTP_LOOP_H
#define CKPTFS_HTTP_LOOP_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

typedef struct http_loop http_loop;
typedef struct http_xfer http_xfer;

/*
 * A request body streamed to the server with CURLOPT_UPLOAD and a read
 * callback, sent with a Content-Length (never chunked).  Bytes
 * [off, off+len) of fd are read with pread, so the descriptor's file
 * offset is never used or moved and one fd can feed many transfers at
 * once; or len bytes at mem.  The source must stay valid and unchanged
 * until the transfer completes.  Every start of the transfer (a retry
 * resubmits it) begins again at off, and curl may rewind it mid-transfer.
 */
typedef enum http_upload_kind {
	HTTP_UPLOAD_NONE = 0,
	HTTP_UPLOAD_FD,
	HTTP_UPLOAD_MEM,
} http_upload_kind;

typedef struct http_upload {
	http_upload_kind kind;
	int fd;
	uint64_t off;
	uint64_t len;
	const void *mem;
} http_upload;

static inline http_upload http_upload_fd(int fd, uint64_t off, uint64_t len)
{
	return (http_upload){HTTP_UPLOAD_FD, fd, off, len, NULL};
}

static inline http_upload http_upload_mem(const void *mem, uint64_t len)
{
	return (http_upload){HTTP_UPLOAD_MEM, -1, 0, len, mem};
}

/* Receives body bytes.  Return n to continue, anything else aborts. */
typedef size_t (*http_sink_fn)(void *arg, const char *data, size_t n);
typedef void (*http_done_fn)(http_xfer *x, void *arg);

struct http_xfer {
	/* request, filled by the caller */
	const char *method; /* "GET", "HEAD", "PUT", "POST", "DELETE" */
	char *url;
	struct curl_slist *headers;
	const char *body; /* request body (not copied), may be NULL */
	size_t body_len;
	http_upload upload; /* streamed body; when set, body is ignored */
	long timeout_ms; /* whole attempt; 0: the loop's default */
	long connect_timeout_ms; /* 0: the loop's default */
	/*
	 * Stall deadlines, checked by the loop every 100 ms once the request
	 * is being sent (not while connecting or queued for a connection):
	 * first_byte_ms: the longest wait for the reply's first byte after the
	 * request went out (for a body: after its last byte was handed to the
	 * socket, plus the time sending up to 8 MiB of it took, for bytes that
	 * may still sit in socket buffers).  low_speed_ms: while a body moves
	 * either way, fewer than low_speed_bytes per second (0 counts as 1)
	 * over that long.  0: no such deadline.
	 */
	long first_byte_ms;
	long low_speed_ms;
	long low_speed_bytes;
	bool fresh_connect; /* a new connection, not one from the pool */
	/* retry bookkeeping of the S3 client (s3/client.h); the loop ignores
	 * them: the attempt this is (0 or 1: the first) and when the first
	 * began (clock_mono seconds, 0: not yet) */
	unsigned attempt;
	double first_t;
	/* the S3 operation counted in util/metrics.h (metric_op), set by the
	 * s3 layer; 0: not counted */
	int metric_op;
	http_sink_fn sink; /* NULL: collect the body into resp_body */
	void *sink_arg;
	http_done_fn done;
	void *done_arg;

	/* result, filled by the loop */
	int curl_code; /* CURLcode; 0 when an HTTP exchange completed */
	long status;   /* HTTP status, 0 if none */
	buf resp_body;
	buf resp_headers; /* raw "Name: value\r\n" lines of the last response */
	char errbuf[CURL_ERROR_SIZE];
	/* upload: errno of a failed read of the source (ENODATA: the source
	 * ended before len bytes; the transfer then fails with
	 * CURLE_ABORTED_BY_CALLBACK), 0 otherwise */
	int upload_errno;
	bool stalled; /* ended by first_byte_ms or low_speed_ms */
	/* bodiless requests that got a reply: microseconds from sending the
	 * request to the reply's first byte; -1 otherwise */
	long ttfb_us;

	/* private to the loop */
	http_xfer *next; /* submission queue, then the active list */
	void *easy;
	uint64_t upload_pos; /* bytes of upload handed to curl */
	uint64_t rx;         /* reply bytes (headers and body) received */
	double t_start;      /* clock_mono when handed to curl */
	double win_t;        /* stall rules: start of the current window */
	uint64_t win_b;      /* bytes moved at win_t */
	double wait_t;       /* start of the wait for the first reply byte */
	bool watching, waiting;
};

typedef struct http_loop_opts {
	const char *ca_bundle; /* NULL: system default */
	bool insecure;         /* skip TLS verification (tests only) */
	long default_timeout_ms;
	long connect_timeout_ms;
	long max_host_connections;
} http_loop_opts;

http_loop *http_loop_new(const http_loop_opts *o);
/* Stops the thread; transfers still running complete with an error. */
void http_loop_free(http_loop *l);
/* The loop's counters (util/metrics.h): every finished transfer with a
 * metric_op is recorded there, and the layers above add theirs (commit
 * latency).  Lives as long as the loop; NULL when it could not be had. */
struct metrics *http_loop_metrics(http_loop *l);

void http_submit(http_loop *l, http_xfer *x);
/* Submits and waits for completion.  Returns x->curl_code. */
int http_perform(http_loop *l, http_xfer *x);

/* Resets result fields so the transfer can be submitted again (retries). */
void http_xfer_reset_result(http_xfer *x);
void http_xfer_free(http_xfer *x); /* frees url, headers and buffers */

/* Copies the value of response header `name` (case-insensitive) into out.
 * Returns false when absent. */
bool http_xfer_header(const http_xfer *x, const char *name, char *out,
		      size_t outsz);

#endif
