/*
 * Tests for verify's pure rules (verify/verify.c): which ETags are an
 * MD5 to check against, which keys are manifests and of which root, and
 * which keys are ckptfs' own (never verified as files).
 */
#include <criterion/criterion.h>

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
