/*
 * s3/creds-http.c: one blocking HTTP request with a deadline (curl
 * easy), for the providers that ask a server (creds-remote.c,
 * creds-sts.c).
 * Private to the credential files of src/s3/ (creds*.c).
 */
#ifndef CKPTFS_S3_CREDS_HTTP_H
#define CKPTFS_S3_CREDS_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "util/buf.h"

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

#endif
