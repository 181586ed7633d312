/*
 * multipart: the multipart uploads of S3 over the write requests of
 * upload.c (struct wreq and its helpers, upload-internal.h): create, put a
 * part (from memory or a file), copy a byte range of another object as a
 * part (UploadPartCopy), complete, abort, and list the uploads in
 * progress; the part and part-copy requests also in asynchronous form
 * (signed into an http_xfer for the caller's loop; s3_classify_upload in
 * upload.c judges their replies).
 *
 * Failures that an earlier, lost success would explain are resolved, not
 * reported: a complete that failed after a retry (or with NoSuchUpload)
 * succeeded if the object now carries the expected multipart ETag; an
 * abort answered NoSuchUpload after a retry is done.  Ceph 16 decodes the copy source of part copies twice:
 * a part copy of a key with '%' that is not found although the key
 * exists sets S3_QUIRK_COPY_SOURCE_DECODED_TWICE on the client, and from
 * then on the source is encoded twice.  Listing the uploads works around
 * Ceph's raw <NextKeyMarker> (neutral_next_marker, markers_from_last).
 */
#include "s3/upload.h"
#include "s3/upload-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3/uri.h"
#include "s3/xml.h"
#include "util/log.h"

static void query_param(buf *q, const char *name, const char *value)
{
	if (q->len)
		buf_putc(q, '&');
	buf_puts(q, name);
	if (value) {
		buf_putc(q, '=');
		uri_encode(q, value, strlen(value), false);
	}
}

static void part_query(struct wreq *w, unsigned part, const char *upload_id)
{
	char n[16];
	snprintf(n, sizeof n, "%u", part);
	query_param(&w->query, "partNumber", n);
	query_param(&w->query, "uploadId", upload_id);
	w->r.query = buf_cstr(&w->query);
}

static int check_complete(void *arg, const http_xfer *x, s3_err *e)
{
	struct wreq *w = arg;
	char *etag = NULL;
	s3_error se = {0};
	char *perr = NULL;
	int pr = s3xml_parse_complete(x->resp_body.data, x->resp_body.len,
				      &etag, &se, &perr);
	if (pr == 0 && w->etag_out)
		snprintf(w->etag_out, S3_ETAG_MAX, "%s",
			 etag && etag[0] ? etag : "");
	if (pr == 0 && w->etag_out && w->etag_out[0])
		wreq_quote_etag(w->etag_out, etag);
	free(etag);
	return wreq_body_verdict(w, x, pr, &se, perr, e);
}

static int build_part(s3_client *c, struct wreq *w, const char *key,
		      const char *upload_id, unsigned part,
		      const http_upload *body, const char *content_md5,
		      s3_err *e)
{
	w->r = (s3_request){.op = "UPLOAD PART", .method = "PUT", .key = key,
			    .upload = *body,
			    .timeout_ms = s3_client_data_timeout(c, body->len),
			    .check = wreq_check_etag_header, .check_arg = w};
	part_query(w, part, upload_id);
	if (body->kind == HTTP_UPLOAD_MEM)
		wreq_mem_body(w, body->mem, (size_t)body->len);
	else if (content_md5)
		s3_request_header(&w->r, "content-md5", content_md5);
	if (body->kind == HTTP_UPLOAD_NONE)
		return wreq_bad_input(c, &w->r, "no body given", e);
	if (part < 1 || part > S3_MAX_PARTS)
		return wreq_bad_input(c, &w->r, "part number outside 1..10000", e);
	if (body->len > S3_MAX_PART_SIZE)
		return wreq_bad_input(c, &w->r, "part larger than 5 GiB", e);
	return 0;
}

