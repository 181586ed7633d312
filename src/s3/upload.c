/*
 * s3upload: write requests over the generic signed request of request.c
 * (s3_request_perform, s3_request_prepare/classify): single PUTs,
 * CopyObject, DELETE and DeleteObjects, the pure helpers of writes (part
 * sizes, copy sources, metadata headers, Content-MD5, multipart ETags,
 * delete bodies), and the request context they and multipart.c share
 * (upload-internal.h).  Multipart uploads are in multipart.c, which calls
 * into this file and never the other way.
 *
 * Each operation fills a request context (struct wreq: the s3_request plus
 * the strings its header and query pointers refer to) and runs it with
 * s3_request_perform, or signs it into an http_xfer for the async forms.
 * 2xx replies that may still be failures (CopyObject, UploadPartCopy,
 * CompleteMultipartUpload, DeleteObjects answer 200 and may carry an
 * <Error>) are judged by a check callback, so the retry loop treats them
 * like any other failure.
 */
#include "s3/upload.h"
#include "s3/upload-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3/retry.h"
#include "s3/sigv4.h"
#include "s3/uri.h"
#include "s3/xml.h"
#include "util/log.h"
#include "util/hex.h"

/* ---- pure helpers ------------------------------------------------------- */

static uint64_t round_up(uint64_t v, uint64_t m)
{
	return (v + m - 1) / m * m;
}

uint64_t s3_part_size(uint64_t object_size, uint64_t min_part)
{
	if (object_size > S3_MAX_OBJECT_SIZE)
		return 0;
	uint64_t p = min_part ? min_part : S3_DEFAULT_PART_SIZE;
	if (p < S3_MIN_PART_SIZE)
		p = S3_MIN_PART_SIZE;
	if (p > S3_MAX_PART_SIZE)
		p = S3_MAX_PART_SIZE;
	p = round_up(p, S3_MIB);
	uint64_t need = round_up(
	    (object_size + S3_MAX_PARTS - 1) / S3_MAX_PARTS, S3_MIB);
	return need > p ? need : p;
}

uint64_t s3_part_count(uint64_t object_size, uint64_t part_size)
{
	if (object_size == 0 || part_size == 0)
		return 1;
	return (object_size - 1) / part_size + 1;
}

int s3_copy_source(buf *out, const char *bucket, const char *key)
{
	if (uri_encode(out, bucket, strlen(bucket), false) < 0 ||
	    buf_putc(out, '/') < 0 ||
	    uri_encode(out, key, strlen(key), true) < 0)
		return -1;
	return 0;
}

/* Length of the UTF-8 sequence at s (valid, no overlong form, no
 * surrogate, at most U+10FFFF), or 0. */
static size_t utf8_len(const unsigned char *s)
{
	unsigned c = s[0];
	size_t n;
	unsigned cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || cp == 0xfffe ||
	    cp == 0xffff)
		return 0;
	return n;
}

bool s3_key_xml_safe(const char *key)
{
	const unsigned char *p = (const unsigned char *)key;
	if (!*p)
		return false;
	while (*p) {
		if (*p < 0x20 && *p != '\t' && *p != '\n' && *p != '\r')
			return false;
		size_t n = utf8_len(p);
		if (!n)
			return false;
		p += n;
	}
	return true;
}

int wreq_xml_escape(buf *out, const char *s)
{
	int rc = 0;
	for (; *s && rc == 0; s++) {
		switch (*s) {
		case '&': rc = buf_puts(out, "&amp;"); break;
		case '<': rc = buf_puts(out, "&lt;"); break;
		case '>': rc = buf_puts(out, "&gt;"); break;
		case '"': rc = buf_puts(out, "&quot;"); break;
		case '\'': rc = buf_puts(out, "&apos;"); break;
		case '\r': rc = buf_puts(out, "&#13;"); break;
		case '\n': rc = buf_puts(out, "&#10;"); break;
		case '\t': rc = buf_puts(out, "&#9;"); break;
		default: rc = buf_putc(out, *s);
		}
	}
	return rc;
}

