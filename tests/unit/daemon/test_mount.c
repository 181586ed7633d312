/*
 * Tests for the daemon's mount arguments (daemon/mount.c): the defaults
 * mount_args_init gives before the command line is parsed, among them the
 * retry policy the S3 client gets when no request option is set, and that
 * mount_args_free takes what the parser allocates.
 */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "daemon/mount.h"

Test(mount_args, defaults)
{
	mount_args a;
	mount_args_init(&a);
	cr_expect_eq(a.fs.entry_timeout, 1.0);
	cr_expect_eq(a.fs.attr_timeout, 1.0);
	cr_expect_eq(a.fs.dir_timeout, 1.0);
	cr_expect_eq(a.fs.umask, 022);
	cr_expect(a.fs.passthrough);
	cr_expect(a.cache.verify);
	cr_expect_eq(a.cache.chunk_size, 8u << 20);
	cr_expect_eq(a.commit_delay, 5.0);
	cr_expect(!a.read_only);
	cr_expect(!a.foreground);
	mount_args_free(&a);
}

Test(mount_args, retry_policy_is_the_builtin_default)
{
	mount_args a;
	mount_args_init(&a);
	retry_policy d = RETRY_POLICY_DEFAULT;
	cr_expect_eq(memcmp(&a.retry, &d, sizeof d), 0);
	cr_expect_eq(a.retry.first_byte_ms, 2000);
	cr_expect_eq(a.retry.max_ms, 5000);
	cr_expect_eq(a.retry.budget_ms, 60000);
	mount_args_free(&a);
}

Test(mount_args, free_takes_the_strings)
{
	mount_args a;
	mount_args_init(&a);
	a.url = strdup("s3://b/p");
	a.mountpoint = strdup("/mnt");
	a.endpoint = strdup("http://h");
	a.cache_dir = strdup("/c");
	a.temp_patterns = strdup("*tmp*");
	mount_args_free(&a); /* no leak under ASan */
}