static int build_part_copy(s3_client *c, struct wreq *w, const char *src_key,
			   uint64_t first, uint64_t last,
			   const char *src_if_match, const char *key,
			   const char *upload_id, unsigned part, s3_err *e)
{
	w->r = (s3_request){.op = "UPLOAD PART COPY", .method = "PUT",
			    .key = key, .check = wreq_check_copy, .check_arg = w};
	part_query(w, part, upload_id);
	if (s3_copy_source(&w->source, s3_client_settings(c)->bucket,
			   src_key) < 0)
		return wreq_bad_input(c, &w->r, "out of memory", e);
	if ((s3_client_quirks(c) & S3_QUIRK_COPY_SOURCE_DECODED_TWICE) &&
	    strchr(src_key, '%')) {
		buf twice = BUF_INIT;
		if (uri_encode(&twice, w->source.data, w->source.len, true) < 0)
			return wreq_bad_input(c, &w->r, "out of memory", e);
		buf_free(&w->source);
		w->source = twice;
	}
	s3_request_header(&w->r, "x-amz-copy-source", buf_cstr(&w->source));
	snprintf(w->range, sizeof w->range, "bytes=%" PRIu64 "-%" PRIu64,
		 first, last);
	s3_request_header(&w->r, "x-amz-copy-source-range", w->range);
	if (src_if_match && src_if_match[0])
		s3_request_header(&w->r, "x-amz-copy-source-if-match",
				  src_if_match);
	if (last < first || last - first + 1 > S3_MAX_PART_SIZE)
		return wreq_bad_input(c, &w->r, "copy range empty or above 5 GiB",
				 e);
	if (part < 1 || part > S3_MAX_PARTS)
		return wreq_bad_input(c, &w->r, "part number outside 1..10000", e);
	w->r.timeout_ms = s3_client_data_timeout(c, last - first + 1);
	/* the server copies before it answers */
	w->r.wait_ms = s3_client_server_wait_ms(c, 0, last - first + 1);
	return 0;
}

/* Sends w (when rc is 0) and parses its reply body with parse; a body
 * parse rejects is a malformed reply.  Frees w.  Returns 0 or -1. */
static int perform_parsed(s3_client *c, struct wreq *w, int rc,
			  int (*parse)(void *arg, struct wreq *w,
				       http_xfer *x, char **perr),
			  void *arg, unsigned *attempts, s3_err *e)
{
	http_xfer x = {0};
	if (rc == 0)
		rc = s3_request_perform(c, &w->r, &x, attempts, e);
	char *perr = NULL;
	if (rc == 0 && parse(arg, w, &x, &perr) < 0)
		rc = wreq_malformed_reply(c, &w->r, x.status, perr, e);
	free(perr);
	http_xfer_free(&x);
	wreq_free(w);
	return rc;
}

static int parse_initiate(void *arg, struct wreq *w, http_xfer *x,
			  char **perr)
{
	(void)w;
	return s3xml_parse_initiate(x->resp_body.data, x->resp_body.len, arg,
				    perr);
}

/* How far, in the server's clock, an upload a lost create reply started
 * may be from the kept one: before it (a reset reply), or after it (an
 * attempt abandoned for silence that the server carried out late). */
#define LOST_CREATE_WINDOW 300

void s3_mpu_abort_lost(s3_client *c, const char *key, const char *keep)
{
	s3_uploads_result r = {0};
	s3_err e;
	if (s3_list_multipart_uploads(c, key, NULL, NULL, 1000, &r, &e) < 0) {
		log_debug("multipart upload of %s: cannot list its uploads: %s",
			  key, e.msg);
		return;
	}
	size_t klen = strlen(key);
	const s3_upload *kept = NULL;
	for (size_t i = 0; i < r.n_uploads; i++)
		if (!strcmp(r.uploads[i].upload_id, keep))
			kept = &r.uploads[i];
	unsigned n = 0;
	for (size_t i = 0; kept && i < r.n_uploads; i++) {
		const s3_upload *u = &r.uploads[i];
		time_t a = u->initiated.tv_sec, k = kept->initiated.tv_sec;
		if (u == kept || u->key_len != klen || memcmp(u->key, key, klen) ||
		    (a < k ? k - a : a - k) > LOST_CREATE_WINDOW)
			continue;
		if (s3_mpu_abort(c, key, u->upload_id, &e) == 0 ||
		    e.err == ENOENT)
			n++;
	}
	if (n)
		log_info("multipart upload of %s: aborted %u upload(s) that "
			 "create attempts whose replies were lost had started",
			 key, n);
	s3_uploads_result_free(&r);
}

