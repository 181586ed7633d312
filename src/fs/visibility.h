/*
 * vis: what readers see of transactions written by ckptfs mounts (the
 * reader half of the commit protocol, doc/commit.md).
 *
 * Pending markers: P/.ckptfs-pending/<C>/<writer>@<lease-seconds>.  A child
 * C of P with a live marker (LastModified + lease later than the server's
 * clock at listing time) is hidden: its transaction is in progress.
 *
 * Manifests: C/.ckptfs/manifest.<writer>.json (and addenda
 * manifest.<writer>.<txn>.json, written by transactions committed inside
 * C later), JSON
 *   {"version":1, "writer":W, "state":"pending"|"committed", "txn":N,
 *    "time":NS,
 *    "files":[{"path":"sub/x.pt","size":N,"etag":"\"...\"",
 *              "crc32c":"hex", "block":8388608, "blocks":"hex...",
 *              "mode":420, "uid":0, "gid":0,
 *              "mtime":NS, "xattrs":{"user.k":"base64"},
 *              "symlink":"target"}, ...],
 *    "dirs":[{"path":"sub/empty","mode":493,"uid":0,"gid":0,
 *             "mtime":NS}, ...]}
 * Only "state", and "path" and "size" of files, are required.  crc32c is
 * the standard CRC-32C (RFC 3720) of the object, 8 hex digits; "blocks"
 * holds the standard CRC-32C of each "block"-byte block of it (8 hex
 * digits each, the last block short: commit/protocol.h).  A block list
 * that does not fit the size (wrong length, a bad digit, a block size out
 * of range) is ignored with a warning: the file shows, unverified.
 * A directory holding manifests shows exactly the union of the files of its
 * committed manifests (paths relative to C), plus the directories of
 * "dirs" (empty directories); pending manifests add nothing.
 * The "time" rule: when several committed manifests name the same path
 * (an addendum overwriting a file, two writers), the entry of the manifest
 * with the greatest "time" (the writer's clock at commit, ns since the
 * epoch; absent = 0) wins, ties going to the one added last.
 * A directory whose manifests are all pending, with no live marker left,
 * is an abandoned transaction and is hidden too.  Directories without
 * manifests (written by other tools) show every key.
 */
#ifndef CKPTFS_FS_VISIBILITY_H
#define CKPTFS_FS_VISIBILITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "fs/namespace.h"

#define VIS_PENDING_DIR ".ckptfs-pending"
#define VIS_META_DIR ".ckptfs"

typedef struct vis_file {
	char *path; /* relative to the transaction root */
	uint64_t size;
	char *etag;
	uint32_t crc32c;
	bool has_crc;
	/* block checksums, when the manifest has a valid list: block size
	 * and hex list (commit/protocol.h); blocks NULL otherwise */
	uint32_t block;
	char *blocks;
	/* attributes, when the manifest has them (has_attrs) */
	bool has_attrs;
	uint32_t mode, uid, gid;
	int64_t mtime_ns;
	char *symlink;     /* NULL: not a symlink */
	char *xattrs_json; /* the "xattrs" object as compact JSON, or NULL */
	int64_t time;      /* "time" of the manifest it came from */
	size_t order;      /* order of addition (ties of the time rule) */
} vis_file;

/* The union of a transaction root's committed manifests. */
typedef struct vis_manifest {
	vis_file *files; /* sorted by path, unique */
	size_t n, cap;
	size_t committed, pending; /* manifests seen of each state */
	char **dirs; /* "dirs" paths of committed manifests, sorted, unique */
	size_t n_dirs, cap_dirs;
	size_t added; /* files ever added (vis_file.order) */
} vis_manifest;

void vis_manifest_init(vis_manifest *m);
void vis_manifest_free(vis_manifest *m);

/* Adds one manifest document.  Returns -1 (and *err, malloc'd) when it is
 * not a valid manifest; the caller then ignores it. */
int vis_manifest_add_json(vis_manifest *m, const char *json, size_t len,
			  char **err);
/* Sorts and de-duplicates after the last add. */
void vis_manifest_finish(vis_manifest *m);

const vis_file *vis_manifest_find(const vis_manifest *m, const char *path);

/* v's block CRCs decoded: *crc (malloc'd) and *n; -1 when v has none. */
int vis_file_blocks(const vis_file *v, uint32_t **crc, size_t *n);
/* Whether some file or listed directory lies under directory rel ("" = the
 * root itself), or rel is a listed directory. */
bool vis_manifest_has_dir(const vis_manifest *m, const char *rel);

/*
 * Parses a marker key relative to P/.ckptfs-pending/ ("C/W@60").  Fills
 * child (malloc'd) and lease; returns -1 for keys that are not markers.
 */
int vis_parse_marker(const char *rel, char **child, unsigned *lease);

/* Whether a marker written at last_modified with lease is live at now. */
bool vis_marker_live(time_t last_modified, unsigned lease, time_t now);

/*
 * Filters a finished listing of directory rel (relative to the transaction
 * root of m; "" for the root) down to what m makes visible.  m may be NULL
 * (no manifests: nothing is removed).
 */
void vis_filter_listing(ns_dir *d, const vis_manifest *m, const char *rel);

/* Removes the entries named in hidden[0..n) from a finished listing. */
void vis_hide_names(ns_dir *d, char *const *hidden, size_t n);

/* Removes the entries of d whose name is not in again (a later listing of
 * the same directory, finished). */
void vis_keep_listed(ns_dir *d, const ns_dir *again);

/*
 * Where the markers of directory dir_prefix ("P/C/", ending in '/') itself
 * live: "P/.ckptfs-pending/C/" (malloc'd), or NULL for "" (the bucket's
 * root has no parent) or no memory.
 */
char *vis_own_markers_prefix(const char *dir_prefix);

/* Removes every entry (a directory being created, deleted or renamed onto
 * by a ckptfs writer shows nothing inside). */
void vis_hide_all(ns_dir *d);

/* Whether listing d (finished) of a transaction root lacks a name that a
 * file of m (the root's manifests) needs: a file deleted since, or the
 * whole directory on its way out. */
bool vis_listing_misses(const ns_dir *d, const vis_manifest *m);

#endif
