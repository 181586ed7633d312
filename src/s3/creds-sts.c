/*
 * creds-sts: credentials from AWS STS.
 *
 * Web identity (EKS IRSA and any OIDC setup): AWS_WEB_IDENTITY_TOKEN_FILE,
 * AWS_ROLE_ARN and AWS_ROLE_SESSION_NAME, each falling back to the
 * profile's web_identity_token_file, role_arn and role_session_name.  The
 * token file is read on every fetch (Kubernetes rotates it) and sent in
 * an unsigned AssumeRoleWithWebIdentity.
 *
 * Assume role: a profile with role_arn (and no web_identity_token_file)
 * takes its source credentials from source_profile (static keys,
 * credential_process, web identity, or another role, followed up to
 * ASSUME_DEPTH profiles deep) or credential_source (Environment,
 * Ec2InstanceMetadata, EcsContainer), and calls AssumeRole signed with
 * them (SigV4, service sts).  role_session_name, external_id and
 * duration_seconds are passed on; mfa_serial is refused (nobody can type
 * a code into a mount).
 *
 * The endpoint: AWS_ENDPOINT_URL_STS > AWS_ENDPOINT_URL > the profile's
 * "sts =" endpoint_url > its endpoint_url > https://sts.REGION.amazonaws.com
 * (regional, as current AWS CLIs default to).  Each call has
 * STS_CONNECT_MS to connect and STS_TOTAL_MS in all, and is tried twice
 * when the failure is transient (no reply, 5xx, throttling,
 * IDPCommunicationError).  Errors name the action, the endpoint and STS's
 * error code and message; never the token or keys.
 */
#include "s3/creds-sts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "s3/aws-files.h"
#include "s3/creds-http.h"
#include "s3/creds-local.h"
#include "s3/creds-parse.h"
#include "s3/creds-process.h"
#include "s3/creds-remote.h"
#include "s3/sigv4.h"
#include "s3/uri.h"

#define STS_CONNECT_MS 3000
#define STS_TOTAL_MS 10000
#define STS_ATTEMPTS 2
#define ASSUME_DEPTH 8

/* ---- one STS call ------------------------------------------------------- */

static char *sts_endpoint(const creds_ctx *cx, const aws_profile *p)
{
	const char *v = s3cfg_env_get("AWS_ENDPOINT_URL_STS");
	if (!v)
		v = s3cfg_env_get("AWS_ENDPOINT_URL");
	if (!v && p)
		v = p->sts_endpoint_url.v ? p->sts_endpoint_url.v
					  : p->endpoint_url.v;
	buf b = BUF_INIT;
	if (v)
		buf_puts(&b, v);
	else
		buf_printf(&b, "https://sts.%s.amazonaws.com%s", cx->region,
			   strncmp(cx->region, "cn-", 3) == 0 ? ".cn" : "");
	while (b.len > 0 && b.data[b.len - 1] == '/')
		b.data[--b.len] = '\0';
	return buf_steal(&b);
}

static void form_add(buf *f, const char *name, const char *value)
{
	if (f->len)
		buf_putc(f, '&');
	buf_puts(f, name);
	buf_putc(f, '=');
	uri_encode(f, value, strlen(value), false);
}

static bool sts_transient(const char *code)
{
	return strcmp(code, "IDPCommunicationError") == 0 ||
	       strcmp(code, "Throttling") == 0 ||
	       strcmp(code, "ServiceUnavailable") == 0 ||
	       strcmp(code, "InternalFailure") == 0;
}

