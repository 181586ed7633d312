/*
 * sigv4: AWS Signature Version 4, header signing and presigned URLs.
 *
 * Pure functions: the caller supplies every input, including the timestamp,
 * so signing is deterministic and testable against the published vectors
 * (shared/testdata/sigv4).  Nothing here logs; the secret key is only used
 * to derive the signing key and never copied into any output string.
 */
#ifndef CKPTFS_S3_SIGV4_H
#define CKPTFS_S3_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

typedef struct sigv4_creds {
	const char *access_key;
	const char *secret_key;
	const char *session_token; /* NULL or "" when absent */
} sigv4_creds;

typedef struct sigv4_header {
	const char *name;  /* any case; lower-cased for signing */
	const char *value; /* trimmed and inner spaces collapsed for signing */
} sigv4_header;

typedef struct sigv4_input {
	const char *method;
	/* Path as sent on the wire, already percent-encoded once (S3). */
	const char *path;
	/* Query string as sent, without '?'; NULL or "" when none. */
	const char *query;
	/* Headers to sign: must include host and x-amz-date (header signing);
	 * duplicates of one name are joined with ',' in order of appearance. */
	const sigv4_header *headers;
	size_t n_headers;
	/* Hex SHA-256 of the body, or "UNSIGNED-PAYLOAD". */
	const char *payload_hash;
	/* false for S3 (path used as given); true for other services: remove
	 * dot segments and duplicate slashes, and encode the path again. */
	bool normalize_path;
	const char *region;
	const char *service;
	const char *amz_date; /* YYYYMMDDTHHMMSSZ */
} sigv4_input;

typedef struct sigv4_result {
	char *canonical_request;
	char *string_to_sign;
	char *signed_headers; /* "host;x-amz-date" */
	char signature[65];   /* lower-case hex */
	/* Header signing: the full Authorization header value.
	 * Presigning: the query string to send (the input query plus the
	 * X-Amz-* parameters and X-Amz-Signature), without '?'. */
	char *output;
} sigv4_result;

/* Signs with the Authorization header.  Returns 0, or -1 on ENOMEM/invalid
 * input.  On success the caller frees r with sigv4_result_free. */
int sigv4_sign_header(const sigv4_input *in, const sigv4_creds *c,
		      sigv4_result *r);

/*
 * Presigns (query signing): adds X-Amz-Algorithm, X-Amz-Credential,
 * X-Amz-Date, X-Amz-Expires, X-Amz-SignedHeaders (and
 * X-Amz-Security-Token unless omit_session_token) to the query.
 * payload_hash is normally "UNSIGNED-PAYLOAD" for S3.
 */
int sigv4_presign(const sigv4_input *in, const sigv4_creds *c,
		  unsigned expires_seconds, bool omit_session_token,
		  sigv4_result *r);

void sigv4_result_free(sigv4_result *r);

/* Lower-case hex SHA-256 of data[0..n). */
void sigv4_sha256_hex(const void *data, size_t n, char out[65]);

/* Formats t as YYYYMMDDTHHMMSSZ (UTC). */
void sigv4_amz_date(time_t t, char out[17]);

#endif
