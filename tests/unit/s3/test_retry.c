/*
 * Unit tests for retry: the classification table (transient and throttled),
 * local failures, the attempt limit, the resolution-failure cap, the time
 * budget, delay bounds, growth, jitter and overflow safety, per-attempt
 * deadlines (doubling, cap, server allowances, the adaptive p99 part,
 * clipping to the budget), the latency ring, and the bounds a silent or a
 * refusing server gives a reader.
 */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>

#include "s3/retry.h"

/* A policy with only attempts and backoff: no budget, no deadlines. */
static retry_policy P(unsigned max_attempts, unsigned base_ms, unsigned max_ms)
{
	return (retry_policy){.max_attempts = max_attempts, .base_ms = base_ms,
			      .max_ms = max_ms};
}

struct case_ {
	int curl;
	long status;
	const char *code;
	bool transient;
};

static const struct case_ cases[] = {
    /* transport */
    {CURLE_OPERATION_TIMEDOUT, 0, NULL, true},
    {CURLE_COULDNT_CONNECT, 0, NULL, true},
    {CURLE_RECV_ERROR, 0, NULL, true},
    {CURLE_SEND_ERROR, 0, NULL, true},
    {CURLE_GOT_NOTHING, 0, NULL, true},
    {CURLE_PARTIAL_FILE, 0, NULL, true},
    {CURLE_SSL_CONNECT_ERROR, 0, NULL, true},
    {CURLE_HTTP2_STREAM, 0, NULL, true},
    {CURLE_COULDNT_RESOLVE_HOST, 0, NULL, true},
    {CURLE_PEER_FAILED_VERIFICATION, 0, NULL, false},
    {CURLE_URL_MALFORMAT, 0, NULL, false},
    {CURLE_ABORTED_BY_CALLBACK, 0, NULL, false},
    {CURLE_WRITE_ERROR, 0, NULL, false},
    {CURLE_OUT_OF_MEMORY, 0, NULL, false},
    /* a CURLcode decides even when a status arrived */
    {CURLE_WRITE_ERROR, 503, "SlowDown", false},
    {CURLE_PARTIAL_FILE, 200, NULL, true},
    /* HTTP status alone (body not S3 XML) */
    {0, 500, NULL, true},
    {0, 502, NULL, true},
    {0, 503, NULL, true},
    {0, 504, NULL, true},
    {0, 429, NULL, true},
    {0, 408, NULL, true},
    {0, 501, NULL, false},
    {0, 505, NULL, false},
    {0, 400, NULL, false},
    {0, 403, NULL, false},
    {0, 404, NULL, false},
    {0, 409, NULL, false},
    {0, 412, NULL, false},
    {0, 416, NULL, false},
    {0, 200, NULL, false},
    {0, 0, NULL, false},
    /* S3 codes with their usual status */
    {0, 503, "SlowDown", true},
    {0, 400, "RequestTimeout", true},
    {0, 500, "InternalError", true},
    {0, 503, "ServiceUnavailable", true},
    {0, 400, "Throttling", true},
    {0, 400, "ThrottlingException", true},
    {0, 403, "RequestTimeTooSkewed", false},
    {0, 403, "AccessDenied", false},
    {0, 403, "SignatureDoesNotMatch", false},
    {0, 403, "InvalidAccessKeyId", false},
    {0, 400, "ExpiredToken", false},
    {0, 400, "BadDigest", false},
    {0, 404, "NoSuchKey", false},
    {0, 404, "NoSuchBucket", false},
    {0, 404, "NoSuchUpload", false},
    {0, 412, "PreconditionFailed", false},
    {0, 416, "InvalidRange", false},
    /* CompleteMultipartUpload: 200 with an <Error> document */
    {0, 200, "InternalError", true},
    {0, 200, "SlowDown", true},
    {0, 200, "AccessDenied", false},
    /* codes are case-sensitive, as S3 sends them */
    {0, 400, "slowdown", false},
    {0, 400, "", false},
};

Test(retry, classification_table)
{
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		const struct case_ *c = &cases[i];
		cr_expect_eq(retry_is_transient(c->curl, c->status, c->code),
			     c->transient,
			     "case %zu: curl %d status %ld code %s", i, c->curl,
			     c->status, c->code ? c->code : "NULL");
	}
}

