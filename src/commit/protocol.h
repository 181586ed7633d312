/*
 * proto: the pure pieces of the commit protocol (doc/commit.md), kept apart
 * from threads and I/O so they are unit-tested on their own:
 *
 *   - remote key names: objects, pending markers, manifests, addenda;
 *   - the committed manifest document (JSON, read back by fs/visibility.c);
 *   - object metadata (x-amz-meta-mode/uid/gid/mtime/symlink);
 *   - CRC32C as the manifest records it, and combining part CRCs;
 *   - temp-name patterns, writer ids, the xattr blob of eng_meta;
 *   - the ordering rules of the visibility queue (proto_overlap,
 *     proto_upload_blocked).
 *
 * CRC32C convention: the manifest's "crc32c" is the standard CRC-32C
 * (Castagnoli, RFC 3720, the value AWS sends as x-amz-checksum-crc32c),
 * e.g. "e3069283" for "123456789", written as 8 lowercase hex digits.
 * ISA-L's crc32_iscsi(buf, len, init) returns the raw register without the
 * final inversion, so standard = ~crc32_iscsi(buf, len, ~previous_standard)
 * (previous_standard = 0 for the first block): proto_crc32c does this.
 */
#ifndef CKPTFS_COMMIT_PROTOCOL_H
#define CKPTFS_COMMIT_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "commit/engine.h"
#include "s3/client.h"
#include "util/buf.h"

#define PROTO_WRITER_MAX 96

/* Standard CRC-32C of data, continuing from crc (0 to start). */
uint32_t proto_crc32c(uint32_t crc, const void *data, size_t n);
/* CRC-32C of A||B from crc(A), crc(B) and len(B) (zlib's method). */
uint32_t proto_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

/*
 * Block checksums (doc/commit.md, "Block checksums"): besides the whole
 * file's "crc32c", a manifest entry records the standard CRC-32C of each
 * PROTO_BLOCK-byte block of the file (aligned offsets 0, block, 2 block,
 * ...; the last block short), as "block": size and "blocks": 8 lowercase
 * hex digits per block, so a reader can check each downloaded piece.
 */
#define PROTO_BLOCK (8u << 20)
/* Blocks a reader accepts: between 64 KiB and 1 GiB (cache chunk sizes). */
#define PROTO_BLOCK_MIN (64u << 10)
#define PROTO_BLOCK_MAX (1u << 30)

/* Number of blocks of a size-byte file (0 for an empty one). */
uint64_t proto_block_count(uint64_t size, uint32_t block);
/* Whether hex is a well-formed block list of a size-byte file: exactly
 * 8 hex digits per block, block within [PROTO_BLOCK_MIN, PROTO_BLOCK_MAX]. */
bool proto_blocks_valid(const char *hex, uint64_t size, uint32_t block);
/* Decodes n 8-digit CRCs of a valid list; -1 on a bad digit. */
int proto_blocks_decode(const char *hex, size_t n, uint32_t *out);
/* Appends one CRC as 8 lowercase hex digits. */
int proto_blocks_append(buf *hex, uint32_t crc);
/* Number of pieces [off, off+len) splits into at multiples of block (a
 * multipart part's "segments": each lies within one block). */
uint64_t proto_segment_count(uint64_t off, uint64_t len, uint32_t block);
/*
 * Block list of a multipart upload from its parts' segment CRCs: part i
 * covers [i*part_size, ...), segs[i] is the hex list of its segments'
 * standard CRC-32Cs (proto_segment_count of them).  Returns the malloc'd
 * hex block list, or NULL when a part's list is missing or malformed.
 */
char *proto_blocks_from_parts(uint64_t size, uint64_t part_size,
			      unsigned n_parts, char *const *segs,
			      uint32_t block);

/* Writer id: hostname reduced to [A-Za-z0-9-] (at most 40 characters,
 * "host" when nothing is left) + '-' + 8 random hex digits. */
void proto_writer_id(char out[PROTO_WRITER_MAX]);

/* Temp patterns: comma-separated fnmatch patterns, parsed once. */
typedef struct proto_pats {
	char **v;
	size_t n;
} proto_pats;
int proto_pats_parse(proto_pats *p, const char *spec);
void proto_pats_free(proto_pats *p);
bool proto_is_temp(const proto_pats *p, const char *path);
bool proto_has_temp(const proto_pats *p, const char *path);

