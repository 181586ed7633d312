/*
 * config: the bucket URL, where requests go, and the AWS config and
 * credentials files, read the way the AWS CLI reads them (precedence in
 * config.h).  The credential providers and their chain are in creds.c;
 * both use the INI reader here through config-internal.h.
 *
 * Reading AWS INI files.  libinih parses; three things around it are ours.
 *  - Debian's libinih cuts lines at INI_MAX_LINE (200) bytes, and session
 *    tokens are longer.  We feed inih through our own reader
 *    (ini_parse_stream), which hands it as much of each line as fits,
 *    remembers the whole raw line, and lets the handler take the value
 *    from the raw line when inih only saw part of it.  The reader counts
 *    lines too, so our own errors (a bad addressing_style) name the line.
 *  - The reader also classifies each line exactly as inih will (comment,
 *    section header, indented continuation of the previous key, other), so
 *    section names are compared in full (inih truncates them at 50 bytes)
 *    and the handler knows a continuation line from a repeated key.
 *  - AWS nests service settings: "s3 =" followed by indented "key = value"
 *    lines.  inih's multiline support reports each indented line as another
 *    value of "s3"; the handler splits those lines itself.
 * Only the selected profile's section is interpreted; the rest of the file
 * is only syntax-checked by inih.  A missing file (ENOENT, ENOTDIR) reads
 * as empty; other read errors and syntax errors are reported with the file
 * name and line number.  Messages never quote lines of a file, so a secret
 * on a malformed line cannot leak into them.
 */
#include "s3/config.h"

#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <pwd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "s3/config-internal.h"

#define S3_PREFIX_MAX 1024     /* S3's key length limit */
#define AWS_FILE_MAX (4 << 20) /* larger AWS config files are a mistake */

/* ---- small helpers ------------------------------------------------------ */

/* Sets *err to a malloc'd message (NULL if even that fails); returns -1. */
int s3cfg_fail(char **err, const char *fmt, ...)
{
	if (!err)
		return -1;
	buf b = BUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	int r = buf_vprintf(&b, fmt, ap);
	va_end(ap);
	*err = r == 0 ? buf_steal(&b) : NULL;
	buf_free(&b);
	return -1;
}

int s3cfg_fail_oom(char **err)
{
	return s3cfg_fail(err, "out of memory");
}

/* An unset and an empty variable mean the same, as for the AWS CLI. */
const char *s3cfg_env_get(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

/* inih's notion of white space (isspace in the C locale). */
static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' ||
	       c == '\r';
}

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

/* ---- AWS INI files ------------------------------------------------------ */

static const key_slot config_keys[] = {
    {"region", offsetof(aws_profile, region)},
    {"endpoint_url", offsetof(aws_profile, endpoint_url)},
    {"ca_bundle", offsetof(aws_profile, ca_bundle)},
    {"aws_access_key_id", offsetof(aws_profile, access_key)},
    {"aws_secret_access_key", offsetof(aws_profile, secret_key)},
    {"aws_session_token", offsetof(aws_profile, session_token)},
    {NULL, 0},
};

static const key_slot creds_keys[] = {
    {"aws_access_key_id", offsetof(aws_profile, access_key)},
    {"aws_secret_access_key", offsetof(aws_profile, secret_key)},
    {"aws_session_token", offsetof(aws_profile, session_token)},
    {NULL, 0},
};

static const key_slot s3_keys[] = {
    {"endpoint_url", offsetof(aws_profile, s3_endpoint_url)},
    {"addressing_style", offsetof(aws_profile, s3_addressing)},
    {NULL, 0},
};

/* An empty value unsets the key, like an empty environment variable. */
static void cfg_val_set(cfg_val *cv, char *v, int line)
{
	free(cv->v);
	if (v && !*v) {
		free(v);
		v = NULL;
	}
	cv->v = v;
	cv->line = line;
}

