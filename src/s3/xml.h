/*
 * s3xml: parsing of S3 XML response bodies with expat.
 *
 * Every parser accepts arbitrary bytes: malformed or truncated XML yields
 * -1 and a message, never a crash or a partial result.  Keys from
 * ListObjectsV2 with encoding-type=url are percent-decoded here ('+' means
 * space), so callers only ever see real key bytes.
 */
#ifndef CKPTFS_S3_XML_H
#define CKPTFS_S3_XML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

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
} s3_list_result;

typedef struct s3_error {
	char *code;       /* NULL if the body had none */
	char *message;    /* NULL or "" (Ceph sends an empty <Message/>) */
	char *request_id;
} s3_error;

/* Parses a ListBucketResult.  url_encoded: the request used
 * encoding-type=url.  On failure returns -1 and sets *err (malloc'd). */
int s3xml_parse_list(const char *body, size_t len, bool url_encoded,
		     s3_list_result *out, char **err);
void s3_list_result_free(s3_list_result *r);

/* Parses an <Error> body.  Returns -1 when it is not one. */
int s3xml_parse_error(const char *body, size_t len, s3_error *out);
void s3_error_free(s3_error *e);

/* Parses an ISO-8601 timestamp like 2009-10-12T17:50:30.000Z. */
int s3xml_parse_time(const char *s, struct timespec *out);

#endif