int s3_mpu_create(s3_client *c, const char *key, const s3_put_opts *o,
		  char **upload_id, unsigned *attempts_out, s3_err *e)
{
	static const s3_put_opts none = {0};
	if (!o)
		o = &none;
	*upload_id = NULL;
	struct wreq w = {.c = c};
	w.r = (s3_request){.op = "CREATE MULTIPART UPLOAD", .method = "POST",
			   .key = key, .query = "uploads",
			   .fresh_connect = true};
	s3_request_header(&w.r, "content-type",
			  o->content_type ? o->content_type
					  : "application/octet-stream");
	int rc = wreq_add_meta(c, &w, o->meta, o->n_meta, e);
	unsigned attempts = 0;
	rc = perform_parsed(c, &w, rc, parse_initiate, upload_id, &attempts, e);
	if (rc == 0 && attempts > 1)
		s3_mpu_abort_lost(c, key, *upload_id);
	if (attempts_out)
		*attempts_out = attempts;
	return rc;
}

int s3_mpu_put_part(s3_client *c, const char *key, const char *upload_id,
		    unsigned part, const http_upload *body,
		    const char *content_md5, char etag[S3_ETAG_MAX],
		    s3_err *e)
{
	struct wreq w = {.c = c, .etag_out = etag};
	int rc = build_part(c, &w, key, upload_id, part, body, content_md5, e);
	if (rc == 0)
		rc = wreq_run(c, &w, NULL, e);
	wreq_free(&w);
	return rc;
}

int s3_upload_part_copy(s3_client *c, const char *src_key, uint64_t first,
			uint64_t last, const char *src_if_match,
			const char *key, const char *upload_id, unsigned part,
			char etag[S3_ETAG_MAX], s3_err *e)
{
	struct wreq w = {.c = c, .etag_out = etag};
	int rc = build_part_copy(c, &w, src_key, first, last, src_if_match,
				 key, upload_id, part, e);
	if (rc == 0)
		rc = wreq_run(c, &w, NULL, e);
	wreq_free(&w);
	/* Ceph 16 decodes the copy source twice: a source key with '%' is
	 * not found although it exists.  Learn that once, then encode twice. */
	s3_head_result h;
	s3_err he;
	if (rc < 0 && strcmp(e->code, "NoSuchKey") == 0 &&
	    strchr(src_key, '%') &&
	    !(s3_client_quirks(c) & S3_QUIRK_COPY_SOURCE_DECODED_TWICE) &&
	    s3_head(c, src_key, &h, &he) == 0) {
		log_info("the server decodes x-amz-copy-source of part copies "
			 "twice (Ceph 16): encoding it twice from now on");
		s3_client_add_quirks(c, S3_QUIRK_COPY_SOURCE_DECODED_TWICE);
		struct wreq w2 = {.c = c, .etag_out = etag};
		rc = build_part_copy(c, &w2, src_key, first, last,
				     src_if_match, key, upload_id, part, e);
		if (rc == 0)
			rc = wreq_run(c, &w2, NULL, e);
		wreq_free(&w2);
	}
	return rc;
}

