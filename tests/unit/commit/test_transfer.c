/* Unit test for the engine's digest of staging files (commit/transfer.c):
 * the block checksums a single PUT and a multipart upload record, and a
 * BadDigest after the bytes changed under the upload. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
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

static s3_err bad_digest(void)
{
	s3_err x = {0};
	x.err = EIO;
	x.http_status = 400;
	snprintf(x.code, sizeof x.code, "BadDigest");
	snprintf(x.msg, sizeof x.msg, "PUT k: BadDigest (HTTP 400)");
	return x;
}

/* A BadDigest for bytes that changed after their digest is retried (a
 * local, transient error naming the key); one for the same bytes stays
 * final, and other errors are left as they are. */
Test(proto, bad_digest_after_the_bytes_changed_is_transient)
{
	char path[] = "/tmp/proto-changed-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	unlink(path);
	uint64_t size = 3 * 1024 * 1024 + 5;
	unsigned char *b = pattern(size);
	cr_assert_eq(write(fd, b, size), (ssize_t)size);
	char md5[25];
	uint32_t crc;
	cr_assert_eq(eng_digest(fd, 1024, size - 1024, md5, &crc, NULL), 0);

	s3_err x = bad_digest();
	eng_changed_during_upload(fd, 1024, size - 1024, md5, "pfx/k", &x);
	cr_assert_str_eq(x.code, "BadDigest", "the same bytes: still final");
	cr_assert_not(eng_err_transient(&x));

	cr_assert_eq(pwrite(fd, "X", 1, 0), 1); /* outside the range */
	eng_changed_during_upload(fd, 1024, size - 1024, md5, "pfx/k", &x);
	cr_assert_not(eng_err_transient(&x));

	cr_assert_eq(pwrite(fd, "X", 1, (off_t)size - 1), 1);
	eng_changed_during_upload(fd, 1024, size - 1024, md5, "pfx/k", &x);
	cr_assert(eng_err_transient(&x), "changed bytes: tried again");
	cr_assert_eq(x.http_status, 0);
	cr_assert_not_null(strstr(x.msg, "pfx/k"), "%s", x.msg);

	s3_err other = bad_digest();
	snprintf(other.code, sizeof other.code, "AccessDenied");
	other.http_status = 403;
	eng_changed_during_upload(fd, 1024, size - 1024, md5, "pfx/k", &other);
	cr_assert_str_eq(other.code, "AccessDenied");
	cr_assert_not(eng_err_transient(&other));
	free(b);
	close(fd);
}
