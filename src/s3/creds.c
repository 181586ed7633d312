/*
 * creds: the credentials that sign requests, from a chain of providers in
 * the AWS CLI's order (doc/credentials.md):
 *
 *   environment, assume-role profile (role_arn), web identity, shared
 *   credentials file, credential_process, config file, container
 *   credentials, EC2 instance metadata.
 *
 * Each provider either fills credentials (1), has nothing (0; it says
 * what it looked at and why, for the "no credentials" message), or fails
 * (-1: configured but broken, which stops the chain, as in botocore).
 * The providers live in creds-*.c, each declaring what it offers in a
 * header of its own name; lowest first (no file calls one above it):
 *
 *   creds-parse.c    s3_creds helpers; the documents providers read (the
 *                    JSON of IMDS, container endpoints and
 *                    credential_process, STS XML replies), timestamps,
 *                    the container host rule, command-line splitting
 *   creds-http.c     one blocking HTTP request with a deadline (curl easy)
 *   creds-local.c    environment and the shared files' static keys;
 *                    loading a profile from both files (once per fetch
 *                    of the chain: creds_ctx_profile)
 *   creds-remote.c   container credentials (ECS, EKS Pod Identity) and EC2
 *                    instance metadata (IMDSv2)
 *   creds-process.c  credential_process
 *   creds-sts.c      web identity and assume-role (STS)
 *   creds.c          the chain: order, cache, background refresh (this
 *                    file; its interface is in config.h)
 *
 * The types they share (s3_creds, creds_ctx, creds_provider) are in
 * config.h, and the AWS files and messages in aws-files.h.
 *
 * Caching and refresh.  The chain keeps the set it found and the provider
 * that gave it.  Sets that expire are refreshed by a background thread
 * from that same provider at creds_refresh_at (a third of the lifetime,
 * at most CREDS_REFRESH_MARGIN, before expiry), so callers, which include
 * the threads that sign every S3 request, never wait on the network: they
 * copy the current set under the mutex.  A failed refresh keeps the
 * current set (usable until CREDS_MIN_VALID before it expires) and is
 * retried with backoff (creds_retry_delay: 1, 2, 4 ... 60 s, at most a
 * quarter of the time left), with a warning in the log; the counts and
 * the last failure are kept for creds_chain_status (`ckptfs status`, the
 * metrics).  If the set expires while the refresher keeps failing, or
 * while it still waits on a provider that hangs, callers get that failure
 * at once (they never wait on a provider after start-up); the refresher
 * goes on trying; while that first try of a refresh still runs, the
 * failure is CREDS_BUSY, which the request layer retries within the
 * request's budget (the provider's deadline ends the try).  A caller
 * fetches itself only when no set was ever found, or when the set expired
 * without the refresher having failed (it had no chance: a suspended
 * machine); such fetches are serialised (fetch_mu) and a caller that
 * finds one failed less than a second ago gets that failure instead of
 * starting another.
 *
 * Locks: fetch_mu (held across a fetch) is taken before mu (held only to
 * read or swap the cached set); never the other way round.
 *
 * Invariants: secret values are wiped before they are freed
 * (s3cfg_secret_free) and never appear in an error message or the log; a
 * provider that fails leaves *out empty; a set that has expired is never
 * handed out.
 */
#include "s3/config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "s3/aws-files.h"
#include "s3/creds-local.h"
#include "s3/creds-parse.h"
#include "s3/creds-process.h"
#include "s3/creds-remote.h"
#include "s3/creds-sts.h"
#include "util/clock.h"
#include "util/log.h"

/* The AWS CLI's order (botocore's create_credential_resolver). */
static const creds_provider default_providers[] = {
    {"environment", credp_env, NULL},
    {"assume role", credp_assume_role, NULL},
    {"web identity", credp_web_identity, NULL},
    {"shared credentials file", credp_shared_file, NULL},
    {"credential_process", credp_process, NULL},
    {"config file", credp_config_file, NULL},
    {"container credentials", credp_container, NULL},
    {"EC2 instance metadata", credp_imds, NULL},
};

