/* Unit tests for the pure pieces of the commit protocol: CRC32C and its
 * combination, keys, temp names, object metadata, xattr blobs, the
 * manifest JSON read back by fs/visibility.c, the ordering rule, and the
 * multipart part sizes the engine uses. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commit/internal.h"
#include "commit/protocol.h"
#include "fs/visibility.h"
#include "s3/upload.h"

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

Test(proto, temp_patterns)
{
	proto_pats p;
	cr_assert_eq(proto_pats_parse(&p, NULL), 0);
	cr_assert(proto_is_temp(&p, "ckpt/model.pt.tmp"));
	cr_assert(proto_is_temp(&p, "tmpdir"));
	cr_assert(proto_is_temp(&p, "a/b/_checkpoint"));
	cr_assert(proto_is_temp(&p, "x.orbax-checkpoint-tmp-12"));
	cr_assert(proto_is_temp(&p, "state.tempstate123"));
	cr_assert(proto_is_temp(&p, "step_temp"));
	cr_assert(proto_is_temp(&p, "a.__lock"));
	cr_assert_not(proto_is_temp(&p, "ckpt/model.pt"));
	cr_assert_not(proto_is_temp(&p, "tmp/model.pt"), "last component only");
	cr_assert(proto_has_temp(&p, "tmp/model.pt"));
	cr_assert(proto_has_temp(&p, "a/step.tmp/b"));
	cr_assert_not(proto_has_temp(&p, "checkpoint-100/model.safetensors"));
	proto_pats_free(&p);
	cr_assert_eq(proto_pats_parse(&p, " *.part , x?"), 0);
	cr_assert_eq(p.n, 2);
	cr_assert(proto_is_temp(&p, "a.part"));
	cr_assert(proto_is_temp(&p, "xy"));
	cr_assert_not(proto_is_temp(&p, "a.tmp"));
	proto_pats_free(&p);
}

Test(proto, paths_and_overlap)
{
	const char *rest;
	cr_assert(proto_under("a/b/c", "a/b", &rest));
	cr_assert_str_eq(rest, "c");
	cr_assert(proto_under("a/b", "a/b", &rest));
	cr_assert_str_eq(rest, "");
	cr_assert_not(proto_under("a/bc", "a/b", NULL));
	cr_assert(proto_under("x", "", &rest));
	cr_assert_str_eq(rest, "x");
	cr_assert(proto_overlap("a", "a/b"));
	cr_assert(proto_overlap("a/b", "a"));
	cr_assert_not(proto_overlap("a", "ab"));
}

Test(proto, keys)
{
	char *k = proto_marker_key("pre/", "runs/ckpt-10", "h-0a0b0c0d", 60);
	cr_assert_str_eq(k, "pre/runs/.ckptfs-pending/ckpt-10/h-0a0b0c0d@60");
	char *child = NULL;
	unsigned lease = 0;
	/* the reader parses what we write (relative to P/.ckptfs-pending/) */
	cr_assert_eq(vis_parse_marker(strstr(k, "pending/") + 8, &child, &lease),
		     0);
	cr_assert_str_eq(child, "ckpt-10");
	cr_assert_eq(lease, 60);
	free(child);
	free(k);
	k = proto_marker_key("", "top", "w", 30);
	cr_assert_str_eq(k, ".ckptfs-pending/top/w@30");
	free(k);
	k = proto_manifest_key("p/", "c", "w");
	cr_assert_str_eq(k, "p/c/.ckptfs/manifest.w.json");
	free(k);
	k = proto_addendum_key("p/", "m", "w", 7);
	cr_assert_str_eq(k, "p/m/.ckptfs/manifest.w.7.json");
	free(k);
}

Test(proto, writer_id)
{
	char w[PROTO_WRITER_MAX];
	proto_writer_id(w);
	size_t n = strlen(w);
	cr_assert_gt(n, 9);
	cr_assert_eq(w[n - 9], '-');
	for (size_t i = 0; i < n; i++)
		cr_assert(strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS"
				 "TUVWXYZ0123456789-",
				 w[i]),
			  "%s", w);
	char w2[PROTO_WRITER_MAX];
	proto_writer_id(w2);
	cr_assert_str_neq(w, w2);
}

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

