/*
 * Tests for the credential chain (s3/creds*.c): the documents providers
 * read (JSON, STS XML), the container host rule, credential_process word
 * splitting and runs of real commands, configuration errors of the
 * assume-role and web identity providers, the order of the default chain,
 * and the chain's background refresh with fake providers.
 *
 * The HTTP providers (IMDS, container, STS) are tested against local
 * servers in tests/integration/test_credentials.py.  Every test starts
 * with no AWS_* variables, IMDS disabled and HOME in a fresh directory.
 */
#include "s3/config.h"
#include "s3/creds-local.h"
#include "s3/creds-parse.h"

#include <criterion/criterion.h>
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/clock.h"

#define SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define TOKEN "FwoGZXIvYXdzEXAMPLESESSIONTOKEN"

extern char **environ;

static char home[64];

static void setup(void)
{
	for (char **e = environ; *e;) {
		if (strncmp(*e, "AWS_", 4) == 0) {
			char name[128];
			snprintf(name, sizeof name, "%.*s",
				 (int)strcspn(*e, "="), *e);
			unsetenv(name);
			e = environ;
		} else {
			e++;
		}
	}
	strcpy(home, "/tmp/ckptfs-test-creds-XXXXXX");
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

static const char *write_file(const char *leaf, const char *content)
{
	static char paths[16][128];
	static int n;
	cr_assert_lt(n, 16);
	char *p = paths[n++];
	snprintf(p, sizeof paths[0], "%s/%s", home, leaf);
	FILE *f = fopen(p, "w");
	cr_assert_not_null(f);
	fputs(content, f);
	fclose(f);
	return p;
}

static void config(const char *content)
{
	setenv("AWS_CONFIG_FILE", write_file("config", content), 1);
}

static void assert_has(const char *s, const char *part)
{
	cr_assert_not_null(s);
	cr_assert_not_null(strstr(s, part), "'%s' not in '%s'", part, s);
}

static void assert_no_secret(const char *s)
{
	if (!s)
		return;
	cr_assert_null(strstr(s, SECRET), "secret leaked: %s", s);
	cr_assert_null(strstr(s, TOKEN), "token leaked: %s", s);
}

/* ---- JSON documents ----------------------------------------------------- */

TestSuite(json, .init = setup, .fini = teardown);

#define IMDS_DOC                                                               \
	"{\n  \"Code\" : \"Success\",\n  \"LastUpdated\" : "                   \
	"\"2024-05-01T10:00:00Z\",\n  \"Type\" : \"AWS-HMAC\",\n"              \
	"  \"AccessKeyId\" : \"ASIAIMDS\",\n  \"SecretAccessKey\" : \"" SECRET \
	"\",\n  \"Token\" : \"" TOKEN "\",\n"                                  \
	"  \"Expiration\" : \"2024-05-01T16:00:00Z\"\n}"

Test(json, imds_document)
{
	s3_creds c;
	char *err = NULL;
	cr_assert_eq(creds_parse_json(IMDS_DOC, strlen(IMDS_DOC), false, "imds",
				      &c, &err),
		     0, "%s", err);
	cr_assert_str_eq(c.access_key, "ASIAIMDS");
	cr_assert_str_eq(c.secret_key, SECRET);
	cr_assert_str_eq(c.session_token, TOKEN);
	cr_assert_eq(c.expires, 1714579200); /* 2024-05-01T16:00:00Z */
	s3_creds_free(&c);
}

Test(json, container_document_with_offset_and_fraction)
{
	const char *d =
	    "{\"RoleArn\":\"arn:aws:iam::1:role/r\","
	    "\"AccessKeyId\":\"ASIAECS\",\"SecretAccessKey\":\"" SECRET
	    "\",\"Token\":\"" TOKEN "\","
	    "\"Expiration\":\"2024-05-01T18:00:00.123+02:00\"}";
	s3_creds c;
	char *err = NULL;
	cr_assert_eq(creds_parse_json(d, strlen(d), false, "ecs", &c, &err), 0,
		     "%s", err);
	cr_assert_eq(c.expires, 1714579200);
	s3_creds_free(&c);
}

static char *json_err(const char *doc, bool process)
{
	s3_creds c;
	char *err = NULL;
	cr_assert_eq(
	    creds_parse_json(doc, strlen(doc), process, "the doc", &c, &err),
	    -1, "accepted: %s", doc);
	cr_assert_null(c.access_key);
	assert_has(err, "the doc");
	assert_no_secret(err);
	return err;
}

Test(json, bad_documents_name_the_field_never_a_value)
{
	struct {
		const char *doc, *want;
		bool process;
	} cases[] = {
	    {"not json " SECRET, "not JSON", false},
	    {"[1,2]", "not a JSON object", false},
	    {"{\"SecretAccessKey\":\"" SECRET "\",\"Token\":\"" TOKEN "\"}",
	     "\"AccessKeyId\"", false},
	    {"{\"AccessKeyId\":\"A\",\"Token\":\"" TOKEN "\"}",
	     "\"SecretAccessKey\"", false},
	    {"{\"AccessKeyId\":\"A\",\"SecretAccessKey\":\"" SECRET "\","
	     "\"Expiration\":\"2024-05-01T16:00:00Z\"}",
	     "\"Token\"", false},
	    {"{\"AccessKeyId\":\"A\",\"SecretAccessKey\":\"" SECRET "\","
	     "\"Token\":\"" TOKEN "\"}",
	     "\"Expiration\"", false},
	    {"{\"AccessKeyId\":\"A\",\"SecretAccessKey\":\"" SECRET "\","
	     "\"Token\":\"" TOKEN "\",\"Expiration\":\"" SECRET "\"}",
	     "not an ISO-8601", false},
	    {"{\"Code\":\"AssumeRoleUnauthorizedAccess\",\"AccessKeyId\":"
	     "\"A\"}",
	     "not Success", false},
	    {"{\"AccessKeyId\":\"A\",\"SecretAccessKey\":\"" SECRET "\"}",
	     "\"Version\"", true},
	    {"{\"Version\":2,\"AccessKeyId\":\"A\",\"SecretAccessKey\":"
	     "\"" SECRET "\"}",
	     "only 1", true},
	    {"{\"Version\":1,\"AccessKeyId\":\"A\",\"SecretAccessKey\":"
	     "\"" SECRET "\",\"Expiration\":12}",
	     "not a string", true},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *err = json_err(cases[i].doc, cases[i].process);
		assert_has(err, cases[i].want);
		free(err);
	}
}

Test(json, process_output_without_expiration_never_expires)
{
	const char *d = "{\"Version\": 1, \"AccessKeyId\": \"AKIAPROC\", "
			"\"SecretAccessKey\": \"" SECRET "\"}";
	s3_creds c;
	char *err = NULL;
	cr_assert_eq(creds_parse_json(d, strlen(d), true, "p", &c, &err), 0);
	cr_assert_eq(c.expires, 0);
	cr_assert_null(c.session_token);
	s3_creds_free(&c);
}

/* ---- STS XML ------------------------------------------------------------ */

TestSuite(sts, .init = setup, .fini = teardown);

#define WEB_REPLY                                                             \
	"<AssumeRoleWithWebIdentityResponse "                                 \
	"xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\n"              \
	"  <AssumeRoleWithWebIdentityResult>\n"                               \
	"    <SubjectFromWebIdentityToken>system:serviceaccount:ns:sa"        \
	"</SubjectFromWebIdentityToken>\n"                                    \
	"    <Audience>sts.amazonaws.com</Audience>\n"                        \
	"    <AssumedRoleUser><Arn>arn:aws:sts::1:assumed-role/r/s</Arn>"     \
	"<AssumedRoleId>AROA:s</AssumedRoleId></AssumedRoleUser>\n"           \
	"    <Credentials>\n"                                                 \
	"      <SessionToken>" TOKEN "</SessionToken>\n"                      \
	"      <SecretAccessKey>" SECRET "</SecretAccessKey>\n"               \
	"      <Expiration>2024-05-01T16:00:00Z</Expiration>\n"               \
	"      <AccessKeyId>ASIAWEB</AccessKeyId>\n"                          \
	"    </Credentials>\n"                                                \
	"    <Provider>oidc.eks.amazonaws.com</Provider>\n"                   \
	"  </AssumeRoleWithWebIdentityResult>\n"                              \
	"  <ResponseMetadata><RequestId>r-1</RequestId></ResponseMetadata>\n" \
	"</AssumeRoleWithWebIdentityResponse>\n"

Test(sts, web_identity_reply)
{
	sts_reply r;
	char *err = NULL;
	cr_assert_eq(sts_parse_reply(WEB_REPLY, strlen(WEB_REPLY), &r, &err), 0,
		     "%s", err);
	cr_assert_str_eq(r.creds.access_key, "ASIAWEB");
	cr_assert_str_eq(r.creds.secret_key, SECRET);
	cr_assert_str_eq(r.creds.session_token, TOKEN);
	cr_assert_eq(r.creds.expires, 1714579200);
	sts_reply_free(&r);
}

Test(sts, assume_role_reply)
{
	const char *b =
	    "<AssumeRoleResponse><AssumeRoleResult><Credentials>"
	    "<AccessKeyId>ASIAROLE</AccessKeyId><SecretAccessKey>" SECRET
	    "</SecretAccessKey><SessionToken>" TOKEN "</SessionToken>"
	    "<Expiration>2024-05-01T16:00:00.000Z</Expiration></Credentials>"
	    "<AssumedRoleUser><Arn>a</Arn><AssumedRoleId>b</AssumedRoleId>"
	    "</AssumedRoleUser></AssumeRoleResult></AssumeRoleResponse>";
	sts_reply r;
	char *err = NULL;
	cr_assert_eq(sts_parse_reply(b, strlen(b), &r, &err), 0, "%s", err);
	cr_assert_str_eq(r.creds.access_key, "ASIAROLE");
	sts_reply_free(&r);
}

Test(sts, error_reply)
{
	const char *b =
	    "<ErrorResponse "
	    "xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
	    "<Error><Type>Sender</Type><Code>ExpiredTokenException</Code>"
	    "<Message>Token expired: current date/time 1700000100 must be "
	    "before the expiration date/time 1700000000</Message></Error>"
	    "<RequestId>r-2</RequestId></ErrorResponse>";
	sts_reply r;
	char *err = NULL;
	cr_assert_eq(sts_parse_reply(b, strlen(b), &r, &err), 1);
	cr_assert_str_eq(r.error_code, "ExpiredTokenException");
	assert_has(r.error_msg, "Token expired");
	cr_assert_null(r.creds.access_key);
	sts_reply_free(&r);
}

Test(sts, not_a_reply)
{
	const char *bad[] = {
	    "garbage " SECRET,
	    "<AssumeRoleResponse><AssumeRoleResult><Credentials><AccessKeyId>"
	    "A</AccessKeyId><SecretAccessKey>" SECRET "</SecretAccessKey>"
	    "<Expiration>2024-05-01T16:00:00Z</Expiration></Credentials>"
	    "</AssumeRoleResult></AssumeRoleResponse>",
	    "<ErrorResponse><Error><Message>x</Message></Error></"
	    "ErrorResponse>",
	    "<html><body>proxy login</body></html>",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		sts_reply r;
		char *err = NULL;
		cr_assert_eq(sts_parse_reply(bad[i], strlen(bad[i]), &r, &err),
			     -1, "accepted %s", bad[i]);
		cr_assert_not_null(err);
		assert_no_secret(err);
		free(err);
	}
}

/* ---- container host rule, command lines, refresh timing ----------------- */

TestSuite(rules, .init = setup, .fini = teardown);

Test(rules, container_hosts)
{
	const char *ok[] = {
	    "http://169.254.170.2/v2/credentials/x",
	    "http://169.254.170.23/v1/credentials",
	    "http://[fd00:ec2::23]/v1/credentials",
	    "http://127.0.0.1:8080/creds",
	    "http://127.1.2.3/creds",
	    "http://localhost:9/c",
	    "http://[::1]:80/c",
	    "https://creds.example.com/c",
	};
	const char *bad[] = {
	    "http://169.254.169.254/latest",
	    "http://10.0.0.1/c",
	    "http://example.com/c",
	    "http://user:pw@127.0.0.1/c",
	    "ftp://127.0.0.1/c",
	    "http://[fd00:ec2::24]/c",
	};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
		cr_assert_null(container_url_problem(ok[i]), "%s", ok[i]);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_assert_not_null(container_url_problem(bad[i]), "%s", bad[i]);
}

Test(rules, cmdline_split)
{
	char *err = NULL;
	char **a = cmdline_split("  /bin/helper --name 'a b' \"c \\\"d\\\"\" "
				 "e\\ f  ",
				 &err);
	cr_assert_not_null(a, "%s", err);
	const char *want[] = {"/bin/helper", "--name", "a b", "c \"d\"", "e f"};
	for (size_t i = 0; i < 5; i++)
		cr_assert_str_eq(a[i], want[i]);
	cr_assert_null(a[5]);
	argv_free(a);
	cr_assert_null(cmdline_split("x 'open", &err));
	assert_has(err, "unclosed quote");
	free(err);
	cr_assert_null(cmdline_split("   ", &err));
	assert_has(err, "empty");
	free(err);
}

Test(rules, refresh_time)
{
	/* five minutes before a long-lived set expires */
	cr_assert_eq(creds_refresh_at(1000, 1000 + 3600), 1000 + 3300);
	cr_assert_eq(creds_refresh_at(1000, 1000 + 6 * 3600),
		     1000 + 6 * 3600 - 300);
	/* a third of a short lifetime before */
	cr_assert_eq(creds_refresh_at(1000, 1000 + 24), 1000 + 16);
	cr_assert_eq(creds_refresh_at(1000, 1000 + 900), 1000 + 600);
	/* never sooner than a second after the fetch */
	cr_assert_eq(creds_refresh_at(1000, 1000), 1001);
}

Test(rules, retry_backoff)
{
	/* doubling from 1 s after each failure in a row, up to 60 s */
	cr_assert_eq(creds_retry_delay(1, 3000), 1);
	cr_assert_eq(creds_retry_delay(2, 3000), 2);
	cr_assert_eq(creds_retry_delay(3, 3000), 4);
	cr_assert_eq(creds_retry_delay(6, 3000), 32);
	cr_assert_eq(creds_retry_delay(7, 3000), 60);
	cr_assert_eq(creds_retry_delay(500, 3000), 60);
	/* never more than a quarter of the time left, never under 1 s */
	cr_assert_eq(creds_retry_delay(7, 100), 25);
	cr_assert_eq(creds_retry_delay(3, 8), 2);
	cr_assert_eq(creds_retry_delay(3, 2), 1);
	/* once expired, requests fail until a try works: at most 10 s */
	cr_assert_eq(creds_retry_delay(9, 0), 10);
	cr_assert_eq(creds_retry_delay(2, -30), 2);
}

/* ---- providers: configuration and order --------------------------------- */

TestSuite(providers, .init = setup, .fini = teardown);

static char *chain_err(const char *profile)
{
	creds_chain *ch = creds_chain_new(profile, NULL);
	s3_creds c;
	char *err = NULL;
	cr_assert_eq(creds_chain_get(ch, &c, &err), -1, "creds found: %s",
		     c.access_key);
	assert_no_secret(err);
	creds_chain_free(ch);
	return err;
}

static void chain_ok(const char *profile, const char *want_id)
{
	creds_chain *ch = creds_chain_new(profile, NULL);
	s3_creds c;
	char *err = NULL;
	cr_assert_eq(creds_chain_get(ch, &c, &err), 0, "%s", err);
	cr_assert_str_eq(c.access_key, want_id);
	s3_creds_free(&c);
	creds_chain_free(ch);
}

#define PROC_JSON(id)                                                     \
	"printf '{\"Version\": 1, \"AccessKeyId\": \"" id "\", "          \
	"\"SecretAccessKey\": \"" SECRET "\", \"SessionToken\": \"" TOKEN \
	"\", \"Expiration\": \"2999-01-01T00:00:00Z\"}'"

/* Within one fetch of the chain each profile file is read once: the
 * shared-file provider and the merged profile (assume role, web
 * identity, credential_process) see the same reading, even when the file
 * changes in between; the next fetch (a new memo) reads it again. */
Test(providers, profile_files_read_once_per_fetch)
{
	static const char *c1 = "[p]\naws_access_key_id = AKIDFIRST\n"
				"aws_secret_access_key = " SECRET "\n";
	static const char *c2 = "[p]\naws_access_key_id = AKIDSECOND\n"
				"aws_secret_access_key = " SECRET "\n";
	config("[profile p]\nregion = eu-west-3\n");
	const char *cred = write_file("credentials", c1);
	setenv("AWS_SHARED_CREDENTIALS_FILE", cred, 1);
	creds_profile_memo m = {.profile = "p"};
	creds_ctx cx = {"p", "us-east-1", NULL, &m};
	s3_creds out = {0};
	buf tried = BUF_INIT;
	char *err = NULL;
	cr_assert_eq(credp_shared_file(NULL, &cx, &out, &tried, &err), 1,
		     "%s", err);
	cr_assert_str_eq(out.access_key, "AKIDFIRST");
	s3_creds_free(&out);
	write_file("credentials", c2); /* changed in the middle of the fetch */
	const aws_profile *p;
	const char *where;
	cr_assert_eq(creds_ctx_profile(&cx, &p, &where, &err), 0, "%s", err);
	cr_assert_str_eq(p->access_key.v, "AKIDFIRST");
	cr_assert_str_eq(p->region.v, "eu-west-3"); /* both files merged */
	assert_has(where, cred);
	buf_reset(&tried);
	cr_assert_eq(credp_shared_file(NULL, &cx, &out, &tried, &err), 1);
	cr_assert_str_eq(out.access_key, "AKIDFIRST");
	s3_creds_free(&out);
	creds_profile_memo_free(&m);
	/* the next fetch reads the files again */
	cr_assert_str_eq(m.profile, "p");
	cr_assert_eq(credp_shared_file(NULL, &cx, &out, &tried, &err), 1);
	cr_assert_str_eq(out.access_key, "AKIDSECOND");
	s3_creds_free(&out);
	creds_profile_memo_free(&m);
	buf_free(&tried);
}

Test(providers, credential_process_runs_a_command)
{
	config("[default]\ncredential_process = " PROC_JSON("ASIAPROC") "\n");
	chain_ok(NULL, "ASIAPROC");
}

Test(providers, credential_process_failure_names_the_status)
{
	config("[profile p]\ncredential_process = /bin/sh -c 'exit 3'\n");
	char *err = chain_err("p");
	assert_has(err, "credential_process (profile p)");
	assert_has(err, "exited with status 3");
	free(err);
	config("[default]\ncredential_process = /nonexistent/helper\n");
	err = chain_err(NULL);
	assert_has(err, "cannot run '/nonexistent/helper'");
	free(err);
	config("[default]\ncredential_process = printf garbage\n");
	err = chain_err(NULL);
	assert_has(err, "not JSON");
	free(err);
}

Test(providers, environment_beats_everything)
{
	setenv("AWS_ACCESS_KEY_ID", "AKIAENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", SECRET, 1);
	setenv("AWS_WEB_IDENTITY_TOKEN_FILE", "/nonexistent", 1);
	setenv("AWS_ROLE_ARN", "arn:aws:iam::1:role/r", 1);
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://10.1.1.1/", 1);
	config("[default]\nrole_arn = arn:aws:iam::1:role/x\n"
	       "credential_source = Ec2InstanceMetadata\n"
	       "credential_process = /bin/false\n");
	chain_ok(NULL, "AKIAENV");
}

Test(providers, explicit_profile_ignores_environment_keys)
{
	setenv("AWS_ACCESS_KEY_ID", "AKIAENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", SECRET, 1);
	setenv("AWS_SHARED_CREDENTIALS_FILE",
	       write_file("credentials",
			  "[ckpt]\n"
			  "aws_access_key_id = AKIAPROFILE\n"
			  "aws_secret_access_key = " SECRET "\n"),
	       1);
	/* --profile / -o profile=: the profile, as `aws --profile` does */
	s3_settings st = {.profile = strdup("ckpt"),
			  .endpoint = strdup("http://127.0.0.1:9")};
	char *err = NULL;
	cr_assert_eq(s3_settings_resolve(&st, &err), 0, "%s", err);
	cr_assert(st.profile_explicit);
	creds_chain *ch = creds_chain_new_profile(st.profile, st.region);
	s3_creds c;
	cr_assert_eq(creds_chain_get(ch, &c, &err), 0, "%s", err);
	cr_assert_str_eq(c.access_key, "AKIAPROFILE");
	s3_creds_free(&c);
	creds_chain_free(ch);
	s3_settings_free(&st);
	/* AWS_PROFILE: environment keys still win */
	setenv("AWS_PROFILE", "ckpt", 1);
	s3_settings st2 = {.endpoint = strdup("http://127.0.0.1:9")};
	cr_assert_eq(s3_settings_resolve(&st2, &err), 0, "%s", err);
	cr_assert_not(st2.profile_explicit);
	s3_settings_free(&st2);
	chain_ok(NULL, "AKIAENV");
}

Test(providers, shared_file_beats_process_which_beats_config_file)
{
	config("[default]\ncredential_process = " PROC_JSON(
	    "ASIAPROC") "\n"
			"aws_access_key_id = AKIACONFIG\n"
			"aws_secret_access_key = " SECRET "\n");
	chain_ok(NULL, "ASIAPROC");
	setenv("AWS_SHARED_CREDENTIALS_FILE",
	       write_file("credentials",
			  "[default]\n"
			  "aws_access_key_id = AKIASHARED\n"
			  "aws_secret_access_key = " SECRET "\n"),
	       1);
	chain_ok(NULL, "AKIASHARED");
}

Test(providers, web_identity_needs_a_readable_token_file_and_a_role)
{
	setenv("AWS_WEB_IDENTITY_TOKEN_FILE", "/nonexistent/token", 1);
	char *err = chain_err(NULL);
	assert_has(err, "web identity");
	assert_has(err, "AWS_ROLE_ARN");
	free(err);
	setenv("AWS_ROLE_ARN", "arn:aws:iam::1:role/r", 1);
	err = chain_err(NULL);
	assert_has(err, "cannot read /nonexistent/token");
	free(err);
	setenv("AWS_WEB_IDENTITY_TOKEN_FILE", write_file("tok", "\n"), 1);
	err = chain_err(NULL);
	assert_has(err, "is empty");
	free(err);
}

Test(providers, web_identity_from_the_profile)
{
	config("[profile k8s]\nrole_arn = arn:aws:iam::1:role/r\n"
	       "web_identity_token_file = /nonexistent/profile-token\n");
	char *err = chain_err("k8s");
	assert_has(err, "/nonexistent/profile-token");
	free(err);
}

Test(providers, assume_role_configuration_errors)
{
	config("[default]\nrole_arn = arn:aws:iam::1:role/r\n");
	char *err = chain_err(NULL);
	assert_has(err, "neither source_profile nor credential_source");
	free(err);
	config("[default]\nrole_arn = arn:aws:iam::1:role/r\n"
	       "source_profile = a\ncredential_source = Environment\n");
	err = chain_err(NULL);
	assert_has(err, "both source_profile and credential_source");
	free(err);
	config("[default]\nrole_arn = arn:aws:iam::1:role/r\n"
	       "credential_source = Nowhere\n");
	err = chain_err(NULL);
	assert_has(err, "not 'Nowhere'");
	free(err);
	config("[default]\nrole_arn = arn:aws:iam::1:role/r\n"
	       "source_profile = base\nmfa_serial = arn:aws:iam::1:mfa/u\n");
	err = chain_err(NULL);
	assert_has(err, "MFA");
	free(err);
	config("[default]\nrole_arn = arn:aws:iam::1:role/r\n"
	       "source_profile = missing\n");
	err = chain_err(NULL);
	assert_has(err, "source_profile 'missing' not found");
	free(err);
	config("[default]\nrole_arn = arn:aws:iam::1:role/r\n"
	       "credential_source = Environment\n");
	err = chain_err(NULL);
	assert_has(err, "credential_source Environment gave no credentials");
	free(err);
}

Test(providers, assume_role_loop_is_caught)
{
	config("[profile a]\nrole_arn = arn:aws:iam::1:role/a\n"
	       "source_profile = b\n"
	       "[profile b]\nrole_arn = arn:aws:iam::1:role/b\n"
	       "source_profile = a\n");
	char *err = chain_err("a");
	assert_has(err, "(a loop?)");
	free(err);
}

Test(providers, container_full_uri_host_is_checked)
{
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://10.0.0.1/creds",
	       1);
	char *err = chain_err(NULL);
	assert_has(err, "AWS_CONTAINER_CREDENTIALS_FULL_URI");
	assert_has(err, "use https://");
	assert_has(err, "tried before: environment");
	free(err);
}