/* Adds SigV4 headers signed with c to hdrs (strings owned by *keep). */
static int sts_sign(const char *endpoint, const char *region, const buf *form,
		    const s3_creds *c, buf keep[3], char **err)
{
	const char *host = strstr(endpoint, "://");
	host = host ? host + 3 : endpoint;
	char amz_date[17], payload[65];
	sigv4_amz_date(time(NULL), amz_date);
	sigv4_sha256_hex(form->data ? form->data : "", form->len, payload);
	sigv4_header h[] = {
	    {"content-type",
	     "application/x-www-form-urlencoded; charset=utf-8"},
	    {"host", host},
	    {"x-amz-date", amz_date},
	    {"x-amz-security-token", c->session_token},
	};
	size_t n = c->session_token ? 4 : 3;
	sigv4_input in = {.method = "POST",
			  .path = "/",
			  .query = "",
			  .headers = h,
			  .n_headers = n,
			  .payload_hash = payload,
			  .normalize_path = true,
			  .region = region,
			  .service = "sts",
			  .amz_date = amz_date};
	sigv4_creds sc = {c->access_key, c->secret_key, c->session_token};
	sigv4_result sr = {0};
	if (sigv4_sign_header(&in, &sc, &sr) < 0)
		return s3cfg_fail(err, "cannot sign the STS request");
	buf_printf(&keep[0], "X-Amz-Date: %s", amz_date);
	buf_printf(&keep[1], "Authorization: %s", sr.output);
	if (c->session_token)
		buf_printf(&keep[2], "X-Amz-Security-Token: %s",
			   c->session_token);
	sigv4_result_free(&sr);
	return 0;
}

/* One attempt: 0 creds, 1 transient failure, -1 final; *err either way. */
static int sts_try(const char *action, const char *endpoint,
		   const creds_ctx *cx, const buf *form, const s3_creds *signer,
		   s3_creds *out, char **err)
{
	buf keep[3] = {BUF_INIT, BUF_INIT, BUF_INIT}, url = BUF_INIT,
	    hosth = BUF_INIT;
	const char *host = strstr(endpoint, "://");
	buf_printf(&hosth, "Host: %s", host ? host + 3 : endpoint);
	buf_printf(&url, "%s/", endpoint);
	int rc = signer
		     ? sts_sign(endpoint, cx->region, form, signer, keep, err)
		     : 0;
	const char *hdrs[] = {
	    "Content-Type: application/x-www-form-urlencoded; charset=utf-8",
	    "Accept: application/xml",
	    buf_cstr(&hosth),
	    keep[0].len ? buf_cstr(&keep[0]) : NULL,
	    keep[1].len ? buf_cstr(&keep[1]) : NULL,
	    keep[2].len ? buf_cstr(&keep[2]) : NULL,
	    NULL};
	credhttp_req rq = {.method = "POST",
			   .url = buf_cstr(&url),
			   .headers = hdrs,
			   .body = form->data,
			   .body_len = form->len,
			   .connect_ms = STS_CONNECT_MS,
			   .total_ms = STS_TOTAL_MS,
			   .ca_bundle = cx->ca_bundle};
	credhttp_resp rs = {0};
	char *herr = NULL;
	if (rc == 0 && credhttp_perform(&rq, &rs, &herr) < 0) {
		s3cfg_fail(err, "STS %s: %s", action, herr);
		free(herr);
		rc = 1;
	} else if (rc == 0) {
		sts_reply r;
		char *perr = NULL;
		int pr = sts_parse_reply(rs.body.data ? rs.body.data : "",
					 rs.body.len, &r, &perr);
		if (pr == 0 && rs.status == 200) {
			*out = r.creds;
			memset(&r.creds, 0, sizeof r.creds);
		} else if (pr == 1) {
			s3cfg_fail(err, "STS %s at %s: %s%s%.200s (HTTP %ld)",
				   action, endpoint, r.error_code,
				   r.error_msg && *r.error_msg ? ": " : "",
				   r.error_msg ? r.error_msg : "", rs.status);
			rc = rs.status >= 500 || sts_transient(r.error_code)
				 ? 1
				 : -1;
		} else {
			s3cfg_fail(err, "STS %s at %s answered HTTP %ld: %s",
				   action, endpoint, rs.status,
				   perr ? perr
					: "not a reply with credentials");
			rc = rs.status >= 500 ? 1 : -1;
		}
		free(perr);
		sts_reply_free(&r);
	}
	if (rs.body.data)
		explicit_bzero(rs.body.data, rs.body.len);
	buf_free(&rs.body);
	for (int i = 0; i < 3; i++) {
		if (keep[i].data)
			explicit_bzero(keep[i].data, keep[i].len);
		buf_free(&keep[i]);
	}
	buf_free(&url);
	buf_free(&hosth);
	return rc;
}

