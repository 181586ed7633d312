/*
 * Transactions of a writable mount (fs/write-txn.c, and the idle
 * thread's commit triggers in fs/write-idle.c), driven through the FUSE
 * operations on a bucket whose LISTs and commit engine are fakes
 * (tests/unit/support/fs-ops.h): which transaction a new name joins, which
 * manifest root it names, when a transaction seals, and what reaches the
 * engine in which order.
 *
 * The bucket: /ckpt/ committed by ckptfs (a manifest naming its file a),
 * /plain/ written by other tools.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "proto/manifest.h"

#include "../support/fs-ops.h"

static fs_ctx *fs;
static char *manifest;

static void setup(void)
{
	fs = fx_new_writable(10);
	proto_mfile f[] = {{"a", 1, "\"a-1-1700000000\"", 0, false, NULL, 0,
			    NULL}};
	manifest = proto_manifest_json("w", 1, 1700000000000000000LL, f, 1,
				       NULL, 0);
	fake_list_add("ckpt/", 0, 0);
	fake_list_add("plain/", 0, 0);
	fake_dir *d = fake_list_in("pre/ckpt/");
	fake_dir_add(d, "a", 1, 1700000000);
	d->manifest = manifest;
	fake_dir_add(fake_list_in("pre/plain/"), "x", 1, 1700000000);
}

static void teardown(void)
{
	fs_ctx_free(fs);
	free(manifest);
}

TestSuite(write_txn, .init = setup, .fini = teardown, .timeout = 30);

static int seal(const char *path)
{
	return fx_seal(fs, path);
}

static bool sealed(const char *path)
{
	fs_itable_lock(fs->it);
	bool s = fx_txn_of(fs, path)->sealed;
	fs_itable_unlock(fs->it);
	return s;
}

/* Facts a..b in this order in the engine's log. */
static void in_order(const char *a, const char *b)
{
	int ia = fake_eng_find(a), ib = fake_eng_find(b);
	cr_assert_geq(ia, 0, "\"%s\" reached the engine", a);
	cr_assert_gt(ib, ia, "\"%s\" after \"%s\"", b, a);
}

/* ---- which transaction ---------------------------------------------------- */

/* A directory made in a remote directory roots a transaction, recorded
 * with its attributes; what is made under it joins it. */
Test(write_txn, a_new_directory_roots_a_transaction_its_names_join)
{
	cr_assert_eq(fx_mkdir(fs, ROOT_INO, "run", 0750), 0);
	in_order("begin dir run mroot=-", "dirput 1 run 750");
	fuse_ino_t run = fx_lookup(fs, ROOT_INO, "run");
	cr_assert_eq(fx_mkdir(fs, run, "sub", 0700), 0);
	fuse_ino_t sub = fx_lookup(fs, run, "sub");
	cr_assert_eq(fx_write_file(fs, sub, "w", "abc"), 0);
	cr_assert_geq(fake_eng_find("dirput 1 run/sub 700"), 0);
	cr_assert_geq(fake_eng_find("put 1 run/sub/w 3"), 0);
	cr_assert_eq(fake.next_id, 2, "one transaction");
	cr_assert(!sealed("run"), "a directory waits for a commit trigger");
}

/* A new name in a directory ckptfs committed is named in an addendum of
 * that directory's manifests (its manifest root), or readers, who see
 * there only what manifests name, would never see it. */
Test(write_txn, a_new_name_in_a_committed_directory_names_its_manifests)
{
	fuse_ino_t ckpt = fx_lookup(fs, ROOT_INO, "ckpt");
	cr_assert_eq(fx_write_file(fs, ckpt, "extra", "x"), 0);
	cr_assert_geq(fake_eng_find("begin file ckpt/extra mroot=ckpt"), 0);
	fuse_ino_t plain = fx_lookup(fs, ROOT_INO, "plain");
	cr_assert_eq(fx_mkdir(fs, plain, "d", 0755), 0);
	cr_assert_geq(fake_eng_find("begin dir plain/d mroot=-"), 0);
}

/* A name made under a directory of this mount that is committing gets a
 * transaction of its own whose manifest root is that directory. */
Test(write_txn, a_name_under_a_committing_directory_names_it)
{
	fuse_ino_t run = fx_dir_with_file(fs, ROOT_INO, "run", "w", "abc");
	cr_assert_eq(seal("run"), 0);
	cr_assert(sealed("run"));
	cr_assert_eq(fx_write_file(fs, run, "late", "z"), 0);
	cr_assert_geq(fake_eng_find("begin file run/late mroot=run"), 0);
	in_order("seal 1", "put 2 run/late 1");
}

