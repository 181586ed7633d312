/*
 * Changes of a committed directory's attributes (fs/write-dirattrs.c,
 * doc/posix.md "Changing a committed directory"), driven through the FUSE
 * operations on a bucket whose LISTs and commit engine are fakes
 * (tests/unit/support/fs-ops.h): chmod, chown, utimensat, setxattr and
 * removexattr of a directory whose attributes a manifest records reach
 * the engine as one eng_dir_set step recording all of them in the right
 * transaction root, show on the mount at once, keep showing while the
 * step is pending (the bucket still has the old record), also after a
 * restart, and after it is done until the root's manifests were listed
 * again (they hold the record then); after that the bucket's record shows.
 *
 * The bucket: /ckpt/ a transaction root ckptfs committed, its own "dir"
 * recorded (0755, 5:6), and its directory sub recorded in "dirs" (0750,
 * 7:8, mtime 1600000000.5, user.k=v) holding file w; /plain/ a
 * directory other tools made.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "fs/write-dirattrs.h"
#include "proto/manifest.h"
#include "util/buf.h"

#include "../support/fs-ops.h"

static fs_ctx *fs;
static char *manifest;

#define MANIFEST_TIME 1700000100000000000LL

/* The manifest of ckpt; sub recorded with mode sub_mode, ckpt itself
 * with root_mode. */
static char *ckpt_manifest(uint32_t sub_mode, uint32_t root_mode)
{
	buf xa = BUF_INIT;
	cr_assert_eq(proto_xattr_append(&xa, "user.k", "v", 1), 0);
	proto_meta sub = {.mode = sub_mode,
			  .uid = 7,
			  .gid = 8,
			  .mtime_ns = 1600000000500000000LL,
			  .xattrs = xa.data,
			  .xattrs_len = xa.len};
	proto_meta root = {.mode = root_mode,
			   .uid = 5,
			   .gid = 6,
			   .mtime_ns = 1650000000000000000LL};
	proto_mfile f[] = {
	    {"sub/w", 1, "\"w-1-1700000000\"", 0, false, NULL, 0, NULL}};
	proto_mdir d[] = {{"sub", &sub, false}, {"", &root, false}};
	char *j = proto_manifest_json("w", 1, MANIFEST_TIME, f, 1, d, 2);
	buf_free(&xa);
	cr_assert_not_null(j);
	return j;
}

/* What the bucket's LISTs answer (again after fx_new resets them). */
static void bucket(void)
{
	fake_list_add("ckpt/", 0, 0);
	fake_list_add("plain/", 0, 0);
	fake_dir *d = fake_list_in("pre/ckpt/");
	fake_dir_add(d, "sub/", 0, 0);
	d->manifest = manifest;
	fake_dir_add(fake_list_in("pre/ckpt/sub/"), "w", 1, 1700000000);
	fake_dir_add(fake_list_in("pre/plain/"), "x", 1, 1700000000);
}

static void setup(void)
{
	fs = fx_new_writable(10);
	manifest = ckpt_manifest(0750, 0755);
	bucket();
}

static void teardown(void)
{
	fs_ctx_free(fs);
	free(manifest);
}

TestSuite(write_dirattrs, .init = setup, .fini = teardown, .timeout = 30);

static int chmod_(fuse_ino_t ino, mode_t mode, struct stat *out)
{
	struct stat a = {.st_mode = mode};
	return fx_setattr(fs, ino, &a, FUSE_SET_ATTR_MODE, out);
}

/* A pass of the idle thread, or a sync: wr_dirattr_reap. */
static void reap(void)
{
	fs_itable_lock(fs->it);
	wr_dirattr_reap(fs);
	fs_itable_unlock(fs->it);
}

/* The step with this id is done (its addendum PUT), and the idle thread
 * or a sync saw it. */
static void step_done(uint64_t id)
{
	cr_assert_lt(id, FAKE_ENG_MAX);
	fake.txn[id].ended = true;
	reap();
}

/* What stat of ckpt/sub shows, looked up again (its parent's listing
 * refetched when it is stale). */
static struct stat stat_sub(void)
{
	fuse_ino_t ckpt = fx_lookup(fs, ROOT_INO, "ckpt");
	fuse_ino_t sub = fx_lookup(fs, ckpt, "sub");
	cr_assert_neq(sub, 0);
	return fx_getattr(fs, sub);
}

/* Lists every directory again at its next use, as after dir_timeout. */
static void listings_expire(void)
{
	fs_itable_lock(fs->it);
	fs->listing_gen++;
	fs_itable_unlock(fs->it);
}

/* ---- chmod, chown ----------------------------------------------------------
 */

