/*
 * ctl metrics: the mount's numbers in one table, for the Prometheus
 * endpoint (daemon/exporter.c), `ckptfs status --json` and `ckptfs
 * status`: the mount's counters (util/metrics.h), the cache's state
 * (cache_get_stats), the commit engine's pending transactions
 * (eng_status), the credentials' expiry and refreshes
 * (creds_chain_status).  doc/metrics.md describes every metric.  A new
 * metric is one row of ctl_metrics[] (plus, when it is a new number, a
 * field of `numbers` and the line of gather() that reads it).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commit/engine.h"
#include "ctl/internal.h"
#include "util/buf.h"
#include "util/metrics.h"

typedef struct numbers {
	metrics_snapshot m;
	cache_stats cs;
	bool writable;
	uint64_t pending, pending_bytes, pending_upload, failed;
	double oldest;
	creds_status cr; /* source NULL: no chain (or no set yet) */
	uint64_t cr_failing;
} numbers;

/* ctl_metric.val: what lies at .off in numbers */
enum {
	V_U64,       /* uint64_t */
	V_DBL,       /* double */
	V_WHEN,      /* time_t, shown as seconds from now; 0: absent (null) */
	V_STR,       /* const char *: CTL_INFO's label, named by json's last key */
	V_HIST,      /* metric_hist */
	V_OP_U64,    /* uint64_t[METRIC_OP_N], label op */
	V_OP_STATUS, /* uint64_t[METRIC_OP_N][METRIC_ST_N], labels op, status */
	V_OP_HIST,   /* metric_hist[METRIC_OP_N], label op */
};

/* ctl_metric.when */
enum {
	W_ALWAYS,
	W_CREDS, /* the mount has credentials (metrics.credentials: null) */
};

#define N(f) offsetof(numbers, f)
#define ROW(nm, ty, un, js, tx, fl, v, w, f, h)                             \
	{.name = nm, .type = ty, .help = h, .unit = un, .json = js,         \
	 .text = tx, .flags = fl, .val = v, .when = w, .off = N(f)}
/* one number for every output that names it */
#define COUNTER(nm, un, js, tx, f, h)                                       \
	ROW(nm, CTL_COUNTER, un, js, tx, 0, V_U64, W_ALWAYS, f, h)
#define GAUGE(nm, un, js, tx, f, h)                                         \
	ROW(nm, CTL_GAUGE, un, js, tx, 0, V_U64, W_ALWAYS, f, h)
/* per S3 operation, in metrics.s3.OP */
#define PER_OP(nm, un, key, f, h)                                           \
	ROW(nm, CTL_COUNTER, un, "metrics.s3.OP." key, NULL, 0, V_OP_U64,   \
	    W_ALWAYS, f, h)
/* in metrics.credentials, which is null without credentials */
#define CREDS(nm, ty, key, v, f, h)                                         \
	ROW(nm, ty, CTL_COUNT, "metrics.credentials." key, NULL, 0, v,      \
	    W_CREDS, f, h)