Test(retry, should_follows_classification_below_limit)
{
	retry_policy p = RETRY_POLICY_DEFAULT;
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		const struct case_ *c = &cases[i];
		cr_expect_eq(retry_should(&p, 1, c->curl, c->status, c->code),
			     c->transient, "case %zu", i);
	}
}

Test(retry, attempt_limit)
{
	retry_policy p = P(4, 100, 5000);
	cr_assert(retry_should(&p, 1, 0, 503, "SlowDown"));
	cr_assert(retry_should(&p, 2, 0, 503, "SlowDown"));
	cr_assert(retry_should(&p, 3, 0, 503, "SlowDown"));
	cr_assert_not(retry_should(&p, 4, 0, 503, "SlowDown"));
	cr_assert_not(retry_should(&p, 5, 0, 503, "SlowDown"));
	cr_assert_not(retry_should(&p, UINT_MAX, CURLE_RECV_ERROR, 0, NULL));
}

Test(retry, single_attempt_policies_never_retry)
{
	retry_policy one = P(1, 100, 5000);
	retry_policy zero = P(0, 100, 5000); /* treated as 1 */
	cr_assert_not(retry_should(&one, 1, CURLE_COULDNT_CONNECT, 0, NULL));
	cr_assert_not(retry_should(&zero, 1, CURLE_COULDNT_CONNECT, 0, NULL));
}

Test(retry, null_policy_is_default)
{
	cr_assert(retry_should(NULL, 5, 0, 500, NULL));
	cr_assert_not(retry_should(NULL, 6, 0, 500, NULL));
	cr_assert_eq(retry_cap_ms(NULL, 1), 100);
}

Test(retry, resolution_failure_retried_once)
{
	retry_policy p = P(10, 100, 5000);
	cr_assert(retry_should(&p, 1, CURLE_COULDNT_RESOLVE_HOST, 0, NULL));
	cr_assert_not(retry_should(&p, RETRY_RESOLVE_MAX_ATTEMPTS,
				   CURLE_COULDNT_RESOLVE_HOST, 0, NULL));
	cr_assert_not(
	    retry_should(&p, 2, CURLE_COULDNT_RESOLVE_PROXY, 0, NULL));
	/* other transport errors keep the full budget */
	cr_assert(retry_should(&p, 9, CURLE_COULDNT_CONNECT, 0, NULL));
}

Test(retry, cap_grows_exponentially_then_saturates)
{
	retry_policy p = P(6, 100, 5000);
	cr_assert_eq(retry_cap_ms(&p, 0), 100);
	cr_assert_eq(retry_cap_ms(&p, 1), 100);
	cr_assert_eq(retry_cap_ms(&p, 2), 200);
	cr_assert_eq(retry_cap_ms(&p, 3), 400);
	cr_assert_eq(retry_cap_ms(&p, 6), 3200);
	cr_assert_eq(retry_cap_ms(&p, 7), 5000);
	cr_assert_eq(retry_cap_ms(&p, 100), 5000);
}

Test(retry, cap_overflow_safety)
{
	retry_policy big = P(6, UINT_MAX, UINT_MAX);
	unsigned attempts[] = {2, 31, 32, 33, 63, 64, 65, 1000, UINT_MAX};
	for (size_t i = 0; i < sizeof attempts / sizeof *attempts; i++) {
		cr_assert_eq(retry_cap_ms(&big, attempts[i]), UINT_MAX,
			     "attempt %u", attempts[i]);
		retry_policy p = P(6, 100, 5000);
		cr_assert_eq(retry_cap_ms(&p, attempts[i]),
			     attempts[i] < 7 ? 100u << (attempts[i] - 1)
					     : 5000u);
	}
	retry_policy half = P(6, 1u << 31, UINT_MAX);
	cr_assert_eq(retry_cap_ms(&half, 1), 1u << 31);
	cr_assert_eq(retry_cap_ms(&half, 2), UINT_MAX);
	uint64_t rng = 1;
	for (int i = 0; i < 1000; i++)
		cr_assert_leq(retry_delay_ms(&big, UINT_MAX, &rng), UINT_MAX);
}