static int sts_call(const char *action, const creds_ctx *cx,
		    const aws_profile *p, const buf *form,
		    const s3_creds *signer, s3_creds *out, char **err)
{
	char *endpoint = sts_endpoint(cx, p);
	if (!endpoint)
		return s3cfg_fail_oom(err);
	int rc = 1;
	for (int i = 0; rc == 1 && i < STS_ATTEMPTS; i++) {
		if (i) {
			free(*err);
			*err = NULL;
			sleep(1);
		}
		rc = sts_try(action, endpoint, cx, form, signer, out, err);
	}
	free(endpoint);
	return rc == 0 ? 0 : -1;
}

static void session_name(buf *form, const char *given)
{
	char dflt[40];
	snprintf(dflt, sizeof dflt, "ckptfs-%lld", (long long)time(NULL));
	form_add(form, "RoleSessionName", given ? given : dflt);
}

/* ---- web identity ------------------------------------------------------- */

static int web_identity(const creds_ctx *cx, const aws_profile *p,
			const char *token_file, const char *role,
			const char *session, s3_creds *out, char **err)
{
	char *tok = creds_read_token_file(token_file,
					  "the web identity token file", err);
	if (!tok)
		return -1;
	buf form = BUF_INIT;
	form_add(&form, "Action", "AssumeRoleWithWebIdentity");
	form_add(&form, "Version", "2011-06-15");
	form_add(&form, "RoleArn", role);
	session_name(&form, session);
	form_add(&form, "WebIdentityToken", tok);
	s3cfg_secret_free(tok);
	char *e = NULL;
	int rc =
	    sts_call("AssumeRoleWithWebIdentity", cx, p, &form, NULL, out, &e);
	if (rc < 0)
		s3cfg_fail(err, "web identity (token file %s, role %s): %s",
			   token_file, role, e ? e : "out of memory");
	free(e);
	if (form.data)
		explicit_bzero(form.data, form.len);
	buf_free(&form);
	return rc;
}

int credp_web_identity(const creds_provider *self, const creds_ctx *cx,
		       s3_creds *out, buf *tried, char **err)
{
	const aws_profile *p;
	const char *where;
	if (creds_ctx_profile(cx, &p, &where, err) < 0)
		return -1;
	const char *file = s3cfg_env_get("AWS_WEB_IDENTITY_TOKEN_FILE");
	const char *role = s3cfg_env_get("AWS_ROLE_ARN");
	const char *session = s3cfg_env_get("AWS_ROLE_SESSION_NAME");
	if (!file)
		file = p->web_identity_token_file.v;
	if (!role)
		role = p->role_arn.v;
	if (!session)
		session = p->role_session_name.v;
	int rc;
	if (!file) {
		buf_puts(tried, "web identity (AWS_WEB_IDENTITY_TOKEN_FILE not "
				"set)");
		rc = 0;
	} else if (!role) {
		rc = s3cfg_fail(err,
				"web identity: a token file is set (%s) "
				"but no role: set AWS_ROLE_ARN or the "
				"profile's role_arn",
				file);
	} else {
		char *path = s3cfg_expand_home(file);
		rc = path && web_identity(cx, p, path, role, session, out,
					  err) == 0
			 ? 1
			 : -1;
		if (!path)
			s3cfg_fail_oom(err);
		free(path);
	}
	return rc;
}

/* ---- assume role -------------------------------------------------------- */

static int assume_profile(const creds_ctx *cx, const char *name,
			  const aws_profile *p, const char *where, int depth,
			  s3_creds *out, char **err);

/* credential_source: one of the providers of the chain. */
static int from_credential_source(const creds_ctx *cx, const char *src,
				  const char *name, s3_creds *out, char **err)
{
	int (*fn)(const creds_provider *, const creds_ctx *, s3_creds *, buf *,
		  char **) = NULL;
	if (strcmp(src, "Environment") == 0)
		fn = credp_env;
	else if (strcmp(src, "Ec2InstanceMetadata") == 0)
		fn = credp_imds;
	else if (strcmp(src, "EcsContainer") == 0)
		fn = credp_container;
	else
		return s3cfg_fail(err,
				  "profile '%s': credential_source must be "
				  "Environment, Ec2InstanceMetadata or "
				  "EcsContainer, not '%.40s'",
				  name, src);
	buf why = BUF_INIT;
	int r = fn(NULL, cx, out, &why, err);
	if (r == 0)
		s3cfg_fail(err,
			   "profile '%s': credential_source %s gave no "
			   "credentials: %s",
			   name, src, buf_cstr(&why));
	buf_free(&why);
	return r > 0 ? 0 : -1;
}

