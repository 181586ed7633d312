/*
 * s3upload: the S3 write primitives the commit engine builds on.
 *
 * Single PUT, multipart uploads (create, part, complete, abort, list),
 * server-side copies (CopyObject, UploadPartCopy), single and batch
 * deletes, plus the pure pieces they need (part sizing, x-amz-copy-source
 * encoding, DeleteObjects bodies, x-amz-meta-* headers, Content-MD5,
 * the expected multipart ETag), which are unit-tested on their own.
 *
 * Every call goes through s3_request_perform (request.h): SigV4 over every
 * header sent, fresh credentials and timestamp per attempt, the client's
 * retry policy (transport errors, 5xx, 429, throttling codes; a retried
 * upload re-sends its body from the start of the fd range or buffer), the
 * policy's stall deadlines (retry.h) with a longer first-byte allowance
 * where the server works before it answers (copies, CompleteMultipartUpload,
 * DeleteObjects: s3_client_server_wait_ms), and a per-attempt limit that
 * grows with the body (s3_client_data_timeout).
 * Failures fill an s3_err whose message names the operation and the
 * s3://bucket/key, never credentials.
 *
 * Bodies (http_upload, http/loop.h): a range of a file descriptor, read
 * with pread (the fd's offset is untouched, so one fd may feed many parts
 * at once), or a buffer.  Bodies read from an fd are sent with
 * x-amz-content-sha256: UNSIGNED-PAYLOAD and no checksum headers, which
 * every S3 implementation accepts (Ceph 16 knows neither aws-chunked nor
 * trailing checksums); the caller may add a Content-MD5 it computed while
 * staging, which is the one integrity check Ceph 16 enforces (it ignores
 * a wrong x-amz-content-sha256, and any Content-MD5 on DeleteObjects).
 * Bodies from memory (manifests, markers, XML) are small: their SHA-256
 * is signed (AWS verifies it) and their Content-MD5 sent.
 *
 * ETags are returned as S3 sends them, with the quotes.
 *
 * Blocking calls run on the caller's thread (a FUSE worker, the commit
 * engine) and wait on the http loop.  The data-heavy calls also exist in
 * an asynchronous form (s3_prepare_put_object, s3_prepare_put_part,
 * s3_prepare_part_copy + s3_classify_upload) for an engine that keeps many
 * transfers in flight on the loop, in the style of s3_prepare_get.
 */
#ifndef CKPTFS_S3_UPLOAD_H
#define CKPTFS_S3_UPLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/loop.h"
#include "s3/client.h"
#include "util/buf.h"

#define S3_ETAG_MAX 128
#define S3_MIB (1024ull * 1024)
#define S3_MIN_PART_SIZE (5 * S3_MIB)      /* S3's minimum, but the last */
#define S3_DEFAULT_PART_SIZE (8 * S3_MIB)
#define S3_MAX_PART_SIZE (5120 * S3_MIB)   /* 5 GiB */
#define S3_MAX_PARTS 10000
#define S3_MAX_PUT_SIZE (5120 * S3_MIB)    /* single PUT, CopyObject */
#define S3_MAX_OBJECT_SIZE (5ull << 40)    /* 5 TiB */
#define S3_DELETE_MAX 1000                 /* keys per DeleteObjects */
#define S3_META_MAX 24                     /* pairs we send */
#define S3_META_MAX_BYTES 2048             /* names + values, as on AWS */

/* ---- pure helpers ------------------------------------------------------- */

/*
 * Part size for a multipart upload of object_size bytes: at least min_part
 * (0 means S3_DEFAULT_PART_SIZE; raised to S3_MIN_PART_SIZE, capped at
 * S3_MAX_PART_SIZE), a multiple of 1 MiB, and large enough that the object
 * takes at most S3_MAX_PARTS parts.  Returns 0 when object_size exceeds
 * S3_MAX_OBJECT_SIZE (S3 cannot store it).
 */
uint64_t s3_part_size(uint64_t object_size, uint64_t min_part);
/* Number of parts of object_size in part_size pieces (1 for 0 bytes). */
uint64_t s3_part_count(uint64_t object_size, uint64_t part_size);

