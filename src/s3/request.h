/*
 * s3/request.c: signed S3 requests and their retry loop, under every
 * operation of the client (client.c, upload.c, multipart.c): the s3_err a
 * failure is reported in, the s3_request an operation fills, the loop
 * that runs it, the retry policy's accessors and the server quirks a
 * client learns.  The client's operations are in client.h (which
 * includes this header); the s3_client object is in client-state.h.
 */
#ifndef CKPTFS_S3_REQUEST_H
#define CKPTFS_S3_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/loop.h"
#include "s3/retry.h"

typedef struct s3_client s3_client;

typedef struct s3_err {
	int err;          /* errno for the filesystem: ENOENT, EACCES, EIO... */
	long http_status; /* 0 when there was no response */
	int curl_code;
	char code[64];    /* S3 error code, "" when none */
	char msg[512];
} s3_err;

/* The client's settings (s3_client_new), which the request loop runs
 * with. */
typedef struct s3_client_opts {
	retry_policy retry;   /* max_attempts 0: RETRY_POLICY_DEFAULT */
	/* whole attempt, however busy the connection (the stall deadlines of
	 * the policy end silent ones much earlier) */
	long timeout_ms;      /* per attempt, data requests; 0: 120 s */
	long meta_timeout_ms; /* per attempt, HEAD/LIST; 0: 30 s */
} s3_client_opts;

/*
 * Generic signed requests, for operations built on top of this client
 * (s3/upload.c, s3/multipart.c; the loop itself is in s3/request.c).
 * Fill an s3_request and either run it with the retry loop
 * (s3_request_perform) or sign one attempt into an http_xfer for the
 * caller to submit (s3_request_prepare) and judge afterwards
 * (s3_request_classify), as s3_prepare_get/s3_classify do for GETs.
 *
 * Every header in hdr_names/hdr_values is sent and signed, together with
 * host, x-amz-date, x-amz-content-sha256 and the session token.  The
 * payload hash is payload_hash when set, else the empty-body hash for
 * requests without a body and "UNSIGNED-PAYLOAD" for those with one.
 */
#define S3_REQ_MAX_HEADERS 40

typedef struct s3_request {
	const char *op;     /* names the operation in messages: "PUT", ... */
	const char *method; /* GET HEAD PUT POST DELETE */
	const char *key;    /* NULL: bucket-level request */
	const char *what;   /* names the target in messages when key is NULL */
	const char *query;  /* encoded, without '?'; NULL or "" for none */
	const char *hdr_names[S3_REQ_MAX_HEADERS];
	const char *hdr_values[S3_REQ_MAX_HEADERS];
	size_t n_hdrs;
	http_upload upload; /* request body; HTTP_UPLOAD_NONE: none */
	const char *payload_hash;
	long timeout_ms;       /* per attempt; 0: the client's data timeout */
	unsigned max_attempts; /* 0: the policy's */
	/* the server works before it answers (CompleteMultipartUpload,
	 * copies, DeleteObjects): its first-byte allowance,
	 * s3_client_server_wait_ms; 0: an ordinary request */
	unsigned wait_ms;
	unsigned budget_ms;    /* 0: the policy's (retry_request_budget_ms) */
	/* a new connection for every attempt: on a pooled connection that
	 * turns out dead, curl sends the request again by itself, unseen by
	 * the attempt count; a request whose lost reply must be noticed
	 * (CreateMultipartUpload) takes a fresh one */
	bool fresh_connect;
	http_sink_fn sink;     /* NULL: the body collects in x->resp_body */
	void *sink_arg;
	void (*sink_reset)(void *arg);
	/*
	 * Judges a 2xx reply (NULL: accepted).  Returns 0 to accept, or -1
	 * with *e filled (s3_request_error_from), e.g. for a 200 whose body
	 * is an <Error> document; the failure is then retried or not by the
	 * policy like any other, on e->code and the status.
	 */
	int (*check)(void *arg, const http_xfer *x, s3_err *e);
	void *check_arg;
	/*
	 * Maps an HTTP error status to the errno reported (NULL, or a return
	 * of 0: the default table: 403 EACCES, 404 ENOENT, 412 ESTALE...).
	 */
	int (*status_errno)(long status, const char *code);
} s3_request;

/* Appends a header; -1 when hdr_names is full. */
int s3_request_header(s3_request *r, const char *name, const char *value);

/*
 * Runs r with retries (fresh signature each attempt; an upload body is
 * re-sent from its start).  x collects the last attempt's reply (the caller
 * frees it with http_xfer_free).  *attempts (may be NULL) receives the
 * number of attempts made.  Returns 0 on an accepted 2xx, -1 with *e.
 */
int s3_request_perform(s3_client *c, const s3_request *r, http_xfer *x,
		       unsigned *attempts, s3_err *e);
