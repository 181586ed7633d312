/*
 * Tests for the cache's check of downloads against a manifest's block
 * checksums (cache.h, cache_file_open_expect): how block CRCs map onto an
 * entry's chunks (one block per chunk, several combined, or no check), and
 * what a chunk that lands with another CRC becomes (missing again for
 * CACHE_VERIFY_RETRIES downloads, then failed with EIO).
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <isa-l.h>
#include <stdlib.h>
#include <string.h>

#include "cache/internal.h"
#include "proto/crc.h"
#include "util/log.h"

static void quiet(void)
{
	log_init(LOG_LVL_ERROR, false);
}

static unsigned char *pattern(size_t n)
{
	unsigned char *b = malloc(n);
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)(i * 2654435761u >> 11);
	return b;
}

/* A centry as cache.c builds it: key, size, chunking, per-chunk arrays. */
static centry *entry(uint64_t size, uint32_t chunk_size)
{
	centry *e = calloc(1, sizeof *e);
	e->key = (char *)"ckpt/model.pt";
	e->size = size;
	e->chunk_size = chunk_size;
	e->n_chunks = (uint32_t)((size + chunk_size - 1) / chunk_size);
	e->state = calloc(e->n_chunks + 1, 1);
	e->not_before = calloc(e->n_chunks + 1, sizeof *e->not_before);
	e->mismatches = calloc(e->n_chunks + 1, 1);
	return e;
}

static void entry_free(centry *e)
{
	free(e->state);
	free(e->not_before);
	free(e->mismatches);
	free(e->expect);
	free(e);
}

/* Raw CRC of a chunk as the fetcher computes it. */
static uint32_t raw_crc(const unsigned char *b, size_t n)
{
	return crc32_iscsi((unsigned char *)b, (int)n, 0xFFFFFFFFu);
}

/* Block CRCs (standard) of b, as a manifest records them. */
static uint32_t *blocks_of(const unsigned char *b, uint64_t size,
			   uint32_t block, size_t *n)
{
	*n = (size_t)proto_block_count(size, block);
	uint32_t *v = calloc(*n + 1, sizeof *v);
	for (size_t i = 0; i < *n; i++) {
		uint64_t off = i * (uint64_t)block;
		uint64_t len = size - off < block ? size - off : block;
		v[i] = proto_crc32c(0, b + off, len);
	}
	return v;
}

Test(verify, one_block_per_chunk, .init = quiet)
{
	const uint32_t B = 64 * 1024;
	uint64_t size = 3 * (uint64_t)B + 100;
	unsigned char *b = pattern(size);
	size_t n;
	uint32_t *blk = blocks_of(b, size, B, &n);
	centry *e = entry(size, B);
	cache_expect x = {B, n, blk};
	uint32_t *m = chunk_expect_map(e, &x);
	cr_assert_not_null(m);
	for (uint32_t i = 0; i < e->n_chunks; i++) {
		uint64_t off = i * (uint64_t)B;
		uint64_t len = size - off < B ? size - off : B;
		cr_assert_eq(m[i], raw_crc(b + off, len), "chunk %u", i);
	}
	free(m);
	entry_free(e);
	free(blk);
	free(b);
}

/* An entry cached before in larger chunks (another part_size): the
 * blocks' CRCs are combined per chunk. */
Test(verify, chunks_of_several_blocks_combine, .init = quiet)
{
	const uint32_t B = 64 * 1024;
	uint64_t sizes[] = {4 * (uint64_t)B, 5 * (uint64_t)B + 1, B - 3};
	for (size_t k = 0; k < 3; k++) {
		uint64_t size = sizes[k];
		unsigned char *b = pattern(size);
		size_t n;
		uint32_t *blk = blocks_of(b, size, B, &n);
		centry *e = entry(size, 2 * B);
		cache_expect x = {B, n, blk};
		uint32_t *m = chunk_expect_map(e, &x);
		cr_assert_not_null(m);
		for (uint32_t i = 0; i < e->n_chunks; i++) {
			uint64_t off = i * 2 * (uint64_t)B;
			uint64_t len =
			    size - off < 2 * B ? size - off : 2 * (uint64_t)B;
			cr_assert_eq(m[i], raw_crc(b + off, len),
				     "size %llu chunk %u",
				     (unsigned long long)size, i);
		}
		free(m);
		entry_free(e);
		free(blk);
		free(b);
	}
}

Test(verify, unmappable_or_wrong_lists_are_not_used, .init = quiet)
{
	const uint32_t B = 64 * 1024;
	uint64_t size = 4 * (uint64_t)B;
	unsigned char *b = pattern(size);
	size_t n;
	uint32_t *blk = blocks_of(b, size, B, &n);
	centry *e = entry(size, B + B / 2); /* not a multiple */
	cache_expect x = {B, n, blk};
	cr_assert_null(chunk_expect_map(e, &x));
	entry_free(e);
	e = entry(size, B);
	cache_expect shorter = {B, n - 1, blk};
	cr_assert_null(chunk_expect_map(e, &shorter), "list of another size");
	cache_expect none = {B, n, NULL};
	cr_assert_null(chunk_expect_map(e, &none));
	cr_assert_null(chunk_expect_map(e, NULL));
	entry_free(e);
	free(blk);
	free(b);
}

/* A chunk that lands with the wrong CRC is never done: missing again (no
 * backoff) for CACHE_VERIFY_RETRIES more downloads, then failed with EIO. */
Test(verify, mismatch_retries_then_fails, .init = quiet)
{
	cache c;
	memset(&c, 0, sizeof c);
	centry *e = entry(3 * 4096, 4096);
	e->expect = calloc(3, sizeof *e->expect);
	e->expect[0] = 0x11111111u;
	e->expect[1] = 0x22222222u;
	e->expect[2] = 0x33333333u;
	e->state[1] = CH_INFLIGHT;
	e->not_before[1] = 1e9;
	cr_assert(chunk_expected(&c, e, 0, 0x11111111u), "right bytes");
	cr_assert_eq(c.verify_failures, 0);
	for (unsigned k = 0; k < CACHE_VERIFY_RETRIES; k++) {
		e->state[1] = CH_INFLIGHT;
		cr_assert_not(chunk_expected(&c, e, 1, 0xdeadbeefu));
		cr_assert_eq(e->state[1], CH_MISSING, "download %u", k + 1);
		cr_assert_eq(e->not_before[1], 0, "fetched again at once");
		cr_assert_not(e->failed);
	}
	e->state[1] = CH_INFLIGHT;
	cr_assert_not(chunk_expected(&c, e, 1, 0xdeadbeefu));
	cr_assert_eq(e->state[1], CH_FAILED);
	cr_assert(e->failed);
	cr_assert_eq(e->err, EIO);
	cr_assert_eq(c.verify_failures, CACHE_VERIFY_RETRIES + 1);
	/* the other chunks are unaffected */
	cr_assert(chunk_expected(&c, e, 2, 0x33333333u));
	/* no expectations: everything lands */
	centry *plain = entry(4096, 4096);
	cr_assert(chunk_expected(&c, plain, 0, 0x12345678u));
	entry_free(plain);
	entry_free(e);
}