/* Path helpers (mount-relative paths, no leading or trailing '/'). */
/* Whether a equals b or one lies under the other. */
bool proto_overlap(const char *a, const char *b);
/* Whether path equals dir or lies under it; *rest gets what follows. */
bool proto_under(const char *path, const char *dir, const char **rest);

/* Keys; prefix is "" or ends with '/'.  All malloc'd. */
char *proto_key(const char *prefix, const char *path);
/* prefix + parent(root) + ".ckptfs-pending/" + base(root) + "/" + W@lease */
char *proto_marker_key(const char *prefix, const char *root,
		       const char *writer, unsigned lease);
/* prefix + root + "/.ckptfs/manifest.W.json" */
char *proto_manifest_key(const char *prefix, const char *root,
			 const char *writer);
/* prefix + mroot + "/.ckptfs/manifest.W.<txn>.json" (an addendum) */
char *proto_addendum_key(const char *prefix, const char *mroot,
			 const char *writer, uint64_t txn);
/* Whether key (relative to a transaction root) is one of its manifests. */
bool proto_is_meta_key(const char *rel);

/* Attributes as the engine keeps them (owned copies). */
typedef struct proto_meta {
	uint32_t mode, uid, gid;
	int64_t mtime_ns;
	char *xattrs;
	size_t xattrs_len;
	char *symlink;
} proto_meta;

void proto_meta_from(proto_meta *d, const eng_meta *m);
void proto_meta_to(const proto_meta *s, eng_meta *m);
void proto_meta_free(proto_meta *m);

/*
 * x-amz-meta-* pairs for an object: mode (octal), uid, gid, mtime (ns),
 * symlink (target percent-encoded outside printable ASCII, '%' and
 * leading/trailing spaces), xattrs ({"name":"base64"} as in manifests,
 * when they fit in PROTO_META_XATTRS_MAX).  Strings live in store (freed
 * by the caller).  Returns the number of pairs written to out.
 */
#define PROTO_META_N 6
#define PROTO_META_XATTRS_MAX 1024 /* larger xattrs: manifest only */
size_t proto_object_meta(const proto_meta *m, s3_meta out[PROTO_META_N],
			 buf *store);

/* xattr blob: records "name\0" + 4-byte little-endian length + value. */
int proto_xattr_append(buf *b, const char *name, const void *val,
		       uint32_t len);
/* Iterates: returns false at the end or on a malformed blob. */
bool proto_xattr_next(const char *blob, size_t len, size_t *pos,
		      const char **name, const char **val, uint32_t *vlen);

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
} proto_mdir;

/*
 * The committed manifest (malloc'd JSON text):
 * {"version":1,"writer":W,"state":"committed","txn":N,"time":NS,
 *  "files":[{"path","size","etag","crc32c","block","blocks","mode","uid",
 *            "gid","mtime","xattrs":{name:base64},"symlink"}...],
 *  "dirs":[{"path","mode","uid","gid","mtime"}...]}
 * time_ns: the writer's wall clock at commit (the "time" rule of
 * fs/visibility.h).  NULL on a path that is not UTF-8 (cannot be JSON).
 */
char *proto_manifest_json(const char *writer, uint64_t txn, int64_t time_ns,
			  const proto_mfile *f, size_t nf, const proto_mdir *d,
			  size_t nd);
/* {"version":1,"writer":W,"state":"pending","txn":N} */
char *proto_intent_json(const char *writer, uint64_t txn);

/* ---- ordering ----------------------------------------------------------- */

/* One entry of the visibility queue as the ordering rules see it. */
typedef struct proto_step {
	const char *a, *b; /* paths it touches (b: a rename's target, or NULL) */
	bool done;         /* finished or aborted: constrains nothing */
} proto_step;

/*
 * Whether the upload of path, for the step at index self of q[0..n) (in
 * queue order), must wait: some earlier unfinished step touches an
 * overlapping path (a delete, rename or commit there must land first, or
 * its objects would be overwritten or deleted under it).
 */
bool proto_upload_blocked(const proto_step *q, size_t n, size_t self,
			  const char *path);

#endif
