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
 * Credentials come from a chain of providers tried in order (environment,
 * shared files; IMDSv2 and web identity slot in later).  The chain caches
 * what it found and refreshes it before expiry; creds_chain_get is
 * thread-safe.  No function here logs or returns secret values in error
 * messages.
 */
#ifndef CKPTFS_S3_CONFIG_H
#define CKPTFS_S3_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
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

/* Cached credentials are fetched again this many seconds before expiry. */
#define CREDS_REFRESH_MARGIN 300

/*
 * One source of credentials.  fetch returns 1 and fills *out (expires 0
 * when they do not expire); 0 when the source has nothing, after appending
 * what it looked at to *tried (left empty, the chain uses name); or -1
 * with *err (malloc'd, no secrets) when the source is configured but
 * broken, which stops the chain.
 */
typedef struct creds_provider creds_provider;
struct creds_provider {
	const char *name;
	int (*fetch)(const creds_provider *self, const char *profile,
		     s3_creds *out, buf *tried, char **err);
	void *arg; /* for the provider's own use */
};

/*
 * profile: the resolved profile name (NULL: "default").  The default chain
 * is environment, shared credentials file, config file.
 */
creds_chain *creds_chain_new(const char *profile);
/* A chain over the given providers (the array is copied). */
creds_chain *creds_chain_new_with(const char *profile,
				  const creds_provider *providers, size_t n);
void creds_chain_free(creds_chain *ch);

/*
 * Copies the current credentials into *out (caller frees with
 * s3_creds_free), loading or refreshing them when missing or within five
 * minutes of expiry.  Returns 0, or -1 with *err (malloc'd, no secrets)
 * saying which sources were tried.
 */
int creds_chain_get(creds_chain *ch, s3_creds *out, char **err);

#endif