Test(retry, max_below_base_and_zero)
{
	retry_policy p = P(6, 1000, 300);
	cr_assert_eq(retry_cap_ms(&p, 1), 300);
	retry_policy z = P(6, 0, 5000);
	retry_policy zm = P(6, 100, 0);
	uint64_t rng = 42;
	for (unsigned a = 1; a < 70; a++) {
		cr_assert_eq(retry_delay_ms(&z, a, &rng), 0);
		cr_assert_eq(retry_delay_ms(&zm, a, &rng), 0);
	}
}

Test(retry, delay_within_bounds)
{
	retry_policy p = P(6, 100, 5000);
	uint64_t rng = retry_rng_seed(7);
	for (unsigned a = 1; a <= 80; a++) {
		unsigned cap = retry_cap_ms(&p, a);
		for (int i = 0; i < 2000; i++)
			cr_assert_leq(retry_delay_ms(&p, a, &rng), cap,
				      "attempt %u", a);
	}
}

/* Full jitter: over many draws the range [0, cap] is covered, both ends
 * are approached, the mean is near cap/2 and grows with the attempt. */
Test(retry, delay_grows_and_jitters)
{
	retry_policy p = P(10, 100, 5000);
	uint64_t rng = retry_rng_seed(12345);
	double prev_mean = 0;
	for (unsigned a = 1; a <= 7; a++) {
		unsigned cap = retry_cap_ms(&p, a), lo = UINT_MAX, hi = 0;
		double sum = 0;
		const int n = 20000;
		for (int i = 0; i < n; i++) {
			unsigned d = retry_delay_ms(&p, a, &rng);
			lo = d < lo ? d : lo;
			hi = d > hi ? d : hi;
			sum += d;
		}
		double mean = sum / n;
		cr_expect_lt(lo, cap / 20 + 1, "attempt %u min %u", a, lo);
		cr_expect_gt(hi, cap - cap / 20 - 1, "attempt %u max %u", a,
			     hi);
		cr_expect(mean > cap * 0.45 && mean < cap * 0.55,
			  "attempt %u mean %f cap %u", a, mean, cap);
		cr_expect_gt(mean, prev_mean, "attempt %u", a);
		prev_mean = mean;
	}
}

Test(retry, distribution_is_roughly_uniform)
{
	retry_policy p = P(6, 999, 999); /* cap 999: 1000 values */
	unsigned hist[10] = {0};
	uint64_t rng = retry_rng_seed(99);
	const int n = 100000;
	for (int i = 0; i < n; i++)
		hist[retry_delay_ms(&p, 1, &rng) / 100]++;
	for (int b = 0; b < 10; b++)
		cr_expect(hist[b] > n / 10 * 0.9 && hist[b] < n / 10 * 1.1,
			  "bucket %d: %u", b, hist[b]);
}

Test(retry, rng_is_deterministic_and_zero_safe)
{
	uint64_t a = 5, b = 5;
	for (int i = 0; i < 100; i++)
		cr_assert_eq(retry_rng_next(&a), retry_rng_next(&b));
	uint64_t z = 0;
	uint64_t v = retry_rng_next(&z);
	cr_assert_neq(v, 0);
	cr_assert_neq(z, 0);
	cr_assert_neq(retry_rng_next(&z), v);
	/* seeds: nonzero and different for neighbouring inputs */
	cr_assert_neq(retry_rng_seed(0), 0);
	cr_assert_neq(retry_rng_seed(1), retry_rng_seed(2));
	/* two seeded states give different delay sequences */
	retry_policy p = RETRY_POLICY_DEFAULT;
	uint64_t s1 = retry_rng_seed(1), s2 = retry_rng_seed(2);
	int same = 0;
	for (int i = 0; i < 50; i++)
		same +=
		    retry_delay_ms(&p, 6, &s1) == retry_delay_ms(&p, 6, &s2);
	cr_assert_lt(same, 5);
}

/* ---- classes ----------------------------------------------------------- */

struct class_case {
	int curl;
	long status;
	const char *code;
	retry_class cls;
};

