/*
 * upload-internal: the request context of the write operations (struct
 * wreq) and the helpers that build, check and run it, shared by upload.c
 * (single PUT, copy, deletes, and these helpers) and multipart.c
 * (multipart uploads), which calls them.  Not part of the module's
 * interface: include it from those two files only.
 */
#ifndef CKPTFS_S3_UPLOAD_INTERNAL_H
#define CKPTFS_S3_UPLOAD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "s3/upload.h"
#include "s3/xml.h"
#include "util/buf.h"

/* An s3_request with storage for the strings it points to. */
struct wreq {
	s3_client *c;
	s3_request r;
	buf query;
	buf store;  /* metadata header names */
	buf source; /* x-amz-copy-source */
	buf body;   /* XML bodies */
	char range[64];
	char sha[65];
	char md5[25];
	/* check results */
	char *etag_out; /* S3_ETAG_MAX bytes, or NULL */
	s3_delete_result del;
	bool del_parsed;
};

void wreq_free(struct wreq *w);

/* Appends s to out XML-escaped (the five special characters, and CR, LF
 * and TAB as character references). */
int wreq_xml_escape(buf *out, const char *s);

/* Sends a memory body with its SHA-256 signed and its Content-MD5. */
void wreq_mem_body(struct wreq *w, const void *p, size_t n);

/* Fails r locally (EINVAL, code InvalidArgument, why as message): -1. */
int wreq_bad_input(s3_client *c, const s3_request *r, const char *why,
		   s3_err *e);

/* Adds the x-amz-meta-* headers of meta (names stored in w->store); bad
 * names or values fail locally (wreq_bad_input). */
int wreq_add_meta(s3_client *c, struct wreq *w, const s3_meta *meta,
		  size_t n, s3_err *e);

/* Check callbacks (s3_request.check, arg: the wreq): a 2xx reply needs an
 * ETag header (PUT, UPLOAD PART), or a copy result body and no <Error>
 * (copies); the ETag goes to w->etag_out when set. */
int wreq_check_etag_header(void *arg, const http_xfer *x, s3_err *e);
int wreq_check_copy(void *arg, const http_xfer *x, s3_err *e);

/* Fills e for a reply whose body could not be parsed (EIO,
 * MalformedReply); returns -1. */
int wreq_malformed_reply(s3_client *c, const s3_request *r, long status,
			 const char *perr, s3_err *e);

/* Turns a parse outcome pr of a 200 body (an <Error> in se, or perr)
 * into 0 or an s3_err; frees perr. */
int wreq_body_verdict(struct wreq *w, const http_xfer *x, int pr,
		      s3_error *se, char *perr, s3_err *e);

/* etag into out, quoted as S3 sends ETags in headers (Ceph 16 leaves the
 * quotes out of CopyObjectResult and CopyPartResult). */
void wreq_quote_etag(char out[S3_ETAG_MAX], const char *etag);

/* Runs w with the retry loop (attempts: how many were made). */
int wreq_run(s3_client *c, struct wreq *w, unsigned *attempts, s3_err *e);

/* After a retried request failed in a way an earlier, lost success would
 * explain: does key now carry the ETag we expected?  When it does, etag
 * (may be NULL) gets it. */
bool wreq_landed(s3_client *c, const char *key, const char *want,
		 char etag[S3_ETAG_MAX]);

/* Signs w into x when the builder's result rc is 0; frees w. */
int wreq_prepared(s3_client *c, struct wreq *w, int rc, http_xfer *x,
		  s3_err *e);

#endif
