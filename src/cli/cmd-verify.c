/*
 * ckptfs verify PATH|s3://BUCKET[/PREFIX] [--json] [--threads N]: re-reads
 * every object of a checkpoint from the bucket and checks it against what
 * its manifests recorded (size, ETag, CRC-32C, block CRCs), or against the
 * size and MD5 ETag of an object ckptfs did not write (verify/verify.h,
 * doc/verify.md).  A PATH inside a mount is verified by the daemon serving
 * it, with the mount's endpoint and credentials; an s3:// URL by this
 * process, with the credentials it finds (as `ckptfs gc`).
 *
 * Prints each bad file and a summary line (--json: one document with
 * every file), a progress bar on stderr when it is a terminal.  Exit 0
 * when every byte checks, 1 when a file is bad, 2 for a usage error, 3
 * when the run could not be done (nothing there, the bucket unreachable).
 */
#include <getopt.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "ctl/ctl.h"
#include "http/loop.h"
#include "s3/client.h"
#include "util/buf.h"
#include "verify/verify.h"

typedef struct vargs {
	char *target;
	bool json;
	bool insecure;
	unsigned threads;
	s3_settings s;
} vargs;

typedef struct vout {
	bool json;
	json_t *files; /* --json: every file */
	cli_rate rate;
	bool drawn;
	pthread_mutex_t mu;
} vout;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ckptfs verify PATH|s3://BUCKET[/PREFIX] [options]\n"
		"\n"
		"Re-reads every object of a checkpoint from the bucket (not the cache)\n"
		"and checks it against its manifests: size, ETag, CRC-32C and the\n"
		"CRC-32C of each block. Objects without a manifest are checked by size\n"
		"and, where the ETag is an MD5 (not multipart), by MD5.\n"
		"\n"
		"  --json                 one JSON document with every file\n"
		"  --threads N            objects read at once (default 4)\n"
		"  --endpoint URL, --region REGION, --profile NAME, -o OPT[,OPT...]\n"
		"                         for an s3:// URL, as for `ckptfs gc`\n"
		"\n"
		"Exit status: 0 every byte checks, 1 a file is bad, 2 usage, 3 the\n"
		"verification could not be done.\n");
}

enum { OPT_JSON = CLI_OPT_OWN, OPT_THREADS };

/* 0, -1 (usage error) or 1 (--help printed). */
static int parse_args(vargs *a, int argc, char **argv)
{
	static const struct option lo[] = {
		{"help", no_argument, NULL, 'h'},
		{"json", no_argument, NULL, OPT_JSON},
		{"threads", required_argument, NULL, OPT_THREADS},
		CLI_S3_LONG_OPTS,
	};
	int c;
	const char *operand;
	char **const slots[] = {&a->target};
	optind = 1;
	opterr = 0;
	while ((c = cli_getopt(argc, argv, "+ho:", lo, &operand)) != -1) {
		char *end;
		switch (c) {
		case CLI_OPERAND:
			if (cli_take_operand("verify", slots, 1, operand) < 0)
				return -1;
			break;
		case 'h':
			usage(stdout);
			return 1;
		case OPT_JSON:
			a->json = true;
			break;
		case OPT_THREADS:
			a->threads = (unsigned)strtoul(optarg, &end, 10);
			if (*end || !optarg[0] || a->threads < 1 ||
			    a->threads > 64) {
				fprintf(stderr, "ckptfs: verify: --threads "
						"takes a number from 1 to 64\n");
				return -1;
			}
			break;
		default: /* -o, --endpoint, --region, --profile */
			if (cli_s3_arg("verify", &a->s, &a->insecure, c, optarg,
				       argv[optind - 1]) < 0)
				return -1;
		}
	}
	if (!a->target) {
		usage(stderr);
		return -1;
	}
	return 0;
}

/* ---- output: the same for both ways ------------------------------------- */

static void clear_bar(vout *o)
{
	if (o->drawn && isatty(STDERR_FILENO)) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
	}
}

static void out_file(vout *o, json_t *f)
{
	pthread_mutex_lock(&o->mu);
	if (o->json) {
		json_array_append(o->files, f);
	} else if (!json_is_true(json_object_get(f, "ok"))) {
		clear_bar(o);
		printf("BAD  %s: %s\n",
		       json_string_value(json_object_get(f, "path"))[0]
			   ? json_string_value(json_object_get(f, "path"))
			   : json_string_value(json_object_get(f, "key")),
		       json_string_value(json_object_get(f, "problem")));
		fflush(stdout);
	}
	pthread_mutex_unlock(&o->mu);
}

static void out_progress(vout *o, uint64_t done, uint64_t total)
{
	if (!isatty(STDERR_FILENO))
		return;
	pthread_mutex_lock(&o->mu);
	cli_progress("verify", done, total, cli_rate_update(&o->rate, done));
	o->drawn = true;
	pthread_mutex_unlock(&o->mu);
}

