/*
 * Test support: a deterministic byte pattern and the block checksum list
 * of a buffer computed the direct way (block by block), which the block
 * code under test must agree with.  Included by unit tests only.
 */
#ifndef CKPTFS_TESTS_SUPPORT_BLOCKS_H
#define CKPTFS_TESTS_SUPPORT_BLOCKS_H

#include <stdint.h>
#include <stdlib.h>

#include "proto/crc.h"
#include "util/buf.h"

static inline unsigned char *pattern(size_t n)
{
	unsigned char *b = malloc(n ? n : 1);
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)(i * 2654435761u >> 13);
	return b;
}

/* The hex block list of b computed directly, block by block. */
static inline char *direct_blocks(const unsigned char *b, uint64_t size,
				  uint32_t block)
{
	buf h = BUF_INIT;
	for (uint64_t off = 0; off < size; off += block) {
		uint64_t len = size - off < block ? size - off : block;
		proto_blocks_append(&h, proto_crc32c(0, b + off, len));
	}
	return buf_steal(&h);
}

#endif
