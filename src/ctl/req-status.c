/*
 * ctl request status: the mount, its cache and downloads, the pending
 * transactions and the numbers of ctl/metrics.c, in one reply (ctl.h).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "commit/engine.h"
#include "ctl/internal.h"

/* eng_status as JSON: [{"path","state","bytes_done","bytes_total",
 * "rate_bytes_per_s","error","retrying"}...], or JSON null without an
 * engine ("retrying": failed by transient errors, still tried again). */
static json_t *pending_json(eng *e, char *err, size_t errsz)
{
	if (!e)
		return json_null();
	eng_txn_status *v = NULL;
	size_t n = 0;
	int rc = eng_status(e, &v, &n);
	json_t *a = json_array();
	if (rc < 0) {
		snprintf(err, errsz, "%s", strerror(-rc));
		return a;
	}
	for (size_t i = 0; i < n; i++)
		json_array_append_new(
			a, json_pack("{s:I, s:s, s:s, s:I, s:I, s:f, s:s?, s:b}",
				     "id", (json_int_t)v[i].id, "path",
				     v[i].path ? v[i].path : "", "state",
				     v[i].state ? v[i].state : "",
				     "bytes_done", (json_int_t)v[i].bytes_done,
				     "bytes_total",
				     (json_int_t)v[i].bytes_total,
				     "rate_bytes_per_s", v[i].rate, "error",
				     v[i].error, "retrying", v[i].retrying));
	eng_status_free(v, n);
	return a;
}

void ctl_req_status(const ctl_req *r)
{
	const ctl_target *t = r->t;
	eng *e = ctl_target_eng(t);
	char perr[256] = "";
	json_t *p = pending_json(e, perr, sizeof perr);
	/* the keys in their order; ctl_metrics_fill puts the numbers in
	 * "cache", "downloads" and "metrics" */
	json_t *j = json_pack("{s:s, s:s, s:s, s:i, s:b, s:{s:s?}, s:{}, s:o, s:b}",
			      "mountpoint", t->mountpoint, "bucket", t->bucket,
			      "prefix", t->prefix, "pid", (int)getpid(),
			      "writable", e != NULL, "cache", "dir",
			      t->cache ? cache_dir(t->cache) : NULL,
			      "downloads", "pending", p, "done", 1);
	if (j && perr[0])
		json_object_set_new(j, "pending_error", json_string(perr));
	if (j) {
		json_object_set_new(j, "metrics", json_object());
		ctl_metrics_fill(t, j);
	}
	if (j && t->metrics_url)
		json_object_set_new(j, "metrics_endpoint",
				    json_string(t->metrics_url));
	ctl_send_json(r->fd, j);
}