/*
 * Appends the value of x-amz-copy-source for key in bucket: "bucket/key"
 * percent-encoded as in a request path ('/' kept, every byte outside
 * A-Za-z0-9-._~ escaped, so '+', '%', '#', '?' and spaces survive).
 * Returns 0 or -1 (ENOMEM).
 */
int s3_copy_source(buf *out, const char *bucket, const char *key);

/*
 * True when key can be written into an XML 1.0 document (DeleteObjects):
 * valid UTF-8 without control characters other than TAB, LF and CR.
 * Other keys must be deleted one by one.
 */
bool s3_key_xml_safe(const char *key);

/*
 * Builds the DeleteObjects body for keys[0..n) (each s3_key_xml_safe; CR,
 * LF and TAB are written as character references so XML parsing keeps
 * them) with <Quiet>true</Quiet> when quiet.  Returns 0, or -1 when a key
 * is not XML-safe or n is 0 or above S3_DELETE_MAX.
 */
int s3_delete_body(buf *out, const char *const *keys, size_t n, bool quiet);

/*
 * Checks user metadata and appends "x-amz-meta-<name>" header names to r
 * (values are sent as given).  Names are lower-cased (S3 does so) into
 * `store`, which must outlive r; the caller passes a buf it frees after the
 * request.  Names: 1+ characters of A-Za-z0-9- ('_' is refused: Ceph 16
 * turns it into '-', so it would not read back); values: printable ASCII
 * (0x20-0x7e, so no CR/LF can split a header) without leading or trailing
 * spaces; at most S3_META_MAX pairs and S3_META_MAX_BYTES in all; no name
 * twice.  Returns 0, or -1 with a reason in err.
 */
int s3_meta_headers(s3_request *r, const s3_meta *meta, size_t n, buf *store,
		    char *err, size_t errsz);

/* Base64 of the MD5 of data[0..n), as Content-MD5 wants (24 chars + NUL). */
void s3_content_md5(const void *data, size_t n, char out[25]);

/* Whether etag is a plain MD5 ETag ("hex", as a single PUT gets) of
 * data[0..n): what a copy of an object's bytes kept elsewhere is checked
 * with (proto/mindex.h). */
bool s3_etag_matches(const char *etag, const void *data, size_t n);

typedef struct s3_part {
	unsigned number; /* 1..10000, ascending in a complete request */
	char etag[S3_ETAG_MAX];
} s3_part;

/*
 * The ETag S3 gives an object assembled from parts whose ETags are plain
 * MD5s: "<hex md5 of the concatenated binary part MD5s>-<n>", quoted.
 * Returns -1 when some part ETag is not a quoted or bare 32-digit hex MD5
 * (encrypted objects), leaving out unchanged.
 */
int s3_multipart_etag(const s3_part *parts, size_t n, char out[S3_ETAG_MAX]);

/* ---- options ------------------------------------------------------------ */

typedef struct s3_put_opts {
	const char *content_type; /* NULL: application/octet-stream */
	const s3_meta *meta;      /* user metadata (x-amz-meta-*) */
	size_t n_meta;
	/* create only: If-None-Match: * (single PUT only); the key existing
	 * fails with err EEXIST, code PreconditionFailed, except that for a
	 * memory body a key already holding exactly these bytes (ETag = MD5)
	 * counts as success: it is what a lost reply to our own earlier
	 * attempt looks like */
	bool if_none_match;
	/* base64 MD5 of an fd body, or NULL; memory bodies get one anyway */
	const char *content_md5;
} s3_put_opts;

typedef enum s3_metadata_directive {
	S3_METADATA_COPY = 0, /* keep the source's content type and metadata */
	S3_METADATA_REPLACE,  /* use content_type and meta of the options */
} s3_metadata_directive;

typedef struct s3_copy_opts {
	s3_metadata_directive directive;
	const char *content_type; /* REPLACE: NULL means application/octet-stream */
	const s3_meta *meta;      /* REPLACE */
	size_t n_meta;
	/* copy only this version of the source: another version fails with
	 * err ESTALE, code PreconditionFailed.  Sent as
	 * x-amz-copy-source-if-match and, for Ceph 16 which reads only that
	 * name, x-amz-copy-if-match. */
	const char *src_if_match;
	/* the source's size when known: sets the per-attempt deadline
	 * (s3_client_data_timeout); 0 assumes S3_MAX_PUT_SIZE */
	uint64_t size;
} s3_copy_opts;

