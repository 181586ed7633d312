/*
 * Tests for s3/config: URL parsing, settings precedence, AWS INI files and
 * the file and environment credentials through the default chain (the
 * chain's refresh and the other providers: test_creds.c).
 *
 * Every test starts with no AWS_* variables and HOME pointing at a fresh
 * directory under /tmp, so the machine's own ~/.aws never leaks in.
 * Criterion runs each test in its own process, so changing the
 * environment is safe.  Files are written with mkstemp inside that
 * directory and removed with it.
 */
#include "s3/config.h"

#include <criterion/criterion.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define TOKEN "FwoGZXIvYXdzEXAMPLESESSIONTOKEN"

static const char *const aws_vars[] = {
    "AWS_ENDPOINT_URL_S3",	   "AWS_ENDPOINT_URL",	"AWS_REGION",
    "AWS_DEFAULT_REGION",	   "AWS_PROFILE",	"AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",	   "AWS_CA_BUNDLE",
    "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
};

static char home[64];

static void setup(void)
{
	for (size_t i = 0; i < sizeof(aws_vars) / sizeof(aws_vars[0]); i++)
		unsetenv(aws_vars[i]);
	strcpy(home, "/tmp/ckptfs-test-config-XXXXXX");
	cr_assert_not_null(mkdtemp(home));
	setenv("HOME", home, 1);
	setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
}

static int rm_entry(const char *path, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	return remove(path);
}

static void teardown(void)
{
	nftw(home, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Writes content to a new mkstemp file; the path lives until teardown. */
static const char *write_tmp(const char *content)
{
	static char paths[16][128];
	static int n;
	cr_assert_lt(n, 16);
	char *p = paths[n++];
	snprintf(p, sizeof(paths[0]), "%s/aws-XXXXXX", home);
	int fd = mkstemp(p);
	cr_assert_geq(fd, 0);
	size_t len = strlen(content);
	cr_assert_eq(write(fd, content, len), (ssize_t)len);
	close(fd);
	return p;
}

static const char *config_file(const char *content)
{
	const char *p = write_tmp(content);
	setenv("AWS_CONFIG_FILE", p, 1);
	return p;
}

static const char *creds_file(const char *content)
{
	const char *p = write_tmp(content);
	setenv("AWS_SHARED_CREDENTIALS_FILE", p, 1);
	return p;
}

/* Writes $HOME/.aws/<leaf>. */
static void home_file(const char *leaf, const char *content)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/.aws", home);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/.aws/%s", home, leaf);
	FILE *f = fopen(p, "w");
	cr_assert_not_null(f);
	fputs(content, f);
	fclose(f);
}

static void assert_has(const char *s, const char *part)
{
	cr_assert_not_null(s);
	cr_assert_not_null(strstr(s, part), "'%s' not in '%s'", part, s);
}

static void assert_no_secret(const char *s)
{
	cr_assert_not_null(s);
	cr_assert_null(strstr(s, SECRET), "secret leaked: %s", s);
	cr_assert_null(strstr(s, TOKEN), "token leaked: %s", s);
}

/* ---- s3_parse_url ------------------------------------------------------- */

TestSuite(url, .init = setup, .fini = teardown);

static void url_ok(const char *url, const char *bucket, const char *prefix)
{
	char *b = NULL, *p = NULL, *err = NULL;
	cr_assert_eq(s3_parse_url(url, &b, &p, &err), 0, "%s: %s", url,
		     err ? err : "");
	cr_assert_str_eq(b, bucket, "%s", url);
	cr_assert_str_eq(p, prefix, "%s", url);
	cr_assert_null(err);
	free(b);
	free(p);
}

static void url_bad(const char *url, const char *why)
{
	char *b = NULL, *p = NULL, *err = NULL;
	cr_assert_eq(s3_parse_url(url, &b, &p, &err), -1, "%s accepted",
		     url ? url : "(null)");
	cr_assert_null(b);
	cr_assert_null(p);
	assert_has(err, why);
	free(err);
}

Test(url, accepts_bucket_and_prefix_forms)
{
	url_ok("s3://bucket", "bucket", "");
	url_ok("s3://bucket/", "bucket", "");
	url_ok("s3://bucket/a/b", "bucket", "a/b/");
	url_ok("s3://bucket/a/b/", "bucket", "a/b/");
	url_ok("s3://bucket/a", "bucket", "a/");
	url_ok("S3://bucket/ckpt", "bucket", "ckpt/");
	url_ok("s3://my.bucket-01/x.y/..z/", "my.bucket-01", "x.y/..z/");
	url_ok("s3://abc", "abc", "");
	url_ok("s3://a23456789012345678901234567890123456789012345678901234567"
	       "890123",
	       "a23456789012345678901234567890123456789012345678901234567"
	       "890123",
	       "");
}

