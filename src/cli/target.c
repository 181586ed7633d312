/*
 * cli target: the mount a subcommand talks to.  cli_target finds the
 * mount holding a path the user named, cli_call sends it one control
 * request (ctl/ctl.h) and reports what went wrong, so every subcommand
 * that asks a mount something says it in the same words.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "ctl/ctl.h"

char *cli_find_mount(const char *path, char **rel)
{
	char *real = realpath(path, NULL);
	if (!real)
		return NULL;
	char *cur = strdup(real);
	struct stat st, pst;
	while (cur && strcmp(cur, "/") != 0 && stat(cur, &st) == 0) {
		char *slash = strrchr(cur, '/');
		char parent[PATH_MAX];
		snprintf(parent, sizeof parent, "%.*s",
			 slash == cur ? 1 : (int)(slash - cur), cur);
		if (stat(parent, &pst) < 0 || pst.st_dev != st.st_dev) {
			size_t n = strlen(cur);
			*rel = strdup(real[n] == '/' ? real + n + 1 : real + n);
			free(real);
			return cur;
		}
		*slash = '\0';
		if (!cur[0])
			break;
	}
	free(cur);
	free(real);
	return NULL;
}

bool cli_target(const char *cmd, const char *path, char **mnt, char **rel)
{
	struct stat st;
	*mnt = *rel = NULL;
	if (stat(path, &st) < 0) {
		fprintf(stderr, "ckptfs: %s %s: %s\n", cmd, path,
			strerror(errno));
		return false;
	}
	*mnt = cli_find_mount(path, rel);
	if (!*mnt) {
		fprintf(stderr, "ckptfs: %s %s: not inside a mounted "
				"filesystem\n",
			cmd, path);
		return false;
	}
	return true;
}

json_t *cli_call(const char *cmd, const char *what, const char *mnt,
		 json_t *req, void (*on_line)(json_t *line, void *arg),
		 void *arg, void (*done)(void *arg))
{
	char *err = NULL;
	json_t *r = ctl_request(mnt, req, on_line, arg, &err);
	json_decref(req);
	if (done)
		done(arg);
	if (r && !json_object_get(r, "error")) {
		free(err);
		return r;
	}
	const char *why = r ? json_string_value(json_object_get(r, "error"))
			    : err;
	if (!why)
		why = "no reply from the mount";
	if (what)
		fprintf(stderr, "ckptfs: %s %s: %s\n", cmd, what, why);
	else /* the mount's message names the command and its target */
		fprintf(stderr, "ckptfs: %s\n", why);
	json_decref(r);
	free(err);
	return NULL;
}