/* ---- single objects ----------------------------------------------------- */

/* PUT of body to key (at most S3_MAX_PUT_SIZE bytes); etag may be NULL. */
int s3_put_object(s3_client *c, const char *key, const http_upload *body,
		  const s3_put_opts *o, char etag[S3_ETAG_MAX], s3_err *e);

/*
 * CopyObject src_key -> dst_key within the bucket (source at most
 * S3_MAX_PUT_SIZE; larger ones need UploadPartCopy).  A 200 reply holding
 * an <Error> is a failure and retried when transient.  etag may be NULL.
 */
int s3_copy_object(s3_client *c, const char *src_key, const char *dst_key,
		   const s3_copy_opts *o, char etag[S3_ETAG_MAX], s3_err *e);

/* DELETE key.  Deleting a missing key succeeds, as on S3. */
int s3_delete_object(s3_client *c, const char *key, s3_err *e);

typedef struct s3_delete_status {
	int err;       /* 0: gone (deleted or never there) */
	char code[64]; /* S3 code of a failure */
	char msg[128];
} s3_delete_status;

/*
 * Deletes keys[0..n) (n <= S3_DELETE_MAX, the caller batches) with one
 * quiet DeleteObjects request (Content-MD5 and signed SHA-256 of the
 * body).  Keys that failed with a transient code (InternalError,
 * SlowDown...) are sent again under the retry policy; keys that cannot go
 * into XML are deleted one by one.  st[i] (array of n, may be NULL)
 * receives key i's outcome and *n_failed (may be NULL) the number of keys
 * not deleted.  Returns 0 when the requests went through, even if some
 * keys failed (see st), or -1 with *e when they did not.
 */
int s3_delete_objects(s3_client *c, const char *const *keys, size_t n,
		      s3_delete_status *st, size_t *n_failed, s3_err *e);

/* ---- multipart uploads -------------------------------------------------- */

/*
 * CreateMultipartUpload; *upload_id is malloc'd.  o->if_none_match is
 * ignored (S3 checks that at completion, where Ceph does not).  attempts
 * (NULL: not wanted) receives how many requests it took: after more than
 * one, uploads that attempts whose replies were lost may have started are
 * aborted at once (s3_mpu_abort_lost), and a caller should do so again
 * before completing, for attempts the server carried out late.
 */
int s3_mpu_create(s3_client *c, const char *key, const s3_put_opts *o,
		  char **upload_id, unsigned *attempts, s3_err *e);

/*
 * Aborts the uploads of exactly key, other than keep (still open), that
 * the server started within 5 minutes of keep: nobody knows their ids
 * (their create replies were lost), so they would hold their parts until
 * gc.  Best effort: a failure costs only the orphan.  Another writer's
 * upload of the same key in that window is aborted too; it then starts
 * again (NoSuchUpload on its next part), as two writers of one key
 * conflict anyway (doc/commit.md, lost replies).
 */
void s3_mpu_abort_lost(s3_client *c, const char *key, const char *keep);

/*
 * UploadPart number part (1..10000) of body; etag receives its ETag.
 * content_md5: base64 MD5 of an fd body for the server to verify, or NULL
 * (memory bodies always get one).
 */
int s3_mpu_put_part(s3_client *c, const char *key, const char *upload_id,
		    unsigned part, const http_upload *body,
		    const char *content_md5, char etag[S3_ETAG_MAX],
		    s3_err *e);

/*
 * UploadPartCopy: bytes [first, last] of src_key become part `part` of the
 * upload to key.  src_if_match (NULL for none) pins the source's ETag with
 * x-amz-copy-source-if-match (ESTALE when it changed), but Ceph 16 ignores
 * that header on part copies (and its own x-amz-copy-if-match there too):
 * a caller that must not mix versions HEADs the source after the last part
 * and before completing.  Ceph 16 also percent-decodes the copy source of
 * part copies twice: when a source key containing '%' is reported missing
 * but a HEAD finds it, the client learns S3_QUIRK_COPY_SOURCE_DECODED_TWICE
 * and the part is copied again with the source encoded twice, as are all
 * later part copies (blocking or prepared) of keys with '%'.  An engine
 * using only the async form should retry such a NoSuchKey part once with
 * this blocking call.
 */
