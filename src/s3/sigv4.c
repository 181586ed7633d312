/*
 * sigv4: AWS Signature Version 4 (header signing and presigned URLs).
 *
 * Both entry points run the same pipeline:
 *
 *   scope           = YYYYMMDD/region/service/aws4_request
 *   canonical req   = method \n path \n query \n header-lines \n
 *                     signed-header-names \n payload-hash
 *   string to sign  = AWS4-HMAC-SHA256 \n amz-date \n scope \n
 *                     hex(sha256(canonical req))
 *   signature       = hex(hmac(signing key, string to sign)), where the
 *                     signing key is the HMAC chain "AWS4"+secret -> date ->
 *                     region -> service -> "aws4_request"
 *
 * and differ only in where the signature goes: the Authorization header, or
 * the query string together with the X-Amz-* parameters that presigning adds
 * to the canonical query before it is hashed.
 *
 * Canonicalisation rules (checked byte for byte against the published
 * vectors in tests/data/sigv4):
 *  - path: used as given when !normalize_path (S3: the caller already
 *    encoded the key once); otherwise empty and "." segments are dropped,
 *    ".." removes the previous segment, a trailing slash is kept, and the
 *    result is URI-encoded again with '/' kept.  An empty path is "/".
 *  - query: split on '&', each "name[=value]" is decoded and re-encoded
 *    with '/' escaped ('+' stays a literal plus), then the pairs are sorted
 *    by encoded name and then value; a missing '=' means an empty value.  A
 *    malformed escape in the caller's query is invalid input.
 *  - headers: names lower-cased; values trimmed and every run of
 *    whitespace (spaces, tabs, folded line breaks) collapsed to one space;
 *    headers sorted by name, duplicates joined with ',' in input order.
 *
 * Invariants: no global state; every result string is heap-allocated and
 * owned by the sigv4_result; on failure the result is zeroed so
 * sigv4_result_free is always safe.  The secret key only ever lives in a
 * temporary key buffer that is cleansed before it is freed, and in the
 * derived keys, which are cleansed too; it never reaches any output string.
 */
#include "s3/sigv4.h"

#include <ctype.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "s3/uri.h"
#include "util/buf.h"
#include "util/hex.h"
#include "util/vec.h"

#define SIGV4_ALGORITHM "AWS4-HMAC-SHA256"
#define SIGV4_TERMINATOR "aws4_request"
/* SigV4 presigned URLs are valid for at most seven days. */
#define SIGV4_MAX_EXPIRES 604800u
#define SIGV4_HASH_LEN 32

/* One input header in canonical form, before duplicates are merged. */
typedef struct sigv4_hdr {
	char *name;   /* lower-cased */
	char *value;  /* trimmed, whitespace runs collapsed */
	size_t order; /* input position: keeps duplicates in order */
} sigv4_hdr;

/* One query parameter, both halves already in canonical encoding. */
typedef struct sigv4_param {
	char *name;
	char *value;
} sigv4_param;

typedef struct sigv4_params {
	sigv4_param *v;
	size_t n;
	size_t cap;
} sigv4_params;

/* Working state of one signing operation. */
typedef struct sigv4_work {
	buf scope;   /* YYYYMMDD/region/service/aws4_request */
	buf headers; /* canonical header lines, each ending in '\n' */
	buf names;   /* signed header names joined with ';' */
	sigv4_params params;
	buf creq;
	buf sts;
	char sig[65];
} sigv4_work;

/* ---- input checks ------------------------------------------------------ */

