/*
 * ckptfs status MOUNT [--json]: cache use, pinned bytes, hit/miss counters,
 * download throughput, the credentials (source, time left, refreshes and
 * their failures) and the pending transactions (path, state, bytes
 * uploaded of total, rate, last error) of the daemon serving MOUNT.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "ctl/ctl.h"

static uint64_t num(json_t *o, const char *k)
{
	return (uint64_t)json_integer_value(json_object_get(o, k));
}

/* The value at a dotted path of the reply (ctl_metric.json). */
static json_t *at_path(json_t *o, const char *path)
{
	char key[64];
	while (o && *path) {
		size_t n = strcspn(path, ".");
		snprintf(key, sizeof key, "%.*s", (int)n, path);
		o = json_object_get(o, key);
		path += n + (path[n] == '.');
	}
	return o;
}

/* One row of ctl_metrics[] under its section. */
static void print_row(const ctl_metric *d, json_t *v)
{
	char b[32];
	uint64_t n = (uint64_t)json_number_value(v);
	if (!n && (d->flags & CTL_M_NONE_IF_0))
		snprintf(b, sizeof b, "none");
	else if (d->unit == CTL_BYTES || d->unit == CTL_BYTES_PER_S)
		cli_fmt_bytes(n, b);
	else
		snprintf(b, sizeof b, "%llu", (unsigned long long)n);
	printf("  %-18s %s%s\n", d->text, b,
	       d->unit == CTL_BYTES_PER_S ? "/s" : "");
}

/* The rows of ctl_metrics[] that `ckptfs status` prints, a section per
 * first key of their json path ("cache   DIR", "downloads"). */
static void print_metrics(json_t *r)
{
	size_t seclen = 0;
	const char *sec = NULL;
	for (size_t i = 0; i < ctl_metrics_count; i++) {
		const ctl_metric *d = &ctl_metrics[i];
		if (!d->text || !d->json)
			continue;
		size_t n = strcspn(d->json, ".");
		if (!sec || n != seclen || strncmp(sec, d->json, n)) {
			sec = d->json;
			seclen = n;
			char name[32];
			snprintf(name, sizeof name, "%.*s", (int)n, sec);
			const char *dir = json_string_value(
			    json_object_get(json_object_get(r, name), "dir"));
			if (dir)
				printf("%-7s %s\n", name, dir);
			else
				printf("%s\n", name);
		}
		print_row(d, at_path(r, d->json));
	}
}

static void print_pending(json_t *r)
{
	json_t *p = json_object_get(r, "pending");
	printf("pending transactions");
	if (!json_is_array(p)) {
		printf("  none (read-only mount)\n");
		return;
	}
	const char *perr = json_string_value(json_object_get(r, "pending_error"));
	if (perr) {
		printf("  unknown: %s\n", perr);
		return;
	}
	if (json_array_size(p) == 0) {
		printf("  none\n");
		return;
	}
	putchar('\n');
	size_t i;
	json_t *t;
	json_array_foreach(p, i, t)
	{
		char d[32], tot[32], rt[32];
		uint64_t done = num(t, "bytes_done"), total = num(t, "bytes_total");
		cli_fmt_bytes(done, d);
		cli_fmt_bytes(total, tot);
		cli_fmt_bytes((uint64_t)json_number_value(
				      json_object_get(t, "rate_bytes_per_s")),
			      rt);
		printf("  %s\n    %-16s %llu\n    %-16s %s\n"
		       "    %-16s %s / %s (%.0f%%)\n    %-16s %s/s\n",
		       json_string_value(json_object_get(t, "path")), "step",
		       (unsigned long long)num(t, "id"), "state",
		       json_string_value(json_object_get(t, "state")),
		       "uploaded", d, tot,
		       total ? 100.0 * (double)done / (double)total : 100.0,
		       "rate", rt);
		const char *err = json_string_value(json_object_get(t, "error"));
		if (err)
			printf("    %-16s %s\n", "error", err);
	}
}

/* The "credentials" object of the status's metrics (ctl/metrics.c). */
static void print_credentials(json_t *c)
{
	if (!json_is_object(c))
		return;
	printf("credentials  %s\n",
	       json_string_value(json_object_get(c, "source")));
	json_t *exp = json_object_get(c, "expires_in_seconds");
	json_int_t left = json_integer_value(exp);
	if (!json_is_integer(exp))
		printf("  %-18s %s\n", "expires", "never");
	else if (left >= 0)
		printf("  %-18s in %lld s\n", "expires", (long long)left);
	else
		printf("  %-18s %lld s ago\n", "expired", (long long)-left);
	printf("  %-18s %llu\n", "refreshes",
	       (unsigned long long)num(c, "refreshes"));
	uint64_t failing = num(c, "failing");
	printf("  %-18s %llu", "refresh failures",
	       (unsigned long long)num(c, "refresh_failures"));
	json_t *next = json_object_get(c, "next_refresh_in_seconds");
	if (failing)
		printf(" (%llu in a row; next try in %lld s)",
		       (unsigned long long)failing,
		       (long long)json_integer_value(next));
	putchar('\n');
	const char *err = json_string_value(json_object_get(c, "last_error"));
	if (err)
		printf("  %-18s %lld s ago: %s\n", "last failure",
		       (long long)json_integer_value(
			   json_object_get(c, "last_error_seconds_ago")),
		       err);
}

static void print_table(json_t *r)
{
	printf("mount   %s\nsource  s3://%s/%s\npid     %lld\n",
	       json_string_value(json_object_get(r, "mountpoint")),
	       json_string_value(json_object_get(r, "bucket")),
	       json_string_value(json_object_get(r, "prefix")),
	       (long long)json_integer_value(json_object_get(r, "pid")));
	const char *murl = json_string_value(json_object_get(r, "metrics_endpoint"));
	if (murl)
		printf("metrics %s\n", murl);
	print_metrics(r);
	print_credentials(
	    json_object_get(json_object_get(r, "metrics"), "credentials"));
	print_pending(r);
}

static int cmd_status(int argc, char **argv)
{
	bool as_json = false;
	const char *mnt = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			as_json = true;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("usage: ckptfs status MOUNT [--json]\n");
			return 0;
		} else if (!mnt)
			mnt = argv[i];
		else {
			fprintf(stderr, "ckptfs: unexpected argument '%s'\n",
				argv[i]);
			return 2;
		}
	}
	if (!mnt) {
		fprintf(stderr, "usage: ckptfs status MOUNT [--json]\n");
		return 2;
	}
	char *err = NULL;
	json_t *req = json_pack("{s:s}", "cmd", "status");
	json_t *r = ctl_request(mnt, req, NULL, NULL, &err);
	json_decref(req);
	if (!r) {
		fprintf(stderr, "ckptfs: %s\n", err ? err : "no reply");
		free(err);
		return 1;
	}
	if (as_json) {
		json_object_del(r, "done");
		json_dumpf(r, stdout, JSON_INDENT(2));
		putchar('\n');
	} else {
		print_table(r);
	}
	json_decref(r);
	return 0;
}

const cli_cmd cli_cmd_status = {
	.name = "status",
	.usage = "MOUNT [--json]",
	.summary = "cache use, counters and downloads of a mount",
	.exec = cmd_status,
};