Test(providers, container_token_file_missing)
{
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://127.0.0.1:9/c", 1);
	setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "/nonexistent/t", 1);
	char *err = chain_err(NULL);
	assert_has(err, "cannot read /nonexistent/t");
	free(err);
}

Test(providers, imds_unreachable_is_nothing_with_a_reason, .timeout = 20)
{
	/* a closed port on loopback: refused at once */
	unsetenv("AWS_EC2_METADATA_DISABLED");
	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:9", 1);
	char *err = chain_err(NULL);
	assert_has(err, "no AWS credentials found");
	assert_has(err, "EC2 instance metadata (PUT http://127.0.0.1:9/latest/"
			"api/token");
	free(err);
}

/* ---- the chain: caching, background refresh, threads -------------------- */

TestSuite(chain, .init = setup, .fini = teardown);

typedef struct fake {
	atomic_int calls;
	time_t expires_in; /* 0: never expire */
	int fail_after;	   /* fail from this call on; 0: never */
	int slow_from;	   /* calls from this one on take slow_ms */
	long slow_ms;
} fake;

static int fake_fetch(const creds_provider *self, const creds_ctx *cx,
		      s3_creds *out, buf *tried, char **err)
{
	fake *f = self->arg;
	int n = ++f->calls;
	if (f->slow_from && n >= f->slow_from)
		usleep((useconds_t)f->slow_ms * 1000);
	if (f->fail_after && n >= f->fail_after) {
		*err = strdup("fake provider failed");
		return -1;
	}
	char id[32];
	snprintf(id, sizeof(id), "AKIA%d", n);
	out->access_key = strdup(id);
	out->secret_key = strdup(SECRET);
	out->session_token = strdup(TOKEN);
	out->expires = f->expires_in ? time(NULL) + f->expires_in : 0;
	return 1;
}

