/*
 * Unit tests for the pure pieces of s3upload: part sizing, the
 * x-amz-copy-source encoding, XML safety of keys and the DeleteObjects
 * body, x-amz-meta-* header building, Content-MD5 and the multipart ETag.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "s3/upload.h"

#define MiB (1024ull * 1024)
#define GiB (1024 * MiB)
#define TiB (1024 * GiB)

/* ---- part size ---------------------------------------------------------- */

/* The invariants for any size and minimum. */
static void check_part(uint64_t size, uint64_t min)
{
	uint64_t p = s3_part_size(size, min);
	uint64_t want_min = min ? min : S3_DEFAULT_PART_SIZE;
	if (want_min < S3_MIN_PART_SIZE)
		want_min = S3_MIN_PART_SIZE;
	if (want_min > S3_MAX_PART_SIZE)
		want_min = S3_MAX_PART_SIZE;
	cr_assert_neq(p, 0, "size %llu", (unsigned long long)size);
	cr_assert_eq(p % MiB, 0, "size %llu: part %llu not whole MiB",
		     (unsigned long long)size, (unsigned long long)p);
	cr_assert_geq(p, want_min);
	cr_assert_geq(p, S3_MIN_PART_SIZE);
	cr_assert_leq(p, S3_MAX_PART_SIZE);
	uint64_t n = s3_part_count(size, p);
	cr_assert_leq(n, S3_MAX_PARTS, "size %llu: %llu parts of %llu",
		      (unsigned long long)size, (unsigned long long)n,
		      (unsigned long long)p);
	/* smallest such size: one MiB less would need too many parts, or be
	 * below the minimum */
	if (p > ((want_min + MiB - 1) / MiB) * MiB)
		cr_assert_gt(s3_part_count(size, p - MiB), S3_MAX_PARTS,
			     "size %llu: part %llu is not the smallest",
			     (unsigned long long)size, (unsigned long long)p);
}

Test(part_size, zero_and_tiny_objects_get_the_minimum)
{
	cr_assert_eq(s3_part_size(0, 0), 8 * MiB);
	cr_assert_eq(s3_part_size(1, 0), 8 * MiB);
	cr_assert_eq(s3_part_count(0, 8 * MiB), 1);
	cr_assert_eq(s3_part_count(1, 8 * MiB), 1);
	cr_assert_eq(s3_part_size(1, 16 * MiB), 16 * MiB);
}

Test(part_size, minimum_is_clamped_and_rounded)
{
	cr_assert_eq(s3_part_size(100, 1), 5 * MiB);
	cr_assert_eq(s3_part_size(100, 5 * MiB - 1), 5 * MiB);
	cr_assert_eq(s3_part_size(100, 5 * MiB + 1), 6 * MiB);
	cr_assert_eq(s3_part_size(100, 10 * GiB), 5 * GiB);
}

Test(part_size, exactly_ten_thousand_parts)
{
	uint64_t size = 10000 * 8 * MiB;
	cr_assert_eq(s3_part_size(size, 0), 8 * MiB);
	cr_assert_eq(s3_part_count(size, 8 * MiB), 10000);
	/* one byte more no longer fits in 8 MiB parts */
	cr_assert_eq(s3_part_size(size + 1, 0), 9 * MiB);
	cr_assert_leq(s3_part_count(size + 1, 9 * MiB), 10000);
	/* a part size that leaves exactly 10 000 whole parts */
	cr_assert_eq(s3_part_size(10000 * 100 * MiB, 0), 100 * MiB);
	cr_assert_eq(s3_part_count(10000 * 100 * MiB, 100 * MiB), 10000);
}

Test(part_size, five_tib)
{
	uint64_t p = s3_part_size(5 * TiB, 0);
	cr_assert_eq(p, 525 * MiB);
	cr_assert_leq(s3_part_count(5 * TiB, p), 10000);
	check_part(5 * TiB, 0);
	check_part(5 * TiB, 5 * GiB);
	check_part(5 * TiB - 1, 0);
	cr_assert_eq(s3_part_size(5 * TiB + 1, 0), 0, "above 5 TiB");
	cr_assert_eq(s3_part_size(UINT64_MAX, 0), 0);
}

