/*
 * proto/keys: the names of things in the bucket (doc/commit.md, "Remote
 * protocol"), as the writer makes them and the readers recognise them.
 *
 * For a transaction rooted at P/C written by writer W, under the mount's
 * key prefix (prefix is "" or ends with '/'; paths are mount-relative,
 * no leading or trailing '/'):
 *
 *   prefix P/C/<path>                        the objects
 *   prefix P/.ckptfs-pending/C/W@<lease>     its pending marker
 *   prefix P/.ckptfs-pending/C/W.gone@86400  a delete record: the commit
 *                                            point of a delete of P/C
 *                                            (doc/commit.md, "Deletes
 *                                            and renames")
 *   prefix P/C/.ckptfs/manifest.W.json       its manifest
 *   prefix M/.ckptfs/manifest.W.<txn>.json   an addendum, written into the
 *                                            directory M whose manifests
 *                                            govern the transaction
 *   prefix D/.ckptfs-meta/<name>             a metadata hint: the object
 *                                            D/<name>, outside manifests,
 *                                            carries ckptfs metadata
 *                                            (doc/commit.md, "Metadata
 *                                            hints")
 *
 * Names beginning with ".ckptfs" belong to ckptfs (PROTO_RESERVED): the
 * namespace rules (proto/namespace.h) hide them.  Reading markers back
 * (child, writer, lease; liveness) is the readers' side:
 * proto/visibility.h.
 *
 * Writer ids: hostname reduced to [A-Za-z0-9-] (at most 40 characters,
 * "host" when nothing is left) + '-' + 8 random hex digits.
 *
 * Temp names: comma-separated fnmatch patterns on one path component
 * (PROTO_DEFAULT_TEMP_PATTERNS unless configured); a writer uploads
 * nothing under such a name until a rename gives it a final one.
 *
 * Path rules: proto_under and proto_overlap say whether two mount-relative
 * paths lie on one branch.  They are the containment every rule of the
 * format uses (a manifest at M governs the paths under M, a marker hides
 * what lies under its root), which is why they live here and not with the
 * engine's queue that applies them most (commit/order.c).
 */
#ifndef CKPTFS_PROTO_KEYS_H
#define CKPTFS_PROTO_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Directory components of the format. */
#define PROTO_PENDING_DIR ".ckptfs-pending" /* P/.ckptfs-pending/C/W@lease */
#define PROTO_META_DIR ".ckptfs"            /* C/.ckptfs/manifest.W.json */
/* P/.ckptfs-probe/W/d/e/f: a writable mount's listing probe (s3/probe.h),
 * deleted again at once */
#define PROTO_PROBE_DIR ".ckptfs-probe"
/* D/.ckptfs-meta/NAME: a zero-byte hint that D/NAME carries ckptfs
 * metadata (x-amz-meta-mode...) outside any manifest */
#define PROTO_HINT_DIR ".ckptfs-meta"
/* Names beginning with this belong to ckptfs. */
#define PROTO_RESERVED ".ckptfs"

#define PROTO_WRITER_MAX 96

/* Writer id (see above) into out. */
void proto_writer_id(char out[PROTO_WRITER_MAX]);

#define PROTO_DEFAULT_TEMP_PATTERNS                                           \
	"*tmp*,*.tempstate*,*_temp,_checkpoint,*.__lock"

/* Temp patterns: comma-separated fnmatch patterns, parsed once. */
typedef struct proto_pats {
	char **v;
	size_t n, cap;
} proto_pats;
/* spec NULL: PROTO_DEFAULT_TEMP_PATTERNS. */
int proto_pats_parse(proto_pats *p, const char *spec);
void proto_pats_free(proto_pats *p);
/* Whether the last component of path matches a pattern. */
bool proto_is_temp(const proto_pats *p, const char *path);
/* Whether some component of path does (a file under a temp directory). */
bool proto_has_temp(const proto_pats *p, const char *path);

/* Path rules (mount-relative paths, no leading or trailing '/'). */
/* Whether a equals b or one lies under the other. */
bool proto_overlap(const char *a, const char *b);
/* Whether path equals dir or lies under it; *rest gets what follows. */
bool proto_under(const char *path, const char *dir, const char **rest);

/* The longest key S3 takes (bytes).  A writer refuses a name whose key
 * would be longer with ENAMETOOLONG (doc/commit.md, "Names the store
 * refuses"). */
#define PROTO_KEY_MAX 1024
/* Whether prefix + path (+ "/" for a directory: the prefix of the keys
 * under it) is a key S3 takes (at most PROTO_KEY_MAX bytes). */
bool proto_key_fits(const char *prefix, const char *path, bool is_dir);

/* Keys; prefix is "" or ends with '/'.  All malloc'd. */
char *proto_key(const char *prefix, const char *path);
/* prefix + parent(root) + ".ckptfs-pending/" + base(root) + "/" + W@lease */
char *proto_marker_key(const char *prefix, const char *root,
		       const char *writer, unsigned lease);
/* The delete record of root: the marker key of writer W.gone with lease
 * PROTO_GONE_LEASE.  Readers of this version treat it as live for ever
 * (proto/visibility.h); readers before it (format 1) parse it as a marker
 * of writer "W.gone" and hide root for a day, which is what it means. */
#define PROTO_GONE_SUFFIX ".gone"
#define PROTO_GONE_LEASE 86400u
char *proto_gone_key(const char *prefix, const char *root,
		     const char *writer);
/* The path of directory `to` relative to directory `from` (mount-relative
 * paths, as proto_under): "../ckpt-1" from "run/ckpt-2" to "run/ckpt-1".
 * Readers resolve it against the key of `from`'s directory
 * (proto_key_resolve), so it means the same under any mount prefix. */
char *proto_rel_path(const char *from, const char *to);
/* dir_key ("pre/run/ckpt-2/", ending in '/') + rel ("../ckpt-1") ->
 * "pre/run/ckpt-1/"; NULL when rel climbs above the bucket's root or is
 * empty. */
char *proto_key_resolve(const char *dir_key, const char *rel);
/* prefix + root + "/.ckptfs/manifest.W.json" */
char *proto_manifest_key(const char *prefix, const char *root,
			 const char *writer);
/* prefix + mroot + "/.ckptfs/manifest.W.<txn>.json" (an addendum) */
char *proto_addendum_key(const char *prefix, const char *mroot,
			 const char *writer, uint64_t txn);
/* prefix + parent(path) + ".ckptfs-meta/" + base(path): the metadata hint
 * of the object at path. */
char *proto_hint_key(const char *prefix, const char *path);
/* Whether key (a full key, or one relative to any directory) is a metadata
 * hint: its last component follows a ".ckptfs-meta" component.  When it
 * is, *name (if name is not NULL) points at that last component. */
bool proto_is_hint_key(const char *key, const char **name);
/* Whether key is under a PROTO_HINT_DIR directory at any depth (a hint,
 * or something only ckptfs would put there). */
bool proto_in_hint_dir(const char *key);
/* Whether key (relative to a transaction root) is one of its manifests. */
bool proto_is_meta_key(const char *rel);

/* Whether name (a key's part after ".ckptfs/") is a manifest's:
 * "manifest.*.json", no '/'. */
bool proto_is_manifest_name(const char *name);
/* Whether manifest name belongs to writer: manifest.W.json or
 * manifest.W.N.json (N digits). */
bool proto_manifest_of(const char *name, const char *writer);

#endif
