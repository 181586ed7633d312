/*
 * ckptfs commit PATH...: makes the transactions at, under or holding each
 * PATH (a file or directory inside a ckptfs mount) visible in the bucket
 * now, instead of after commit_delay, and returns once they are.  Prints
 * what it committed; exit 0, or 1 with a "ckptfs: ..." message.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static int commit_one(const char *path)
{
	char *mnt, *rel;
	if (!cli_target("commit", path, &mnt, &rel))
		return 1;
	cli_upload_progress p = {.label = path, .bar_needs_total = true};
	json_t *req = json_pack("{s:s, s:s}", "cmd", "commit", "path", rel);
	json_t *r = cli_call("commit", path, mnt, req,
			     cli_upload_progress_line, &p,
			     cli_upload_progress_end);
	int rc = 0;
	if (!r) {
		rc = 1;
	} else {
		json_t *c = json_object_get(r, "committed");
		size_t i;
		json_t *t;
		if (json_array_size(c) == 0)
			printf("%s: nothing pending (already visible)\n", path);
		json_array_foreach(c, i, t)
		{
			char b[32];
			const char *tp =
				json_string_value(json_object_get(t, "path"));
			cli_fmt_bytes((uint64_t)json_integer_value(
					      json_object_get(t, "bytes")),
				      b);
			printf("committed %s%s%s (%s)\n", mnt,
			       tp && tp[0] ? "/" : "", tp ? tp : "", b);
		}
	}
	json_decref(r);
	free(rel);
	free(mnt);
	return rc;
}

static int cmd_commit(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fprintf(argc < 2 ? stderr : stdout,
			"usage: ckptfs commit PATH...\n\n"
			"Makes what was written at, under or around each PATH "
			"(a file or directory\ninside a ckptfs mount) visible "
			"in the bucket now, and returns once it is.\n");
		return argc < 2 ? 2 : 0;
	}
	int rc = 0;
	for (int i = 1; i < argc; i++)
		rc |= commit_one(argv[i]);
	return rc;
}

const cli_cmd cli_cmd_commit = {
	.name = "commit",
	.usage = "PATH...",
	.summary = "commit what was written under PATH now; wait until visible",
	.exec = cmd_commit,
};
