/*
 * proto/crc: the checksums of the bucket format (doc/commit.md,
 * "Remote protocol" and "Block checksums"): the whole file's CRC-32C a
 * manifest entry records as "crc32c", and its list of block CRCs
 * ("block", "blocks").  Pure functions, shared by the writer
 * (commit/transfer.c, commit/visible.c) and the readers that check what
 * they download against a manifest (proto/manifest.c, cache/cache.c, the
 * uncached reads of fs/ops.c, the copy-on-write of fs/write-txn.c).
 *
 * CRC32C convention: the manifest's "crc32c" is the standard CRC-32C
 * (Castagnoli, RFC 3720, the value AWS sends as x-amz-checksum-crc32c),
 * e.g. "e3069283" for "123456789", written as 8 lowercase hex digits.
 * ISA-L's crc32_iscsi(buf, len, init) returns the raw register without the
 * final inversion, so standard = ~crc32_iscsi(buf, len, ~previous_standard)
 * (previous_standard = 0 for the first block): proto_crc32c does this.
 *
 * Block checksums: besides the whole file's "crc32c", a manifest entry
 * records the standard CRC-32C of each PROTO_BLOCK-byte block of the file
 * (aligned offsets 0, block, 2 block, ...; the last block short), as
 * "block": size and "blocks": 8 lowercase hex digits per block, so a
 * reader can check each downloaded piece.  A multipart writer cuts its
 * parts into *segments* at block boundaries and puts the list together
 * from them (proto_blocks_from_parts).
 */
#ifndef CKPTFS_PROTO_CRC_H
#define CKPTFS_PROTO_CRC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

/* Standard CRC-32C of data, continuing from crc (0 to start). */
uint32_t proto_crc32c(uint32_t crc, const void *data, size_t n);
/* CRC-32C of A||B from crc(A), crc(B) and len(B) (zlib's method). */
uint32_t proto_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

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

#endif
