/*
 * Removing and renaming names through a writable mount
 * (fs/write-names.c), called as the kernel calls them, on a bucket whose
 * LISTs and commit engine are fakes (tests/unit/support/fs-ops.h): what a
 * user sees (lookups, errors) and what reaches the engine, in which order.
 *
 * The bucket: /latest (a file), /ckpt/ with files a and b, /empty/ with
 * one file x, all committed by other means (no manifests).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/manifest.h"

#include "../support/fs-ops.h"

static fs_ctx *fs;
static fuse_ino_t ckpt;

static void setup(void)
{
	fs = fx_new_writable(10);
	fake_list_add("latest", 4, 1700000000);
	fake_list_add("ckpt/", 0, 0);
	fake_list_add("other/", 0, 0);
	fake_dir *d = fake_list_in("pre/ckpt/");
	fake_dir_add(d, "a", 1, 1700000000);
	fake_dir_add(d, "b", 2, 1700000000);
	fake_dir_add(fake_list_in("pre/other/"), "x", 1, 1700000000);
	ckpt = fx_lookup(fs, ROOT_INO, "ckpt");
	cr_assert_neq(ckpt, 0);
}

static void teardown(void)
{
	fs_ctx_free(fs);
}

TestSuite(write_names, .init = setup, .fini = teardown, .timeout = 30);

static size_t held_deletes(void)
{
	return fs->dels->n;
}

/* ---- removing ------------------------------------------------------------ */

/* A name removed here is hidden by a whiteout until the delete lands,
 * however long the listing that still names it lives. */
Test(write_names, a_removed_remote_file_is_hidden_until_its_delete_lands)
{
	cr_assert_neq(fx_lookup(fs, ckpt, "a"), 0);
	cr_assert_eq(fx_unlink(fs, ckpt, "a"), 0);
	cr_assert_eq(fx_lookup(fs, ckpt, "a"), 0);
	cr_assert_neq(fx_lookup(fs, ckpt, "b"), 0);
	cr_assert_eq(fx_unlink(fs, ckpt, "a"), ENOENT, "removed already");
	/* held, not sent yet: an rm -r may follow */
	cr_assert_eq(held_deletes(), 1);
	cr_assert(!fake_eng_has("delete"));
	fs_itable_lock(fs->it);
	wr_flush_deletes(fs);
	fs_itable_unlock(fs->it);
	cr_assert_geq(fake_eng_find("delete ckpt/a file"), 0);
	cr_assert_eq(fx_lookup(fs, ckpt, "a"), 0, "until the listing drops it");
}

/* ls shows what this mount did at once, whatever the listing it holds
 * still says: a removed name goes, a name made here comes. */
Test(write_names, ls_shows_removals_and_new_names_at_once)
{
	char names[256];
	fx_readdir(fs, ckpt, names, sizeof names);
	cr_assert_str_eq(names, ". .. a b");
	cr_assert_eq(fx_unlink(fs, ckpt, "a"), 0);
	cr_assert_eq(fx_mkdir(fs, ckpt, "c", 0755), 0);
	cr_assert_eq(fx_write_file(fs, ckpt, "0", "x"), 0);
	fx_readdir(fs, ckpt, names, sizeof names);
	cr_assert_str_eq(names, ". .. 0 b c");
	cr_assert_eq(fake_list.calls, 2, "from the listing it holds");
}

/* rm -r of a directory becomes one directory delete: the file deletes
 * held before are replaced by it (readers never see it shrink). */
Test(write_names, rm_r_of_a_remote_directory_is_one_delete)
{
	cr_assert_eq(fx_rmdir(fs, ROOT_INO, "ckpt"), ENOTEMPTY);
	cr_assert_eq(fx_unlink(fs, ckpt, "a"), 0);
	cr_assert_eq(fx_rmdir(fs, ROOT_INO, "ckpt"), ENOTEMPTY);
	cr_assert_eq(fx_unlink(fs, ckpt, "b"), 0);
	cr_assert_eq(held_deletes(), 2);
	cr_assert_eq(fx_rmdir(fs, ROOT_INO, "ckpt"), 0,
		     "what whiteouts hide does not count");
	cr_assert_eq(held_deletes(), 1);
	cr_assert_str_eq(fs->dels->v[0].path, "ckpt");
	cr_assert(fs->dels->v[0].is_dir);
	cr_assert_eq(fx_lookup(fs, ROOT_INO, "ckpt"), 0);
}