/* In the order of every output. */
const ctl_metric ctl_metrics[] = {
	/* S3 requests */
	ROW("ckptfs_s3_requests_total", CTL_COUNTER, CTL_COUNT,
	    "metrics.s3.OP.requests", NULL, 0, V_OP_STATUS, W_ALWAYS,
	    m.requests,
	    "S3 request attempts by operation and HTTP status class "
	    "(error: no reply)"),
	PER_OP("ckptfs_s3_sent_bytes_total", CTL_BYTES, "sent_bytes",
	       m.sent_bytes, "Request body bytes sent to S3"),
	PER_OP("ckptfs_s3_received_bytes_total", CTL_BYTES, "received_bytes",
	       m.received_bytes, "Reply body bytes received from S3"),
	PER_OP("ckptfs_s3_retries_total", CTL_COUNT, "retries", m.retries,
	       "Attempts that repeated a failed attempt of the same request"),
	PER_OP("ckptfs_s3_throttles_total", CTL_COUNT, "throttles",
	       m.throttles, "Replies asking for less (503 SlowDown, 429)"),
	PER_OP("ckptfs_s3_stalls_total", CTL_COUNT, "stalls", m.stalls,
	       "Attempts abandoned by a stall deadline"),
	ROW("ckptfs_s3_request_duration_seconds", CTL_HISTOGRAM, CTL_SECONDS,
	    "metrics.s3.OP.duration_seconds", NULL, 0, V_OP_HIST, W_ALWAYS,
	    m.latency, "Duration of one S3 request attempt"),
	/* the read cache, as `ckptfs status` shows it */
	GAUGE("ckptfs_cache_used_bytes", CTL_BYTES, "cache.bytes", "used",
	      cs.bytes, "Bytes the cache's files use"),
	GAUGE("ckptfs_cache_pinned_bytes", CTL_BYTES, "cache.pinned_bytes",
	      "pinned", cs.pinned_bytes,
	      "Cached bytes held by open handles (not evictable)"),
	ROW("ckptfs_cache_capacity_bytes", CTL_GAUGE, CTL_BYTES, "cache.cap",
	    "cap", CTL_M_NONE_IF_0, V_U64, W_ALWAYS, cs.cap,
	    "The cache_size cap (0: none)"),
	GAUGE(NULL, CTL_BYTES, "cache.min_free", "min free disk", cs.min_free,
	      "The cache_min_free option"),
	GAUGE("ckptfs_cache_entries", CTL_COUNT, "cache.entries", "entries",
	      cs.entries, "Cache entries"),
	COUNTER("ckptfs_cache_hits_total", CTL_COUNT, "cache.hits", "hits",
		cs.hits, "Opens served by a cache entry that existed"),
	COUNTER("ckptfs_cache_misses_total", CTL_COUNT, "cache.misses",
		"misses", cs.misses,
		"Opens that had to download into the cache"),
	COUNTER("ckptfs_cache_uncached_opens_total", CTL_COUNT,
		"cache.uncached_opens", "uncached opens", cs.uncached_opens,
		"Opens read uncached: the cache could not take the object"),
	COUNTER("ckptfs_cache_replaced_opens_total", CTL_COUNT,
		"cache.replaced_opens", "replaced at open", cs.replaced_opens,
		"Opens that found the version they pinned replaced in the "
		"bucket before its first chunk came, and pinned the new one"),
	COUNTER("ckptfs_cache_evictions_total", CTL_COUNT, "cache.evictions",
		"evictions", cs.evictions, "Cache entries evicted"),
	COUNTER("ckptfs_cache_verify_failures_total", CTL_COUNT,
		"cache.verify_failures", "corrupt chunks", cs.verify_failures,
		"Downloaded chunks that failed their CRC-32C check"),
	GAUGE("ckptfs_cache_active_downloads", CTL_COUNT, "downloads.active",
	      "active", cs.active_downloads, "Cache entries being downloaded"),
	COUNTER("ckptfs_cache_downloaded_bytes_total", CTL_BYTES,
		"downloads.downloaded_bytes", "downloaded", cs.downloaded_bytes,
		"Bytes downloaded into the cache"),
	ROW(NULL, CTL_GAUGE, CTL_BYTES_PER_S, "downloads.rate_bytes_per_s",
	    "throughput", 0, V_DBL, W_ALWAYS, cs.download_rate,
	    "Download rate over the last few seconds"),
	/* the commit engine */
	GAUGE("ckptfs_commit_pending_transactions", CTL_COUNT,
	      "metrics.commit.pending_transactions", NULL, pending,
	      "Transactions written but not yet visible in the bucket"),
	GAUGE("ckptfs_commit_pending_bytes", CTL_BYTES,
	      "metrics.commit.pending_bytes", NULL, pending_bytes,
	      "Bytes of the pending transactions' files"),
	GAUGE("ckptfs_commit_pending_upload_bytes", CTL_BYTES,
	      "metrics.commit.pending_upload_bytes", NULL, pending_upload,
	      "Bytes of pending transactions not uploaded yet"),
	GAUGE("ckptfs_commit_failed_transactions", CTL_COUNT,
	      "metrics.commit.failed_transactions", NULL, failed,
	      "Pending steps that failed for good (ckptfs retry / drop) or "
	      "failed transiently past transient_limit (still retried)"),
	ROW("ckptfs_commit_oldest_pending_age_seconds", CTL_GAUGE, CTL_SECONDS,
	    "metrics.commit.oldest_pending_age_seconds", NULL, 0, V_DBL,
	    W_ALWAYS, oldest,
	    "Age of the oldest pending transaction (0: none)"),
	COUNTER("ckptfs_commits_total", CTL_COUNT, "metrics.commit.commits",
		NULL, m.commits,
		"Transactions that reached their commit point"),
	COUNTER("ckptfs_commit_retries_total", CTL_COUNT,
		"metrics.commit.retries", NULL, m.commit_retries,
		"Upload jobs and publish steps the engine ran again after a "
		"transient failure"),
	ROW("ckptfs_commit_duration_seconds", CTL_HISTOGRAM, CTL_SECONDS,
	    "metrics.commit.duration_seconds", NULL, 0, V_HIST, W_ALWAYS,
	    m.commit_latency, "From a transaction's seal to its commit point"),
	/* the credentials (`ckptfs status` prints them in a section of its
	 * own: cli/cmd-status.c) */
	CREDS("ckptfs_credentials_info", CTL_INFO, "source", V_STR, cr.source,
	      "The credential provider whose set signs requests (always 1)"),
	CREDS("ckptfs_credentials_expiry_seconds", CTL_GAUGE,
	      "expires_in_seconds", V_WHEN, cr.expires,
	      "Seconds until the current credentials expire (negative: "
	      "expired; absent: they never do)"),
	CREDS(NULL, CTL_GAUGE, "next_refresh_in_seconds", V_WHEN,
	      cr.next_refresh, "Seconds until the refresher's next try"),
	CREDS("ckptfs_credentials_refreshes_total", CTL_COUNTER, "refreshes",
	      V_U64, cr.refreshes,
	      "Credential sets fetched again before expiry"),
	CREDS("ckptfs_credentials_refresh_failures_total", CTL_COUNTER,
	      "refresh_failures", V_U64, cr.refresh_failures,
	      "Credential refreshes that failed (retried with backoff)"),
	CREDS("ckptfs_credentials_refresh_failing", CTL_GAUGE, "failing", V_U64,
	      cr_failing,
	      "Credential refreshes failed in a row (0: the last one worked)"),
};
const size_t ctl_metrics_count = sizeof ctl_metrics / sizeof ctl_metrics[0];