static const struct class_case class_cases[] = {
    /* throttling: by status or by code, whatever the other says */
    {0, 503, NULL, RETRY_THROTTLED},
    {0, 429, NULL, RETRY_THROTTLED},
    {0, 503, "SlowDown", RETRY_THROTTLED},
    {0, 503, "InternalError", RETRY_THROTTLED},
    {0, 500, "SlowDown", RETRY_THROTTLED},
    {0, 400, "Throttling", RETRY_THROTTLED},
    {0, 400, "ThrottlingException", RETRY_THROTTLED},
    {0, 400, "RequestLimitExceeded", RETRY_THROTTLED},
    {0, 503, "ServiceUnavailable", RETRY_THROTTLED},
    {0, 200, "SlowDown", RETRY_THROTTLED},
    /* transient */
    {0, 500, NULL, RETRY_TRANSIENT},
    {0, 502, NULL, RETRY_TRANSIENT},
    {0, 504, NULL, RETRY_TRANSIENT},
    {0, 408, NULL, RETRY_TRANSIENT},
    {0, 500, "InternalError", RETRY_TRANSIENT},
    {0, 400, "RequestTimeout", RETRY_TRANSIENT},
    {0, 200, "InternalError", RETRY_TRANSIENT},
    {CURLE_OPERATION_TIMEDOUT, 0, NULL, RETRY_TRANSIENT}, /* stalls */
    {CURLE_COULDNT_CONNECT, 0, NULL, RETRY_TRANSIENT},
    {CURLE_RECV_ERROR, 200, NULL, RETRY_TRANSIENT},
    /* a curl failure decides even over a throttling status */
    {CURLE_WRITE_ERROR, 503, "SlowDown", RETRY_FINAL},
    {CURLE_ABORTED_BY_CALLBACK, 0, NULL, RETRY_FINAL},
    /* final */
    {0, 403, "AccessDenied", RETRY_FINAL},
    {0, 404, NULL, RETRY_FINAL},
    {0, 501, NULL, RETRY_FINAL},
    {0, 200, "AccessDenied", RETRY_FINAL},
    {0, 403, "RequestTimeTooSkewed", RETRY_FINAL},
};

Test(retry, class_table)
{
	for (size_t i = 0; i < sizeof class_cases / sizeof *class_cases; i++) {
		const struct class_case *c = &class_cases[i];
		cr_expect_eq(retry_classify(c->curl, c->status, c->code), c->cls,
			     "case %zu: curl %d status %ld code %s", i, c->curl,
			     c->status, c->code ? c->code : "NULL");
	}
	/* the boolean view agrees */
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
		cr_expect_eq(retry_classify(cases[i].curl, cases[i].status,
					    cases[i].code) != RETRY_FINAL,
			     cases[i].transient, "case %zu", i);
}

/* What the commit engine retries forever: an exchange by its outcome, a
 * local failure unless the input itself is wrong. */
Test(retry, classify_err_local_failures)
{
	cr_expect_eq(retry_classify_err(EIO, 0, 0, NULL), RETRY_TRANSIENT);
	cr_expect_eq(retry_classify_err(ENOENT, 0, 0, NULL), RETRY_TRANSIENT);
	cr_expect_eq(retry_classify_err(ENOMEM, 0, 0, NULL), RETRY_TRANSIENT);
	cr_expect_eq(retry_classify_err(0, 0, 0, NULL), RETRY_TRANSIENT);
	cr_expect_eq(retry_classify_err(EINVAL, 0, 0, "InvalidArgument"),
		     RETRY_FINAL);
	cr_expect_eq(retry_classify_err(ENAMETOOLONG, 0, 0, NULL), RETRY_FINAL);
	cr_expect_eq(retry_classify_err(EFBIG, 0, 0, NULL), RETRY_FINAL);
	cr_expect_eq(retry_classify_err(ENODATA, 0, 0, NULL), RETRY_FINAL);
	/* exchanges: by the exchange, whatever errno was mapped */
	cr_expect_eq(retry_classify_err(EIO, CURLE_OPERATION_TIMEDOUT, 0, NULL),
		     RETRY_TRANSIENT);
	cr_expect_eq(retry_classify_err(EIO, CURLE_ABORTED_BY_CALLBACK, 0, NULL),
		     RETRY_FINAL);
	cr_expect_eq(retry_classify_err(EACCES, 0, 403, "AccessDenied"),
		     RETRY_FINAL);
	cr_expect_eq(retry_classify_err(EIO, 0, 503, "SlowDown"),
		     RETRY_THROTTLED);
	cr_expect_eq(retry_classify_err(EIO, 0, 200, "InternalError"),
		     RETRY_TRANSIENT);
	cr_expect_eq(retry_classify_err(EIO, 0, 501, NULL), RETRY_FINAL);
}

