/*
 * creds-remote: credentials from an HTTP service of the machine.
 *
 * Container credentials (ECS task roles, EKS Pod Identity), as AWS's SDK
 * reference describes them.  AWS_CONTAINER_CREDENTIALS_RELATIVE_URI is
 * fetched from http://169.254.170.2; otherwise
 * AWS_CONTAINER_CREDENTIALS_FULL_URI, whose host must pass
 * container_url_problem (creds-parse.c).  The Authorization header is the
 * contents of AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE (read again on every
 * fetch: EKS rotates it), else AWS_CONTAINER_AUTHORIZATION_TOKEN.  Up to
 * CONTAINER_ATTEMPTS tries of CONTAINER_TIMEOUT_MS each, a second apart
 * (the AWS CLI's numbers).  A configured endpoint that gives nothing is
 * an error that stops the chain.
 *
 * EC2 instance metadata (IMDS), IMDSv2 first: PUT /latest/api/token with
 * X-aws-ec2-metadata-token-ttl-seconds, then GET
 * /latest/meta-data/iam/security-credentials/ (the role name) and .../ROLE
 * (the JSON) with X-aws-ec2-metadata-token.  A token request refused with
 * 403/404/405, or connected but unanswered in time (botocore's rule),
 * falls back to IMDSv1 (the same GETs
 * without a token) unless AWS_EC2_METADATA_V1_DISABLED or the profile's
 * ec2_metadata_v1_disabled says not to.  AWS_EC2_METADATA_DISABLED=true
 * skips it; AWS_EC2_METADATA_SERVICE_ENDPOINT (or _ENDPOINT_MODE=IPv6)
 * moves it; AWS_METADATA_SERVICE_TIMEOUT (seconds, default 1) and
 * AWS_METADATA_SERVICE_NUM_ATTEMPTS (default 1) bound it.  IMDS is the
 * last provider and, as in the AWS CLI, its failures are "nothing here"
 * with the reason in the chain's message.
 */
#include "s3/creds-remote.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "s3/aws-files.h"
#include "s3/creds-http.h"
#include "s3/creds-local.h"
#include "s3/creds-parse.h"

#define CONTAINER_HOST "http://169.254.170.2"
#define CONTAINER_ATTEMPTS 3
#define CONTAINER_TIMEOUT_MS 2000
#define IMDS_DEFAULT "http://169.254.169.254"
#define IMDS_DEFAULT_V6 "http://[fd00:ec2::254]"
#define IMDS_TOKEN_TTL "21600"