int s3_upload_part_copy(s3_client *c, const char *src_key, uint64_t first,
			uint64_t last, const char *src_if_match,
			const char *key, const char *upload_id, unsigned part,
			char etag[S3_ETAG_MAX], s3_err *e);

/*
 * CompleteMultipartUpload with parts[0..n) (ascending numbers).  A 200
 * reply holding an <Error> is a failure, retried when transient.  When
 * retries end in failure, or in NoSuchUpload at once (an earlier attempt,
 * ours or one curl resent by itself on a dead reused connection, may have
 * completed the upload and lost its reply: a retry then sees NoSuchUpload
 * on AWS, InternalError on Ceph 16), the object is HEADed, and an ETag
 * equal to s3_multipart_etag(parts) counts as success.  etag may be NULL.  A reply
 * with an empty <ETag> (Ceph 16) yields s3_multipart_etag(parts), or the
 * object's ETag from a HEAD when the parts' ETags are not plain MD5s.
 */
int s3_mpu_complete(s3_client *c, const char *key, const char *upload_id,
		    const s3_part *parts, size_t n, char etag[S3_ETAG_MAX],
		    s3_err *e);

/* AbortMultipartUpload.  An upload already gone fails with ENOENT
 * (NoSuchUpload), which callers cleaning up treat as done; after a retry of
 * ours it counts as success.  A server that does not implement it (405 or
 * 501) fails with EOPNOTSUPP, logged once per client, and later calls send
 * nothing (S3_QUIRK_NO_ABORT_MPU). */
int s3_mpu_abort(s3_client *c, const char *key, const char *upload_id,
		 s3_err *e);

/*
 * One page (max_uploads, 0 or above 1000 meaning 1000) of
 * ListMultipartUploads under prefix, after key_marker/upload_id_marker
 * (NULL for the first page; pass the previous page's next_key_marker and
 * next_upload_id_marker while truncated).  Keys are requested and decoded
 * with encoding-type=url.  Free *out with s3_uploads_result_free.
 */
int s3_list_multipart_uploads(s3_client *c, const char *prefix,
			      const char *key_marker,
			      const char *upload_id_marker,
			      unsigned max_uploads, s3_uploads_result *out,
			      s3_err *e);

/* ---- asynchronous forms ------------------------------------------------- */

typedef enum s3_upload_op {
	S3_OP_PUT_OBJECT,
	S3_OP_PUT_PART,
	S3_OP_PART_COPY,
} s3_upload_op;

/*
 * Each prepare signs one attempt into x (url, headers, method, deadline,
 * body); the caller sets x->done/done_arg and http_submit()s it, keeping
 * the body's fd or buffer valid until done runs.  For another attempt,
 * prepare again (fresh signature) and resubmit: the body restarts at its
 * beginning.  Returns 0, or -1 with *e (bad metadata, no credentials).
 */
int s3_prepare_put_object(s3_client *c, const char *key,
			  const http_upload *body, const s3_put_opts *o,
			  http_xfer *x, s3_err *e);
int s3_prepare_put_part(s3_client *c, const char *key, const char *upload_id,
			unsigned part, const http_upload *body,
			const char *content_md5, http_xfer *x, s3_err *e);
int s3_prepare_part_copy(s3_client *c, const char *src_key, uint64_t first,
			 uint64_t last, const char *src_if_match,
			 const char *key, const char *upload_id, unsigned part,
			 http_xfer *x, s3_err *e);

/*
 * Judges a completed attempt of operation op on key (attempt: 1 for the
 * first).  Returns 0 with etag filled (may be NULL), or -1 with *e and
 * *retry telling whether to try again after *retry_after_ms.  A part copy
 * answered 200 with an <Error> body counts as a failure.
 */
int s3_classify_upload(s3_client *c, s3_upload_op op, const char *key,
		       const http_xfer *x, unsigned attempt,
		       char etag[S3_ETAG_MAX], s3_err *e, bool *retry,
		       unsigned *retry_after_ms);

#endif