Test(url, rejects_missing_or_other_scheme)
{
	url_bad(NULL, "empty S3 URL");
	url_bad("", "empty S3 URL");
	url_bad("bucket/prefix", "'bucket/prefix' is not an S3 URL");
	url_bad("s3:/bucket", "is not an S3 URL");
	url_bad("://bucket", "is not an S3 URL");
	url_bad("gs://bucket/x", "unsupported URL scheme 'gs'");
	url_bad("https://bucket/x", "unsupported URL scheme 'https'");
	url_bad("s3a://bucket", "unsupported URL scheme 's3a'");
	url_bad("bucket/x://y", "is not an S3 URL");
}

Test(url, rejects_empty_bucket)
{
	url_bad("s3://", "no bucket name");
	url_bad("s3:///x", "no bucket name");
	url_bad("s3:////", "no bucket name");
}

Test(url, rejects_invalid_bucket_names_saying_why)
{
	url_bad("s3://ab", "3 to 63 characters");
	url_bad("s3://a2345678901234567890123456789012345678901234567890"
		"12345678901234",
		"3 to 63 characters");
	url_bad("s3://My-Bucket", "uppercase letters are not allowed");
	url_bad("s3://my_bucket/x", "underscores are not allowed");
	url_bad("s3://buck et", "only lowercase letters");
	url_bad("s3://bucket?x=1", "only lowercase letters");
	url_bad("s3://-bucket", "begin and end with a letter or digit");
	url_bad("s3://bucket-", "begin and end with a letter or digit");
	url_bad("s3://.bucket", "begin and end");
	url_bad("s3://a..b", "two adjacent periods");
	url_bad("s3://192.168.1.1", "IP address");
	url_bad("s3://My_Bucket/x", "invalid bucket name 'My_Bucket'");
}

Test(url, rejects_empty_and_dot_components)
{
	url_bad("s3://bkt//x", "empty path component");
	url_bad("s3://bkt//", "empty path component");
	url_bad("s3://bkt/a//b", "empty path component");
	url_bad("s3://bkt/a/b//", "empty path component");
	url_bad("s3://bkt/./x", "'.' and '..'");
	url_bad("s3://bkt/.", "'.' and '..'");
	url_bad("s3://bkt/a/..", "'.' and '..'");
	url_bad("s3://bkt/a/../b/", "'.' and '..'");
}

Test(url, rejects_prefix_over_key_limit)
{
	char url[1200] = "s3://bkt/";
	memset(url + 9, 'k', 1030);
	url[1039] = '\0';
	url_bad(url, "longer than 1024 bytes");
}

/* ---- s3_settings_resolve: precedence ------------------------------------ */

TestSuite(settings, .init = setup, .fini = teardown);

static void resolve_ok(s3_settings *s)
{
	char *err = NULL;
	cr_assert_eq(s3_settings_resolve(s, &err), 0, "%s", err ? err : "");
	cr_assert_null(err);
}

static char *resolve_err(s3_settings *s)
{
	char *err = NULL;
	cr_assert_eq(s3_settings_resolve(s, &err), -1, "resolve succeeded");
	cr_assert_not_null(err);
	assert_no_secret(err);
	return err;
}

/* Resolves from scratch and returns what field picks (static copy). */
static const char *resolved(const char *field)
{
	static char out[256];
	s3_settings s = {0};
	resolve_ok(&s);
	const char *v = strcmp(field, "region") == 0	 ? s.region
			: strcmp(field, "endpoint") == 0 ? s.endpoint
			: strcmp(field, "profile") == 0	 ? s.profile
							 : s.ca_bundle;
	snprintf(out, sizeof(out), "%s", v ? v : "(null)");
	s3_settings_free(&s);
	return out;
}

Test(settings, defaults_without_env_or_files)
{
	s3_settings s = {0};
	resolve_ok(&s);
	cr_assert_str_eq(s.profile, "default");
	cr_assert_str_eq(s.region, "us-east-1");
	cr_assert_str_eq(s.endpoint, "https://s3.us-east-1.amazonaws.com");
	cr_assert(s.use_https);
	cr_assert_eq(s.addressing, S3_ADDR_AUTO);
	cr_assert_null(s.ca_bundle);
	s3_settings_free(&s);
}

Test(settings, region_precedence)
{
	config_file("[default]\nregion = eu-west-3\n");
	cr_assert_str_eq(resolved("region"), "eu-west-3");
	setenv("AWS_DEFAULT_REGION", "eu-west-2", 1);
	cr_assert_str_eq(resolved("region"), "eu-west-2");
	setenv("AWS_REGION", "eu-west-1", 1);
	cr_assert_str_eq(resolved("region"), "eu-west-1");

	s3_settings s = {.region = strdup("ap-south-1")};
	resolve_ok(&s);
	cr_assert_str_eq(s.region, "ap-south-1");
	cr_assert_str_eq(s.endpoint, "https://s3.ap-south-1.amazonaws.com");
	s3_settings_free(&s);
}

Test(settings, default_endpoint_follows_region)
{
	setenv("AWS_REGION", "eu-central-1", 1);
	cr_assert_str_eq(resolved("endpoint"),
			 "https://s3.eu-central-1.amazonaws.com");
	setenv("AWS_REGION", "cn-north-1", 1);
	cr_assert_str_eq(resolved("endpoint"),
			 "https://s3.cn-north-1.amazonaws.com.cn");
}