static json_int_t num(json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

/* The summary; the exit status. */
static int out_end(vout *o, const char *target, json_t *sum)
{
	clear_bar(o);
	json_int_t files = num(sum, "files"), bad = num(sum, "bad");
	int rc = bad ? 1 : 0;
	if (files == 0 && num(sum, "skipped") == 0) {
		fprintf(stderr, "ckptfs: verify: nothing stored under %s\n",
			target);
		rc = 3;
	}
	if (o->json) {
		json_t *doc = json_pack("{s:s, s:b, s:O, s:O}", "target", target,
					"ok", rc == 0, "summary", sum, "files",
					o->files);
		json_dumpf(doc, stdout, JSON_INDENT(2));
		putchar('\n');
		json_decref(doc);
		return rc;
	}
	char b[32];
	cli_fmt_bytes((uint64_t)num(sum, "bytes"), b);
	printf("verify %s: %lld file%s, %s read: %lld ok, %lld bad "
	       "(%lld against manifests, %lld by MD5 ETag, %lld by size only)",
	       target, (long long)files, files == 1 ? "" : "s", b,
	       (long long)num(sum, "ok"),
	       (long long)bad, (long long)num(sum, "by_manifest"),
	       (long long)num(sum, "by_md5"), (long long)num(sum, "by_size"));
	if (num(sum, "skipped"))
		printf(", %lld objects skipped (not part of a committed "
		       "checkpoint)",
		       (long long)num(sum, "skipped"));
	putchar('\n');
	return rc;
}

/* ---- a path on a mount: the daemon verifies ------------------------------ */

static void on_line(json_t *line, void *arg)
{
	vout *o = arg;
	json_t *f = json_object_get(line, "file");
	if (f)
		out_file(o, f);
	else if (json_object_get(line, "total_bytes"))
		out_progress(o, (uint64_t)num(line, "done_bytes"),
			     (uint64_t)num(line, "total_bytes"));
}

static void verify_done(void *arg)
{
	clear_bar(arg);
}

static int verify_path(vargs *a, vout *o)
{
	char *mnt, *rel;
	if (!cli_target("verify", a->target, &mnt, &rel))
		return 3;
	json_t *req = json_pack("{s:s, s:s, s:i, s:b}", "cmd", "verify", "path",
				rel, "threads", (int)a->threads, "all", o->json);
	json_t *r = cli_call("verify", NULL, mnt, req, on_line, o,
			     verify_done);
	int rc = 3;
	if (r)
		rc = out_end(o, json_string_value(json_object_get(r, "target")),
			     json_object_get(r, "summary"));
	json_decref(r);
	free(rel);
	free(mnt);
	return rc;
}

/* ---- an s3:// URL: this process verifies ------------------------------- */

static void cb_file(void *arg, const verify_file *f)
{
	json_t *j = verify_file_json(f);
	out_file(arg, j);
	json_decref(j);
}

static void cb_progress(void *arg, uint64_t db, uint64_t tb, size_t df,
			size_t tf)
{
	(void)df;
	(void)tf;
	out_progress(arg, db, tb);
}

static int verify_url(vargs *a, vout *o)
{
	s3_settings *s = &a->s;
	cli_bucket bk;
	int rc = cli_bucket_open("verify", a->target, s, a->insecure, &bk);
	if (rc < 0)
		return rc == -1 ? 2 : 3;
	char *err = NULL;
	verify_cb cb = {cb_file, cb_progress, NULL, o};
	verify_summary sum;
	rc = verify_run(bk.c, s->prefix, a->threads, &cb, &sum, &err);
	buf t = BUF_INIT;
	size_t pl = strlen(s->prefix);
	buf_printf(&t, "s3://%s/%.*s", s->bucket,
		   (int)(pl && s->prefix[pl - 1] == '/' ? pl - 1 : pl),
		   s->prefix);
	if (rc < 0) {
		clear_bar(o);
		fprintf(stderr, "ckptfs: verify %s: %s\n", buf_cstr(&t),
			err ? err : "failed");
		free(err);
		rc = 3;
	} else {
		json_t *js = verify_summary_json(&sum);
		rc = out_end(o, buf_cstr(&t), js);
		json_decref(js);
	}
	buf_free(&t);
	cli_bucket_close(&bk);
	return rc;
}

static int cmd_verify(int argc, char **argv)
{
	vargs a = {.threads = 4};
	int p = parse_args(&a, argc, argv);
	int rc = p < 0 ? 2 : 0;
	if (p == 0) {
		vout o = {.json = a.json, .files = json_array()};
		pthread_mutex_init(&o.mu, NULL);
		rc = strncmp(a.target, "s3://", 5) ? verify_path(&a, &o)
						    : verify_url(&a, &o);
		json_decref(o.files);
		pthread_mutex_destroy(&o.mu);
	}
	free(a.target);
	s3_settings_free(&a.s);
	return rc;
}

const cli_cmd cli_cmd_verify = {
	.name = "verify",
	.usage = "PATH|s3://BUCKET[/PREFIX] [--json] [--threads N]",
	.summary = "re-read a checkpoint from the bucket and check its "
		   "checksums",
	.exec = cmd_verify,
};
