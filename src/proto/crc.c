/*
 * proto/crc: CRC-32C (through ISA-L), combining CRCs (zlib's GF(2)
 * method, with the Castagnoli polynomial) and the hex block lists of
 * manifests (crc.h).  Pure functions.
 */
#include "proto/crc.h"
#include "util/hex.h"

#include <inttypes.h>
#include <isa-l/crc.h>
#include <stdlib.h>
#include <string.h>

/* ---- CRC32C ------------------------------------------------------------- */

uint32_t proto_crc32c(uint32_t crc, const void *data, size_t n)
{
	uint32_t reg = ~crc;
	const unsigned char *p = data;
	while (n > 0) {
		int take = n > (1u << 30) ? (1 << 30) : (int)n;
		reg = crc32_iscsi((unsigned char *)p, take, reg);
		p += take;
		n -= (size_t)take;
	}
	return ~reg;
}

static uint32_t gf2_times(const uint32_t *mat, uint32_t vec)
{
	uint32_t sum = 0;
	for (int i = 0; vec; vec >>= 1, i++)
		if (vec & 1)
			sum ^= mat[i];
	return sum;
}

static void gf2_square(uint32_t *sq, const uint32_t *mat)
{
	for (int i = 0; i < 32; i++)
		sq[i] = gf2_times(mat, mat[i]);
}

uint32_t proto_crc32c_combine(uint32_t a, uint32_t b, uint64_t len_b)
{
	uint32_t even[32], odd[32];
	if (len_b == 0)
		return a;
	odd[0] = 0x82F63B78u; /* reflected Castagnoli polynomial */
	uint32_t row = 1;
	for (int i = 1; i < 32; i++, row <<= 1)
		odd[i] = row;
	gf2_square(even, odd); /* 2 zero bits */
	gf2_square(odd, even); /* 4 zero bits */
	do {
		gf2_square(even, odd);
		if (len_b & 1)
			a = gf2_times(even, a);
		len_b >>= 1;
		if (!len_b)
			break;
		gf2_square(odd, even);
		if (len_b & 1)
			a = gf2_times(odd, a);
		len_b >>= 1;
	} while (len_b);
	return a ^ b;
}

/* ---- block checksums ---------------------------------------------------- */

uint64_t proto_block_count(uint64_t size, uint32_t block)
{
	return block ? (size + block - 1) / block : 0;
}

bool proto_blocks_valid(const char *hex, uint64_t size, uint32_t block)
{
	if (!hex || block < PROTO_BLOCK_MIN || block > PROTO_BLOCK_MAX)
		return false;
	uint64_t n = proto_block_count(size, block);
	size_t len = strlen(hex);
	if (n > SIZE_MAX / 8 || len != n * 8)
		return false;
	for (size_t i = 0; i < len; i++)
		if (hex_val(hex[i]) < 0)
			return false;
	return true;
}

int proto_blocks_decode(const char *hex, size_t n, uint32_t *out)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t v = 0;
		for (size_t k = 0; k < 8; k++) {
			int d = hex_val(hex[i * 8 + k]);
			if (d < 0)
				return -1;
			v = v << 4 | (uint32_t)d;
		}
		out[i] = v;
	}
	return 0;
}

int proto_blocks_append(buf *hex, uint32_t crc)
{
	return buf_printf(hex, "%08" PRIx32, crc) < 0 ? -1 : 0;
}

uint64_t proto_segment_count(uint64_t off, uint64_t len, uint32_t block)
{
	if (!len || !block)
		return 0;
	return (off + len - 1) / block - off / block + 1;
}

char *proto_blocks_from_parts(uint64_t size, uint64_t part_size,
			      unsigned n_parts, char *const *segs,
			      uint32_t block)
{
	if (!block || !part_size || !segs)
		return NULL;
	buf out = BUF_INIT;
	uint64_t pos = 0; /* bytes combined so far */
	uint32_t cur = 0; /* CRC of the current block so far */
	bool ok = buf_reserve(&out, 8 * proto_block_count(size, block) + 1) == 0;
	for (unsigned i = 0; ok && i < n_parts; i++) {
		uint64_t off = (uint64_t)i * part_size;
		if (off >= size && size) {
			ok = false;
			break;
		}
		uint64_t len = size - off < part_size ? size - off : part_size;
		uint64_t ns = proto_segment_count(off, len, block);
		if (!segs[i] || strlen(segs[i]) != ns * 8) {
			ok = false;
			break;
		}
		for (uint64_t k = 0; ok && k < ns; k++) {
			uint32_t crc = 0;
			ok = proto_blocks_decode(segs[i] + k * 8, 1, &crc) == 0;
			uint64_t end = (pos / block + 1) * block;
			if (end > off + len)
				end = off + len;
			uint64_t slen = end - pos;
			cur = pos % block ? proto_crc32c_combine(cur, crc, slen)
					  : crc;
			pos = end;
			if (ok && (pos % block == 0 || pos == size))
				ok = proto_blocks_append(&out, cur) == 0;
		}
	}
	if (!ok || pos != size) {
		buf_free(&out);
		return NULL;
	}
	return buf_steal(&out); /* "" for an empty file */
}
