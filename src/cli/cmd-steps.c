/*
 * ckptfs retry MOUNT [STEP] / ckptfs drop MOUNT STEP: what an operator
 * does about a step of the commit queue that failed for good (a 403, a key
 * the store refuses).  `ckptfs status` lists the steps with their ids and
 * errors; a failed step holds back only the later steps that depend on it
 * (doc/commit.md "Errors").  retry tries failed steps again now (after
 * fixing permissions, say); drop gives one up: a commit is aborted (never
 * visible, its uploads deleted), a delete or rename is forgotten.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "ctl/ctl.h"

static int steps_main(const char *cmd, int argc, char **argv, bool need_id)
{
	const char *path = NULL, *idarg = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			if (need_id)
				printf("usage: ckptfs drop MOUNT STEP\n\n"
				       "Gives up a pending step of the commit "
				       "queue (its id as `ckptfs status`\n"
				       "shows): a commit never becomes visible "
				       "and its uploads are deleted;\na delete "
				       "or rename is forgotten.\n");
			else
				printf("usage: ckptfs retry MOUNT [STEP]\n\n"
				       "Tries the steps of the commit queue "
				       "that failed for good again now\n(or only "
				       "STEP, its id as `ckptfs status` "
				       "shows).\n");
			return 0;
		}
		if (!path)
			path = argv[i];
		else if (!idarg)
			idarg = argv[i];
		else {
			fprintf(stderr, "ckptfs: unexpected argument '%s'\n",
				argv[i]);
			return 2;
		}
	}
	char *end = NULL;
	long long id = idarg ? strtoll(idarg, &end, 10) : 0;
	if (!path || (need_id && !idarg) || (idarg && (*end || id <= 0))) {
		fprintf(stderr, "usage: ckptfs %s MOUNT %s\n", cmd,
			need_id ? "STEP" : "[STEP]");
		return 2;
	}
	char *mnt, *rel;
	if (!cli_target(cmd, path, &mnt, &rel))
		return 1;
	json_t *req = json_pack("{s:s, s:I}", "cmd", cmd, "id", (json_int_t)id);
	json_t *r = cli_call(cmd, mnt, mnt, req, NULL, NULL, NULL);
	int rc = 0;
	if (!r) {
		rc = 1;
	} else if (need_id) {
		printf("%s: step %lld dropped (%s)\n", mnt, id,
		       json_string_value(json_object_get(r, "dropped")));
	} else {
		json_int_t n = json_integer_value(json_object_get(r, "retried"));
		printf("%s: %lld failed step%s tried again\n", mnt,
		       (long long)n, n == 1 ? "" : "s");
	}
	json_decref(r);
	free(rel);
	free(mnt);
	return rc;
}

static int cmd_retry(int argc, char **argv)
{
	return steps_main("retry", argc, argv, false);
}

static int cmd_drop(int argc, char **argv)
{
	return steps_main("drop", argc, argv, true);
}

const cli_cmd cli_cmd_retry = {
	.name = "retry",
	.usage = "MOUNT [STEP]",
	.summary = "try commit steps that failed for good again",
	.exec = cmd_retry,
};

const cli_cmd cli_cmd_drop = {
	.name = "drop",
	.usage = "MOUNT STEP",
	.summary = "give up a pending commit step (see status)",
	.exec = cmd_drop,
};
