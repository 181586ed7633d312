/*
 * s3/creds-local.c: the providers of the environment and the shared
 * files' static keys, and a profile loaded from both files (once per
 * fetch of the chain: creds_ctx_profile), which the other providers read.
 * Private to the credential files of src/s3/ (creds*.c).
 */
#ifndef CKPTFS_S3_CREDS_LOCAL_H
#define CKPTFS_S3_CREDS_LOCAL_H

#include <stdbool.h>

#include "s3/aws-files.h"
#include "s3/config.h"
#include "util/buf.h"

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

#endif