/* s3/request.c's own code for "the credential refresh still runs": waited
 * for within the budget like throttling; a failed refresh is final. */
Test(retry, a_credential_refresh_in_flight_is_waited_for)
{
	cr_expect_eq(retry_classify(0, 0, "CredentialsRefreshing"),
		     RETRY_THROTTLED);
	cr_expect_eq(retry_classify(0, 0, "NoCredentials"), RETRY_FINAL);
	retry_policy p = RETRY_POLICY_DEFAULT;
	uint64_t b = retry_request_budget_ms(&p, 0);
	cr_expect(retry_again(&p, 10, 5000, b,
			      retry_classify(0, 0, "CredentialsRefreshing"), 0,
			      1000));
	cr_expect_not(retry_again(&p, 2, 0, b,
				  retry_classify(0, 0, "NoCredentials"), 0, 0));
}

/* ---- attempts, budget ---------------------------------------------------- */

Test(retry, again_follows_attempts_without_budget)
{
	retry_policy p = P(4, 100, 5000);
	for (unsigned a = 1; a < 4; a++) {
		cr_expect(retry_again(&p, a, 0, 0, RETRY_TRANSIENT, 0, 0));
		cr_expect(retry_again(&p, a, 0, 0, RETRY_THROTTLED, 0, 0));
	}
	cr_expect_not(retry_again(&p, 4, 0, 0, RETRY_TRANSIENT, 0, 0));
	/* without a budget throttling is bounded by attempts as well */
	cr_expect_not(retry_again(&p, 4, 0, 0, RETRY_THROTTLED, 0, 0));
	cr_expect_not(retry_again(&p, 1, 0, 0, RETRY_FINAL, 0, 0));
}

Test(retry, throttled_keeps_trying_while_the_budget_lasts)
{
	retry_policy p = RETRY_POLICY_DEFAULT;
	uint64_t b = retry_request_budget_ms(&p, 0);
	cr_assert_eq(b, 60000);
	cr_expect(retry_again(&p, 6, 10000, b, RETRY_THROTTLED, 0, 500));
	cr_expect(retry_again(&p, 30, 50000, b, RETRY_THROTTLED, 0, 5000));
	cr_expect_not(retry_again(&p, 6, 10000, b, RETRY_TRANSIENT, 0, 500));
	cr_expect_not(retry_again(&p, RETRY_THROTTLED_MAX_ATTEMPTS, 1000, b,
				  RETRY_THROTTLED, 0, 0));
	/* the next attempt must have a second of budget left */
	cr_expect(retry_again(&p, 2, 55000, b, RETRY_TRANSIENT, 0, 3999));
	cr_expect_not(retry_again(&p, 2, 55000, b, RETRY_TRANSIENT, 0, 4001));
	cr_expect_not(retry_again(&p, 2, 60000, b, RETRY_THROTTLED, 0, 0));
	/* resolution failures: once, budget or not */
	cr_expect(retry_again(&p, 1, 0, b, RETRY_TRANSIENT,
			      CURLE_COULDNT_RESOLVE_HOST, 0));
	cr_expect_not(retry_again(&p, 2, 0, b, RETRY_TRANSIENT,
				  CURLE_COULDNT_RESOLVE_HOST, 0));
}