/* chmod of a directory its root's manifest records in "dirs": one step
 * recording it with all of its attributes in that root; the new mode
 * shows at once and while the step is pending, even from a listing that
 * still has the old record; once the step is done, until the root was
 * listed again and the next reap; then what the bucket records shows.
 * This fake bucket never gets the addendum, so the old mode comes back
 * then (the mount no longer shows the change from its own memory), and
 * the new one with the addendum's record. */
Test(write_dirattrs, chmod_of_a_recorded_subdirectory_is_stored_in_its_root)
{
	fuse_ino_t ckpt = fx_lookup(fs, ROOT_INO, "ckpt");
	fuse_ino_t sub = fx_lookup(fs, ckpt, "sub");
	struct stat st = fx_getattr(fs, sub);
	cr_assert_eq(st.st_mode, S_IFDIR | 0750, "recorded: %o",
		     (unsigned)st.st_mode);
	cr_assert_eq(st.st_uid, 7);

	cr_assert_eq(chmod_(sub, 0700, &st), 0);
	cr_assert_eq(st.st_mode, S_IFDIR | 0700, "the reply");
	cr_assert_eq(fake.n, 1, "one fact: %s", fake.n ? fake.log[0] : "");
	cr_assert_str_eq(fake.log[0],
			 "dirset 1 ckpt/sub mode=700 uid=7 gid=8 "
			 "mtime=1600000000.500000000 xattrs=user.k=v in ckpt");
	st = fx_getattr(fs, sub);
	cr_assert_eq(st.st_mode, S_IFDIR | 0700);
	cr_assert_eq(st.st_uid, 7);
	cr_assert_eq(st.st_gid, 8);
	cr_assert_eq(st.st_mtim.tv_sec, 1600000000);
	cr_assert_eq(st.st_mtim.tv_nsec, 500000000);

	/* pending: a listing of the old record does not hide it */
	listings_expire();
	cr_assert_eq(stat_sub().st_mode, S_IFDIR | 0700);
	cr_assert(eng_txn_pending(FAKE_ENG, 1));

	step_done(1);
	cr_assert_eq(stat_sub().st_mode, S_IFDIR | 0700,
		     "done, its root not listed since: still shown");
	reap(); /* the root was listed since */
	listings_expire();
	cr_assert_eq(stat_sub().st_mode, S_IFDIR | 0750,
		     "forgotten: the bucket's record shows");
	char *landed = ckpt_manifest(0700, 0755);
	fake_list_in("pre/ckpt/")->manifest = landed;
	listings_expire();
	cr_assert_eq(stat_sub().st_mode, S_IFDIR | 0700);
	cr_assert_eq(fake.n, 1, "nothing else reached the engine");
	fake_list_in("pre/ckpt/")->manifest = manifest;
	free(landed);
}

/* chmod of a transaction root: recorded in its own manifests ("dir"). */
Test(write_dirattrs, chmod_of_a_transaction_root_is_stored_in_itself)
{
	fuse_ino_t ckpt = fx_lookup(fs, ROOT_INO, "ckpt");
	struct stat st = fx_getattr(fs, ckpt);
	cr_assert_eq(st.st_mode, S_IFDIR | 0755);
	cr_assert_eq(st.st_uid, 5);
	cr_assert_eq(chmod_(ckpt, 0711, NULL), 0);
	cr_assert_eq(fake.n, 1);
	cr_assert_str_eq(fake.log[0],
			 "dirset 1 ckpt mode=711 uid=5 gid=6 "
			 "mtime=1650000000.000000000 xattrs= in ckpt");
	st = fx_getattr(fs, ckpt);
	cr_assert_eq(st.st_mode, S_IFDIR | 0711);
	cr_assert_eq(st.st_uid, 5);
}

/* Once the step of a transaction root's change is done, the root's own
 * manifests as this mount loaded them before the step do not speak for
 * it again: a lookup, which lists only its parent, shows the change.  On
 * a real mount before 599afb5 (`chmod 711 ckpt-1; ckptfs sync; stat
 * ckpt-1` again and again) the old mode showed for as long as tried (14
 * s, dir_timeout=1): the kernel's lookups never ask getattr, whose
 * refresh would list the root. */
Test(write_dirattrs, a_root_shows_its_stored_change_once_the_step_is_done)
{
	fuse_ino_t ckpt = fx_lookup(fs, ROOT_INO, "ckpt");
	cr_assert_eq(fx_getattr(fs, ckpt).st_mode, S_IFDIR | 0755);
	cr_assert_eq(chmod_(ckpt, 0711, NULL), 0);
	char *landed = ckpt_manifest(0750, 0711);
	fake_list_in("pre/ckpt/")->manifest = landed;
	step_done(1);
	ckpt = fx_lookup(fs, ROOT_INO, "ckpt");
	mode_t seen = fx_getattr(fs, ckpt).st_mode;
	fake_list_in("pre/ckpt/")->manifest = manifest;
	free(landed);
	cr_assert_eq(seen, S_IFDIR | 0711, "%o", (unsigned)seen);
}