static bool env_true(const char *name)
{
	const char *v = s3cfg_env_get(name);
	return v && strcasecmp(v, "true") == 0;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* ---- container credentials ---------------------------------------------- */

/* The Authorization value, NULL when none; *err set on failure. */
static char *container_token(bool *failed, char **err)
{
	*failed = false;
	const char *f = s3cfg_env_get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
	const char *t = s3cfg_env_get("AWS_CONTAINER_AUTHORIZATION_TOKEN");
	char *tok = NULL;
	if (f)
		tok = creds_read_token_file(
		    f, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", err);
	else if (t)
		tok = strdup(t);
	if ((f || t) && !tok) {
		*failed = true;
		if (!f)
			s3cfg_fail_oom(err);
		return NULL;
	}
	if (tok && strpbrk(tok, "\r\n")) {
		s3cfg_secret_free(tok);
		*failed = true;
		s3cfg_fail(err, "the container authorization token contains a "
				"line break");
		return NULL;
	}
	return tok;
}

/* One GET of the container endpoint: 1 creds, 0 retry, -1 give up. */
static int container_try(const credhttp_req *rq, const char *label,
			 s3_creds *out, char **err)
{
	credhttp_resp rs;
	char *herr = NULL;
	if (credhttp_perform(rq, &rs, &herr) < 0) {
		free(*err);
		*err = herr;
		return 0;
	}
	int rc;
	if (rs.status == 200) {
		rc = creds_parse_json(rs.body.data ? rs.body.data : "",
				      rs.body.len, false, label, out, err) == 0
			 ? 1
			 : -1;
	} else {
		free(*err);
		s3cfg_fail(err, "%s answered HTTP %ld", label, rs.status);
		rc = rs.status >= 500 ? 0 : -1;
	}
	if (rs.body.data)
		explicit_bzero(rs.body.data, rs.body.len);
	buf_free(&rs.body);
	return rc;
}

int credp_container(const creds_provider *self, const creds_ctx *cx,
		    s3_creds *out, buf *tried, char **err)
{
	const char *rel =
	    s3cfg_env_get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
	const char *full = s3cfg_env_get("AWS_CONTAINER_CREDENTIALS_FULL_URI");
	if (!rel && !full) {
		buf_puts(tried, "container credentials "
				"(AWS_CONTAINER_CREDENTIALS_RELATIVE_URI and "
				"_FULL_URI not set)");
		return 0;
	}
	const char *why = rel ? NULL : container_url_problem(full);
	if (why)
		return s3cfg_fail(err,
				  "AWS_CONTAINER_CREDENTIALS_FULL_URI '%s' "
				  "cannot be used: %s",
				  full, why);
	buf url = BUF_INIT, label = BUF_INIT, auth = BUF_INIT;
	buf_printf(&url, "%s%s%s", rel ? CONTAINER_HOST : full,
		   rel && rel[0] != '/' ? "/" : "", rel ? rel : "");
	/* the relative URI is the task's capability: not in messages */
	buf_printf(&label, "the container credentials endpoint %s",
		   rel ? CONTAINER_HOST " (AWS_CONTAINER_CREDENTIALS_"
					"RELATIVE_URI)"
		       : full);
	bool failed;
	char *tok = container_token(&failed, err);
	int rc = failed ? -1 : 0;
	if (tok)
		buf_printf(&auth, "Authorization: %s", tok);
	const char *hdrs[] = {"Accept: application/json",
			      tok ? buf_cstr(&auth) : NULL, NULL};
	credhttp_req rq = {.method = "GET",
			   .url = buf_cstr(&url),
			   .headers = hdrs,
			   .connect_ms = CONTAINER_TIMEOUT_MS,
			   .total_ms = CONTAINER_TIMEOUT_MS,
			   .ca_bundle = cx->ca_bundle,
			   .label = buf_cstr(&label)};
	for (int i = 0; rc == 0 && i < CONTAINER_ATTEMPTS; i++) {
		if (i)
			sleep_ms(1000);
		rc = container_try(&rq, buf_cstr(&label), out, err);
	}
	if (rc == 0 && *err) {
		char *e = *err;
		*err = NULL;
		s3cfg_fail(err, "%s (%d attempts)", e, CONTAINER_ATTEMPTS);
		free(e);
	}
	s3cfg_secret_free(tok);
	if (auth.data)
		explicit_bzero(auth.data, auth.len);
	buf_free(&auth);
	buf_free(&url);
	buf_free(&label);
	return rc > 0 ? 1 : -1;
}

/* ---- EC2 instance metadata ---------------------------------------------- */

typedef struct imds {
	char base[512];
	long timeout_ms;
	int attempts;
	bool v1_allowed;
	char *token; /* NULL: IMDSv1 */
} imds;

static void imds_setup(imds *m, const creds_ctx *cx)
{
	const char *ep = s3cfg_env_get("AWS_EC2_METADATA_SERVICE_ENDPOINT");
	const char *mode =
	    s3cfg_env_get("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE");
	if (!ep)
		ep = mode && strcasecmp(mode, "IPv6") == 0 ? IMDS_DEFAULT_V6
							   : IMDS_DEFAULT;
	snprintf(m->base, sizeof m->base, "%s", ep);
	size_t n = strlen(m->base);
	while (n > 0 && m->base[n - 1] == '/')
		m->base[--n] = '\0';
	const char *t = s3cfg_env_get("AWS_METADATA_SERVICE_TIMEOUT");
	double secs = t ? atof(t) : 1.0;
	m->timeout_ms = secs > 0 ? (long)(secs * 1000) : 1000;
	const char *a = s3cfg_env_get("AWS_METADATA_SERVICE_NUM_ATTEMPTS");
	m->attempts = a && atoi(a) > 0 ? atoi(a) : 1;
	m->v1_allowed = !env_true("AWS_EC2_METADATA_V1_DISABLED");
	if (m->v1_allowed && !s3cfg_env_get("AWS_EC2_METADATA_V1_DISABLED")) {
		const aws_profile *p;
		const char *where;
		char *perr = NULL;
		if (creds_ctx_profile(cx, &p, &where, &perr) == 0 &&
		    p->imds_v1_disabled.v &&
		    strcasecmp(p->imds_v1_disabled.v, "true") == 0)
			m->v1_allowed = false;
		free(perr);
	}
	m->token = NULL;
}

/* One IMDS request with the attempts allowed: 0 reply, -1 *err. */
static int imds_do(imds *m, const char *method, const char *path,
		   const char *hdr, credhttp_resp *rs, char **err)
{
	buf url = BUF_INIT;
	buf_printf(&url, "%s%s", m->base, path);
	const char *hdrs[] = {hdr, NULL};
	credhttp_req rq = {.method = method,
			   .url = buf_cstr(&url),
			   .headers = hdr ? hdrs : NULL,
			   .connect_ms = m->timeout_ms,
			   .total_ms = m->timeout_ms};
	int rc = -1;
	for (int i = 0; rc < 0 && i < m->attempts; i++) {
		free(*err);
		*err = NULL;
		rc = credhttp_perform(&rq, rs, err);
	}
	buf_free(&url);
	return rc;
}

/* IMDSv2 token: 1 got one, 0 use v1, -1 *err. */
static int imds_token(imds *m, char **err)
{
	credhttp_resp rs;
	int rc = imds_do(
	    m, "PUT", "/latest/api/token",
	    "X-aws-ec2-metadata-token-ttl-seconds: " IMDS_TOKEN_TTL, &rs, err);
	if (rc < 0 && !(rs.timed_out && rs.connected))
		return -1; /* nobody there: no point asking for IMDSv1 */
	if (rc == 0 && rs.status == 200 && rs.body.len > 0 &&
	    !memchr(rs.body.data, '\n', rs.body.len)) {
		m->token = buf_steal(&rs.body);
		return 1;
	}
	buf_free(&rs.body);
	if (rc == 0 && rs.status != 403 && rs.status != 404 &&
	    rs.status != 405 && rs.status != 200) {
		free(*err);
		return s3cfg_fail(err,
				  "PUT %s/latest/api/token answered HTTP %ld",
				  m->base, rs.status);
	}
	if (!m->v1_allowed) {
		char *e = *err;
		*err = NULL;
		s3cfg_fail(err, "no IMDSv2 token (%s) and IMDSv1 is disabled",
			   e ? e : "the token request was refused");
		free(e);
		return -1;
	}
	free(*err);
	*err = NULL;
	return 0;
}

/* GET path with the token; 200 body into *body (caller frees). */
static int imds_get(imds *m, const char *path, buf *body, char **err)
{
	buf h = BUF_INIT;
	if (m->token)
		buf_printf(&h, "X-aws-ec2-metadata-token: %s", m->token);
	credhttp_resp rs;
	int rc =
	    imds_do(m, "GET", path, m->token ? buf_cstr(&h) : NULL, &rs, err);
	buf_free(&h);
	if (rc < 0)
		return -1;
	if (rs.status != 200) {
		buf_free(&rs.body);
		return s3cfg_fail(err, "GET %s%s answered HTTP %ld%s", m->base,
				  path, rs.status,
				  rs.status == 404   ? " (no instance role?)"
				  : rs.status == 401 ? " (IMDSv2 token refused)"
						     : "");
	}
	*body = rs.body;
	return 0;
}

static int imds_fetch(imds *m, s3_creds *out, char **err)
{
	int rc = imds_token(m, err);
	if (rc < 0)
		return -1;
	const char *dir = "/latest/meta-data/iam/security-credentials/";
	buf role = BUF_INIT, doc = BUF_INIT;
	if (imds_get(m, dir, &role, err) < 0)
		return -1;
	const char *r = buf_cstr(&role);
	size_t n = strcspn(r, "\r\n");
	while (n > 0 && s3cfg_is_space(r[n - 1]))
		n--;
	buf path = BUF_INIT;
	buf_printf(&path, "%s%.*s", dir, (int)n, r);
	if (n == 0 || memchr(r, '/', n))
		rc = s3cfg_fail(err, "GET %s%s: no role name in the reply",
				m->base, dir);
	else if (imds_get(m, buf_cstr(&path), &doc, err) < 0)
		rc = -1;
	else {
		buf what = BUF_INIT;
		buf_printf(&what, "%s%s", m->base, buf_cstr(&path));
		rc = creds_parse_json(doc.data ? doc.data : "", doc.len, false,
				      buf_cstr(&what), out, err);
		buf_free(&what);
	}
	if (doc.data)
		explicit_bzero(doc.data, doc.len);
	buf_free(&doc);
	buf_free(&role);
	buf_free(&path);
	return rc;
}

int credp_imds(const creds_provider *self, const creds_ctx *cx, s3_creds *out,
	       buf *tried, char **err)
{
	if (env_true("AWS_EC2_METADATA_DISABLED")) {
		buf_puts(tried, "EC2 instance metadata (disabled by "
				"AWS_EC2_METADATA_DISABLED)");
		return 0;
	}
	imds m;
	imds_setup(&m, cx);
	char *why = NULL;
	int rc = imds_fetch(&m, out, &why);
	s3cfg_secret_free(m.token);
	if (rc == 0)
		return 1;
	s3_creds_free(out);
	buf_printf(tried, "EC2 instance metadata (%s)",
		   why ? why : "out of memory");
	free(why);
	return 0;
}
