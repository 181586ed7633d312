/*
 * How fs/metaread.c keeps object metadata in its cache (fs_meta_pack,
 * fs_meta_unpack): pairs come back in order with their values, an empty
 * set is an empty body, and a damaged tail is ignored, never read past.
 */
#include <criterion/criterion.h>

#include <string.h>

#include "fs/ops-internal.h"

Test(metaread, pairs_round_trip)
{
	s3_meta in[] = {{"mode", "100750"}, {"uid", "1000"}, {"symlink", ""}};
	buf b = BUF_INIT;
	cr_assert_eq(fs_meta_pack(in, 3, &b), 0);
	s3_meta out[8];
	size_t n = fs_meta_unpack(b.data, b.len, out, 8);
	cr_assert_eq(n, 3);
	for (size_t i = 0; i < 3; i++) {
		cr_assert_str_eq(out[i].name, in[i].name);
		cr_assert_str_eq(out[i].value, in[i].value);
	}
	cr_assert_eq(fs_meta_unpack(b.data, b.len, out, 2), 2, "max kept");
	buf_free(&b);
}

Test(metaread, empty_and_damaged_bodies)
{
	s3_meta out[4];
	cr_assert_eq(fs_meta_unpack("", 0, out, 4), 0);
	buf b = BUF_INIT;
	cr_assert_eq(fs_meta_pack(NULL, 0, &b), 0);
	cr_assert_eq(b.len, 0);
	/* a name without a value, a value without its NUL */
	static const char cut1[] = {'m', 'o', 'd', 'e', '\0'};
	cr_assert_eq(fs_meta_unpack(cut1, sizeof cut1, out, 4), 0);
	static const char cut2[] = {'a', '\0', '1', '\0', 'b', '\0', '2'};
	cr_assert_eq(fs_meta_unpack(cut2, sizeof cut2, out, 4), 1);
	cr_assert_str_eq(out[0].name, "a");
	cr_assert_str_eq(out[0].value, "1");
}
