/* Held remote deletes (fs/write-deletes.c): a directory delete replaces
 * the held deletes of what it holds; a fact about an unrelated path leaves
 * them held; a listing being fetched restarts their quiet time.  Only
 * cases that send nothing to the engine (the context has none). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "fs/local.h"
#include "fs/write-deletes.h"

static fs_ctx fs;
static struct wr_deletes dels;

static void setup(void)
{
	memset(&fs, 0, sizeof fs);
	memset(&dels, 0, sizeof dels);
	fs.dels = &dels;
}

static void teardown(void)
{
	wr_dels_clear(&dels);
	free(dels.v);
}

TestSuite(write_deletes, .init = setup, .fini = teardown);

Test(write_deletes, dir_delete_replaces_file_deletes)
{
	cr_assert_eq(wr_hold_delete(&fs, "ckpt/a", false, NULL), 0);
	cr_assert_eq(wr_hold_delete(&fs, "ckpt/sub/b", false, NULL), 0);
	cr_assert_eq(dels.n, 2);
	cr_assert_eq(wr_hold_delete(&fs, "ckpt/sub", true, NULL), 0);
	cr_assert_eq(dels.n, 2);
	cr_assert_str_eq(dels.v[0].path, "ckpt/a");
	cr_assert_str_eq(dels.v[1].path, "ckpt/sub");
	cr_assert(dels.v[1].is_dir);
	cr_assert_eq(wr_hold_delete(&fs, "ckpt", true, NULL), 0);
	cr_assert_eq(dels.n, 1);
	cr_assert_str_eq(dels.v[0].path, "ckpt");
	cr_assert(dels.v[0].is_dir);
}

Test(write_deletes, unrelated_fact_keeps_them_held)
{
	cr_assert_eq(wr_hold_delete(&fs, "ckpt/a", false, NULL), 0);
	wr_ordered_for(&fs, "latest");
	wr_ordered_for(&fs, "ckpt-2/a");
	wr_ordered_for(&fs, "ckpt/ab");
	cr_assert_eq(dels.n, 1);
}

Test(write_deletes, fetch_restarts_quiet_time)
{
	fs_local_fetch_done(&fs);
	cr_assert_eq(dels.last, 0.0);
	cr_assert_eq(wr_hold_delete(&fs, "ckpt/a", false, NULL), 0);
	dels.last = 0;
	fs_local_fetch_done(&fs);
	cr_assert_gt(dels.last, 0.0);
}

/* The directory a delete keeps (issue 22) goes with the delete it rode
 * on when a directory delete replaces it: rmdir c keeping b, then rmdir
 * b keeping a, leaves one delete of b that keeps a. */
Test(write_deletes, kept_directory_follows_the_delete)
{
	cr_assert_eq(wr_hold_delete(&fs, "n/a/b/c", true, "n/a/b"), 0);
	cr_assert_str_eq(dels.v[0].keep, "n/a/b");
	cr_assert_eq(wr_hold_delete(&fs, "n/a/b", true, "n/a"), 0);
	cr_assert_eq(dels.n, 1);
	cr_assert_str_eq(dels.v[0].path, "n/a/b");
	cr_assert_str_eq(dels.v[0].keep, "n/a");
	cr_assert_eq(wr_hold_delete(&fs, "n/a/x", false, NULL), 0);
	cr_assert_null(dels.v[1].keep);
}