Test(settings, endpoint_precedence)
{
	config_file("[default]\n"
		    "endpoint_url = http://profile:1\n"
		    "s3 =\n"
		    "  endpoint_url = http://nested:2\n");
	cr_assert_str_eq(resolved("endpoint"), "http://nested:2");
	setenv("AWS_ENDPOINT_URL", "http://global:3", 1);
	cr_assert_str_eq(resolved("endpoint"), "http://global:3");
	setenv("AWS_ENDPOINT_URL_S3", "http://service:4", 1);
	cr_assert_str_eq(resolved("endpoint"), "http://service:4");

	s3_settings s = {.endpoint = strdup("https://option:5/")};
	resolve_ok(&s);
	cr_assert_str_eq(s.endpoint, "https://option:5");
	cr_assert(s.use_https);
	s3_settings_free(&s);
}

Test(settings, profile_endpoint_without_nested)
{
	config_file("[default]\nendpoint_url = http://minio:9000/\n");
	s3_settings s = {0};
	resolve_ok(&s);
	cr_assert_str_eq(s.endpoint, "http://minio:9000");
	cr_assert_not(s.use_https);
	s3_settings_free(&s);
}

Test(settings, profile_precedence_and_sections)
{
	config_file("[default]\nregion = r-default\n"
		    "[profile env]\nregion = r-env\n"
		    "[opt]\nregion = r-bare-name-is-ignored\n"
		    "[profile   opt  ]\nregion = r-opt\n");
	cr_assert_str_eq(resolved("profile"), "default");
	cr_assert_str_eq(resolved("region"), "r-default");
	setenv("AWS_PROFILE", "env", 1);
	cr_assert_str_eq(resolved("profile"), "env");
	cr_assert_str_eq(resolved("region"), "r-env");

	s3_settings s = {.profile = strdup("opt")};
	resolve_ok(&s);
	cr_assert_str_eq(s.profile, "opt");
	cr_assert_str_eq(s.region, "r-opt");
	s3_settings_free(&s);
}

Test(settings, profile_default_section_forms)
{
	config_file("[profile default]\nregion = from-profile-default\n");
	cr_assert_str_eq(resolved("region"), "from-profile-default");
	/* "[default]" is not "[profile default]" for a named profile. */
	config_file("[default]\nregion = r1\n[profile x]\n");
	setenv("AWS_PROFILE", "x", 1);
	cr_assert_str_eq(resolved("region"), "us-east-1");
}

Test(settings, empty_env_vars_count_as_unset)
{
	config_file("[default]\nregion = eu-north-1\n");
	setenv("AWS_REGION", "", 1);
	setenv("AWS_DEFAULT_REGION", "", 1);
	setenv("AWS_ENDPOINT_URL", "", 1);
	setenv("AWS_PROFILE", "", 1);
	cr_assert_str_eq(resolved("region"), "eu-north-1");
	cr_assert_str_eq(resolved("profile"), "default");
	cr_assert_str_eq(resolved("endpoint"),
			 "https://s3.eu-north-1.amazonaws.com");
}

Test(settings, files_default_to_home)
{
	home_file("config", "[profile h]\nregion = from-home\n");
	setenv("AWS_PROFILE", "h", 1);
	cr_assert_str_eq(resolved("region"), "from-home");
}

Test(settings, config_path_expands_tilde)
{
	home_file("other", "[default]\nregion = tilde-region\n");
	setenv("AWS_CONFIG_FILE", "~/.aws/other", 1);
	cr_assert_str_eq(resolved("region"), "tilde-region");
}

Test(settings, ca_bundle_precedence)
{
	config_file("[default]\nca_bundle = /etc/profile-ca.pem\n");
	cr_assert_str_eq(resolved("ca_bundle"), "/etc/profile-ca.pem");
	setenv("AWS_CA_BUNDLE", "/etc/env-ca.pem", 1);
	cr_assert_str_eq(resolved("ca_bundle"), "/etc/env-ca.pem");
	s3_settings s = {.ca_bundle = strdup("/opt/ca.pem")};
	resolve_ok(&s);
	cr_assert_str_eq(s.ca_bundle, "/opt/ca.pem");
	s3_settings_free(&s);
}

Test(settings, empty_values_count_as_unset)
{
	config_file("[default]\nregion =\nendpoint_url =\n"
		    "s3 =\n  addressing_style =\n");
	s3_settings s = {0};
	resolve_ok(&s);
	cr_assert_str_eq(s.region, "us-east-1");
	cr_assert_str_eq(s.endpoint, "https://s3.us-east-1.amazonaws.com");
	cr_assert_eq(s.addressing, S3_ADDR_AUTO);
	s3_settings_free(&s);
}

Test(settings, keys_are_case_insensitive)
{
	config_file("[default]\nRegion = eu-south-1\n");
	cr_assert_str_eq(resolved("region"), "eu-south-1");
}

