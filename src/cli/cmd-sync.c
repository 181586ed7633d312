/*
 * ckptfs sync MOUNT: commits every open transaction of the mount holding
 * MOUNT and waits until everything written through it is visible in the
 * bucket.  A progress bar on a terminal, plain progress lines otherwise
 * (stderr); exit 0, or 1 with a "ckptfs: ..." message.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "ctl/ctl.h"

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
	struct stat st;
	if (stat(path, &st) < 0) {
		fprintf(stderr, "ckptfs: sync %s: %s\n", path, strerror(errno));
		return 1;
	}
	char *rel = NULL;
	char *mnt = cli_find_mount(path, &rel);
	if (!mnt) {
		fprintf(stderr, "ckptfs: sync %s: not inside a mounted "
				"filesystem\n",
			path);
		return 1;
	}
	char *err = NULL;
	cli_upload_progress p = {.label = "sync", .plain_every = 5};
	json_t *req = json_pack("{s:s}", "cmd", "sync");
	json_t *r = ctl_request(mnt, req, cli_upload_progress_line, &p, &err);
	json_decref(req);
	cli_upload_progress_end(&p);
	int rc = 0;
	if (!r || json_object_get(r, "error")) {
		fprintf(stderr, "ckptfs: sync %s: %s\n", mnt,
			r ? json_string_value(json_object_get(r, "error"))
			  : err);
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
	free(err);
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