int s3_mpu_complete(s3_client *c, const char *key, const char *upload_id,
		    const s3_part *parts, size_t n, char etag[S3_ETAG_MAX],
		    s3_err *e)
{
	struct wreq w = {.c = c};
	w.r = (s3_request){.op = "COMPLETE MULTIPART UPLOAD", .method = "POST",
			   .key = key,
			   /* S3 may take minutes to assemble many parts; AWS
			    * sends whitespace meanwhile, RGW nothing: the
			    * first byte may take 20 ms more per part */
			   .timeout_ms = s3_client_data_timeout(c, 0) + 180000,
			   .wait_ms = s3_client_server_wait_ms(c, n, 0),
			   .check = check_complete, .check_arg = &w};
	query_param(&w.query, "uploadId", upload_id);
	w.r.query = buf_cstr(&w.query);
	bool ordered = n > 0 && n <= S3_MAX_PARTS;
	int rc = buf_puts(&w.body, "<CompleteMultipartUpload xmlns=\"http://"
				   "s3.amazonaws.com/doc/2006-03-01/\">");
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (parts[i].number < 1 || parts[i].number > S3_MAX_PARTS ||
		    (i && parts[i].number <= parts[i - 1].number))
			ordered = false;
		rc = buf_printf(&w.body,
				"<Part><PartNumber>%u</PartNumber><ETag>",
				parts[i].number);
		if (rc == 0)
			rc = wreq_xml_escape(&w.body, parts[i].etag);
		if (rc == 0)
			rc = buf_puts(&w.body, "</ETag></Part>");
	}
	if (rc == 0)
		rc = buf_puts(&w.body, "</CompleteMultipartUpload>");
	s3_request_header(&w.r, "content-type", "application/xml");
	wreq_mem_body(&w, w.body.data, w.body.len);
	if (rc < 0)
		rc = wreq_bad_input(c, &w.r, "out of memory", e);
	else if (!ordered)
		rc = wreq_bad_input(c, &w.r,
			       "parts must be 1..10000 in ascending order", e);
	unsigned attempts = 0;
	char got[S3_ETAG_MAX] = "";
	w.etag_out = got;
	if (rc == 0)
		rc = wreq_run(c, &w, &attempts, e);
	if (rc == 0 && !got[0]) {
		/* Ceph 16 answers <ETag></ETag>: the ETag is the one S3
		 * defines for the parts, or, for parts that are no plain
		 * MD5s, what the object now carries */
		s3_head_result h;
		s3_err he;
		if (s3_multipart_etag(parts, n, got) < 0 &&
		    s3_head(c, key, &h, &he) == 0)
			snprintf(got, sizeof got, "%s", h.etag);
	}
	if (rc == 0 && etag)
		snprintf(etag, S3_ETAG_MAX, "%s", got);
	/* A retry after a completion whose reply was lost finds the upload
	 * gone: NoSuchUpload on AWS, 500 InternalError ("completion already
	 * in progress") on Ceph 16 for an upload id it no longer knows.  curl
	 * itself resends a request whose reused connection died without a
	 * reply, so even a first attempt can meet NoSuchUpload that way. */
	if (rc < 0 && e->err != EACCES &&
	    (attempts > 1 || strcmp(e->code, "NoSuchUpload") == 0)) {
		char want[S3_ETAG_MAX];
		if (s3_multipart_etag(parts, n, want) == 0 &&
		    wreq_landed(c, key, want, etag)) {
			log_debug("COMPLETE %s: an earlier attempt completed it",
				  key);
			rc = 0;
		}
	}
	wreq_free(&w);
	return rc;
}

/* A server without AbortMultipartUpload: said once per client, then no
 * more requests (the parts stay on the server). */
static int abort_unsupported(s3_client *c, const char *key, s3_err *e)
{
	bool first = !(s3_client_add_quirks(c, S3_QUIRK_NO_ABORT_MPU) &
		       S3_QUIRK_NO_ABORT_MPU);
	if (first)
		log_warn("the server does not implement AbortMultipartUpload "
			 "(%s): the parts of uploads ckptfs gives up on stay "
			 "on the server; their objects are not affected "
			 "(doc/portability.md)",
			 e->code[0] ? e->code : "not supported");
	memset(e, 0, sizeof *e);
	e->err = EOPNOTSUPP;
	snprintf(e->code, sizeof e->code, "NotImplemented");
	snprintf(e->msg, sizeof e->msg,
		 "ABORT MULTIPART UPLOAD %s: not supported by the server", key);
	return -1;
}

int s3_mpu_abort(s3_client *c, const char *key, const char *upload_id,
		 s3_err *e)
{
	if (s3_client_quirks(c) & S3_QUIRK_NO_ABORT_MPU)
		return abort_unsupported(c, key, e);
	struct wreq w = {.c = c};
	w.r = (s3_request){.op = "ABORT MULTIPART UPLOAD", .method = "DELETE",
			   .key = key};
	query_param(&w.query, "uploadId", upload_id);
	w.r.query = buf_cstr(&w.query);
	unsigned attempts = 0;
	int rc = wreq_run(c, &w, &attempts, e);
	if (rc < 0 && attempts > 1 && strcmp(e->code, "NoSuchUpload") == 0)
		rc = 0; /* an earlier attempt's reply was lost */
	wreq_free(&w);
	if (rc < 0 && (e->http_status == 405 || e->http_status == 501))
		return abort_unsupported(c, key, e);
	return rc;
}

