/* Unit tests for proto/manifest: the manifest document written and read
 * back, what the reader accepts and rejects, the union of several
 * manifests and the time rule, block lists, attributes. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "proto/crc.h"
#include "proto/manifest.h"

/* ---- written by proto_manifest_json, read by vis_manifest --------------- */

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
	proto_mdir d[1] = {{"empty/dir", &md, false}};
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

/* The rename step's metadata decoder: a manifest entry back to the
 * proto_meta it was written from. */
Test(proto, file_meta_of_a_manifest_entry)
{
	buf x = BUF_INIT;
	proto_xattr_append(&x, "user.k", "v\x01", 2);
	proto_xattr_append(&x, "user.e", "", 0);
	proto_meta m1 = {.mode = 0600, .uid = 1, .gid = 2, .mtime_ns = 5,
			 .xattrs = x.data, .xattrs_len = x.len,
			 .symlink = (char *)"t"};
	proto_mfile f[2] = {
	    {"a", 1, "\"e1\"", 0, false, &m1, 0, NULL},
	    {"b", 1, "\"e2\"", 0, false, NULL, 0, NULL},
	};
	char *json = proto_manifest_json("w", 1, 0, f, 2, NULL, 0);
	vis_manifest vm;
	vis_manifest_init(&vm);
	cr_assert_eq(vis_manifest_add_json(&vm, json, strlen(json), NULL), 0);
	vis_manifest_finish(&vm);
	proto_meta m;
	vis_file_meta(vis_manifest_find(&vm, "a"), &m);
	cr_assert_eq(m.mode, 0600);
	cr_assert_eq(m.uid, 1);
	cr_assert_eq(m.gid, 2);
	cr_assert_eq(m.mtime_ns, 5);
	cr_assert_str_eq(m.symlink, "t");
	cr_assert_eq(m.xattrs_len, x.len);
	cr_assert_eq(memcmp(m.xattrs, x.data, x.len), 0);
	proto_meta_free(&m);
	vis_file_meta(vis_manifest_find(&vm, "b"), &m);
	cr_assert_eq(m.mode, 0644, "no attributes: the default mode");
	cr_assert_null(m.symlink);
	cr_assert_eq(m.xattrs_len, 0);
	proto_meta_free(&m);
	vis_manifest_free(&vm);
	free(json);
	buf_free(&x);
}

/* ---- the reader: what it accepts, the union, the time rule -------------- */

#include "../support/manifest-fixture.h"

Test(vis, committed_manifest_lists_files)
{
	cr_assert_eq(add("{\"version\":1,\"writer\":\"a\",\"state\":\"committed\","
			 "\"files\":[{\"path\":\"model.pt\",\"size\":10,"
			 "\"etag\":\"\\\"e1\\\"\",\"crc32c\":\"deadbeef\"},"
			 "{\"path\":\"sub/opt.pt\",\"size\":0}]}"),
		     0);
	vis_manifest_finish(&m);
	cr_assert_eq(m.n, 2);
	cr_assert_eq(m.committed, 1);
	const vis_file *f = vis_manifest_find(&m, "model.pt");
	cr_assert_not_null(f);
	cr_assert_eq(f->size, 10);
	cr_assert_str_eq(f->etag, "\"e1\"");
	cr_assert(f->has_crc);
	cr_assert_eq(f->crc32c, 0xdeadbeefu);
	cr_assert_null(vis_manifest_find(&m, "model"));
	cr_assert(vis_manifest_has_dir(&m, "sub"));
	cr_assert(vis_manifest_has_dir(&m, ""));
	cr_assert_not(vis_manifest_has_dir(&m, "su"));
	cr_assert_not(vis_manifest_has_dir(&m, "model.pt"));
}

Test(vis, pending_manifest_adds_nothing)
{
	cr_assert_eq(add("{\"state\":\"pending\"}"), 0);
	vis_manifest_finish(&m);
	cr_assert_eq(m.n, 0);
	cr_assert_eq(m.pending, 1);
	cr_assert_eq(m.committed, 0);
	cr_assert_not(vis_manifest_has_dir(&m, ""));
}

Test(vis, union_of_writers_deduplicated)
{
	add("{\"state\":\"committed\",\"files\":[{\"path\":\"__0_0.distcp\","
	    "\"size\":1},{\"path\":\".metadata\",\"size\":2}]}");
	add("{\"state\":\"committed\",\"files\":[{\"path\":\"__1_0.distcp\","
	    "\"size\":1},{\"path\":\".metadata\",\"size\":2}]}");
	vis_manifest_finish(&m);
	cr_assert_eq(m.n, 3);
	cr_assert_str_eq(m.files[0].path, ".metadata");
	cr_assert_not_null(vis_manifest_find(&m, "__1_0.distcp"));
}

