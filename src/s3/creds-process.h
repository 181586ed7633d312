/*
 * s3/creds-process.c: the credential_process provider, and one run of
 * a credential_process command (also for assume role's source profile).
 * Private to the credential files of src/s3/ (creds*.c).
 */
#ifndef CKPTFS_S3_CREDS_PROCESS_H
#define CKPTFS_S3_CREDS_PROCESS_H

#include "s3/config.h"
#include "util/buf.h"

int credp_process(const creds_provider *self, const creds_ctx *cx,
		  s3_creds *out, buf *tried, char **err);

/* Runs one credential_process command (its deadline: CREDS_PROCESS_MS). */
int creds_run_process(const char *cmd, const char *where, s3_creds *out,
		      char **err);

#define CREDS_PROCESS_MS 60000

#endif
