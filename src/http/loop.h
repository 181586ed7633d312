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
	long timeout_ms; /* 0: the loop's default */
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

	/* private to the loop */
	http_xfer *next; /* submission queue, then the active list */
	void *easy;
	uint64_t upload_pos; /* bytes of upload handed to curl */
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
