/*
 * s3/client.c: the S3 client and its operations (listings, HEAD, ranged
 * GET, the access check at mount), with s3/request.h (included: s3_err,
 * s3_request, the retry loop under every operation, the quirks).
 *
 * Each call builds the URL (path-style or virtual-host), signs with SigV4
 * (fresh timestamp and credentials per attempt), performs the request on
 * the shared loop with the policy's deadlines (a silent connection is
 * abandoned after first_byte_ms/low_speed_ms) and retries transient
 * failures with backoff and jitter, on a fresh connection after a
 * transport failure, within the policy's attempts and time budget
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
#include "s3/request.h"
#include "s3/retry.h"
#include "s3/xml.h"

s3_client *s3_client_new(const s3_settings *s, creds_chain *creds,
			 http_loop *loop, const s3_client_opts *o);
void s3_client_free(s3_client *c);

/* One page of ListObjectsV2 (encoding-type=url).  token may be NULL. */
int s3_list_page(s3_client *c, const char *prefix, const char *delimiter,
		 const char *token, unsigned max_keys, s3_list_result *out,
		 s3_err *e);
/* s3_list_page within the bounds of lim (its timeout_ms, max_attempts
 * and budget_ms; nothing else of it is used), for a caller whose
 * requests must not hold it up long (the listing probe at mount). */
int s3_list_page_bounded(s3_client *c, const struct s3_request *lim,
			 const char *prefix, const char *delimiter,
			 const char *token, unsigned max_keys,
			 s3_list_result *out, s3_err *e);

/*
 * Every page of a listing, in order, through fn (the one paging loop of
 * the tree).  With S3_QUIRK_FLAT_LISTING and a delimiter, the pages come
 * from a listing without one, folded into what the delimiter would have
 * given (more requests on deep trees, same entries).  fn returns 0 to go on, 1 to stop early (s3_list_all then
 * returns 0), or -errno (an ENOMEM is reported in e as "LIST prefix: out
 * of memory", any other errno as "LIST prefix: <strerror>").  Returns 0 or
 * -1 with e filled.
 */
typedef int (*s3_page_fn)(void *arg, const char *prefix,
			  const s3_list_result *page);
int s3_list_all(s3_client *c, const char *prefix, const char *delimiter,
		s3_page_fn fn, void *arg, s3_err *e);

typedef struct s3_head_result {
	uint64_t size;
	char etag[128];
	struct timespec mtime;
} s3_head_result;

int s3_head(s3_client *c, const char *key, s3_head_result *out, s3_err *e);

/* A user metadata pair: name without the "x-amz-meta-" prefix. */
typedef struct s3_meta {
	const char *name;
	const char *value;
} s3_meta;

typedef struct s3_head_ext_result {
	uint64_t size;
	char etag[128];
	struct timespec mtime;
	char content_type[256]; /* "" when the reply had none */
	/* x-amz-meta-* headers of the reply in order, names lower-cased and
	 * without the prefix; the strings live in meta_store */
	s3_meta *meta;
	size_t n_meta;
	char *meta_store;
} s3_head_ext_result;

/* HEAD that also returns Content-Type and the user metadata.  Free *out with
 * s3_head_ext_result_free (also after a failure: it is zeroed then). */
int s3_head_ext(s3_client *c, const char *key, s3_head_ext_result *out,
		s3_err *e);
void s3_head_ext_result_free(s3_head_ext_result *r);

/* What a failed access check most likely means, for the user ("the bucket
 * does not exist", "the credentials were refused...", "the endpoint cannot
 * be reached"), or "" when nothing more can be said. */
const char *s3_access_hint(const s3_err *e);
/* The value of metadata `name` (lower case, no prefix), or NULL. */
const char *s3_head_ext_meta(const s3_head_ext_result *r, const char *name);

/*
 * Reads [off, off+len) of key into dst.  if_match: the ETag the reader
 * pinned (NULL for any version); a changed object fails with err=ESTALE.
 * *got receives the number of bytes stored (short only at end of object).
 */
int s3_get_range(s3_client *c, const char *key, uint64_t off, size_t len,
		 const char *if_match, void *dst, size_t *got, s3_err *e);

/*
 * Reads the whole of key, at most max bytes (more fails with err=EFBIG),
 * into *body (malloc'd, NUL after its *len bytes).  if_match as above.
 * h (may be NULL) receives the version read: its size, ETag and
 * LastModified.  For small objects read whole (manifests, markers): a
 * read of the listed size would cut one rewritten longer since.
 */
int s3_get_object(s3_client *c, const char *key, size_t max,
		  const char *if_match, char **body, size_t *len,
		  s3_head_result *h, s3_err *e);

/*
 * Checks that the bucket exists and the credentials work by listing one key
 * under the prefix.  Used at mount time: fewer retries so a dead endpoint is
 * reported within seconds.
 */
int s3_check_access(s3_client *c, const char *prefix, s3_err *e);

/*
 * What a command needs to work on the bucket of s (resolved settings): the
 * credential chain for s->profile, asked once now so that missing keys fail
 * here rather than at the first request; an HTTP loop (s->ca_bundle;
 * insecure: no TLS verification); a client with retry policy `retry` (the
 * mount options; NULL: RETRY_POLICY_DEFAULT); and a passed
 * s3_check_access of s->prefix.  Used by mount and gc.
 * Returns 0 with *creds, *loop and *client set (the caller frees them:
 * s3_client_free, http_loop_free, creds_chain_free).  Otherwise nothing is
 * left allocated and the three are NULL: -1 with *err, a message to free
 * (NULL when out of memory), when the credentials or the client could not
 * be had; -2 with *e when the access check failed (see s3_access_hint).
 */
int s3_connect(const s3_settings *s, bool insecure, const retry_policy *retry,
	       creds_chain **creds, http_loop **loop, s3_client **client,
	       char **err, s3_err *e);

const s3_settings *s3_client_settings(const s3_client *c);
http_loop *s3_client_loop(const s3_client *c);
/* The credential chain that signs c's requests (for its status). */
creds_chain *s3_client_creds(const s3_client *c);

/*
 * Building blocks for engines that keep many transfers in flight on the
 * loop (cache downloads).  s3_prepare_get signs a ranged GET into x (url,
 * headers, method, deadlines); the caller sets sink/done and submits.
 * After completion s3_classify returns 0 for success, or -1 with *e filled
 * and *retry_after_ms set to the delay before another attempt, or -1 when
 * the retry policy gives up after `attempt` attempts (then *retry is
 * false).  Attempts are tracked in x (http_xfer.attempt, first_t): preparing
 * an x prepared before counts as its next attempt (doubled deadlines, a
 * fresh connection after a transport failure); a caller that uses a new x
 * for a retry sets attempt, first_t and fresh_connect itself first.
 */
int s3_prepare_get(s3_client *c, const char *key, uint64_t off, size_t len,
		   const char *if_match, http_xfer *x, s3_err *e);
int s3_classify(s3_client *c, const char *key, const http_xfer *x,
		unsigned attempt, s3_err *e, bool *retry,
		unsigned *retry_after_ms);

/* The listing mode settled: defect true sets S3_QUIRK_FLAT_LISTING and
 * warns (once), false keeps the delimiter; either ends LISTING_UNSURE. */
void s3_client_listing(s3_client *c, bool defect);

#endif