void s3cfg_secret_free(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

void aws_profile_free(aws_profile *p)
{
	free(p->region.v);
	free(p->endpoint_url.v);
	free(p->ca_bundle.v);
	free(p->s3_endpoint_url.v);
	free(p->s3_addressing.v);
	free(p->access_key.v);
	s3cfg_secret_free(p->secret_key.v);
	s3cfg_secret_free(p->session_token.v);
	memset(p, 0, sizeof(*p));
}

/* ~/.aws/config: "[profile NAME]", and "[default]" for the default. */
static bool config_section_match(const char *sec, const char *profile)
{
	if (strcmp(profile, "default") == 0 && strcmp(sec, "default") == 0)
		return true;
	if (strncmp(sec, "profile", 7) != 0 || !is_space(sec[7]))
		return false;
	sec += 7;
	while (is_space(*sec))
		sec++;
	size_t n = strlen(sec);
	while (n > 0 && is_space(sec[n - 1]))
		n--;
	return n == strlen(profile) && strncmp(sec, profile, n) == 0;
}

static bool creds_section_match(const char *sec, const char *profile)
{
	return strcmp(sec, profile) == 0;
}

const file_kind aws_config_kind = {config_section_match, config_keys, true};
const file_kind aws_creds_kind = {creds_section_match, creds_keys, false};

enum line_kind { LINE_OTHER, LINE_SECTION, LINE_CONT };

typedef struct ini_ctx {
	const char *path;
	const char *profile;
	const file_kind *kind;
	aws_profile *out;
	const char *data; /* the whole file */
	size_t len, pos;
	/* the line inih is processing */
	const char *raw;
	size_t raw_len; /* without the '\n' */
	bool raw_cut;	/* inih got only part of it */
	int lineno;
	enum line_kind line_kind;
	/* state mirrored from inih */
	bool have_prev; /* inih has a previous key to continue */
	char *section;
	bool in_profile;
	/* the key the current indented lines continue */
	const key_slot *cont_slot;
	bool in_s3;
	char *err;
	bool oom;
} ini_ctx;

static void ini_set_section(ini_ctx *x, const char *s, const char *end)
{
	const char *rb = memchr(s, ']', (size_t)(end - s));
	free(x->section);
	x->section = strndup(s + 1, rb ? (size_t)(rb - s - 1) : 0);
	if (!x->section)
		x->oom = true;
	x->have_prev = false;
	x->cont_slot = NULL;
	x->in_s3 = false;
	x->in_profile = x->section && x->kind->match(x->section, x->profile);
	if (x->in_profile)
		x->out->found = true;
}

/* Classifies the raw line in the order inih tests it (ini.c, r55). */
static void ini_classify(ini_ctx *x)
{
	const char *p = x->raw, *end = x->raw + x->raw_len;
	if (x->lineno == 1 && x->raw_len >= 3 &&
	    memcmp(p, "\xEF\xBB\xBF", 3) == 0)
		p += 3;
	const char *s = p;
	while (s < end && is_space(*s))
		s++;
	x->line_kind = LINE_OTHER;
	if (s == end || *s == ';' || *s == '#')
		return;
	if (s > p && x->have_prev) {
		x->line_kind = LINE_CONT;
	} else if (*s == '[') {
		x->line_kind = LINE_SECTION;
		ini_set_section(x, s, end);
	}
}

/* ini_reader: one line per call, cut to what inih's buffer holds. */
static char *ini_read_line(char *str, int num, void *stream)
{
	ini_ctx *x = stream;
	if (x->pos >= x->len || num < 2)
		return NULL;
	const char *line = x->data + x->pos;
	const char *nl = memchr(line, '\n', x->len - x->pos);
	size_t n = nl ? (size_t)(nl - line) + 1 : x->len - x->pos;
	size_t give = n < (size_t)num - 1 ? n : (size_t)num - 1;
	memcpy(str, line, give);
	str[give] = '\0';
	x->pos += n;
	x->lineno++;
	x->raw = line;
	x->raw_len = nl ? n - 1 : n;
	x->raw_cut = give < x->raw_len;
	ini_classify(x);
	return str;
}

/*
 * Copies s..end without surrounding space and without an inline comment
 * (';' after white space), as inih treats values.
 */
static char *dup_value(const char *s, const char *end)
{
	while (s < end && is_space(*s))
		s++;
	for (const char *c = s + 1; c < end; c++) {
		if (*c == ';' && is_space(c[-1])) {
			end = c;
			break;
		}
	}
	while (end > s && is_space(end[-1]))
		end--;
	return strndup(s, (size_t)(end - s));
}

/* The value of a "key = value" line inih saw only part of. */
static char *raw_value(const ini_ctx *x)
{
	const char *end = x->raw + x->raw_len;
	const char *s = x->raw;
	while (s < end && *s != '=' && *s != ':')
		s++;
	return dup_value(s < end ? s + 1 : end, end);
}

static const key_slot *slot_find(const key_slot *keys, const char *name,
				 size_t n)
{
	for (; keys->name; keys++)
		if (strlen(keys->name) == n &&
		    strncasecmp(keys->name, name, n) == 0)
			return keys;
	return NULL;
}

static cfg_val *slot_val(ini_ctx *x, const key_slot *slot)
{
	return (cfg_val *)((char *)x->out + slot->off);
}

/* Records the first error of the file; returns 0 for inih. */
static int ini_error(ini_ctx *x, const char *what)
{
	if (!x->err) {
		s3cfg_fail(&x->err, "%s line %d: %s", x->path, x->lineno, what);
		if (!x->err)
			x->oom = true;
	}
	return 0;
}

/* An indented "key = value" line under "s3 =". */
static int ini_s3_line(ini_ctx *x)
{
	const char *end = x->raw + x->raw_len;
	const char *eq = memchr(x->raw, '=', x->raw_len);
	if (!eq)
		return ini_error(x, "expected 'key = value' under 's3 ='");
	const char *k = x->raw, *kend = eq;
	while (k < kend && is_space(*k))
		k++;
	while (kend > k && is_space(kend[-1]))
		kend--;
	const key_slot *slot = slot_find(s3_keys, k, (size_t)(kend - k));
	if (!slot)
		return 1; /* other s3 settings are the CLI's, not ours */
	char *v = dup_value(eq + 1, end);
	if (!v) {
		x->oom = true;
		return 0;
	}
	cfg_val_set(slot_val(x, slot), v, x->lineno);
	return 1;
}

static int ini_continuation(ini_ctx *x)
{
	if (x->in_s3)
		return ini_s3_line(x);
	if (!x->cont_slot)
		return 1; /* continues a key we do not use */
	return ini_error(x, "unexpected indented line (only the lines under "
			    "'s3 =' may be indented)");
}

static int ini_key(ini_ctx *x, const char *name, const char *value)
{
	x->cont_slot = NULL;
	x->in_s3 = x->kind->nested && strcasecmp(name, "s3") == 0;
	if (x->in_s3) {
		if (*value)
			return ini_error(x, "expected nothing after 's3 =' "
					    "(its settings go on the "
					    "indented lines below)");
		return 1;
	}
	const key_slot *slot = slot_find(x->kind->keys, name, strlen(name));
	if (!slot)
		return 1;
	char *v = x->raw_cut ? raw_value(x) : strdup(value);
	if (!v) {
		x->oom = true;
		return 0;
	}
	x->cont_slot = slot;
	cfg_val_set(slot_val(x, slot), v, x->lineno);
	return 1;
}

static int ini_on_value(void *user, const char *section, const char *name,
			const char *value)
{
	ini_ctx *x = user;
	bool cont = x->line_kind == LINE_CONT;
	x->have_prev = true; /* inih remembers every key it reports */
	if (!x->in_profile)
		return 1;
	return cont ? ini_continuation(x) : ini_key(x, name, value);
}

/* strerror is not thread-safe, and the chain reads files from any thread. */
static int fail_errno(char **err, const char *path, int e)
{
	char tmp[128];
	return s3cfg_fail(err, "cannot read %s: %s", path,
			  strerror_r(e, tmp, sizeof(tmp)));
}

/* File contents may hold secrets: wipe them before freeing. */
static void data_free(char *data, size_t len)
{
	if (data) {
		explicit_bzero(data, len);
		free(data);
	}
}

/* Reads path whole; *data = NULL when the file does not exist. */
static int file_slurp(const char *path, char **data, size_t *len, char **err)
{
	*data = NULL;
	*len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR
			   ? 0
			   : fail_errno(err, path, errno);
	buf b = BUF_INIT;
	int rc = 0;
	for (;;) {
		if (b.len > AWS_FILE_MAX) {
			rc = s3cfg_fail(err, "%s is larger than %d bytes", path,
					AWS_FILE_MAX);
			break;
		}
		if (buf_reserve(&b, 65536) < 0) {
			rc = s3cfg_fail_oom(err);
			break;
		}
		b.data[b.len] = '\0';
		ssize_t r = read(fd, b.data + b.len, b.cap - b.len - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = fail_errno(err, path, errno);
			break;
		}
		if (r == 0)
			break;
		b.len += (size_t)r;
		b.data[b.len] = '\0';
	}
	close(fd);
	if (rc == 0 && b.len && memchr(b.data, '\0', b.len))
		rc = s3cfg_fail(
		    err, "%s is not a text file (it contains NUL bytes)", path);
	if (rc < 0) {
		data_free(b.data, b.len);
		return -1;
	}
	*len = b.len;
	*data = buf_steal(&b);
	return 0;
}

static int ini_run(ini_ctx *x, char **err)
{
	int r = ini_parse_stream(ini_read_line, x, ini_on_value, x);
	if (x->oom || r == -2)
		return s3cfg_fail_oom(err);
	if (x->err) {
		*err = x->err;
		x->err = NULL;
		return -1;
	}
	if (r > 0)
		return s3cfg_fail(err,
				  "%s line %d: syntax error (expected "
				  "'[section]' or 'key = value')",
				  x->path, r);
	return r == 0 ? 0 : s3cfg_fail(err, "cannot parse %s", x->path);
}

/*
 * Collects what profile's section(s) of the file at path say into *out
 * (zeroed first).  A missing file is an empty one.  Returns 0, or -1 with
 * *err naming the file and line.
 */
int aws_file_parse(const char *path, const file_kind *kind, const char *profile,
		   aws_profile *out, char **err)
{
	memset(out, 0, sizeof(*out));
	char *data;
	size_t len;
	if (file_slurp(path, &data, &len, err) < 0)
		return -1;
	if (!data)
		return 0;
	ini_ctx x = {.path = path,
		     .profile = profile,
		     .kind = kind,
		     .out = out,
		     .data = data,
		     .len = len};
	int rc = ini_run(&x, err);
	free(x.section);
	free(x.err);
	data_free(data, len);
	if (rc < 0)
		aws_profile_free(out);
	return rc;
}

/* ---- file locations ----------------------------------------------------- */

/* $HOME, else the password database; NULL when neither knows. */
static char *home_dir(void)
{
	const char *h = s3cfg_env_get("HOME");
	if (h)
		return strdup(h);
	struct passwd pw, *res = NULL;
	char tmp[16384];
	if (getpwuid_r(getuid(), &pw, tmp, sizeof(tmp), &res) != 0 || !res ||
	    !res->pw_dir || !*res->pw_dir)
		return NULL;
	return strdup(res->pw_dir);
}

/* "~/x" -> "$HOME/x"; without a home the path is kept (and not found). */
static char *expand_home(const char *p)
{
	if (p[0] != '~' || (p[1] != '/' && p[1] != '\0'))
		return strdup(p);
	char *home = home_dir();
	if (!home)
		return strdup(p);
	buf b = BUF_INIT;
	int r = buf_printf(&b, "%s%s", home, p + 1);
	free(home);
	if (r < 0) {
		buf_free(&b);
		return NULL;
	}
	return buf_steal(&b);
}

/* The file named by $env, else ~/.aws/leaf.  NULL only when out of memory. */
char *aws_file_path(const char *env, const char *leaf)
{
	const char *v = s3cfg_env_get(env);
	char dflt[64];
	snprintf(dflt, sizeof(dflt), "~/.aws/%s", leaf);
	return expand_home(v ? v : dflt);
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
	if (v && !(r->ca_bundle = expand_home(v)))
		return s3cfg_fail_oom(err);
	return 0;
}

static int profile_pick(const s3_settings *s, resolved *r, char **err)
{
	const char *p = s->profile ? s->profile : s3cfg_env_get("AWS_PROFILE");
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
