/*
 * config: the bucket URL (s3://bucket/prefix, checked against S3's naming
 * rules) and the resolved settings: where requests go (region, endpoint,
 * addressing style, CA bundle), picked from the mount options, the
 * environment and the AWS files the way the AWS CLI does (precedence in
 * config.h).  Reading the AWS files is in aws-files.c (aws-files.h), below
 * this file; the credential providers and their chain are in creds*.c.
 */

#include "s3/config.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "s3/aws-files.h"

#define S3_PREFIX_MAX 1024     /* S3's key length limit */

/* ---- small helpers ------------------------------------------------------ */

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || is_digit(c);
}

static bool is_alnum(char c)
{
	return is_lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

static bool ends_with(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);
	return n >= k && strncasecmp(s + n - k, suffix, k) == 0;
}

/* ---- s3://bucket/prefix ------------------------------------------------- */

static bool looks_like_ipv4(const char *b, size_t n)
{
	size_t dots = 0;
	for (size_t i = 0; i < n; i++) {
		if (b[i] == '.')
			dots++;
		else if (!is_digit(b[i]))
			return false;
	}
	return dots == 3;
}

/* NULL when b[0..n) is a valid S3 bucket name, else the reason it is not. */
static const char *bucket_problem(const char *b, size_t n)
{
	if (n < 3 || n > 63)
		return "it must be 3 to 63 characters long";
	for (size_t i = 0; i < n; i++) {
		if (b[i] >= 'A' && b[i] <= 'Z')
			return "uppercase letters are not allowed";
		if (b[i] == '_')
			return "underscores are not allowed";
		if (!is_lower_alnum(b[i]) && b[i] != '.' && b[i] != '-')
			return "only lowercase letters, digits, '.' and '-' "
			       "are allowed";
	}
	if (!is_lower_alnum(b[0]) || !is_lower_alnum(b[n - 1]))
		return "it must begin and end with a letter or digit";
	if (memmem(b, n, "..", 2))
		return "it must not contain two adjacent periods";
	if (looks_like_ipv4(b, n))
		return "it must not be formatted as an IP address";
	return NULL;
}

/* NULL when p (the text after "bucket/") is a usable prefix. */
static const char *prefix_problem(const char *p)
{
	if (strlen(p) > S3_PREFIX_MAX)
		return "the prefix is longer than 1024 bytes, S3's key limit";
	while (*p) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);
		if (n == 0)
			return "it has an empty path component (\"//\")";
		if ((n == 1 && p[0] == '.') ||
		    (n == 2 && p[0] == '.' && p[1] == '.'))
			return "'.' and '..' path components are not allowed";
		if (!slash)
			break;
		p = slash + 1;
	}
	return NULL;
}

/* Returns "a/b/" for "a/b" and "a/b/", "" for "". */
static char *prefix_normalise(const char *p)
{
	size_t n = strlen(p);
	bool add = n > 0 && p[n - 1] != '/';
	char *out = malloc(n + add + 1);
	if (!out)
		return NULL;
	memcpy(out, p, n);
	if (add)
		out[n++] = '/';
	out[n] = '\0';
	return out;
}

static bool scheme_chars(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!is_alnum(s[i]) && !strchr("+-.", s[i]))
			return false;
	return true;
}

#define URL_FORM "expected s3://bucket[/prefix]"

int s3_parse_url(const char *url, char **bucket, char **prefix, char **err)
{
	if (!url || !*url)
		return s3cfg_fail(err, "empty S3 URL (" URL_FORM ")");
	const char *sep = strstr(url, "://");
	if (!sep || sep == url || !scheme_chars(url, (size_t)(sep - url)))
		return s3cfg_fail(err, "'%s' is not an S3 URL (" URL_FORM ")",
				  url);
	if (sep - url != 2 || strncasecmp(url, "s3", 2) != 0)
		return s3cfg_fail(
		    err, "unsupported URL scheme '%.*s' in '%s' (" URL_FORM ")",
		    (int)(sep - url), url, url);
	const char *b = sep + 3;
	size_t n = strcspn(b, "/");
	if (n == 0)
		return s3cfg_fail(err, "no bucket name in '%s' (" URL_FORM ")",
				  url);
	const char *why = bucket_problem(b, n);
	if (why)
		return s3cfg_fail(err,
				  "invalid bucket name '%.*s' in '%s': %s (S3 "
				  "bucket names are 3-63 lowercase letters, "
				  "digits, '.' and '-')",
				  (int)n, b, url, why);
	const char *rest = b[n] == '/' ? b + n + 1 : b + n;
	why = prefix_problem(rest);
	if (why)
		return s3cfg_fail(err, "invalid prefix in '%s': %s", url, why);
	char *bk = strndup(b, n), *px = prefix_normalise(rest);
	if (!bk || !px) {
		free(bk);
		free(px);
		return s3cfg_fail_oom(err);
	}
	*bucket = bk;
	*prefix = px;
	return 0;
}

