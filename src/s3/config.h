/*
 * s3config: where to send requests and with which credentials, found the way
 * the AWS CLI finds them.
 *
 * Endpoint: explicit option > AWS_ENDPOINT_URL_S3 > AWS_ENDPOINT_URL >
 * endpoint_url in the profile of ~/.aws/config > https://s3.<region>.amazonaws.com.
 * Region: option > AWS_REGION > AWS_DEFAULT_REGION > profile region >
 * us-east-1.  Profile: option > AWS_PROFILE > "default".  Files:
 * AWS_CONFIG_FILE (default ~/.aws/config, sections "[profile NAME]" and
 * "[default]") and AWS_SHARED_CREDENTIALS_FILE (default ~/.aws/credentials,
 * sections "[NAME]").  INI files are read with libinih.
 *
 * Within the profile of the config file, an "s3 =" line followed by indented
 * "key = value" lines holds S3 settings: its endpoint_url beats the
 * profile's endpoint_url, and addressing_style (path|virtual|auto) fills
 * addressing.  CA bundle: option > AWS_CA_BUNDLE > profile ca_bundle.  A
 * profile named by the option or AWS_PROFILE must exist in one of the
 * files (as in the AWS CLI); "default" may be absent.  Missing files are
 * not errors; unreadable or malformed ones are, naming file and line.
 *
 * Credentials come from a chain of providers tried in the AWS CLI's order
 * (creds.c, doc/credentials.md).  The chain caches what it found and
 * refreshes it in the background before expiry; creds_chain_get is
 * thread-safe.  No function here logs or returns secret values in error
 * messages.
 */
#ifndef CKPTFS_S3_CONFIG_H
#define CKPTFS_S3_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "util/buf.h"

typedef enum s3_addressing {
	S3_ADDR_AUTO = 0, /* virtual-host on *.amazonaws.com with a DNS-safe
			     bucket, path-style everywhere else */
	S3_ADDR_PATH,
	S3_ADDR_VIRTUAL,
} s3_addressing;

typedef struct s3_settings {
	char *bucket;
	char *prefix; /* "" or ends with '/', never starts with '/' */
	char *endpoint; /* scheme://host[:port], no trailing '/' */
	char *region;
	char *profile;
	char *ca_bundle; /* NULL: system default */
	s3_addressing addressing;
	bool use_https; /* derived from endpoint */
	/* the profile came from the caller (--profile, -o profile=), not
	 * AWS_PROFILE: as in the AWS CLI, environment keys are then ignored */
	bool profile_explicit;
} s3_settings;

/*
 * Parses "s3://bucket[/prefix]".  Prefix is normalised to "" or "a/b/"
 * (duplicate and leading slashes rejected).  Returns 0, or -1 with *err
 * (malloc'd) naming what is wrong.
 */
int s3_parse_url(const char *url, char **bucket, char **prefix, char **err);

/*
 * Fills endpoint, region, profile and addressing where the caller left them
 * NULL/AUTO, from the environment and the config file.  Validates the
 * endpoint URL (http:// or https:// only).  Returns 0, or -1 with *err.
 */
int s3_settings_resolve(s3_settings *s, char **err);
void s3_settings_free(s3_settings *s);

/* True when requests should use virtual-host addressing. */
bool s3_settings_virtual_host(const s3_settings *s);

typedef struct s3_creds {
	char *access_key;
	char *secret_key;
	char *session_token; /* NULL when none */
	time_t expires;       /* 0 = does not expire */
} s3_creds;

void s3_creds_free(s3_creds *c);

typedef struct creds_chain creds_chain;

/*
 * Temporary credentials are fetched again, in the background, when less
 * than min(CREDS_REFRESH_MARGIN, a third of their lifetime) is left: five
 * minutes before a one-hour set expires, 8 s before a 25 s one does.  A
 * set with less than CREDS_MIN_VALID seconds left is never handed out.
 */
#define CREDS_REFRESH_MARGIN 300
#define CREDS_MIN_VALID 1
/*
 * A failed refresh is tried again after creds_retry_delay: 1 s after the
 * first failure, doubling with each one in a row up to CREDS_RETRY_MAX,
 * but never more than a quarter of the time the current set has left
 * (so the last tries come before it expires) and, once it has expired,
 * never more than CREDS_RETRY_EXPIRED_MAX (requests fail until one
 * works).  At least 1 s.
 */
