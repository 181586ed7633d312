/*
 * creds-local: credentials that need no network: the environment
 * (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN) and the
 * static keys of the selected profile in the shared credentials file and
 * the config file.  Also loads a profile from both files for the
 * providers that act on what a profile says (assume-role,
 * credential_process, web identity).
 *
 * Partial keys (an id without a secret, or the reverse) are an error that
 * stops the chain, as in the AWS CLI; the message names file and line,
 * never the value.
 */
#include "s3/creds-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOKEN_FILE_MAX 16384

int credp_env(const creds_provider *self, const creds_ctx *cx, s3_creds *out,
	      buf *tried, char **err)
{
	const char *id = s3cfg_env_get("AWS_ACCESS_KEY_ID");
	const char *secret = s3cfg_env_get("AWS_SECRET_ACCESS_KEY");
	if (!id && !secret) {
		buf_puts(tried, "environment (AWS_ACCESS_KEY_ID not set)");
		return 0;
	}
	if (!secret)
		return s3cfg_fail(err,
				  "partial credentials in the environment: "
				  "AWS_ACCESS_KEY_ID is set but "
				  "AWS_SECRET_ACCESS_KEY is not");
	if (!id)
		return s3cfg_fail(err,
				  "partial credentials in the environment: "
				  "AWS_SECRET_ACCESS_KEY is set but "
				  "AWS_ACCESS_KEY_ID is not");
	if (creds_set(out, id, secret, s3cfg_env_get("AWS_SESSION_TOKEN"), 0) <
	    0)
		return s3cfg_fail_oom(err);
	return 1;
}

int creds_from_profile(const aws_profile *p, const char *path,
		       const char *profile, s3_creds *out, char **err)
{
	const cfg_val *id = &p->access_key, *secret = &p->secret_key;
	if (!id->v && !secret->v)
		return 0;
	if (!secret->v)
		return s3cfg_fail(err,
				  "%s line %d: profile '%s' has "
				  "aws_access_key_id but no "
				  "aws_secret_access_key",
				  path, id->line, profile);
	if (!id->v)
		return s3cfg_fail(err,
				  "%s line %d: profile '%s' has "
				  "aws_secret_access_key but no "
				  "aws_access_key_id",
				  path, secret->line, profile);
	if (creds_set(out, id->v, secret->v, p->session_token.v, 0) < 0)
		return s3cfg_fail_oom(err);
	return 1;
}

static int provider_file(const file_kind *kind, const char *env,
			 const char *leaf, const char *profile, s3_creds *out,
			 buf *tried, char **err)
{
	char *path = aws_file_path(env, leaf);
	if (!path)
		return s3cfg_fail_oom(err);
	if (kind == &aws_creds_kind)
		buf_printf(tried, "%s [profile %s]", path, profile);
	else
		buf_puts(tried, path);
	aws_profile p;
	int rc = aws_file_parse(path, kind, profile, &p, err);
	if (rc == 0)
		rc = creds_from_profile(&p, path, profile, out, err);
	aws_profile_free(&p);
	free(path);
	return rc;
}

int credp_shared_file(const creds_provider *self, const creds_ctx *cx,
		      s3_creds *out, buf *tried, char **err)
{
	return provider_file(&aws_creds_kind, "AWS_SHARED_CREDENTIALS_FILE",
			     "credentials", cx->profile, out, tried, err);
}

int credp_config_file(const creds_provider *self, const creds_ctx *cx,
		      s3_creds *out, buf *tried, char **err)
{
	return provider_file(&aws_config_kind, "AWS_CONFIG_FILE", "config",
			     cx->profile, out, tried, err);
}

/* Moves the values set in *from over those of *into. */
static void profile_overlay(aws_profile *into, aws_profile *from)
{
	cfg_val *a = (cfg_val *)((char *)into + offsetof(aws_profile, region));
	cfg_val *b = (cfg_val *)((char *)from + offsetof(aws_profile, region));
	size_t n = (sizeof(aws_profile) - offsetof(aws_profile, region)) /
		   sizeof(cfg_val);
	for (size_t i = 0; i < n; i++) {
		if (!b[i].v)
			continue;
		if (a[i].v)
			s3cfg_secret_free(a[i].v);
		a[i] = b[i];
		b[i].v = NULL;
	}
	into->found = into->found || from->found;
}

int creds_profile_load(const char *profile, aws_profile *out, char **where,
		       char **err)
{
	memset(out, 0, sizeof(*out));
	*where = NULL;
	char *cfg = aws_file_path("AWS_CONFIG_FILE", "config");
	char *cred =
	    aws_file_path("AWS_SHARED_CREDENTIALS_FILE", "credentials");
	aws_profile c;
	int rc = -1;
	if (!cfg || !cred)
		rc = s3cfg_fail_oom(err);
	else if (aws_file_parse(cfg, &aws_config_kind, profile, out, err) == 0)
		rc = aws_file_parse(cred, &aws_creds_kind, profile, &c, err);
	if (rc == 0) {
		profile_overlay(out, &c);
		aws_profile_free(&c);
		buf w = BUF_INIT;
		if (buf_printf(&w, "%s or %s", cfg, cred) < 0)
			rc = s3cfg_fail_oom(err);
		*where = rc == 0 ? buf_steal(&w) : NULL;
		buf_free(&w);
	}
	if (rc < 0)
		aws_profile_free(out);
	free(cfg);
	free(cred);
	return rc;
}

int creds_ctx_profile(const creds_ctx *cx, const aws_profile **p,
		      const char **where, char **err)
{
	creds_profile_memo *m = cx->memo;
	if (!m)
		return s3cfg_fail(err, "no profile memo (a creds_ctx outside a "
				       "chain fetch)");
	if (!m->loaded) {
		m->loaded = true;
		m->rc = creds_profile_load(cx->profile, &m->p, &m->where,
					   &m->err);
	}
	if (m->rc < 0)
		return m->err ? s3cfg_fail(err, "%s", m->err)
			      : s3cfg_fail_oom(err);
	*p = &m->p;
	*where = m->where;
	return 0;
}

void creds_profile_memo_free(creds_profile_memo *m)
{
	if (m->loaded && m->rc == 0)
		aws_profile_free(&m->p);
	free(m->where);
	free(m->err);
	memset(m, 0, sizeof *m);
}

/* Reads a small token file whole, without trailing white space. */
char *creds_read_token_file(const char *path, const char *var, char **err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		char tmp[128];
		s3cfg_fail(err, "cannot read %s (from %s): %s", path, var,
			   strerror_r(errno, tmp, sizeof tmp));
		return NULL;
	}
	char *data = malloc(TOKEN_FILE_MAX + 1);
	size_t len = 0;
	ssize_t r = 0;
	while (data && len < TOKEN_FILE_MAX &&
	       ((r = read(fd, data + len, TOKEN_FILE_MAX - len)) > 0 ||
		(r < 0 && errno == EINTR)))
		len += r > 0 ? (size_t)r : 0;
	close(fd);
	if (!data) {
		s3cfg_fail_oom(err);
		return NULL;
	}
	while (len > 0 && s3cfg_is_space(data[len - 1]))
		len--;
	data[len] = '\0';
	if (r < 0 || len == 0 || len >= TOKEN_FILE_MAX) {
		s3cfg_fail(err, "%s (from %s) %s", path, var,
			   r < 0      ? "cannot be read"
			   : len == 0 ? "is empty"
				      : "is too large for a token");
		s3cfg_secret_free(data);
		return NULL;
	}
	return data;
}
