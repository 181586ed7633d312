/*
 * s3/creds-remote.c: the providers of container credentials (ECS, EKS
 * Pod Identity) and EC2 instance metadata (IMDSv2).
 * Private to the credential files of src/s3/ (creds*.c).
 */
#ifndef CKPTFS_S3_CREDS_REMOTE_H
#define CKPTFS_S3_CREDS_REMOTE_H

#include "s3/config.h"
#include "util/buf.h"

int credp_container(const creds_provider *self, const creds_ctx *cx,
		    s3_creds *out, buf *tried, char **err);
int credp_imds(const creds_provider *self, const creds_ctx *cx, s3_creds *out,
	       buf *tried, char **err);

#endif
