/*
 * proto/manifest: the manifest document (doc/commit.md), written by the
 * commit engine and read by every reader (fs/listing.c, the rename step
 * of commit/steps.c, commit/gc.c).
 *
 * A transaction root C holds C/.ckptfs/manifest.<writer>.json, and
 * transactions committed inside C later add addenda
 * manifest.<writer>.<txn>.json there (proto/keys.h).  The document:
 *   {"version":1, "writer":W, "state":"pending"|"committed", "txn":N,
 *    "time":NS,
 *    "files":[{"path":"sub/x.pt","size":N,"etag":"\"...\"",
 *              "crc32c":"hex", "block":8388608, "blocks":"hex...",
 *              "mode":420, "uid":0, "gid":0,
 *              "mtime":NS, "xattrs":{"user.k":"base64"},
 *              "symlink":"target", "rdev":N}, ...],
 *    "dirs":[{"path":"sub/empty","mode":493,"uid":0,"gid":0,
 *             "mtime":NS, "xattrs":{...}, "parent":true}, ...],
 *    "dir":{"mode":493,"uid":0,"gid":0,"mtime":NS, "xattrs":{...}}}
 * "dirs" lists the directories the transaction made below C with their
 * attributes, "dir" holds C's own (a proto_mdir with path "" when
 * writing; vis_manifest_dir(m, "") reading), xattrs included.  "mtime"
 * is signed ns, 0 for "not recorded" (proto/meta.h).  "parent" marks a
 * directory an addendum records again, outside its transaction (the one
 * it made a name in, or stored a file of again).  Paths are relative to C.
 * Only "state", and "path" and "size" of files, are required; a pending document (the writer's intent) has no files.
 * "time" is the writer's wall clock at commit (the time rule,
 * proto/visibility.h; absent = 0).  crc32c is the standard CRC-32C of the
 * object, 8 hex digits; "blocks" holds the standard CRC-32C of each
 * "block"-byte block of it (proto/crc.h).  Attributes and xattrs are as
 * in proto/meta.h: a special file's "mode" carries its type bits
 * (S_IFIFO...), a device node's "rdev" its device number (doc/posix.md).
 *
 * Writer side (proto_*): proto_manifest_json and proto_intent_json.
 * Reader side (vis_*, what the manifests make visible): vis_manifest is
 * the union of one root's manifests.  Each document is added whole or not
 * at all (a path that is absolute, empty or has "."/".." components, a
 * size that is not a non-negative integer, a bad "dirs" entry reject it);
 * a block list that does not fit the size (wrong length, a bad digit, a
 * block size out of range) is dropped with one warning per document: the
 * file shows, unverified.  vis_manifest_finish then applies the time
 * rule: when several committed documents name one path, the entry of the
 * one with the greatest "time" wins, ties going to the one added last.
 * A directory's winning entry also carries in "since" the time of the
 * first of the newest documents that all recorded it as it is now (the
 * later ones as a "parent").
 */
#ifndef CKPTFS_PROTO_MANIFEST_H
#define CKPTFS_PROTO_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/meta.h"

/* ---- writer ------------------------------------------------------------ */

/* One file of a committed manifest. */
typedef struct proto_mfile {
	const char *path; /* relative to the manifest's directory */
	uint64_t size;
	const char *etag;
	uint32_t crc32c;
	bool has_crc;
	const proto_meta *m; /* NULL: no attributes */
	/* block checksums: hex list (8 digits per block), NULL for none; a
	 * list that does not fit size and block is left out */
	uint32_t block;
	const char *blocks;
} proto_mfile;

typedef struct proto_mdir {
	const char *path;
	const proto_meta *m;
	/* "parent": recorded again as the committed directory the
	 * transaction made a name in or stored a file of again */
	bool parent;
} proto_mdir;

/*
 * The committed manifest (malloc'd JSON text), "time": time_ns.  NULL on
 * a path or xattr name that is not UTF-8 (cannot be JSON).
 */
char *proto_manifest_json(const char *writer, uint64_t txn, int64_t time_ns,
			  const proto_mfile *f, size_t nf, const proto_mdir *d,
			  size_t nd);
/* {"version":1,"writer":W,"state":"pending","txn":N} */
char *proto_intent_json(const char *writer, uint64_t txn);

/*
 * A rename's manifest at the new name is committed only once the rename
 * passed its commit point, the delete record of the old name
 * (doc/commit.md, "Deletes and renames"): it carries "renamed_from", the
 * old name relative to the new one (proto_rel_path).  The writer rewrites
 * it without once past that point; a reader of a manifest that still has
 * it counts it as committed when the writer's delete record of the old
 * name exists, or when no key under the old name is older than the
 * manifest (the rename finished, its record gone with it).
 */