Test(part_size, no_size_needs_more_than_ten_thousand_parts)
{
	static const uint64_t mins[] = {0, 1, 5 * MiB, 8 * MiB, 64 * MiB + 3,
					5 * GiB};
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t m = 0; m < sizeof mins / sizeof mins[0]; m++) {
		/* edges around every multiple of 10 000 MiB up to 5 TiB */
		for (uint64_t k = 1; k <= 525; k += 4) {
			uint64_t edge = k * 10000 * MiB;
			for (int d = -2; d <= 2; d++)
				if (edge + (uint64_t)d <= 5 * TiB)
					check_part(edge + (uint64_t)d, mins[m]);
		}
		for (int i = 0; i < 20000; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			check_part(x % (5 * TiB + 1), mins[m]);
			check_part(x % (200 * GiB), mins[m]);
		}
	}
}

Test(part_count, counts)
{
	cr_assert_eq(s3_part_count(10, 5), 2);
	cr_assert_eq(s3_part_count(11, 5), 3);
	cr_assert_eq(s3_part_count(20 * MiB, 8 * MiB), 3); /* last is short */
}

Test(part_size, grows_so_5tib_fits)
{
	uint64_t mib = 1024 * 1024;
	cr_assert_eq(s3_part_size(1024 * mib, 8 * mib), 8 * mib);
	cr_assert_eq(s3_part_count(1024 * mib, 8 * mib), 128);
	uint64_t big = 200ull << 30; /* 200 GiB: 8 MiB parts would be 25600 */
	uint64_t ps = s3_part_size(big, 8 * mib);
	cr_assert_geq(ps, 8 * mib);
	cr_assert_leq(s3_part_count(big, ps), 10000);
	cr_assert_eq(ps % mib, 0);
	uint64_t tib5 = 5ull << 40;
	ps = s3_part_size(tib5, 8 * mib);
	cr_assert_neq(ps, 0);
	cr_assert_leq(s3_part_count(tib5, ps), 10000);
	cr_assert_eq(s3_part_size(tib5 + 1, 8 * mib), 0);
}

/* ---- copy source -------------------------------------------------------- */

static void check_source(const char *bucket, const char *key, const char *want)
{
	buf b = BUF_INIT;
	cr_assert_eq(s3_copy_source(&b, bucket, key), 0);
	cr_assert_str_eq(buf_cstr(&b), want);
	buf_free(&b);
}

Test(copy_source, encoding)
{
	check_source("bkt", "a/b.bin", "bkt/a/b.bin");
	check_source("bkt", "dir/a b+c%d#e?f&g=h",
		     "bkt/dir/a%20b%2Bc%25d%23e%3Ff%26g%3Dh");
	check_source("bkt", "ckpt/\xc3\xbc\xe2\x82\xac",
		     "bkt/ckpt/%C3%BC%E2%82%AC");
	check_source("bkt", "~keep-._", "bkt/~keep-._");
	check_source("bkt", "/lead//x/", "bkt//lead//x/");
}

/* ---- XML safety and the DeleteObjects body ------------------------------ */

Test(delete_body, key_xml_safety)
{
	cr_assert(s3_key_xml_safe("plain/key"));
	cr_assert(s3_key_xml_safe("tab\there"));
	cr_assert(s3_key_xml_safe("nl\nand\rcr"));
	cr_assert(s3_key_xml_safe("a<b>&\"'"));
	cr_assert(s3_key_xml_safe("\xc3\xbc\xe2\x82\xac\xf0\x9f\x98\x80"));
	cr_assert_not(s3_key_xml_safe(""));
	cr_assert_not(s3_key_xml_safe("ctl\x01"));
	cr_assert_not(s3_key_xml_safe("esc\x1b"));
	cr_assert_not(s3_key_xml_safe("\xff"));
	cr_assert_not(s3_key_xml_safe("\xc3"));             /* truncated */
	cr_assert_not(s3_key_xml_safe("\xc0\xaf"));         /* overlong */
	cr_assert_not(s3_key_xml_safe("\xe0\x80\xaf"));     /* overlong */
	cr_assert_not(s3_key_xml_safe("\xed\xa0\x80"));     /* surrogate */
	cr_assert_not(s3_key_xml_safe("\xef\xbf\xbf"));     /* U+FFFF */
	cr_assert_not(s3_key_xml_safe("\xf4\x90\x80\x80")); /* > U+10FFFF */
}