static int empty_fetch(const creds_provider *self, const creds_ctx *cx,
		       s3_creds *out, buf *tried, char **err)
{
	if (self->arg)
		buf_printf(tried, "%s for %s", (const char *)self->arg,
			   cx->profile);
	return 0;
}

static const char *get_id(creds_chain *ch)
{
	static __thread char id[32];
	s3_creds c;
	char *err = NULL;
	cr_assert_eq(creds_chain_get(ch, &c, &err), 0, "%s", err ? err : "");
	snprintf(id, sizeof(id), "%s", c.access_key);
	s3_creds_free(&c);
	return id;
}

Test(chain, static_creds_are_cached)
{
	setenv("AWS_ACCESS_KEY_ID", "AKIAFIRST", 1);
	setenv("AWS_SECRET_ACCESS_KEY", SECRET, 1);
	creds_chain *ch = creds_chain_new(NULL, NULL);
	cr_assert_str_eq(get_id(ch), "AKIAFIRST");
	setenv("AWS_ACCESS_KEY_ID", "AKIASECOND", 1);
	cr_assert_str_eq(get_id(ch), "AKIAFIRST");
	creds_chain_free(ch);
}

Test(chain, far_expiry_is_cached)
{
	fake f = {.expires_in = 3600};
	creds_provider p = {"fake", fake_fetch, &f};
	creds_chain *ch = creds_chain_new_with("default", NULL, &p, 1);
	cr_assert_str_eq(get_id(ch), "AKIA1");
	cr_assert_str_eq(get_id(ch), "AKIA1");
	cr_assert_eq(f.calls, 1);
	creds_chain_free(ch);
}

