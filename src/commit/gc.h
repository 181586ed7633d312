/*
 * gc: what `ckptfs gc s3://bucket/prefix` removes (doc/commit.md), decided
 * by pure functions over a listing, so the rules are unit-tested without a
 * server.  cli/cmd-gc.c does the listing, fetches manifests and deletes.
 *
 * Abandoned transactions.  A pending marker P/.ckptfs-pending/C/W@lease
 * (at any depth) whose lease expired by the server's clock (LastModified +
 * lease <= the Date of the listing, as readers judge it: vis_marker_live,
 * proto/visibility.h)
 * names an abandoned transaction rooted at P/C/.  For each such root the
 * plan deletes, in this order:
 *   1. every object under P/C/ that no committed manifest names, where the
 *      committed manifests are those of P/C/.ckptfs/ and of every
 *      directory above or below P/C/ (manifest paths are relative to the
 *      directory holding .ckptfs/); ckptfs' own keys (components .ckptfs
 *      and .ckptfs-pending) are not objects; zero-byte directory markers
 *      ("name/") go only when no committed manifest covers the root;
 *   2. the pending manifests of the expired writers at P/C/.ckptfs/
 *      (manifest.W.json and manifest.W.N.json whose state is "pending");
 *   3. the expired markers of the root (the last step: until then readers
 *      treat the root as abandoned, after it as ordinary).
 * A root is left alone entirely (with a reason) when a live marker exists
 * for it, above it or below it (a writer is at work), or when a manifest
 * that governs it cannot be read or parsed (its files cannot be told from
 * strays).  Committed files and live markers are never in a plan.
 *
 * Unfinished deletes.  A delete record P/.ckptfs-pending/C/W.gone@L
 * (proto_gone_key) is the commit point of a delete of P/C: readers show
 * P/C as gone from the moment it exists.  A writer that died after it
 * leaves the rest to anyone: the plan deletes every key under P/C/ whose
 * LastModified is not after the newest record's (objects, then ckptfs'
 * own keys, then the root's markers and records), whatever the age of the
 * record and whoever holds a lease (the delete is decided; its writer, if
 * alive, deletes the same keys, and S3 deletes are idempotent).
 *
 * Incomplete multipart uploads are aborted when initiated more than
 * older_than seconds before the server's clock, unless their key lies in a
 * root held by a live marker.
 */
#ifndef CKPTFS_COMMIT_GC_H
#define CKPTFS_COMMIT_GC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* One object of the listing (keys are whole keys, NUL-free). */
typedef struct gc_object {
	const char *key;
	uint64_t size;
	time_t mtime; /* LastModified, seconds */
} gc_object;

/* The body of a manifest object the plan asked for. */
typedef struct gc_doc {
	const char *key;
	const char *body;
	size_t len;
} gc_doc;

typedef enum gc_kind {
	GC_OBJECT,   /* a stray object of an abandoned transaction */
	GC_MANIFEST, /* a pending manifest of an expired writer */
	GC_MARKER,   /* an expired pending marker */
} gc_kind;

typedef struct gc_delete {
	char *key;
	gc_kind kind;
	uint64_t size;
	size_t txn; /* index into gc_plan.txns */
} gc_delete;

typedef struct gc_txn {
	char *root;       /* key prefix of the transaction root, ends in '/' */
	char *pending_dir; /* P/.ckptfs-pending/C/: where its markers live */
	char **writers;   /* writers of its expired markers */
	size_t n_writers;
	time_t expired_at; /* latest LastModified + lease of its markers */
	bool gone;        /* an unfinished delete (a delete record) */
	time_t gone_at;   /* LastModified of its newest delete record */
	char *skip;       /* NULL, or why the root is left alone */
} gc_txn;

typedef struct gc_plan {
	gc_txn *txns; /* every root with an expired marker, by root */
	size_t n_txns, cap_txns;
	gc_delete *del; /* what to delete, in order (root by root) */
	size_t n_del;
	char **live_roots; /* roots held by live markers, sorted */
	size_t n_live;
} gc_plan;

/*
 * Step 1: the manifest keys (objects of the listing) whose contents the
 * plan needs: those in .ckptfs/ of a directory above, at or below a root
 * with an expired marker.  *idx (malloc'd) receives their indices into
 * objs.  Returns 0 or -1 (ENOMEM).
 */
int gc_manifests_needed(const gc_object *objs, size_t n, time_t now,
			size_t **idx, size_t *n_idx);

/*
 * Step 2: the plan.  docs: the bodies of the keys step 1 named; a named
 * key without a doc counts as gone (deleted since the listing).  now: the
 * server's clock at listing time.  Returns 0 or -1 (ENOMEM).
 */
int gc_make_plan(const gc_object *objs, size_t n, time_t now,
		 const gc_doc *docs, size_t n_docs, gc_plan *out);
void gc_plan_free(gc_plan *p);

/* Whether key lies in a root held by a live marker. */
bool gc_in_live_root(const gc_plan *p, const char *key);

/* Whether a multipart upload initiated at `initiated` is old enough. */
bool gc_upload_expired(time_t initiated, time_t now, double older_than);

/*
 * Parses a duration: a non-negative number with an optional unit s, m, h
 * or d ("30s", "10m", "2h", "1d", "1.5h"; no unit = seconds).  Returns 0
 * with *seconds, or -1.
 */
int gc_parse_duration(const char *s, double *seconds);

/* Whether key (anywhere) is a delete record (proto_gone_key). */
bool gc_is_gone_key(const char *key);

/* Parses a marker key (anywhere: "a/b/.ckptfs-pending/C/W@60").  Fills the
 * root ("a/b/C/"), writer and lease (malloc'd strings); -1 when key is not
 * a marker. */
int gc_parse_marker_key(const char *key, char **root, char **writer,
			unsigned *lease);

#endif