Test(retry, throttling_backs_off_from_a_larger_base)
{
	retry_policy p = RETRY_POLICY_DEFAULT;
	cr_expect_eq(retry_class_cap_ms(&p, 1, RETRY_TRANSIENT), 100);
	cr_expect_eq(retry_class_cap_ms(&p, 1, RETRY_THROTTLED), 500);
	cr_expect_eq(retry_class_cap_ms(&p, 4, RETRY_THROTTLED), 4000);
	cr_expect_eq(retry_class_cap_ms(&p, 5, RETRY_THROTTLED), 5000);
	cr_expect_eq(retry_class_cap_ms(&p, 50, RETRY_THROTTLED), 5000);
	cr_expect_eq(retry_class_cap_ms(&p, 50, RETRY_TRANSIENT), 5000);
	/* no throttle base: the ordinary one */
	retry_policy q = P(6, 100, 5000);
	cr_expect_eq(retry_class_cap_ms(&q, 1, RETRY_THROTTLED), 100);
	uint64_t rng = retry_rng_seed(3);
	for (unsigned a = 1; a < 40; a++)
		for (int i = 0; i < 200; i++)
			cr_assert_leq(retry_backoff_ms(&p, a, RETRY_THROTTLED,
						       &rng),
				      retry_class_cap_ms(&p, a,
							 RETRY_THROTTLED));
	/* the transient delay is retry_delay_ms's */
	uint64_t r1 = 9, r2 = 9;
	for (int i = 0; i < 50; i++)
		cr_assert_eq(retry_delay_ms(&p, 3, &r1),
			     retry_backoff_ms(&p, 3, RETRY_TRANSIENT, &r2));
}

/* ---- deadlines --------------------------------------------------------- */

Test(retry, deadlines_of_the_first_attempt_are_the_options)
{
	retry_policy p = RETRY_POLICY_DEFAULT;
	retry_deadlines d = retry_attempt_deadlines(&p, 1, 0, 0, 0);
	cr_expect_eq(d.first_byte_ms, 2000);
	cr_expect_eq(d.low_speed_ms, 5000);
	cr_expect_eq(d.low_speed_bytes, 1);
	cr_expect_eq(d.connect_ms, 5000);
	d = retry_attempt_deadlines(&p, 0, 0, 0, 0); /* 0 counts as 1 */
	cr_expect_eq(d.first_byte_ms, 2000);
}

Test(retry, deadlines_double_per_attempt_up_to_the_cap)
{
	retry_policy p = RETRY_POLICY_DEFAULT;
	unsigned want[] = {5000, 10000, 20000, 40000, 80000, 120000, 120000};
	unsigned fb[] = {2000, 4000, 8000, 16000, 32000, 64000, 120000};
	for (unsigned a = 1; a <= 7; a++) {
		retry_deadlines d = retry_attempt_deadlines(&p, a, 0, 0, 0);
		cr_expect_eq(d.first_byte_ms, fb[a - 1], "attempt %u", a);
		cr_expect_eq(d.low_speed_ms, want[a - 1], "attempt %u", a);
	}
	retry_deadlines d = retry_attempt_deadlines(&p, UINT_MAX, 0, 0, 0);
	cr_expect_eq(d.first_byte_ms, 120000);
	/* no cap: no doubling */
	p.deadline_max_ms = 0;
	d = retry_attempt_deadlines(&p, 5, 0, 0, 0);
	cr_expect_eq(d.first_byte_ms, 2000);
}

Test(retry, deadlines_off_when_disabled)
{
	retry_policy p = RETRY_POLICY_DEFAULT;
	p.first_byte_ms = 0;
	p.low_speed_ms = 0;
	retry_deadlines d = retry_attempt_deadlines(&p, 3, 40000, 900, 0);
	cr_expect_eq(d.first_byte_ms, 0);
	cr_expect_eq(d.low_speed_ms, 0);
	p = P(6, 100, 5000);
	d = retry_attempt_deadlines(&p, 1, 0, 0, 0);
	cr_expect_eq(d.first_byte_ms, 0);
	cr_expect_eq(d.connect_ms, 0); /* the loop's */
}

/* A server that is slow for everyone raises the deadline (4 x p99), never
 * lowers it, and not past the cap. */
