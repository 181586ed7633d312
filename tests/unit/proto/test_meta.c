/* Unit tests for proto/meta: object metadata both ways, the xattr blob
 * and its JSON form. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "proto/meta.h"
#include "s3/upload.h"

Test(proto, object_meta)
{
	proto_meta m = {.mode = 0640, .uid = 10, .gid = 20,
			.mtime_ns = 1700000000123456789LL,
			.symlink = (char *)" ../t%\xc3\xbc"};
	s3_meta out[PROTO_META_N];
	buf store = BUF_INIT;
	size_t n = proto_object_meta(&m, out, &store);
	cr_assert_eq(n, 5);
	cr_assert_str_eq(out[0].name, "mode");
	cr_assert_str_eq(out[0].value, "640");
	cr_assert_str_eq(out[1].value, "10");
	cr_assert_str_eq(out[2].value, "20");
	cr_assert_str_eq(out[3].value, "1700000000123456789");
	cr_assert_str_eq(out[4].name, "symlink");
	cr_assert_str_eq(out[4].value, "%20../t%25%C3%BC");
	/* what s3_meta_headers accepts */
	s3_request r = {0};
	buf names = BUF_INIT;
	char err[128];
	cr_assert_eq(s3_meta_headers(&r, out, n, &names, err, sizeof err), 0,
		     "%s", err);
	buf_free(&names);
	buf_free(&store);
}

Test(proto, object_meta_xattrs)
{
	buf blob = BUF_INIT;
	cr_assert_eq(proto_xattr_append(&blob, "user.k", "v\0w", 3), 0);
	cr_assert_eq(proto_xattr_append(&blob, "user.e", "", 0), 0);
	proto_meta m = {.mode = 0644, .xattrs = blob.data,
			.xattrs_len = blob.len};
	s3_meta out[PROTO_META_N];
	buf store = BUF_INIT;
	size_t n = proto_object_meta(&m, out, &store);
	cr_assert_eq(n, 5);
	cr_assert_str_eq(out[4].name, "xattrs");
	cr_assert_str_eq(out[4].value, "{\"user.k\":\"dgB3\",\"user.e\":\"\"}");
	s3_request r = {0};
	buf names = BUF_INIT;
	char err[128];
	cr_assert_eq(s3_meta_headers(&r, out, n, &names, err, sizeof err), 0,
		     "%s", err);
	buf_free(&names);
	/* too large for object metadata: left to the manifest */
	char big[2000];
	memset(big, 'a', sizeof big);
	cr_assert_eq(proto_xattr_append(&blob, "user.big", big, sizeof big), 0);
	m.xattrs = blob.data;
	m.xattrs_len = blob.len;
	cr_assert_eq(proto_object_meta(&m, out, &store), 4);
	buf_free(&store);
	buf_free(&blob);
}

Test(proto, xattr_blob)
{
	buf b = BUF_INIT;
	cr_assert_eq(proto_xattr_append(&b, "user.a", "x\0y", 3), 0);
	cr_assert_eq(proto_xattr_append(&b, "user.empty", "", 0), 0);
	size_t pos = 0;
	const char *name, *val;
	uint32_t len;
	cr_assert(proto_xattr_next(b.data, b.len, &pos, &name, &val, &len));
	cr_assert_str_eq(name, "user.a");
	cr_assert_eq(len, 3);
	cr_assert_eq(memcmp(val, "x\0y", 3), 0);
	cr_assert(proto_xattr_next(b.data, b.len, &pos, &name, &val, &len));
	cr_assert_str_eq(name, "user.empty");
	cr_assert_eq(len, 0);
	cr_assert_not(proto_xattr_next(b.data, b.len, &pos, &name, &val, &len));
	/* truncated */
	pos = 0;
	cr_assert_not(proto_xattr_next(b.data, 9, &pos, &name, &val, &len));
	buf_free(&b);
}