Test(delete_body, exact_document)
{
	const char *keys[] = {"a/b", "x&y<z>\"q'\r\n\t"};
	buf b = BUF_INIT;
	cr_assert_eq(s3_delete_body(&b, keys, 2, true), 0);
	cr_assert_str_eq(
	    buf_cstr(&b),
	    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	    "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
	    "<Quiet>true</Quiet>"
	    "<Object><Key>a/b</Key></Object>"
	    "<Object><Key>x&amp;y&lt;z&gt;&quot;q&apos;&#13;&#10;&#9;</Key>"
	    "</Object></Delete>");
	buf_reset(&b);
	cr_assert_eq(s3_delete_body(&b, keys, 1, false), 0);
	cr_assert_null(strstr(buf_cstr(&b), "Quiet"));
	buf_free(&b);
}

Test(delete_body, limits)
{
	static const char *keys[1001];
	for (int i = 0; i < 1001; i++)
		keys[i] = "k";
	buf b = BUF_INIT;
	cr_assert_eq(s3_delete_body(&b, keys, 0, true), -1);
	cr_assert_eq(s3_delete_body(&b, keys, 1001, true), -1);
	cr_assert_eq(s3_delete_body(&b, keys, 1000, true), 0);
	size_t n = 0;
	for (const char *p = buf_cstr(&b); (p = strstr(p, "<Object>")); p++)
		n++;
	cr_assert_eq(n, 1000);
	const char *bad[] = {"ok", "bad\x02"};
	buf_reset(&b);
	cr_assert_eq(s3_delete_body(&b, bad, 2, true), -1);
	buf_free(&b);
}

/* ---- metadata headers --------------------------------------------------- */

Test(meta_headers, names_are_prefixed_and_lower_cased)
{
	s3_request r = {0};
	s3_request_header(&r, "content-type", "x/y");
	s3_meta m[] = {{"Lease", "30"}, {"uid", "1000"}, {"m-time-2", "a b"}};
	buf store = BUF_INIT;
	char err[200] = "";
	cr_assert_eq(s3_meta_headers(&r, m, 3, &store, err, sizeof err), 0,
		     "%s", err);
	cr_assert_eq(r.n_hdrs, 4);
	cr_assert_str_eq(r.hdr_names[1], "x-amz-meta-lease");
	cr_assert_str_eq(r.hdr_values[1], "30");
	cr_assert_str_eq(r.hdr_names[2], "x-amz-meta-uid");
	cr_assert_str_eq(r.hdr_names[3], "x-amz-meta-m-time-2");
	cr_assert_str_eq(r.hdr_values[3], "a b");
	buf_free(&store);
}

Test(meta_headers, many_names_survive_store_growth)
{
	s3_request r = {0};
	s3_meta m[S3_META_MAX];
	char names[S3_META_MAX][16];
	for (int i = 0; i < S3_META_MAX; i++) {
		snprintf(names[i], sizeof names[i], "Name%02d", i);
		m[i] = (s3_meta){names[i], "v"};
	}
	buf store = BUF_INIT;
	char err[200];
	cr_assert_eq(s3_meta_headers(&r, m, S3_META_MAX, &store, err,
				     sizeof err),
		     0);
	for (int i = 0; i < S3_META_MAX; i++) {
		char want[32];
		snprintf(want, sizeof want, "x-amz-meta-name%02d", i);
		cr_assert_str_eq(r.hdr_names[i], want);
	}
	buf_free(&store);
}