Test(vis, malformed_manifests_rejected_whole)
{
	cr_assert_eq(add("not json"), -1);
	cr_assert_eq(add("[]"), -1);
	cr_assert_eq(add("{\"state\":\"done\",\"files\":[]}"), -1);
	cr_assert_eq(add("{\"state\":\"committed\"}"), -1);
	cr_assert_eq(add("{\"state\":\"committed\",\"files\":[{\"path\":\"ok\","
			 "\"size\":1},{\"path\":\"../escape\",\"size\":1}]}"),
		     -1);
	cr_assert_eq(add("{\"state\":\"committed\",\"files\":[{\"path\":\"/abs\","
			 "\"size\":1}]}"),
		     -1);
	cr_assert_eq(add("{\"state\":\"committed\",\"files\":[{\"path\":\"a//b\","
			 "\"size\":1}]}"),
		     -1);
	cr_assert_eq(add("{\"state\":\"committed\",\"files\":[{\"path\":\"a\","
			 "\"size\":-1}]}"),
		     -1);
	cr_assert_eq(add("{\"state\":\"committed\",\"files\":[{\"path\":\"a\"}]}"),
		     -1);
	vis_manifest_finish(&m);
	cr_assert_eq(m.n, 0, "a rejected manifest leaves nothing behind");
	cr_assert_eq(m.committed, 0);
}

Test(vis, time_rule_newest_manifest_wins)
{
	/* an addendum (later "time") rewrites model.pt; order of adding
	 * must not matter */
	add("{\"state\":\"committed\",\"time\":200,\"files\":[{\"path\":"
	    "\"model.pt\",\"size\":2,\"etag\":\"\\\"new\\\"\"}]}");
	add("{\"state\":\"committed\",\"time\":100,\"files\":[{\"path\":"
	    "\"model.pt\",\"size\":1,\"etag\":\"\\\"old\\\"\"},{\"path\":"
	    "\"b\",\"size\":3}]}");
	vis_manifest_finish(&m);
	cr_assert_eq(m.n, 2);
	const vis_file *f = vis_manifest_find(&m, "model.pt");
	cr_assert_str_eq(f->etag, "\"new\"");
	cr_assert_eq(f->size, 2);
	cr_assert_eq(f->time, 200);
}

Test(vis, time_rule_ties_go_to_the_last_added)
{
	add("{\"state\":\"committed\",\"files\":[{\"path\":\"x\",\"size\":1}]}");
	add("{\"state\":\"committed\",\"files\":[{\"path\":\"x\",\"size\":2}]}");
	vis_manifest_finish(&m);
	cr_assert_eq(m.n, 1);
	cr_assert_eq(m.files[0].size, 2);
}

Test(vis, dirs_and_attributes)
{
	cr_assert_eq(add("{\"state\":\"committed\",\"files\":[{\"path\":\"a\","
			 "\"size\":1,\"mode\":420,\"uid\":7,\"gid\":8,"
			 "\"mtime\":99,\"symlink\":\"t\",\"xattrs\":"
			 "{\"user.x\":\"AA==\"}}],\"dirs\":[{\"path\":"
			 "\"e/f\"},{\"path\":\"e/f\"}]}"),
		     0);
	vis_manifest_finish(&m);
	cr_assert_eq(m.n_dirs, 1, "deduplicated");
	cr_assert(vis_manifest_has_dir(&m, "e"));
	cr_assert(vis_manifest_has_dir(&m, "e/f"));
	cr_assert_not(vis_manifest_has_dir(&m, "e/g"));
	const vis_file *f = vis_manifest_find(&m, "a");
	cr_assert(f->has_attrs);
	cr_assert_eq(f->mode, 0644);
	cr_assert_eq(f->uid, 7);
	cr_assert_eq(f->mtime_ns, 99);
	cr_assert_str_eq(f->symlink, "t");
	cr_assert_str_eq(f->xattrs_json, "{\"user.x\":\"AA==\"}");
	/* only the empty directory: the root still shows */
	vis_manifest_free(&m);
	vis_manifest_init(&m);
	add("{\"state\":\"committed\",\"files\":[],\"dirs\":[{\"path\":\"d\"}]}");
	vis_manifest_finish(&m);
	cr_assert(vis_manifest_has_dir(&m, ""));
	cr_assert_eq(add("{\"state\":\"committed\",\"files\":[],\"dirs\":"
			 "[{\"path\":\"../x\"}]}"),
		     -1, "bad dir path rejects the manifest");
}

/* Device nodes keep type and number; directories keep their attributes,
 * the newest manifest's winning. */