/* Polls until the chain hands out a different key id; returns seconds. */
static double wait_rotation(creds_chain *ch, const char *from, double limit)
{
	double t0 = clock_mono();
	while (strcmp(get_id(ch), from) == 0) {
		cr_assert_lt(clock_mono() - t0, limit, "no refresh in %.0f s",
			     limit);
		usleep(20000);
	}
	return clock_mono() - t0;
}

Test(chain, refreshes_in_the_background_before_expiry, .timeout = 20)
{
	fake f = {.expires_in = 6}; /* refreshed 2 s before expiry */
	creds_provider p = {"fake", fake_fetch, &f};
	creds_chain *ch = creds_chain_new_with("default", NULL, &p, 1);
	cr_assert_str_eq(get_id(ch), "AKIA1");
	double t = wait_rotation(ch, "AKIA1", 6);
	cr_assert_geq(t, 3.0, "refreshed after %.1f s", t);
	cr_assert_str_eq(get_id(ch), "AKIA2");
	cr_assert_eq(f.calls, 2);
	creds_chain_free(ch);
}

/* The fake's expiry is whole seconds of time(NULL), so a set fetched late
 * in a second expires up to 1 s before expires_in says: start just after
 * a second begins (50 ms after: time() is a coarse clock, a few ms
 * behind). */