Test(write_names, removing_the_wrong_type_fails_as_on_a_disk)
{
	cr_assert_eq(fx_unlink(fs, ROOT_INO, "ckpt"), EISDIR);
	cr_assert_eq(fx_rmdir(fs, ROOT_INO, "latest"), ENOTDIR);
	cr_assert_eq(fx_unlink(fs, ROOT_INO, "nothing"), ENOENT);
	cr_assert_eq(fx_rmdir(fs, ROOT_INO, "nothing"), ENOENT);
	cr_assert_eq(held_deletes(), 0);
	cr_assert_eq(fake.n, 0, "nothing reached the engine");
}

/* A file written here and removed before anything was handed over leaves
 * no trace: no whiteout, no delete, no fact for the engine. */
Test(write_names, a_file_never_handed_over_vanishes_without_a_trace)
{
	cr_assert_eq(fx_mkdir(fs, ROOT_INO, "new", 0755), 0);
	fuse_ino_t d = fx_lookup(fs, ROOT_INO, "new");
	struct fuse_file_info fi;
	cr_assert_eq(fx_create(fs, d, "f", "abc", &fi), 0);
	size_t facts = fake.n;
	cr_assert_eq(fx_unlink(fs, d, "f"), 0);
	cr_assert_eq(fx_lookup(fs, d, "f"), 0);
	fs_itable_lock(fs->it);
	cr_assert_null(ov_get(&fs->ov, "new/f"), "no whiteout");
	fs_itable_unlock(fs->it);
	cr_assert_eq(fake.n, facts, "nothing for the engine");
	fx_close(fs, 0, &fi); /* the application still had it open */
	cr_assert_eq(fake.n, facts, "nor at its close");
}

/* rmdir of the root of a transaction still open aborts it. */
Test(write_names, rmdir_of_an_open_transaction_root_aborts_it)
{
	cr_assert_eq(fx_mkdir(fs, ROOT_INO, "new", 0755), 0);
	cr_assert_geq(fake_eng_find("begin dir new mroot=-"), 0);
	fuse_ino_t d = fx_lookup(fs, ROOT_INO, "new");
	cr_assert_eq(fx_mkdir(fs, d, "sub", 0700), 0);
	cr_assert_eq(fx_rmdir(fs, ROOT_INO, "new"), ENOTEMPTY);
	cr_assert_eq(fx_rmdir(fs, d, "sub"), 0);
	cr_assert_geq(fake_eng_find("drop 1 new/sub"), 0);
	cr_assert_eq(fx_rmdir(fs, ROOT_INO, "new"), 0);
	cr_assert_geq(fake_eng_find("abort 1"), 0);
	cr_assert_eq(fx_lookup(fs, ROOT_INO, "new"), 0);
	cr_assert_eq(held_deletes(), 0, "nothing remote to delete");
}

/* Issue 21: a checkpoint directory not sealed yet, removed after a
 * `latest` file written after it, is sealed first and deleted after both
 * commits, in the order the application made them; aborting it would
 * make `latest` name a checkpoint never shown. */
Test(write_names, a_checkpoint_named_by_a_later_file_commits_before_its_rm)
{
	cr_assert_eq(fx_mkdir(fs, ROOT_INO, "ckpt-2", 0755), 0);
	cr_assert_eq(fx_write_file(fs, ROOT_INO, "latest-2", "ckpt-2"), 0);
	cr_assert_eq(fx_rmdir(fs, ROOT_INO, "ckpt-2"), 0);
	int seal = fake_eng_find("seal 1");
	cr_assert_geq(seal, 0, "the checkpoint commits");
	cr_assert(!fake_eng_has("abort"));
	cr_assert_eq(held_deletes(), 1, "then its delete, held");
	cr_assert_str_eq(fs->dels->v[0].path, "ckpt-2");
	cr_assert_eq(fx_lookup(fs, ROOT_INO, "ckpt-2"), 0);
}

