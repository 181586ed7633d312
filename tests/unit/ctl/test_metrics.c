/*
 * Tests for the mount's numbers as text and JSON (ctl/metrics.c): every
 * sample follows its family's TYPE line, ops appear once used, label
 * values are escaped, and the JSON carries the same counts.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/ctl.h"
#include "util/metrics.h"
#include "../support/doc.h"

static ctl_target target(metrics *m)
{
	ctl_target t = {.mountpoint = "/mnt/a \"b\"", .bucket = "bk",
			.prefix = "p/", .metrics = m};
	return t;
}

Test(ctl_metrics, text)
{
	metrics *m = metrics_new();
	metrics_attempt(m, METRIC_OP_UPLOAD_PART, 200, 1, 5u << 20, 0, 40000, 0);
	metrics_attempt(m, METRIC_OP_UPLOAD_PART, 503, 2, 5u << 20, 0, 1000, 0);
	metrics_commit(m, 1.5);
	ctl_target t = target(m);
	char *s = ctl_metrics_text(&t);
	cr_assert(s);
	cr_expect(strstr(s, "ckptfs_mount_info{mountpoint=\"/mnt/a \\\"b\\\"\","
			    "bucket=\"bk\",prefix=\"p/\",writable=\"0\"} 1\n"));
	cr_expect(strstr(s, "ckptfs_s3_requests_total{op=\"upload_part\","
			    "status=\"2xx\"} 1\n"));
	cr_expect(strstr(s, "ckptfs_s3_requests_total{op=\"upload_part\","
			    "status=\"5xx\"} 1\n"));
	cr_expect(strstr(s, "ckptfs_s3_sent_bytes_total{op=\"upload_part\"} "
			    "10485760\n"));
	cr_expect(strstr(s, "ckptfs_s3_retries_total{op=\"upload_part\"} 1\n"));
	cr_expect(strstr(s, "ckptfs_s3_throttles_total{op=\"upload_part\"} 1\n"));
	cr_expect(!strstr(s, "op=\"get\""));
	cr_expect(strstr(s, "ckptfs_commit_duration_seconds_count 1\n"));
	cr_expect(strstr(s, "ckptfs_commits_total 1\n"));
	/* every sample's family was typed before it */
	char *copy = strdup(s), *save = NULL;
	char typed[64][96];
	int nt = 0;
	for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(l, "# TYPE ", 7)) {
			cr_assert(nt < 64);
			sscanf(l + 7, "%95s", typed[nt++]);
			continue;
		}
		if (l[0] == '#')
			continue;
		bool ok = false;
		for (int i = 0; i < nt && !ok; i++)
			ok = !strncmp(l, typed[i], strlen(typed[i]));
		cr_expect(ok, "untyped sample: %s", l);
	}
	free(copy);
	free(s);
	metrics_free(m);
}

Test(ctl_metrics, json_same_numbers)
{
	metrics *m = metrics_new();
	metrics_attempt(m, METRIC_OP_GET, 206, 1, 0, 1234, 2000, 0);
	metrics_attempt(m, METRIC_OP_GET, 0, 2, 0, 0, 5000000, 1);
	ctl_target t = target(m);
	json_t *j = ctl_metrics_json(&t);
	cr_assert(j);
	json_t *g = json_object_get(json_object_get(j, "s3"), "get");
	cr_assert(g);
	cr_expect_eq(json_integer_value(json_object_get(
			 json_object_get(g, "requests"), "2xx")), 1);
	cr_expect_eq(json_integer_value(json_object_get(
			 json_object_get(g, "requests"), "error")), 1);
	cr_expect_eq(json_integer_value(json_object_get(g, "received_bytes")), 1234);
	cr_expect_eq(json_integer_value(json_object_get(g, "stalls")), 1);
	json_t *h = json_object_get(g, "duration_seconds");
	cr_expect_eq(json_integer_value(json_object_get(h, "count")), 2);
	json_t *b = json_object_get(h, "buckets");
	cr_expect_eq(json_array_size(b), METRIC_BUCKETS + 1);
	json_int_t prev = 0;
	for (size_t i = 0; i < json_array_size(b); i++) {
		json_int_t c = json_integer_value(
		    json_object_get(json_array_get(b, i), "count"));
		cr_expect_geq(c, prev);
		prev = c;
	}
	cr_expect_eq(prev, 2);
	json_t *c = json_object_get(j, "commit");
	cr_expect_eq(json_integer_value(json_object_get(c, "pending_transactions")), 0);
	json_decref(j);
	metrics_free(m);
}

/* ---- the table and doc/metrics.md ---------------------------------------- */

/* The line of doc's table of metrics that documents name, or NULL. */
static char *doc_row(char *doc, const char *name, char *line, size_t n)
{
	char pat[128];
	snprintf(pat, sizeof pat, "\n| `%s", name);
	for (char *p = strstr(doc, pat); p; p = strstr(p + 1, pat)) {
		char after = p[strlen(pat)];
		if (after != '`' && after != '{')
			continue;
		char *end = strchr(p + 1, '\n');
		snprintf(line, n, "%.*s", (int)(end ? end - p - 1 : 0), p + 1);
		return line;
	}
	return NULL;
}

Test(ctl_metrics, table_rows)
{
	for (size_t i = 0; i < ctl_metrics_count; i++) {
		const ctl_metric *d = &ctl_metrics[i];
		cr_expect(d->name || d->json, "row %zu is shown nowhere", i);
		cr_expect(!d->text || d->json, "%s: a status row needs its json",
			  d->text);
		cr_expect(d->help && d->help[0]);
		if (!d->name)
			continue;
		cr_expect(!strncmp(d->name, "ckptfs_", 7), "%s", d->name);
		for (size_t k = 0; k < i; k++)
			cr_expect(!ctl_metrics[k].name ||
				      strcmp(ctl_metrics[k].name, d->name),
				  "%s twice", d->name);
	}
}

Test(ctl_metrics, doc_describes_the_table)
{
	char *doc = read_doc("metrics.md");
	static const char *const types[] = {
		[CTL_COUNTER] = "counter", [CTL_GAUGE] = "gauge",
		[CTL_HISTOGRAM] = "histogram", [CTL_INFO] = "gauge"};
	for (size_t i = 0; i < ctl_metrics_count; i++) {
		const ctl_metric *d = &ctl_metrics[i];
		if (!d->name)
			continue;
		char line[2048], want[256];
		cr_assert(doc_row(doc, d->name, line, sizeof line),
			  "doc/metrics.md has no row for %s", d->name);
		snprintf(want, sizeof want, "| %s |", types[d->type]);
		cr_expect(strstr(line, want), "%s: not a %s in the doc", d->name,
			  types[d->type]);
		snprintf(want, sizeof want, "`%s", d->json);
		char *j = strstr(line, want);
		cr_expect(j && (j[strlen(want)] == '`' || j[strlen(want)] == '.'),
			  "%s: the doc does not give %s as its JSON", d->name,
			  d->json);
	}
	/* and the doc names no metric the table lacks */
	for (char *p = strstr(doc, "\n| `ckptfs_"); p;
	     p = strstr(p + 1, "\n| `ckptfs_")) {
		char name[128];
		sscanf(p + 4, "%127[a-z0-9_]", name);
		bool found = !strcmp(name, "ckptfs_mount_info"); /* its labels */
		for (size_t i = 0; i < ctl_metrics_count && !found; i++)
			found = ctl_metrics[i].name &&
				!strcmp(ctl_metrics[i].name, name);
		cr_expect(found, "doc/metrics.md documents %s, not in the table",
			  name);
	}
	free(doc);
}