static void at_second_start(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	usleep((useconds_t)((1000000000L - ts.tv_nsec) / 1000) + 50000);
}

Test(chain, callers_never_wait_for_a_refresh, .timeout = 20)
{
	/* the refresh (at 4 s) takes 0.5 s, done before the set's last
	 * second; meanwhile every get returns at once */
	fake f = {.expires_in = 6, .slow_from = 2, .slow_ms = 500};
	creds_provider p = {"fake", fake_fetch, &f};
	at_second_start();
	creds_chain *ch = creds_chain_new_with("default", NULL, &p, 1);
	cr_assert_str_eq(get_id(ch), "AKIA1");
	double worst = 0, t0 = clock_mono();
	while (strcmp(get_id(ch), "AKIA1") == 0) {
		double a = clock_mono();
		get_id(ch);
		double d = clock_mono() - a;
		worst = d > worst ? d : worst;
		cr_assert_lt(clock_mono() - t0, 10.0);
		usleep(5000);
	}
	cr_assert_lt(worst, 0.5, "a get waited %.2f s", worst);
	cr_assert_eq(f.calls, 2);
	creds_chain_free(ch);
}

/* A get that must fail without waiting on the provider: its message. */
/* want: -1 (the refresh failed) or CREDS_BUSY (its first try still runs) */
static char *get_fails_at_once(creds_chain *ch, int want)
{
	s3_creds c;
	char *err = NULL;
	double a = clock_mono();
	cr_assert_eq(creds_chain_get(ch, &c, &err), want);
	cr_assert_lt(clock_mono() - a, 0.5, "the caller waited on the provider");
	cr_assert_null(c.access_key);
	return err;
}