struct creds_chain {
	pthread_mutex_t mu;	  /* cached, have, source, times, stopping */
	pthread_mutex_t fetch_mu; /* one fetch at a time */
	pthread_cond_t cv;	  /* wakes the refresher */
	char *profile, *region, *ca_bundle;
	creds_provider *providers;
	size_t n;
	s3_creds cached; /* valid when have */
	bool have;
	size_t source;	/* the provider that gave cached */
	time_t fetched; /* when cached was fetched */
	time_t next;	/* when the refresher fetches next */
	char *last_err; /* of the last failed fetch by a caller */
	double last_err_t;
	char
	    *refresh_err; /* of the refresher's last try; NULL when it worked */
	time_t refresh_err_t; /* when refresh_err (or the last one) came */
	char *last_refresh_err; /* the last failure, kept after a success */
	unsigned failing;	/* refreshes failed in a row */
	uint64_t refreshes, refresh_failures; /* since the chain began */
	bool refreshing; /* the refresher is waiting on the provider */
	pthread_t thread;
	bool thread_on, stopping;
};

time_t creds_refresh_at(time_t fetched, time_t expires)
{
	time_t life = expires - fetched;
	time_t margin =
	    life / 3 < CREDS_REFRESH_MARGIN ? life / 3 : CREDS_REFRESH_MARGIN;
	time_t at = expires - margin;
	return at < fetched + 1 ? fetched + 1 : at;
}

static bool creds_usable(const s3_creds *c, time_t now)
{
	return c->expires == 0 || c->expires - now > CREDS_MIN_VALID;
}

creds_chain *creds_chain_new_with(const char *profile, const char *region,
				  const creds_provider *providers, size_t n)
{
	creds_chain *ch = calloc(1, sizeof(*ch));
	if (!ch)
		return NULL;
	ch->profile = strdup(profile && *profile ? profile : "default");
	ch->region = strdup(region && *region ? region : "us-east-1");
	ch->providers = malloc((n ? n : 1) * sizeof(*providers));
	if (!ch->profile || !ch->region || !ch->providers ||
	    pthread_mutex_init(&ch->mu, NULL) != 0) {
		free(ch->profile);
		free(ch->region);
		free(ch->providers);
		free(ch);
		return NULL;
	}
	pthread_mutex_init(&ch->fetch_mu, NULL);
	pthread_cond_init(&ch->cv, NULL);
	if (n)
		memcpy(ch->providers, providers, n * sizeof(*providers));
	ch->n = n;
	return ch;
}

creds_chain *creds_chain_new(const char *profile, const char *region)
{
	return creds_chain_new_with(profile, region, default_providers,
				    sizeof(default_providers) /
					sizeof(default_providers[0]));
}

creds_chain *creds_chain_new_profile(const char *profile, const char *region)
{
	return creds_chain_new_with(
	    profile, region, default_providers + 1,
	    sizeof(default_providers) / sizeof(default_providers[0]) - 1);
}

void creds_chain_free(creds_chain *ch)
{
	if (!ch)
		return;
	pthread_mutex_lock(&ch->mu);
	ch->stopping = true;
	pthread_cond_broadcast(&ch->cv);
	bool on = ch->thread_on;
	pthread_mutex_unlock(&ch->mu);
	if (on)
		pthread_join(ch->thread, NULL);
	pthread_cond_destroy(&ch->cv);
	pthread_mutex_destroy(&ch->fetch_mu);
	pthread_mutex_destroy(&ch->mu);
	s3_creds_free(&ch->cached);
	free(ch->last_err);
	free(ch->refresh_err);
	free(ch->last_refresh_err);
	free(ch->providers);
	free(ch->profile);
	free(ch->region);
	free(ch->ca_bundle);
	free(ch);
}

int creds_chain_set_ca_bundle(creds_chain *ch, const char *path)
{
	char *p = path ? strdup(path) : NULL;
	if (path && !p)
		return -1;
	free(ch->ca_bundle);
	ch->ca_bundle = p;
	return 0;
}

