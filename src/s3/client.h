/*
 * s3client: S3 requests over the http loop: addressing, signing, retries,
 * error reporting.
 *
 * Each call builds the URL (path-style or virtual-host), signs with SigV4
 * (fresh timestamp and credentials per attempt), performs the request on
 * the shared loop and retries transient failures with backoff and jitter
 * (retry.h).  Failures are reported in an s3_err carrying the S3 <Code>, the
 * HTTP status, a human message and the errno a filesystem call should
 * return.  Messages name the operation and key, never credentials.
 */
#ifndef CKPTFS_S3_CLIENT_H
#define CKPTFS_S3_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "http/loop.h"
#include "s3/config.h"
#include "s3/retry.h"
#include "s3/xml.h"

typedef struct s3_client s3_client;

typedef struct s3_err {
	int err;          /* errno for the filesystem: ENOENT, EACCES, EIO... */
	long http_status; /* 0 when there was no response */
	int curl_code;
	char code[64];    /* S3 error code, "" when none */
	char msg[512];
} s3_err;

typedef struct s3_client_opts {
	retry_policy retry;
	long timeout_ms;      /* per attempt, data requests */
	long meta_timeout_ms; /* per attempt, HEAD/LIST */
} s3_client_opts;

s3_client *s3_client_new(const s3_settings *s, creds_chain *creds,
			 http_loop *loop, const s3_client_opts *o);
void s3_client_free(s3_client *c);

/* One page of ListObjectsV2 (encoding-type=url).  token may be NULL. */
int s3_list_page(s3_client *c, const char *prefix, const char *delimiter,
		 const char *token, unsigned max_keys, s3_list_result *out,
		 s3_err *e);

typedef struct s3_head_result {
	uint64_t size;
	char etag[128];
	struct timespec mtime;
} s3_head_result;

int s3_head(s3_client *c, const char *key, s3_head_result *out, s3_err *e);

/*
 * Reads [off, off+len) of key into dst.  if_match: the ETag the reader
 * pinned (NULL for any version); a changed object fails with err=ESTALE.
 * *got receives the number of bytes stored (short only at end of object).
 */
int s3_get_range(s3_client *c, const char *key, uint64_t off, size_t len,
		 const char *if_match, void *dst, size_t *got, s3_err *e);

/*
 * Checks that the bucket exists and the credentials work by listing one key
 * under the prefix.  Used at mount time: fewer retries so a dead endpoint is
 * reported within seconds.
 */
int s3_check_access(s3_client *c, const char *prefix, s3_err *e);

const s3_settings *s3_client_settings(const s3_client *c);
http_loop *s3_client_loop(const s3_client *c);

/*
 * Building blocks for engines that keep many transfers in flight on the
 * loop (cache downloads).  s3_prepare_get signs a ranged GET into x (url,
 * headers, method, timeout); the caller sets sink/done and submits.  After
 * completion s3_classify returns 0 for success, or -1 with *e filled and
 * *retry_after_ms set to the delay before another attempt, or -1 when the
 * retry policy gives up after `attempt` attempts (then *retry is false).
 */
int s3_prepare_get(s3_client *c, const char *key, uint64_t off, size_t len,
		   const char *if_match, http_xfer *x, s3_err *e);
int s3_classify(s3_client *c, const char *key, const http_xfer *x,
		unsigned attempt, s3_err *e, bool *retry,
		unsigned *retry_after_ms);

#endif