static bool sigv4_digits(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

/* YYYYMMDDTHHMMSSZ, nothing more. */
static bool sigv4_date_ok(const char *d)
{
	return strlen(d) == 16 && sigv4_digits(d, 8) && d[8] == 'T' &&
	       sigv4_digits(d + 9, 6) && d[15] == 'Z';
}

static bool sigv4_nonempty(const char *s)
{
	return s && *s;
}

/* Non-empty, printable, no space and none of the bytes in `bad`: the
 * characters that would make the canonical request or the credential
 * scope ambiguous ('\n' ends a line, ':' a header name, '/' a scope part). */
static bool sigv4_token_ok(const char *s, const char *bad)
{
	if (!sigv4_nonempty(s))
		return false;
	for (; *s; s++)
		if ((unsigned char)*s <= ' ' || *s == 0x7f || strchr(bad, *s))
			return false;
	return true;
}

static bool sigv4_input_ok(const sigv4_input *in, const sigv4_creds *c)
{
	if (!in || !c || !sigv4_token_ok(in->method, "") || !in->path ||
	    !sigv4_token_ok(in->payload_hash, "") ||
	    !sigv4_token_ok(in->region, "/") ||
	    !sigv4_token_ok(in->service, "/") || !in->amz_date ||
	    !sigv4_date_ok(in->amz_date) ||
	    !sigv4_token_ok(c->access_key, "/") || !c->secret_key)
		return false;
	if (in->n_headers && !in->headers)
		return false;
	for (size_t i = 0; i < in->n_headers; i++)
		if (!sigv4_token_ok(in->headers[i].name, ":") ||
		    !in->headers[i].value)
			return false;
	return true;
}

static bool sigv4_has_header(const sigv4_input *in, const char *name)
{
	for (size_t i = 0; i < in->n_headers; i++)
		if (strcasecmp(in->headers[i].name, name) == 0)
			return true;
	return false;
}

static bool sigv4_has_token(const sigv4_creds *c)
{
	return sigv4_nonempty(c->session_token);
}

/* ---- headers ----------------------------------------------------------- */

static bool sigv4_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n' ||
	       ch == '\v' || ch == '\f';
}

/* Copy of v with leading/trailing whitespace removed and every inner run
 * of whitespace (including folded continuation lines) turned into one
 * space. */
static char *sigv4_trim_value(const char *v)
{
	char *out = malloc(strlen(v) + 1);
	if (!out)
		return NULL;
	size_t o = 0;
	bool gap = false;
	for (; *v; v++) {
		if (sigv4_space(*v)) {
			gap = o > 0;
			continue;
		}
		if (gap)
			out[o++] = ' ';
		gap = false;
		out[o++] = *v;
	}
	out[o] = '\0';
	return out;
}

static char *sigv4_lower_dup(const char *s)
{
	char *out = strdup(s);
	if (!out)
		return NULL;
	for (char *p = out; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	return out;
}

static int sigv4_hdr_cmp(const void *a, const void *b)
{
	const sigv4_hdr *x = a, *y = b;
	int r = strcmp(x->name, y->name);
	if (r)
		return r;
	return x->order < y->order ? -1 : x->order > y->order;
}

static void sigv4_hdrs_free(sigv4_hdr *h, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(h[i].name);
		free(h[i].value);
	}
	free(h);
}

/* Appends the sorted, merged header lines and the ';'-joined names. */
static int sigv4_emit_headers(const sigv4_hdr *h, size_t n, buf *lines,
			      buf *names)
{
	for (size_t i = 0; i < n; i++) {
		bool first = i == 0 || strcmp(h[i - 1].name, h[i].name) != 0;
		bool last = i + 1 == n || strcmp(h[i + 1].name, h[i].name) != 0;
		if (first && ((names->len && buf_putc(names, ';') < 0) ||
			      buf_puts(names, h[i].name) < 0 ||
			      buf_printf(lines, "%s:", h[i].name) < 0))
			return -1;
		if (!first && buf_putc(lines, ',') < 0)
			return -1;
		if (buf_puts(lines, h[i].value) < 0 ||
		    (last && buf_putc(lines, '\n') < 0))
			return -1;
	}
	return 0;
}