Test(proto, manifest_special_files_and_dir_attrs)
{
	proto_meta mf = {.mode = S_IFBLK | 0600, .uid = 1, .gid = 2,
			 .mtime_ns = 3, .rdev = 0x10301};
	proto_meta mq = {.mode = S_IFIFO | 0620, .mtime_ns = 3};
	proto_meta md = {.mode = 02750, .uid = 7, .gid = 8, .mtime_ns = 9};
	proto_mfile f[2] = {{"sub/disk", 0, "\"e\"", 0, false, &mf, 0, NULL},
			    {"pipe", 0, "\"e\"", 0, false, &mq, 0, NULL}};
	proto_meta mr = {.mode = 01777, .uid = 3, .gid = 4, .mtime_ns = 9};
	proto_mdir d[3] = {{"sub", &md, false}, {"bare", NULL, false},
			   {"", &mr, false}};
	char *json = proto_manifest_json("w", 1, 10, f, 2, d, 3);
	cr_assert_not_null(json);
	cr_assert_null(strstr(strstr(json, "\"pipe\""), "rdev"),
		       "a FIFO has no device number");
	md.mode = 0700;
	char *newer = proto_manifest_json("w", 2, 20, NULL, 0, d, 1);
	vis_manifest vm;
	vis_manifest_init(&vm);
	cr_assert_eq(vis_manifest_add_json(&vm, newer, strlen(newer), NULL), 0);
	cr_assert_eq(vis_manifest_add_json(&vm, json, strlen(json), NULL), 0);
	vis_manifest_finish(&vm);
	const vis_file *v = vis_manifest_find(&vm, "sub/disk");
	cr_assert_not_null(v);
	cr_assert_eq(v->mode, S_IFBLK | 0600);
	cr_assert_eq(v->rdev, 0x10301);
	proto_meta back;
	vis_file_meta(v, &back);
	cr_assert_eq(back.rdev, 0x10301);
	proto_meta_free(&back);
	v = vis_manifest_dir(&vm, "sub");
	cr_assert_not_null(v);
	cr_assert_eq(v->mode, 0700, "the newer manifest's time wins");
	cr_assert_eq(v->uid, 7);
	cr_assert_null(vis_manifest_dir(&vm, "bare"), "no attributes");
	cr_assert(vis_manifest_has_dir(&vm, "bare"));
	cr_assert_null(vis_manifest_dir(&vm, "nowhere"));
	v = vis_manifest_dir(&vm, "");
	cr_assert_not_null(v, "the root's own attributes (\"dir\")");
	cr_assert_eq(v->mode, 01777);
	cr_assert_eq(v->uid, 3);
	cr_assert_not(vis_manifest_has_dir(&vm, "x"));
	vis_manifest_free(&vm);
	free(json);
	free(newer);
}

Test(proto, manifest_state_and_txn)
{
	bool c = true;
	uint64_t txn = 9;
	char *j = proto_intent_json("w", 42);
	cr_assert_eq(proto_manifest_state(j, strlen(j), &c, &txn), 0);
	cr_assert_not(c);
	cr_assert_eq(txn, 42);
	free(j);
	j = proto_manifest_json("w", 43, 1, NULL, 0, NULL, 0);
	cr_assert_eq(proto_manifest_state(j, strlen(j), &c, &txn), 0);
	cr_assert(c);
	cr_assert_eq(txn, 43);
	free(j);
	const char *bad[] = {"", "{", "[]", "{\"state\":\"maybe\"}", NULL};
	for (int i = 0; bad[i]; i++)
		cr_assert_eq(proto_manifest_state(bad[i], strlen(bad[i]), &c,
						  &txn),
			     -1, "%s", bad[i]);
	cr_assert_eq(proto_manifest_state("{\"state\":\"committed\"}", 21, &c,
					  &txn),
		     0);
	cr_assert(c);
	cr_assert_eq(txn, 0);
}

Test(proto, manifest_renamed_from)
{
	char *j = proto_manifest_json("w1", 7, 1, NULL, 0, NULL, 0);
	char *from, *writer;
	cr_assert_eq(proto_manifest_renamed_from(j, strlen(j), &from, &writer), 0);
	char *c = proto_manifest_with_from(j, "../ckpt-1");
	cr_assert_eq(proto_manifest_renamed_from(c, strlen(c), &from, &writer), 1);
	cr_assert_str_eq(from, "../ckpt-1");
	cr_assert_str_eq(writer, "w1");
	free(from);
	free(writer);
	/* still a committed manifest to every reader */
	bool committed;
	uint64_t txn;
	cr_assert_eq(proto_manifest_state(c, strlen(c), &committed, &txn), 0);
	cr_assert(committed);
	cr_assert_eq(proto_manifest_renamed_from("{", 1, &from, &writer), -1);
	free(c);
	free(j);
}

