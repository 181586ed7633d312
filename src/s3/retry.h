/*
 * retry: the one policy for failed S3 requests.  Every path that talks to
 * S3 uses it: the client's request loop (s3/request.c), the cache's range
 * downloads (cache/fetch.c), the commit engine's upload jobs and its
 * visibility step (commit/transfer.c, commit/visible.c).  It says
 *
 *   - which failures are worth another attempt (classification),
 *   - how long to pause before it (backoff),
 *   - how long an attempt may go without hearing from the server before it
 *     is abandoned (deadlines), and
 *   - when a request gives up (attempts and a time budget).
 *
 * Classification.  Transient: transport failures (timeouts and stalls,
 * connection refused/reset, truncated replies), HTTP 500/502/504/408 and
 * codes such as InternalError and RequestTimeout.  Throttled: HTTP 503 and
 * 429 and the throttling codes (SlowDown, Throttling...): the server asks
 * us to slow down, so the backoff starts higher and the attempt limit does
 * not apply, only the time budget.  Everything else is final, notably 4xx
 * such as 403 and 404: the same request would fail the same way.
 *
 * Backoff: "full jitter", uniform in [0, min(max_ms, base * 2^(attempt-1))]
 * with base = base_ms (100 ms) after a transient failure and
 * throttle_base_ms (500 ms) after a throttling reply; max_ms is the
 * retry_max_delay mount option (5 s).
 *
 * Deadlines (enforced by the http loop, http/loop.h).  Connecting may take
 * connect_ms (5 s).  Once the request is sent, the first byte of the reply
 * must come within first_byte_ms (2 s; the first_byte_timeout option) or
 * four times the p99 of recent replies' first-byte times, whichever is
 * larger (a server that is slow for everyone is not cut off).  2 s, not
 * more: a stall costs the whole deadline, and measured by
 * bench/fault-bench.py (2% of requests stalled) 5 s made the sequence
 * 2.8-3.1x a clean link, 2 s 1.9x; healthy replies come in milliseconds
 * and a false alarm costs one retry with a doubled deadline.  While a body
 * moves either way, fewer than low_speed_bytes per second (1) over
 * low_speed_ms (5 s) abandon the attempt (the low_speed_limit and
 * low_speed_time options).  A silent connection is thus given up after
 * 2 to 5 s and the request retried on a fresh connection.  Each further
 * attempt of the same request doubles both deadlines (up to
 * deadline_max_ms, 120 s), so a server that needs longer still gets an
 * answer through.  Requests where the server works before it answers
 * (CompleteMultipartUpload, copies, DeleteObjects) bring their own
 * first-byte allowance (retry_server_wait_ms).
 *
 * Giving up.  A request is bounded: it is tried at most max_attempts
 * times (6; throttling replies do not count), and no attempt starts that
 * could not run for a second before budget_ms (60 s; the retry_timeout
 * option) has passed since the first began; each attempt's deadlines are
 * clipped to what is left of the budget.  So a reader gets EIO within
 * budget_ms when the server does not answer at all, and within about three
 * seconds when it refuses connections.  The commit engine retries the
 * failed request again, forever, after retry_backoff_ms (at most max_ms):
 * a commit must eventually land.
 */
#ifndef CKPTFS_S3_RETRY_H
#define CKPTFS_S3_RETRY_H

#include <stdbool.h>
#include <stdint.h>

typedef enum retry_class {
	RETRY_FINAL = 0, /* the same request would fail the same way */
	RETRY_TRANSIENT, /* a broken or silent connection, a server fault */
	RETRY_THROTTLED, /* 503, 429, SlowDown: the server asks for less */
} retry_class;