/* Adds what one provider looked at to the "tried" list. */
static void tried_add(buf *tried, const creds_provider *p, const buf *what)
{
	if (tried->len)
		buf_puts(tried, ", ");
	buf_puts(tried, what->len ? buf_cstr(what) : p->name);
}

/* A set that has already expired is the provider's failure. */
static int check_fresh(const creds_provider *p, s3_creds *out, char **err)
{
	time_t now = time(NULL);
	if (creds_usable(out, now))
		return 0;
	long ago = (long)(now - out->expires);
	s3_creds_free(out);
	return s3cfg_fail(err,
			  "%s: the credentials it gave %s (Expiration %ld s "
			  "%s; is the clock right?)",
			  p->name, ago >= 0 ? "had expired" : "expire at once",
			  ago >= 0 ? ago : -ago, ago >= 0 ? "ago" : "ahead");
}

/* Asks providers from..n-1 in turn (only `from` when one).  No lock held. */
static int chain_fetch(creds_chain *ch, size_t from, bool one, s3_creds *out,
		       size_t *source, char **err)
{
	buf tried = BUF_INIT;
	creds_profile_memo memo = {.profile = ch->profile};
	creds_ctx cx = {ch->profile, ch->region, ch->ca_bundle, &memo};
	size_t end = one ? from + 1 : ch->n;
	for (size_t i = from; i < end; i++) {
		const creds_provider *p = &ch->providers[i];
		buf what = BUF_INIT;
		memset(out, 0, sizeof(*out));
		char *perr = NULL;
		int r = p->fetch(p, &cx, out, &what, &perr);
		if (r > 0)
			r = check_fresh(p, out, &perr) < 0 ? -1 : 1;
		if (r == 0)
			tried_add(&tried, p, &what);
		buf_free(&what);
		if (r > 0) {
			*source = i;
			buf_free(&tried);
			creds_profile_memo_free(&memo);
			return 0;
		}
		if (r < 0) {
			if (tried.len)
				s3cfg_fail(err, "%s (tried before: %s)",
					   perr ? perr : "out of memory",
					   buf_cstr(&tried));
			else if (err)
				*err = perr, perr = NULL;
			free(perr);
			buf_free(&tried);
			creds_profile_memo_free(&memo);
			return -1;
		}
	}
	creds_profile_memo_free(&memo);
	int rc = s3cfg_fail(err, "%s (tried: %s)",
			    one ? "the credential source gave nothing"
				: "no AWS credentials found",
			    buf_cstr(&tried));
	buf_free(&tried);
	return rc;
}

/* Installs a fresh set.  Caller holds mu. */
static void install(creds_chain *ch, s3_creds *fresh, size_t source)
{
	s3_creds_free(&ch->cached);
	ch->cached = *fresh;
	memset(fresh, 0, sizeof(*fresh));
	ch->have = true;
	ch->source = source;
	free(ch->refresh_err);
	ch->refresh_err = NULL;
	ch->failing = 0;
	ch->fetched = time(NULL);
	if (ch->cached.expires)
		ch->next = creds_refresh_at(ch->fetched, ch->cached.expires);
	pthread_cond_broadcast(&ch->cv);
}

/* ---- the refresher ------------------------------------------------------ */

long creds_retry_delay(unsigned failures, time_t left)
{
	long d = CREDS_RETRY_MAX;
	if (failures > 0 && failures <= 6)
		d = 1L << (failures - 1); /* 1, 2, 4 ... 32, then 60 */
	long cap = left > 0 ? (long)(left / 4) : CREDS_RETRY_EXPIRED_MAX;
	if (d > cap)
		d = cap;
	return d < 1 ? 1 : d;
}