Test(settings, crlf_bom_and_comments)
{
	config_file("\xEF\xBB\xBF# comment\r\n[default]\r\n; another\r\n"
		    "region = us-west-2 ; inline comment\r\n");
	cr_assert_str_eq(resolved("region"), "us-west-2");
}

/* ---- nested s3 section --------------------------------------------------- */

Test(settings, nested_s3_section)
{
	config_file("[default]\n"
		    "region = us-west-1\n"
		    "s3 =\n"
		    "    max_concurrent_requests = 20\n"
		    "    # a comment inside\n"
		    "\n"
		    "    addressing_style = path ; why\n"
		    "    endpoint_url = https://ceph.local\n"
		    "output = json\n"
		    "[profile other]\n"
		    "s3 =\n"
		    "  addressing_style = virtual\n");
	s3_settings s = {0};
	resolve_ok(&s);
	cr_assert_eq(s.addressing, S3_ADDR_PATH);
	cr_assert_str_eq(s.endpoint, "https://ceph.local");
	cr_assert_str_eq(s.region, "us-west-1");
	s3_settings_free(&s);
}

Test(settings, nested_s3_in_named_profile)
{
	config_file("[default]\ns3 =\n  addressing_style = path\n"
		    "[profile v]\ns3 =\n\taddressing_style = virtual\n");
	s3_settings s = {.profile = strdup("v")};
	resolve_ok(&s);
	cr_assert_eq(s.addressing, S3_ADDR_VIRTUAL);
	s3_settings_free(&s);
}

Test(settings, nested_block_ends_at_next_key)
{
	config_file("[default]\ns3 =\n  addressing_style = path\n"
		    "endpoint_url = http://top:1\n");
	s3_settings s = {0};
	resolve_ok(&s);
	cr_assert_eq(s.addressing, S3_ADDR_PATH);
	cr_assert_str_eq(s.endpoint, "http://top:1");
	s3_settings_free(&s);
}

Test(settings, option_addressing_beats_config)
{
	config_file("[default]\ns3 =\n  addressing_style = virtual\n");
	s3_settings s = {.addressing = S3_ADDR_PATH};
	resolve_ok(&s);
	cr_assert_eq(s.addressing, S3_ADDR_PATH);
	s3_settings_free(&s);
}

Test(settings, addressing_auto_in_config)
{
	config_file("[default]\ns3 =\n  addressing_style = auto\n");
	s3_settings s = {0};
	resolve_ok(&s);
	cr_assert_eq(s.addressing, S3_ADDR_AUTO);
	s3_settings_free(&s);
}

Test(settings, bad_addressing_style_names_file_and_line)
{
	const char *p =
	    config_file("[default]\ns3 =\n  addressing_style = sideways\n");
	s3_settings s = {0};
	char *err = resolve_err(&s);
	assert_has(err, p);
	assert_has(err, "line 3");
	assert_has(err, "sideways");
	free(err);
	cr_assert_null(s.region);
}

Test(settings, nested_line_without_equals)
{
	config_file("[default]\ns3 =\n  addressing_style path\n");
	s3_settings s = {0};
	char *err = resolve_err(&s);
	assert_has(err, "line 3: expected 'key = value' under 's3 ='");
	free(err);
}

Test(settings, s3_with_inline_value_is_an_error)
{
	config_file("[default]\ns3 = path\n");
	s3_settings s = {0};
	char *err = resolve_err(&s);
	assert_has(err, "line 2");
	assert_has(err, "s3 =");
	free(err);
}

Test(settings, indented_line_under_plain_key_is_an_error)
{
	config_file("[default]\nregion = us-east-2\n  eu-west-1\n");
	s3_settings s = {0};
	char *err = resolve_err(&s);
	assert_has(err, "line 3: unexpected indented line");
	free(err);
}

Test(settings, other_nested_sections_are_ignored)
{
	config_file("[default]\nsts =\n  endpoint_url = http://sts:1\n"
		    "region = ca-central-1\n");
	s3_settings s = {0};
	resolve_ok(&s);
	cr_assert_str_eq(s.region, "ca-central-1");
	cr_assert_str_eq(s.endpoint, "https://s3.ca-central-1.amazonaws.com");
	s3_settings_free(&s);
}

Test(settings, other_profiles_are_not_interpreted)
{
	config_file("[profile junk]\ns3 = x\nregion = not valid\n"
		    "[default]\nregion = us-east-2\n");
	cr_assert_str_eq(resolved("region"), "us-east-2");
}

Test(settings, long_profile_names_compare_in_full)
{
	/* inih keeps 49 bytes of a section name; we must not match a prefix */
	config_file("[profile production-readonly-AdministratorAccess-"
		    "123456789012]\nregion = long\n"
		    "[profile production-readonly-AdministratorAcc]\n"
		    "region = short\n");
	setenv("AWS_PROFILE",
	       "production-readonly-AdministratorAccess-123456789012", 1);
	cr_assert_str_eq(resolved("region"), "long");
	setenv("AWS_PROFILE", "production-readonly-AdministratorAcc", 1);
	cr_assert_str_eq(resolved("region"), "short");
}

