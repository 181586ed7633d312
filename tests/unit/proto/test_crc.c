/* Unit tests for proto/crc: CRC-32C and its combination, block counts,
 * block list validation and decoding, block lists put together from
 * multipart segments. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "proto/crc.h"

Test(proto, crc32c_standard_value_and_chaining)
{
	cr_assert_eq(proto_crc32c(0, "123456789", 9), 0xe3069283u);
	cr_assert_eq(proto_crc32c(0, "", 0), 0);
	uint32_t a = proto_crc32c(0, "1234", 4);
	cr_assert_eq(proto_crc32c(a, "56789", 5), 0xe3069283u);
}

Test(proto, crc32c_combine_matches_whole)
{
	size_t n = 3 * 1024 * 1024 + 17;
	unsigned char *b = malloc(n);
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)(i * 7919 + (i >> 11));
	uint32_t whole = proto_crc32c(0, b, n);
	size_t cuts[] = {0, 1, 4096, 1024 * 1024, n - 1, n};
	for (size_t k = 0; k < sizeof cuts / sizeof *cuts; k++) {
		size_t c = cuts[k];
		uint32_t x = proto_crc32c(0, b, c);
		uint32_t y = proto_crc32c(0, b + c, n - c);
		cr_assert_eq(proto_crc32c_combine(x, y, n - c), whole,
			     "cut at %zu", c);
	}
	free(b);
}

/* ---- block checksums ---------------------------------------------------- */

#include "../support/blocks.h"

Test(proto, block_counts_and_validation)
{
	uint32_t B = PROTO_BLOCK;
	cr_assert_eq(proto_block_count(0, B), 0);
	cr_assert_eq(proto_block_count(1, B), 1);
	cr_assert_eq(proto_block_count(B, B), 1);
	cr_assert_eq(proto_block_count((uint64_t)B + 1, B), 2);
	cr_assert_eq(proto_segment_count(0, 0, B), 0);
	cr_assert_eq(proto_segment_count(0, B, B), 1);
	cr_assert_eq(proto_segment_count(5u << 20, 5u << 20, B), 2);
	cr_assert_eq(proto_segment_count(B - 1, 2, B), 2);
	cr_assert_eq(proto_segment_count(B, 2 * (uint64_t)B, B), 2);
	cr_assert(proto_blocks_valid("", 0, B));
	cr_assert(proto_blocks_valid("0123abcd", 10, B));
	cr_assert(proto_blocks_valid("0123ABCDffffffff", (uint64_t)B + 1, B));
	cr_assert_not(proto_blocks_valid(NULL, 10, B));
	cr_assert_not(proto_blocks_valid("0123abc", 10, B), "short");
	cr_assert_not(proto_blocks_valid("0123abcd00", 10, B), "long");
	cr_assert_not(proto_blocks_valid("0123abcd", (uint64_t)B + 1, B),
		      "one block missing");
	cr_assert_not(proto_blocks_valid("0123abcg", 10, B), "bad digit");
	cr_assert_not(proto_blocks_valid("0123abcd", 10, 4096), "tiny block");
	cr_assert_not(proto_blocks_valid("0123abcd", 10, 0));
	uint32_t v[2];
	cr_assert_eq(proto_blocks_decode("e3069283000000ff", 2, v), 0);
	cr_assert_eq(v[0], 0xe3069283u);
	cr_assert_eq(v[1], 0xffu);
	cr_assert_lt(proto_blocks_decode("e30692x3", 1, v), 0);
}

/* A multipart upload's parts (any part size, aligned to blocks or not)
 * give, through their segments, the same block list as the whole file. */
Test(proto, blocks_from_parts_match_direct_blocks)
{
	const uint32_t B = 64 * 1024;
	const uint64_t sizes[] = {1, B - 1, B, B + 1, 5 * (uint64_t)B + 12345};
	const uint64_t parts[] = {B, 3 * (uint64_t)B, 100000, 70000, 1u << 20};
	for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
		uint64_t size = sizes[si];
		unsigned char *b = pattern(size);
		char *want = direct_blocks(b, size, B);
		for (size_t pi = 0; pi < sizeof parts / sizeof *parts; pi++) {
			uint64_t ps = parts[pi];
			unsigned n = (unsigned)((size + ps - 1) / ps);
			char **segs = calloc(n, sizeof *segs);
			for (unsigned i = 0; i < n; i++) {
				uint64_t off = i * ps;
				uint64_t len = size - off < ps ? size - off : ps;
				buf h = BUF_INIT;
				while (len) {
					uint64_t edge = B - off % B;
					uint64_t take = len < edge ? len : edge;
					proto_blocks_append(
					    &h, proto_crc32c(0, b + off, take));
					off += take;
					len -= take;
				}
				segs[i] = buf_steal(&h);
				cr_assert_eq(strlen(segs[i]) / 8,
					     proto_segment_count(
						 i * ps,
						 size - i * ps < ps ? size - i * ps
								    : ps,
						 B));
			}
			char *got = proto_blocks_from_parts(size, ps, n, segs, B);
			cr_assert_not_null(got, "size %llu part %llu",
					   (unsigned long long)size,
					   (unsigned long long)ps);
			cr_assert_str_eq(got, want, "size %llu part %llu",
					 (unsigned long long)size,
					 (unsigned long long)ps);
			free(got);
			/* a part whose segments are unknown (journaled by an
			 * older version) or malformed: no list at all */
			char *keep = segs[n - 1];
			segs[n - 1] = NULL;
			cr_assert_null(
			    proto_blocks_from_parts(size, ps, n, segs, B));
			segs[n - 1] = strdup("0000");
			cr_assert_null(
			    proto_blocks_from_parts(size, ps, n, segs, B));
			free(segs[n - 1]);
			segs[n - 1] = keep;
			if (n > 1) { /* parts missing: the size is not reached */
				char *g = proto_blocks_from_parts(size, ps, n - 1,
								  segs, B);
				cr_assert_null(g);
			}
			for (unsigned i = 0; i < n; i++)
				free(segs[i]);
			free(segs);
		}
		free(want);
		free(b);
	}
}