Test(retry, adaptive_first_byte_deadline)
{
	retry_policy p = RETRY_POLICY_DEFAULT;
	cr_expect_eq(retry_attempt_deadlines(&p, 1, 0, 40, 0).first_byte_ms,
		     2000);
	cr_expect_eq(retry_attempt_deadlines(&p, 1, 0, 3000, 0).first_byte_ms,
		     12000);
	cr_expect_eq(retry_attempt_deadlines(&p, 2, 0, 3000, 0).first_byte_ms,
		     24000);
	cr_expect_eq(
	    retry_attempt_deadlines(&p, 1, 0, UINT_MAX, 0).first_byte_ms,
	    120000);
	/* the low-speed rule is not adaptive */
	cr_expect_eq(retry_attempt_deadlines(&p, 1, 0, 3000, 0).low_speed_ms,
		     5000);
}

/* CompleteMultipartUpload, copies, DeleteObjects: the server's work sets
 * both deadlines and the budget; more attempts never shorten them. */
Test(retry, server_work_allowance)
{
	retry_policy p = RETRY_POLICY_DEFAULT;
	cr_expect_eq(retry_server_wait_ms(&p, 0, 0), 5000);
	cr_expect_eq(retry_server_wait_ms(&p, 2, 0), 5040);
	cr_expect_eq(retry_server_wait_ms(&p, 10000, 0), 205000);
	cr_expect_eq(retry_server_wait_ms(&p, 1000, 0), 25000);
	cr_expect_eq(retry_server_wait_ms(&p, 0, 8 << 20), 5000);
	cr_expect_eq(retry_server_wait_ms(&p, 0, 5ull << 30), 165000);
	cr_expect_eq(retry_server_wait_ms(&p, UINT64_MAX, UINT64_MAX),
		     3600000);
	p.first_byte_ms = 45000;
	cr_expect_eq(retry_server_wait_ms(&p, 0, 0), 45000);
	p = (retry_policy)RETRY_POLICY_DEFAULT;
	unsigned w = retry_server_wait_ms(&p, 10000, 0);
	retry_deadlines d = retry_attempt_deadlines(&p, 1, w, 0, 0);
	cr_expect_eq(d.first_byte_ms, w);
	cr_expect_eq(d.low_speed_ms, w); /* AWS's keep-alive spaces */
	d = retry_attempt_deadlines(&p, 3, w, 0, 0);
	cr_expect_eq(d.first_byte_ms, w); /* above the cap: no doubling */
	cr_expect_eq(retry_request_budget_ms(&p, w), 3ull * w);
	cr_expect_eq(retry_request_budget_ms(&p, 1000), 60000);
	p.budget_ms = 0;
	cr_expect_eq(retry_request_budget_ms(&p, w), 0);
}

Test(retry, deadlines_clipped_to_the_budget_left)
{
	retry_policy p = RETRY_POLICY_DEFAULT;
	retry_deadlines d = retry_attempt_deadlines(&p, 3, 0, 0, 7000);
	cr_expect_eq(d.first_byte_ms, 7000);
	cr_expect_eq(d.low_speed_ms, 5000 * 4 > 7000 ? 7000 : 20000);
	cr_expect_eq(d.connect_ms, 5000);
	d = retry_attempt_deadlines(&p, 1, 0, 0, 1200);
	cr_expect_eq(d.first_byte_ms, 1200);
	cr_expect_eq(d.low_speed_ms, 1200);
	cr_expect_eq(d.connect_ms, 1200);
	p.connect_ms = 0; /* the loop's 5 s, clipped all the same */
	d = retry_attempt_deadlines(&p, 1, 0, 0, 1200);
	cr_expect_eq(d.connect_ms, 1200);
}

/*
 * The promises of retry.h, simulated on the default policy: a server that
 * accepts requests and never answers costs a reader at most the budget
 * (each attempt runs into its deadline), one that refuses connections
 * about three seconds (six immediate failures and the backoff between).
 */
