/*
 * retry: classification of failed S3 requests and backoff delays.
 *
 * Design.  Classification is a pure function of what the client saw: the
 * CURLcode, the HTTP status and the S3 <Code> (retry.h states the rules).
 * Each of the three has its own small table here, so adding a code is one
 * line.  Only failures where the same request can succeed later are
 * transient: overload, throttling, server faults, broken connections.
 * Anything the server rejected for what we sent (signature, permissions,
 * missing key, failed precondition, bad range) is final.
 *
 * Name resolution is a special case.  A resolver hiccup is transient, a
 * misspelt endpoint is not, and they look the same; resolution failures
 * therefore retry once (RETRY_RESOLVE_MAX_ATTEMPTS) so a wrong --endpoint
 * fails within about base_ms instead of the whole backoff schedule.
 *
 * Backoff is exponential with "full jitter" (AWS architecture blog,
 * "Exponential Backoff And Jitter"): uniform in [0, cap] where
 * cap = min(max_ms, base_ms * 2^(attempt-1)).  Clients that fail together
 * thereby spread out instead of retrying in lockstep.  The cap is computed
 * in 64 bits with the shift bounded, so any attempt number is safe.
 * Randomness is a caller-owned xorshift64 state: no global state, no
 * locking here, reproducible in tests.  Reducing a 64-bit draw modulo
 * cap+1 (at most 2^32) has a bias below 2^-32, irrelevant for sleeping.
 */
#include "s3/retry.h"

#include <curl/curl.h>
#include <stddef.h>
#include <string.h>

static const retry_policy retry_default = RETRY_POLICY_DEFAULT;

/* Transport failures after which the same request may well succeed. */
static bool retry_curl_transient(int code)
{
	switch (code) {
	case CURLE_OPERATION_TIMEDOUT: /* includes our per-attempt timeout */
	case CURLE_COULDNT_CONNECT:    /* refused: server restarting */
	case CURLE_RECV_ERROR:	       /* connection reset while reading */
	case CURLE_SEND_ERROR:	       /* connection reset while writing */
	case CURLE_GOT_NOTHING:	       /* reused connection closed by peer */
	case CURLE_PARTIAL_FILE:       /* body shorter than Content-Length */
	case CURLE_SSL_CONNECT_ERROR:  /* handshake cut off */
	case CURLE_HTTP2:	       /* connection-level HTTP/2 failure */
	case CURLE_HTTP2_STREAM:       /* stream reset, GOAWAY */
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return true;
	default:
		return false;
	}
}

static bool retry_curl_is_resolve(int code)
{
	return code == CURLE_COULDNT_RESOLVE_HOST ||
	       code == CURLE_COULDNT_RESOLVE_PROXY;
}

static bool retry_status_transient(long status)
{
	switch (status) {
	case 408: /* Request Timeout */
	case 429: /* Too Many Requests */
	case 500: /* Internal Server Error */
	case 502: /* Bad Gateway (proxies, load balancers) */
	case 503: /* Service Unavailable, S3 SlowDown */
	case 504: /* Gateway Timeout */
		return true;
	default:
		return false;
	}
}

/* S3 and AWS error codes meaning "not now", whatever the status. */
static const char *const retry_codes[] = {
    "SlowDown",
    "RequestTimeout",
    "InternalError",
    "ServiceUnavailable",
    "Throttling",
    "ThrottlingException",
    "RequestThrottled",
    "TooManyRequestsException",
    "RequestLimitExceeded",
    "BandwidthLimitExceeded",
};

static bool retry_code_transient(const char *code)
{
	if (!code)
		return false;
	for (size_t i = 0; i < sizeof retry_codes / sizeof *retry_codes; i++)
		if (strcmp(code, retry_codes[i]) == 0)
			return true;
	return false;
}

bool retry_is_transient(int curl_code, long http_status, const char *s3_code)
{
	if (curl_code != CURLE_OK)
		return retry_curl_transient(curl_code);
	return retry_status_transient(http_status) ||
	       retry_code_transient(s3_code);
}

bool retry_should(const retry_policy *p, unsigned attempt, int curl_code,
		  long http_status, const char *s3_code)
{
	if (!p)
		p = &retry_default;
	unsigned max = p->max_attempts ? p->max_attempts : 1;
	if (attempt >= max)
		return false;
	if (!retry_is_transient(curl_code, http_status, s3_code))
		return false;
	if (retry_curl_is_resolve(curl_code) &&
	    attempt >= RETRY_RESOLVE_MAX_ATTEMPTS)
		return false;
	return true;
}

unsigned retry_cap_ms(const retry_policy *p, unsigned attempt)
{
	if (!p)
		p = &retry_default;
	unsigned shift = attempt > 1 ? attempt - 1 : 0;
	if (p->base_ms == 0)
		return 0;
	/* base_ms < 2^32 and shift < 32 keep the product below 2^64; from
	 * shift 32 on, any nonzero base exceeds every unsigned max_ms. */
	if (shift < 32 && ((uint64_t)p->base_ms << shift) < p->max_ms)
		return (unsigned)((uint64_t)p->base_ms << shift);
	return p->max_ms;
}

uint64_t retry_rng_next(uint64_t *state)
{
	uint64_t x = *state ? *state : 0x9E3779B97F4A7C15ULL;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*state = x;
	return x;
}

uint64_t retry_rng_seed(uint64_t entropy)
{
	/* splitmix64 finaliser: nearby inputs give unrelated states. */
	uint64_t z = entropy + 0x9E3779B97F4A7C15ULL;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	z ^= z >> 31;
	return z ? z : 0x9E3779B97F4A7C15ULL;
}

unsigned retry_delay_ms(const retry_policy *p, unsigned attempt, uint64_t *rng)
{
	uint64_t cap = retry_cap_ms(p, attempt); /* 64 bits: cap + 1 fits */
	if (cap == 0)
		return 0;
	return (unsigned)(retry_rng_next(rng) % (cap + 1));
}