/* ---- settings ----------------------------------------------------------- */

/* "path line N": where a value from a file came from, for messages. */
static char *source_name(const char *path, const cfg_val *cv)
{
	buf b = BUF_INIT;
	if (buf_printf(&b, "%s line %d", path, cv->line) < 0) {
		buf_free(&b);
		return NULL;
	}
	return buf_steal(&b);
}

static int region_check(const char *region, const char *source, char **err)
{
	size_t n = strlen(region);
	bool ok = n > 0 && n <= 63;
	for (size_t i = 0; ok && i < n; i++)
		ok =
		    is_alnum(region[i]) || region[i] == '-' || region[i] == '_';
	if (ok)
		return 0;
	return s3cfg_fail(
	    err,
	    "invalid region '%s' (from %s): use up to 63 letters, "
	    "digits, '-' and '_'",
	    region, source);
}

/* The host in "[v6]" or "name" form, then ":port" or nothing. */
static const char *host_port_problem(const char *h, size_t n)
{
	size_t i = 0;
	if (n > 0 && h[0] == '[') {
		while (i < n && h[i] != ']')
			i++;
		if (i == n || i == 1)
			return "it has an invalid IPv6 address";
		for (size_t j = 1; j < i; j++)
			if (!is_alnum(h[j]) && h[j] != ':' && h[j] != '.')
				return "it has an invalid IPv6 address";
		i++;
	} else {
		while (i < n && (is_alnum(h[i]) || h[i] == '-' || h[i] == '.' ||
				 h[i] == '_'))
			i++;
		if (i == 0)
			return "it has no host";
	}
	if (i == n)
		return NULL;
	if (h[i] != ':')
		return "the host has characters other than letters, digits, "
		       "'-', '.' and '_'";
	size_t digits = n - i - 1;
	long port = 0;
	for (size_t j = i + 1; j < n; j++) {
		if (!is_digit(h[j]))
			return "the port is not a number";
		if (port <= 65535)
			port = port * 10 + (h[j] - '0');
	}
	if (digits == 0 || port < 1 || port > 65535)
		return "the port must be 1 to 65535";
	return NULL;
}

/*
 * Validates url and returns in *out "scheme://host[:port]" with a lowercase
 * scheme and without the one trailing '/' allowed.
 */
static int endpoint_normalise(const char *url, const char *source, char **out,
			      bool *https, char **err)
{
	if (strchr(url, '@')) /* do not echo what may be a password */
		return s3cfg_fail(
		    err,
		    "the endpoint from %s must not contain a user "
		    "name or password",
		    source);
	size_t skip;
	if (strncasecmp(url, "https://", 8) == 0)
		skip = 8;
	else if (strncasecmp(url, "http://", 7) == 0)
		skip = 7;
	else
		return s3cfg_fail(err,
				  "invalid endpoint '%s' (from %s): it must "
				  "start with http:// or https://",
				  url, source);
	const char *h = url + skip;
	size_t n = strlen(h);
	if (n > 0 && h[n - 1] == '/')
		n--;
	const char *why = host_port_problem(h, n);
	if (memchr(h, '/', n) || memchr(h, '?', n) || memchr(h, '#', n))
		why = "it must not have a path, query or fragment";
	if (why)
		return s3cfg_fail(err, "invalid endpoint '%s' (from %s): %s",
				  url, source, why);
	buf b = BUF_INIT;
	if (buf_printf(&b, "%s%.*s", skip == 8 ? "https://" : "http://", (int)n,
		       h) < 0) {
		buf_free(&b);
		return s3cfg_fail_oom(err);
	}
	*out = buf_steal(&b);
	*https = skip == 8;
	return 0;
}