static int sigv4_canon_headers(const sigv4_input *in, sigv4_work *w)
{
	size_t n = in->n_headers;
	sigv4_hdr *h = calloc(n ? n : 1, sizeof *h);
	if (!h)
		return -1;
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		h[i].name = sigv4_lower_dup(in->headers[i].name);
		h[i].value = sigv4_trim_value(in->headers[i].value);
		h[i].order = i;
		if (!h[i].name || !h[i].value)
			rc = -1;
	}
	if (rc == 0) {
		qsort(h, n, sizeof *h, sigv4_hdr_cmp);
		rc = sigv4_emit_headers(h, n, &w->headers, &w->names);
	}
	sigv4_hdrs_free(h, n);
	return rc;
}

/* ---- path -------------------------------------------------------------- */

/* Removes the last "/segment" from out (no-op at the root). */
static void sigv4_pop_segment(buf *out)
{
	while (out->len && out->data[out->len - 1] != '/')
		out->len--;
	if (out->len)
		out->len--;
	if (out->data)
		out->data[out->len] = '\0';
}

/* RFC 3986 dot-segment removal plus collapsing of empty segments; the
 * result always starts with '/' and keeps a trailing one. */
static int sigv4_normalize_path(const char *p, buf *out)
{
	bool trailing = false;
	while (*p) {
		const char *seg = p + strspn(p, "/");
		size_t len = strcspn(seg, "/");
		p = seg + len;
		if (len == 0)
			break;
		trailing = *p == '/';
		if (len == 1 && seg[0] == '.') {
			trailing = true;
		} else if (len == 2 && seg[0] == '.' && seg[1] == '.') {
			sigv4_pop_segment(out);
			trailing = true;
		} else if (buf_putc(out, '/') < 0 ||
			   buf_append(out, seg, len) < 0) {
			return -1;
		}
	}
	if (out->len == 0 || trailing)
		return buf_putc(out, '/');
	return 0;
}

static int sigv4_canon_path(const sigv4_input *in, buf *creq)
{
	if (!in->normalize_path)
		return buf_puts(creq, *in->path ? in->path : "/");
	buf norm = BUF_INIT;
	int rc = sigv4_normalize_path(in->path, &norm);
	if (rc == 0)
		rc = uri_encode(creq, norm.data, norm.len, true);
	buf_free(&norm);
	return rc;
}

/* ---- query ------------------------------------------------------------- */

static void sigv4_params_free(sigv4_params *ps)
{
	for (size_t i = 0; i < ps->n; i++) {
		free(ps->v[i].name);
		free(ps->v[i].value);
	}
	free(ps->v);
	ps->v = NULL;
	ps->n = ps->cap = 0;
}

/* Encodes s[0..n) ('/' escaped) into a new string. */
static char *sigv4_encode_dup(const char *s, size_t n)
{
	buf b = BUF_INIT;
	if (uri_encode(&b, s, n, false) < 0) {
		buf_free(&b);
		return NULL;
	}
	return buf_steal(&b);
}

/* Adds a parameter given in plain (unencoded) form. */
static int sigv4_params_add(sigv4_params *ps, const char *name, size_t nlen,
			    const char *value, size_t vlen)
{
	if (ps->n == ps->cap) {
		sigv4_param *v = vec_grow(ps->v, &ps->cap, sizeof *v, 16);
		if (!v)
			return -1;
		ps->v = v;
	}
	sigv4_param *p = &ps->v[ps->n];
	p->name = sigv4_encode_dup(name, nlen);
	p->value = sigv4_encode_dup(value, vlen);
	if (!p->name || !p->value) {
		free(p->name);
		free(p->value);
		return -1;
	}
	ps->n++;
	return 0;
}

/* Adds one "name[=value]" segment of the caller's (encoded) query. */
static int sigv4_params_add_raw(sigv4_params *ps, const char *seg,
				size_t len)
{
	const char *eq = memchr(seg, '=', len);
	size_t nlen = eq ? (size_t)(eq - seg) : len;
	const char *val = eq ? eq + 1 : "";
	size_t vraw = eq ? len - nlen - 1 : 0;
	size_t dn, dv;
	char *name = uri_decode(seg, nlen, false, &dn);
	char *value = uri_decode(val, vraw, false, &dv);
	int rc = name && value ? sigv4_params_add(ps, name, dn, value, dv)
			       : -1;
	free(name);
	free(value);
	return rc;
}

