/*
 * Unit tests for retry: the classification table, the attempt limit, the
 * resolution-failure cap, delay bounds, growth, jitter and overflow safety.
 */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <limits.h>
#include <stdint.h>

#include "s3/retry.h"

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
	retry_policy p = {4, 100, 5000};
	cr_assert(retry_should(&p, 1, 0, 503, "SlowDown"));
	cr_assert(retry_should(&p, 2, 0, 503, "SlowDown"));
	cr_assert(retry_should(&p, 3, 0, 503, "SlowDown"));
	cr_assert_not(retry_should(&p, 4, 0, 503, "SlowDown"));
	cr_assert_not(retry_should(&p, 5, 0, 503, "SlowDown"));
	cr_assert_not(retry_should(&p, UINT_MAX, CURLE_RECV_ERROR, 0, NULL));
}

Test(retry, single_attempt_policies_never_retry)
{
	retry_policy one = {1, 100, 5000};
	retry_policy zero = {0, 100, 5000}; /* treated as 1 */
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
	retry_policy p = {10, 100, 5000};
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
	retry_policy p = {6, 100, 5000};
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
	retry_policy big = {6, UINT_MAX, UINT_MAX};
	unsigned attempts[] = {2, 31, 32, 33, 63, 64, 65, 1000, UINT_MAX};
	for (size_t i = 0; i < sizeof attempts / sizeof *attempts; i++) {
		cr_assert_eq(retry_cap_ms(&big, attempts[i]), UINT_MAX,
			     "attempt %u", attempts[i]);
		retry_policy p = {6, 100, 5000};
		cr_assert_eq(retry_cap_ms(&p, attempts[i]),
			     attempts[i] < 7 ? 100u << (attempts[i] - 1)
					     : 5000u);
	}
	retry_policy half = {6, 1u << 31, UINT_MAX};
	cr_assert_eq(retry_cap_ms(&half, 1), 1u << 31);
	cr_assert_eq(retry_cap_ms(&half, 2), UINT_MAX);
	uint64_t rng = 1;
	for (int i = 0; i < 1000; i++)
		cr_assert_leq(retry_delay_ms(&big, UINT_MAX, &rng), UINT_MAX);
}

Test(retry, max_below_base_and_zero)
{
	retry_policy p = {6, 1000, 300};
	cr_assert_eq(retry_cap_ms(&p, 1), 300);
	retry_policy z = {6, 0, 5000};
	retry_policy zm = {6, 100, 0};
	uint64_t rng = 42;
	for (unsigned a = 1; a < 70; a++) {
		cr_assert_eq(retry_delay_ms(&z, a, &rng), 0);
		cr_assert_eq(retry_delay_ms(&zm, a, &rng), 0);
	}
}

Test(retry, delay_within_bounds)
{
	retry_policy p = {6, 100, 5000};
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
	retry_policy p = {10, 100, 5000};
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
	retry_policy p = {6, 999, 999}; /* cap 999: 1000 values */
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
