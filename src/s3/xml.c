/*
 * s3xml: S3 XML response bodies, parsed with expat.
 *
 * This file holds the engine and what every parser shares, with the
 * ListObjectsV2 and <Error> parsers and ISO-8601 time parsing; the
 * parsers of the multipart, copy and delete replies are in xml-upload.c,
 * which reaches the engine through xml-internal.h.
 *
 * Design.  One small engine (xml_run) drives expat for every document type.
 * It tracks the path of the open elements below the root as a string
 * ("Contents/Key"; "" is the root itself), gathers each element's character
 * data into one buffer (expat hands text over in arbitrary pieces: around
 * entity references, CDATA sections and line ends) and calls the document
 * type's hooks: open(path) when an element starts, close(path, text) when
 * it ends.  A document type is a table entry (xml_spec): the root element
 * it expects and its two hooks.  Closing the root ("" path) is where each
 * type checks that required fields were present and post-processes them.
 *
 * Namespaces are ignored: expat runs in namespace mode so that both
 * xmlns="http://s3.amazonaws.com/doc/2006-03-01/" and prefixed names reduce
 * to their local part, which is all the hooks ever see.  Unknown elements
 * (Owner, StorageClass, ChecksumAlgorithm, ...) match no path and are
 * skipped.
 *
 * Invariants.
 *  - A parser returns 0 (or S3XML_ERROR_BODY) with a complete result, or -1
 *    with *out zeroed, everything it allocated freed, and *err set.  Results
 *    are built in private state and handed out only after the whole body
 *    parsed, so truncation at any byte never leaks a partial listing.
 *  - Bodies over S3XML_MAX_BODY, nesting deeper than XML_MAX_DEPTH and any
 *    DOCTYPE are refused.  S3 never sends a DOCTYPE; refusing it closes the
 *    door to entity expansion ("billion laughs") and external entities.
 *  - Element text is kept raw while parsing (expat never produces NUL
 *    bytes, so it is a C string); percent-decoding for encoding-type=url
 *    runs when the root closes, because <EncodingType> may come after the
 *    keys, and is the only place a key can gain an embedded NUL.
 *  - A field that may occur once and occurs twice is an error: two <Key>s
 *    in one <Contents> mean the body is not what we think it is.
 *  - Characters XML 1.0 forbids but S3 keys may hold (C0 controls other
 *    than NUL, U+FFFE, U+FFFF), which RGW writes as &#x01; or raw, reach
 *    the hooks as the bytes they stand for (xml-chars.c); everything
 *    else XML forbids is still refused.
 */
#include "s3/xml.h"

#include <errno.h>
#include <expat.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "s3/uri.h"
#include "s3/xml-chars.h"
#include "s3/xml-internal.h"
#include "util/buf.h"
#include "util/vec.h"

/* Separates namespace URI and local name in names expat reports.  A newline
 * cannot occur in a local name, so the local part follows the last one. */
#define XML_NS_SEP '\n'

/* ---- helpers ------------------------------------------------------------ */

static char *msg_vf(const char *fmt, va_list ap)
    __attribute__((format(printf, 1, 0)));

static char *msg_vf(const char *fmt, va_list ap)
{
	buf b = BUF_INIT;
	if (buf_vprintf(&b, fmt, ap) < 0) {
		buf_free(&b);
		return NULL;
	}
	return buf_steal(&b);
}

/* Records the first error only and stops expat; always returns -1. */
int xml_fail(xml_ctx *x, const char *fmt, ...)
{
	if (x->err)
		return -1;
	va_list ap;
	va_start(ap, fmt);
	char *m = msg_vf(fmt, ap);
	va_end(ap);
	buf b = BUF_INIT;
	if (buf_printf(&b, "%s: %s", x->what, m ? m : "?") == 0)
		x->err = buf_steal(&b);
	else
		buf_free(&b);
	free(m);
	if (!x->err)
		x->err = strdup("out of memory");
	if (x->parsing)
		XML_StopParser(x->xp, XML_FALSE);
	return -1;
}