static int sigv4_params_parse(sigv4_params *ps, const char *q)
{
	while (q && *q) {
		size_t len = strcspn(q, "&");
		if (len && sigv4_params_add_raw(ps, q, len) < 0)
			return -1;
		q += len;
		if (*q == '&')
			q++;
	}
	return 0;
}

static int sigv4_param_cmp(const void *a, const void *b)
{
	const sigv4_param *x = a, *y = b;
	int r = strcmp(x->name, y->name);
	return r ? r : strcmp(x->value, y->value);
}

static int sigv4_emit_query(sigv4_params *ps, buf *creq)
{
	if (ps->n)
		qsort(ps->v, ps->n, sizeof *ps->v, sigv4_param_cmp);
	for (size_t i = 0; i < ps->n; i++)
		if (buf_printf(creq, "%s%s=%s", i ? "&" : "", ps->v[i].name,
			       ps->v[i].value) < 0)
			return -1;
	return 0;
}

/* ---- crypto ------------------------------------------------------------ */

static int sigv4_sha256(const void *data, size_t n,
			unsigned char md[SIGV4_HASH_LEN])
{
	unsigned int len = 0;
	if (!EVP_Digest(data, n, md, &len, EVP_sha256(), NULL) ||
	    len != SIGV4_HASH_LEN)
		return -1;
	return 0;
}

static int sigv4_hmac(const unsigned char *key, size_t klen, const char *msg,
		      unsigned char out[SIGV4_HASH_LEN])
{
	unsigned int len = 0;
	if (klen > INT_MAX ||
	    !HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg,
		  strlen(msg), out, &len) ||
	    len != SIGV4_HASH_LEN)
		return -1;
	return 0;
}

/* kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region),
 * service), "aws4_request"). */
static int sigv4_signing_key(const sigv4_input *in, const sigv4_creds *c,
			     unsigned char key[SIGV4_HASH_LEN])
{
	size_t sl = strlen(c->secret_key);
	if (sl > SIZE_MAX - 5)
		return -1;
	unsigned char *k0 = malloc(sl + 4);
	if (!k0)
		return -1;
	memcpy(k0, "AWS4", 4);
	memcpy(k0 + 4, c->secret_key, sl);
	char date[9];
	memcpy(date, in->amz_date, 8);
	date[8] = '\0';
	unsigned char k1[SIGV4_HASH_LEN], k2[SIGV4_HASH_LEN];
	int rc = -1;
	if (sigv4_hmac(k0, sl + 4, date, k1) == 0 &&
	    sigv4_hmac(k1, sizeof k1, in->region, k2) == 0 &&
	    sigv4_hmac(k2, sizeof k2, in->service, k1) == 0 &&
	    sigv4_hmac(k1, sizeof k1, SIGV4_TERMINATOR, key) == 0)
		rc = 0;
	OPENSSL_cleanse(k0, sl + 4);
	OPENSSL_cleanse(k1, sizeof k1);
	OPENSSL_cleanse(k2, sizeof k2);
	free(k0);
	return rc;
}

/* ---- pipeline ---------------------------------------------------------- */

static void sigv4_work_free(sigv4_work *w)
{
	buf_free(&w->scope);
	buf_free(&w->headers);
	buf_free(&w->names);
	sigv4_params_free(&w->params);
	buf_free(&w->creq);
	buf_free(&w->sts);
}

/* Scope, canonical headers and the caller's query parameters. */
static int sigv4_begin(const sigv4_input *in, sigv4_work *w)
{
	if (buf_printf(&w->scope, "%.8s/%s/%s/" SIGV4_TERMINATOR,
		       in->amz_date, in->region, in->service) < 0 ||
	    sigv4_canon_headers(in, w) < 0)
		return -1;
	return sigv4_params_parse(&w->params, in->query);
}