/* Directories' xattrs and mtimes (issue 22): written and read back, the
 * root's "dir" too, negative mtimes (before 1970) kept. */
Test(proto, manifest_dir_xattrs_and_mtime)
{
	static const char blob[] = "user.d\0\3\0\0\0a\0b";
	proto_meta md = {.mode = 0750, .uid = 7, .gid = 8,
			 .mtime_ns = -1000000000123456789LL,
			 .xattrs = (char *)blob, .xattrs_len = sizeof blob - 1};
	proto_meta mr = {.mode = 0700, .mtime_ns = 5, .xattrs = (char *)blob,
			 .xattrs_len = sizeof blob - 1};
	proto_mdir d[2] = {{"sub", &md, false}, {"", &mr, false}};
	char *json = proto_manifest_json("w", 1, 10, NULL, 0, d, 2);
	cr_assert_not_null(json);
	vis_manifest vm;
	vis_manifest_init(&vm);
	cr_assert_eq(vis_manifest_add_json(&vm, json, strlen(json), NULL), 0);
	vis_manifest_finish(&vm);
	for (int i = 0; i < 2; i++) {
		const vis_file *v = vis_manifest_dir(&vm, i ? "" : "sub");
		cr_assert_not_null(v);
		cr_assert_eq(v->mtime_ns, i ? 5 : -1000000000123456789LL);
		cr_assert_not_null(v->xattrs_json);
		proto_meta back;
		vis_file_meta(v, &back);
		cr_assert_eq(back.xattrs_len, sizeof blob - 1);
		cr_assert_eq(memcmp(back.xattrs, blob, sizeof blob - 1), 0);
		proto_meta_free(&back);
	}
	vis_manifest_free(&vm);
	free(json);
}

/* A directory recorded again unchanged as a "parent" by later manifests
 * (a file of it stored again) keeps the time of the first record of it
 * as "since"; a change of its attributes (its mtime moved: a name came)
 * starts a new run, and so does a record that is no parent's (a rename
 * moved another directory there). */
Test(proto, manifest_dir_since)
{
	static const char blob[] = "user.d\0\1\0\0\0a";
	proto_meta md = {.mode = 0750, .uid = 7, .gid = 8, .mtime_ns = 5,
			 .xattrs = (char *)blob, .xattrs_len = sizeof blob - 1};
	proto_mdir d[2] = {{"sub", &md, false}, {"", &md, false}};
	char *j[5];
	j[0] = proto_manifest_json("w", 1, 100, NULL, 0, d, 2);
	d[0].parent = d[1].parent = true;
	j[1] = proto_manifest_json("w", 2, 200, NULL, 0, d, 2);
	md.mtime_ns = 250; /* a name made in both */
	j[2] = proto_manifest_json("w", 3, 300, NULL, 0, d, 2);
	j[3] = proto_manifest_json("w", 4, 400, NULL, 0, d, 1);
	cr_assert_not_null(strstr(j[3], "\"parent\":true"));
	d[0].parent = false;
	md.mtime_ns = 5; /* as j[1] records it */
	j[4] = proto_manifest_json("w", 5, 500, NULL, 0, d, 1);
	vis_manifest vm;
	vis_manifest_init(&vm);
	for (int i = 3; i >= 0; i--) /* any order */
		cr_assert_eq(vis_manifest_add_json(&vm, j[i], strlen(j[i]),
						   NULL),
			     0);
	vis_manifest_finish(&vm);
	const vis_file *v = vis_manifest_dir(&vm, "sub");
	cr_assert_not_null(v);
	cr_assert_eq(v->mtime_ns, 250);
	cr_assert_eq(v->time, 400);
	cr_assert_eq(v->since, 300, "the first record of it as it is");
	v = vis_manifest_dir(&vm, "");
	cr_assert_not_null(v);
	cr_assert_eq(v->since, 300);
	vis_manifest_free(&vm);
	vis_manifest_init(&vm);
	cr_assert_eq(vis_manifest_add_json(&vm, j[1], strlen(j[1]), NULL), 0);
	cr_assert_eq(vis_manifest_add_json(&vm, j[0], strlen(j[0]), NULL), 0);
	vis_manifest_finish(&vm);
	v = vis_manifest_dir(&vm, "sub");
	cr_assert_eq(v->since, 100, "recorded again unchanged");
	cr_assert_eq(vis_manifest_add_json(&vm, j[4], strlen(j[4]), NULL), 0);
	vis_manifest_finish(&vm);
	v = vis_manifest_dir(&vm, "sub");
	cr_assert_eq(v->since, 500, "not a parent's record");
	vis_manifest_free(&vm);
	for (int i = 0; i < 5; i++)
		free(j[i]);
}
