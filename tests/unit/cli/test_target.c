/*
 * Tests for finding the mount a subcommand talks to (cli/target.c): the
 * mountpoint holding a path and the path relative to it, and the errors
 * cli_target and cli_call print ("ckptfs: CMD WHAT: why") when a path does
 * not exist, lies on no mount, or the mount cannot be asked.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

Test(find_mount, a_file_of_a_mounted_filesystem)
{
	/* /proc is a file system of its own on every Linux */
	char *rel = NULL;
	char *mnt = cli_find_mount("/proc/cpuinfo", &rel);
	cr_assert_str_eq(mnt, "/proc");
	cr_assert_str_eq(rel, "cpuinfo");
	free(mnt);
	free(rel);
}

Test(find_mount, the_mountpoint_itself)
{
	char *rel = NULL;
	char *mnt = cli_find_mount("/proc/", &rel);
	cr_assert_str_eq(mnt, "/proc");
	cr_assert_str_eq(rel, "");
	free(mnt);
	free(rel);
}

Test(find_mount, a_path_that_does_not_exist)
{
	char *rel = NULL;
	cr_assert_null(cli_find_mount("/proc/no/such/file", &rel));
	cr_assert_null(rel);
}

Test(target, a_missing_path_is_reported_with_the_command,
     .init = cr_redirect_stderr)
{
	char *mnt = (char *)1, *rel = (char *)1;
	cr_assert_not(cli_target("sync", "/no/such/mount", &mnt, &rel));
	cr_assert_null(mnt);
	cr_assert_null(rel);
	fflush(stderr);
	cr_assert_stderr_eq_str(
		"ckptfs: sync /no/such/mount: No such file or directory\n");
}

Test(target, a_found_mount_is_returned)
{
	char *mnt, *rel;
	cr_assert(cli_target("commit", "/proc/cpuinfo", &mnt, &rel));
	cr_assert_str_eq(mnt, "/proc");
	cr_assert_str_eq(rel, "cpuinfo");
	free(mnt);
	free(rel);
}

static int done_calls;
static void count_done(void *arg)
{
	cr_assert_eq(arg, &done_calls);
	done_calls++;
}

Test(call, a_mount_without_a_control_socket_is_an_error,
     .init = cr_redirect_stderr)
{
	/* /proc is a mount, but no ckptfs answers there */
	json_t *req = json_pack("{s:s}", "cmd", "sync");
	done_calls = 0;
	json_t *r = cli_call("sync", "/proc", "/proc", req, NULL, &done_calls,
			     count_done);
	cr_assert_null(r);
	cr_assert_eq(done_calls, 1, "done is called once, before the error");
	fflush(stderr);
	char buf[512] = {0};
	FILE *f = cr_get_redirected_stderr();
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	cr_assert_gt(n, 0);
	cr_assert(strncmp(buf, "ckptfs: sync /proc: ", 20) == 0, "%s", buf);
}