Test(proto, manifest_round_trip_through_reader)
{
	buf x = BUF_INIT;
	proto_xattr_append(&x, "user.k", "v\x01", 2);
	proto_meta m1 = {.mode = 0644, .uid = 1, .gid = 2, .mtime_ns = 5,
			 .xattrs = x.data, .xattrs_len = x.len};
	proto_meta m2 = {.mode = 0777, .symlink = (char *)"model.pt"};
	proto_meta md = {.mode = 0755, .mtime_ns = 9};
	proto_mfile f[2] = {
	    {"model.pt", 10, "\"e1\"", 0xe3069283u, true, &m1, 0, NULL},
	    {"sub/link", 8, "\"e2\"", 0, false, &m2, 0, NULL},
	};
	proto_mdir d[1] = {{"empty/dir", &md}};
	char *json = proto_manifest_json("w-1", 3, 1234, f, 2, d, 1);
	cr_assert_not_null(json);
	vis_manifest vm;
	vis_manifest_init(&vm);
	char *err = NULL;
	cr_assert_eq(vis_manifest_add_json(&vm, json, strlen(json), &err), 0,
		     "%s", err ? err : "");
	vis_manifest_finish(&vm);
	cr_assert_eq(vm.committed, 1);
	const vis_file *v = vis_manifest_find(&vm, "model.pt");
	cr_assert_not_null(v);
	cr_assert_eq(v->size, 10);
	cr_assert_str_eq(v->etag, "\"e1\"");
	cr_assert(v->has_crc);
	cr_assert_eq(v->crc32c, 0xe3069283u);
	cr_assert(v->has_attrs);
	cr_assert_eq(v->mode, 0644);
	cr_assert_eq(v->uid, 1);
	cr_assert_eq(v->gid, 2);
	cr_assert_eq(v->mtime_ns, 5);
	cr_assert_eq(v->time, 1234);
	cr_assert_str_eq(v->xattrs_json, "{\"user.k\":\"dgE=\"}");
	v = vis_manifest_find(&vm, "sub/link");
	cr_assert_not_null(v);
	cr_assert_not(v->has_crc);
	cr_assert_str_eq(v->symlink, "model.pt");
	cr_assert(vis_manifest_has_dir(&vm, "empty"));
	cr_assert(vis_manifest_has_dir(&vm, "empty/dir"));
	cr_assert(vis_manifest_has_dir(&vm, "sub"));
	cr_assert_not(vis_manifest_has_dir(&vm, "empty/dir/x"));
	vis_manifest_free(&vm);
	free(json);
	json = proto_intent_json("w-1", 3);
	vis_manifest_init(&vm);
	cr_assert_eq(vis_manifest_add_json(&vm, json, strlen(json), NULL), 0);
	cr_assert_eq(vm.pending, 1);
	vis_manifest_free(&vm);
	free(json);
	buf_free(&x);
}

Test(proto, manifest_refuses_non_utf8_paths)
{
	proto_mfile f = {"bad\xff", 1, "\"e\"", 0, false, NULL, 0, NULL};
	cr_assert_null(proto_manifest_json("w", 1, 0, &f, 1, NULL, 0));
}

Test(proto, upload_blocked_by_earlier_overlapping_steps)
{
	proto_step q[] = {
	    {"ckpt-1", NULL, false},          /* commit of ckpt-1 */
	    {"old", NULL, false},             /* delete of old */
	    {"a", "b/c", false},              /* rename a -> b/c */
	    {"ckpt-1", NULL, false},          /* rewrite of ckpt-1 */
	    {"done", NULL, true},             /* finished: constrains nothing */
	    {"x", NULL, false},
	};
	size_t n = sizeof q / sizeof *q;
	cr_assert_not(proto_upload_blocked(q, n, 0, "ckpt-1/model.pt"));
	cr_assert(proto_upload_blocked(q, n, 3, "ckpt-1/model.pt"));
	cr_assert(proto_upload_blocked(q, n, 5, "old/x"));
	cr_assert(proto_upload_blocked(q, n, 5, "b/c/d"));
	cr_assert(proto_upload_blocked(q, n, 5, "b"));
	cr_assert_not(proto_upload_blocked(q, n, 5, "b/d"));
	cr_assert_not(proto_upload_blocked(q, n, 5, "done/x"));
	cr_assert_not(proto_upload_blocked(q, n, 1, "old/x"),
		      "only earlier steps count");
}

Test(proto, part_size_grows_so_5tib_fits)
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

/* ---- block checksums ---------------------------------------------------- */

static unsigned char *pattern(size_t n)
{
	unsigned char *b = malloc(n ? n : 1);
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)(i * 2654435761u >> 13);
	return b;
}

/* The hex block list of b computed directly, block by block. */
static char *direct_blocks(const unsigned char *b, uint64_t size,
			   uint32_t block)
{
	buf h = BUF_INIT;
	for (uint64_t off = 0; off < size; off += block) {
		uint64_t len = size - off < block ? size - off : block;
		proto_blocks_append(&h, proto_crc32c(0, b + off, len));
	}
	return buf_steal(&h);
}

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

