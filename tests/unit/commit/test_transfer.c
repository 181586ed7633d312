/* Unit test for the engine's digest of staging files (commit/transfer.c):
 * the block checksums a single PUT and a multipart upload record. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commit/internal.h"

#include "../support/blocks.h"

/* The engine's digest of a multipart upload's parts (eng_digest segments,
 * parts of any size) gives the same block list as a single PUT's digest,
 * and both are the blocks of the file. */
Test(proto, digest_segments_give_the_file_blocks)
{
	char path[] = "/tmp/proto-digest-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	unlink(path);
	uint64_t size = 2 * (uint64_t)PROTO_BLOCK + 3 * 1024 * 1024 + 7;
	unsigned char *b = pattern(size);
	cr_assert_eq(write(fd, b, size), (ssize_t)size);
	char *want = direct_blocks(b, size, PROTO_BLOCK);
	char md5[25];
	uint32_t crc = 0;
	buf whole = BUF_INIT;
	cr_assert_eq(eng_digest(fd, 0, size, md5, &crc, &whole), 0);
	cr_assert_str_eq(buf_cstr(&whole), want);
	cr_assert_eq(crc, proto_crc32c(0, b, size));
	const uint64_t parts[] = {5u << 20, 8u << 20, 13u << 20};
	for (size_t pi = 0; pi < sizeof parts / sizeof *parts; pi++) {
		uint64_t ps = parts[pi];
		unsigned n = (unsigned)((size + ps - 1) / ps);
		char **segs = calloc(n, sizeof *segs);
		for (unsigned i = 0; i < n; i++) {
			uint64_t off = i * ps;
			uint64_t len = size - off < ps ? size - off : ps;
			buf h = BUF_INIT;
			cr_assert_eq(eng_digest(fd, off, len, md5, &crc, &h), 0);
			segs[i] = buf_steal(&h);
		}
		char *got = proto_blocks_from_parts(size, ps, n, segs,
						    PROTO_BLOCK);
		cr_assert_not_null(got);
		cr_assert_str_eq(got, want, "part size %llu",
				 (unsigned long long)ps);
		free(got);
		for (unsigned i = 0; i < n; i++)
			free(segs[i]);
		free(segs);
	}
	buf_free(&whole);
	free(want);
	free(b);
	close(fd);
}
