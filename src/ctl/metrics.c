/*
 * ctl metrics: the mount's numbers in one place, for the Prometheus
 * endpoint (daemon/exporter.c) and `ckptfs status --json`: the mount's
 * counters (util/metrics.h), the cache's state (cache_get_stats) and the
 * commit engine's pending transactions (eng_status), the credentials'
 * expiry and refreshes (creds_chain_status).  doc/metrics.md
 * describes every metric; both renderings below use its names.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commit/engine.h"
#include "ctl/ctl.h"
#include "fs/ops.h"
#include "util/buf.h"
#include "util/metrics.h"

typedef struct numbers {
	metrics_snapshot m;
	cache_stats cs;
	bool writable;
	uint64_t pending, pending_bytes, pending_upload, failed;
	double oldest;
	creds_status cr; /* source NULL: no chain (or no set yet) */
} numbers;

static void gather(const ctl_target *t, numbers *n)
{
	memset(n, 0, sizeof *n);
	metrics_snap(t->metrics, &n->m);
	creds_chain *ch = t->s3 ? s3_client_creds(t->s3) : NULL;
	if (ch && creds_chain_status(ch, &n->cr) < 0)
		creds_status_free(&n->cr); /* the numbers without the text */
	if (t->cache)
		cache_get_stats(t->cache, &n->cs);
	fs_ctx *fs = t->fs ? __atomic_load_n(t->fs, __ATOMIC_ACQUIRE) : NULL;
	eng *e = fs ? fs_ctx_engine(fs) : NULL;
	eng_txn_status *v = NULL;
	size_t cnt = 0;
	if (!e || eng_status(e, &v, &cnt) < 0)
		return;
	n->writable = true;
	n->pending = cnt;
	for (size_t i = 0; i < cnt; i++) {
		n->pending_bytes += v[i].bytes_total;
		if (v[i].bytes_total > v[i].bytes_done)
			n->pending_upload += v[i].bytes_total - v[i].bytes_done;
		if (v[i].state && !strcmp(v[i].state, "failed"))
			n->failed++;
		if (v[i].age > n->oldest)
			n->oldest = v[i].age;
	}
	eng_status_free(v, cnt);
}

/* ---- text exposition ----------------------------------------------------- */