/* Notes a failed refresh: backoff, counters, the warning.  Holds mu. */
static void refresh_failed(creds_chain *ch, size_t src, const char *err)
{
	time_t now = time(NULL);
	time_t left = ch->cached.expires - now;
	ch->failing++;
	ch->refresh_failures++;
	ch->next = now + creds_retry_delay(ch->failing, left);
	free(ch->refresh_err);
	ch->refresh_err = strdup(err ? err : "out of memory");
	free(ch->last_refresh_err);
	ch->last_refresh_err = strdup(err ? err : "out of memory");
	ch->refresh_err_t = now;
	log_warn("refreshing the credentials from %s failed (%u in a row): "
		 "%s; the current ones are valid for %ld s more; next try in "
		 "%ld s",
		 ch->providers[src].name, ch->failing,
		 err ? err : "out of memory", (long)(left > 0 ? left : 0),
		 (long)(ch->next - now));
}

/* One refresh from the current source.  Called without locks. */
static void refresh_once(creds_chain *ch)
{
	pthread_mutex_lock(&ch->fetch_mu);
	pthread_mutex_lock(&ch->mu);
	size_t src = ch->source;
	bool due = ch->have && ch->cached.expires && time(NULL) >= ch->next;
	ch->refreshing = due;
	pthread_mutex_unlock(&ch->mu);
	if (!due) { /* a caller fetched meanwhile */
		pthread_mutex_unlock(&ch->fetch_mu);
		return;
	}
	s3_creds fresh;
	char *err = NULL;
	size_t got;
	int rc = chain_fetch(ch, src, true, &fresh, &got, &err);
	pthread_mutex_lock(&ch->mu);
	ch->refreshing = false;
	if (rc == 0) {
		install(ch, &fresh, got);
		ch->refreshes++;
		log_info("credentials from %s refreshed; valid for %ld s",
			 ch->providers[got].name,
			 ch->cached.expires
			     ? (long)(ch->cached.expires - time(NULL))
			     : -1L);
	} else {
		refresh_failed(ch, src, err);
	}
	pthread_mutex_unlock(&ch->mu);
	pthread_mutex_unlock(&ch->fetch_mu);
	free(err);
}

static void *refresher(void *arg)
{
	creds_chain *ch = arg;
	pthread_mutex_lock(&ch->mu);
	while (!ch->stopping) {
		time_t now = time(NULL);
		if (!ch->have || !ch->cached.expires) {
			pthread_cond_wait(&ch->cv, &ch->mu);
			continue;
		}
		if (now < ch->next) {
			struct timespec ts;
			clock_realtime_in(&ts, (long)(ch->next - now) * 1000);
			pthread_cond_timedwait(&ch->cv, &ch->mu, &ts);
			continue;
		}
		pthread_mutex_unlock(&ch->mu);
		refresh_once(ch);
		pthread_mutex_lock(&ch->mu);
	}
	pthread_mutex_unlock(&ch->mu);
	return NULL;
}

/* Starts the refresher once a set that expires is cached.  Holds mu. */
static void refresher_start(creds_chain *ch)
{
	if (ch->thread_on || !ch->cached.expires || ch->stopping)
		return;
	if (pthread_create(&ch->thread, NULL, refresher, ch) == 0)
		ch->thread_on = true;
	else
		log_warn("cannot start the credential refresh thread; "
			 "credentials are refreshed when they expire");
}

/* ---- callers ------------------------------------------------------------ */

/* Copies the cached set if usable: 1, 0 not usable, -1 out of memory. */
static int take(creds_chain *ch, s3_creds *out, char **err)
{
	if (!ch->have || !creds_usable(&ch->cached, time(NULL)))
		return 0;
	return creds_copy(out, &ch->cached) == 0 ? 1 : s3cfg_fail_oom(err);
}