/* The engine could not put a new directory's marker: mkdir fails and
 * nothing is left behind. */
Test(write_txn, a_transaction_that_cannot_begin_fails_the_mkdir)
{
	fake.begin_rc = -EIO;
	cr_assert_eq(fx_mkdir(fs, ROOT_INO, "run", 0755), EIO);
	cr_assert_eq(fx_lookup(fs, ROOT_INO, "run"), 0);
	fs_itable_lock(fs->it);
	cr_assert_null(ov_get(&fs->ov, "run"));
	fs_itable_unlock(fs->it);
}

/* ---- sealing ---------------------------------------------------------------- */

/* A single file commits when its last writer closes it, not before. */
Test(write_txn, a_single_file_commits_when_closed)
{
	struct fuse_file_info fi;
	cr_assert_eq(fx_create(fs, ROOT_INO, "latest", "run-1", &fi), 0);
	cr_assert_geq(fake_eng_find("begin file latest mroot=-"), 0);
	cr_assert(!fake_eng_has("put"), "open: its bytes are not final");
	fx_close(fs, fx_lookup(fs, ROOT_INO, "latest"), &fi);
	in_order("put 1 latest 5", "seal 1");
}

/* The directories' mtimes moved as names came: the seal records them as
 * they are now, before the commit point. */
Test(write_txn, the_seal_records_directories_changed_since)
{
	fx_dir_with_file(fs, ROOT_INO, "run", "w", "abc");
	size_t before = fake.n;
	cr_assert_eq(seal("run"), 0);
	cr_assert_eq(fake.n, before + 2);
	cr_assert_str_eq(fake.log[before], "dirput 1 run 755");
	cr_assert_str_eq(fake.log[before + 1], "seal 1");
	cr_assert_eq(seal("run"), 0);
	cr_assert_eq(fake.n, before + 2, "sealed once");
}

/* A transaction whose write failed stays open: waiting for it fails
 * (eng_wait_txn), it never commits with a short file. */
Test(write_txn, a_poisoned_transaction_never_seals)
{
	cr_assert_eq(fx_mkdir(fs, ROOT_INO, "run", 0755), 0);
	fake.txn[1].poisoned = true;
	cr_assert_eq(seal("run"), 0);
	cr_assert(!sealed("run"));
	cr_assert(!fake_eng_has("seal"));
}

/* A transaction the engine no longer has (an operator dropped it) counts
 * as sealed here, so the reap drops its nodes; one whose seal could not
 * be journaled stays open and says so. */
Test(write_txn, seal_failures)
{
	cr_assert_eq(fx_mkdir(fs, ROOT_INO, "run", 0755), 0);
	cr_assert_eq(fx_mkdir(fs, ROOT_INO, "run2", 0755), 0);
	fake.seal_rc = -EIO;
	cr_assert_eq(seal("run"), -EIO);
	cr_assert(!sealed("run"));
	fake.seal_rc = -ENOENT;
	cr_assert_eq(seal("run2"), 0);
	cr_assert(sealed("run2"));
}

/* A committing single file written again gets a new transaction ordered
 * after the first, under the same manifest root: a chmod then a touch of
 * a committed file in a checkpoint directory both reach its manifest. */
Test(write_txn, a_committing_file_rewritten_commits_again_in_its_root)
{
	fuse_ino_t ckpt = fx_lookup(fs, ROOT_INO, "ckpt");
	cr_assert_eq(fx_write_file(fs, ckpt, "extra", "x"), 0);
	in_order("put 1 ckpt/extra 1", "seal 1");
	fs_itable_lock(fs->it);
	ov_node *o = ov_get(&fs->ov, "ckpt/extra");
	o->meta_dirty = true; /* a chmod */
	cr_assert_eq(wr_put_file(fs, o), 0);
	fs_itable_unlock(fs->it);
	int s1 = fake_eng_find("seal 1");
	cr_assert_eq(fake.n, (size_t)s1 + 4);
	cr_assert_str_eq(fake.log[s1 + 1], "begin file ckpt/extra mroot=ckpt");
	cr_assert_str_eq(fake.log[s1 + 2], "put 2 ckpt/extra 1");
	cr_assert_str_eq(fake.log[s1 + 3], "seal 2");
}

/* After a failed write the file is handed over short and its
 * transaction poisoned, never committed as if whole. */