/* Signs one attempt into x: url, headers, method, upload, and the
 * deadlines of its attempt number (see s3_prepare_get for how x counts
 * attempts). */
int s3_request_prepare(s3_client *c, const s3_request *r, http_xfer *x,
		       s3_err *e);
/* Like s3_classify for a completed attempt of r (runs r->check on 2xx). */
int s3_request_classify(s3_client *c, const s3_request *r, const http_xfer *x,
			unsigned attempt, s3_err *e, bool *retry,
			unsigned *retry_after_ms);
/*
 * Fills *e for a failure of r found after the exchange: errno err, S3 code
 * (may be NULL), status, and a message "OP s3://bucket/key: <what>".
 */
void s3_request_error_from(s3_client *c, const s3_request *r, int err,
			   const char *code, long status, const char *detail,
			   s3_err *e);
/* Per-attempt deadline for a transfer of `bytes`: the data timeout plus
 * one second per MiB (at least 1 MiB/s), so large parts are not cut off. */
long s3_client_data_timeout(const s3_client *c, uint64_t bytes);
/* Delay before another attempt, from the client's policy and jitter. */
unsigned s3_client_backoff_ms(s3_client *c, unsigned attempt);
/* The same after failure e (a throttling reply backs off more; NULL:
 * transient): what a caller retrying on its own waits (commit engine). */
unsigned s3_client_retry_delay_ms(s3_client *c, unsigned attempt,
				  const s3_err *e);
/* Whether failure e, local ones included, may succeed when tried again
 * (retry_classify_err): the commit engine retries those forever. */
bool s3_err_transient(const s3_err *e);
/* Whether two ETags are the same, quoted or not (listings quote them,
 * some replies do not). */
bool s3_etag_equal(const char *a, const char *b);
/*
 * For a caller that judged an attempt of an ordinary request itself (a 2xx
 * whose body came short): whether attempt `attempt` of x, failed as
 * curl_code, status and code (may be NULL) describe, is tried again under
 * the client's policy, and after *delay_ms.
 */
bool s3_client_retry_next(s3_client *c, const http_xfer *x, unsigned attempt,
			  int curl_code, long status, const char *code,
			  unsigned *delay_ms);
/* retry_server_wait_ms of the client's policy. */
unsigned s3_client_server_wait_ms(const s3_client *c, uint64_t items,
				  uint64_t bytes);
/* The client's retry policy (copy). */
retry_policy s3_client_retry_policy(const s3_client *c);

/*
 * Whether the reply to a request sent with If-Match carries another ETag
 * (a server that ignores If-Match, as s3rver 3 does, answers 200/206 with
 * the new version): readable from the headers on, so a sink can refuse
 * the body before any byte of it is kept.  got receives the reply's ETag,
 * *want (may be NULL) the one asked for.  Every request judged by the
 * client gets this check; a 2xx that fails it counts as a 412 (ESTALE).
 */
bool s3_reply_etag_differs(const http_xfer *x, char *got, size_t got_sz,
			   const char **want);

/*
 * Server deviations learned at run time, kept per client (thread-safe).
 * S3_QUIRK_COPY_SOURCE_DECODED_TWICE: UploadPartCopy percent-decodes
 * x-amz-copy-source twice (Ceph 16), so keys with '%' need it encoded twice.
 * S3_QUIRK_FLAT_LISTING: delimiter listings drop the common prefixes of
 * keys two or more levels down (s3rver 3); s3_list_all then lists without
 * the delimiter and folds the pages on the client (s3/listfold.h).
 * S3_QUIRK_LISTING_UNSURE: not known yet whether it does (a mount that may
 * not write, before the bucket held a key two levels down): s3_list_all
 * lists flat as well, and the first listing that meets such a key checks
 * one delimiter page for its prefix and settles it (s3_client_listing).
 * S3_QUIRK_NO_ABORT_MPU: AbortMultipartUpload is not implemented (s3rver 3
 * answers 405 MethodNotAllowed); s3_mpu_abort then sends nothing more and
 * fails with EOPNOTSUPP.
 * s3_client_add_quirks and _drop_quirks return the quirks set before (to
 * say a thing once).
 */
#define S3_QUIRK_COPY_SOURCE_DECODED_TWICE 0x1u
#define S3_QUIRK_FLAT_LISTING 0x2u
#define S3_QUIRK_NO_ABORT_MPU 0x4u
#define S3_QUIRK_LISTING_UNSURE 0x8u
unsigned s3_client_quirks(const s3_client *c);
unsigned s3_client_add_quirks(s3_client *c, unsigned quirks);
unsigned s3_client_drop_quirks(s3_client *c, unsigned quirks);

#endif
