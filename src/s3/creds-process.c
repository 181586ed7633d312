/*
 * creds-process: credential_process, the profile setting that names a
 * program printing credentials as JSON (Version 1, AccessKeyId,
 * SecretAccessKey, SessionToken, Expiration; creds-parse.c).
 *
 * The command line is split into words as the AWS CLI does (no shell) and
 * run with posix_spawnp (the process has threads: no fork).  Its stdout is
 * read up to PROCESS_OUT_MAX bytes; its stderr is ours, so what it says
 * reaches the user's terminal or log as it would under the AWS CLI.  It
 * must exit 0 within CREDS_PROCESS_MS, or it is killed and the chain
 * reports it.  A profile with credential_process that fails stops the
 * chain (an error, not "nothing here").
 */
#include "s3/creds-process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "s3/aws-files.h"
#include "s3/creds-local.h"
#include "s3/creds-parse.h"
#include "util/clock.h"

#define PROCESS_OUT_MAX (64 * 1024)

extern char **environ;

/* Reads the child's stdout until EOF or the deadline: 0, or -1 timeout. */
static int read_until(int fd, buf *out, double deadline, bool *too_big)
{
	char tmp[4096];
	for (;;) {
		double left = deadline - clock_mono();
		if (left <= 0)
			return -1;
		struct pollfd p = {fd, POLLIN, 0};
		int r = poll(&p, 1, (int)(left * 1000) + 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			continue;
		ssize_t n = read(fd, tmp, sizeof tmp);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return 0;
		if (out->len + (size_t)n > PROCESS_OUT_MAX)
			*too_big = true;
		else
			buf_append(out, tmp, (size_t)n);
	}
}

static int spawn(char **argv, int *outfd, pid_t *pid, const char *where,
		 char **err)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return s3cfg_fail(err, "credential_process (%s): pipe failed",
				  where);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	int e = posix_spawnp(pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	if (e != 0) {
		close(p[0]);
		char tmp[128];
		return s3cfg_fail(err,
				  "credential_process (%s): cannot run "
				  "'%s': %s",
				  where, argv[0],
				  strerror_r(e, tmp, sizeof tmp));
	}
	*outfd = p[0];
	return 0;
}

int creds_run_process(const char *cmd, const char *where, s3_creds *out,
		      char **err)
{
	memset(out, 0, sizeof(*out));
	char **argv = cmdline_split(cmd, err);
	if (!argv)
		return -1;
	int fd = -1;
	pid_t pid = 0;
	if (spawn(argv, &fd, &pid, where, err) < 0) {
		argv_free(argv);
		return -1;
	}
	buf o = BUF_INIT;
	bool too_big = false;
	int tr = read_until(fd, &o, clock_mono() + CREDS_PROCESS_MS / 1000.0,
			    &too_big);
	close(fd);
	if (tr < 0)
		kill(pid, SIGKILL);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	int rc;
	if (tr < 0)
		rc = s3cfg_fail(err,
				"credential_process (%s): '%s' did not finish "
				"within %d s and was killed",
				where, argv[0], CREDS_PROCESS_MS / 1000);
	else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		rc = s3cfg_fail(err, "credential_process (%s): '%s' %s %d",
				where, argv[0],
				WIFEXITED(st) ? "exited with status"
					      : "was killed by signal",
				WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	else if (too_big)
		rc = s3cfg_fail(err,
				"credential_process (%s): '%s' printed "
				"more than %d bytes",
				where, argv[0], PROCESS_OUT_MAX);
	else {
		buf what = BUF_INIT;
		buf_printf(&what, "the output of credential_process (%s)",
			   where);
		rc = creds_parse_json(o.data ? o.data : "", o.len, true,
				      buf_cstr(&what), out, err);
		buf_free(&what);
	}
	if (o.data)
		explicit_bzero(o.data, o.len);
	buf_free(&o);
	argv_free(argv);
	return rc;
}

int credp_process(const creds_provider *self, const creds_ctx *cx,
		  s3_creds *out, buf *tried, char **err)
{
	const aws_profile *p;
	const char *where;
	if (creds_ctx_profile(cx, &p, &where, err) < 0)
		return -1;
	int rc = 0;
	if (!p->credential_process.v) {
		buf_printf(tried, "credential_process (none in profile %s)",
			   cx->profile);
	} else {
		buf w = BUF_INIT;
		buf_printf(&w, "profile %s", cx->profile);
		rc = creds_run_process(p->credential_process.v, buf_cstr(&w),
				       out, err) == 0
			 ? 1
			 : -1;
		buf_free(&w);
	}
	return rc;
}