int xml_oom(xml_ctx *x)
{
	return xml_fail(x, "out of memory");
}

static char *memdup_str(const char *s, size_t n)
{
	char *p = malloc(n + 1);
	if (!p)
		return NULL;
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

/* Stores the text of a field that may occur at most once. */
int xml_take_str(xml_ctx *x, char **dst, const char *name, const char *text,
		 size_t len)
{
	if (*dst)
		return xml_fail(x, "duplicate <%s>", name);
	*dst = memdup_str(text, len);
	return *dst ? 0 : xml_oom(x);
}

/* Like xml_take_str, also recording the length (keys may gain NULs later). */
int xml_take_key(xml_ctx *x, char **dst, size_t *dst_len, const char *name,
		 const char *text, size_t len)
{
	if (xml_take_str(x, dst, name, text, len) < 0)
		return -1;
	*dst_len = len;
	return 0;
}

/* Decimal digits only: no sign, no blanks, no overflow. */
static int parse_u64(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	if (len == 0)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		unsigned d = (unsigned)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

int xml_take_bool(xml_ctx *x, bool *dst, const char *name, const char *text)
{
	if (strcasecmp(text, "true") == 0)
		*dst = true;
	else if (strcasecmp(text, "false") == 0)
		*dst = false;
	else
		return xml_fail(x, "<%s> is \"%.32s\", not true or false", name,
				text);
	return 0;
}

int xml_take_time(xml_ctx *x, struct timespec *dst, const char *name,
		  const char *text)
{
	if (s3xml_parse_time(text, dst) < 0)
		return xml_fail(x, "<%s> \"%.64s\" is not an ISO-8601 time",
				name, text);
	return 0;
}

/* Percent-decodes *s ('+' is space) in place of the raw text. */
int xml_decode_key(xml_ctx *x, char **s, size_t *len, const char *name)
{
	size_t n = 0;
	char *d = uri_decode(*s, *len, true, &n);
	if (!d)
		return xml_fail(x, "cannot percent-decode <%s> \"%.64s\"", name,
				*s);
	free(*s);
	*s = d;
	*len = n;
	return 0;
}

/* Returns arr with room for element n (growing *cap), or NULL on ENOMEM
 * with arr untouched. */
void *xml_grow_array(void *arr, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return arr;
	if (*cap > SIZE_MAX / 2 / size)
		return NULL;
	return vec_grow(arr, cap, size, 16);
}

bool xml_is_encoding_url(const char *text)
{
	return strcasecmp(text, "url") == 0;
}

/* ---- the engine --------------------------------------------------------- */

static int error_close(xml_ctx *x, const char *path, const char *text,
		       size_t len);
static const xml_spec error_spec = {"Error", NULL, NULL, error_close};

static const char *local_name(const char *name)
{
	const char *p = strrchr(name, XML_NS_SEP);
	return p ? p + 1 : name;
}

/* Checks the root element; an <Error> root switches to the error spec when
 * the caller accepts error documents. */
static int xml_root(xml_ctx *x, const char *local)
{
	const xml_spec *s = x->spec;
	if (strcmp(local, s->root) == 0 ||
	    (s->alt_root && strcmp(local, s->alt_root) == 0))
		return 0;
	if (x->err_doc && strcmp(local, "Error") == 0) {
		x->spec = &error_spec;
		x->state = x->err_doc;
		x->got_err_doc = true;
		return 0;
	}
	return xml_fail(x, "unexpected root element <%.64s>", local);
}

static int path_push(xml_ctx *x, const char *local)
{
	if (x->depth >= XML_MAX_DEPTH)
		return xml_fail(x, "elements nested deeper than %d",
				XML_MAX_DEPTH);
	x->path_len[x->depth] = x->path.len;
	if (x->depth == 0)
		return xml_root(x, local);
	if ((x->path.len && buf_putc(&x->path, '/') < 0) ||
	    buf_puts(&x->path, local) < 0)
		return xml_oom(x);
	return 0;
}

static void path_pop(xml_ctx *x)
{
	x->path.len = x->path_len[x->depth];
	if (x->path.data)
		x->path.data[x->path.len] = '\0';
}

static void XMLCALL on_start(void *ud, const XML_Char *name,
			     const XML_Char **atts)
{
	xml_ctx *x = ud;
	if (x->err || path_push(x, local_name(name)) < 0)
		return;
	x->depth++;
	buf_reset(&x->text);
	if (x->spec->open)
		x->spec->open(x, buf_cstr(&x->path));
}

static void XMLCALL on_end(void *ud, const XML_Char *name)
{
	xml_ctx *x = ud;
	if (x->err)
		return;
	x->depth--;
	x->spec->close(x, buf_cstr(&x->path), buf_cstr(&x->text), x->text.len);
	buf_reset(&x->text);
	path_pop(x);
}

static void XMLCALL on_text(void *ud, const XML_Char *s, int len)
{
	xml_ctx *x = ud;
	if (x->err || x->depth == 0)
		return;
	if (buf_append(&x->text, s, (size_t)len) < 0)
		xml_oom(x);
}

static void XMLCALL on_doctype(void *ud, const XML_Char *name,
			       const XML_Char *sysid, const XML_Char *pubid,
			       int has_internal_subset)
{
	xml_fail(ud, "DOCTYPE declarations are not accepted");
}

static void XMLCALL on_entity_decl(void *ud, const XML_Char *name, int pe,
				   const XML_Char *value, int value_len,
				   const XML_Char *base, const XML_Char *sysid,
				   const XML_Char *pubid,
				   const XML_Char *notation)
{
	xml_fail(ud, "entity declarations are not accepted");
}

/* <?ckptfs-bytes HEX?> (xml-chars.c): the bytes a character XML 1.0
 * forbids stood for, in the element's text.  Other instructions are
 * ignored. */
static void XMLCALL on_pi(void *ud, const XML_Char *target,
			  const XML_Char *data)
{
	xml_ctx *x = ud;
	if (x->err || strcmp(target, XML_BYTES_PI) != 0)
		return;
	if (!x->carried) {
		xml_fail(x, "processing instruction <?%s> is not accepted",
			 XML_BYTES_PI);
		return;
	}
	if (x->depth == 0) {
		xml_fail(x, "a character XML forbids outside any element");
		return;
	}
	int rc = xml_chars_bytes(data, &x->text);
	if (rc == XML_CHARS_OOM)
		xml_oom(x);
	else if (rc < 0)
		xml_fail(x, "bad <?%s %.16s?>", XML_BYTES_PI, data);
}

/* Carries what XML 1.0 forbids (xml-chars.c): 1 with the new body in *o,
 * 0 when the body is parsed as it is, -1 with the error recorded. */
static int xml_carry(xml_ctx *x, const char *body, size_t len, buf *o)
{
	int rc = xml_chars_carry(body, len, o);
	if (rc == XML_CHARS_RESERVED)
		return xml_fail(x,
				"processing instruction <?%s> is not "
				"accepted",
				XML_BYTES_PI);
	if (rc < 0)
		return xml_oom(x);
	x->carried = rc == XML_CHARS_CARRIED;
	return rc;
}

static int xml_check_len(xml_ctx *x, const char *body, size_t len)
{
	if (!body || len == 0)
		return xml_fail(x, "empty body");
	if (len > S3XML_MAX_BODY)
		return xml_fail(x,
				"body of %zu bytes exceeds the %u-byte limit",
				len, (unsigned)S3XML_MAX_BODY);
	return 0;
}

static void xml_parse(xml_ctx *x, const char *body, size_t len)
{
	XML_SetUserData(x->xp, x);
	XML_SetElementHandler(x->xp, on_start, on_end);
	XML_SetCharacterDataHandler(x->xp, on_text);
	XML_SetStartDoctypeDeclHandler(x->xp, on_doctype);
	XML_SetEntityDeclHandler(x->xp, on_entity_decl);
	XML_SetProcessingInstructionHandler(x->xp, on_pi);
	x->parsing = true;
	enum XML_Status st = XML_Parse(x->xp, body, (int)len, XML_TRUE);
	x->parsing = false;
	if (st == XML_STATUS_OK)
		return;
	enum XML_Error code = XML_GetErrorCode(x->xp);
	xml_fail(x, "malformed XML at line %llu, column %llu: %s",
		 (unsigned long long)XML_GetCurrentLineNumber(x->xp),
		 (unsigned long long)XML_GetCurrentColumnNumber(x->xp),
		 XML_ErrorString(code));
}

/*
 * Parses body as a document of type spec into state.  err_doc: where an
 * <Error> root goes, NULL to refuse one.  Returns 0, S3XML_ERROR_BODY, or
 * -1 with *err set (when err is not NULL).  The caller frees state.
 */
int xml_run(const xml_spec *spec, void *state, s3_error *err_doc,
	    const char *body, size_t len, char **err)
{
	xml_ctx x = {.spec = spec,
		     .what = spec->root,
		     .state = state,
		     .err_doc = err_doc};
	buf_init(&x.path);
	buf_init(&x.text);
	buf carried = BUF_INIT;
	int rc = xml_check_len(&x, body, len);
	if (rc == 0)
		rc = xml_carry(&x, body, len, &carried);
	if (rc == 1) {
		body = carried.data;
		len = carried.len;
	}
	if (rc >= 0) {
		x.xp = XML_ParserCreateNS(NULL, XML_NS_SEP);
		if (x.xp) {
			xml_parse(&x, body, len);
			XML_ParserFree(x.xp);
		} else {
			xml_oom(&x);
		}
	}
	buf_free(&carried);
	buf_free(&x.path);
	buf_free(&x.text);
	if (err)
		*err = x.err;
	else
		free(x.err);
	if (x.err)
		return -1;
	return x.got_err_doc ? S3XML_ERROR_BODY : 0;
}

/* ---- <Error> ------------------------------------------------------------ */

static int error_close(xml_ctx *x, const char *path, const char *text,
		       size_t len)
{
	s3_error *e = x->state;
	if (strcmp(path, "Code") == 0)
		return xml_take_str(x, &e->code, "Code", text, len);
	if (strcmp(path, "Message") == 0)
		return xml_take_str(x, &e->message, "Message", text, len);
	if (strcmp(path, "RequestId") == 0)
		return xml_take_str(x, &e->request_id, "RequestId", text, len);
	return 0;
}

int s3xml_parse_error(const char *body, size_t len, s3_error *out)
{
	memset(out, 0, sizeof *out);
	if (xml_run(&error_spec, out, NULL, body, len, NULL) == 0)
		return 0;
	s3_error_free(out);
	return -1;
}

void s3_error_free(s3_error *e)
{
	if (!e)
		return;
	free(e->code);
	free(e->message);
	free(e->request_id);
	memset(e, 0, sizeof *e);
}

/* ---- ListBucketResult (ListObjectsV2) ----------------------------------- */

enum { F_KEY = 1, F_SIZE = 2, F_ETAG = 4, F_MTIME = 8 };

typedef struct list_state {
	s3_list_result r;
	size_t obj_cap, pfx_cap;
	bool decode;
	bool have_truncated;
	unsigned seen; /* F_* fields of the current Contents */
} list_state;

static int list_open(xml_ctx *x, const char *path)
{
	list_state *st = x->state;
	s3_list_result *r = &st->r;
	if (strcmp(path, "Contents") != 0)
		return 0;
	s3_object *a =
	    xml_grow_array(r->objects, &st->obj_cap, r->n_objects, sizeof *a);
	if (!a)
		return xml_oom(x);
	r->objects = a;
	memset(&a[r->n_objects++], 0, sizeof *a);
	st->seen = 0;
	return 0;
}

static int contents_field(xml_ctx *x, const char *name, const char *text,
			  size_t len)
{
	list_state *st = x->state;
	s3_object *o = &st->r.objects[st->r.n_objects - 1];
	unsigned f = strcmp(name, "Key") == 0		 ? F_KEY
		     : strcmp(name, "Size") == 0	 ? F_SIZE
		     : strcmp(name, "ETag") == 0	 ? F_ETAG
		     : strcmp(name, "LastModified") == 0 ? F_MTIME
							 : 0;
	if (!f)
		return 0;
	if (st->seen & f)
		return xml_fail(x, "duplicate <%s> in <Contents>", name);
	st->seen |= f;
	if (f == F_KEY && len == 0)
		return xml_fail(x, "empty <Key> in <Contents>");
	if (f == F_KEY)
		return xml_take_key(x, &o->key, &o->key_len, name, text, len);
	if (f == F_ETAG)
		return xml_take_str(x, &o->etag, name, text, len);
	if (f == F_MTIME)
		return xml_take_time(x, &o->mtime, name, text);
	if (parse_u64(text, len, &o->size) < 0)
		return xml_fail(x, "<Size> \"%.32s\" is not a byte count",
				text);
	return 0;
}

static int contents_check(xml_ctx *x)
{
	static const char *const names[] = {"Key", "Size", "ETag",
					    "LastModified"};
	list_state *st = x->state;
	for (unsigned i = 0; i < 4; i++)
		if (!(st->seen & (1u << i)))
			return xml_fail(x, "<Contents> without <%s>", names[i]);
	return 0;
}

static int list_add_prefix(xml_ctx *x, const char *text, size_t len)
{
	list_state *st = x->state;
	s3_list_result *r = &st->r;
	/* Both arrays share pfx_cap; it advances once both have grown. */
	size_t cap = st->pfx_cap;
	char **p = xml_grow_array(r->prefixes, &cap, r->n_prefixes, sizeof *p);
	if (!p)
		return xml_oom(x);
	r->prefixes = p;
	size_t cap2 = st->pfx_cap;
	size_t *l =
	    xml_grow_array(r->prefix_lens, &cap2, r->n_prefixes, sizeof *l);
	if (!l)
		return xml_oom(x);
	r->prefix_lens = l;
	st->pfx_cap = cap;
	p[r->n_prefixes] = memdup_str(text, len);
	if (!p[r->n_prefixes])
		return xml_oom(x);
	l[r->n_prefixes++] = len;
	return 0;
}

/* The root closed: cross-field checks, then percent-decoding. */
static int list_finish(xml_ctx *x)
{
	list_state *st = x->state;
	s3_list_result *r = &st->r;
	if (r->truncated && !(r->next_token && r->next_token[0]))
		return xml_fail(x, "IsTruncated without NextContinuationToken");
	if (!st->decode)
		return 0;
	for (size_t i = 0; i < r->n_objects; i++) {
		s3_object *o = &r->objects[i];
		if (xml_decode_key(x, &o->key, &o->key_len, "Key") < 0)
			return -1;
	}
	for (size_t i = 0; i < r->n_prefixes; i++)
		if (xml_decode_key(x, &r->prefixes[i], &r->prefix_lens[i],
				   "Prefix") < 0)
			return -1;
	return 0;
}

static int list_close(xml_ctx *x, const char *path, const char *text,
		      size_t len)
{
	list_state *st = x->state;
	if (strncmp(path, "Contents/", 9) == 0)
		return contents_field(x, path + 9, text, len);
	if (strcmp(path, "Contents") == 0)
		return contents_check(x);
	if (strcmp(path, "CommonPrefixes/Prefix") == 0)
		return list_add_prefix(x, text, len);
	if (strcmp(path, "IsTruncated") == 0) {
		if (st->have_truncated)
			return xml_fail(x, "duplicate <IsTruncated>");
		st->have_truncated = true;
		return xml_take_bool(x, &st->r.truncated, "IsTruncated", text);
	}
	if (strcmp(path, "NextContinuationToken") == 0)
		return xml_take_str(x, &st->r.next_token,
				    "NextContinuationToken", text, len);
	if (strcmp(path, "EncodingType") == 0 && xml_is_encoding_url(text))
		st->decode = true;
	if (path[0] == '\0')
		return list_finish(x);
	return 0;
}

static const xml_spec list_spec = {"ListBucketResult", NULL, list_open,
				   list_close};

int s3xml_parse_list(const char *body, size_t len, bool url_encoded,
		     s3_list_result *out, char **err)
{
	list_state st = {.decode = url_encoded};
	memset(out, 0, sizeof *out);
	if (xml_run(&list_spec, &st, NULL, body, len, err) < 0) {
		s3_list_result_free(&st.r);
		return -1;
	}
	*out = st.r;
	return 0;
}

void s3_list_result_free(s3_list_result *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_objects; i++) {
		free(r->objects[i].key);
		free(r->objects[i].etag);
	}
	for (size_t i = 0; i < r->n_prefixes; i++)
		free(r->prefixes[i]);
	free(r->objects);
	free(r->prefixes);
	free(r->prefix_lens);
	free(r->next_token);
	memset(r, 0, sizeof *r);
}

/* ---- ISO-8601 timestamps ------------------------------------------------ */

static bool take_digits(const char **p, int n, int *out)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		char c = (*p)[i];
		if (c < '0' || c > '9')
			return false;
		v = v * 10 + (c - '0');
	}
	*p += n;
	*out = v;
	return true;
}

