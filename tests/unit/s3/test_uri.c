/*
 * Tests for uri: RFC 3986 encoding with the '/' switch, and decoding with
 * its error cases (malformed escapes, %00, '+' handling).
 */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "s3/uri.h"
#include "util/buf.h"

static char *enc(const char *s, size_t n, bool keep_slash)
{
	buf b = BUF_INIT;
	cr_assert_eq(uri_encode(&b, s, n, keep_slash), 0);
	return buf_steal(&b);
}

static void expect_enc(const char *in, bool keep_slash, const char *want)
{
	char *got = enc(in, strlen(in), keep_slash);
	cr_expect_str_eq(got, want, "encode(\"%s\", keep_slash=%d)", in,
			 keep_slash);
	free(got);
}

Test(uri_encode, unreserved_pass_through)
{
	const char *u = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			"0123456789-._~";
	expect_enc(u, false, u);
	expect_enc(u, true, u);
}

Test(uri_encode, reserved_and_space)
{
	expect_enc("a b", false, "a%20b");
	expect_enc("a+b=c&d", false, "a%2Bb%3Dc%26d");
	expect_enc("!*'();:@$,?#[]%", false,
		   "%21%2A%27%28%29%3B%3A%40%24%2C%3F%23%5B%5D%25");
	expect_enc("", false, "");
}

Test(uri_encode, slash_per_flag)
{
	expect_enc("dir/sub/file.bin", true, "dir/sub/file.bin");
	expect_enc("dir/sub/file.bin", false, "dir%2Fsub%2Ffile.bin");
	expect_enc("/", true, "/");
	expect_enc("/", false, "%2F");
}

Test(uri_encode, utf8_bytes_upper_hex)
{
	expect_enc("\xe1\x88\xb4", false, "%E1%88%B4");
	expect_enc("caf\xc3\xa9/x", true, "caf%C3%A9/x");
	expect_enc("\x7f\xff", false, "%7F%FF");
}

Test(uri_encode, nul_byte_and_length)
{
	char *got = enc("a\0b", 3, false);
	cr_assert_str_eq(got, "a%00b");
	free(got);
	got = enc("abc", 1, false); /* only n bytes are read */
	cr_assert_str_eq(got, "a");
	free(got);
}

Test(uri_encode, appends_to_existing)
{
	buf b = BUF_INIT;
	cr_assert_eq(buf_puts(&b, "/bucket/"), 0);
	cr_assert_eq(uri_encode(&b, "a b/c", 5, true), 0);
	cr_assert_str_eq(buf_cstr(&b), "/bucket/a%20b/c");
	cr_assert_eq(b.len, strlen("/bucket/a%20b/c"));
	buf_free(&b);
}

static char *dec(const char *s, bool plus, size_t *len)
{
	return uri_decode(s, strlen(s), plus, len);
}

Test(uri_decode, basic_and_case_insensitive_hex)
{
	size_t len = 99;
	char *s = dec("a%20b%2fc%2Fd~", false, &len);
	cr_assert_str_eq(s, "a b/c/d~");
	cr_assert_eq(len, 8);
	free(s);
	s = dec("%E1%88%b4", false, &len);
	cr_assert_str_eq(s, "\xe1\x88\xb4");
	cr_assert_eq(len, 3);
	free(s);
	s = dec("", false, &len);
	cr_assert_str_eq(s, "");
	cr_assert_eq(len, 0);
	free(s);
}

Test(uri_decode, plus_is_space_switch)
{
	size_t len;
	char *s = dec("a+b%2B", true, &len);
	cr_assert_str_eq(s, "a b+");
	free(s);
	s = dec("a+b%2B", false, &len);
	cr_assert_str_eq(s, "a+b+");
	free(s);
}

Test(uri_decode, malformed_escapes_fail)
{
	static const char *const bad[] = {"%",     "%2",  "%zz", "%2z",
					  "%z2",   "a%",  "a%4", "%%41",
					  "ok%g0", "%-1", "% 1"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		size_t len = 12345;
		cr_expect_null(dec(bad[i], false, &len), "decode(\"%s\")",
			       bad[i]);
		cr_expect_eq(len, 12345, "len touched for \"%s\"", bad[i]);
	}
}

Test(uri_decode, respects_n)
{
	/* The escape is cut by n: malformed even though the string goes on. */
	cr_assert_null(uri_decode("a%41", 3, false, NULL));
	size_t len;
	char *s = uri_decode("a%41bc", 4, false, &len);
	cr_assert_str_eq(s, "aA");
	cr_assert_eq(len, 2);
	free(s);
}

Test(uri_decode, nul_escape_reports_length)
{
	size_t len = 0;
	char *s = dec("a%00b", false, &len);
	cr_assert_not_null(s);
	cr_assert_eq(len, 3);
	cr_assert_eq(strlen(s), 1);
	cr_assert_eq(memcmp(s, "a\0b", 4), 0); /* NUL-terminated as well */
	free(s);
}

Test(uri_decode, null_out_len_allowed)
{
	char *s = dec("x%41", false, NULL);
	cr_assert_str_eq(s, "xA");
	free(s);
}

Test(uri_roundtrip, every_byte)
{
	char all[256];
	for (int i = 0; i < 256; i++)
		all[i] = (char)i;
	for (int keep = 0; keep < 2; keep++) {
		buf b = BUF_INIT;
		cr_assert_eq(uri_encode(&b, all, sizeof all, keep), 0);
		size_t len;
		char *s = uri_decode(b.data, b.len, false, &len);
		cr_assert_not_null(s);
		cr_assert_eq(len, sizeof all);
		cr_assert_eq(memcmp(s, all, sizeof all), 0);
		free(s);
		buf_free(&b);
	}
}
