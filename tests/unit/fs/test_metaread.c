/*
 * How fs/metaread.c keeps object metadata in its cache (fs_meta_pack,
 * fs_meta_unpack): pairs come back in order with their values, an empty
 * set is an empty body, and a damaged tail is ignored, never read past.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/metaread.h"
#include "fs/nodes.h"

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

/* Metadata is read per version, and a version is its ETag and its
 * LastModified: two empty objects (symlinks to different targets) share
 * an ETag, so a symlink replaced on another host would otherwise keep its
 * old target here for good (test_frameworks' lightning replay saw it). */
Test(metaread, version_is_etag_and_last_modified)
{
	fs_inode n;
	memset(&n, 0, sizeof n);
	struct timespec t1 = {1700000000, 123000000}, t2 = {1700000001, 0};
	const char *empty = "\"d41d8cd98f00b204e9800998ecf8427e\"";
	cr_assert(!fs_meta_read_for(&n, empty, t1), "nothing read yet");
	fs_set_version(&n, empty, t1);
	char v[] = "\"d41d8cd98f00b204e9800998ecf8427e\"";
	n.meta_etag = v; /* read for (empty, t1) */
	n.meta_mtime = t1;
	cr_assert(fs_meta_read_for(&n, empty, t1));
	cr_assert(!fs_meta_read_for(&n, empty, t2), "same bytes, newer object");
	cr_assert(!fs_meta_read_for(&n, "\"other\"", t1));
	cr_assert(!fs_meta_read_for(&n, NULL, t1));
	/* a HEAD's whole seconds keep the listing's finer time ... */
	fs_set_version(&n, empty, (struct timespec){1700000000, 0});
	cr_assert_eq(n.obj_mtime.tv_nsec, 123000000);
	fs_set_version(&n, empty, (struct timespec){0, 0});
	cr_assert_eq(n.obj_mtime.tv_sec, 1700000000, "no Last-Modified");
	/* ... but another second is another version */
	fs_set_version(&n, empty, t2);
	cr_assert_eq(n.obj_mtime.tv_sec, t2.tv_sec);
	cr_assert(!fs_meta_read_for(&n, n.etag, n.obj_mtime));
	free(n.etag);
}
