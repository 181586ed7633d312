/*
 * s3xml, write side: the replies of the multipart upload, copy and delete
 * requests (InitiateMultipartUploadResult, CompleteMultipartUploadResult,
 * CopyObjectResult/CopyPartResult, DeleteResult,
 * ListMultipartUploadsResult).  Each document type is an xml_spec table
 * entry driven by the engine in xml.c (design there; shared pieces in
 * xml-internal.h).
 *
 * Invariants, on top of those of xml.c.
 *  - CompleteMultipartUpload, CopyObject, UploadPartCopy and DeleteObjects
 *    may answer 200 with an <Error> document: their parsers accept that
 *    root, return S3XML_ERROR_BODY and hand the error out through *s3err,
 *    leaving the normal result empty.
 *  - Required fields (UploadId, ETag, the Key of every Deleted and Error
 *    entry, the Key/UploadId/Initiated of every Upload, NextKeyMarker when
 *    truncated) are checked when their element closes; a reply lacking one
 *    fails as a whole.
 */
#include "s3/xml.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "s3/xml-internal.h"

/*
 * Runs a parser whose 200 reply may be an <Error> document: on
 * S3XML_ERROR_BODY the error lands in *s3err (or is dropped when s3err is
 * NULL) and the normal result stays empty.
 */
static int xml_run_or_error(const xml_spec *spec, void *state, s3_error *s3err,
			    const char *body, size_t len, char **err)
{
	s3_error tmp;
	s3_error *e = s3err ? s3err : &tmp;
	memset(e, 0, sizeof *e);
	int r = xml_run(spec, state, e, body, len, err);
	if (r != S3XML_ERROR_BODY || !s3err)
		s3_error_free(e);
	return r;
}

/* ---- InitiateMultipartUploadResult -------------------------------------- */

static int initiate_close(xml_ctx *x, const char *path, const char *text,
			  size_t len)
{
	char **id = x->state;
	if (strcmp(path, "UploadId") == 0)
		return xml_take_str(x, id, "UploadId", text, len);
	if (path[0] == '\0' && !(*id && (*id)[0]))
		return xml_fail(x, "no <UploadId>");
	return 0;
}

static const xml_spec initiate_spec = {"InitiateMultipartUploadResult", NULL,
				       NULL, initiate_close};

int s3xml_parse_initiate(const char *body, size_t len, char **upload_id,
			 char **err)
{
	char *id = NULL;
	*upload_id = NULL;
	if (xml_run(&initiate_spec, &id, NULL, body, len, err) < 0) {
		free(id);
		return -1;
	}
	*upload_id = id;
	return 0;
}

/* ---- CompleteMultipartUploadResult, CopyObjectResult, CopyPartResult ---- */

static int complete_close(xml_ctx *x, const char *path, const char *text,
			  size_t len)
{
	char **etag = x->state;
	if (strcmp(path, "ETag") == 0)
		return xml_take_str(x, etag, "ETag", text, len);
	if (path[0] == '\0' && !*etag)
		return xml_fail(x, "no <ETag>");
	return 0;
}

static const xml_spec complete_spec = {"CompleteMultipartUploadResult", NULL,
				       NULL, complete_close};

int s3xml_parse_complete(const char *body, size_t len, char **etag,
			 s3_error *s3err, char **err)
{
	char *tag = NULL;
	*etag = NULL;
	int r = xml_run_or_error(&complete_spec, &tag, s3err, body, len, err);
	if (r == 0)
		*etag = tag;
	else
		free(tag);
	return r;
}

typedef struct copy_state {
	s3_copy_result r;
	bool have_mtime;
} copy_state;

static int copy_close(xml_ctx *x, const char *path, const char *text,
		      size_t len)
{
	copy_state *st = x->state;
	if (strcmp(path, "ETag") == 0)
		return xml_take_str(x, &st->r.etag, "ETag", text, len);
	if (strcmp(path, "LastModified") == 0) {
		if (st->have_mtime)
			return xml_fail(x, "duplicate <LastModified>");
		st->have_mtime = true;
		return xml_take_time(x, &st->r.mtime, "LastModified", text);
	}
	if (path[0] == '\0' && !st->r.etag)
		return xml_fail(x, "no <ETag>");
	return 0;
}

static const xml_spec copy_spec = {"CopyObjectResult", "CopyPartResult", NULL,
				   copy_close};

