/*
 * Tests for the session of a subcommand that works on a bucket by itself
 * (cli/bucket.c): what it prints and returns for a bad URL (-1) and for an
 * endpoint it cannot reach (-2), the same for gc and verify but for the
 * command's name.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "s3/config.h"

static void quiet_env(void)
{
	/* static keys: no credential provider goes to the network */
	setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "secret", 1);
	setenv("AWS_CONFIG_FILE", "/nonexistent/config", 1);
	setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials", 1);
	cr_redirect_stderr();
}

Test(bucket, bad_url_is_a_usage_error, .init = quiet_env)
{
	s3_settings s = {0};
	cli_bucket b;
	cr_assert_eq(cli_bucket_open("gc", "http://not-s3", &s, false, &b), -1);
	cr_assert_null(b.c);
	fflush(stderr);
	char got[512] = "";
	FILE *f = cr_get_redirected_stderr();
	size_t n = fread(got, 1, sizeof got - 1, f);
	got[n] = '\0';
	cr_assert(strncmp(got, "ckptfs: gc: ", 12) == 0, "%s", got);
	s3_settings_free(&s);
}

Test(bucket, unreachable_endpoint_names_bucket_and_endpoint,
     .init = quiet_env, .timeout = 60)
{
	s3_settings s = {0};
	s.endpoint = strdup("http://127.0.0.1:1");
	s.region = strdup("us-east-1");
	cli_bucket b;
	cr_assert_eq(cli_bucket_open("verify", "s3://bkt/some/prefix/", &s,
				     false, &b),
		     -2);
	cr_assert_null(b.c);
	fflush(stderr);
	char got[1024] = "";
	FILE *f = cr_get_redirected_stderr();
	size_t n = fread(got, 1, sizeof got - 1, f);
	got[n] = '\0';
	cr_assert(strstr(got, "ckptfs: verify: cannot reach "
			      "s3://bkt/some/prefix/ at http://127.0.0.1:1"),
		  "%s", got);
	cli_bucket_close(&b); /* harmless on what a failed open left */
	s3_settings_free(&s);
}