int s3_delete_body(buf *out, const char *const *keys, size_t n, bool quiet)
{
	if (n == 0 || n > S3_DELETE_MAX)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (!s3_key_xml_safe(keys[i]))
			return -1;
	int rc = buf_puts(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
			       "<Delete xmlns=\"http://s3.amazonaws.com/doc/"
			       "2006-03-01/\">");
	if (quiet && rc == 0)
		rc = buf_puts(out, "<Quiet>true</Quiet>");
	for (size_t i = 0; i < n && rc == 0; i++) {
		rc = buf_puts(out, "<Object><Key>");
		if (rc == 0)
			rc = wreq_xml_escape(out, keys[i]);
		if (rc == 0)
			rc = buf_puts(out, "</Key></Object>");
	}
	if (rc == 0)
		rc = buf_puts(out, "</Delete>");
	return rc;
}

static bool meta_name_ok(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '-'))
			return false;
	return true;
}

static bool meta_value_ok(const char *s)
{
	size_t n = strlen(s);
	if (n && (s[0] == ' ' || s[n - 1] == ' '))
		return false;
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
			return false;
	return true;
}

int s3_meta_headers(s3_request *r, const s3_meta *meta, size_t n, buf *store,
		    char *err, size_t errsz)
{
	static const char pfx[] = "x-amz-meta-";
	size_t total = 0;
	if (n > S3_META_MAX) {
		snprintf(err, errsz, "%zu metadata entries, at most %d", n,
			 S3_META_MAX);
		return -1;
	}
	if (r->n_hdrs + n > S3_REQ_MAX_HEADERS) {
		snprintf(err, errsz, "too many headers");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (!meta[i].name || !meta_name_ok(meta[i].name)) {
			snprintf(err, errsz,
				 "metadata name \"%.64s\" is not made of "
				 "A-Z a-z 0-9 -",
				 meta[i].name ? meta[i].name : "");
			return -1;
		}
		if (!meta[i].value || !meta_value_ok(meta[i].value)) {
			snprintf(err, errsz,
				 "metadata %.64s: the value must be printable "
				 "ASCII without leading or trailing spaces",
				 meta[i].name);
			return -1;
		}
		for (size_t j = 0; j < i; j++) {
			if (strcasecmp(meta[i].name, meta[j].name) == 0) {
				snprintf(err, errsz,
					 "metadata %.64s given twice",
					 meta[i].name);
				return -1;
			}
		}
		total += strlen(meta[i].name) + strlen(meta[i].value);
	}
	if (total > S3_META_MAX_BYTES) {
		snprintf(err, errsz, "metadata of %zu bytes, at most %d", total,
			 S3_META_MAX_BYTES);
		return -1;
	}
	size_t start = store->len;
	for (size_t i = 0; i < n; i++) {
		if (buf_puts(store, pfx) < 0)
			goto oom;
		for (const char *q = meta[i].name; *q; q++)
			if (buf_putc(store, (char)(*q >= 'A' && *q <= 'Z'
							 ? *q + 32
							 : *q)) < 0)
				goto oom;
		if (buf_append(store, "", 1) < 0)
			goto oom;
	}
	/* pointers only now: store may have moved while growing */
	const char *p = store->data + start;
	for (size_t i = 0; i < n; i++) {
		s3_request_header(r, p, meta[i].value);
		p += strlen(p) + 1;
	}
	return 0;
oom:
	snprintf(err, errsz, "out of memory");
	return -1;
}

void s3_content_md5(const void *data, size_t n, char out[25])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned len = 0;
	EVP_Digest(data, n, md, &len, EVP_md5(), NULL);
	EVP_EncodeBlock((unsigned char *)out, md, (int)len);
}

