/*
 * s3/creds-parse.c: s3_creds helpers and the documents the credential
 * providers read (the JSON of IMDS, container endpoints and
 * credential_process, STS XML replies), timestamps, the container host
 * rule, command-line splitting.  Pure functions, the bottom of the
 * credential files.
 * Private to the credential files of src/s3/ (creds*.c).
 */
#ifndef CKPTFS_S3_CREDS_PARSE_H
#define CKPTFS_S3_CREDS_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "s3/config.h"

/* Fills *out with copies (token may be NULL).  0, or -1 out of memory. */
int creds_set(s3_creds *out, const char *id, const char *secret,
	      const char *token, time_t expires);
int creds_copy(s3_creds *dst, const s3_creds *src);

/* "2024-01-02T03:04:05Z" (fraction, offset allowed) -> time_t; -1 bad. */
int creds_parse_time(const char *s, time_t *out);

/*
 * The credentials JSON of EC2 instance metadata, the container endpoints
 * and credential_process: AccessKeyId, SecretAccessKey, Token or
 * SessionToken, Expiration.  process: credential_process's rules (Version
 * must be 1, SessionToken).  what names the source in messages.  Returns
 * 0, or -1 with *err (never quoting a value of the document).
 */
int creds_parse_json(const char *body, size_t len, bool process,
		     const char *what, s3_creds *out, char **err);

/* An STS reply (AssumeRole, AssumeRoleWithWebIdentity). */
typedef struct sts_reply {
	s3_creds creds;	  /* filled on success */
	char *error_code; /* of an <ErrorResponse>; NULL otherwise */
	char *error_msg;  /* idem, may be NULL */
} sts_reply;

/*
 * Parses an STS reply body: 0 with r->creds, 1 with r->error_code (an
 * ErrorResponse), -1 with *err when it is neither.
 */
int sts_parse_reply(const char *body, size_t len, sts_reply *r, char **err);
void sts_reply_free(sts_reply *r);

/*
 * May credentials be fetched from this AWS_CONTAINER_CREDENTIALS_FULL_URI?
 * https:// anything; http:// only loopback (127.0.0.0/8, [::1],
 * localhost), the ECS host 169.254.170.2 and the EKS hosts 169.254.170.23
 * and [fd00:ec2::23].  NULL when allowed, else why not.
 */
const char *container_url_problem(const char *url);

/*
 * Splits a credential_process command line as the AWS CLI does (POSIX
 * shell words: quotes and backslashes, no expansion).  Returns a
 * NULL-terminated malloc'd argv (free with argv_free), NULL with *err.
 */
char **cmdline_split(const char *cmd, char **err);
void argv_free(char **argv);

#endif
