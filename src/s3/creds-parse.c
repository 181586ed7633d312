/*
 * creds-parse: the documents credential providers read, kept apart from
 * the I/O so each rule is unit-tested (tests/unit/s3/test_creds.c).
 *
 *  - JSON (jansson): EC2 instance metadata and the container endpoints
 *    answer {"AccessKeyId", "SecretAccessKey", "Token", "Expiration"}
 *    (IMDS adds "Code": "Success"); credential_process prints
 *    {"Version": 1, "AccessKeyId", "SecretAccessKey", "SessionToken",
 *    "Expiration"} (Expiration optional: the keys then never expire).
 *  - STS XML (expat): <XResponse><XResult><Credentials> with AccessKeyId,
 *    SecretAccessKey, SessionToken, Expiration; or <ErrorResponse><Error>
 *    with Code and Message.
 *  - The container endpoint host rule and credential_process's word
 *    splitting.
 *
 * Invariant: messages name the field that is wrong, never its value (any
 * value of these documents may be a secret).
 */
#include "s3/creds-parse.h"

#include <arpa/inet.h>
#include <expat.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "s3/aws-files.h"
#include "s3/xml.h"
#include "util/vec.h"

/* ---- s3_creds ----------------------------------------------------------- */

void s3_creds_free(s3_creds *c)
{
	if (!c)
		return;
	free(c->access_key);
	s3cfg_secret_free(c->secret_key);
	s3cfg_secret_free(c->session_token);
	memset(c, 0, sizeof(*c));
}

