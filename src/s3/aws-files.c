/*
 * aws-files: the AWS config and credentials files, read the way the AWS
 * CLI reads them (precedence in config.h), and the small helpers the
 * module's files share (messages, environment), declared in aws-files.h.
 * Below config.c (the bucket URL and the resolved settings) and the
 * credential files (creds*.c), which call it; it calls none of them.
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
 *
 * File locations: $AWS_CONFIG_FILE / $AWS_SHARED_CREDENTIALS_FILE, else
 * ~/.aws/; "~/" is $HOME, else the password database's home.
 */

#include "s3/aws-files.h"

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

#include "util/buf.h"

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
bool s3cfg_is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' ||
	       c == '\r';
}

/* ---- AWS INI files ------------------------------------------------------ */

/* The keys of a profile: the config file knows them all, the credentials
 * file those from CREDS_KEYS_FROM on. */
static const key_slot config_keys[] = {
    {"region", offsetof(aws_profile, region)},
    {"endpoint_url", offsetof(aws_profile, endpoint_url)},
    {"ca_bundle", offsetof(aws_profile, ca_bundle)},
    {"ec2_metadata_v1_disabled", offsetof(aws_profile, imds_v1_disabled)},
#define CREDS_KEYS_FROM 4
    {"aws_access_key_id", offsetof(aws_profile, access_key)},
    {"aws_secret_access_key", offsetof(aws_profile, secret_key)},
    {"aws_session_token", offsetof(aws_profile, session_token)},
    {"role_arn", offsetof(aws_profile, role_arn)},
    {"source_profile", offsetof(aws_profile, source_profile)},
    {"credential_source", offsetof(aws_profile, credential_source)},
    {"role_session_name", offsetof(aws_profile, role_session_name)},
    {"external_id", offsetof(aws_profile, external_id)},
    {"duration_seconds", offsetof(aws_profile, duration_seconds)},
    {"mfa_serial", offsetof(aws_profile, mfa_serial)},
    {"web_identity_token_file", offsetof(aws_profile, web_identity_token_file)},
    {"credential_process", offsetof(aws_profile, credential_process)},
    {NULL, 0},
};

static const key_slot s3_keys[] = {
    {"endpoint_url", offsetof(aws_profile, s3_endpoint_url)},
    {"addressing_style", offsetof(aws_profile, s3_addressing)},
    {NULL, 0},
};

static const key_slot sts_keys[] = {
    {"endpoint_url", offsetof(aws_profile, sts_endpoint_url)},
    {NULL, 0},
};

/* The service subsections we read ("s3 =", "sts =" and indented lines). */
static const struct {
	const char *name;
	const key_slot *keys;
} nested_sections[] = {{"s3", s3_keys}, {"sts", sts_keys}};

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
	cfg_val *more[] = {&p->role_arn,	  &p->source_profile,
			   &p->credential_source, &p->role_session_name,
			   &p->external_id,	  &p->duration_seconds,
			   &p->mfa_serial,	  &p->web_identity_token_file,
			   &p->credential_process, &p->sts_endpoint_url,
			   &p->imds_v1_disabled};
	for (size_t i = 0; i < sizeof(more) / sizeof(more[0]); i++)
		free(more[i]->v);
	memset(p, 0, sizeof(*p));
}

/* ~/.aws/config: "[profile NAME]", and "[default]" for the default. */
static bool config_section_match(const char *sec, const char *profile)
{
	if (strcmp(profile, "default") == 0 && strcmp(sec, "default") == 0)
		return true;
	if (strncmp(sec, "profile", 7) != 0 || !s3cfg_is_space(sec[7]))
		return false;
	sec += 7;
	while (s3cfg_is_space(*sec))
		sec++;
	size_t n = strlen(sec);
	while (n > 0 && s3cfg_is_space(sec[n - 1]))
		n--;
	return n == strlen(profile) && strncmp(sec, profile, n) == 0;
}

static bool creds_section_match(const char *sec, const char *profile)
{
	return strcmp(sec, profile) == 0;
}

const file_kind aws_config_kind = {config_section_match, config_keys, true};
const file_kind aws_creds_kind = {creds_section_match,
				   config_keys + CREDS_KEYS_FROM, false};

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
	const key_slot *nested; /* in "s3 =" or "sts =": its keys */
	const char *nested_name;
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
	x->nested = NULL;
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
	while (s < end && s3cfg_is_space(*s))
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
	while (s < end && s3cfg_is_space(*s))
		s++;
	for (const char *c = s + 1; c < end; c++) {
		if (*c == ';' && s3cfg_is_space(c[-1])) {
			end = c;
			break;
		}
	}
	while (end > s && s3cfg_is_space(end[-1]))
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

/* An indented "key = value" line under "s3 =" or "sts =". */
static int ini_nested_line(ini_ctx *x)
{
	const char *end = x->raw + x->raw_len;
	const char *eq = memchr(x->raw, '=', x->raw_len);
	if (!eq) {
		char what[64];
		snprintf(what, sizeof what, "expected 'key = value' under '%s ='",
			 x->nested_name);
		return ini_error(x, what);
	}
	const char *k = x->raw, *kend = eq;
	while (k < kend && s3cfg_is_space(*k))
		k++;
	while (kend > k && s3cfg_is_space(kend[-1]))
		kend--;
	const key_slot *slot = slot_find(x->nested, k, (size_t)(kend - k));
	if (!slot)
		return 1; /* other settings are the CLI's, not ours */
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
	if (x->nested)
		return ini_nested_line(x);
	if (!x->cont_slot)
		return 1; /* continues a key we do not use */
	return ini_error(x, "unexpected indented line (only the lines under "
			    "'s3 =' may be indented)");
}

static int ini_key(ini_ctx *x, const char *name, const char *value)
{
	x->cont_slot = NULL;
	x->nested = NULL;
	for (size_t i = 0; x->kind->nested && i < sizeof(nested_sections) /
						      sizeof(nested_sections[0]);
	     i++) {
		if (strcasecmp(name, nested_sections[i].name) != 0)
			continue;
		x->nested = nested_sections[i].keys;
		x->nested_name = nested_sections[i].name;
		if (!*value)
			return 1;
		char what[96];
		snprintf(what, sizeof what,
			 "expected nothing after '%s =' (its settings go on "
			 "the indented lines below)",
			 x->nested_name);
		return ini_error(x, what);
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
char *s3cfg_expand_home(const char *p)
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
	return s3cfg_expand_home(v ? v : dflt);
}