/* json (a committed manifest) with "renamed_from": from; malloc'd. */
char *proto_manifest_with_from(const char *json, const char *from);
/* 1 with *from and *writer (malloc'd) when the document carries
 * "renamed_from", 0 when not, -1 when it is not JSON. */
int proto_manifest_renamed_from(const char *json, size_t len, char **from,
				char **writer);

/*
 * The format's version, written as every manifest's "version" (absent or
 * unreadable: 1).  1: before issue 21 (a directory commit's commit point
 * was its marker's DELETE; deletes and renames relied on a marker's
 * lease).  2: a writer's own committed manifest is its commit point and
 * outranks its older marker; delete records; "renamed_from"
 * (doc/commit.md, "Format versions").  Readers of 2 read 1.
 */
#define PROTO_FORMAT 2

/* The largest manifest any reader reads (ckptfs writes far smaller ones:
 * a line per file); a larger one is ignored. */
#define PROTO_MANIFEST_MAX (64u << 20)
int proto_manifest_version(const char *json, size_t len);

/* A manifest document's "state" and "txn": 0 with *committed and *txn (0
 * when absent), -1 when it is not a manifest. */
int proto_manifest_state(const char *json, size_t len, bool *committed,
			 uint64_t *txn);

/* ---- reader ------------------------------------------------------------ */

typedef struct vis_file {
	char *path; /* relative to the transaction root */
	uint64_t size;
	char *etag;
	uint32_t crc32c;
	bool has_crc;
	/* block checksums, when the manifest has a valid list: block size
	 * and hex list (proto/crc.h); blocks NULL otherwise */
	uint32_t block;
	char *blocks;
	/* attributes, when the manifest has them (has_attrs) */
	bool has_attrs;
	uint32_t mode, uid, gid; /* mode: as proto_meta's (proto/meta.h) */
	int64_t mtime_ns;
	uint64_t rdev;           /* device nodes: "rdev" */
	char *symlink;     /* NULL: not a symlink */
	char *xattrs_json; /* the "xattrs" object as compact JSON, or NULL */
	int64_t time;      /* "time" of the manifest it came from */
	size_t order;      /* order of addition (ties of the time rule) */
	/* directories (dattrs): "parent" (proto_mdir), and the "time" of
	 * the oldest manifest of the run of newest ones that recorded these
	 * same attributes, each but the oldest as a parent (a commit that
	 * stored a file of it again keeps it) */
	bool parent;
	int64_t since;
} vis_file;

/* The union of a transaction root's committed manifests. */
typedef struct vis_manifest {
	vis_file *files; /* sorted by path, unique (after finish) */
	size_t n, cap;
	size_t committed, pending; /* manifests seen of each state */
	char **dirs; /* "dirs" paths of committed manifests, sorted, unique */
	size_t n_dirs, cap_dirs;
	/* the "dirs" entries that carry attributes (path, has_attrs, mode,
	 * uid, gid, mtime_ns, time, order), sorted, unique by the time rule */
	vis_file *dattrs;
	size_t n_dattrs, cap_dattrs;
	size_t added; /* files ever added (vis_file.order) */
} vis_manifest;

void vis_manifest_init(vis_manifest *m);
void vis_manifest_free(vis_manifest *m);

/* Adds one manifest document.  Returns -1 (and *err, malloc'd) when it is
 * not a valid manifest; the caller then ignores it. */
int vis_manifest_add_json(vis_manifest *m, const char *json, size_t len,
			  char **err);
/* Sorts and de-duplicates (the time rule) after the last add. */
void vis_manifest_finish(vis_manifest *m);

const vis_file *vis_manifest_find(const vis_manifest *m, const char *path);
/* The attributes a "dirs" entry recorded for directory path, or NULL. */
const vis_file *vis_manifest_dir(const vis_manifest *m, const char *path);
/* Whether some file or listed directory lies under directory rel ("" = the
 * root itself), or rel is a listed directory. */
bool vis_manifest_has_dir(const vis_manifest *m, const char *rel);

/* v's block CRCs decoded: *crc (malloc'd) and *n; -1 when v has none. */
int vis_file_blocks(const vis_file *v, uint32_t **crc, size_t *n);
/* v's attributes as the format's proto_meta (owned copies, xattrs as a
 * blob): mode 0644 and no owner when the manifest recorded none.  Free
 * with proto_meta_free. */
void vis_file_meta(const vis_file *v, proto_meta *m);

#endif
