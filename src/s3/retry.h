/*
 * retry: which failed S3 requests to try again, and how long to wait.
 *
 * Retryable: transport failures (timeouts, connection refused/reset,
 * truncated replies), HTTP 5xx, 429, and S3 throttling codes (SlowDown,
 * RequestTimeout, InternalError, ...).  Everything else, notably 4xx
 * such as 403 and 404, fails at once.  Delays grow exponentially with "full
 * jitter": uniform in [0, min(max_ms, base_ms * 2^(attempt-1))].
 */
#ifndef CKPTFS_S3_RETRY_H
#define CKPTFS_S3_RETRY_H

#include <stdbool.h>
#include <stdint.h>

typedef struct retry_policy {
	unsigned max_attempts; /* total attempts including the first, >= 1 */
	unsigned base_ms;
	unsigned max_ms;
} retry_policy;

#define RETRY_POLICY_DEFAULT {6, 100, 5000}

/*
 * A host name that does not resolve is usually a misspelt endpoint, not a
 * passing DNS hiccup: CURLE_COULDNT_RESOLVE_HOST/PROXY get at most this
 * many attempts in all (one retry), whatever max_attempts says.
 */
#define RETRY_RESOLVE_MAX_ATTEMPTS 2

/*
 * attempt: number of attempts already made (1 after the first failure).
 * curl_code: CURLcode of the transfer (0 = the HTTP exchange completed).
 * http_status: 0 when no response.  s3_code: the <Code> of an error body or
 * NULL.  Returns true when another attempt should be made.
 */
bool retry_should(const retry_policy *p, unsigned attempt, int curl_code,
		  long http_status, const char *s3_code);

/*
 * True when the failure class is retryable at all, ignoring attempts.  A
 * transfer curl failed (curl_code != 0) is judged by its CURLcode alone: an
 * abort of our own (deadline, write callback) is final even if a status
 * arrived.  Otherwise the request is retried when either the status (408,
 * 429, 500, 502, 503, 504) or the S3 code (SlowDown, RequestTimeout,
 * InternalError, ServiceUnavailable, throttling codes) says so, so a 400
 * RequestTimeout and a 200 reply with an <Error> of InternalError both
 * retry.  RequestTimeTooSkewed, ExpiredToken and BadDigest do not: the
 * same request would fail the same way.
 */
bool retry_is_transient(int curl_code, long http_status, const char *s3_code);

/* Delay before attempt+1; *rng is a caller-owned xorshift state (nonzero). */
unsigned retry_delay_ms(const retry_policy *p, unsigned attempt, uint64_t *rng);

/* The upper bound of retry_delay_ms: min(max_ms, base_ms * 2^(attempt-1)),
 * computed without overflow for any attempt (0 counts as 1). */
unsigned retry_cap_ms(const retry_policy *p, unsigned attempt);

/* Advances a xorshift64 state; a zero state is replaced by a fixed seed. */
uint64_t retry_rng_next(uint64_t *state);

/* Turns any 64-bit value (time, address, pid) into a good nonzero state. */
uint64_t retry_rng_seed(uint64_t entropy);

#endif