/*
 * Ceph 16 sends <NextKeyMarker> raw while it url-encodes <Key> (and AWS
 * encodes both), so the marker cannot be decoded reliably.  Without a
 * delimiter the next markers are the last listed key and upload id, which
 * markers_from_last takes from the decoded entries; the text of
 * <NextKeyMarker> is replaced by a placeholder that decodes everywhere.
 */
static void neutral_next_marker(buf *out, const buf *in)
{
	static const char open[] = "<NextKeyMarker>";
	static const char close[] = "</NextKeyMarker>";
	const char *body = buf_cstr(in);
	const char *a = strstr(body, open);
	const char *b = a ? strstr(a, close) : NULL;
	buf_reset(out);
	if (!b || b == a + sizeof open - 1) {
		buf_append(out, in->data ? in->data : "", in->len);
		return;
	}
	buf_append(out, body, (size_t)(a - body) + sizeof open - 1);
	buf_putc(out, '-');
	buf_append(out, b, in->len - (size_t)(b - body));
}

static int markers_from_last(s3_uploads_result *r)
{
	free(r->next_key_marker);
	free(r->next_upload_id_marker);
	r->next_key_marker = r->next_upload_id_marker = NULL;
	r->next_key_marker_len = 0;
	if (!r->truncated)
		return 0;
	if (!r->n_uploads)
		return -1; /* truncated yet empty: we could not go on */
	const s3_upload *u = &r->uploads[r->n_uploads - 1];
	r->next_key_marker = malloc(u->key_len + 1);
	r->next_upload_id_marker = strdup(u->upload_id);
	if (!r->next_key_marker || !r->next_upload_id_marker)
		return -1;
	memcpy(r->next_key_marker, u->key, u->key_len + 1);
	r->next_key_marker_len = u->key_len;
	return 0;
}

static int parse_uploads(void *arg, struct wreq *w, http_xfer *x,
			 char **perr)
{
	s3_uploads_result *out = arg;
	/* Ceph 16 encodes the keys as asked but does not say so with
	 * <EncodingType>: decode on the strength of the request */
	neutral_next_marker(&w->body, &x->resp_body);
	if (s3xml_parse_uploads(w->body.data, w->body.len, true, out, perr) <
	    0)
		return -1;
	return markers_from_last(out);
}

int s3_list_multipart_uploads(s3_client *c, const char *prefix,
			      const char *key_marker,
			      const char *upload_id_marker,
			      unsigned max_uploads, s3_uploads_result *out,
			      s3_err *e)
{
	char mu[16];
	snprintf(mu, sizeof mu, "%u",
		 max_uploads && max_uploads < 1000 ? max_uploads : 1000);
	memset(out, 0, sizeof *out);
	struct wreq w = {.c = c};
	w.r = (s3_request){.op = "LIST MULTIPART UPLOADS", .method = "GET",
			   .what = prefix ? prefix : ""};
	query_param(&w.query, "encoding-type", "url");
	if (key_marker && key_marker[0])
		query_param(&w.query, "key-marker", key_marker);
	query_param(&w.query, "max-uploads", mu);
	query_param(&w.query, "prefix", prefix ? prefix : "");
	if (upload_id_marker && upload_id_marker[0])
		query_param(&w.query, "upload-id-marker", upload_id_marker);
	query_param(&w.query, "uploads", NULL);
	w.r.query = buf_cstr(&w.query);
	w.r.timeout_ms = s3_client_data_timeout(c, 0) / 4;
	return perform_parsed(c, &w, 0, parse_uploads, out, NULL, e);
}

int s3_prepare_put_part(s3_client *c, const char *key, const char *upload_id,
			unsigned part, const http_upload *body,
			const char *content_md5, http_xfer *x, s3_err *e)
{
	struct wreq w = {.c = c};
	return wreq_prepared(c, &w,
			build_part(c, &w, key, upload_id, part, body,
				   content_md5, e),
			x, e);
}

int s3_prepare_part_copy(s3_client *c, const char *src_key, uint64_t first,
			 uint64_t last, const char *src_if_match,
			 const char *key, const char *upload_id, unsigned part,
			 http_xfer *x, s3_err *e)
{
	struct wreq w = {.c = c};
	return wreq_prepared(c, &w,
			build_part_copy(c, &w, src_key, first, last,
					src_if_match, key, upload_id, part, e),
			x, e);
}