/* Without a later file it is simply aborted. */
Test(write_names, a_checkpoint_nothing_names_is_aborted_by_its_rm)
{
	cr_assert_eq(fx_mkdir(fs, ROOT_INO, "ckpt-2", 0755), 0);
	cr_assert_eq(fx_rmdir(fs, ROOT_INO, "ckpt-2"), 0);
	cr_assert_geq(fake_eng_find("abort 1"), 0);
	cr_assert(!fake_eng_has("seal"));
}

/* A file of a transaction being committed is deleted after the commit:
 * held, and hidden by a whiteout meanwhile. */
Test(write_names, a_committing_file_is_deleted_after_its_commit)
{
	fuse_ino_t d = fx_dir_with_file(fs, ROOT_INO, "new", "f", "abc");
	cr_assert_eq(fx_seal(fs, "new"), 0);
	cr_assert_eq(fx_unlink(fs, d, "f"), 0);
	cr_assert(!fake_eng_has("drop"));
	cr_assert_eq(held_deletes(), 1);
	cr_assert_str_eq(fs->dels->v[0].path, "new/f");
	cr_assert_eq(fx_lookup(fs, d, "f"), 0);
	fs_itable_lock(fs->it);
	ov_node *w = ov_get(&fs->ov, "new/f");
	cr_assert(w && w->kind == OV_WHITEOUT);
	fs_itable_unlock(fs->it);
}

/* ---- making names ---------------------------------------------------------- */

Test(write_names, mkdir_refuses_names_that_exist_or_are_reserved)
{
	cr_assert_eq(fx_mkdir(fs, ROOT_INO, "ckpt", 0755), EEXIST);
	cr_assert_eq(fx_mkdir(fs, ROOT_INO, "latest", 0755), EEXIST);
	cr_assert_eq(fx_mkdir(fs, ROOT_INO, ".ckptfs", 0755), EPERM);
	char long_name[300];
	memset(long_name, 'n', 256);
	long_name[256] = '\0';
	cr_assert_eq(fx_mkdir(fs, ROOT_INO, long_name, 0755), ENAMETOOLONG);
	cr_assert_eq(fake.n, 0);
}

/* A name made where one was just removed replaces its whiteout: it
 * shows, and its commit replaces the remote original. */
Test(write_names, a_name_made_over_a_removed_one_shows)
{
	cr_assert_eq(fx_unlink(fs, ROOT_INO, "latest"), 0);
	cr_assert_eq(fx_mkdir(fs, ROOT_INO, "latest", 0700), 0);
	fuse_ino_t l = fx_lookup(fs, ROOT_INO, "latest");
	cr_assert_neq(l, 0);
	struct stat st = fx_getattr(fs, l);
	cr_assert(S_ISDIR(st.st_mode));
	cr_assert_eq(st.st_mode & 07777, 0700);
	fs_itable_lock(fs->it);
	cr_assert(ov_get(&fs->ov, "latest")->shadows);
	fs_itable_unlock(fs->it);
}

