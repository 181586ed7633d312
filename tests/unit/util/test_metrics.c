/*
 * Tests for the process's counters (util/metrics.c): the s3 layer's
 * operation names map to labels, statuses to classes, an attempt lands in
 * the right counters and histogram bucket, and the text of a histogram is
 * cumulative and ends with +Inf equal to _count.
 */
#include <criterion/criterion.h>

#include <string.h>

#include "util/metrics.h"

Test(metrics, op_names)
{
	cr_expect_eq(metric_op_from_name("GET"), METRIC_OP_GET);
	cr_expect_eq(metric_op_from_name("UPLOAD PART"), METRIC_OP_UPLOAD_PART);
	cr_expect_eq(metric_op_from_name("COMPLETE MULTIPART UPLOAD"),
		     METRIC_OP_COMPLETE_MULTIPART);
	cr_expect_eq(metric_op_from_name("SOMETHING NEW"), METRIC_OP_OTHER);
	cr_expect_eq(metric_op_from_name(NULL), METRIC_OP_OTHER);
	cr_expect_str_eq(metric_op_label(METRIC_OP_DELETE_OBJECTS),
			 "delete_objects");
	for (int i = METRIC_OP_GET; i < METRIC_OP_N; i++)
		for (const char *c = metric_op_label((metric_op)i); *c; c++)
			cr_expect((*c >= 'a' && *c <= 'z') || *c == '_');
}

Test(metrics, status_classes)
{
	cr_expect_eq(metric_status_of(200), METRIC_ST_2XX);
	cr_expect_eq(metric_status_of(206), METRIC_ST_2XX);
	cr_expect_eq(metric_status_of(304), METRIC_ST_3XX);
	cr_expect_eq(metric_status_of(404), METRIC_ST_4XX);
	cr_expect_eq(metric_status_of(503), METRIC_ST_5XX);
	cr_expect_eq(metric_status_of(0), METRIC_ST_ERROR);
	cr_expect_str_eq(metric_status_label(METRIC_ST_ERROR), "error");
}

Test(metrics, attempts_counted)
{
	metrics *m = metrics_new();
	metrics_attempt(m, METRIC_OP_GET, 200, 1, 100, 4096, 3000, 0);
	metrics_attempt(m, METRIC_OP_GET, 503, 2, 100, 0, 70000, 0);
	metrics_attempt(m, METRIC_OP_GET, 0, 3, 100, 0, 2000000, 1);
	metrics_attempt(m, METRIC_OP_NONE, 200, 1, 1, 1, 1, 0); /* not counted */
	metrics_attempt(NULL, METRIC_OP_GET, 200, 1, 1, 1, 1, 0); /* no table */
	metrics_snapshot s;
	metrics_snap(m, &s);
	metrics_free(m);
	cr_expect_eq(s.requests[METRIC_OP_GET][METRIC_ST_2XX], 1);
	cr_expect_eq(s.requests[METRIC_OP_GET][METRIC_ST_5XX], 1);
	cr_expect_eq(s.requests[METRIC_OP_GET][METRIC_ST_ERROR], 1);
	cr_expect_eq(s.received_bytes[METRIC_OP_GET], 4096);
	cr_expect_eq(s.sent_bytes[METRIC_OP_GET], 300);
	cr_expect_eq(s.retries[METRIC_OP_GET], 2);
	cr_expect_eq(s.throttles[METRIC_OP_GET], 1);
	cr_expect_eq(s.stalls[METRIC_OP_GET], 1);
	cr_expect_eq(s.requests[METRIC_OP_NONE][METRIC_ST_2XX], 0);
	const metric_hist *h = &s.latency[METRIC_OP_GET];
	cr_expect_eq(h->count, 3);
	cr_expect_eq(h->sum_us, 2073000);
	cr_expect_eq(h->bucket[0], 1); /* 3 ms <= 5 ms */
	cr_expect_eq(h->bucket[4], 1); /* 70 ms <= 100 ms */
	cr_expect_eq(h->bucket[8], 1); /* 2 s <= 2.5 s */
}

Test(metrics, no_table_reads_zero)
{
	metrics_snapshot s;
	memset(&s, 0xff, sizeof s);
	metrics_snap(NULL, &s);
	cr_expect_eq(s.commits, 0);
	cr_expect_eq(s.requests[METRIC_OP_GET][METRIC_ST_2XX], 0);
	metrics_commit(NULL, 1);
	metrics_commit_retry(NULL);
	metrics_free(NULL);
}

Test(metrics, commits)
{
	metrics *m = metrics_new();
	metrics_commit(m, 0.3);
	metrics_commit(m, 400);
	metrics_commit_retry(m);
	metrics_snapshot s;
	metrics_snap(m, &s);
	metrics_free(m);
	cr_expect_eq(s.commits, 2);
	cr_expect_eq(s.commit_retries, 1);
	cr_expect_eq(s.commit_latency.bucket[6], 1);              /* 0.5 s */
	cr_expect_eq(s.commit_latency.bucket[METRIC_BUCKETS], 1); /* +Inf */
}

Test(metrics, histogram_text)
{
	metrics *m = metrics_new();
	metrics_commit(m, 0.001);
	metrics_commit(m, 0.2);
	metrics_commit(m, 1000);
	metrics_snapshot s;
	metrics_snap(m, &s);
	metrics_free(m);
	buf b = BUF_INIT;
	metrics_hist_text(&b, "x_seconds", "op=\"get\"", &s.commit_latency);
	const char *t = buf_cstr(&b);
	cr_expect(strstr(t, "x_seconds_bucket{op=\"get\",le=\"0.005\"} 1\n"));
	cr_expect(strstr(t, "x_seconds_bucket{op=\"get\",le=\"0.25\"} 2\n"));
	cr_expect(strstr(t, "x_seconds_bucket{op=\"get\",le=\"300\"} 2\n"));
	cr_expect(strstr(t, "x_seconds_bucket{op=\"get\",le=\"+Inf\"} 3\n"));
	cr_expect(strstr(t, "x_seconds_count{op=\"get\"} 3\n"));
	cr_expect(strstr(t, "x_seconds_sum{op=\"get\"} 1000.201000\n"));
	buf_reset(&b);
	metrics_hist_text(&b, "y", "", &s.commit_latency);
	cr_expect(strstr(buf_cstr(&b), "y_bucket{le=\"+Inf\"} 3\ny_sum 1000.201000\ny_count 3\n"));
	buf_free(&b);
}
