/*
 * metrics: a table of counters (see metrics.h).  Relaxed atomics: a
 * reader may see one counter a moment ahead of another, never a torn or
 * lost increment.
 */
#include "util/metrics.h"

#include <stdlib.h>
#include <string.h>

const double metric_bucket_le[METRIC_BUCKETS] = {
	0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300,
};

struct metrics {
	metrics_snapshot v; /* only through __atomic builtins */
};

static const struct {
	const char *name, *label;
} ops[METRIC_OP_N] = {
	[METRIC_OP_NONE] = {"", "none"},
	[METRIC_OP_GET] = {"GET", "get"},
	[METRIC_OP_HEAD] = {"HEAD", "head"},
	[METRIC_OP_LIST] = {"LIST", "list"},
	[METRIC_OP_PUT] = {"PUT", "put"},
	[METRIC_OP_UPLOAD_PART] = {"UPLOAD PART", "upload_part"},
	[METRIC_OP_UPLOAD_PART_COPY] = {"UPLOAD PART COPY", "upload_part_copy"},
	[METRIC_OP_CREATE_MULTIPART] = {"CREATE MULTIPART UPLOAD",
					"create_multipart_upload"},
	[METRIC_OP_COMPLETE_MULTIPART] = {"COMPLETE MULTIPART UPLOAD",
					  "complete_multipart_upload"},
	[METRIC_OP_ABORT_MULTIPART] = {"ABORT MULTIPART UPLOAD",
				       "abort_multipart_upload"},
	[METRIC_OP_LIST_MULTIPART] = {"LIST MULTIPART UPLOADS",
				      "list_multipart_uploads"},
	[METRIC_OP_COPY] = {"COPY", "copy"},
	[METRIC_OP_DELETE] = {"DELETE", "delete"},
	[METRIC_OP_DELETE_OBJECTS] = {"DELETE OBJECTS", "delete_objects"},
	[METRIC_OP_OTHER] = {NULL, "other"},
};

static const char *const st_labels[METRIC_ST_N] = {"2xx", "3xx", "4xx",
						   "5xx", "error"};

metric_op metric_op_from_name(const char *name)
{
	if (!name || !name[0])
		return METRIC_OP_OTHER;
	for (int i = METRIC_OP_GET; i < METRIC_OP_OTHER; i++)
		if (!strcmp(ops[i].name, name))
			return (metric_op)i;
	return METRIC_OP_OTHER;
}

const char *metric_op_label(metric_op op)
{
	return op < METRIC_OP_N ? ops[op].label : "other";
}

const char *metric_status_label(metric_status st)
{
	return st < METRIC_ST_N ? st_labels[st] : "error";
}

metric_status metric_status_of(long s)
{
	if (s >= 200 && s < 300)
		return METRIC_ST_2XX;
	if (s >= 300 && s < 400)
		return METRIC_ST_3XX;
	if (s >= 400 && s < 500)
		return METRIC_ST_4XX;
	if (s >= 500 && s < 600)
		return METRIC_ST_5XX;
	return METRIC_ST_ERROR;
}

static void add(uint64_t *p, uint64_t v)
{
	__atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

static void hist_add(metric_hist *h, uint64_t us)
{
	double s = (double)us / 1e6;
	int i = 0;
	while (i < METRIC_BUCKETS && s > metric_bucket_le[i])
		i++;
	add(&h->bucket[i], 1);
	add(&h->sum_us, us);
	add(&h->count, 1);
}

metrics *metrics_new(void)
{
	return calloc(1, sizeof(metrics));
}

void metrics_free(metrics *m)
{
	free(m);
}

void metrics_attempt(metrics *m, metric_op op, long http_status,
		     unsigned attempt, uint64_t sent, uint64_t received,
		     uint64_t duration_us, int stalled)
{
	if (!m || op <= METRIC_OP_NONE || op >= METRIC_OP_N)
		return;
	metrics_snapshot *g = &m->v;
	add(&g->requests[op][metric_status_of(http_status)], 1);
	add(&g->sent_bytes[op], sent);
	add(&g->received_bytes[op], received);
	if (attempt > 1)
		add(&g->retries[op], 1);
	if (http_status == 503 || http_status == 429)
		add(&g->throttles[op], 1);
	if (stalled)
		add(&g->stalls[op], 1);
	hist_add(&g->latency[op], duration_us);
}

void metrics_commit(metrics *m, double seconds)
{
	if (!m)
		return;
	add(&m->v.commits, 1);
	hist_add(&m->v.commit_latency,
		 seconds > 0 ? (uint64_t)(seconds * 1e6) : 0);
}

void metrics_commit_retry(metrics *m)
{
	if (m)
		add(&m->v.commit_retries, 1);
}

void metrics_snap(const metrics *m, metrics_snapshot *s)
{
	memset(s, 0, sizeof *s);
	if (!m)
		return;
	/* the snapshot is nothing but uint64_t counters */
	const uint64_t *src = (const uint64_t *)&m->v;
	uint64_t *dst = (uint64_t *)s;
	for (size_t i = 0; i < sizeof m->v / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

void metrics_hist_text(buf *b, const char *name, const char *labels,
		       const metric_hist *h)
{
	const char *sep = labels[0] ? "," : "";
	uint64_t cum = 0;
	for (int i = 0; i <= METRIC_BUCKETS; i++) {
		cum += h->bucket[i];
		if (i < METRIC_BUCKETS)
			buf_printf(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", name,
				   labels, sep, metric_bucket_le[i],
				   (unsigned long long)cum);
		else
			buf_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name,
				   labels, sep, (unsigned long long)cum);
	}
	const char *l = labels[0] ? "{" : "";
	const char *r = labels[0] ? "}" : "";
	buf_printf(b, "%s_sum%s%s%s %.6f\n", name, l, labels, r,
		   (double)h->sum_us / 1e6);
	/* _count equals the +Inf bucket: the snapshot's own sum of buckets,
	 * so the two never disagree while counters move */
	buf_printf(b, "%s_count%s%s%s %llu\n", name, l, labels, r,
		   (unsigned long long)cum);
}
