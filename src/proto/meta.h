/*
 * proto/meta: file attributes in the bucket format (doc/commit.md,
 * "Remote protocol"), both ways.
 *
 * proto_meta is the format's view of a file's attributes: mode (07777,
 * plus the file type bits of a special file: S_IFIFO, S_IFSOCK, S_IFCHR,
 * S_IFBLK; none for a regular file), owner, mtime in ns, device number,
 * user xattrs, symlink target.  The commit engine
 * keeps its public eng_meta and converts (commit/internal.h); proto knows
 * nothing of the engine.
 *
 * Object metadata: every object a ckptfs writer PUTs carries
 *   x-amz-meta-mode     octal, e.g. "640"; a special file's carries its
 *                       type: "10640" is a FIFO (doc/posix.md)
 *   x-amz-meta-rdev     decimal, device nodes only (glibc's dev_t)
 *   x-amz-meta-uid      decimal
 *   x-amz-meta-gid      decimal
 *   x-amz-meta-mtime    ns since the epoch, decimal
 *   x-amz-meta-symlink  the target, percent-encoded outside printable
 *                       ASCII, '%' and leading/trailing spaces (symlinks)
 *   x-amz-meta-xattrs   the xattrs as in manifests, when they fit in
 *                       PROTO_META_XATTRS_MAX and every name is printable
 *                       ASCII without '"' or '\' (else: manifest only)
 * proto_object_meta writes them, proto_object_meta_parse reads them back
 * (fs/ops.c, for files outside manifests).
 *
 * xattrs have two forms:
 *   - the blob (in memory, the journal, the overlay): records of the
 *     name, a NUL, the value's length as 4 bytes little-endian, then the
 *     value's bytes (values may hold NULs);
 *   - JSON (manifests and object metadata): {"name":"base64",...}.
 * proto_xattrs_json and proto_xattrs_decode convert, once for everyone.
 */
#ifndef CKPTFS_PROTO_META_H
#define CKPTFS_PROTO_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "s3/client.h"
#include "util/buf.h"

struct json_t;

/* Attributes as the format records them (owned copies). */
typedef struct proto_meta {
	uint32_t mode, uid, gid;
	int64_t mtime_ns;
	uint64_t rdev; /* device nodes */
	char *xattrs; /* the blob, or NULL */
	size_t xattrs_len;
	char *symlink;
} proto_meta;

void proto_meta_free(proto_meta *m);

/*
 * Times: "mtime" is signed ns since the epoch, so the format keeps every
 * time from 1677-09-21 to 2262-04-11 (negative before 1970).  0 means
 * "not recorded" (writers before this rule, and a rename's copy of an
 * object another tool wrote, store 0): readers then show the object's
 * LastModified.  A writer refuses to record a time the format cannot
 * keep (proto_time_ok: EINVAL at utimensat, doc/posix.md).
 */
struct timespec;
/* Whether ts can be recorded exactly as an mtime (not 0, in range). */
bool proto_time_ok(const struct timespec *ts);
/* ts as ns (ts must be proto_time_ok or 0). */
int64_t proto_time_ns(const struct timespec *ts);
/* ns (a recorded mtime, negative before 1970) as a timespec, tv_nsec in
 * [0, 1e9). */
void proto_ns_time(int64_t ns, struct timespec *ts);

/* The file type a recorded mode stands for: S_IFIFO, S_IFSOCK, S_IFCHR or
 * S_IFBLK when its type bits say so, else S_IFREG (no bits, or bits that
 * name no special file: a regular file, as readers before special files
 * took it). */
uint32_t proto_mode_type(uint32_t mode);
/* The mode as a recorded special or regular file shows it: its type (as
 * above) with its permission bits. */
uint32_t proto_file_mode(uint32_t mode);

/* ---- xattrs ------------------------------------------------------------ */

/* Appends one record to a blob. */
int proto_xattr_append(buf *b, const char *name, const void *val,
		       uint32_t len);
/* Iterates a blob: returns false at the end or on a malformed blob. */
bool proto_xattr_next(const char *blob, size_t len, size_t *pos,
		      const char **name, const char **val, uint32_t *vlen);
/* The blob's records as a JSON object {"name":"base64",...} (new
 * reference), in blob order; NULL when a name cannot be a JSON key (not
 * UTF-8) or out of memory.  A malformed blob ends at its last good
 * record. */
struct json_t *proto_xattrs_json(const char *blob, size_t len);
/* Appends the records of JSON object text {"name":"base64",...} to blob,
 * in the object's order.  A value that is not valid base64 is left out;
 * one that is not a string counts as empty.  NULL or text that is not a
 * JSON object: nothing.  -1 when out of memory. */
int proto_xattrs_decode(const char *json, buf *blob);

/* ---- object metadata ---------------------------------------------------- */

#define PROTO_META_N 7
#define PROTO_META_XATTRS_MAX 1024 /* larger xattrs: manifest only */
/* A symlink target longer than this once percent-encoded: manifest only
 * (S3 takes 2 KiB of metadata in all, the xattrs pair may use 1 KiB) */
#define PROTO_META_SYMLINK_MAX 768
/* Whether target goes into an object's symlink pair. */
bool proto_meta_symlink_fits(const char *target);

/*
 * x-amz-meta-* pairs for an object (see above).  Strings live in store
 * (freed by the caller).  Returns the number of pairs written to out.
 */
size_t proto_object_meta(const proto_meta *m, s3_meta out[PROTO_META_N],
			 buf *store);

/* Which pairs proto_object_meta_parse found. */
#define PROTO_HAS_MODE 0x01u
#define PROTO_HAS_UID 0x02u
#define PROTO_HAS_GID 0x04u
#define PROTO_HAS_MTIME 0x08u
#define PROTO_HAS_SYMLINK 0x10u
#define PROTO_HAS_XATTRS 0x20u
#define PROTO_HAS_RDEV 0x40u

/*
 * Reads an object's metadata pairs (names without the x-amz-meta- prefix,
 * lower case; others ignored) into *m (zeroed first; symlink decoded and
 * owned; m->xattrs left empty).  *xattrs_json gets the "xattrs" value as
 * stored (JSON text, malloc'd; decode with proto_xattrs_decode) or NULL.
 * Returns the PROTO_HAS_* bits of the pairs present; a file written by
 * ckptfs has at least PROTO_HAS_MODE.  Free m with proto_meta_free.
 */
unsigned proto_object_meta_parse(const s3_meta *kv, size_t n, proto_meta *m,
				 char **xattrs_json);

#endif