#define CREDS_RETRY_MAX 60
#define CREDS_RETRY_EXPIRED_MAX 10

/* What a provider knows of the mount. */
typedef struct creds_ctx {
	const char *profile; /* never NULL */
	const char *region;  /* never NULL */
	const char *ca_bundle; /* for https:// STS and container endpoints;
				  NULL: the system's */
	/* the profile, read once per fetch of the chain (creds-local.c,
	 * creds_ctx_profile); NULL: read on every use */
	struct creds_profile_memo *memo;
} creds_ctx;

/*
 * One source of credentials.  fetch returns 1 and fills *out (expires 0
 * when they do not expire); 0 when the source has nothing, after appending
 * what it looked at and why it gave nothing to *tried (left empty, the
 * chain uses name); or -1 with *err (malloc'd, no secrets) when the source
 * is configured but broken, which stops the chain.  fetch may block on the
 * network, within the provider's own deadline.
 */
typedef struct creds_provider creds_provider;
struct creds_provider {
	const char *name;
	int (*fetch)(const creds_provider *self, const creds_ctx *cx,
		     s3_creds *out, buf *tried, char **err);
	void *arg; /* for the provider's own use */
};

/*
 * profile: the resolved profile name (NULL: "default"); region: the
 * resolved region (NULL: us-east-1), for STS.  The default chain is the
 * AWS CLI's (doc/credentials.md): environment, assume-role profile, web
 * identity, shared credentials file, credential_process, config file,
 * container credentials, EC2 instance metadata.
 */
creds_chain *creds_chain_new(const char *profile, const char *region);
/* The same without the environment provider (an explicit profile). */
creds_chain *creds_chain_new_profile(const char *profile, const char *region);
/* A chain over the given providers (the array is copied). */
creds_chain *creds_chain_new_with(const char *profile, const char *region,
				  const creds_provider *providers, size_t n);
/* The CA bundle of the mount (s3_settings.ca_bundle) for the providers'
 * https:// requests.  Call before the first creds_chain_get. */
int creds_chain_set_ca_bundle(creds_chain *ch, const char *path);
/* Stops the refresh thread (waiting for a fetch in progress) and frees. */
void creds_chain_free(creds_chain *ch);

/*
 * Copies the current credentials into *out (caller frees with
 * s3_creds_free).  The first call asks the providers in order; the
 * provider that answered is asked again, by a background thread, before
 * its credentials expire, and callers keep getting the current set
 * meanwhile without waiting.  Only when no set is valid (the first call,
 * or every refresh failed until expiry) does a caller fetch itself.
 * Returns 0, or -1 with *err (malloc'd, no secrets) saying which sources
 * were tried and why each gave nothing, or CREDS_BUSY (with *err too):
 * the set is in its last second and the refresh that will replace it is
 * still waiting on the provider, not failed yet; the caller never waits
 * here, but may try again shortly (s3/request.c retries such a request
 * within its budget).  Thread-safe.
 */
#define CREDS_BUSY (-2)
int creds_chain_get(creds_chain *ch, s3_creds *out, char **err);

/* When a set fetched at `fetched` and expiring at `expires` is refreshed. */
time_t creds_refresh_at(time_t fetched, time_t expires);

/* Seconds before the next try after `failures` failed refreshes in a row,
 * when the current set has `left` seconds left (<= 0: expired). */
long creds_retry_delay(unsigned failures, time_t left);

/* What the chain holds, for `ckptfs status` and the metrics: never a
 * secret. */
typedef struct creds_status {
	const char *source;  /* the provider of the current set; NULL: none */
	time_t expires;	     /* of the current set; 0: never */
	time_t fetched;	     /* when it was fetched */
	time_t next_refresh; /* the refresher's next try; 0: none planned */
	uint64_t refreshes;  /* sets the refresher installed */
	uint64_t refresh_failures; /* refreshes that failed */
	unsigned failing;	   /* failed in a row (0: the last worked) */
	bool refreshing;	   /* a refresh is waiting on the provider */
	char *last_error;	   /* of the last failed refresh, or NULL */
	time_t last_error_at;	   /* when it failed */
} creds_status;

/* Fills *st (free with creds_status_free).  0, or -1 out of memory. */
int creds_chain_status(creds_chain *ch, creds_status *st);
void creds_status_free(creds_status *st);

#endif
