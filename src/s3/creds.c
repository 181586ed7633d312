/*
 * creds: the credentials that sign requests, from a chain of providers
 * (environment, shared credentials file, config file), as the AWS CLI finds
 * them (precedence in config.h).  The file providers read the selected
 * profile with the INI reader of aws-files.c (config-internal.h).
 *
 * Credentials.  A creds_chain owns an ordered array of providers.  Each
 * either fills credentials (1), has nothing (0; the chain notes what it
 * looked at for the "no credentials" message), or fails (-1: partial or
 * unreadable configuration, which stops the chain, as in botocore).  The
 * chain caches what it found under a mutex and asks again when the cached
 * set is within CREDS_REFRESH_MARGIN seconds of expiry; if that refresh
 * fails while the old set has not yet expired, the old set is served.
 *
 * Invariants: secret values are wiped before they are freed
 * (s3cfg_secret_free) and never appear in an error message; a provider
 * that fails leaves *out empty.
 */
#include "s3/config.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "s3/config-internal.h"

/* ---- credentials -------------------------------------------------------- */

void s3_creds_free(s3_creds *c)
{
	if (!c)
		return;
	free(c->access_key);
	s3cfg_secret_free(c->secret_key);
	s3cfg_secret_free(c->session_token);
	memset(c, 0, sizeof(*c));
}

static int creds_set(s3_creds *out, const char *id, const char *secret,
		     const char *token, time_t expires)
{
	memset(out, 0, sizeof(*out));
	out->access_key = strdup(id);
	out->secret_key = strdup(secret);
	out->session_token = token ? strdup(token) : NULL;
	out->expires = expires;
	if (out->access_key && out->secret_key &&
	    (!token || out->session_token))
		return 0;
	s3_creds_free(out);
	return -1;
}

static int provider_env(const creds_provider *self, const char *profile,
			s3_creds *out, buf *tried, char **err)
{
	const char *id = s3cfg_env_get("AWS_ACCESS_KEY_ID");
	const char *secret = s3cfg_env_get("AWS_SECRET_ACCESS_KEY");
	if (!id && !secret)
		return 0;
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

/* Credentials from a parsed profile: 1 found, 0 none, -1 partial. */
static int creds_from_profile(const aws_profile *p, const char *path,
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

static int provider_shared(const creds_provider *self, const char *profile,
			   s3_creds *out, buf *tried, char **err)
{
	return provider_file(&aws_creds_kind, "AWS_SHARED_CREDENTIALS_FILE",
			     "credentials", profile, out, tried, err);
}

static int provider_config(const creds_provider *self, const char *profile,
			   s3_creds *out, buf *tried, char **err)
{
	return provider_file(&aws_config_kind, "AWS_CONFIG_FILE", "config",
			     profile, out, tried, err);
}

/* The AWS CLI's order, minus what is not written yet (IMDSv2, web identity,
 * which go after "config"). */
static const creds_provider default_providers[] = {
    {"environment", provider_env, NULL},
    {"shared credentials file", provider_shared, NULL},
    {"config file", provider_config, NULL},
};

struct creds_chain {
	pthread_mutex_t mu;
	char *profile;
	creds_provider *providers;
	size_t n;
	s3_creds cached; /* valid when have */
	bool have;
};

creds_chain *creds_chain_new_with(const char *profile,
				  const creds_provider *providers, size_t n)
{
	creds_chain *ch = calloc(1, sizeof(*ch));
	if (!ch)
		return NULL;
	ch->profile = strdup(profile && *profile ? profile : "default");
	ch->providers = malloc((n ? n : 1) * sizeof(*providers));
	if (!ch->profile || !ch->providers ||
	    pthread_mutex_init(&ch->mu, NULL) != 0) {
		free(ch->profile);
		free(ch->providers);
		free(ch);
		return NULL;
	}
	if (n)
		memcpy(ch->providers, providers, n * sizeof(*providers));
	ch->n = n;
	return ch;
}

creds_chain *creds_chain_new(const char *profile)
{
	return creds_chain_new_with(profile, default_providers,
				    sizeof(default_providers) /
					sizeof(default_providers[0]));
}

void creds_chain_free(creds_chain *ch)
{
	if (!ch)
		return;
	pthread_mutex_destroy(&ch->mu);
	s3_creds_free(&ch->cached);
	free(ch->providers);
	free(ch->profile);
	free(ch);
}

/* Adds what one provider looked at to the "tried" list. */
static void tried_add(buf *tried, const creds_provider *p, const buf *what)
{
	if (tried->len)
		buf_puts(tried, ", ");
	buf_puts(tried, what->len ? buf_cstr(what) : p->name);
}

/* Asks each provider in turn.  Caller holds ch->mu. */
static int chain_fetch(creds_chain *ch, s3_creds *out, char **err)
{
	buf tried = BUF_INIT;
	for (size_t i = 0; i < ch->n; i++) {
		const creds_provider *p = &ch->providers[i];
		buf what = BUF_INIT;
		memset(out, 0, sizeof(*out));
		int r = p->fetch(p, ch->profile, out, &what, err);
		if (r == 0)
			tried_add(&tried, p, &what);
		buf_free(&what);
		if (r != 0) {
			buf_free(&tried);
			return r > 0 ? 0 : -1;
		}
	}
	int rc = s3cfg_fail(err, "no AWS credentials found (tried: %s)",
			    buf_cstr(&tried));
	buf_free(&tried);
	return rc;
}

static bool creds_expired(const s3_creds *c, time_t now)
{
	return c->expires != 0 && c->expires <= now;
}

static bool creds_stale(const s3_creds *c, time_t now)
{
	return c->expires != 0 && c->expires <= now + CREDS_REFRESH_MARGIN;
}

static int creds_copy(s3_creds *dst, const s3_creds *src)
{
	return creds_set(dst, src->access_key, src->secret_key,
			 src->session_token, src->expires);
}

/* Makes ch->cached current.  Caller holds ch->mu. */
static int chain_refresh(creds_chain *ch, char **err)
{
	time_t now = time(NULL);
	if (ch->have && !creds_stale(&ch->cached, now))
		return 0;
	s3_creds fresh;
	char *ferr = NULL;
	if (chain_fetch(ch, &fresh, &ferr) == 0) {
		s3_creds_free(&ch->cached);
		ch->cached = fresh;
		ch->have = true;
		return 0;
	}
	if (ch->have && !creds_expired(&ch->cached, now)) {
		free(ferr); /* serve the old set until it really expires */
		return 0;
	}
	if (err)
		*err = ferr;
	else
		free(ferr);
	return -1;
}

int creds_chain_get(creds_chain *ch, s3_creds *out, char **err)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&ch->mu);
	int rc = chain_refresh(ch, err);
	if (rc == 0 && creds_copy(out, &ch->cached) < 0)
		rc = s3cfg_fail_oom(err);
	pthread_mutex_unlock(&ch->mu);
	return rc;
}