Test(proto, manifest_blocks_round_trip)
{
	const uint32_t B = PROTO_BLOCK;
	uint64_t size = 2 * (uint64_t)B + 5;
	const char *hex = "e306928300000001deadbeef";
	proto_mfile f[3] = {
	    {"big.pt", size, "\"e1\"", 1, true, NULL, B, hex},
	    {"small", 3, "\"e2\"", 2, true, NULL, B, "0000abcd"},
	    /* a list that does not fit is left out, never written */
	    {"odd", size, "\"e3\"", 3, true, NULL, B, "0000abcd"},
	};
	char *json = proto_manifest_json("w", 1, 0, f, 3, NULL, 0);
	cr_assert_not_null(json);
	cr_assert_not_null(strstr(json, "\"block\":8388608"));
	cr_assert_not_null(strstr(json, "\"blocks\":\"e306928300000001deadbeef\""));
	vis_manifest vm;
	vis_manifest_init(&vm);
	cr_assert_eq(vis_manifest_add_json(&vm, json, strlen(json), NULL), 0);
	vis_manifest_finish(&vm);
	const vis_file *v = vis_manifest_find(&vm, "big.pt");
	cr_assert_not_null(v);
	cr_assert_eq(v->block, B);
	cr_assert_str_eq(v->blocks, hex);
	uint32_t *crc;
	size_t n;
	cr_assert_eq(vis_file_blocks(v, &crc, &n), 0);
	cr_assert_eq(n, 3);
	cr_assert_eq(crc[0], 0xe3069283u);
	cr_assert_eq(crc[1], 1);
	cr_assert_eq(crc[2], 0xdeadbeefu);
	free(crc);
	v = vis_manifest_find(&vm, "small");
	cr_assert_str_eq(v->blocks, "0000abcd");
	v = vis_manifest_find(&vm, "odd");
	cr_assert_not_null(v);
	cr_assert_null(v->blocks);
	cr_assert_eq(v->crc32c, 3, "crc32c stays as it was");
	cr_assert_lt(vis_file_blocks(v, &crc, &n), 0);
	vis_manifest_free(&vm);
	free(json);
}

/* Malformed block lists are ignored (the file shows, unchecked); the rest
 * of the manifest stands. */
Test(proto, manifest_malformed_blocks_ignored)
{
	const char *bad[] = {
	    "\"block\":8388608,\"blocks\":\"0000abcd0000abcd\"", /* long */
	    "\"block\":8388608,\"blocks\":\"0000abc\"",          /* short */
	    "\"block\":8388608,\"blocks\":\"0000abcz\"",         /* digit */
	    "\"block\":8388608,\"blocks\":\"-000abcd\"",
	    "\"block\":8388608,\"blocks\":12",        /* not a string */
	    "\"block\":0,\"blocks\":\"0000abcd\"",     /* no block size */
	    "\"block\":-8,\"blocks\":\"0000abcd\"",
	    "\"block\":1,\"blocks\":\"0000abcd\"",     /* out of range */
	    "\"block\":8589934592,\"blocks\":\"0000abcd\"",
	    "\"block\":\"8388608\",\"blocks\":\"0000abcd\"",
	    "\"blocks\":\"0000abcd\"",                 /* no block */
	    "\"block\":8388608",                       /* no list */
	    "\"block\":8388608,\"blocks\":null",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		buf j = BUF_INIT;
		buf_printf(&j,
			   "{\"state\":\"committed\",\"files\":["
			   "{\"path\":\"a\",\"size\":10,\"etag\":\"e\","
			   "\"crc32c\":\"e3069283\",%s},"
			   "{\"path\":\"b\",\"size\":10,\"block\":8388608,"
			   "\"blocks\":\"0000abcd\"}]}",
			   bad[i]);
		vis_manifest vm;
		vis_manifest_init(&vm);
		char *err = NULL;
		cr_assert_eq(vis_manifest_add_json(&vm, j.data, j.len, &err), 0,
			     "%s: %s", bad[i], err ? err : "");
		vis_manifest_finish(&vm);
		const vis_file *a = vis_manifest_find(&vm, "a");
		cr_assert_not_null(a, "%s", bad[i]);
		cr_assert_null(a->blocks, "%s", bad[i]);
		cr_assert(a->has_crc);
		cr_assert_eq(a->crc32c, 0xe3069283u);
		const vis_file *b = vis_manifest_find(&vm, "b");
		cr_assert_str_eq(b->blocks, "0000abcd", "%s", bad[i]);
		vis_manifest_free(&vm);
		buf_free(&j);
	}
}

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