/* ---- files: missing, unreadable, malformed ------------------------------ */

Test(settings, missing_files_are_not_errors)
{
	char p[128];
	snprintf(p, sizeof(p), "%s/nope/config", home);
	setenv("AWS_CONFIG_FILE", p, 1);
	setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials", 1);
	cr_assert_str_eq(resolved("region"), "us-east-1");
}

Test(settings, unreadable_config_is_an_error)
{
	setenv("AWS_CONFIG_FILE", home, 1); /* a directory */
	s3_settings s = {0};
	char *err = resolve_err(&s);
	assert_has(err, "cannot read");
	assert_has(err, home);
	free(err);
}

Test(settings, malformed_config_names_file_and_line)
{
	const char *p = config_file("[default]\nregion = us-east-1\n"
				    "this line has no equals\n");
	s3_settings s = {0};
	char *err = resolve_err(&s);
	assert_has(err, p);
	assert_has(err, "line 3");
	assert_has(err, "syntax error");
	free(err);
}

Test(settings, unclosed_section_is_an_error)
{
	config_file("[default\nregion = us-east-1\n");
	s3_settings s = {0};
	char *err = resolve_err(&s);
	assert_has(err, "line 1");
	free(err);
}

Test(settings, failure_leaves_settings_untouched)
{
	config_file("[default]\nregion = eu-west-1\n");
	setenv("AWS_ENDPOINT_URL", "ftp://nope", 1);
	s3_settings s = {.profile = NULL};
	char *err = resolve_err(&s);
	free(err);
	cr_assert_null(s.profile);
	cr_assert_null(s.region);
	cr_assert_null(s.endpoint);
}

Test(settings, named_profile_must_exist)
{
	const char *c = config_file("[default]\nregion = eu-west-1\n");
	const char *k = creds_file("[default]\naws_access_key_id = AKIA\n"
				   "aws_secret_access_key = " SECRET "\n");
	setenv("AWS_PROFILE", "typo", 1);
	s3_settings s = {0};
	char *err = resolve_err(&s);
	assert_has(err, "profile 'typo' not found");
	assert_has(err, c);
	assert_has(err, k);
	free(err);
}

Test(settings, named_profile_in_credentials_only_is_fine)
{
	creds_file("[ci]\naws_access_key_id = AKIA\n"
		   "aws_secret_access_key = " SECRET "\n");
	setenv("AWS_PROFILE", "ci", 1);
	cr_assert_str_eq(resolved("region"), "us-east-1");
}

/* ---- endpoint and region validation ------------------------------------- */

static void endpoint_ok(const char *url, const char *want, bool https)
{
	s3_settings s = {.endpoint = strdup(url)};
	resolve_ok(&s);
	cr_assert_str_eq(s.endpoint, want, "%s", url);
	cr_assert_eq(s.use_https, https, "%s", url);
	s3_settings_free(&s);
}

static void endpoint_bad(const char *url, const char *why)
{
	setenv("AWS_ENDPOINT_URL", url, 1);
	s3_settings s = {0};
	char *err = resolve_err(&s);
	assert_has(err, why);
	assert_has(err, "AWS_ENDPOINT_URL");
	free(err);
}

Test(settings, endpoint_accepts)
{
	endpoint_ok("http://localhost:9000", "http://localhost:9000", false);
	endpoint_ok("https://minio.local/", "https://minio.local", true);
	endpoint_ok("HTTPS://Storage.Example.com",
		    "https://Storage.Example.com", true);
	endpoint_ok("http://127.0.0.1:65535/", "http://127.0.0.1:65535", false);
	endpoint_ok("http://[::1]:9000", "http://[::1]:9000", false);
	endpoint_ok("https://acct.r2.cloudflarestorage.com",
		    "https://acct.r2.cloudflarestorage.com", true);
}

Test(settings, endpoint_rejects)
{
	endpoint_bad("ftp://host", "http:// or https://");
	endpoint_bad("localhost:9000", "http:// or https://");
	endpoint_bad("http://", "no host");
	endpoint_bad("https:///", "no host");
	endpoint_bad("http://host/path", "path, query or fragment");
	endpoint_bad("http://host//", "path, query or fragment");
	endpoint_bad("http://host?x=1", "path, query or fragment");
	endpoint_bad("http://host#f", "path, query or fragment");
	endpoint_bad("http://host:0", "port must be 1 to 65535");
	endpoint_bad("http://host:65536", "port must be 1 to 65535");
	endpoint_bad("http://host:", "port must be 1 to 65535");
	endpoint_bad("http://host:9x", "port is not a number");
	endpoint_bad("http://ho st", "host has characters");
	endpoint_bad("http://[]:1", "IPv6");
}

Test(settings, endpoint_with_password_is_not_echoed)
{
	setenv("AWS_ENDPOINT_URL_S3", "http://user:" SECRET "@host", 1);
	s3_settings s = {0};
	char *err = resolve_err(&s);
	assert_has(err, "user name or password");
	assert_has(err, "AWS_ENDPOINT_URL_S3");
	free(err);
}

