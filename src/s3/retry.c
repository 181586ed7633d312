/*
 * retry: classification of failed S3 requests, backoff delays, per-attempt
 * deadlines and budgets (retry.h states the rules and the defaults).
 *
 * Design.  Classification is a pure function of what the client saw: the
 * CURLcode, the HTTP status and the S3 <Code>.  Each of the three has its
 * own small table here, so adding a code is one line.  Only failures where
 * the same request can succeed later are retried: overload, throttling,
 * server faults, broken or silent connections.  Anything the server
 * rejected for what we sent (signature, permissions, missing key, failed
 * precondition, bad range) is final.
 *
 * Throttling is told apart from other transient failures because the right
 * reaction differs: a dropped connection is best retried at once on a new
 * one (100 ms base), a server shedding load wants fewer requests (500 ms
 * base, as the AWS SDKs do) but will serve them eventually, so attempts
 * are not counted against it, only time.
 *
 * Name resolution is a special case.  A resolver hiccup is transient, a
 * misspelt endpoint is not, and they look the same; resolution failures
 * therefore retry once (RETRY_RESOLVE_MAX_ATTEMPTS) so a wrong --endpoint
 * fails within about base_ms instead of the whole backoff schedule.
 *
 * Backoff is exponential with "full jitter" (AWS architecture blog,
 * "Exponential Backoff And Jitter"): uniform in [0, cap] where
 * cap = min(max_ms, base * 2^(attempt-1)).  Clients that fail together
 * thereby spread out instead of retrying in lockstep.  The cap is computed
 * in 64 bits with the shift bounded, so any attempt number is safe.
 * Randomness is a caller-owned xorshift64 state: no global state, no
 * locking here, reproducible in tests.  Reducing a 64-bit draw modulo
 * cap+1 (at most 2^32) has a bias below 2^-32, irrelevant for sleeping.
 *
 * Deadlines.  Per-attempt wall-clock timeouts (the old 30 s for metadata,
 * 120 s for data) make a stalled connection cost minutes; a deadline on
 * silence does not: a healthy server answers within milliseconds and a
 * healthy transfer moves bytes every second, so 5 s of silence means the
 * connection is dead (the AWS CRT waits 30 s below 1 byte/s, s3fs 120 s,
 * rclone 5 minutes: those are for links, ours is for servers that accept a
 * request and never answer it).  Doubling the deadline on each retry keeps
 * a server that is merely slow from being cut off forever, and the p99 of
 * recent first-byte times raises it when the server is slow for everyone
 * (gcsfuse adapts its read-stall deadline to the p99 the same way).
 */
#include "s3/retry.h"

#include <curl/curl.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const retry_policy retry_builtin = RETRY_POLICY_DEFAULT;
static retry_policy retry_default_policy = RETRY_POLICY_DEFAULT;

retry_policy retry_policy_default(void)
{
	return retry_default_policy;
}

void retry_policy_set_default(const retry_policy *p)
{
	retry_default_policy = p ? *p : retry_builtin;
}

/* ---- classification ----------------------------------------------------- */