static void meta_rejected(const s3_meta *m, size_t n, const char *why)
{
	s3_request r = {0};
	buf store = BUF_INIT;
	char err[200] = "";
	cr_assert_eq(s3_meta_headers(&r, m, n, &store, err, sizeof err), -1,
		     "accepted: %s", why);
	cr_assert_neq(err[0], '\0');
	cr_assert_eq(r.n_hdrs, 0, "%s: headers added on failure", why);
	buf_free(&store);
}

Test(meta_headers, invalid_input_is_rejected)
{
	meta_rejected((s3_meta[]){{"", "v"}}, 1, "empty name");
	meta_rejected((s3_meta[]){{"a b", "v"}}, 1, "space in name");
	meta_rejected((s3_meta[]){{"a:b", "v"}}, 1, "colon in name");
	meta_rejected((s3_meta[]){{"a_b", "v"}}, 1, "underscore in name");
	meta_rejected((s3_meta[]){{"\xc3\xbc", "v"}}, 1, "non-ASCII name");
	meta_rejected((s3_meta[]){{"a", "x\r\nInjected: 1"}}, 1, "CRLF");
	meta_rejected((s3_meta[]){{"a", "x\n"}}, 1, "LF");
	meta_rejected((s3_meta[]){{"a", "\xc3\xbc"}}, 1, "non-ASCII value");
	meta_rejected((s3_meta[]){{"a", " lead"}}, 1, "leading space");
	meta_rejected((s3_meta[]){{"a", "trail "}}, 1, "trailing space");
	meta_rejected((s3_meta[]){{"a", NULL}}, 1, "NULL value");
	meta_rejected((s3_meta[]){{"Lease", "1"}, {"lease", "2"}}, 2,
		      "duplicate");
	static char big[S3_META_MAX_BYTES];
	memset(big, 'x', sizeof big - 1);
	meta_rejected((s3_meta[]){{"ab", big}}, 1, "over 2 KiB");
	s3_meta many[S3_META_MAX + 1];
	char names[S3_META_MAX + 1][8];
	for (int i = 0; i <= S3_META_MAX; i++) {
		snprintf(names[i], sizeof names[i], "n%d", i);
		many[i] = (s3_meta){names[i], "v"};
	}
	meta_rejected(many, S3_META_MAX + 1, "too many");
}

Test(meta_headers, exactly_the_byte_limit_is_accepted)
{
	static char v[S3_META_MAX_BYTES];
	memset(v, 'x', S3_META_MAX_BYTES - 2);
	s3_meta m[] = {{"ab", v}};
	s3_request r = {0};
	buf store = BUF_INIT;
	char err[200];
	cr_assert_eq(s3_meta_headers(&r, m, 1, &store, err, sizeof err), 0);
	buf_free(&store);
}

/* ---- digests ------------------------------------------------------------ */

Test(digest, content_md5)
{
	char out[25];
	s3_content_md5("", 0, out);
	cr_assert_str_eq(out, "1B2M2Y8AsgTpgAmY7PhCfg==");
	s3_content_md5("abc", 3, out);
	cr_assert_str_eq(out, "kAFQmDzST7DWlj99KOF/cg==");
}

Test(digest, multipart_etag)
{
	s3_part p[2] = {{1, "\"dede9db222ee612853f44e6e6b1ca792\""},
			{2, "093064bee9fa39309997041a6e03f29f"}};
	char out[S3_ETAG_MAX] = "untouched";
	cr_assert_eq(s3_multipart_etag(p, 2, out), 0);
	cr_assert_str_eq(out, "\"4e0f3bff4d24863cbef6c3d3dc5c2b7e-2\"");
	s3_part bad[1] = {{1, "\"4e0f3bff4d24863cbef6c3d3dc5c2b7e-2\""}};
	strcpy(out, "untouched");
	cr_assert_eq(s3_multipart_etag(bad, 1, out), -1);
	cr_assert_str_eq(out, "untouched");
	s3_part nothex[1] = {{1, "zzde9db222ee612853f44e6e6b1ca792"}};
	cr_assert_eq(s3_multipart_etag(nothex, 1, out), -1);
	cr_assert_eq(s3_multipart_etag(p, 0, out), -1);
}