static int addressing_parse(const cfg_val *cv, const char *path,
			    s3_addressing *out, char **err)
{
	static const struct {
		const char *name;
		s3_addressing a;
	} styles[] = {{"auto", S3_ADDR_AUTO},
		      {"path", S3_ADDR_PATH},
		      {"virtual", S3_ADDR_VIRTUAL}};
	for (size_t i = 0; i < sizeof(styles) / sizeof(styles[0]); i++) {
		if (strcasecmp(cv->v, styles[i].name) == 0) {
			*out = styles[i].a;
			return 0;
		}
	}
	return s3cfg_fail(err,
			  "%s line %d: addressing_style must be path, virtual "
			  "or auto, not '%s'",
			  path, cv->line, cv->v);
}

/* Everything s3_settings_resolve works out, committed only on success. */
typedef struct resolved {
	char *profile;
	bool profile_named; /* by the caller or AWS_PROFILE */
	bool profile_explicit; /* by the caller */
	char *config_path;
	aws_profile cfg;
	char *region;
	char *endpoint;
	bool https;
	s3_addressing addressing;
	char *ca_bundle;
} resolved;

static void resolved_free(resolved *r)
{
	free(r->profile);
	free(r->config_path);
	aws_profile_free(&r->cfg);
	free(r->region);
	free(r->endpoint);
	free(r->ca_bundle);
}

/*
 * A profile that was asked for by name must exist in one of the files, as
 * the AWS CLI insists; "default" may be absent.
 */
static int profile_check(const resolved *r, char **err)
{
	if (!r->profile_named || r->cfg.found ||
	    strcmp(r->profile, "default") == 0)
		return 0;
	char *cpath =
	    aws_file_path("AWS_SHARED_CREDENTIALS_FILE", "credentials");
	if (!cpath)
		return s3cfg_fail_oom(err);
	aws_profile cp;
	int rc = aws_file_parse(cpath, &aws_creds_kind, r->profile, &cp, err);
	if (rc == 0 && !cp.found)
		rc = s3cfg_fail(err, "profile '%s' not found in %s or %s",
				r->profile, r->config_path, cpath);
	aws_profile_free(&cp);
	free(cpath);
	return rc;
}

/* Picks the first set value of env vars a, b, then the profile's cv. */
static int pick(const char *a, const char *b, const cfg_val *cv,
		const char *path, char **value, char **source)
{
	const char *v = NULL, *src = NULL;
	if (a && (v = s3cfg_env_get(a)))
		src = a;
	else if (b && (v = s3cfg_env_get(b)))
		src = b;
	*value = *source = NULL;
	if (v) {
		*value = strdup(v);
		*source = strdup(src);
	} else if (cv->v) {
		*value = strdup(cv->v);
		*source = source_name(path, cv);
	} else {
		return 0;
	}
	if (*value && *source)
		return 0;
	free(*value);
	free(*source);
	return -1;
}

static int region_pick(const s3_settings *s, resolved *r, char **err)
{
	char *source = NULL;
	if (s->region) {
		r->region = strdup(s->region);
		source = strdup("the region option");
	} else if (pick("AWS_REGION", "AWS_DEFAULT_REGION", &r->cfg.region,
			r->config_path, &r->region, &source) < 0) {
		return s3cfg_fail_oom(err);
	} else if (!r->region) {
		r->region = strdup("us-east-1");
		source = strdup("the default");
	}
	int rc = !r->region || !source ? s3cfg_fail_oom(err)
				       : region_check(r->region, source, err);
	free(source);
	return rc;
}

static char *endpoint_default(const char *region)
{
	buf b = BUF_INIT;
	bool china = strncmp(region, "cn-", 3) == 0;
	if (buf_printf(&b, "https://s3.%s.amazonaws.com%s", region,
		       china ? ".cn" : "") < 0) {
		buf_free(&b);
		return NULL;
	}
	return buf_steal(&b);
}

static int endpoint_pick(const s3_settings *s, resolved *r, char **err)
{
	const cfg_val *cv = r->cfg.s3_endpoint_url.v ? &r->cfg.s3_endpoint_url
						     : &r->cfg.endpoint_url;
	char *url = NULL, *source = NULL;
	if (s->endpoint) {
		url = strdup(s->endpoint);
		source = strdup("the endpoint option");
	} else if (pick("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", cv,
			r->config_path, &url, &source) < 0) {
		return s3cfg_fail_oom(err);
	} else if (!url) {
		url = endpoint_default(r->region);
		source = strdup("the default");
	}
	int rc = !url || !source ? s3cfg_fail_oom(err)
				 : endpoint_normalise(url, source, &r->endpoint,
						      &r->https, err);
	free(url);
	free(source);
	return rc;
}