int s3xml_parse_copy(const char *body, size_t len, s3_copy_result *out,
		     s3_error *s3err, char **err)
{
	copy_state st = {{NULL, {0, 0}}, false};
	memset(out, 0, sizeof *out);
	int r = xml_run_or_error(&copy_spec, &st, s3err, body, len, err);
	if (r == 0)
		*out = st.r;
	else
		s3_copy_result_free(&st.r);
	return r;
}

void s3_copy_result_free(s3_copy_result *r)
{
	if (!r)
		return;
	free(r->etag);
	memset(r, 0, sizeof *r);
}

/* ---- DeleteResult -------------------------------------------------------- */

typedef struct delete_state {
	s3_delete_result r;
	size_t del_cap, err_cap;
} delete_state;

static int delete_open(xml_ctx *x, const char *path)
{
	delete_state *st = x->state;
	s3_delete_result *r = &st->r;
	s3_delete_entry *a;
	if (strcmp(path, "Deleted") == 0) {
		a = xml_grow_array(r->deleted, &st->del_cap, r->n_deleted,
				   sizeof *a);
		if (!a)
			return xml_oom(x);
		r->deleted = a;
		memset(&a[r->n_deleted++], 0, sizeof *a);
	} else if (strcmp(path, "Error") == 0) {
		a = xml_grow_array(r->errors, &st->err_cap, r->n_errors,
				   sizeof *a);
		if (!a)
			return xml_oom(x);
		r->errors = a;
		memset(&a[r->n_errors++], 0, sizeof *a);
	}
	return 0;
}

static int delete_entry_check(xml_ctx *x, const s3_delete_entry *e,
			      bool is_error)
{
	if (!e->key)
		return xml_fail(x, "<%s> without <Key>",
				is_error ? "Error" : "Deleted");
	if (is_error && !e->code)
		return xml_fail(x, "<Error> without <Code>");
	return 0;
}

static int delete_close(xml_ctx *x, const char *path, const char *text,
			size_t len)
{
	delete_state *st = x->state;
	s3_delete_result *r = &st->r;
	s3_delete_entry *d =
	    r->n_deleted ? &r->deleted[r->n_deleted - 1] : NULL;
	s3_delete_entry *e = r->n_errors ? &r->errors[r->n_errors - 1] : NULL;
	if (strcmp(path, "Deleted/Key") == 0)
		return xml_take_str(x, &d->key, "Key", text, len);
	if (strcmp(path, "Deleted") == 0)
		return delete_entry_check(x, d, false);
	if (strcmp(path, "Error/Key") == 0)
		return xml_take_str(x, &e->key, "Key", text, len);
	if (strcmp(path, "Error/Code") == 0)
		return xml_take_str(x, &e->code, "Code", text, len);
	if (strcmp(path, "Error/Message") == 0)
		return xml_take_str(x, &e->message, "Message", text, len);
	if (strcmp(path, "Error") == 0)
		return delete_entry_check(x, e, true);
	return 0;
}

static const xml_spec delete_spec = {"DeleteResult", NULL, delete_open,
				     delete_close};

int s3xml_parse_delete(const char *body, size_t len, s3_delete_result *out,
		       s3_error *s3err, char **err)
{
	delete_state st = {{NULL, 0, NULL, 0}, 0, 0};
	memset(out, 0, sizeof *out);
	int r = xml_run_or_error(&delete_spec, &st, s3err, body, len, err);
	if (r == 0)
		*out = st.r;
	else
		s3_delete_result_free(&st.r);
	return r;
}

static void delete_entries_free(s3_delete_entry *a, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(a[i].key);
		free(a[i].code);
		free(a[i].message);
	}
	free(a);
}

void s3_delete_result_free(s3_delete_result *r)
{
	if (!r)
		return;
	delete_entries_free(r->deleted, r->n_deleted);
	delete_entries_free(r->errors, r->n_errors);
	memset(r, 0, sizeof *r);
}

/* ---- ListMultipartUploadsResult ----------------------------------------- */

enum { U_KEY = 1, U_ID = 2, U_TIME = 4 };

typedef struct uploads_state {
	s3_uploads_result r;
	size_t cap;
	bool decode;
	bool have_truncated;
	unsigned seen; /* U_* fields of the current Upload */
} uploads_state;