/* No usable set: fetch one on this thread.  Holds fetch_mu, not mu. */
static int fetch_now(creds_chain *ch, char **err)
{
	pthread_mutex_lock(&ch->mu);
	bool have = ch->have;
	size_t src = ch->source;
	if (ch->last_err && clock_mono() - ch->last_err_t < 1.0) {
		int rc = s3cfg_fail(err, "%s", ch->last_err);
		pthread_mutex_unlock(&ch->mu);
		return rc;
	}
	pthread_mutex_unlock(&ch->mu);
	s3_creds fresh;
	char *ferr = NULL;
	size_t got = 0;
	int rc = chain_fetch(ch, have ? src : 0, have, &fresh, &got, &ferr);
	pthread_mutex_lock(&ch->mu);
	free(ch->last_err);
	ch->last_err = NULL;
	if (rc == 0) {
		install(ch, &fresh, got);
		refresher_start(ch);
	} else if (ferr) {
		ch->last_err = strdup(ferr);
		ch->last_err_t = clock_mono();
	}
	pthread_mutex_unlock(&ch->mu);
	if (err)
		*err = ferr;
	else
		free(ferr);
	return rc;
}

/*
 * The set expired after the refresher failed to replace it, or while it
 * is still waiting on the provider: fail at once (the refresher keeps
 * trying) rather than make this caller, maybe the http loop's thread,
 * wait on the provider.  Holds mu.
 */
static int expired_error(creds_chain *ch, char **err)
{
	long ago = (long)(time(NULL) - ch->cached.expires);
	char when[48]; /* or about to: within CREDS_MIN_VALID */
	if (ago >= 0)
		snprintf(when, sizeof when, "expired %ld s ago", ago);
	else
		snprintf(when, sizeof when, "expire in %ld s", -ago);
	if (!ch->refresh_err)
		return s3cfg_fail(err,
				  "the credentials from %s %s and their "
				  "refresh is still waiting on the provider",
				  ch->providers[ch->source].name, when);
	return s3cfg_fail(err,
			  "the credentials from %s %s and refreshing them "
			  "failed: %s",
			  ch->providers[ch->source].name, when,
			  ch->refresh_err);
}

int creds_chain_get(creds_chain *ch, s3_creds *out, char **err)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&ch->mu);
	int r = take(ch, out, err);
	/* the refresh's first try still runs: busy, not failed */
	bool busy = r == 0 && ch->have && ch->refreshing && !ch->refresh_err;
	if (r == 0 && ch->have && (ch->refresh_err || ch->refreshing))
		r = expired_error(ch, err);
	pthread_mutex_unlock(&ch->mu);
	if (r != 0)
		return r > 0 ? 0 : busy ? CREDS_BUSY : -1;
	pthread_mutex_lock(&ch->fetch_mu);
	pthread_mutex_lock(&ch->mu);
	r = take(ch, out, err); /* another caller may have fetched */
	pthread_mutex_unlock(&ch->mu);
	if (r == 0 && fetch_now(ch, err) == 0) {
		pthread_mutex_lock(&ch->mu);
		r = take(ch, out, err);
		pthread_mutex_unlock(&ch->mu);
		if (r == 0)
			r = s3cfg_fail(err, "the credentials fetched are "
					    "already expired");
	} else if (r == 0) {
		r = -1;
	}
	pthread_mutex_unlock(&ch->fetch_mu);
	return r > 0 ? 0 : -1;
}

int creds_chain_status(creds_chain *ch, creds_status *st)
{
	memset(st, 0, sizeof *st);
	pthread_mutex_lock(&ch->mu);
	if (ch->have) {
		st->source = ch->providers[ch->source].name;
		st->expires = ch->cached.expires;
		st->fetched = ch->fetched;
		st->next_refresh = ch->cached.expires ? ch->next : 0;
	}
	st->refreshes = ch->refreshes;
	st->refresh_failures = ch->refresh_failures;
	st->failing = ch->failing;
	st->refreshing = ch->refreshing;
	st->last_error_at = ch->refresh_err_t;
	int rc = 0;
	if (ch->last_refresh_err &&
	    !(st->last_error = strdup(ch->last_refresh_err)))
		rc = -1;
	pthread_mutex_unlock(&ch->mu);
	return rc;
}

void creds_status_free(creds_status *st)
{
	free(st->last_error);
	st->last_error = NULL;
}
