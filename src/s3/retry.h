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
 * attempt: number of attempts already made (1 after the first failure).
 * curl_code: CURLcode of the transfer (0 = the HTTP exchange completed).
 * http_status: 0 when no response.  s3_code: the <Code> of an error body or
 * NULL.  Returns true when another attempt should be made.
 */
bool retry_should(const retry_policy *p, unsigned attempt, int curl_code,
		  long http_status, const char *s3_code);

/* True when the failure class is retryable at all, ignoring attempts. */
bool retry_is_transient(int curl_code, long http_status, const char *s3_code);

/* Delay before attempt+1; *rng is a caller-owned xorshift state (nonzero). */
unsigned retry_delay_ms(const retry_policy *p, unsigned attempt, uint64_t *rng);

#endif