static int addressing_pick(const s3_settings *s, resolved *r, char **err)
{
	r->addressing = s->addressing;
	if (s->addressing != S3_ADDR_AUTO || !r->cfg.s3_addressing.v)
		return 0;
	return addressing_parse(&r->cfg.s3_addressing, r->config_path,
				&r->addressing, err);
}

static int ca_bundle_pick(const s3_settings *s, resolved *r, char **err)
{
	if (s->ca_bundle)
		return 0;
	const char *v = s3cfg_env_get("AWS_CA_BUNDLE");
	if (!v)
		v = r->cfg.ca_bundle.v;
	if (v && !(r->ca_bundle = s3cfg_expand_home(v)))
		return s3cfg_fail_oom(err);
	return 0;
}

static int profile_pick(const s3_settings *s, resolved *r, char **err)
{
	const char *p = s->profile ? s->profile : s3cfg_env_get("AWS_PROFILE");
	r->profile_explicit = s->profile != NULL;
	r->profile_named = p != NULL;
	r->profile = strdup(p ? p : "default");
	r->config_path = aws_file_path("AWS_CONFIG_FILE", "config");
	if (!r->profile || !r->config_path)
		return s3cfg_fail_oom(err);
	if (!*r->profile)
		return s3cfg_fail(err, "empty profile name");
	return aws_file_parse(r->config_path, &aws_config_kind, r->profile,
			      &r->cfg, err);
}

static void resolved_commit(s3_settings *s, resolved *r)
{
	free(s->profile);
	s->profile = r->profile;
	s->profile_explicit = r->profile_explicit;
	r->profile = NULL;
	free(s->region);
	s->region = r->region;
	r->region = NULL;
	free(s->endpoint);
	s->endpoint = r->endpoint;
	r->endpoint = NULL;
	s->use_https = r->https;
	s->addressing = r->addressing;
	if (r->ca_bundle) {
		s->ca_bundle = r->ca_bundle;
		r->ca_bundle = NULL;
	}
}

int s3_settings_resolve(s3_settings *s, char **err)
{
	resolved r = {0};
	int rc = profile_pick(s, &r, err);
	if (rc == 0)
		rc = profile_check(&r, err);
	if (rc == 0)
		rc = region_pick(s, &r, err);
	if (rc == 0)
		rc = endpoint_pick(s, &r, err);
	if (rc == 0)
		rc = addressing_pick(s, &r, err);
	if (rc == 0)
		rc = ca_bundle_pick(s, &r, err);
	if (rc == 0)
		resolved_commit(s, &r);
	resolved_free(&r);
	return rc;
}

void s3_settings_free(s3_settings *s)
{
	if (!s)
		return;
	free(s->bucket);
	free(s->prefix);
	free(s->endpoint);
	free(s->region);
	free(s->profile);
	free(s->ca_bundle);
	memset(s, 0, sizeof(*s));
}

/* A bucket name that is one DNS label (no dots): safe under TLS wildcards. */
static bool bucket_is_one_label(const char *b)
{
	return !bucket_problem(b, strlen(b)) && !strchr(b, '.');
}

/* Valid name whose every dot-separated label is a DNS label. */
static bool bucket_dns_ok(const char *b)
{
	size_t n = strlen(b);
	return !bucket_problem(b, n) && !strstr(b, ".-") && !strstr(b, "-.");
}

/* Is the endpoint's host amazonaws.com or a name under it? */
static bool endpoint_is_aws(const char *endpoint)
{
	const char *h = strstr(endpoint, "://");
	if (!h)
		return false;
	h += 3;
	size_t n = strcspn(h, ":/");
	return (n == 13 && strncasecmp(h, "amazonaws.com", 13) == 0) ||
	       (n == 16 && strncasecmp(h, "amazonaws.com.cn", 16) == 0) ||
	       ends_with(h, n, ".amazonaws.com") ||
	       ends_with(h, n, ".amazonaws.com.cn");
}

bool s3_settings_virtual_host(const s3_settings *s)
{
	switch (s->addressing) {
	case S3_ADDR_VIRTUAL:
		return true;
	case S3_ADDR_PATH:
		return false;
	case S3_ADDR_AUTO:
		break;
	}
	if (!s->bucket || !s->endpoint || !endpoint_is_aws(s->endpoint))
		return false;
	return s->use_https ? bucket_is_one_label(s->bucket)
			    : bucket_dns_ok(s->bucket);
}