int creds_set(s3_creds *out, const char *id, const char *secret,
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

int creds_copy(s3_creds *dst, const s3_creds *src)
{
	return creds_set(dst, src->access_key, src->secret_key,
			 src->session_token, src->expires);
}

int creds_parse_time(const char *s, time_t *out)
{
	struct timespec ts;
	if (s3xml_parse_time(s, &ts) < 0)
		return -1;
	*out = ts.tv_sec;
	return 0;
}

/* ---- JSON --------------------------------------------------------------- */

/* A non-empty string member, or NULL. */
static const char *json_str(json_t *o, const char *name)
{
	const char *v = json_string_value(json_object_get(o, name));
	return v && *v ? v : NULL;
}

static int json_check(json_t *o, bool process, const char *what, char **err)
{
	if (!json_is_object(o))
		return s3cfg_fail(err, "%s: not a JSON object", what);
	if (process) {
		json_t *v = json_object_get(o, "Version");
		if (!v)
			return s3cfg_fail(
			    err, "%s: no \"Version\" (expected 1)", what);
		if (!json_is_integer(v) || json_integer_value(v) != 1)
			return s3cfg_fail(err,
					  "%s: unsupported \"Version\" "
					  "(only 1 is understood)",
					  what);
	}
	const char *code = json_str(o, "Code");
	if (!process && code && strcmp(code, "Success") != 0)
		return s3cfg_fail(err, "%s: \"Code\" is \"%.40s\", not Success",
				  what, code);
	return 0;
}

int creds_parse_json(const char *body, size_t len, bool process,
		     const char *what, s3_creds *out, char **err)
{
	memset(out, 0, sizeof(*out));
	json_error_t je;
	json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
	if (!o)
		return s3cfg_fail(err, "%s: not JSON (line %d column %d)", what,
				  je.line, je.column);
	int rc = json_check(o, process, what, err);
	const char *tok_name = process ? "SessionToken" : "Token";
	const char *id = json_str(o, "AccessKeyId");
	const char *secret = json_str(o, "SecretAccessKey");
	const char *tok = json_str(o, tok_name);
	if (!tok && !process)
		tok = json_str(o, "SessionToken");
	const char *exp = json_str(o, "Expiration");
	time_t expires = 0;
	if (rc == 0 && (!id || !secret))
		rc =
		    s3cfg_fail(err, "%s: no %s", what,
			       !id ? "\"AccessKeyId\"" : "\"SecretAccessKey\"");
	else if (rc == 0 && !process && !tok)
		rc = s3cfg_fail(err, "%s: no \"Token\"", what);
	else if (rc == 0 && !process && !exp)
		rc = s3cfg_fail(err, "%s: no \"Expiration\"", what);
	else if (rc == 0 && json_object_get(o, "Expiration") && !exp)
		rc =
		    s3cfg_fail(err, "%s: \"Expiration\" is not a string", what);
	else if (rc == 0 && exp && creds_parse_time(exp, &expires) < 0)
		rc = s3cfg_fail(
		    err, "%s: \"Expiration\" is not an ISO-8601 time", what);
	if (rc == 0 && creds_set(out, id, secret, tok, expires) < 0)
		rc = s3cfg_fail_oom(err);
	json_decref(o); /* jansson frees its copies without wiping them */
	return rc;
}

/* ---- STS XML ------------------------------------------------------------ */

#define STS_DEPTH 8

typedef struct sts_ctx {
	char *stack[STS_DEPTH]; /* element names, outermost first */
	int depth;
	buf text;
	char *id, *secret, *token, *exp, *code, *msg;
	bool error_root, bad;
} sts_ctx;

static void XMLCALL sts_start(void *u, const XML_Char *name,
			      const XML_Char **atts)
{
	sts_ctx *x = u;
	(void)atts;
	if (x->depth == 0)
		x->error_root = strcmp(name, "ErrorResponse") == 0 ||
				strcmp(name, "Error") == 0;
	if (x->depth < STS_DEPTH) {
		x->stack[x->depth] = strdup(name);
		if (!x->stack[x->depth])
			x->bad = true;
	}
	x->depth++;
	buf_reset(&x->text);
}

static void sts_keep(char **slot, buf *text)
{
	if (*slot)
		s3cfg_secret_free(*slot);
	*slot = buf_steal(text);
}

static void XMLCALL sts_end(void *u, const XML_Char *name)
{
	sts_ctx *x = u;
	x->depth--;
	const char *parent = x->depth >= 1 && x->depth <= STS_DEPTH
				 ? x->stack[x->depth - 1]
				 : "";
	parent = parent ? parent : "";
	if (strcmp(parent, "Credentials") == 0) {
		if (strcmp(name, "AccessKeyId") == 0)
			sts_keep(&x->id, &x->text);
		else if (strcmp(name, "SecretAccessKey") == 0)
			sts_keep(&x->secret, &x->text);
		else if (strcmp(name, "SessionToken") == 0)
			sts_keep(&x->token, &x->text);
		else if (strcmp(name, "Expiration") == 0)
			sts_keep(&x->exp, &x->text);
	} else if (strcmp(parent, "Error") == 0 ||
		   (x->depth == 1 && strcmp(parent, "Error") == 0)) {
		if (strcmp(name, "Code") == 0)
			sts_keep(&x->code, &x->text);
		else if (strcmp(name, "Message") == 0)
			sts_keep(&x->msg, &x->text);
	}
	if (x->depth < STS_DEPTH) {
		free(x->stack[x->depth]);
		x->stack[x->depth] = NULL;
	}
	buf_reset(&x->text);
}

static void XMLCALL sts_chars(void *u, const XML_Char *s, int n)
{
	sts_ctx *x = u;
	if (buf_append(&x->text, s, (size_t)n) < 0)
		x->bad = true;
}

static void sts_ctx_free(sts_ctx *x)
{
	for (int i = 0; i < STS_DEPTH; i++)
		free(x->stack[i]);
	if (x->text.data)
		explicit_bzero(x->text.data, x->text.cap);
	buf_free(&x->text);
	free(x->id);
	s3cfg_secret_free(x->secret);
	s3cfg_secret_free(x->token);
	free(x->exp);
	free(x->code);
	free(x->msg);
}

static int sts_result(sts_ctx *x, sts_reply *r, char **err)
{
	if (x->error_root) {
		if (!x->code)
			return s3cfg_fail(err, "an STS error reply without "
					       "<Code>");
		r->error_code = x->code;
		r->error_msg = x->msg;
		x->code = x->msg = NULL;
		return 1;
	}
	const char *miss = !x->id	? "AccessKeyId"
			   : !x->secret ? "SecretAccessKey"
			   : !x->token	? "SessionToken"
			   : !x->exp	? "Expiration"
					: NULL;
	if (miss)
		return s3cfg_fail(err,
				  "the STS reply has no <Credentials> "
				  "with <%s>",
				  miss);
	time_t t;
	if (creds_parse_time(x->exp, &t) < 0)
		return s3cfg_fail(err, "the STS reply's <Expiration> is not "
				       "an ISO-8601 time");
	if (creds_set(&r->creds, x->id, x->secret, x->token, t) < 0)
		return s3cfg_fail_oom(err);
	return 0;
}

int sts_parse_reply(const char *body, size_t len, sts_reply *r, char **err)
{
	memset(r, 0, sizeof(*r));
	XML_Parser p = XML_ParserCreate(NULL);
	if (!p)
		return s3cfg_fail_oom(err);
	sts_ctx x = {0};
	XML_SetUserData(p, &x);
	XML_SetElementHandler(p, sts_start, sts_end);
	XML_SetCharacterDataHandler(p, sts_chars);
	int rc;
	if (XML_Parse(p, body, (int)len, 1) != XML_STATUS_OK)
		rc = s3cfg_fail(err, "the STS reply is not XML (line %lu: %s)",
				(unsigned long)XML_GetCurrentLineNumber(p),
				XML_ErrorString(XML_GetErrorCode(p)));
	else if (x.bad)
		rc = s3cfg_fail_oom(err);
	else
		rc = sts_result(&x, r, err);
	XML_ParserFree(p);
	sts_ctx_free(&x);
	return rc;
}

void sts_reply_free(sts_reply *r)
{
	s3_creds_free(&r->creds);
	free(r->error_code);
	free(r->error_msg);
	memset(r, 0, sizeof(*r));
}

/* ---- container host rule ------------------------------------------------ */

static bool host_allowed(const char *h, size_t n)
{
	char host[64];
	if (n == 0 || n >= sizeof host)
		return false;
	memcpy(host, h, n);
	host[n] = '\0';
	if (strcasecmp(host, "localhost") == 0 ||
	    strcmp(host, "169.254.170.2") == 0 ||
	    strcmp(host, "169.254.170.23") == 0)
		return true;
	struct in_addr a4;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	struct in6_addr a6, ecs6;
	if (inet_pton(AF_INET6, host, &a6) != 1)
		return false;
	inet_pton(AF_INET6, "fd00:ec2::23", &ecs6);
	return IN6_IS_ADDR_LOOPBACK(&a6) || memcmp(&a6, &ecs6, 16) == 0;
}

const char *container_url_problem(const char *url)
{
	if (strncasecmp(url, "https://", 8) == 0)
		return NULL;
	if (strncasecmp(url, "http://", 7) != 0)
		return "it must start with http:// or https://";
	const char *h = url + 7;
	size_t n;
	if (*h == '[') {
		const char *rb = strchr(h, ']');
		if (!rb)
			return "it has an invalid IPv6 address";
		h++;
		n = (size_t)(rb - h);
	} else {
		n = strcspn(h, ":/?#");
		if (memchr(h, '@', n))
			return "it must not contain a user name or password";
	}
	if (!host_allowed(h, n))
		return "an http:// URL must name a loopback address, "
		       "169.254.170.2 (ECS), 169.254.170.23 or fd00:ec2::23 "
		       "(EKS Pod Identity); use https:// for other hosts";
	return NULL;
}

/* ---- credential_process command lines ----------------------------------- */

void argv_free(char **argv)
{
	if (!argv)
		return;
	for (char **a = argv; *a; a++)
		free(*a);
	free(argv);
}

/* Appends the word in w (if any) to *argv (*n words, room for *cap). */
static int argv_push(char ***argv, size_t *n, size_t *cap, buf *w)
{
	char **na = *argv;
	if (*n + 2 > *cap && !(na = vec_grow(*argv, cap, sizeof *na, 8)))
		return -1;
	*argv = na;
	na[(*n)++] = buf_steal(w);
	na[*n] = NULL;
	return 0;
}

char **cmdline_split(const char *cmd, char **err)
{
	char **argv = calloc(1, sizeof(char *));
	size_t n = 0, cap = 0;
	buf w = BUF_INIT;
	bool in_word = false, oom = !argv;
	char quote = 0;
	for (const char *p = cmd; !oom && *p; p++) {
		char c = *p;
		if (quote == '\'') {
			if (c == '\'')
				quote = 0;
			else
				oom = buf_putc(&w, c) < 0;
			continue;
		}
		if (c == '\\' && p[1] && (!quote || strchr("\"\\$`", p[1]))) {
			oom = buf_putc(&w, *++p) < 0;
			in_word = true;
			continue;
		}
		if (quote == '"') {
			if (c == '"')
				quote = 0;
			else
				oom = buf_putc(&w, c) < 0;
			continue;
		}
		if (c == '\'' || c == '"') {
			quote = c;
			in_word = true;
		} else if (c == ' ' || c == '\t' || c == '\n') {
			if (in_word)
				oom = argv_push(&argv, &n, &cap, &w) < 0;
			in_word = false;
		} else {
			oom = buf_putc(&w, c) < 0;
			in_word = true;
		}
	}
	if (!oom && in_word && !quote)
		oom = argv_push(&argv, &n, &cap, &w) < 0;
	buf_free(&w);
	if (oom) {
		argv_free(argv);
		s3cfg_fail_oom(err);
		return NULL;
	}
	if (quote || n == 0) {
		argv_free(argv);
		s3cfg_fail(err, quote ? "credential_process has an unclosed "
					"quote"
				      : "credential_process is empty");
		return NULL;
	}
	return argv;
}
