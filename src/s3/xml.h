/*
 * s3xml: parsing of S3 XML response bodies with expat.
 *
 * Every parser accepts arbitrary bytes: malformed or truncated XML yields
 * -1 and a message, never a crash or a partial result.  Keys from
 * ListObjectsV2 with encoding-type=url are percent-decoded here ('+' means
 * space), so callers only ever see real key bytes.
 *
 * Conventions shared by all parsers: *out is zeroed on entry and left zeroed
 * on failure; err (may be NULL) receives a malloc'd message on failure and
 * NULL on success; free results with the matching *_free, which also zeroes
 * them.  Bodies larger than S3XML_MAX_BODY and bodies with a DOCTYPE are
 * refused.  Parsers for 200 replies that S3 may turn into an <Error>
 * document (CompleteMultipartUpload, CopyObject, UploadPartCopy,
 * DeleteObjects) return S3XML_ERROR_BODY and fill *s3err in that case.
 */
#ifndef CKPTFS_S3_XML_H
#define CKPTFS_S3_XML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Largest body a parser accepts: a 1000-key listing of 1024-byte keys,
 * fully percent-encoded, is about 3.5 MiB. */
#define S3XML_MAX_BODY (16u << 20)
/* Returned instead of 0 when a 200 reply holds an <Error> document. */
#define S3XML_ERROR_BODY 1

typedef struct s3_object {
	char *key;
	size_t key_len; /* keys may contain %00 after decoding */
	uint64_t size;
	char *etag; /* as sent, quotes included */
	struct timespec mtime;
} s3_object;

typedef struct s3_list_result {
	s3_object *objects;
	size_t n_objects;
	char **prefixes; /* CommonPrefixes/Prefix values, decoded */
	size_t *prefix_lens;
	size_t n_prefixes;
	bool truncated;
	char *next_token; /* NextContinuationToken, NULL if none */
	time_t server_time; /* the reply's Date header; 0 when unknown */
} s3_list_result;

typedef struct s3_error {
	char *code;       /* NULL if the body had none */
	char *message;    /* NULL or "" (Ceph sends an empty <Message/>) */
	char *request_id;
} s3_error;

/*
 * Parses a ListBucketResult (ListObjectsV2).  url_encoded: the request used
 * encoding-type=url; keys and prefixes are then percent-decoded, as they
 * also are when the reply itself says <EncodingType>url</EncodingType>.
 * Every Contents must carry Key (non-empty), Size, ETag and LastModified,
 * and IsTruncated=true needs a NextContinuationToken: a reply lacking them
 * fails as a whole rather than yielding objects with made-up sizes or
 * times.  On failure returns -1 and sets *err (malloc'd).
 */
int s3xml_parse_list(const char *body, size_t len, bool url_encoded,
		     s3_list_result *out, char **err);
void s3_list_result_free(s3_list_result *r);

/* Parses an <Error> body.  Returns -1 when it is not one (or is malformed);
 * elements missing from it stay NULL. */
int s3xml_parse_error(const char *body, size_t len, s3_error *out);
void s3_error_free(s3_error *e);

/* Parses an ISO-8601 timestamp like 2009-10-12T17:50:30.000Z (fraction
 * optional, any number of digits; zone Z or +hh:mm/-hh:mm) into UTC.
 * Returns 0, or -1 with *out zeroed. */
int s3xml_parse_time(const char *s, struct timespec *out);

/* InitiateMultipartUploadResult: *upload_id receives the non-empty UploadId. */
int s3xml_parse_initiate(const char *body, size_t len, char **upload_id,
			 char **err);

/*
 * CompleteMultipartUploadResult: *etag receives the ETag of the assembled
 * object.  S3 may answer 200 and still fail the request: then the body is
 * an <Error> document, the result is S3XML_ERROR_BODY and *s3err (may be
 * NULL) holds it; such an error is usually worth retrying (retry.h).
 */
int s3xml_parse_complete(const char *body, size_t len, char **etag,
			 s3_error *s3err, char **err);

typedef struct s3_copy_result {
	char *etag; /* required */
	struct timespec mtime; /* LastModified, zero when absent */
} s3_copy_result;

/* CopyObjectResult or CopyPartResult; <Error> as for s3xml_parse_complete. */
int s3xml_parse_copy(const char *body, size_t len, s3_copy_result *out,
		     s3_error *s3err, char **err);
void s3_copy_result_free(s3_copy_result *r);

typedef struct s3_delete_entry {
	char *key;
	char *code;    /* NULL for a Deleted entry, the S3 code for an Error */
	char *message; /* Error entries only; NULL or "" when none */
} s3_delete_entry;

typedef struct s3_delete_result {
	s3_delete_entry *deleted;
	size_t n_deleted;
	s3_delete_entry *errors; /* keys that were not deleted */
	size_t n_errors;
} s3_delete_result;

/* DeleteResult of DeleteObjects; <Error> as for s3xml_parse_complete. */
int s3xml_parse_delete(const char *body, size_t len, s3_delete_result *out,
		       s3_error *s3err, char **err);
void s3_delete_result_free(s3_delete_result *r);

typedef struct s3_upload {
	char *key;
	size_t key_len; /* decoded keys may contain %00 */
	char *upload_id;
	struct timespec initiated;
} s3_upload;

typedef struct s3_uploads_result {
	s3_upload *uploads;
	size_t n_uploads;
	bool truncated;
	char *next_key_marker; /* decoded like keys; NULL if absent */
	size_t next_key_marker_len;
	char *next_upload_id_marker; /* NULL if absent */
} s3_uploads_result;

/*
 * ListMultipartUploadsResult.  Every Upload must carry Key, UploadId and
 * Initiated (gc judges age by it, so a guessed time could abort a live
 * upload); IsTruncated=true needs a non-empty NextKeyMarker.  url_encoded
 * as for s3xml_parse_list (Key and NextKeyMarker are decoded).
 * CommonPrefixes are not reported.
 */
int s3xml_parse_uploads(const char *body, size_t len, bool url_encoded,
			s3_uploads_result *out, char **err);
void s3_uploads_result_free(s3_uploads_result *r);

#endif