static int sigv4_canonical_request(const sigv4_input *in, sigv4_work *w)
{
	buf *cr = &w->creq;
	if (buf_printf(cr, "%s\n", in->method) < 0 ||
	    sigv4_canon_path(in, cr) < 0 || buf_putc(cr, '\n') < 0 ||
	    sigv4_emit_query(&w->params, cr) < 0)
		return -1;
	return buf_printf(cr, "\n%s\n%s\n%s", buf_cstr(&w->headers),
			  buf_cstr(&w->names), in->payload_hash);
}

/* Canonical request, string to sign and signature from the prepared
 * work (headers and the complete parameter list). */
static int sigv4_finish(const sigv4_input *in, const sigv4_creds *c,
			sigv4_work *w)
{
	buf *cr = &w->creq;
	if (sigv4_canonical_request(in, w) < 0)
		return -1;
	unsigned char md[SIGV4_HASH_LEN];
	char hex[2 * SIGV4_HASH_LEN + 1];
	if (sigv4_sha256(cr->data, cr->len, md) < 0)
		return -1;
	hex_encode(md, sizeof md, hex);
	if (buf_printf(&w->sts, SIGV4_ALGORITHM "\n%s\n%s\n%s", in->amz_date,
		       buf_cstr(&w->scope), hex) < 0)
		return -1;
	unsigned char key[SIGV4_HASH_LEN];
	if (sigv4_signing_key(in, c, key) < 0)
		return -1;
	int rc = sigv4_hmac(key, sizeof key, w->sts.data, md);
	OPENSSL_cleanse(key, sizeof key);
	if (rc == 0)
		hex_encode(md, sizeof md, w->sig);
	return rc;
}

/* Moves the finished work into r; output is already built by the caller. */
static int sigv4_result_take(sigv4_work *w, buf *output, sigv4_result *r)
{
	r->canonical_request = buf_steal(&w->creq);
	r->string_to_sign = buf_steal(&w->sts);
	r->signed_headers = buf_steal(&w->names);
	r->output = buf_steal(output);
	memcpy(r->signature, w->sig, sizeof r->signature);
	if (!r->canonical_request || !r->string_to_sign ||
	    !r->signed_headers || !r->output) {
		sigv4_result_free(r);
		return -1;
	}
	return 0;
}

int sigv4_sign_header(const sigv4_input *in, const sigv4_creds *c,
		      sigv4_result *r)
{
	memset(r, 0, sizeof *r);
	if (!sigv4_input_ok(in, c) || !sigv4_has_header(in, "host") ||
	    !sigv4_has_header(in, "x-amz-date"))
		return -1;
	sigv4_work w = {0};
	buf out = BUF_INIT;
	int rc = -1;
	if (sigv4_begin(in, &w) < 0 || sigv4_finish(in, c, &w) < 0)
		goto done;
	if (buf_printf(&out,
		       SIGV4_ALGORITHM " Credential=%s/%s, SignedHeaders=%s, "
				       "Signature=%s",
		       c->access_key, buf_cstr(&w.scope), buf_cstr(&w.names),
		       w.sig) < 0)
		goto done;
	rc = sigv4_result_take(&w, &out, r);
done:
	sigv4_work_free(&w);
	buf_free(&out);
	return rc;
}

/* Appends "&name=" plus the encoding of value to the output query. */
static int sigv4_put_param(buf *out, const char *name, const char *value)
{
	if ((out->len && buf_putc(out, '&') < 0) ||
	    buf_printf(out, "%s=", name) < 0)
		return -1;
	return uri_encode(out, value, strlen(value), false);
}

