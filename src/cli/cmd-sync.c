/*
 * ckptfs sync MOUNT: commits every open transaction of the mount holding
 * MOUNT and waits until everything written through it is visible in the
 * bucket.  A progress bar on a terminal, plain progress lines otherwise
 * (stderr); exit 0, or 1 with a "ckptfs: ..." message.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static int cmd_sync(int argc, char **argv)
{
	const char *path = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("usage: ckptfs sync MOUNT\n\n"
			       "Commits everything written through the mount "
			       "and waits until it is\nvisible in the bucket.\n");
			return 0;
		}
		if (path) {
			fprintf(stderr, "ckptfs: unexpected argument '%s'\n",
				argv[i]);
			return 2;
		}
		path = argv[i];
	}
	if (!path) {
		fprintf(stderr, "usage: ckptfs sync MOUNT\n");
		return 2;
	}
	char *mnt, *rel;
	if (!cli_target("sync", path, &mnt, &rel))
		return 1;
	cli_upload_progress p = {.label = "sync", .plain_every = 5};
	json_t *req = json_pack("{s:s}", "cmd", "sync");
	json_t *r = cli_call("sync", mnt, mnt, req, cli_upload_progress_line,
			     &p, cli_upload_progress_end);
	int rc = 0;
	if (!r) {
		rc = 1;
	} else if (json_is_false(json_object_get(r, "writable"))) {
		printf("%s: read-only mount, nothing pending\n", mnt);
	} else {
		char b[32];
		cli_fmt_bytes((uint64_t)json_integer_value(
				      json_object_get(r, "bytes_total")),
			      b);
		printf("%s: everything written is visible (%s uploaded)\n",
		       mnt, b);
	}
	json_decref(r);
	free(rel);
	free(mnt);
	return rc;
}

const cli_cmd cli_cmd_sync = {
	.name = "sync",
	.usage = "MOUNT",
	.summary = "commit everything pending on a mount; wait until visible",
	.exec = cmd_sync,
};