Test(write_txn, a_failed_write_poisons_its_transaction)
{
	cr_assert_eq(fx_mkdir(fs, ROOT_INO, "run", 0755), 0);
	fuse_ino_t run = fx_lookup(fs, ROOT_INO, "run");
	struct fuse_file_info fi;
	cr_assert_eq(fx_create(fs, run, "w", "abc", &fi), 0);
	fs_itable_lock(fs->it);
	ov_get(&fs->ov, "run/w")->failed = ENOSPC;
	fs_itable_unlock(fs->it);
	fx_close(fs, 0, &fi);
	in_order("poison 1 run/w 28", "putshort 1 run/w 3");
	cr_assert(!fake_eng_has("put 1"));
	cr_assert_eq(seal("run"), 0);
	cr_assert(!sealed("run"));
}

/* ---- staging files ------------------------------------------------------------ */

/* A staging file handed to the engine is immutable: a write after it
 * goes to a copy (of the bytes kept), the engine's stays as handed. */
Test(write_txn, a_handed_staging_file_is_copied_before_a_write)
{
	fx_dir_with_file(fs, ROOT_INO, "run", "w", "abcdef");
	fs_itable_lock(fs->it);
	ov_node *o = ov_get(&fs->ov, "run/w");
	ov_stage *handed = o->st;
	cr_assert(handed->handed);
	ov_stage_ref(handed);
	cr_assert_eq(wr_writable_stage(fs, o, 4), 0);
	cr_assert_neq(o->st, handed);
	cr_assert(!o->st->handed);
	char b[8] = {0};
	cr_assert_eq(pread(o->st->fd, b, sizeof b, 0), 4);
	cr_assert_str_eq(b, "abcd");
	cr_assert_eq(pwrite(o->st->fd, "X", 1, 0), 1);
	memset(b, 0, sizeof b);
	cr_assert_eq(pread(handed->fd, b, sizeof b, 0), 6);
	cr_assert_str_eq(b, "abcdef", "the engine's copy is untouched");
	ov_stage *mine = o->st;
	cr_assert_eq(wr_writable_stage(fs, o, 4), 0);
	cr_assert_eq(o->st, mine, "a stage not handed is written in place");
	ov_stage_unref(handed);
	fs_itable_unlock(fs->it);
}

/* ---- commit triggers of the idle thread ------------------------------------------ */

/* Waits up to limit seconds for the engine to be told line. */
static bool eventually(const char *line, double limit)
{
	for (double t = 0; t < limit; t += 0.05) {
		fs_itable_lock(fs->it);
		bool seen = fake_eng_find(line) >= 0;
		fs_itable_unlock(fs->it);
		if (seen)
			return true;
		nanosleep(&(struct timespec){0, 50000000}, NULL);
	}
	return false;
}

/* A directory transaction seals after commit_delay of quiet only when it
 * holds a file: in a multi-host save every host makes the directory
 * first, and an empty one committing early would let the others' files
 * show without its own (fs/write-idle.c). */
Test(write_txn, quiet_commits_a_directory_only_once_it_holds_a_file)
{
	fs->eng = NULL;
	fs_ctx_set_engine(fs, FAKE_ENG, 0.2);
	cr_assert_eq(fx_mkdir(fs, ROOT_INO, "run", 0755), 0);
	fuse_ino_t run = fx_lookup(fs, ROOT_INO, "run");
	cr_assert_eq(fx_mkdir(fs, run, "empty", 0755), 0);
	cr_assert(!eventually("seal 1", 1.0), "empty: never by quiet");
	cr_assert_eq(fx_write_file(fs, run, "w", "abc"), 0);
	cr_assert(eventually("seal 1", 10.0), "quiet after a file");
}

/* The checkpoint's last file by the completion rules (.metadata beside
 * *.distcp) seals it after half a second of quiet, whatever commit_delay
 * says. */
Test(write_txn, a_completed_checkpoint_commits_without_commit_delay)
{
	fs->eng = NULL;
	fs_ctx_set_engine(fs, FAKE_ENG, 3600);
	cr_assert_eq(fx_mkdir(fs, ROOT_INO, "step-1", 0755), 0);
	fuse_ino_t d = fx_lookup(fs, ROOT_INO, "step-1");
	cr_assert_eq(fx_write_file(fs, d, "__0_0.distcp", "abc"), 0);
	cr_assert(!eventually("seal 1", 1.5), "not complete yet");
	cr_assert_eq(fx_write_file(fs, d, ".metadata", "m"), 0);
	cr_assert(eventually("seal 1", 10.0));
}