/* The X-Amz-* parameters, in the order the vectors send them. */
static int sigv4_presign_query(const sigv4_input *in, const sigv4_creds *c,
			       const sigv4_work *w, const char *credential,
			       const char *expires, buf *out)
{
	if ((in->query && buf_puts(out, in->query) < 0) ||
	    sigv4_put_param(out, "X-Amz-Algorithm", SIGV4_ALGORITHM) < 0 ||
	    sigv4_put_param(out, "X-Amz-Credential", credential) < 0 ||
	    sigv4_put_param(out, "X-Amz-Date", in->amz_date) < 0 ||
	    sigv4_put_param(out, "X-Amz-SignedHeaders",
			    buf_cstr(&w->names)) < 0 ||
	    sigv4_put_param(out, "X-Amz-Expires", expires) < 0 ||
	    (sigv4_has_token(c) &&
	     sigv4_put_param(out, "X-Amz-Security-Token",
			     c->session_token) < 0))
		return -1;
	return sigv4_put_param(out, "X-Amz-Signature", w->sig);
}

static int sigv4_add_plain(sigv4_params *ps, const char *name,
			   const char *value)
{
	return sigv4_params_add(ps, name, strlen(name), value, strlen(value));
}

/* Adds the X-Amz-* parameters that take part in the signature. */
static int sigv4_presign_params(const sigv4_input *in, const sigv4_creds *c,
				bool omit_token, sigv4_work *w,
				const char *credential, const char *expires)
{
	sigv4_params *ps = &w->params;
	if (sigv4_add_plain(ps, "X-Amz-Algorithm", SIGV4_ALGORITHM) < 0 ||
	    sigv4_add_plain(ps, "X-Amz-Credential", credential) < 0 ||
	    sigv4_add_plain(ps, "X-Amz-Date", in->amz_date) < 0 ||
	    sigv4_add_plain(ps, "X-Amz-Expires", expires) < 0 ||
	    sigv4_add_plain(ps, "X-Amz-SignedHeaders",
			    buf_cstr(&w->names)) < 0)
		return -1;
	if (sigv4_has_token(c) && !omit_token)
		return sigv4_add_plain(ps, "X-Amz-Security-Token",
				       c->session_token);
	return 0;
}

int sigv4_presign(const sigv4_input *in, const sigv4_creds *c,
		  unsigned expires_seconds, bool omit_session_token,
		  sigv4_result *r)
{
	memset(r, 0, sizeof *r);
	if (!sigv4_input_ok(in, c) || !sigv4_has_header(in, "host") ||
	    expires_seconds == 0 || expires_seconds > SIGV4_MAX_EXPIRES)
		return -1;
	sigv4_work w = {0};
	buf cred = BUF_INIT, out = BUF_INIT;
	char expires[16];
	snprintf(expires, sizeof expires, "%u", expires_seconds);
	int rc = -1;
	if (sigv4_begin(in, &w) < 0 ||
	    buf_printf(&cred, "%s/%s", c->access_key, buf_cstr(&w.scope)) < 0 ||
	    sigv4_presign_params(in, c, omit_session_token, &w, cred.data,
				 expires) < 0 ||
	    sigv4_finish(in, c, &w) < 0 ||
	    sigv4_presign_query(in, c, &w, cred.data, expires, &out) < 0)
		goto done;
	rc = sigv4_result_take(&w, &out, r);
done:
	sigv4_work_free(&w);
	buf_free(&cred);
	buf_free(&out);
	return rc;
}

void sigv4_result_free(sigv4_result *r)
{
	if (!r)
		return;
	free(r->canonical_request);
	free(r->string_to_sign);
	free(r->signed_headers);
	free(r->output);
	memset(r, 0, sizeof *r);
}

/* The digest cannot fail with the default provider; if a restricted
 * OpenSSL configuration makes it fail anyway, out is "" so the caller's
 * request is rejected by the server instead of signed with garbage. */
void sigv4_sha256_hex(const void *data, size_t n, char out[65])
{
	unsigned char md[SIGV4_HASH_LEN];
	if (sigv4_sha256(data, n, md) < 0) {
		out[0] = '\0';
		return;
	}
	hex_encode(md, sizeof md, out);
}

void sigv4_amz_date(time_t t, char out[17])
{
	struct tm tm;
	if (!gmtime_r(&t, &tm) ||
	    strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm) != 16)
		out[0] = '\0';
}
