/*
 * creds-internal: what the credential files of src/s3/ share.  Not part of
 * the module's interface (config.h is): include it from src/s3/creds*.c
 * only.  The files, lowest first (no file calls one above it):
 *
 *   creds-parse.c    s3_creds helpers; the documents providers read (the
 *                    JSON of IMDS, container endpoints and
 *                    credential_process, STS XML replies), timestamps,
 *                    the container host rule, command-line splitting
 *   creds-http.c     one blocking HTTP request with a deadline (curl easy)
 *   creds-local.c    environment and the shared files' static keys;
 *                    loading a profile from both files (once per fetch
 *                    of the chain: creds_ctx_profile)
 *   creds-remote.c   container credentials (ECS, EKS Pod Identity) and EC2
 *                    instance metadata (IMDSv2)
 *   creds-process.c  credential_process
 *   creds-sts.c      web identity and assume-role (STS)
 *   creds.c          the chain: order, cache, background refresh
 */
#ifndef CKPTFS_S3_CREDS_INTERNAL_H
#define CKPTFS_S3_CREDS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "s3/config-internal.h"
#include "s3/config.h"
#include "util/buf.h"

/* ---- creds-parse.c ------------------------------------------------------ */

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

/* ---- creds-http.c ------------------------------------------------------- */

typedef struct credhttp_req {
	const char *method; /* GET, PUT, POST */
	const char *url;
	const char *const
	    *headers;	  /* "Name: value", NULL-terminated, or NULL */
	const char *body; /* NULL: none */
	size_t body_len;
	long connect_ms, total_ms; /* deadlines */
	const char *ca_bundle;	   /* NULL: the system's */
	const char *label; /* names the request in messages; NULL: the URL */
} credhttp_req;

typedef struct credhttp_resp {
	long status;	/* 0 when no reply */
	buf body;	/* capped at 64 KiB */
	bool timed_out; /* the deadline passed */
	bool connected; /* a connection was made (a timeout was a read's) */
} credhttp_resp;

/*
 * Performs one request.  0 when a reply came (any status), -1 with *err
 * ("connection refused", "no reply within 1000 ms", ...: never a header
 * value) when none did.  Free resp->body with buf_free.
 */
int credhttp_perform(const credhttp_req *r, credhttp_resp *resp, char **err);

/* ---- creds-local.c ------------------------------------------------------ */

int credp_env(const creds_provider *self, const creds_ctx *cx, s3_creds *out,
	      buf *tried, char **err);
int credp_shared_file(const creds_provider *self, const creds_ctx *cx,
		      s3_creds *out, buf *tried, char **err);
int credp_config_file(const creds_provider *self, const creds_ctx *cx,
		      s3_creds *out, buf *tried, char **err);

/*
 * What `profile` says in the config file and the credentials file
 * together (the credentials file wins, as in the AWS CLI).  *where names
 * the files for messages (malloc'd).  0, or -1 with *err.
 */
int creds_profile_load(const char *profile, aws_profile *out, char **where,
		       char **err);

/*
 * The profile of cx->profile, as creds_profile_load gives it, read from
 * the files once per fetch of the chain: each file is read at most once
 * (the shared-file and config-file providers take their file's keys from
 * the same reading), and the providers that need the merged profile
 * (assume role, web identity, credential_process, IMDS's v1 switch) share
 * one merge; a refresh reads the files again.  0 with *p and *where
 * (valid until creds_profile_memo_free), or -1 with *err.  A memo starts
 * as {.profile = NAME}; creds_profile_memo_free keeps the name.
 */
#define CREDS_PROFILE_FILES 2 /* the config file, the credentials file */
typedef struct creds_profile_memo {
	const char *profile;
	struct creds_file_read {
		bool loaded;
		int rc;
		aws_profile p;
		char *path, *err;
	} file[CREDS_PROFILE_FILES];
	bool loaded; /* the merge */
	int rc;
	aws_profile p;
	char *where, *err;
} creds_profile_memo;

int creds_ctx_profile(const creds_ctx *cx, const aws_profile **p,
		      const char **where, char **err);
void creds_profile_memo_free(creds_profile_memo *m);

/* Static keys of a loaded profile: 1 found, 0 none, -1 partial. */
int creds_from_profile(const aws_profile *p, const char *where,
		       const char *profile, s3_creds *out, char **err);

/*
 * Reads a token file (web identity, container authorization) whole,
 * without trailing white space; var names the variable that named it.
 * NULL with *err when missing, unreadable, empty or over 16 KiB.
 */
char *creds_read_token_file(const char *path, const char *var, char **err);

/* ---- creds-remote.c ----------------------------------------------------- */

int credp_container(const creds_provider *self, const creds_ctx *cx,
		    s3_creds *out, buf *tried, char **err);
int credp_imds(const creds_provider *self, const creds_ctx *cx, s3_creds *out,
	       buf *tried, char **err);

/* ---- creds-process.c ---------------------------------------------------- */

int credp_process(const creds_provider *self, const creds_ctx *cx,
		  s3_creds *out, buf *tried, char **err);

/* Runs one credential_process command (its deadline: CREDS_PROCESS_MS). */
int creds_run_process(const char *cmd, const char *where, s3_creds *out,
		      char **err);

#define CREDS_PROCESS_MS 60000

/* ---- creds-sts.c -------------------------------------------------------- */

int credp_assume_role(const creds_provider *self, const creds_ctx *cx,
		      s3_creds *out, buf *tried, char **err);
int credp_web_identity(const creds_provider *self, const creds_ctx *cx,
		       s3_creds *out, buf *tried, char **err);

#endif