Test(proto, object_meta_read_back)
{
	buf blob = BUF_INIT;
	proto_xattr_append(&blob, "user.k", "v\0w", 3);
	proto_meta m = {.mode = 0640, .uid = 10, .gid = 20,
			.mtime_ns = 1700000000123456789LL,
			.symlink = (char *)" ../t%\xc3\xbc",
			.xattrs = blob.data, .xattrs_len = blob.len};
	s3_meta out[PROTO_META_N];
	buf store = BUF_INIT;
	size_t n = proto_object_meta(&m, out, &store);
	cr_assert_eq(n, 6);
	proto_meta r;
	char *xj = NULL;
	unsigned has = proto_object_meta_parse(out, n, &r, &xj);
	cr_assert_eq(has, PROTO_HAS_MODE | PROTO_HAS_UID | PROTO_HAS_GID |
			      PROTO_HAS_MTIME | PROTO_HAS_SYMLINK |
			      PROTO_HAS_XATTRS);
	cr_assert_eq(r.mode, 0640);
	cr_assert_eq(r.uid, 10);
	cr_assert_eq(r.gid, 20);
	cr_assert_eq(r.mtime_ns, 1700000000123456789LL);
	cr_assert_str_eq(r.symlink, " ../t%\xc3\xbc");
	cr_assert_null(r.xattrs);
	cr_assert_str_eq(xj, "{\"user.k\":\"dgB3\"}");
	buf back = BUF_INIT;
	cr_assert_eq(proto_xattrs_decode(xj, &back), 0);
	cr_assert_eq(back.len, blob.len);
	cr_assert_eq(memcmp(back.data, blob.data, blob.len), 0);
	buf_free(&back);
	free(xj);
	proto_meta_free(&r);
	/* another tool's object: no pairs; unknown pairs are ignored */
	s3_meta other[1] = {{"color", "blue"}};
	cr_assert_eq(proto_object_meta_parse(other, 1, &r, &xj), 0);
	cr_assert_null(r.symlink);
	cr_assert_null(xj);
	proto_meta_free(&r);
	buf_free(&store);
	buf_free(&blob);
}

Test(proto, xattrs_json_both_ways)
{
	buf blob = BUF_INIT;
	proto_xattr_append(&blob, "user.a", "x\0y", 3);
	proto_xattr_append(&blob, "user.empty", "", 0);
	proto_xattr_append(&blob, "user.b", "\x01\x02", 2);
	json_t *x = proto_xattrs_json(blob.data, blob.len);
	cr_assert_not_null(x);
	char *s = json_dumps(x, JSON_COMPACT);
	cr_assert_str_eq(s, "{\"user.a\":\"eAB5\",\"user.empty\":\"\","
			    "\"user.b\":\"AQI=\"}");
	buf back = BUF_INIT;
	cr_assert_eq(proto_xattrs_decode(s, &back), 0);
	cr_assert_eq(back.len, blob.len, "padding is not data");
	cr_assert_eq(memcmp(back.data, blob.data, blob.len), 0);
	buf_free(&back);
	free(s);
	json_decref(x);
	/* bad base64 is left out, a non-string value is empty, non-objects
	 * give nothing */
	cr_assert_eq(proto_xattrs_decode("{\"user.a\":\"!!\",\"user.b\":1}",
					 &back),
		     0);
	size_t pos = 0;
	const char *name, *val;
	uint32_t len;
	cr_assert(proto_xattr_next(back.data, back.len, &pos, &name, &val, &len));
	cr_assert_str_eq(name, "user.b");
	cr_assert_eq(len, 0);
	cr_assert_not(proto_xattr_next(back.data, back.len, &pos, &name, &val,
				       &len));
	buf_reset(&back);
	cr_assert_eq(proto_xattrs_decode("[1]", &back), 0);
	cr_assert_eq(proto_xattrs_decode("not json", &back), 0);
	cr_assert_eq(proto_xattrs_decode(NULL, &back), 0);
	cr_assert_eq(back.len, 0);
	buf_free(&back);
	/* a name that is not UTF-8 cannot be a JSON key */
	buf bad = BUF_INIT;
	proto_xattr_append(&bad, "user.\xff", "v", 1);
	cr_assert_null(proto_xattrs_json(bad.data, bad.len));
	buf_free(&bad);
	buf_free(&blob);
}

/* A special file's mode carries its type; a device node's number goes in
 * "rdev"; readers take unknown type bits for a regular file. */
