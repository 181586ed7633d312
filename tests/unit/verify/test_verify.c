/*
 * Tests for verify's pure rules (verify/verify.c): which ETags are an
 * MD5 to check against, which keys are manifests and of which root, and
 * which keys are ckptfs' own (never verified as files).
 */
#include <criterion/criterion.h>

#include <stdlib.h>

#include "verify/verify.h"

Test(verify, etag_md5)
{
	cr_expect(verify_etag_is_md5("\"d41d8cd98f00b204e9800998ecf8427e\""));
	cr_expect(verify_etag_is_md5("d41d8cd98f00b204e9800998ecf8427e"));
	cr_expect(verify_etag_is_md5("D41D8CD98F00B204E9800998ECF8427E"));
	cr_expect(!verify_etag_is_md5("\"d41d8cd98f00b204e9800998ecf8427e-2\""));
	cr_expect(!verify_etag_is_md5("\"d41d8cd98f00b204e9800998ecf8427\""));
	cr_expect(!verify_etag_is_md5("\"g41d8cd98f00b204e9800998ecf8427e\""));
	cr_expect(!verify_etag_is_md5(""));
	cr_expect(!verify_etag_is_md5(NULL));
}

Test(verify, manifest_roots)
{
	cr_expect_eq(verify_manifest_root_len("p/c/.ckptfs/manifest.w-1.json"), 4);
	cr_expect_eq(verify_manifest_root_len(".ckptfs/manifest.w-1.json"), 0);
	cr_expect_eq(verify_manifest_root_len("p/c/.ckptfs/manifest.w-1.7.json"), 4);
	cr_expect_eq(verify_manifest_root_len("p/c/.ckptfs/other.json"), -1);
	cr_expect_eq(verify_manifest_root_len("p/c/x.ckptfs/manifest.w.json"), -1);
	cr_expect_eq(verify_manifest_root_len("p/c/model.bin"), -1);
	cr_expect_eq(verify_manifest_root_len("p/.ckptfs/sub/manifest.w.json"), -1);
}

Test(verify, own_keys)
{
	cr_expect(verify_is_own_key("p/.ckptfs-pending/c/w@123"));
	cr_expect(verify_is_own_key("p/c/.ckptfs/manifest.w.json"));
	cr_expect(verify_is_own_key(".ckptfs-pending/c/w@1"));
	cr_expect(!verify_is_own_key("p/c/model.ckptfs"));
	cr_expect(!verify_is_own_key("p/c/model.bin"));
}

Test(verify, how_names)
{
	cr_expect_str_eq(verify_how_name(VERIFY_MANIFEST), "manifest");
	cr_expect_str_eq(verify_how_name(VERIFY_MD5), "md5");
	cr_expect_str_eq(verify_how_name(VERIFY_SIZE), "size");
}

/* The one encoder of a checked file and of a run's summary (what
 * `ckptfs verify --json` prints and the daemon sends). */
Test(verify, file_and_summary_json)
{
	verify_file ok = {.key = "p/c/a.bin", .rel = "c/a.bin", .size = 5,
			  .how = VERIFY_MD5, .ok = true};
	json_t *j = verify_file_json(&ok);
	char *s = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
	cr_expect_str_eq(s, "{\"check\":\"md5\",\"key\":\"p/c/a.bin\","
			    "\"ok\":true,\"path\":\"c/a.bin\",\"size\":5}");
	free(s);
	json_decref(j);
	verify_file bad = {.key = "k", .rel = "", .size = 0,
			   .how = VERIFY_MANIFEST, .ok = false,
			   .problem = "missing"};
	j = verify_file_json(&bad);
	cr_expect_str_eq(json_string_value(json_object_get(j, "problem")),
			 "missing");
	cr_expect(json_is_false(json_object_get(j, "ok")));
	json_decref(j);

	verify_summary sum = {.files = 7, .ok = 6, .bad = 1,
			      .by = {4, 2, 1}, .skipped = 3, .bytes = 1ull << 40};
	j = verify_summary_json(&sum);
	s = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
	cr_expect_str_eq(s, "{\"bad\":1,\"by_manifest\":4,\"by_md5\":2,"
			    "\"by_size\":1,\"bytes\":1099511627776,"
			    "\"files\":7,\"ok\":6,\"skipped\":3}");
	free(s);
	json_decref(j);
}