static bool take_char(const char **p, char c)
{
	if (**p != c)
		return false;
	(*p)++;
	return true;
}

static int days_in_month(int year, int mon)
{
	static const int days[] = {31, 28, 31, 30, 31, 30,
				   31, 31, 30, 31, 30, 31};
	bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
	return mon == 2 && leap ? 29 : days[mon - 1];
}

/* Optional ".digits": nanoseconds from the first nine digits. */
static bool take_fraction(const char **p, long *nsec)
{
	*nsec = 0;
	if (!take_char(p, '.'))
		return true;
	long scale = 100000000L;
	const char *start = *p;
	for (; **p >= '0' && **p <= '9'; (*p)++) {
		*nsec += (**p - '0') * scale;
		scale /= 10;
	}
	return *p > start;
}

/* "Z" or "+hh:mm" / "-hh:mm"; *off is seconds east of UTC. */
static bool take_zone(const char **p, long *off)
{
	int h, m;
	*off = 0;
	if (take_char(p, 'Z'))
		return true;
	int sign = take_char(p, '+') ? 1 : take_char(p, '-') ? -1 : 0;
	if (!sign || !take_digits(p, 2, &h) || !take_char(p, ':') ||
	    !take_digits(p, 2, &m) || h > 23 || m > 59)
		return false;
	*off = sign * (h * 3600L + m * 60L);
	return true;
}

int s3xml_parse_time(const char *s, struct timespec *out)
{
	struct tm tm = {0};
	int y, mo, d, h, mi, sec;
	long nsec, off;
	const char *p = s;
	memset(out, 0, sizeof *out);
	if (!p || !take_digits(&p, 4, &y) || !take_char(&p, '-') ||
	    !take_digits(&p, 2, &mo) || !take_char(&p, '-') ||
	    !take_digits(&p, 2, &d) || !take_char(&p, 'T') ||
	    !take_digits(&p, 2, &h) || !take_char(&p, ':') ||
	    !take_digits(&p, 2, &mi) || !take_char(&p, ':') ||
	    !take_digits(&p, 2, &sec) || !take_fraction(&p, &nsec) ||
	    !take_zone(&p, &off) || *p != '\0')
		return -1;
	if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 ||
	    mi > 59 || sec > 60)
		return -1;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec; /* a leap second 60 normalises to the next minute */
	errno = 0;
	time_t t = timegm(&tm);
	if (t == (time_t)-1 && errno)
		return -1;
	out->tv_sec = t - off;
	out->tv_nsec = nsec;
	return 0;
}