Test(chain, failed_refresh_keeps_the_set_until_it_expires, .timeout = 20)
{
	fake f = {.expires_in = 6, .fail_after = 2};
	creds_provider p = {"fake", fake_fetch, &f};
	at_second_start(); /* usable until 5 s from now, not maybe 4 s */
	creds_chain *ch = creds_chain_new_with("default", NULL, &p, 1);
	double t0 = clock_mono();
	cr_assert_str_eq(get_id(ch), "AKIA1");
	creds_status st;
	cr_assert_eq(creds_chain_status(ch, &st), 0);
	cr_assert_str_eq(st.source, "fake");
	cr_assert(st.expires - time(NULL) >= 5 && st.expires - time(NULL) <= 6);
	cr_assert(st.refresh_failures == 0 && st.failing == 0 &&
		  !st.last_error);
	do { /* the refresh at 4 s fails; the next try 1 s later */
		cr_assert_lt(clock_mono() - t0, 6.0);
		usleep(20000);
		creds_status_free(&st);
		cr_assert_eq(creds_chain_status(ch, &st), 0);
	} while (st.failing < 1);
	cr_assert_eq(st.refresh_failures, st.failing);
	cr_assert_eq(st.refreshes, 0);
	cr_assert_str_eq(st.last_error, "fake provider failed");
	cr_assert_eq(st.next_refresh, st.last_error_at + 1);
	creds_status_free(&st);
	if (clock_mono() - t0 < 4.5)
		cr_assert_str_eq(get_id(ch), "AKIA1");
	while (clock_mono() - t0 < 5.5)
		usleep(50000);
	char *err = get_fails_at_once(ch, -1);
	assert_has(err, "the credentials from fake expire"); /* in 1 s, or expired */
	assert_has(err, "refreshing them failed: fake provider failed");
	free(err);
	creds_chain_free(ch);
}

