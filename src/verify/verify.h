/*
 * verify: `ckptfs verify` (doc/verify.md): re-reads every object under a
 * key prefix from the bucket, never from a cache, and checks it against
 * what was recorded when it was stored.
 *
 *   - An object governed by committed manifests (the nearest directory
 *     at or above it with .ckptfs/manifest.*.json, proto/manifest.h) must
 *     be listed in them, be there, have the recorded size and ETag, and
 *     its bytes the recorded CRC-32C and per-block CRC-32Cs (an entry
 *     without checksums: the MD5 of a plain ETag).  A file a manifest
 *     lists whose object is gone is bad ("missing").
 *   - Any other object (written by another tool) is checked by size and,
 *     where its ETag is a plain MD5 (32 hex digits; not a multipart
 *     "...-N" one, not an SSE-KMS one that differs), by the MD5 of its
 *     bytes.  A multipart ETag leaves the size check only ("size").
 *   - Objects under a manifest root that its manifests do not list are
 *     not part of the checkpoint (leftovers of an unfinished write; a
 *     mount hides them): counted as skipped.  So are the objects of a
 *     directory whose manifests are all pending, and ckptfs' own keys.
 *
 * Each object is read with If-Match its listed ETag in ranges of the
 * manifest's block size (8 MiB otherwise), by `threads` workers at once.
 * A read that fails after the request's retries makes that file bad
 * ("cannot read: ..."); a listing that fails makes the whole run fail.
 */
#ifndef CKPTFS_VERIFY_VERIFY_H
#define CKPTFS_VERIFY_VERIFY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "s3/client.h"

/* How a file was checked. */
typedef enum verify_how {
	VERIFY_MANIFEST = 0, /* size, ETag, CRC-32C (and block CRCs) */
	VERIFY_MD5,          /* size and the MD5 of a plain ETag */
	VERIFY_SIZE,         /* size only (multipart ETag) */
} verify_how;

const char *verify_how_name(verify_how h); /* "manifest" "md5" "size" */

typedef struct verify_file {
	char *key;        /* the object's key */
	const char *rel;  /* key relative to the verified prefix */
	uint64_t size;    /* listed size (manifest: recorded size) */
	verify_how how;
	bool ok;
	char *problem;    /* NULL when ok */
} verify_file;

typedef struct verify_cb {
	/* each file once checked, ok or not (serialized; any thread) */
	void (*file)(void *arg, const verify_file *f);
	/* at most every ~200 ms while reading */
	void (*progress)(void *arg, uint64_t done_bytes, uint64_t total_bytes,
			 size_t done_files, size_t total_files);
	/* true: stop soon (the run then fails with "cancelled") */
	bool (*cancelled)(void *arg);
	void *arg;
} verify_cb;

typedef struct verify_summary {
	size_t files, ok, bad;
	size_t by[3];  /* files per verify_how */
	size_t skipped; /* not part of the checkpoint (see above) */
	uint64_t bytes; /* bytes read */
} verify_summary;

/*
 * The JSON of a checked file ({"path","key","size","check","ok"} and
 * "problem" when bad) and of a run's summary ({"files","ok","bad",
 * "by_manifest","by_md5","by_size","skipped","bytes"}), as `ckptfs verify
 * --json` prints them and the daemon sends them (doc/verify.md): the one
 * encoder of both.  NULL when out of memory.
 */
json_t *verify_file_json(const verify_file *f);
json_t *verify_summary_json(const verify_summary *s);

/*
 * Verifies everything under key prefix `key` ("" for the bucket, "a/b"
 * for the object a/b and everything under a/b/).  Returns 0 with *sum
 * filled (bad files are not an error), or -1 with *err (malloc'd) when
 * the run could not be done: a failed listing, cancelled, no memory.
 */
int verify_run(s3_client *c, const char *key, unsigned threads,
	       const verify_cb *cb, verify_summary *sum, char **err);

/* Whether etag (quotes allowed) is a plain MD5: 32 hex digits. */
bool verify_etag_is_md5(const char *etag);
/* The length of root R of a manifest key R.ckptfs/manifest.*.json (R ""
 * or ending in '/'), or -1 when key is not a manifest's. */
long verify_manifest_root_len(const char *key);
/* Whether key has a component of ckptfs' own (".ckptfs*"). */
bool verify_is_own_key(const char *key);

#endif