Test(settings, endpoint_error_from_file_names_line)
{
	const char *p = config_file("[default]\n\nendpoint_url = s3.local\n");
	s3_settings s = {0};
	char *err = resolve_err(&s);
	assert_has(err, p);
	assert_has(err, "line 3");
	free(err);
}

Test(settings, region_rejects)
{
	setenv("AWS_REGION", "us east", 1);
	s3_settings s = {0};
	char *err = resolve_err(&s);
	assert_has(err, "invalid region 'us east' (from AWS_REGION)");
	free(err);
	s3_settings s2 = {.region = strdup("a/b")};
	err = resolve_err(&s2);
	assert_has(err, "the region option");
	free(err);
	s3_settings_free(&s2);
}

/* ---- s3_settings_virtual_host ------------------------------------------- */

TestSuite(addressing);

static bool vh(s3_addressing a, const char *endpoint, const char *bucket)
{
	s3_settings s = {
	    .bucket = (char *)bucket,
	    .endpoint = (char *)endpoint,
	    .addressing = a,
	    .use_https = endpoint && strncmp(endpoint, "https:", 6) == 0,
	};
	return s3_settings_virtual_host(&s);
}

#define AWS "https://s3.us-east-1.amazonaws.com"

Test(addressing, explicit_styles_win)
{
	cr_assert(vh(S3_ADDR_VIRTUAL, "http://minio:9000", "bkt"));
	cr_assert(vh(S3_ADDR_VIRTUAL, AWS, "a.b.c"));
	cr_assert_not(vh(S3_ADDR_PATH, AWS, "bucket"));
}

Test(addressing, auto_decisions)
{
	cr_assert(vh(S3_ADDR_AUTO, AWS, "bucket"));
	cr_assert(vh(S3_ADDR_AUTO, AWS, "my-bucket-1"));
	cr_assert(vh(S3_ADDR_AUTO, "https://s3.amazonaws.com", "bucket"));
	cr_assert(vh(S3_ADDR_AUTO, "https://S3.EU-WEST-1.AMAZONAWS.COM:443",
		     "bucket"));
	cr_assert(vh(S3_ADDR_AUTO, "https://s3.cn-north-1.amazonaws.com.cn",
		     "bucket"));
	/* dots break the TLS wildcard certificate */
	cr_assert_not(vh(S3_ADDR_AUTO, AWS, "my.bucket"));
	/* but over plain http a DNS-safe dotted name is fine */
	cr_assert(
	    vh(S3_ADDR_AUTO, "http://s3.us-east-1.amazonaws.com", "my.bucket"));
	cr_assert_not(vh(S3_ADDR_AUTO, "http://s3.us-east-1.amazonaws.com",
			 "my-.bucket"));
	/* names S3 would not accept as hosts */
	cr_assert_not(vh(S3_ADDR_AUTO, AWS, "My_Bucket"));
	cr_assert_not(vh(S3_ADDR_AUTO, AWS, "ab"));
	/* anything not under amazonaws.com is path-style */
	cr_assert_not(vh(S3_ADDR_AUTO, "http://localhost:9000", "bucket"));
	cr_assert_not(
	    vh(S3_ADDR_AUTO, "https://storage.googleapis.com", "bucket"));
	cr_assert_not(vh(S3_ADDR_AUTO, "https://notamazonaws.com", "bucket"));
	cr_assert_not(
	    vh(S3_ADDR_AUTO, "https://amazonaws.com.evil.io", "bucket"));
	cr_assert_not(vh(S3_ADDR_AUTO, AWS, NULL));
	cr_assert_not(vh(S3_ADDR_AUTO, NULL, "bucket"));
}

Test(addressing, auto_after_resolve, .init = setup, .fini = teardown)
{
	s3_settings s = {.bucket = strdup("bucket")};
	resolve_ok(&s);
	cr_assert(s3_settings_virtual_host(&s));
	s3_settings_free(&s);
	config_file("[default]\nendpoint_url = http://minio:9000\n");
	s3_settings m = {.bucket = strdup("bucket")};
	resolve_ok(&m);
	cr_assert_not(s3_settings_virtual_host(&m));
	s3_settings_free(&m);
}

/* ---- credentials chain: default providers ------------------------------- */

TestSuite(creds, .init = setup, .fini = teardown);

/* What the default chain's providers say when they have nothing. */
#define ENV_ROLE_WEB(profile)                                                 \
	"environment (AWS_ACCESS_KEY_ID not set), assume role (no role_arn "  \
	"in profile " profile "), web identity (AWS_WEB_IDENTITY_TOKEN_FILE " \
	"not set), "
#define PROCESS(profile) "credential_process (none in profile " profile "), "
#define CONTAINER_IMDS                                                        \
	"container credentials (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI and "  \
	"_FULL_URI not set), EC2 instance metadata (disabled by "             \
	"AWS_EC2_METADATA_DISABLED)"