/* Transport failures after which the same request may well succeed. */
static bool retry_curl_transient(int code)
{
	switch (code) {
	case CURLE_OPERATION_TIMEDOUT: /* deadlines and stalls (http loop) */
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

static retry_class retry_status_class(long status)
{
	switch (status) {
	case 429: /* Too Many Requests */
	case 503: /* Service Unavailable, S3 SlowDown */
		return RETRY_THROTTLED;
	case 408: /* Request Timeout */
	case 500: /* Internal Server Error */
	case 502: /* Bad Gateway (proxies, load balancers) */
	case 504: /* Gateway Timeout */
		return RETRY_TRANSIENT;
	default:
		return RETRY_FINAL;
	}
}

/* S3 and AWS error codes meaning "not now", whatever the status. */
static const char *const retry_codes[] = {
    "RequestTimeout",
    "InternalError",
};

/* ... and those meaning "fewer requests, please". */
static const char *const retry_throttle_codes[] = {
    "SlowDown",
    "ServiceUnavailable",
    "Throttling",
    "ThrottlingException",
    "RequestThrottled",
    "TooManyRequestsException",
    "RequestLimitExceeded",
    "BandwidthLimitExceeded",
    /* not a server's: s3/request.c's for "the credential refresh is still
     * waiting on its provider"; a wait that, like throttling, uses up the
     * request's budget, not its attempts */
    "CredentialsRefreshing",
};

static bool in_table(const char *code, const char *const *t, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(code, t[i]) == 0)
			return true;
	return false;
}

static retry_class retry_code_class(const char *code)
{
	if (!code)
		return RETRY_FINAL;
	if (in_table(code, retry_throttle_codes,
		     sizeof retry_throttle_codes / sizeof *retry_throttle_codes))
		return RETRY_THROTTLED;
	if (in_table(code, retry_codes, sizeof retry_codes / sizeof *retry_codes))
		return RETRY_TRANSIENT;
	return RETRY_FINAL;
}

retry_class retry_classify(int curl_code, long http_status, const char *s3_code)
{
	if (curl_code != CURLE_OK)
		return retry_curl_transient(curl_code) ? RETRY_TRANSIENT
						       : RETRY_FINAL;
	retry_class a = retry_status_class(http_status);
	retry_class b = retry_code_class(s3_code);
	/* the stronger signal wins: throttling over transient over final */
	return a > b ? a : b;
}

bool retry_is_transient(int curl_code, long http_status, const char *s3_code)
{
	return retry_classify(curl_code, http_status, s3_code) != RETRY_FINAL;
}

retry_class retry_classify_err(int err, int curl_code, long http_status,
			       const char *s3_code)
{
	if (curl_code || http_status)
		return retry_classify(curl_code, http_status, s3_code);
	switch (err) {
	case EINVAL:       /* bad metadata, a malformed request */
	case ENAMETOOLONG: /* a key S3 cannot take */
	case EFBIG:        /* an object over 5 TiB */
	case ENODATA:      /* a source shorter than announced */
		return RETRY_FINAL;
	default:
		return RETRY_TRANSIENT; /* no credentials yet, local I/O */
	}
}

/* ---- attempts and backoff ----------------------------------------------- */

static const retry_policy *pol(const retry_policy *p)
{
	return p ? p : &retry_builtin;
}

bool retry_again(const retry_policy *p, unsigned attempt, uint64_t elapsed_ms,
		 uint64_t budget_ms, retry_class cls, int curl_code,
		 unsigned delay_ms)
{
	p = pol(p);
	unsigned max = p->max_attempts ? p->max_attempts : 1;
	if (cls == RETRY_FINAL)
		return false;
	if (retry_curl_is_resolve(curl_code) &&
	    attempt >= RETRY_RESOLVE_MAX_ATTEMPTS)
		return false;
	if (attempt >= RETRY_THROTTLED_MAX_ATTEMPTS)
		return false;
	if (attempt >= max && (cls != RETRY_THROTTLED || !budget_ms))
		return false;
	if (budget_ms &&
	    elapsed_ms + delay_ms + RETRY_MIN_ATTEMPT_MS > budget_ms)
		return false;
	return true;
}

bool retry_should(const retry_policy *p, unsigned attempt, int curl_code,
		  long http_status, const char *s3_code)
{
	return retry_again(p, attempt, 0, 0,
			   retry_classify(curl_code, http_status, s3_code),
			   curl_code, 0);
}

/* min(max, base * 2^(attempt-1)) without overflow. */
static unsigned cap_of(unsigned base, unsigned max, unsigned attempt)
{
	unsigned shift = attempt > 1 ? attempt - 1 : 0;
	if (base == 0)
		return 0;
	/* base < 2^32 and shift < 32 keep the product below 2^64; from
	 * shift 32 on, any nonzero base exceeds every unsigned max. */
	if (shift < 32 && ((uint64_t)base << shift) < max)
		return (unsigned)((uint64_t)base << shift);
	return max;
}

unsigned retry_cap_ms(const retry_policy *p, unsigned attempt)
{
	p = pol(p);
	return cap_of(p->base_ms, p->max_ms, attempt);
}

unsigned retry_class_cap_ms(const retry_policy *p, unsigned attempt,
			    retry_class cls)
{
	p = pol(p);
	unsigned base = cls == RETRY_THROTTLED && p->throttle_base_ms
			    ? p->throttle_base_ms
			    : p->base_ms;
	return cap_of(base, p->max_ms, attempt);
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

unsigned retry_backoff_ms(const retry_policy *p, unsigned attempt,
			  retry_class cls, uint64_t *rng)
{
	uint64_t cap = retry_class_cap_ms(p, attempt, cls); /* cap + 1 fits */
	if (cap == 0)
		return 0;
	return (unsigned)(retry_rng_next(rng) % (cap + 1));
}

unsigned retry_delay_ms(const retry_policy *p, unsigned attempt, uint64_t *rng)
{
	return retry_backoff_ms(p, attempt, RETRY_TRANSIENT, rng);
}

/* ---- deadlines ------------------------------------------------------------ */

/* first * 2^(attempt-1), at most max(limit, first); limit 0: no growth. */
static unsigned escalate(unsigned first, unsigned attempt, unsigned limit)
{
	if (!limit || limit < first)
		return first;
	return cap_of(first, limit, attempt);
}

static unsigned umax(unsigned a, unsigned b)
{
	return a > b ? a : b;
}

static unsigned clip(unsigned v, uint64_t left)
{
	return left && v > left ? (unsigned)left : v;
}

retry_deadlines retry_attempt_deadlines(const retry_policy *p,
					unsigned attempt, unsigned wait_ms,
					unsigned typical_ms, uint64_t left_ms)
{
	p = pol(p);
	retry_deadlines d = {0};
	unsigned top = p->deadline_max_ms;
	if (p->first_byte_ms) {
		unsigned fb;
		if (wait_ms) {
			fb = umax(p->first_byte_ms, wait_ms);
		} else {
			uint64_t adapt = (uint64_t)typical_ms * 4;
			if (top && adapt > top)
				adapt = top;
			fb = umax(p->first_byte_ms, (unsigned)adapt);
		}
		d.first_byte_ms = clip(escalate(fb, attempt, top), left_ms);
	}
	if (p->low_speed_ms) {
		unsigned ls = umax(p->low_speed_ms, wait_ms);
		d.low_speed_ms = clip(escalate(ls, attempt, top), left_ms);
		d.low_speed_bytes = p->low_speed_bytes ? p->low_speed_bytes : 1;
	}
	d.connect_ms = clip(p->connect_ms, left_ms);
	if (!d.connect_ms && left_ms && left_ms < 5000)
		d.connect_ms = (unsigned)left_ms;
	return d;
}

uint64_t retry_request_budget_ms(const retry_policy *p, unsigned wait_ms)
{
	p = pol(p);
	if (!p->budget_ms)
		return 0;
	uint64_t w = (uint64_t)wait_ms * 3;
	return w > p->budget_ms ? w : p->budget_ms;
}

unsigned retry_server_wait_ms(const retry_policy *p, uint64_t items,
			      uint64_t bytes)
{
	p = pol(p);
	const uint64_t hour = 3600ull * 1000;
	/* the server works before it answers: never less than the 5 s the
	 * first-byte deadline had before it came down to 2 s */
	uint64_t w = p->first_byte_ms > RETRY_SERVER_WAIT_MIN_MS
			     ? p->first_byte_ms
			     : RETRY_SERVER_WAIT_MIN_MS;
	w += (items < hour ? items : hour) * 20;
	w += bytes / (32ull << 20) * 1000;
	return (unsigned)(w < hour ? w : hour);
}

/* ---- recent first-byte times ---------------------------------------------- */

static int cmp_unsigned(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
	return x < y ? -1 : x > y;
}

void retry_lat_add(retry_lat *l, unsigned ms)
{
	l->v[l->next] = ms;
	l->next = (l->next + 1) % RETRY_LAT_N;
	if (l->n < RETRY_LAT_N)
		l->n++;
	l->stale = true;
}

unsigned retry_lat_p99(retry_lat *l)
{
	if (l->n < RETRY_LAT_MIN)
		return 0;
	if (l->stale) {
		/* a sort of at most 128 values per request: a microsecond or
		 * two, next to a network round trip */
		unsigned tmp[RETRY_LAT_N];
		memcpy(tmp, l->v, l->n * sizeof *tmp);
		qsort(tmp, l->n, sizeof *tmp, cmp_unsigned);
		/* nearest rank: the smallest value with 99% at or below it */
		size_t rank = ((size_t)l->n * 99 + 99) / 100;
		l->p99 = tmp[rank - 1];
		l->stale = false;
	}
	return l->p99;
}