/* chown: the owner stored with the other attributes unchanged. */
Test(write_dirattrs, chown_is_stored)
{
	fuse_ino_t ckpt = fx_lookup(fs, ROOT_INO, "ckpt");
	fuse_ino_t sub = fx_lookup(fs, ckpt, "sub");
	struct stat a = {.st_uid = 42, .st_gid = 43};
	cr_assert_eq(fx_setattr(fs, sub, &a,
				FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID, NULL),
		     0);
	cr_assert_geq(fake_eng_find("dirset 1 ckpt/sub mode=750 uid=42 gid=43 "
				    "mtime=1600000000.500000000 "
				    "xattrs=user.k=v in ckpt"),
		      0, "%s", fake.n ? fake.log[0] : "nothing");
	struct stat st = fx_getattr(fs, sub);
	cr_assert_eq(st.st_uid, 42);
	cr_assert_eq(st.st_gid, 43);
	cr_assert_eq(st.st_mode, S_IFDIR | 0750);
}

/* A directory other tools made has no record to change: the call
 * succeeds (the reply carries the new mode), nothing is stored, stat
 * shows what it showed. */
Test(write_dirattrs, a_directory_other_tools_made_stores_nothing)
{
	fuse_ino_t plain = fx_lookup(fs, ROOT_INO, "plain");
	mode_t before = fx_getattr(fs, plain).st_mode;
	struct stat st;
	cr_assert_eq(chmod_(plain, 0700, &st), 0);
	cr_assert_eq(st.st_mode, S_IFDIR | 0700, "the reply");
	cr_assert_eq(fake.n, 0, "nothing reached the engine: %s",
		     fake.n ? fake.log[0] : "");
	cr_assert_eq(fx_getattr(fs, plain).st_mode, before);
	cr_assert_eq(fx_setxattr(fs, plain, "user.x", "1", 0), ENOTSUP);
	cr_assert_eq(fake.n, 0);
}

/* The engine could not journal the step: the call fails, the mount
 * keeps showing what the bucket records. */
Test(write_dirattrs, a_step_the_engine_refuses_fails_the_call)
{
	fuse_ino_t ckpt = fx_lookup(fs, ROOT_INO, "ckpt");
	fuse_ino_t sub = fx_lookup(fs, ckpt, "sub");
	fake.dir_set_rc = -EIO;
	cr_assert_eq(chmod_(sub, 0700, NULL), EIO);
	cr_assert_eq(fx_getattr(fs, sub).st_mode, S_IFDIR | 0750);
	listings_expire();
	cr_assert_eq(stat_sub().st_mode, S_IFDIR | 0750);
}

/* ---- utimensat
 * ----------------------------------------------------------------- */

/* An explicit mtime is stored and shows. */
Test(write_dirattrs, utimensat_stores_the_mtime)
{
	fuse_ino_t ckpt = fx_lookup(fs, ROOT_INO, "ckpt");
	fuse_ino_t sub = fx_lookup(fs, ckpt, "sub");
	struct stat a = {.st_mtim = {1234567890, 250}};
	cr_assert_eq(fx_setattr(fs, sub, &a, FUSE_SET_ATTR_MTIME, NULL), 0);
	cr_assert_geq(fake_eng_find("dirset 1 ckpt/sub mode=750 uid=7 gid=8 "
				    "mtime=1234567890.000000250 "
				    "xattrs=user.k=v in ckpt"),
		      0, "%s", fake.n ? fake.log[0] : "nothing");
	struct stat st = fx_getattr(fs, sub);
	cr_assert_eq(st.st_mtim.tv_sec, 1234567890);
	cr_assert_eq(st.st_mtim.tv_nsec, 250);
	listings_expire();
	st = stat_sub();
	cr_assert_eq(st.st_mtim.tv_sec, 1234567890, "pending, listed again");
	cr_assert_eq(st.st_mtim.tv_nsec, 250);
}

/* ---- xattrs
 * -------------------------------------------------------------------- */

/* setxattr then removexattr: each a step with the whole blob as it is
 * after the call; getxattr shows it.  Removing a name it does not have
 * fails with ENODATA and stores nothing. */
