/* Held remote deletes (fs/write-deletes.c): a directory delete replaces
 * the held deletes of what it holds; a fact about an unrelated path leaves
 * them held; a listing being fetched restarts their quiet time; each one
 * is journaled when held and released into its step (the fake engine,
 * tests/unit/support/fake-eng.c, notes the calls). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "fs/local.h"
#include "fs/overlay.h"
#include "fs/write-deletes.h"
#include "../support/fake-eng.h"

static fs_ctx fs;
static struct wr_deletes dels;

static void setup(void)
{
	memset(&fs, 0, sizeof fs);
	memset(&dels, 0, sizeof dels);
	fs.dels = &dels;
	fake_eng_reset();
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

/* A delete that returned is in the journal before it is sent (model seed
 * 5003: a SIGKILL lost the held ones); the directory delete forgets the
 * rows it replaces with its own, and a flush releases each row into its
 * step. */
Test(write_deletes, held_deletes_are_journaled_and_released)
{
	cr_assert_eq(wr_hold_delete(&fs, "ckpt/sub/a", false, "ckpt/sub"), 0);
	cr_assert_eq(wr_hold_delete(&fs, "ckpt/b", false, NULL), 0);
	cr_assert_geq(fake_eng_find("hold 1 ckpt/sub/a file keep=ckpt/sub"), 0);
	cr_assert_geq(fake_eng_find("hold 2 ckpt/b file keep=-"), 0);
	cr_assert_eq(wr_hold_delete(&fs, "ckpt/sub", true, "ckpt"), 0);
	int h = fake_eng_find("hold 3 ckpt/sub dir keep=ckpt");
	cr_assert_geq(h, 0);
	cr_assert_eq(fake_eng_find("unhold 1"), h + 1);
	cr_assert_lt(fake_eng_find("unhold 2"), 0);
	cr_assert_eq(dels.v[0].hid, 2);
	cr_assert_eq(dels.v[1].hid, 3);
	/* another tree: what is held goes first, released in order */
	cr_assert_eq(wr_hold_delete(&fs, "other", false, NULL), 0);
	int r2 = fake_eng_find("release 2"), r3 = fake_eng_find("release 3");
	cr_assert(r2 >= 0 && r3 > r2);
	cr_assert_eq(fake_eng_find("delete ckpt/b file"), r2 + 1);
	cr_assert_eq(fake_eng_find("delete ckpt/sub dir keep=ckpt"), r3 + 1);
	cr_assert_lt(fake_eng_find("release 1"), 0);
	cr_assert_eq(dels.n, 1);
	cr_assert_str_eq(dels.v[0].path, "other");
}

/* The deletes a killed mount held (an rm -r of a checkpoint cut short)
 * are held again, their names whiteouts: a second of quiet, a fact
 * elsewhere and deletes of another tree leave them held (the crash loop:
 * sent at once, they showed other hosts the checkpoint without its
 * .metadata); the rmdir that ends the rm -r replaces them with one
 * directory delete; a fact about one of them, or a sync, sends it. */
Test(write_deletes, deletes_held_at_a_kill_wait_for_their_rmdir)
{
	ov_init(&fs.ov);
	fs.eng = FAKE_ENG;
	fake.held[0] = "run/ckpt-3/.metadata";
	fake.held[1] = "run/ckpt-3/shard-0";
	fake.held[2] = "run/x";
	wr_dels_revive(&fs);
	cr_assert_eq(dels.n, 3);
	cr_assert(dels.v[0].revived && dels.v[2].revived);
	ov_node *w = ov_get(&fs.ov, "run/ckpt-3/.metadata");
	cr_assert(w && w->kind == OV_WHITEOUT);
	cr_assert(wr_dels_revived_at(&fs, "run/ckpt-3/shard-0"));
	cr_assert_not(wr_dels_revived_at(&fs, "run/ckpt-3/shard-1"));
	cr_assert_not(wr_dels_held_now(&fs));
	wr_flush_quiet(&fs);
	wr_ordered(&fs, "run/tmp-ckpt-4", "run/ckpt-4");
	wr_ordered_for(&fs, "run/ckpt-4/a");
	cr_assert_eq(wr_hold_delete(&fs, "other/a", false, NULL), 0);
	cr_assert_eq(wr_hold_delete(&fs, "other2/a", false, NULL), 0);
	cr_assert_geq(fake_eng_find("release 1"), 0); /* other/a */
	cr_assert_lt(fake_eng_find("release 100"), 0);
	cr_assert_lt(fake_eng_find("release 101"), 0);
	cr_assert_lt(fake_eng_find("release 102"), 0);
	cr_assert_eq(dels.n, 4);
	/* a fact about run/x sends its delete only */
	wr_ordered(&fs, "run/x", NULL);
	cr_assert_geq(fake_eng_find("release 102"), 0);
	cr_assert_lt(fake_eng_find("release 100"), 0);
	/* the rmdir: one directory delete */
	cr_assert_eq(wr_hold_delete(&fs, "run/ckpt-3", true, NULL), 0);
	cr_assert_geq(fake_eng_find("unhold 100"), 0);
	cr_assert_geq(fake_eng_find("unhold 101"), 0);
	wr_flush_deletes(&fs);
	cr_assert_geq(fake_eng_find("delete run/ckpt-3 dir"), 0);
	cr_assert_lt(fake_eng_find("delete run/ckpt-3/.metadata file"), 0);
	cr_assert_eq(dels.n, 0);
	ov_destroy(&fs.ov);
}