static void get_ok(const char *profile, s3_creds *c)
{
	creds_chain *ch = creds_chain_new(profile, NULL);
	cr_assert_not_null(ch);
	char *err = NULL;
	cr_assert_eq(creds_chain_get(ch, c, &err), 0, "%s", err ? err : "");
	cr_assert_null(err);
	creds_chain_free(ch);
}

static char *get_err(const char *profile)
{
	creds_chain *ch = creds_chain_new(profile, NULL);
	s3_creds c = {0};
	char *err = NULL;
	cr_assert_eq(creds_chain_get(ch, &c, &err), -1, "creds found");
	cr_assert_null(c.access_key);
	assert_no_secret(err);
	creds_chain_free(ch);
	return err;
}

static void assert_creds(const s3_creds *c, const char *id, const char *secret,
			 const char *token)
{
	cr_assert_str_eq(c->access_key, id);
	cr_assert_str_eq(c->secret_key, secret);
	if (token)
		cr_assert_str_eq(c->session_token, token);
	else
		cr_assert_null(c->session_token);
	cr_assert_eq(c->expires, 0);
}

Test(creds, from_environment)
{
	setenv("AWS_ACCESS_KEY_ID", "AKIAENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", SECRET, 1);
	s3_creds c;
	get_ok(NULL, &c);
	assert_creds(&c, "AKIAENV", SECRET, NULL);
	s3_creds_free(&c);
	cr_assert_null(c.secret_key);
}

Test(creds, environment_session_token)
{
	setenv("AWS_ACCESS_KEY_ID", "ASIAENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", SECRET, 1);
	setenv("AWS_SESSION_TOKEN", TOKEN, 1);
	s3_creds c;
	get_ok("default", &c);
	assert_creds(&c, "ASIAENV", SECRET, TOKEN);
	s3_creds_free(&c);
}

Test(creds, partial_environment_is_an_error)
{
	setenv("AWS_SECRET_ACCESS_KEY", SECRET, 1);
	char *err = get_err(NULL);
	assert_has(err, "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID "
			"is not");
	free(err);
	unsetenv("AWS_SECRET_ACCESS_KEY");
	setenv("AWS_ACCESS_KEY_ID", "AKIAENV", 1);
	err = get_err(NULL);
	assert_has(err, "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY "
			"is not");
	free(err);
}

Test(creds, from_shared_credentials_profiles)
{
	creds_file("[default]\naws_access_key_id = AKIADEF\n"
		   "aws_secret_access_key = " SECRET "\n"
		   "[profile x]\naws_access_key_id = AKIAWRONG\n"
		   "aws_secret_access_key = wrong\n"
		   "[x]\naws_access_key_id = AKIAX\n"
		   "aws_secret_access_key = " SECRET "x\n"
		   "aws_session_token = " TOKEN "\n");
	s3_creds c;
	get_ok(NULL, &c);
	assert_creds(&c, "AKIADEF", SECRET, NULL);
	s3_creds_free(&c);
	get_ok("x", &c);
	assert_creds(&c, "AKIAX", SECRET "x", TOKEN);
	s3_creds_free(&c);
}

Test(creds, from_config_profiles)
{
	config_file("[default]\naws_access_key_id = AKIACFGDEF\n"
		    "aws_secret_access_key = " SECRET "\n"
		    "[x]\naws_access_key_id = AKIAWRONG\n"
		    "aws_secret_access_key = wrong\n"
		    "[profile x]\naws_access_key_id = AKIACFGX\n"
		    "aws_secret_access_key = " SECRET "\n"
		    "aws_session_token = " TOKEN "\n");
	s3_creds c;
	get_ok(NULL, &c);
	assert_creds(&c, "AKIACFGDEF", SECRET, NULL);
	s3_creds_free(&c);
	get_ok("x", &c);
	assert_creds(&c, "AKIACFGX", SECRET, TOKEN);
	s3_creds_free(&c);
}