/* Zero fields mean "none" (deadlines, budget) or the documented fallback. */
typedef struct retry_policy {
	unsigned max_attempts;     /* attempts in all, >= 1 (0 counts as 1) */
	unsigned base_ms;          /* backoff cap of the first retry */
	unsigned max_ms;           /* largest backoff: retry_max_delay */
	unsigned throttle_base_ms; /* base after a throttling reply; 0: base_ms */
	unsigned budget_ms;        /* retry_timeout; 0: attempts alone bound */
	unsigned first_byte_ms;    /* first_byte_timeout; 0: no such deadline */
	unsigned low_speed_ms;     /* low_speed_time; 0: no low-speed rule */
	unsigned low_speed_bytes;  /* low_speed_limit, bytes/s; 0 counts as 1 */
	unsigned connect_ms;       /* connection set-up; 0: the loop's */
	unsigned deadline_max_ms;  /* doubling stops here; 0: no doubling */
} retry_policy;

#define RETRY_POLICY_DEFAULT {6, 100, 5000, 500, 60000, 2000, 5000, 1, 5000, 120000}

/*
 * A host name that does not resolve is usually a misspelt endpoint, not a
 * passing DNS hiccup: CURLE_COULDNT_RESOLVE_HOST/PROXY get at most this
 * many attempts in all (one retry), whatever max_attempts says.
 */
#define RETRY_RESOLVE_MAX_ATTEMPTS 2

/* No attempt starts with less than this left of the budget. */
#define RETRY_MIN_ATTEMPT_MS 1000

/* Throttling replies do not count against max_attempts, but no request
 * makes more attempts than this in all. */
#define RETRY_THROTTLED_MAX_ATTEMPTS 100

/*
 * The class of a failed exchange.  curl_code: CURLcode of the transfer (0 =
 * the HTTP exchange completed); http_status: 0 when no response; s3_code:
 * the <Code> of an error body or NULL.  A transfer curl failed is judged by
 * its CURLcode alone: an abort of our own (write callback, a source that
 * cannot be read) is final even if a status arrived; timeouts, including
 * the http loop's stall deadlines (CURLE_OPERATION_TIMEDOUT), are
 * transient.  Otherwise a status of 503 or 429 or a throttling code makes
 * it RETRY_THROTTLED, and a status of 408, 500, 502 or 504 or a code such
 * as InternalError or RequestTimeout RETRY_TRANSIENT; so a 400
 * RequestTimeout and a 200 reply with an <Error> of InternalError both
 * retry.  RequestTimeTooSkewed, ExpiredToken and BadDigest do not: the same
 * request would fail the same way.
 */
retry_class retry_classify(int curl_code, long http_status,
			   const char *s3_code);

/* retry_classify(...) != RETRY_FINAL. */
bool retry_is_transient(int curl_code, long http_status, const char *s3_code);

/*
 * The class of a failure as a caller saw it, local ones included (no
 * exchange took place: curl_code and http_status 0): those are transient
 * (credentials not available yet, a staging file that cannot be opened
 * now) unless err says the input itself is wrong (EINVAL, ENAMETOOLONG,
 * EFBIG, or ENODATA: a source shorter than announced).  The commit engine
 * retries what is not final forever.
 */
retry_class retry_classify_err(int err, int curl_code, long http_status,
			       const char *s3_code);

/*
 * Whether a request that failed `attempt` times (1 after the first
 * failure), the last time with class cls and CURLcode curl_code, tries
 * again after a pause of delay_ms.  elapsed_ms: since its first attempt
 * began; budget_ms: its budget (retry_request_budget_ms; 0: none).  Final
 * failures never retry; name resolution failures retry once; transient
 * ones while attempt < max_attempts; throttled ones while the budget lasts
 * (up to RETRY_THROTTLED_MAX_ATTEMPTS; without a budget, like transient
 * ones); and none when fewer than RETRY_MIN_ATTEMPT_MS of the budget would
 * be left when the next attempt starts.
 */
bool retry_again(const retry_policy *p, unsigned attempt, uint64_t elapsed_ms,
		 uint64_t budget_ms, retry_class cls, int curl_code,
		 unsigned delay_ms);

/* retry_again without a time budget: the attempt limit only. */
bool retry_should(const retry_policy *p, unsigned attempt, int curl_code,
		  long http_status, const char *s3_code);

/* The pause before attempt+1 after a failure of class cls; *rng is a
 * caller-owned xorshift state (nonzero). */