Test(chain, a_set_expiring_during_a_hung_refresh_fails_at_once,
     .timeout = 20)
{
	/* refreshed at 4 s, usable until 5 s; the refresh takes 4 s */
	fake f = {.expires_in = 6, .slow_from = 2, .slow_ms = 4000};
	creds_provider p = {"fake", fake_fetch, &f};
	at_second_start();
	creds_chain *ch = creds_chain_new_with("default", NULL, &p, 1);
	double t0 = clock_mono();
	cr_assert_str_eq(get_id(ch), "AKIA1");
	while (clock_mono() - t0 < 5.5)
		usleep(50000);
	creds_status st;
	cr_assert_eq(creds_chain_status(ch, &st), 0);
	cr_assert(st.refreshing);
	creds_status_free(&st);
	char *err = get_fails_at_once(ch, CREDS_BUSY);
	assert_has(err, "still waiting on the provider");
	free(err);
	err = NULL;
	s3_creds c;
	while (creds_chain_get(ch, &c, &err) < 0) { /* until it returns */
		free(err);
		err = NULL;
		cr_assert_lt(clock_mono() - t0, 12.0);
		usleep(50000);
	}
	cr_assert_str_eq(c.access_key, "AKIA2");
	s3_creds_free(&c);
	cr_assert_eq(f.calls, 2, "a caller fetched beside the refresher");
	creds_chain_free(ch);
}