Test(creds, provider_order)
{
	config_file("[default]\naws_access_key_id = AKIACONFIG\n"
		    "aws_secret_access_key = s-config\n");
	s3_creds c;
	get_ok(NULL, &c);
	cr_assert_str_eq(c.access_key, "AKIACONFIG");
	s3_creds_free(&c);

	creds_file("[default]\naws_access_key_id = AKIAFILE\n"
		   "aws_secret_access_key = s-file\n");
	get_ok(NULL, &c);
	cr_assert_str_eq(c.access_key, "AKIAFILE");
	s3_creds_free(&c);

	setenv("AWS_ACCESS_KEY_ID", "AKIAENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "s-env", 1);
	get_ok(NULL, &c);
	cr_assert_str_eq(c.access_key, "AKIAENV");
	s3_creds_free(&c);
}

Test(creds, profile_without_keys_falls_through)
{
	creds_file("[default]\nregion = x\n[other]\naws_access_key_id = A\n"
		   "aws_secret_access_key = " SECRET "\n");
	config_file("[default]\naws_access_key_id = AKIACONFIG\n"
		    "aws_secret_access_key = " SECRET "\n");
	s3_creds c;
	get_ok(NULL, &c);
	cr_assert_str_eq(c.access_key, "AKIACONFIG");
	s3_creds_free(&c);
}

Test(creds, default_files_under_home)
{
	home_file("credentials", "[default]\naws_access_key_id = AKIAHOME\n"
				 "aws_secret_access_key = " SECRET "\n");
	s3_creds c;
	get_ok(NULL, &c);
	assert_creds(&c, "AKIAHOME", SECRET, NULL);
	s3_creds_free(&c);
}

Test(creds, nothing_found_message)
{
	char *err = get_err(NULL);
	char want[1024];
	snprintf(want, sizeof(want),
		 "no AWS credentials found (tried: " ENV_ROLE_WEB("default")
		 "%s/.aws/credentials [profile default], "
		 PROCESS("default") "%s/.aws/config, " CONTAINER_IMDS ")",
		 home, home);
	cr_assert_str_eq(err, want);
	free(err);
}

Test(creds, nothing_found_message_as_root)
{
	setenv("HOME", "/root", 1);
	struct stat st;
	if (stat("/root/.aws", &st) == 0)
		cr_skip_test("/root/.aws exists on this machine");
	char *err = get_err(NULL);
	cr_assert_str_eq(err, "no AWS credentials found (tried: "
			 ENV_ROLE_WEB("default")
			      "/root/.aws/credentials [profile default], "
			 PROCESS("default") "/root/.aws/config, "
			 CONTAINER_IMDS ")");
	free(err);
}

Test(creds, nothing_found_names_profile_and_env_paths)
{
	const char *k = creds_file("[default]\n");
	const char *c = config_file("[default]\n");
	char *err = get_err("dev");
	char want[1024];
	snprintf(want, sizeof(want),
		 "no AWS credentials found (tried: " ENV_ROLE_WEB("dev")
		 "%s [profile dev], " PROCESS("dev") "%s, " CONTAINER_IMDS ")",
		 k, c);
	cr_assert_str_eq(err, want);
	free(err);
}

Test(creds, partial_file_credentials_are_an_error)
{
	const char *k = creds_file("[default]\n\n"
				   "aws_secret_access_key = " SECRET "\n");
	char *err = get_err(NULL);
	assert_has(err, k);
	assert_has(err, "line 3");
	assert_has(err, "no aws_access_key_id");
	free(err);
	const char *c = config_file("[default]\naws_access_key_id = AKIAPART\n"
				    "aws_session_token = " TOKEN "\n");
	creds_file("");
	err = get_err(NULL);
	assert_has(err, c);
	assert_has(err, "line 2");
	assert_has(err, "no aws_secret_access_key");
	free(err);
}

Test(creds, malformed_credentials_never_echo_secrets)
{
	const char *k = creds_file("[default]\naws_access_key_id = AKIA\n"
				   "aws_secret_access_key " SECRET "\n"
				   "aws_session_token " TOKEN "\n");
	char *err = get_err(NULL);
	assert_has(err, k);
	assert_has(err, "line 3");
	free(err);
}

Test(creds, unreadable_credentials_file)
{
	setenv("AWS_SHARED_CREDENTIALS_FILE", home, 1);
	char *err = get_err(NULL);
	assert_has(err, "cannot read");
	free(err);
}

Test(creds, environment_wins_over_broken_files)
{
	creds_file("garbage\n");
	setenv("AWS_ACCESS_KEY_ID", "AKIAENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", SECRET, 1);
	s3_creds c;
	get_ok(NULL, &c);
	cr_assert_str_eq(c.access_key, "AKIAENV");
	s3_creds_free(&c);
}

/* Session tokens are longer than inih's 200-byte line buffer. */
Test(creds, long_session_token_survives)
{
	static char token[2100], content[2400];
	for (size_t i = 0; i < 2000; i++)
		token[i] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/"[i % 38];
	token[2000] = '\0';
	snprintf(content, sizeof(content),
		 "[default]\naws_access_key_id = ASIALONG\n"
		 "aws_secret_access_key = " SECRET "\n"
		 "aws_session_token = %s==  \n"
		 "[next]\naws_access_key_id = other\n",
		 token);
	creds_file(content);
	s3_creds c;
	get_ok(NULL, &c);
	cr_assert_eq(strlen(c.session_token), 2002);
	cr_assert_eq(strncmp(c.session_token, token, 2000), 0);
	cr_assert_str_eq(c.session_token + 2000, "==");
	s3_creds_free(&c);
}

Test(creds, long_line_keeps_line_numbers)
{
	static char content[1200];
	char pad[1001];
	memset(pad, 'x', 1000);
	pad[1000] = '\0';
	snprintf(content, sizeof(content),
		 "[default]\nnote = %s\nbroken line\n", pad);
	const char *k = creds_file(content);
	char *err = get_err(NULL);
	assert_has(err, k);
	assert_has(err, "line 3");
	free(err);
}
