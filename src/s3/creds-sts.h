/*
 * s3/creds-sts.c: the providers of web identity and assume role (STS).
 * Private to the credential files of src/s3/ (creds*.c).
 */
#ifndef CKPTFS_S3_CREDS_STS_H
#define CKPTFS_S3_CREDS_STS_H

#include "s3/config.h"
#include "util/buf.h"

int credp_assume_role(const creds_provider *self, const creds_ctx *cx,
		      s3_creds *out, buf *tried, char **err);
int credp_web_identity(const creds_provider *self, const creds_ctx *cx,
		       s3_creds *out, buf *tried, char **err);

#endif