unsigned retry_backoff_ms(const retry_policy *p, unsigned attempt,
			  retry_class cls, uint64_t *rng);

/* retry_backoff_ms for a transient failure. */
unsigned retry_delay_ms(const retry_policy *p, unsigned attempt, uint64_t *rng);

/* The upper bound of retry_delay_ms: min(max_ms, base_ms * 2^(attempt-1)),
 * computed without overflow for any attempt (0 counts as 1). */
unsigned retry_cap_ms(const retry_policy *p, unsigned attempt);

/* The same for a class: throttle_base_ms as the base when throttled. */
unsigned retry_class_cap_ms(const retry_policy *p, unsigned attempt,
			    retry_class cls);

/* What the http loop enforces on one attempt (http_xfer fields). */
typedef struct retry_deadlines {
	unsigned connect_ms;      /* 0: the loop's default */
	unsigned first_byte_ms;   /* 0: none */
	unsigned low_speed_ms;    /* 0: none */
	unsigned low_speed_bytes; /* bytes/s */
} retry_deadlines;

/*
 * The deadlines of attempt `attempt` (1 for the first) of a request.
 * wait_ms: the request's own allowance for work the server does before it
 * answers (retry_server_wait_ms; 0: an ordinary request), which replaces
 * both first_byte_ms and low_speed_ms when larger.  typical_ms: the p99 of
 * recent first-byte times (retry_lat_p99; 0: unknown); an ordinary
 * request's first-byte deadline is at least four times that.  Both
 * deadlines double with each attempt up to deadline_max_ms (never below
 * the first attempt's), and are clipped to left_ms, what remains of the
 * request's budget (0: no budget).
 */
retry_deadlines retry_attempt_deadlines(const retry_policy *p,
					unsigned attempt, unsigned wait_ms,
					unsigned typical_ms, uint64_t left_ms);

/* The budget of a request with server allowance wait_ms: budget_ms, or
 * three times wait_ms when that is longer (0 when budget_ms is 0). */
uint64_t retry_request_budget_ms(const retry_policy *p, unsigned wait_ms);

/*
 * The first-byte allowance of a request that makes the server work before
 * it answers: first_byte_ms (at least RETRY_SERVER_WAIT_MIN_MS) plus 20 ms
 * per item (parts assembled by
 * CompleteMultipartUpload: the size of the object in parts; keys of a
 * DeleteObjects) and 1 s per 32 MiB copied server-side, capped at one
 * hour.  So a small one is no slower to give up on than any request, and
 * one over 10 000 parts waits 205 s (AWS sends keep-alive spaces while it
 * works, which count as progress; Ceph RGW sends nothing).
 */
#define RETRY_SERVER_WAIT_MIN_MS 5000
unsigned retry_server_wait_ms(const retry_policy *p, uint64_t items,
			      uint64_t bytes);

/*
 * Recent first-byte times, for the adaptive part of the deadline: a ring of
 * the last RETRY_LAT_N samples (ms), its p99 computed when asked after new
 * samples.  Not locked: the caller serialises access.
 */
#define RETRY_LAT_N 128
#define RETRY_LAT_MIN 20 /* samples before a p99 is reported */

typedef struct retry_lat {
	unsigned v[RETRY_LAT_N];
	unsigned n, next;
	unsigned p99;
	bool stale;
} retry_lat;

void retry_lat_add(retry_lat *l, unsigned ms);
/* The p99 (nearest rank) of the samples held, 0 with fewer than
 * RETRY_LAT_MIN. */
unsigned retry_lat_p99(retry_lat *l);

/*
 * The policy s3_connect gives its client (mount options): RETRY_POLICY_DEFAULT
 * until set.  Set it before any thread starts; it is read, not locked.
 */
retry_policy retry_policy_default(void);
void retry_policy_set_default(const retry_policy *p);

/* Advances a xorshift64 state; a zero state is replaced by a fixed seed. */
uint64_t retry_rng_next(uint64_t *state);

/* Turns any 64-bit value (time, address, pid) into a good nonzero state. */
uint64_t retry_rng_seed(uint64_t entropy);

#endif