Test(write_dirattrs, setxattr_and_removexattr_are_stored)
{
	fuse_ino_t ckpt = fx_lookup(fs, ROOT_INO, "ckpt");
	fuse_ino_t sub = fx_lookup(fs, ckpt, "sub");
	char v[64];
	cr_assert_eq(fx_getxattr(fs, sub, "user.k", v, sizeof v), 0);
	cr_assert_str_eq(v, "v", "recorded");

	cr_assert_eq(fx_setxattr(fs, sub, "user.new", "42", 0), 0);
	cr_assert_eq(fake.n, 1);
	cr_assert_str_eq(fake.log[0], "dirset 1 ckpt/sub mode=750 uid=7 gid=8 "
				      "mtime=1600000000.500000000 "
				      "xattrs=user.k=v,user.new=42 in ckpt");
	cr_assert_eq(fx_getxattr(fs, sub, "user.new", v, sizeof v), 0);
	cr_assert_str_eq(v, "42");
	cr_assert_eq(fx_setxattr(fs, sub, "user.new", "43", XATTR_CREATE),
		     EEXIST);
	cr_assert_eq(fake.n, 1, "a refused setxattr stores nothing");

	cr_assert_eq(fx_removexattr(fs, sub, "user.k"), 0);
	cr_assert_eq(fake.n, 2);
	cr_assert_str_eq(fake.log[1], "dirset 2 ckpt/sub mode=750 uid=7 gid=8 "
				      "mtime=1600000000.500000000 "
				      "xattrs=user.new=42 in ckpt");
	cr_assert_eq(fx_getxattr(fs, sub, "user.k", v, sizeof v), ENODATA);
	cr_assert_eq(fx_getxattr(fs, sub, "user.new", v, sizeof v), 0);

	/* both pending, listed again: the newest shows */
	listings_expire();
	stat_sub();
	cr_assert_eq(fx_getxattr(fs, sub, "user.k", v, sizeof v), ENODATA);
	cr_assert_eq(fx_getxattr(fs, sub, "user.new", v, sizeof v), 0);

	cr_assert_eq(fx_removexattr(fs, sub, "user.k"), ENODATA);
	cr_assert_eq(fx_removexattr(fs, sub, "user.none"), ENODATA);
	cr_assert_eq(fake.n, 2, "nothing stored");
}

/* ---- restart
 * ------------------------------------------------------------------- */

/* The mount restarts with the step still journaled: the change shows
 * again (eng_foreach_pending_dir_set), over the bucket's old record,
 * until the step is done. */
Test(write_dirattrs, a_pending_change_shows_after_a_restart)
{
	fuse_ino_t ckpt = fx_lookup(fs, ROOT_INO, "ckpt");
	fuse_ino_t sub = fx_lookup(fs, ckpt, "sub");
	cr_assert_eq(chmod_(sub, 0700, NULL), 0);
	cr_assert_eq(fx_setxattr(fs, sub, "user.new", "42", 0), 0);

	fake_eng journal = fake;
	fs_ctx_free(fs);
	fs = fx_new_writable(10);
	fake = journal;
	bucket();
	wr_restore(fs);

	cr_assert_eq(stat_sub().st_mode, S_IFDIR | 0700);
	char v[64];
	sub = fx_lookup(fs, fx_lookup(fs, ROOT_INO, "ckpt"), "sub");
	cr_assert_eq(fx_getxattr(fs, sub, "user.new", v, sizeof v), 0);
	cr_assert_str_eq(v, "42");

	step_done(1);
	cr_assert_eq(stat_sub().st_mode, S_IFDIR | 0700, "step 2 records it");
	step_done(2);
	cr_assert_eq(stat_sub().st_mode, S_IFDIR | 0700,
		     "done, its root not listed since: still shown");
	reap();
	listings_expire();
	cr_assert_eq(stat_sub().st_mode, S_IFDIR | 0750,
		     "forgotten: the bucket's record shows");
	cr_assert_eq(fx_getxattr(fs, sub, "user.new", v, sizeof v), ENODATA);
}

/*
 * chmod of a committed transaction root that this mount has looked up but
 * not listed (its own "dir" record is in its own listing's manifests):
 * the directory is listed first and the change stored.  Before, it
 * answered 0 and stored nothing, as for a directory other tools made (on
 * a real mount: remount, chmod(2) with no stat before, since the kernel
 * sends lookup then setattr, sync, remount: the old mode).
 */
Test(write_dirattrs, chmod_of_a_root_not_listed_yet_is_not_lost)
{
	fuse_ino_t ckpt = fx_lookup(fs, ROOT_INO, "ckpt");
	int rc = chmod_(ckpt, 0711, NULL);
	cr_assert_eq(rc, 0);
	cr_assert(fake_eng_has("dirset 1 ckpt mode=711"), "the engine got: %s",
		  fake.n ? fake.log[0] : "");
}
