/*
 * ckptfs prefetch PATH...: downloads files or whole directories of a mount
 * into its cache, with a progress bar on a terminal.  Returns when every
 * byte is cached (exit 0) or a download failed (exit 1).
 */
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"

static void on_progress(json_t *line, void *arg)
{
	const char *label = arg;
	static uint64_t last_done;
	static double last_t;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	double now = ts.tv_sec + ts.tv_nsec / 1e9;
	uint64_t done = (uint64_t)json_integer_value(
		json_object_get(line, "done_bytes"));
	double rate = last_t > 0 && now > last_t
			      ? (double)(done - last_done) / (now - last_t)
			      : 0;
	last_done = done;
	last_t = now;
	cli_progress(label, done,
		     (uint64_t)json_integer_value(
			     json_object_get(line, "total_bytes")),
		     rate);
}

static void end_bar(void *arg)
{
	(void)arg;
	cli_progress_end();
}

static int prefetch_one(const char *path)
{
	char *mnt, *rel;
	if (!cli_target("prefetch", path, &mnt, &rel))
		return 1;
	json_t *req = json_pack("{s:s, s:s}", "cmd", "prefetch", "path", rel);
	json_t *r = cli_call("prefetch", path, mnt, req, on_progress,
			     (void *)path, end_bar);
	int rc = 0;
	if (!r) {
		rc = 1;
	} else {
		char b[32];
		cli_fmt_bytes((uint64_t)json_integer_value(
				      json_object_get(r, "total_bytes")),
			      b);
		printf("%s: %lld files, %s cached\n", path,
		       (long long)json_integer_value(
			       json_object_get(r, "files")),
		       b);
	}
	json_decref(r);
	free(rel);
	free(mnt);
	return rc;
}

static int cmd_prefetch(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fprintf(argc < 2 ? stderr : stdout,
			"usage: ckptfs prefetch PATH...\n");
		return argc < 2 ? 2 : 0;
	}
	int rc = 0;
	for (int i = 1; i < argc; i++)
		rc |= prefetch_one(argv[i]);
	return rc;
}

const cli_cmd cli_cmd_prefetch = {
	.name = "prefetch",
	.usage = "PATH...",
	.summary = "download files or directories of a mount into its cache",
	.exec = cmd_prefetch,
};