/* A name made or removed moves its directory's mtime (doc/posix.md). */
Test(write_names, a_removal_moves_the_directory_mtime)
{
	struct stat before = fx_getattr(fs, ckpt);
	cr_assert_eq(fx_unlink(fs, ckpt, "a"), 0);
	struct stat after = fx_getattr(fs, ckpt);
	cr_assert_gt(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
}

/* ---- renaming -------------------------------------------------------------- */

Test(write_names, rename_refuses_what_a_disk_refuses)
{
	cr_assert_eq(fx_rename(fs, ROOT_INO, "ckpt", ckpt, "inside", 0), EINVAL);
	cr_assert_eq(fx_rename(fs, ROOT_INO, "latest", ROOT_INO, "ckpt", 0),
		     EISDIR);
	cr_assert_eq(fx_rename(fs, ROOT_INO, "ckpt", ROOT_INO, "latest", 0),
		     ENOTDIR);
	cr_assert_eq(fx_rename(fs, ROOT_INO, "ckpt", ROOT_INO, "other", 0),
		     ENOTEMPTY);
	cr_assert_eq(fx_rename(fs, ckpt, "a", ckpt, "b", RENAME_NOREPLACE),
		     EEXIST);
	cr_assert_eq(fx_rename(fs, ckpt, "a", ckpt, "b", RENAME_EXCHANGE),
		     EINVAL);
	cr_assert_eq(fx_rename(fs, ckpt, "nothing", ckpt, "c", 0), ENOENT);
	cr_assert_eq(fx_rename(fs, ckpt, "a", ckpt, ".ckptfs-x", 0), EPERM);
	cr_assert_eq(fake.n, 0, "nothing reached the engine");
}

/* A remote directory renamed: a server-side rename, in order, after
 * which the old name is gone and the new one shows. */
Test(write_names, a_remote_directory_renames_on_the_server)
{
	cr_assert_eq(fx_rename(fs, ROOT_INO, "ckpt", ROOT_INO, "ckpt-old", 0),
		     0);
	int rn = fake_eng_find("rename ckpt ckpt-old dir mroot=-");
	cr_assert_geq(rn, 0);
	cr_assert_eq(fake_eng_find("sync"), rn + 1, "and waited for");
	/* the bucket as it is now */
	fake_list.any.n = 0;
	fake_list_add("latest", 4, 1700000000);
	fake_list_add("ckpt-old/", 0, 0);
	fake_list_add("other/", 0, 0);
	cr_assert_eq(fx_lookup(fs, ROOT_INO, "ckpt"), 0);
	cr_assert_eq(fx_lookup(fs, ROOT_INO, "ckpt-old"), ckpt,
		     "the same inode");
}

/* A rename of a committed directory inside a transaction root is
 * recorded in that root's manifest (mroot) and keeps the attributes the
 * manifest recorded for it. */
Test(write_names, a_committed_directory_renamed_in_its_root_keeps_attrs)
{
	proto_meta dm = {.mode = 0750, .uid = 7, .gid = 8,
			 .mtime_ns = 1600000000000000000LL};
	proto_mfile f[] = {{"sub/w", 1, "\"w-1-1700000000\"", 0, false, NULL,
			    0, NULL}};
	proto_mdir dd[] = {{"sub", &dm, false}};
	char *j = proto_manifest_json("w", 1, 1700000000000000000LL, f, 1, dd,
				      1);
	fake_list_add("run/", 0, 0);
	fake_dir *r = fake_list_in("pre/run/");
	fake_dir_add(r, "sub/", 0, 0);
	r->manifest = j;
	fake_dir_add(fake_list_in("pre/run/sub/"), "w", 1, 1700000000);
	fuse_ino_t run = fx_lookup(fs, ROOT_INO, "run");
	fuse_ino_t sub = fx_lookup(fs, run, "sub");
	cr_assert_eq(fx_getattr(fs, sub).st_mode, S_IFDIR | 0750);
	/* the bucket once the rename step ran (the rename waits for it and
	 * lists the moved directory and its root again): the root's
	 * addendum records the new name (commit/renames.c) */
	proto_mdir dd2[] = {{"sub2", &dm, false}};
	f[0].path = "sub2/w";
	char *j2 = proto_manifest_json("w", 2, 1700000000000000001LL, f, 1,
				       dd2, 1);
	r->v[0].name = "sub2/";
	r->manifest = j2;
	fake_dir_add(fake_list_in("pre/run/sub2/"), "w", 1, 1700000000);
	cr_assert_eq(fx_rename(fs, run, "sub", run, "sub2", 0), 0);
	cr_assert_geq(fake_eng_find("rename run/sub run/sub2 dir mroot=run"),
		      0);
	struct stat st = fx_getattr(fs, sub);
	cr_assert_eq(st.st_mode, S_IFDIR | 0750);
	cr_assert_eq(st.st_uid, 7);
	free(j);
	free(j2);
}

/* A remote directory cannot move into a directory made here (mv copies
 * it); within a new directory names move inside its transaction. */
Test(write_names, renames_into_a_new_directory)
{
	cr_assert_eq(fx_mkdir(fs, ROOT_INO, "new", 0755), 0);
	fuse_ino_t d = fx_lookup(fs, ROOT_INO, "new");
	cr_assert_eq(fx_rename(fs, ROOT_INO, "other", d, "other", 0), EXDEV);
	cr_assert_eq(fx_mkdir(fs, d, "a", 0755), 0);
	cr_assert_eq(fx_rename(fs, d, "a", d, "b", 0), 0);
	cr_assert_geq(fake_eng_find("move 1 new/a 1 new/b"), 0);
	cr_assert_eq(fx_lookup(fs, d, "a"), 0);
	cr_assert_neq(fx_lookup(fs, d, "b"), 0);
	cr_assert(!fake_eng_has("seal"), "still open");
}

/* The usual atomic save: write under a temp name, rename to the final
 * one.  Renaming a transaction's root commits it. */
Test(write_names, renaming_a_transaction_root_commits_it)
{
	fx_dir_with_file(fs, ROOT_INO, "ckpt-9.tmp", "w", "abc");
	cr_assert_eq(fx_seal(fs, "ckpt-9.tmp"), 0);
	fs_itable_lock(fs->it);
	ov_txn *x = fx_txn_of(fs, "ckpt-9.tmp");
	cr_assert(!x->sealed, "a temp name waits for its final name");
	fs_itable_unlock(fs->it);
	cr_assert_eq(fx_rename(fs, ROOT_INO, "ckpt-9.tmp", ROOT_INO, "ckpt-9",
			       0),
		     0);
	int mv = fake_eng_find("move 1 ckpt-9.tmp 1 ckpt-9");
	cr_assert_geq(mv, 0);
	cr_assert_gt(fake_eng_find("seal 1"), mv);
	fs_itable_lock(fs->it);
	cr_assert_str_eq(x->root, "ckpt-9");
	cr_assert(x->sealed);
	fs_itable_unlock(fs->it);
	cr_assert_eq(fx_lookup(fs, ROOT_INO, "ckpt-9.tmp"), 0);
	fuse_ino_t n = fx_lookup(fs, ROOT_INO, "ckpt-9");
	cr_assert_neq(fx_lookup(fs, n, "w"), 0);
}

/* A file of a committing transaction cannot move (EBUSY); its root can
 * be renamed only as a whole. */
Test(write_names, a_committing_file_does_not_move)
{
	fuse_ino_t d = fx_dir_with_file(fs, ROOT_INO, "new", "f", "abc");
	cr_assert_eq(fx_seal(fs, "new"), 0);
	cr_assert_eq(fx_rename(fs, d, "f", d, "g", 0), EBUSY);
	cr_assert_neq(fx_lookup(fs, d, "f"), 0);
}

/* A file written under a temp name and renamed over a remote one
 * replaces it without a delete (its upload replaces the object), and
 * commits under the final name. */
Test(write_names, a_new_file_renamed_over_a_remote_one_replaces_it)
{
	cr_assert_eq(fx_write_file(fs, ROOT_INO, "latest.tmp", "ckpt"), 0);
	cr_assert_eq(fx_rename(fs, ROOT_INO, "latest.tmp", ROOT_INO, "latest",
			       0),
		     0);
	cr_assert(!fake_eng_has("delete"));
	cr_assert_eq(held_deletes(), 0);
	int mv = fake_eng_find("move 1 latest.tmp 1 latest");
	cr_assert_geq(mv, 0, "the whole transaction moves");
	cr_assert_gt(fake_eng_find("seal 1"), mv, "and commits");
	fuse_ino_t l = fx_lookup(fs, ROOT_INO, "latest");
	cr_assert_eq(fx_getattr(fs, l).st_size, 4);
	cr_assert_eq(fx_lookup(fs, ROOT_INO, "latest.tmp"), 0);
}