static void gather(const ctl_target *t, numbers *n)
{
	memset(n, 0, sizeof *n);
	metrics_snap(t->metrics, &n->m);
	creds_chain *ch = t->s3 ? s3_client_creds(t->s3) : NULL;
	if (ch && creds_chain_status(ch, &n->cr) < 0)
		creds_status_free(&n->cr); /* the numbers without the text */
	n->cr_failing = n->cr.failing;
	if (t->cache)
		cache_get_stats(t->cache, &n->cs);
	eng *e = ctl_target_eng(t);
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

static const void *at(const numbers *n, const ctl_metric *d)
{
	return (const char *)n + d->off;
}

static bool shown(const numbers *n, const ctl_metric *d)
{
	return d->when != W_CREDS || n->cr.source;
}

static bool op_used(const metrics_snapshot *m, int op)
{
	return m->latency[op].count > 0;
}

/* ---- text exposition ----------------------------------------------------- */

static const char *type_name(ctl_metric_type t)
{
	return t == CTL_COUNTER ? "counter" : t == CTL_HISTOGRAM ? "histogram"
							      : "gauge";
}

static void head(buf *b, const char *name, const char *type, const char *help)
{
	buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
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

/* The json path's last key (an info metric's label). */
static const char *last_key(const char *path)
{
	const char *dot = strrchr(path, '.');
	return dot ? dot + 1 : path;
}

static void metric_text(buf *b, const numbers *n, const ctl_metric *d)
{
	const void *p = at(n, d);
	const metrics_snapshot *m = &n->m;
	if (d->val == V_WHEN && !*(const time_t *)p)
		return; /* absent: never */
	head(b, d->name, type_name(d->type), d->help);
	switch (d->val) {
	case V_U64:
		buf_printf(b, "%s %.17g\n", d->name,
			   (double)*(const uint64_t *)p);
		break;
	case V_DBL:
		buf_printf(b, "%s %.17g\n", d->name, *(const double *)p);
		break;
	case V_WHEN:
		buf_printf(b, "%s %.17g\n", d->name,
			   (double)(*(const time_t *)p - time(NULL)));
		break;
	case V_STR:
		buf_printf(b, "%s{%s=\"", d->name, last_key(d->json));
		label_value(b, *(const char *const *)p);
		buf_puts(b, "\"} 1\n");
		break;
	case V_HIST:
		metrics_hist_text(b, d->name, "", p);
		break;
	default:
		for (int op = METRIC_OP_GET; op < METRIC_OP_N; op++) {
			if (!op_used(m, op))
				continue;
			const char *ol = metric_op_label((metric_op)op);
			if (d->val == V_OP_U64) {
				buf_printf(b, "%s{op=\"%s\"} %llu\n", d->name, ol,
					   (unsigned long long)((const uint64_t *)p)[op]);
			} else if (d->val == V_OP_STATUS) {
				const uint64_t(*v)[METRIC_ST_N] = p;
				for (int st = 0; st < METRIC_ST_N; st++)
					buf_printf(b, "%s{op=\"%s\",status=\"%s\"} %llu\n",
						   d->name, ol,
						   metric_status_label((metric_status)st),
						   (unsigned long long)v[op][st]);
			} else {
				char l[64];
				snprintf(l, sizeof l, "op=\"%s\"", ol);
				metrics_hist_text(b, d->name, l,
						  &((const metric_hist *)p)[op]);
			}
		}
	}
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
	for (size_t i = 0; i < ctl_metrics_count; i++)
		if (ctl_metrics[i].name && shown(&n, &ctl_metrics[i]))
			metric_text(&b, &n, &ctl_metrics[i]);
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

/* The object at the first len bytes of a dotted path under root, made
 * (empty) where missing. */
static json_t *obj_at(json_t *root, const char *path, size_t len)
{
	json_t *o = root;
	const char *p = path, *end = path + len;
	while (o && p < end) {
		const char *dot = memchr(p, '.', (size_t)(end - p));
		size_t kl = dot ? (size_t)(dot - p) : (size_t)(end - p);
		char key[64];
		snprintf(key, sizeof key, "%.*s", (int)kl, p);
		json_t *c = json_object_get(o, key);
		if (!json_is_object(c)) {
			c = json_object();
			json_object_set_new(o, key, c);
		}
		o = c;
		p += kl + 1;
	}
	return o;
}

/* One operation's value of a per-op row. */
static json_t *op_json(const ctl_metric *d, const void *p, int op)
{
	if (d->val == V_OP_U64)
		return json_integer((json_int_t)((const uint64_t *)p)[op]);
	if (d->val == V_OP_HIST)
		return hist_json(&((const metric_hist *)p)[op]);
	const uint64_t(*v)[METRIC_ST_N] = p;
	json_t *o = json_object();
	for (int st = 0; st < METRIC_ST_N; st++)
		json_object_set_new(o, metric_status_label((metric_status)st),
				    json_integer((json_int_t)v[op][st]));
	return o;
}

static json_t *value_json(const ctl_metric *d, const void *p, time_t now)
{
	switch (d->val) {
	case V_U64: return json_integer((json_int_t)*(const uint64_t *)p);
	case V_DBL: return json_real(*(const double *)p);
	case V_WHEN: return secs_from_now(*(const time_t *)p, now);
	case V_STR: return json_string(*(const char *const *)p);
	default: return hist_json(p);
	}
}

static void metric_json(json_t *root, const numbers *n, const ctl_metric *d,
			time_t now)
{
	const char *path = d->json, *key = last_key(path);
	if (!shown(n, d)) {
		/* the object holding it is null: "metrics.credentials" */
		const char *oend = key - 1, *name = oend;
		while (name > path && name[-1] != '.')
			name--;
		json_t *parent = obj_at(root, path,
					name > path ? (size_t)(name - 1 - path) : 0);
		char k[64];
		snprintf(k, sizeof k, "%.*s", (int)(oend - name), name);
		if (!json_object_get(parent, k))
			json_object_set_new(parent, k, json_null());
		return;
	}
	const void *p = at(n, d);
	const char *op = strstr(path, ".OP.");
	if (!op) {
		json_object_set_new(obj_at(root, path, (size_t)(key - 1 - path)),
				    key, value_json(d, p, now));
		return;
	}
	json_t *ops = obj_at(root, path, (size_t)(op - path));
	for (int i = METRIC_OP_GET; i < METRIC_OP_N; i++)
		if (op_used(&n->m, i))
			json_object_set_new(
			    obj_at(ops, metric_op_label((metric_op)i),
				   strlen(metric_op_label((metric_op)i))),
			    op + 4, op_json(d, p, i));
}

/* What `status --json` says of the credentials beyond their numbers. */
static void creds_more(json_t *c, const creds_status *cr, time_t now)
{
	json_t *e = cr->last_error ? json_string(cr->last_error) : json_null();
	if (!e) /* not UTF-8 */
		e = json_string("(a message that is not UTF-8)");
	json_object_set_new(c, "refreshing", json_boolean(cr->refreshing));
	json_object_set_new(c, "last_error", e);
	json_object_set_new(c, "last_error_seconds_ago",
			    cr->last_error
				? json_integer((json_int_t)(now - cr->last_error_at))
				: json_null());
}

void ctl_metrics_fill(const ctl_target *t, json_t *reply)
{
	numbers n;
	gather(t, &n);
	time_t now = time(NULL);
	for (size_t i = 0; i < ctl_metrics_count; i++)
		if (ctl_metrics[i].json)
			metric_json(reply, &n, &ctl_metrics[i], now);
	json_t *c = json_object_get(json_object_get(reply, "metrics"),
				    "credentials");
	if (json_is_object(c))
		creds_more(c, &n.cr, now);
	creds_status_free(&n.cr);
}

json_t *ctl_metrics_json(const ctl_target *t)
{
	json_t *r = json_object();
	ctl_metrics_fill(t, r);
	json_t *m = json_incref(json_object_get(r, "metrics"));
	json_decref(r);
	return m;
}