static double simulate(const retry_policy *p, bool silent, bool worst,
		       unsigned *attempts)
{
	uint64_t rng = retry_rng_seed(77);
	uint64_t budget = retry_request_budget_ms(p, 0), t = 0;
	unsigned a;
	for (a = 1;; a++) {
		uint64_t left = budget > t ? budget - t : 0;
		retry_deadlines d = retry_attempt_deadlines(p, a, 0, 0, left);
		/* connecting succeeds at once; the reply never comes */
		if (silent)
			t += d.first_byte_ms;
		retry_class cls =
		    retry_classify(silent ? CURLE_OPERATION_TIMEDOUT
					  : CURLE_COULDNT_CONNECT,
				   0, NULL);
		unsigned delay = worst ? retry_class_cap_ms(p, a, cls)
				       : retry_backoff_ms(p, a, cls, &rng);
		if (!retry_again(p, a, t, budget, cls, 0, delay))
			break;
		t += delay;
	}
	*attempts = a;
	return (double)t / 1000;
}

Test(retry, a_reader_is_answered_in_bounded_time)
{
	retry_policy p = RETRY_POLICY_DEFAULT;
	unsigned n;
	double s = simulate(&p, true, true, &n);
	cr_expect_leq(s, 60.0, "silent server: %.1f s", s);
	cr_expect_geq(s, 50.0, "silent server: gave up early, %.1f s", s);
	cr_expect_geq(n, 4, "silent server: %u attempts", n);
	s = simulate(&p, true, false, &n);
	cr_expect_leq(s, 60.0, "silent server, jitter: %.1f s", s);
	s = simulate(&p, false, true, &n);
	cr_expect_eq(n, 6);
	cr_expect_leq(s, 3.2, "refusing server: %.1f s", s);
	/* a silent connection alone costs one first-byte deadline and a
	 * backoff of at most 100 ms before the retry */
	retry_deadlines d = retry_attempt_deadlines(&p, 1, 0, 0, 60000);
	cr_expect_leq(d.first_byte_ms + retry_cap_ms(&p, 1), 5100);
	/* shorter options, shorter bounds */
	p.budget_ms = 10000;
	p.first_byte_ms = 1000;
	s = simulate(&p, true, true, &n);
	cr_expect_leq(s, 10.0, "%.1f s", s);
}

/* ---- latency ring, default policy ------------------------------------------ */

Test(retry, latency_p99)
{
	retry_lat l = {0};
	for (unsigned i = 0; i < RETRY_LAT_MIN - 1; i++)
		retry_lat_add(&l, 1000);
	cr_expect_eq(retry_lat_p99(&l), 0, "too few samples");
	retry_lat_add(&l, 1000);
	cr_expect_eq(retry_lat_p99(&l), 1000);
	/* 128 samples 1..128: p99 by nearest rank is 127 */
	retry_lat m = {0};
	for (unsigned i = 1; i <= RETRY_LAT_N; i++)
		retry_lat_add(&m, i);
	cr_expect_eq(retry_lat_p99(&m), 127);
	/* the ring forgets: after 128 fast replies, the slow ones are gone */
	for (unsigned i = 0; i < RETRY_LAT_N; i++)
		retry_lat_add(&m, 20);
	cr_expect_eq(retry_lat_p99(&m), 20);
	/* one slow reply in a hundred does not move the p99 much, two do */
	retry_lat k = {0};
	for (unsigned i = 0; i < RETRY_LAT_N - 1; i++)
		retry_lat_add(&k, 10);
	retry_lat_add(&k, 9000);
	cr_expect_eq(retry_lat_p99(&k), 10);
	retry_lat_add(&k, 9000);
	cr_expect_eq(retry_lat_p99(&k), 9000);
}

Test(retry, default_policy_can_be_set)
{
	retry_policy d = retry_policy_default();
	retry_policy builtin = RETRY_POLICY_DEFAULT;
	cr_expect_eq(d.first_byte_ms, builtin.first_byte_ms);
	cr_expect_eq(d.budget_ms, 60000);
	retry_policy mine = builtin;
	mine.first_byte_ms = 2500;
	mine.max_ms = 3000;
	retry_policy_set_default(&mine);
	cr_expect_eq(retry_policy_default().first_byte_ms, 2500);
	cr_expect_eq(retry_policy_default().max_ms, 3000);
	retry_policy_set_default(NULL);
	cr_expect_eq(retry_policy_default().first_byte_ms, 2000);
}