static int uploads_open(xml_ctx *x, const char *path)
{
	uploads_state *st = x->state;
	s3_uploads_result *r = &st->r;
	if (strcmp(path, "Upload") != 0)
		return 0;
	s3_upload *a =
	    xml_grow_array(r->uploads, &st->cap, r->n_uploads, sizeof *a);
	if (!a)
		return xml_oom(x);
	r->uploads = a;
	memset(&a[r->n_uploads++], 0, sizeof *a);
	st->seen = 0;
	return 0;
}

static int upload_field(xml_ctx *x, const char *name, const char *text,
			size_t len)
{
	uploads_state *st = x->state;
	s3_upload *u = &st->r.uploads[st->r.n_uploads - 1];
	unsigned f = strcmp(name, "Key") == 0	      ? U_KEY
		     : strcmp(name, "UploadId") == 0  ? U_ID
		     : strcmp(name, "Initiated") == 0 ? U_TIME
						      : 0;
	if (!f)
		return 0;
	if (st->seen & f)
		return xml_fail(x, "duplicate <%s> in <Upload>", name);
	st->seen |= f;
	if ((f == U_KEY || f == U_ID) && len == 0)
		return xml_fail(x, "empty <%s> in <Upload>", name);
	if (f == U_KEY)
		return xml_take_key(x, &u->key, &u->key_len, name, text, len);
	if (f == U_ID)
		return xml_take_str(x, &u->upload_id, name, text, len);
	return xml_take_time(x, &u->initiated, name, text);
}

static int upload_check(xml_ctx *x)
{
	static const char *const names[] = {"Key", "UploadId", "Initiated"};
	uploads_state *st = x->state;
	for (unsigned i = 0; i < 3; i++)
		if (!(st->seen & (1u << i)))
			return xml_fail(x, "<Upload> without <%s>", names[i]);
	return 0;
}

static int uploads_finish(xml_ctx *x)
{
	uploads_state *st = x->state;
	s3_uploads_result *r = &st->r;
	if (r->truncated && !(r->next_key_marker && r->next_key_marker[0]))
		return xml_fail(x, "IsTruncated without NextKeyMarker");
	if (!st->decode)
		return 0;
	for (size_t i = 0; i < r->n_uploads; i++) {
		s3_upload *u = &r->uploads[i];
		if (xml_decode_key(x, &u->key, &u->key_len, "Key") < 0)
			return -1;
	}
	if (r->next_key_marker &&
	    xml_decode_key(x, &r->next_key_marker, &r->next_key_marker_len,
			   "NextKeyMarker") < 0)
		return -1;
	return 0;
}

static int uploads_close(xml_ctx *x, const char *path, const char *text,
			 size_t len)
{
	uploads_state *st = x->state;
	s3_uploads_result *r = &st->r;
	if (strncmp(path, "Upload/", 7) == 0)
		return upload_field(x, path + 7, text, len);
	if (strcmp(path, "Upload") == 0)
		return upload_check(x);
	if (strcmp(path, "IsTruncated") == 0) {
		if (st->have_truncated)
			return xml_fail(x, "duplicate <IsTruncated>");
		st->have_truncated = true;
		return xml_take_bool(x, &r->truncated, "IsTruncated", text);
	}
	if (strcmp(path, "NextKeyMarker") == 0)
		return xml_take_key(x, &r->next_key_marker,
				    &r->next_key_marker_len, "NextKeyMarker",
				    text, len);
	if (strcmp(path, "NextUploadIdMarker") == 0)
		return xml_take_str(x, &r->next_upload_id_marker,
				    "NextUploadIdMarker", text, len);
	if (strcmp(path, "EncodingType") == 0 && xml_is_encoding_url(text))
		st->decode = true;
	if (path[0] == '\0')
		return uploads_finish(x);
	return 0;
}

static const xml_spec uploads_spec = {"ListMultipartUploadsResult", NULL,
				      uploads_open, uploads_close};

int s3xml_parse_uploads(const char *body, size_t len, bool url_encoded,
			s3_uploads_result *out, char **err)
{
	uploads_state st = {.decode = url_encoded};
	memset(out, 0, sizeof *out);
	if (xml_run(&uploads_spec, &st, NULL, body, len, err) < 0) {
		s3_uploads_result_free(&st.r);
		return -1;
	}
	*out = st.r;
	return 0;
}

void s3_uploads_result_free(s3_uploads_result *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_uploads; i++) {
		free(r->uploads[i].key);
		free(r->uploads[i].upload_id);
	}
	free(r->uploads);
	free(r->next_key_marker);
	free(r->next_upload_id_marker);
	memset(r, 0, sizeof *r);
}
