/*
 * metrics: a table of counters and histograms for the Prometheus
 * exporter and `ckptfs status --json` (doc/metrics.md lists every one).
 *
 * The http loop owns one (http_loop_metrics): every layer that records
 * reaches the loop already, and all of a mount's S3 traffic goes through
 * it.  Recording uses relaxed atomics (a few nanoseconds, no lock), so it
 * costs nothing measurable on the request path:
 *   - each finished HTTP attempt (http/loop.c): its S3 operation (set by
 *     the s3 layer on the transfer), status class, bytes each way and
 *     duration;
 *   - retries (an attempt after the first) and throttling replies;
 *   - commit latency, from a transaction's seal to its commit point
 *     (commit/visible.c).
 * Gauges that describe state (cache use, pending transactions) are not
 * kept here: the exporter asks their owners when it renders.
 */
#ifndef CKPTFS_UTIL_METRICS_H
#define CKPTFS_UTIL_METRICS_H

#include <stdint.h>

#include "util/buf.h"

/* S3 operations, as the "op" label.  METRIC_OP_NONE: not an S3 request
 * (the credential providers' HTTP calls), not counted. */
typedef enum metric_op {
	METRIC_OP_NONE = 0,
	METRIC_OP_GET,
	METRIC_OP_HEAD,
	METRIC_OP_LIST,
	METRIC_OP_PUT,
	METRIC_OP_UPLOAD_PART,
	METRIC_OP_UPLOAD_PART_COPY,
	METRIC_OP_CREATE_MULTIPART,
	METRIC_OP_COMPLETE_MULTIPART,
	METRIC_OP_ABORT_MULTIPART,
	METRIC_OP_LIST_MULTIPART,
	METRIC_OP_COPY,
	METRIC_OP_DELETE,
	METRIC_OP_DELETE_OBJECTS,
	METRIC_OP_OTHER,
	METRIC_OP_N
} metric_op;

/* The status label: the HTTP status class, or "error" when no reply
 * came (refused, reset, timed out, stalled). */
typedef enum metric_status {
	METRIC_ST_2XX = 0,
	METRIC_ST_3XX,
	METRIC_ST_4XX,
	METRIC_ST_5XX,
	METRIC_ST_ERROR,
	METRIC_ST_N
} metric_status;

/* Upper bounds (seconds) of the latency histograms' buckets; +Inf is
 * implied.  Request attempts and commits share them. */
#define METRIC_BUCKETS 14
extern const double metric_bucket_le[METRIC_BUCKETS];

typedef struct metric_hist {
	uint64_t bucket[METRIC_BUCKETS + 1]; /* not cumulative; last: +Inf */
	uint64_t count;
	uint64_t sum_us;
} metric_hist;

typedef struct metrics metrics;

/* A consistent-enough copy of every counter (each read atomically). */
typedef struct metrics_snapshot {
	uint64_t requests[METRIC_OP_N][METRIC_ST_N];
	uint64_t sent_bytes[METRIC_OP_N];
	uint64_t received_bytes[METRIC_OP_N];
	uint64_t retries[METRIC_OP_N];
	uint64_t throttles[METRIC_OP_N];
	uint64_t stalls[METRIC_OP_N];
	metric_hist latency[METRIC_OP_N];
	uint64_t commits;
	uint64_t commit_retries;
	metric_hist commit_latency;
} metrics_snapshot;

/* The op for the s3 layer's operation names ("GET", "UPLOAD PART", ...);
 * METRIC_OP_OTHER for a name not in the table. */
metric_op metric_op_from_name(const char *name);
/* The label value: "get", "upload_part", ... */
const char *metric_op_label(metric_op op);
const char *metric_status_label(metric_status st);
metric_status metric_status_of(long http_status);

/* A table with every counter 0; NULL when out of memory (the recording
 * functions take NULL and do nothing). */
metrics *metrics_new(void);
void metrics_free(metrics *m);

/* One finished attempt (op NONE: ignored).  http_status 0: no reply;
 * attempt: its number within the request (above 1: a retry); a 503 or
 * 429 counts as throttled; stalled: abandoned by a stall deadline. */
void metrics_attempt(metrics *m, metric_op op, long http_status,
		     unsigned attempt, uint64_t sent, uint64_t received,
		     uint64_t duration_us, int stalled);
/* A transaction's commit point, seconds after it was sealed. */
void metrics_commit(metrics *m, double seconds);
/* The commit engine runs a failed upload job or publish step again (after
 * the request's own retries gave up on a transient failure). */
void metrics_commit_retry(metrics *m);

/* *s = m's counters now (all 0 for NULL). */
void metrics_snap(const metrics *m, metrics_snapshot *s);

/* Appends a histogram in the text exposition: NAME_bucket{LABELS,le=...},
 * NAME_sum, NAME_count; labels: "" or `op="get"`. */
void metrics_hist_text(buf *b, const char *name, const char *labels,
		       const metric_hist *h);

#endif