static void head(buf *b, const char *name, const char *type, const char *help)
{
	buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void one(buf *b, const char *name, const char *type, const char *help,
		double v)
{
	head(b, name, type, help);
	buf_printf(b, "%s %.17g\n", name, v);
}

/* A label value with \, " and newlines escaped. */
static void label_value(buf *b, const char *s)
{
	for (; s && *s; s++) {
		if (*s == '\\' || *s == '"')
			buf_printf(b, "\\%c", *s);
		else if (*s == '\n')
			buf_puts(b, "\\n");
		else
			buf_putc(b, *s);
	}
}

static bool op_used(const metrics_snapshot *m, int op)
{
	return m->latency[op].count > 0;
}

static void per_op(buf *b, const metrics_snapshot *m, const char *name,
		   const char *help, const uint64_t *v)
{
	head(b, name, "counter", help);
	for (int op = METRIC_OP_GET; op < METRIC_OP_N; op++)
		if (op_used(m, op))
			buf_printf(b, "%s{op=\"%s\"} %llu\n", name,
				   metric_op_label((metric_op)op),
				   (unsigned long long)v[op]);
}

static void s3_text(buf *b, const metrics_snapshot *m)
{
	head(b, "ckptfs_s3_requests_total", "counter",
	     "S3 request attempts by operation and HTTP status class "
	     "(error: no reply)");
	for (int op = METRIC_OP_GET; op < METRIC_OP_N; op++) {
		if (!op_used(m, op))
			continue;
		for (int st = 0; st < METRIC_ST_N; st++)
			buf_printf(b,
				   "ckptfs_s3_requests_total{op=\"%s\","
				   "status=\"%s\"} %llu\n",
				   metric_op_label((metric_op)op),
				   metric_status_label((metric_status)st),
				   (unsigned long long)m->requests[op][st]);
	}
	per_op(b, m, "ckptfs_s3_sent_bytes_total",
	       "Request body bytes sent to S3", m->sent_bytes);
	per_op(b, m, "ckptfs_s3_received_bytes_total",
	       "Reply body bytes received from S3", m->received_bytes);
	per_op(b, m, "ckptfs_s3_retries_total",
	       "Attempts that repeated a failed attempt of the same request",
	       m->retries);
	per_op(b, m, "ckptfs_s3_throttles_total",
	       "Replies asking for less (503 SlowDown, 429)", m->throttles);
	per_op(b, m, "ckptfs_s3_stalls_total",
	       "Attempts abandoned by a stall deadline", m->stalls);
	head(b, "ckptfs_s3_request_duration_seconds", "histogram",
	     "Duration of one S3 request attempt");
	for (int op = METRIC_OP_GET; op < METRIC_OP_N; op++) {
		if (!op_used(m, op))
			continue;
		char l[64];
		snprintf(l, sizeof l, "op=\"%s\"", metric_op_label((metric_op)op));
		metrics_hist_text(b, "ckptfs_s3_request_duration_seconds", l,
				  &m->latency[op]);
	}
}

static void cache_text(buf *b, const cache_stats *c)
{
	one(b, "ckptfs_cache_hits_total", "counter",
	    "Opens served by a cache entry that existed", (double)c->hits);
	one(b, "ckptfs_cache_misses_total", "counter",
	    "Opens that had to download into the cache", (double)c->misses);
	one(b, "ckptfs_cache_uncached_opens_total", "counter",
	    "Opens read uncached: the cache could not take the object",
	    (double)c->uncached_opens);
	one(b, "ckptfs_cache_evictions_total", "counter",
	    "Cache entries evicted", (double)c->evictions);
	one(b, "ckptfs_cache_verify_failures_total", "counter",
	    "Downloaded chunks that failed their CRC-32C check",
	    (double)c->verify_failures);
	one(b, "ckptfs_cache_downloaded_bytes_total", "counter",
	    "Bytes downloaded into the cache", (double)c->downloaded_bytes);
	one(b, "ckptfs_cache_used_bytes", "gauge",
	    "Bytes the cache's files use", (double)c->bytes);
	one(b, "ckptfs_cache_pinned_bytes", "gauge",
	    "Cached bytes held by open handles (not evictable)",
	    (double)c->pinned_bytes);
	one(b, "ckptfs_cache_entries", "gauge", "Cache entries",
	    (double)c->entries);
	one(b, "ckptfs_cache_capacity_bytes", "gauge",
	    "The cache_size cap (0: none)", (double)c->cap);
	one(b, "ckptfs_cache_active_downloads", "gauge",
	    "Cache entries being downloaded", (double)c->active_downloads);
}

static void commit_text(buf *b, const numbers *n)
{
	one(b, "ckptfs_commit_pending_transactions", "gauge",
	    "Transactions written but not yet visible in the bucket",
	    (double)n->pending);
	one(b, "ckptfs_commit_pending_bytes", "gauge",
	    "Bytes of the pending transactions' files", (double)n->pending_bytes);
	one(b, "ckptfs_commit_pending_upload_bytes", "gauge",
	    "Bytes of pending transactions not uploaded yet",
	    (double)n->pending_upload);
	one(b, "ckptfs_commit_failed_transactions", "gauge",
	    "Pending steps that failed for good (ckptfs retry / drop) or "
	    "failed transiently past transient_limit (still retried)",
	    (double)n->failed);
	one(b, "ckptfs_commit_oldest_pending_age_seconds", "gauge",
	    "Age of the oldest pending transaction (0: none)", n->oldest);
	one(b, "ckptfs_commits_total", "counter",
	    "Transactions that reached their commit point", (double)n->m.commits);
	one(b, "ckptfs_commit_retries_total", "counter",
	    "Upload jobs and publish steps the engine ran again after a "
	    "transient failure",
	    (double)n->m.commit_retries);
	head(b, "ckptfs_commit_duration_seconds", "histogram",
	     "From a transaction's seal to its commit point");
	metrics_hist_text(b, "ckptfs_commit_duration_seconds", "",
			  &n->m.commit_latency);
}

static void creds_text(buf *b, const creds_status *c)
{
	if (!c->source)
		return;
	head(b, "ckptfs_credentials_info", "gauge",
	     "The credential provider whose set signs requests (always 1)");
	buf_puts(b, "ckptfs_credentials_info{source=\"");
	label_value(b, c->source);
	buf_puts(b, "\"} 1\n");
	if (c->expires)
		one(b, "ckptfs_credentials_expiry_seconds", "gauge",
		    "Seconds until the current credentials expire (negative: "
		    "expired; absent: they never do)",
		    (double)(c->expires - time(NULL)));
	one(b, "ckptfs_credentials_refreshes_total", "counter",
	    "Credential sets fetched again before expiry",
	    (double)c->refreshes);
	one(b, "ckptfs_credentials_refresh_failures_total", "counter",
	    "Credential refreshes that failed (retried with backoff)",
	    (double)c->refresh_failures);
	one(b, "ckptfs_credentials_refresh_failing", "gauge",
	    "Credential refreshes failed in a row (0: the last one worked)",
	    (double)c->failing);
}

char *ctl_metrics_text(const ctl_target *t)
{
	numbers n;
	gather(t, &n);
	buf b = BUF_INIT;
	head(&b, "ckptfs_mount_info", "gauge",
	     "The mount this process serves (always 1)");
	buf_puts(&b, "ckptfs_mount_info{mountpoint=\"");
	label_value(&b, t->mountpoint);
	buf_puts(&b, "\",bucket=\"");
	label_value(&b, t->bucket);
	buf_puts(&b, "\",prefix=\"");
	label_value(&b, t->prefix);
	buf_printf(&b, "\",writable=\"%s\"} 1\n", n.writable ? "1" : "0");
	s3_text(&b, &n.m);
	cache_text(&b, &n.cs);
	commit_text(&b, &n);
	creds_text(&b, &n.cr);
	creds_status_free(&n.cr);
	return buf_steal(&b);
}

/* ---- JSON ---------------------------------------------------------------- */

static json_t *hist_json(const metric_hist *h)
{
	json_t *bk = json_array();
	uint64_t cum = 0;
	for (int i = 0; i <= METRIC_BUCKETS; i++) {
		cum += h->bucket[i];
		json_array_append_new(
		    bk, json_pack("{s:o, s:I}", "le",
				  i < METRIC_BUCKETS
				      ? json_real(metric_bucket_le[i])
				      : json_string("+Inf"),
				  "count", (json_int_t)cum));
	}
	return json_pack("{s:I, s:f, s:o}", "count", (json_int_t)cum,
			 "sum_seconds", (double)h->sum_us / 1e6, "buckets", bk);
}

/* null when never, else seconds from now (negative: past) */
static json_t *secs_from_now(time_t when, time_t now)
{
	return when ? json_integer((json_int_t)(when - now)) : json_null();
}

static json_t *creds_json(const creds_status *c)
{
	if (!c->source)
		return json_null();
	time_t now = time(NULL);
	json_t *e = c->last_error ? json_string(c->last_error) : json_null();
	if (!e) /* not UTF-8 */
		e = json_string("(a message that is not UTF-8)");
	return json_pack(
	    "{s:s, s:o, s:o, s:I, s:I, s:I, s:b, s:o, s:o}", "source",
	    c->source, "expires_in_seconds", secs_from_now(c->expires, now),
	    "next_refresh_in_seconds", secs_from_now(c->next_refresh, now),
	    "refreshes", (json_int_t)c->refreshes, "refresh_failures",
	    (json_int_t)c->refresh_failures, "failing", (json_int_t)c->failing,
	    "refreshing", c->refreshing, "last_error", e,
	    "last_error_seconds_ago",
	    c->last_error ? json_integer((json_int_t)(now - c->last_error_at))
			  : json_null());
}

json_t *ctl_metrics_json(const ctl_target *t)
{
	numbers n;
	gather(t, &n);
	const metrics_snapshot *m = &n.m;
	json_t *s3 = json_object();
	for (int op = METRIC_OP_GET; op < METRIC_OP_N; op++) {
		if (!op_used(m, op))
			continue;
		json_t *req = json_object();
		for (int st = 0; st < METRIC_ST_N; st++)
			json_object_set_new(req,
					    metric_status_label((metric_status)st),
					    json_integer((json_int_t)m->requests[op][st]));
		json_object_set_new(
		    s3, metric_op_label((metric_op)op),
		    json_pack("{s:o, s:I, s:I, s:I, s:I, s:I, s:o}", "requests",
			      req, "sent_bytes", (json_int_t)m->sent_bytes[op],
			      "received_bytes",
			      (json_int_t)m->received_bytes[op], "retries",
			      (json_int_t)m->retries[op], "throttles",
			      (json_int_t)m->throttles[op], "stalls",
			      (json_int_t)m->stalls[op], "duration_seconds",
			      hist_json(&m->latency[op])));
	}
	json_t *commit = json_pack(
	    "{s:I, s:I, s:I, s:I, s:f, s:I, s:I, s:o}", "pending_transactions",
	    (json_int_t)n.pending, "pending_bytes", (json_int_t)n.pending_bytes,
	    "pending_upload_bytes", (json_int_t)n.pending_upload,
	    "failed_transactions", (json_int_t)n.failed,
	    "oldest_pending_age_seconds", n.oldest, "commits",
	    (json_int_t)m->commits, "retries", (json_int_t)m->commit_retries,
	    "duration_seconds", hist_json(&m->commit_latency));
	json_t *cr = creds_json(&n.cr);
	creds_status_free(&n.cr);
	return json_pack("{s:o, s:o, s:o}", "s3", s3, "commit", commit,
			 "credentials", cr);
}
