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
#include "s3/creds-local.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "s3/aws-files.h"
#include "s3/creds-parse.h"

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

/* The two files of a profile, in the order a merged profile reads them
 * (the credentials file's values win). */
static const struct {
	const file_kind *kind;
	const char *env, *leaf;
} profile_files[CREDS_PROFILE_FILES] = {
	{&aws_config_kind, "AWS_CONFIG_FILE", "config"},
	{&aws_creds_kind, "AWS_SHARED_CREDENTIALS_FILE", "credentials"},
};

/* Copies the values set in *from over those of *into.  0, or -1 when out
 * of memory. */
static int profile_overlay(aws_profile *into, const aws_profile *from)
{
	cfg_val *a = (cfg_val *)((char *)into + offsetof(aws_profile, region));
	const cfg_val *b = (const cfg_val *)((const char *)from +
					     offsetof(aws_profile, region));
	size_t n = (sizeof(aws_profile) - offsetof(aws_profile, region)) /
		   sizeof(cfg_val);
	for (size_t i = 0; i < n; i++) {
		if (!b[i].v)
			continue;
		char *v = strdup(b[i].v);
		if (!v)
			return -1;
		if (a[i].v)
			s3cfg_secret_free(a[i].v);
		a[i] = (cfg_val){v, b[i].line};
	}
	into->found = into->found || from->found;
	return 0;
}

/* File i of profile_files as m's profile says it, read on first use.  0
 * with *p and *path (valid until creds_profile_memo_free), or -1 with
 * *err. */
static int memo_file(creds_profile_memo *m, size_t i, const aws_profile **p,
		     const char **path, char **err)
{
	struct creds_file_read *f = &m->file[i];
	if (!f->loaded) {
		f->loaded = true;
		f->path = aws_file_path(profile_files[i].env,
					profile_files[i].leaf);
		f->rc = f->path ? aws_file_parse(f->path, profile_files[i].kind,
						 m->profile, &f->p, &f->err)
				: s3cfg_fail_oom(&f->err);
	}
	if (f->rc < 0)
		return f->err ? s3cfg_fail(err, "%s", f->err)
			      : s3cfg_fail_oom(err);
	*p = &f->p;
	*path = f->path;
	return 0;
}

/* Both files merged into m->p, once. */
static int memo_profile(creds_profile_memo *m, char **err)
{
	if (!m->loaded) {
		m->loaded = true;
		const aws_profile *f[CREDS_PROFILE_FILES];
		const char *path[CREDS_PROFILE_FILES];
		m->rc = 0;
		for (size_t i = 0; i < CREDS_PROFILE_FILES && m->rc == 0; i++)
			m->rc = memo_file(m, i, &f[i], &path[i], &m->err);
		for (size_t i = 0; i < CREDS_PROFILE_FILES && m->rc == 0; i++)
			if (profile_overlay(&m->p, f[i]) < 0)
				m->rc = s3cfg_fail_oom(&m->err);
		buf w = BUF_INIT;
		if (m->rc == 0 &&
		    buf_printf(&w, "%s or %s", path[0], path[1]) < 0)
			m->rc = s3cfg_fail_oom(&m->err);
		if (m->rc == 0)
			m->where = buf_steal(&w);
		buf_free(&w);
	}
	if (m->rc < 0)
		return m->err ? s3cfg_fail(err, "%s", m->err)
			      : s3cfg_fail_oom(err);
	return 0;
}

/* The static keys of file i (a provider of the chain). */
static int provider_file(size_t i, const creds_ctx *cx, s3_creds *out,
			 buf *tried, char **err)
{
	creds_profile_memo own = {.profile = cx->profile};
	creds_profile_memo *m = cx->memo ? cx->memo : &own;
	const aws_profile *p;
	const char *path;
	int rc = memo_file(m, i, &p, &path, err);
	if (m->file[i].path) {
		if (profile_files[i].kind == &aws_creds_kind)
			buf_printf(tried, "%s [profile %s]", m->file[i].path,
				   cx->profile);
		else
			buf_puts(tried, m->file[i].path);
	}
	if (rc == 0)
		rc = creds_from_profile(p, path, cx->profile, out, err);
	creds_profile_memo_free(&own);
	return rc;
}

int credp_shared_file(const creds_provider *self, const creds_ctx *cx,
		      s3_creds *out, buf *tried, char **err)
{
	return provider_file(1, cx, out, tried, err);
}

int credp_config_file(const creds_provider *self, const creds_ctx *cx,
		      s3_creds *out, buf *tried, char **err)
{
	return provider_file(0, cx, out, tried, err);
}

int creds_profile_load(const char *profile, aws_profile *out, char **where,
		       char **err)
{
	creds_profile_memo m = {.profile = profile};
	int rc = memo_profile(&m, err);
	memset(out, 0, sizeof *out);
	*where = NULL;
	if (rc == 0) {
		*out = m.p;
		*where = m.where;
		memset(&m.p, 0, sizeof m.p);
		m.where = NULL;
	}
	creds_profile_memo_free(&m);
	return rc;
}

int creds_ctx_profile(const creds_ctx *cx, const aws_profile **p,
		      const char **where, char **err)
{
	creds_profile_memo *m = cx->memo;
	if (!m)
		return s3cfg_fail(err, "no profile memo (a creds_ctx outside a "
				       "chain fetch)");
	if (memo_profile(m, err) < 0)
		return -1;
	*p = &m->p;
	*where = m->where;
	return 0;
}

void creds_profile_memo_free(creds_profile_memo *m)
{
	for (size_t i = 0; i < CREDS_PROFILE_FILES; i++) {
		aws_profile_free(&m->file[i].p);
		free(m->file[i].path);
		free(m->file[i].err);
	}
	aws_profile_free(&m->p);
	free(m->where);
	free(m->err);
	const char *profile = m->profile;
	memset(m, 0, sizeof *m);
	m->profile = profile;
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