/* The credentials source_profile `name` stands for. */
static int from_source_profile(const creds_ctx *cx, const char *name,
			       bool self_ref, int depth, s3_creds *out,
			       char **err)
{
	if (depth >= ASSUME_DEPTH)
		return s3cfg_fail(err,
				  "source_profile chain deeper than %d "
				  "profiles (a loop?) at '%s'",
				  ASSUME_DEPTH, name);
	aws_profile p;
	char *where = NULL;
	if (creds_profile_load(name, &p, &where, err) < 0)
		return -1;
	int rc;
	if (!p.found)
		rc = s3cfg_fail(err, "source_profile '%s' not found in %s",
				name, where);
	else if (self_ref || (!p.role_arn.v && !p.web_identity_token_file.v &&
			      !p.credential_process.v))
		rc = creds_from_profile(&p, where, name, out, err);
	else if (p.role_arn.v && !p.web_identity_token_file.v)
		rc = assume_profile(cx, name, &p, where, depth + 1, out, err);
	else if (p.web_identity_token_file.v)
		rc = !p.role_arn.v
			 ? s3cfg_fail(err,
				      "profile '%s' has "
				      "web_identity_token_file but no "
				      "role_arn",
				      name)
			 : web_identity(cx, &p, p.web_identity_token_file.v,
					p.role_arn.v, p.role_session_name.v,
					out, err);
	else
		rc = creds_run_process(p.credential_process.v, name, out, err);
	if (rc == 0 && !out->access_key)
		rc = s3cfg_fail(err, "source_profile '%s' has no credentials",
				name);
	aws_profile_free(&p);
	free(where);
	return rc < 0 ? -1 : 0;
}

static int assume_profile(const creds_ctx *cx, const char *name,
			  const aws_profile *p, const char *where, int depth,
			  s3_creds *out, char **err)
{
	const char *sp = p->source_profile.v, *cs = p->credential_source.v;
	if (p->mfa_serial.v)
		return s3cfg_fail(err,
				  "profile '%s' needs an MFA code "
				  "(mfa_serial), which a mount cannot "
				  "ask for",
				  name);
	if (sp && cs)
		return s3cfg_fail(err,
				  "profile '%s' has both source_profile "
				  "and credential_source (%s)",
				  name, where);
	if (!sp && !cs)
		return s3cfg_fail(err,
				  "profile '%s' has role_arn but neither "
				  "source_profile nor credential_source "
				  "(%s)",
				  name, where);
	s3_creds src = {0};
	bool self_ref = sp && strcmp(sp, name) == 0;
	int rc = cs ? from_credential_source(cx, cs, name, &src, err)
		    : from_source_profile(cx, sp, self_ref, depth, &src, err);
	if (rc < 0)
		return -1;
	buf form = BUF_INIT;
	form_add(&form, "Action", "AssumeRole");
	form_add(&form, "Version", "2011-06-15");
	form_add(&form, "RoleArn", p->role_arn.v);
	session_name(&form, p->role_session_name.v);
	if (p->duration_seconds.v)
		form_add(&form, "DurationSeconds", p->duration_seconds.v);
	if (p->external_id.v)
		form_add(&form, "ExternalId", p->external_id.v);
	char *e = NULL;
	rc = sts_call("AssumeRole", cx, p, &form, &src, out, &e);
	if (rc < 0)
		s3cfg_fail(err, "assume role %s (profile '%s'): %s",
			   p->role_arn.v, name, e ? e : "out of memory");
	free(e);
	s3_creds_free(&src);
	buf_free(&form);
	return rc;
}

int credp_assume_role(const creds_provider *self, const creds_ctx *cx,
		      s3_creds *out, buf *tried, char **err)
{
	const aws_profile *p;
	const char *where;
	if (creds_ctx_profile(cx, &p, &where, err) < 0)
		return -1;
	if (!p->role_arn.v || p->web_identity_token_file.v) {
		buf_printf(tried, "assume role (no role_arn in profile %s)",
			   cx->profile);
		return 0;
	}
	return assume_profile(cx, cx->profile, p, where, 0, out, err) == 0
		   ? 1
		   : -1;
}