/* Parses a plain-MD5 ETag ("hex" or hex) into 16 bytes. */
static int etag_md5(const char *etag, unsigned char md[16])
{
	size_t n = strlen(etag);
	if (n == 34 && etag[0] == '"' && etag[33] == '"') {
		etag++;
		n = 32;
	}
	if (n != 32)
		return -1;
	for (int i = 0; i < 16; i++) {
		int hi = hex_val(etag[2 * i]), lo = hex_val(etag[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		md[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

bool s3_etag_matches(const char *etag, const void *data, size_t n)
{
	unsigned char want[16], md[EVP_MAX_MD_SIZE];
	unsigned len = 0;
	if (!etag || etag_md5(etag, want) < 0)
		return false;
	EVP_Digest(data, n, md, &len, EVP_md5(), NULL);
	return len == 16 && !memcmp(md, want, 16);
}

int s3_multipart_etag(const s3_part *parts, size_t n, char out[S3_ETAG_MAX])
{
	if (n == 0)
		return -1;
	unsigned char *all = malloc(16 * n);
	if (!all)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (etag_md5(parts[i].etag, all + 16 * i) < 0) {
			free(all);
			return -1;
		}
	}
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned len = 0;
	EVP_Digest(all, 16 * n, md, &len, EVP_md5(), NULL);
	free(all);
	char hex[33];
	hex_encode(md, 16, hex);
	snprintf(out, S3_ETAG_MAX, "\"%s-%zu\"", hex, n);
	return 0;
}

/* ---- request contexts --------------------------------------------------- */

void wreq_free(struct wreq *w)
{
	buf_free(&w->query);
	buf_free(&w->store);
	buf_free(&w->source);
	buf_free(&w->body);
	if (w->del_parsed)
		s3_delete_result_free(&w->del);
}

/* Sends a memory body with its SHA-256 signed and its Content-MD5. */
void wreq_mem_body(struct wreq *w, const void *p, size_t n)
{
	w->r.upload = http_upload_mem(p, n);
	sigv4_sha256_hex(p, n, w->sha);
	w->r.payload_hash = w->sha;
	s3_content_md5(p, n, w->md5);
	s3_request_header(&w->r, "content-md5", w->md5);
}

int wreq_bad_input(s3_client *c, const s3_request *r, const char *why,
		   s3_err *e)
{
	s3_request_error_from(c, r, EINVAL, "InvalidArgument", 0, why, e);
	return -1;
}

int wreq_add_meta(s3_client *c, struct wreq *w, const s3_meta *meta, size_t n,
		  s3_err *e)
{
	char why[200];
	if (s3_meta_headers(&w->r, meta, n, &w->store, why, sizeof why) < 0)
		return wreq_bad_input(c, &w->r, why, e);
	return 0;
}

/* 2xx checks ---------------------------------------------------------------- */

int wreq_check_etag_header(void *arg, const http_xfer *x, s3_err *e)
{
	struct wreq *w = arg;
	char etag[S3_ETAG_MAX];
	if (!http_xfer_header(x, "etag", etag, sizeof etag) || !etag[0]) {
		s3_request_error_from(w->c, &w->r, EIO, "MalformedReply",
				      x->status, "no ETag in the reply", e);
		return -1;
	}
	if (w->etag_out)
		memcpy(w->etag_out, etag, S3_ETAG_MAX);
	return 0;
}

/* Fills e for a reply whose body could not be parsed; returns -1. */
int wreq_malformed_reply(s3_client *c, const s3_request *r, long status,
			 const char *perr, s3_err *e)
{
	char why[300];
	snprintf(why, sizeof why, "malformed reply from server: %.200s",
		 perr ? perr : "?");
	s3_request_error_from(c, r, EIO, "MalformedReply", status, why, e);
	return -1;
}

/* Turns a parse outcome of a 200 body into 0 or an s3_err. */
int wreq_body_verdict(struct wreq *w, const http_xfer *x, int pr, s3_error *se,
		      char *perr, s3_err *e)
{
	int rc = 0;
	char why[300];
	if (pr == S3XML_ERROR_BODY) {
		const char *code = se->code ? se->code : "InternalError";
		snprintf(why, sizeof why, "%s%s%.150s (HTTP %ld with an error "
			 "body)", code, se->message && se->message[0] ? ": " : "",
			 se->message ? se->message : "", x->status);
		s3_request_error_from(w->c, &w->r, EIO, code, x->status, why,
				      e);
		rc = -1;
	} else if (pr < 0) {
		rc = wreq_malformed_reply(w->c, &w->r, x->status, perr, e);
	}
	s3_error_free(se);
	free(perr);
	return rc;
}

/* ETags as S3 sends them in headers: quoted (Ceph 16 leaves the quotes out
 * of CopyObjectResult and CopyPartResult). */
void wreq_quote_etag(char out[S3_ETAG_MAX], const char *etag)
{
	size_t n = strlen(etag);
	if (n >= 2 && etag[0] == '"' && etag[n - 1] == '"')
		snprintf(out, S3_ETAG_MAX, "%s", etag);
	else
		snprintf(out, S3_ETAG_MAX, "\"%.*s\"", S3_ETAG_MAX - 3, etag);
}

int wreq_check_copy(void *arg, const http_xfer *x, s3_err *e)
{
	struct wreq *w = arg;
	s3_copy_result cr;
	s3_error se = {0};
	char *perr = NULL;
	int pr = s3xml_parse_copy(x->resp_body.data, x->resp_body.len, &cr,
				  &se, &perr);
	if (pr == 0) {
		if (w->etag_out)
			wreq_quote_etag(w->etag_out, cr.etag);
		s3_copy_result_free(&cr);
	}
	return wreq_body_verdict(w, x, pr, &se, perr, e);
}

static int check_delete(void *arg, const http_xfer *x, s3_err *e)
{
	struct wreq *w = arg;
	s3_error se = {0};
	char *perr = NULL;
	if (w->del_parsed) {
		s3_delete_result_free(&w->del);
		w->del_parsed = false;
	}
	int pr = s3xml_parse_delete(x->resp_body.data, x->resp_body.len,
				    &w->del, &se, &perr);
	if (pr == 0)
		w->del_parsed = true;
	return wreq_body_verdict(w, x, pr, &se, perr, e);
}

static int put_errno(long status, const char *code)
{
	return status == 412 ? EEXIST : 0;
}

/* ---- request builders --------------------------------------------------- */

static int build_put(s3_client *c, struct wreq *w, const char *key,
		     const http_upload *body, const s3_put_opts *o, s3_err *e)
{
	static const s3_put_opts none = {0};
	if (!o)
		o = &none;
	w->r = (s3_request){.op = "PUT", .method = "PUT", .key = key,
			    .upload = *body,
			    .timeout_ms = s3_client_data_timeout(c, body->len),
			    .check = wreq_check_etag_header, .check_arg = w,
			    .status_errno = put_errno};
	s3_request_header(&w->r, "content-type",
			  o->content_type ? o->content_type
					  : "application/octet-stream");
	if (o->if_none_match)
		s3_request_header(&w->r, "if-none-match", "*");
	if (body->kind == HTTP_UPLOAD_MEM)
		wreq_mem_body(w, body->mem, (size_t)body->len);
	else if (o->content_md5)
		s3_request_header(&w->r, "content-md5", o->content_md5);
	if (body->kind == HTTP_UPLOAD_NONE)
		return wreq_bad_input(c, &w->r, "no body given", e);
	if (body->len > S3_MAX_PUT_SIZE)
		return wreq_bad_input(c, &w->r,
				 "larger than 5 GiB: use a multipart upload",
				 e);
	return wreq_add_meta(c, w, o->meta, o->n_meta, e);
}

/* ---- blocking operations ------------------------------------------------ */

int wreq_run(s3_client *c, struct wreq *w, unsigned *attempts, s3_err *e)
{
	http_xfer x = {0};
	int rc = s3_request_perform(c, &w->r, &x, attempts, e);
	http_xfer_free(&x);
	return rc;
}

/* After a retried request failed in a way an earlier, lost success would
 * explain: does key now carry the ETag we expected? */
bool wreq_landed(s3_client *c, const char *key, const char *want,
		 char etag[S3_ETAG_MAX])
{
	s3_head_result h;
	s3_err he;
	if (s3_head(c, key, &h, &he) < 0 || strcmp(h.etag, want))
		return false;
	if (etag)
		snprintf(etag, S3_ETAG_MAX, "%s", want);
	return true;
}

int s3_put_object(s3_client *c, const char *key, const http_upload *body,
		  const s3_put_opts *o, char etag[S3_ETAG_MAX], s3_err *e)
{
	struct wreq w = {.c = c, .etag_out = etag};
	int rc = build_put(c, &w, key, body, o, e);
	if (rc == 0)
		rc = wreq_run(c, &w, NULL, e);
	/* If-None-Match retried after a success whose reply was lost (by us,
	 * or by curl on a reused connection that died): the key holding
	 * exactly these bytes counts as ours */
	if (rc < 0 && e->err == EEXIST && body->kind == HTTP_UPLOAD_MEM) {
		char want[S3_ETAG_MAX];
		unsigned char md[EVP_MAX_MD_SIZE];
		unsigned len = 0;
		EVP_Digest(body->mem, (size_t)body->len, md, &len, EVP_md5(),
			   NULL);
		char hex[2 * 16 + 1]; /* an MD5 */
		hex_encode(md, len < 16 ? len : 16, hex);
		snprintf(want, sizeof want, "\"%s\"", hex);
		if (wreq_landed(c, key, want, etag))
			rc = 0;
	}
	wreq_free(&w);
	return rc;
}

int s3_copy_object(s3_client *c, const char *src_key, const char *dst_key,
		   const s3_copy_opts *o, char etag[S3_ETAG_MAX], s3_err *e)
{
	static const s3_copy_opts none = {0};
	if (!o)
		o = &none;
	struct wreq w = {.c = c, .etag_out = etag};
	uint64_t size = o->size ? o->size : S3_MAX_PUT_SIZE;
	w.r = (s3_request){.op = "COPY", .method = "PUT", .key = dst_key,
			   .timeout_ms = s3_client_data_timeout(c, size),
			   /* the server copies before it answers */
			   .wait_ms = s3_client_server_wait_ms(c, 0, size),
			   .check = wreq_check_copy, .check_arg = &w};
	int rc = 0;
	if (s3_copy_source(&w.source, s3_client_settings(c)->bucket,
			   src_key) < 0)
		rc = wreq_bad_input(c, &w.r, "out of memory", e);
	s3_request_header(&w.r, "x-amz-copy-source", buf_cstr(&w.source));
	if (o->src_if_match && o->src_if_match[0]) {
		s3_request_header(&w.r, "x-amz-copy-source-if-match",
				  o->src_if_match);
		/* the name Ceph 16 reads (it ignores the AWS one) */
		s3_request_header(&w.r, "x-amz-copy-if-match", o->src_if_match);
	}
	if (o->directive == S3_METADATA_REPLACE) {
		s3_request_header(&w.r, "x-amz-metadata-directive", "REPLACE");
		s3_request_header(&w.r, "content-type",
				  o->content_type ? o->content_type
						  : "application/octet-stream");
		if (rc == 0)
			rc = wreq_add_meta(c, &w, o->meta, o->n_meta, e);
	} else {
		s3_request_header(&w.r, "x-amz-metadata-directive", "COPY");
	}
	if (rc == 0)
		rc = wreq_run(c, &w, NULL, e);
	wreq_free(&w);
	return rc;
}

int s3_delete_object(s3_client *c, const char *key, s3_err *e)
{
	struct wreq w = {.c = c};
	w.r = (s3_request){.op = "DELETE", .method = "DELETE", .key = key};
	int rc = wreq_run(c, &w, NULL, e);
	wreq_free(&w);
	return rc;
}

/* ---- DeleteObjects ------------------------------------------------------ */

static void status_set(s3_delete_status *st, int err, const char *code,
		       const char *msg)
{
	st->err = err;
	snprintf(st->code, sizeof st->code, "%.63s", code ? code : "");
	snprintf(st->msg, sizeof st->msg, "%.127s", msg ? msg : "");
}

static int code_errno(const char *code)
{
	if (strcmp(code, "AccessDenied") == 0)
		return EACCES;
	if (strcmp(code, "NoSuchKey") == 0 || strcmp(code, "NoSuchBucket") == 0)
		return ENOENT;
	return EIO;
}

/* One DeleteObjects round over the XML-safe keys idx[0..n): st updated;
 * idx keeps the keys to send again (transient failures). */
static int delete_round(s3_client *c, const char *const *keys, size_t *idx,
			size_t *n, s3_delete_status *st, s3_err *e)
{
	const char **batch = malloc(*n * sizeof *batch);
	if (!batch) {
		memset(e, 0, sizeof *e);
		e->err = ENOMEM;
		snprintf(e->msg, sizeof e->msg, "DELETE OBJECTS: out of memory");
		return -1;
	}
	for (size_t i = 0; i < *n; i++)
		batch[i] = keys[idx[i]];
	struct wreq w = {.c = c};
	char what[300];
	if (*n > 1)
		snprintf(what, sizeof what, "%.200s (and %zu more keys)",
			 keys[idx[0]], *n - 1);
	else
		snprintf(what, sizeof what, "%.200s", keys[idx[0]]);
	w.r = (s3_request){.op = "DELETE OBJECTS", .method = "POST",
			   .what = what, .query = "delete",
			   /* the server deletes every key before it answers */
			   .wait_ms = s3_client_server_wait_ms(c, *n, 0),
			   .check = check_delete, .check_arg = &w};
	s3_delete_body(&w.body, batch, *n, true);
	s3_request_header(&w.r, "content-type", "application/xml");
	wreq_mem_body(&w, w.body.data, w.body.len);
	int rc = wreq_run(c, &w, NULL, e);
	if (rc == 0) {
		for (size_t i = 0; i < *n; i++)
			status_set(&st[idx[i]], 0, NULL, NULL);
		size_t again = 0;
		for (size_t k = 0; k < w.del.n_errors; k++) {
			const s3_delete_entry *d = &w.del.errors[k];
			bool found = false;
			for (size_t i = 0; i < *n; i++) {
				if (strcmp(keys[idx[i]], d->key) != 0)
					continue;
				found = true;
				status_set(&st[idx[i]], code_errno(d->code),
					   d->code, d->message);
			}
			if (!found)
				log_warn("DELETE OBJECTS: the server reported "
					 "an error for a key not sent: %s",
					 d->key);
		}
		for (size_t i = 0; i < *n; i++)
			if (st[idx[i]].err &&
			    retry_is_transient(0, 0, st[idx[i]].code))
				idx[again++] = idx[i];
		*n = again;
	}
	wreq_free(&w);
	free(batch);
	return rc;
}

int s3_delete_objects(s3_client *c, const char *const *keys, size_t n,
		      s3_delete_status *st, size_t *n_failed, s3_err *e)
{
	s3_delete_status *own = NULL;
	size_t *idx = NULL;
	int rc = 0;
	if (n_failed)
		*n_failed = 0;
	if (n == 0)
		return 0;
	if (n > S3_DELETE_MAX) {
		s3_request r = {.op = "DELETE OBJECTS", .what = keys[0]};
		return wreq_bad_input(c, &r, "more than 1000 keys in one request",
				 e);
	}
	if (!st)
		st = own = calloc(n, sizeof *st);
	idx = malloc(n * sizeof *idx);
	if (!st || !idx) {
		memset(e, 0, sizeof *e);
		e->err = ENOMEM;
		snprintf(e->msg, sizeof e->msg, "DELETE OBJECTS: out of memory");
		rc = -1;
		goto out;
	}
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		status_set(&st[i], 0, NULL, NULL);
		if (s3_key_xml_safe(keys[i])) {
			idx[m++] = i;
			continue;
		}
		s3_err ke;
		if (s3_delete_object(c, keys[i], &ke) < 0)
			status_set(&st[i], ke.err, ke.code, ke.msg);
	}
	retry_policy pol = s3_client_retry_policy(c);
	for (unsigned round = 1; m > 0; round++) {
		rc = delete_round(c, keys, idx, &m, st, e);
		if (rc < 0 || m == 0 || round >= pol.max_attempts)
			break;
		log_debug("DELETE OBJECTS: %zu keys to send again", m);
		unsigned ms = s3_client_backoff_ms(c, round);
		struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
	if (rc == 0 && n_failed)
		for (size_t i = 0; i < n; i++)
			*n_failed += st[i].err != 0;
out:
	free(idx);
	free(own);
	return rc;
}

/* ---- asynchronous forms ------------------------------------------------- */

int wreq_prepared(s3_client *c, struct wreq *w, int rc, http_xfer *x, s3_err *e)
{
	if (rc == 0)
		rc = s3_request_prepare(c, &w->r, x, e);
	wreq_free(w);
	return rc;
}

int s3_prepare_put_object(s3_client *c, const char *key,
			  const http_upload *body, const s3_put_opts *o,
			  http_xfer *x, s3_err *e)
{
	struct wreq w = {.c = c};
	return wreq_prepared(c, &w, build_put(c, &w, key, body, o, e), x, e);
}

int s3_classify_upload(s3_client *c, s3_upload_op op, const char *key,
		       const http_xfer *x, unsigned attempt,
		       char etag[S3_ETAG_MAX], s3_err *e, bool *retry,
		       unsigned *retry_after_ms)
{
	struct wreq w = {.c = c, .etag_out = etag};
	w.r = (s3_request){.method = "PUT", .key = key, .check_arg = &w};
	switch (op) {
	case S3_OP_PUT_OBJECT:
		w.r.op = "PUT";
		w.r.check = wreq_check_etag_header;
		w.r.status_errno = put_errno;
		break;
	case S3_OP_PUT_PART:
		w.r.op = "UPLOAD PART";
		w.r.check = wreq_check_etag_header;
		break;
	case S3_OP_PART_COPY:
		w.r.op = "UPLOAD PART COPY";
		w.r.check = wreq_check_copy;
		/* its budget, as when prepared (size unknown here: the most) */
		w.r.wait_ms = s3_client_server_wait_ms(c, 0, S3_MAX_PART_SIZE);
		break;
	}
	int rc = s3_request_classify(c, &w.r, x, attempt, e, retry,
				     retry_after_ms);
	wreq_free(&w);
	return rc;
}