Test(chain, expired_sets_are_refused)
{
	fake f = {.expires_in = -10};
	creds_provider p = {"fake", fake_fetch, &f};
	creds_chain *ch = creds_chain_new_with("default", NULL, &p, 1);
	s3_creds c;
	char *err = NULL;
	cr_assert_eq(creds_chain_get(ch, &c, &err), -1);
	assert_has(err, "had expired");
	free(err);
	creds_chain_free(ch);
}

Test(chain, providers_tried_in_order)
{
	fake f = {0};
	creds_provider ps[] = {
	    {"first", empty_fetch, NULL},
	    {"second", empty_fetch, "somewhere"},
	    {"fake", fake_fetch, &f},
	    {"never", empty_fetch, NULL},
	};
	creds_chain *ch = creds_chain_new_with("p", NULL, ps, 4);
	cr_assert_str_eq(get_id(ch), "AKIA1");
	creds_chain_free(ch);

	ch = creds_chain_new_with("p", NULL, ps, 2);
	s3_creds c;
	char *err = NULL;
	cr_assert_eq(creds_chain_get(ch, &c, &err), -1);
	cr_assert_str_eq(err, "no AWS credentials found (tried: first, "
			      "somewhere for p)");
	free(err);
	creds_chain_free(ch);
}

Test(chain, error_stops_the_chain_and_says_what_was_tried)
{
	fake bad = {.fail_after = 1}, good = {0};
	creds_provider ps[] = {
	    {"empty", empty_fetch, "looked here"},
	    {"bad", fake_fetch, &bad},
	    {"good", fake_fetch, &good},
	};
	creds_chain *ch = creds_chain_new_with(NULL, NULL, ps, 3);
	s3_creds c;
	char *err = NULL;
	cr_assert_eq(creds_chain_get(ch, &c, &err), -1);
	cr_assert_str_eq(err, "fake provider failed (tried before: looked "
			      "here for default)");
	cr_assert_eq(good.calls, 0);
	free(err);
	creds_chain_free(ch);
}

Test(chain, copies_are_independent)
{
	fake f = {0};
	creds_provider p = {"fake", fake_fetch, &f};
	creds_chain *ch = creds_chain_new_with(NULL, NULL, &p, 1);
	s3_creds a, b;
	char *err = NULL;
	cr_assert_eq(creds_chain_get(ch, &a, &err), 0);
	cr_assert_eq(creds_chain_get(ch, &b, &err), 0);
	cr_assert_neq(a.secret_key, b.secret_key);
	cr_assert_str_eq(a.session_token, TOKEN);
	s3_creds_free(&a);
	cr_assert_str_eq(b.secret_key, SECRET);
	s3_creds_free(&b);
	creds_chain_free(ch);
}

typedef struct worker {
	creds_chain *ch;
	int ok, bad;
	double until;
} worker;

static void *worker_run(void *arg)
{
	worker *w = arg;
	do {
		s3_creds c;
		char *err = NULL;
		if (creds_chain_get(w->ch, &c, &err) == 0 &&
		    strcmp(c.secret_key, SECRET) == 0 && c.expires > time(NULL))
			w->ok++;
		else
			w->bad++;
		s3_creds_free(&c);
		free(err);
	} while (clock_mono() < w->until);
	return NULL;
}

static int run_threads(creds_chain *ch, double secs, int *bad)
{
	pthread_t t[8];
	worker w[8];
	double until = clock_mono() + secs;
	for (int i = 0; i < 8; i++) {
		w[i] = (worker){ch, 0, 0, until};
		cr_assert_eq(pthread_create(&t[i], NULL, worker_run, &w[i]), 0);
	}
	int ok = 0;
	*bad = 0;
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		ok += w[i].ok;
		*bad += w[i].bad;
	}
	return ok;
}

Test(chain, concurrent_gets_fetch_once)
{
	fake f = {.expires_in = 3600};
	creds_provider p = {"fake", fake_fetch, &f};
	creds_chain *ch = creds_chain_new_with(NULL, NULL, &p, 1);
	int bad;
	cr_assert_gt(run_threads(ch, 0.2, &bad), 0);
	cr_assert_eq(bad, 0);
	cr_assert_eq(f.calls, 1);
	creds_chain_free(ch);
}

Test(chain, concurrent_gets_across_refreshes_never_fail, .timeout = 30)
{
	fake f = {.expires_in = 3};
	creds_provider p = {"fake", fake_fetch, &f};
	creds_chain *ch = creds_chain_new_with(NULL, NULL, &p, 1);
	int bad;
	cr_assert_gt(run_threads(ch, 4.5, &bad), 0);
	cr_assert_eq(bad, 0);
	cr_assert_geq(f.calls, 3, "only %d fetches", (int)f.calls);
	cr_assert_leq(f.calls, 6, "%d fetches", (int)f.calls);
	creds_chain_free(ch);
}