Test(meta, special_files_round_trip)
{
	cr_assert_eq(proto_mode_type(0644), S_IFREG);
	cr_assert_eq(proto_mode_type(S_IFIFO | 0600), S_IFIFO);
	cr_assert_eq(proto_mode_type(S_IFSOCK | 0755), S_IFSOCK);
	cr_assert_eq(proto_mode_type(S_IFDIR | 0755), S_IFREG);
	cr_assert_eq(proto_mode_type(S_IFLNK | 0777), S_IFREG);
	cr_assert_eq(proto_file_mode(S_IFDIR | 04755), S_IFREG | 04755);
	cr_assert_eq(proto_file_mode(S_IFBLK | 0640), S_IFBLK | 0640);
	proto_meta m = {.mode = S_IFCHR | 0620, .uid = 5, .gid = 6,
			.mtime_ns = 7, .rdev = makedev(4, 67)};
	s3_meta kv[PROTO_META_N];
	buf store = BUF_INIT;
	size_t n = proto_object_meta(&m, kv, &store);
	bool saw_rdev = false;
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(kv[i].name, "mode"))
			cr_assert_str_eq(kv[i].value, "20620");
		if (!strcmp(kv[i].name, "rdev")) {
			saw_rdev = true;
			cr_assert_eq(strtoull(kv[i].value, NULL, 10),
				     makedev(4, 67));
		}
	}
	cr_assert(saw_rdev);
	proto_meta back;
	char *xj = NULL;
	unsigned has = proto_object_meta_parse(kv, n, &back, &xj);
	cr_assert(has & PROTO_HAS_RDEV);
	cr_assert_eq(back.mode, S_IFCHR | 0620);
	cr_assert_eq(back.rdev, makedev(4, 67));
	proto_meta_free(&back);
	free(xj);
	/* a FIFO or a regular file records no device number */
	m.mode = S_IFIFO | 0600;
	n = proto_object_meta(&m, kv, &store);
	for (size_t i = 0; i < n; i++)
		cr_assert_str_neq(kv[i].name, "rdev");
	buf_free(&store);
}

/* A symlink target longer than PROTO_META_SYMLINK_MAX once encoded stays
 * out of the object's metadata (the manifest keeps it): the pairs with
 * the largest xattrs pair still fit S3's 2 KiB. */
Test(meta, object_meta_long_symlink)
{
	char fits[PROTO_META_SYMLINK_MAX + 1], over[PROTO_META_SYMLINK_MAX + 2];
	memset(fits, 't', sizeof fits - 1);
	fits[sizeof fits - 1] = '\0';
	memset(over, 't', sizeof over - 1);
	over[sizeof over - 1] = '\0';
	cr_assert(proto_meta_symlink_fits(fits));
	cr_assert_not(proto_meta_symlink_fits(over));
	/* counted encoded: a '%' takes three bytes */
	fits[0] = '%';
	cr_assert_not(proto_meta_symlink_fits(fits));
	proto_meta m = {.mode = 0777, .symlink = over};
	s3_meta out[PROTO_META_N];
	buf store = BUF_INIT;
	size_t n = proto_object_meta(&m, out, &store);
	for (size_t i = 0; i < n; i++)
		cr_assert_str_neq(out[i].name, "symlink");
	cr_assert_eq(n, 4);
	m.symlink = fits + 1;
	n = proto_object_meta(&m, out, &store);
	cr_assert_eq(n, 5);
	cr_assert_str_eq(out[4].name, "symlink");
	cr_assert_eq(strlen(out[4].value), PROTO_META_SYMLINK_MAX - 1);
	buf_free(&store);
}

/* Times (issue 23 point 7): signed ns, floor division before 1970, the
 * epoch itself and what int64 ns cannot hold refused. */
Test(meta, times_before_1970_and_the_limits)
{
	struct timespec ts;
	proto_ns_time(-1, &ts);
	cr_assert_eq(ts.tv_sec, -1);
	cr_assert_eq(ts.tv_nsec, 999999999);
	proto_ns_time(-1000000000123456789LL, &ts);
	cr_assert_eq(ts.tv_sec, -1000000001);
	cr_assert_eq(ts.tv_nsec, 876543211);
	cr_assert_eq(proto_time_ns(&ts), -1000000000123456789LL);
	proto_ns_time(1234567890123456789LL, &ts);
	cr_assert_eq(ts.tv_sec, 1234567890);
	cr_assert_eq(ts.tv_nsec, 123456789);
	cr_assert(proto_time_ok(&ts));
	struct timespec zero = {0, 0}, one = {0, 1}, far = {9223372036, 0},
			last = {9223372035, 999999999}, early = {-9223372035, 0};
	cr_assert_not(proto_time_ok(&zero));
	cr_assert(proto_time_ok(&one));
	cr_assert_not(proto_time_ok(&far));
	cr_assert(proto_time_ok(&last));
	cr_assert(proto_time_ok(&early));
	cr_assert_eq(proto_time_ns(&last), 9223372035999999999LL);
}
