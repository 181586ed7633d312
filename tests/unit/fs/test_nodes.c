/*
 * What a reader sees of remote names (fs/nodes.c), without FUSE or a
 * server (LISTs answered by tests/unit/support/fake-listing.c): the stat
 * of files and directories, how long a listing is trusted (dir_timeout,
 * the stale-listing rule, an outage), directory mtimes (never moved back
 * by a listing older than this mount's change), manifests filtering a
 * transaction root and speaking for its files' attributes, and a new
 * inode for a new version.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/ctx.h"
#include "fs/dirs.h"
#include "fs/handles.h"
#include "fs/local.h"
#include "fs/nodes.h"
#include "fs/ops.h"
#include "fs/read.h"
#include "fs/write.h"
#include "fs/write-attrs.h"
#include "fs/write-cow.h"
#include "fs/write-deletes.h"
#include "fs/write-idle.h"
#include "fs/write-local.h"
#include "fs/write-names.h"
#include "fs/write-pt.h"
#include "fs/write-resume.h"
#include "fs/write-sync.h"
#include "fs/write-txn.h"
#include "proto/manifest.h"

#include "../support/fs-fixture.h"

static fs_ctx *fs;
static fs_inode *root;

static void setup(void)
{
	fs = fx_new(10);
	root = fs_itable_root(fs->it);
	fs_itable_lock(fs->it);
}

static void teardown(void)
{
	fs_itable_unlock(fs->it);
	fs_ctx_free(fs);
}

TestSuite(nodes, .init = setup, .fini = teardown, .timeout = 30);

/* A listing of d that is age seconds old. */
static void age_listing(fs_inode *d, double age)
{
	d->listing_time = fs_now() - age;
}

/* ---- stat --------------------------------------------------------------- */

Test(nodes, plain_objects_show_with_the_mount_owner_and_umask)
{
	fake_list_add("f", 1000, 1700000000);
	fake_list_add("sub/", 0, 0);
	fx_listed_dir(fs, root, NULL);
	struct stat st;
	fs_fill_stat(fs, fx_child(fs, root, "f"), &st);
	cr_assert_eq(st.st_mode, S_IFREG | 0644);
	cr_assert_eq(st.st_uid, 1000);
	cr_assert_eq(st.st_size, 1000);
	cr_assert_eq(st.st_blocks, 2);
	cr_assert_eq(st.st_mtim.tv_sec, 1700000000);
	fs_fill_stat(fs, fx_child(fs, root, "sub"), &st);
	cr_assert_eq(st.st_mode, S_IFDIR | 0755);
	cr_assert_eq(st.st_nlink, 2);
}

/* A file copied today with a 2024 mtime has today's ctime, as on a local
 * disk: ctime is never before the object's LastModified, and never
 * before the mtime either (doc/posix.md, "Times of committed names"). */
Test(nodes, ctime_is_when_the_object_was_stored)
{
	fs_inode *n = fx_node(fs, root, "f", false);
	n->mtime = (struct timespec){1700000000, 0}; /* recorded */
	n->obj_mtime = (struct timespec){1800000000, 5};
	struct stat st;
	fs_fill_stat(fs, n, &st);
	cr_assert_eq(st.st_mtim.tv_sec, 1700000000);
	cr_assert_eq(st.st_atim.tv_sec, 1700000000, "atime stays the mtime");
	cr_assert_eq(st.st_ctim.tv_sec, 1800000000);
	cr_assert_eq(st.st_ctim.tv_nsec, 5);
	n->obj_mtime = (struct timespec){1600000000, 0};
	fs_fill_stat(fs, n, &st);
	cr_assert_eq(st.st_ctim.tv_sec, 1700000000, "not before the mtime");
}

Test(nodes, a_name_of_unknown_time_shows_the_mount_time)
{
	fs_inode *n = fx_node(fs, root, "d", true);
	struct stat st;
	fs_fill_stat(fs, n, &st);
	cr_assert_eq(st.st_mtim.tv_sec, fs->mount_time.tv_sec);
	cr_assert_eq(st.st_mtim.tv_nsec, fs->mount_time.tv_nsec);
}

/* cat and Python size their buffer from st_blksize (doc/architecture.md,
 * "Reads"): 128 KiB, 512 KiB from 8 MiB on. */
Test(nodes, big_files_get_a_bigger_io_size)
{
	fs_inode *n = fx_node(fs, root, "f", false);
	struct stat st;
	n->size = (8u << 20) - 1;
	fs_fill_stat(fs, n, &st);
	cr_assert_eq(st.st_blksize, 128 << 10);
	n->size = 8u << 20;
	fs_fill_stat(fs, n, &st);
	cr_assert_eq(st.st_blksize, 512 << 10);
}

/* What the writer recorded: a symlink's size is its target's length, a
 * FIFO has no size (doc/posix.md). */
Test(nodes, recorded_symlinks_and_fifos_keep_their_type)
{
	fs_inode *l = fx_node(fs, root, "l", false);
	l->has_attrs = true;
	l->mode = 0777;
	l->uid = 7;
	l->symlink = strdup("model.pt");
	l->size = 0;
	struct stat st;
	fs_fill_stat(fs, l, &st);
	cr_assert(S_ISLNK(st.st_mode));
	cr_assert_eq(st.st_size, 8);
	cr_assert_eq(st.st_uid, 7);
	fs_inode *p = fx_node(fs, root, "p", false);
	p->has_attrs = true;
	p->mode = S_IFIFO | 0600;
	p->size = 3;
	fs_fill_stat(fs, p, &st);
	cr_assert(S_ISFIFO(st.st_mode), "mode %o", st.st_mode);
	cr_assert_eq(st.st_mode & 07777, 0600);
	cr_assert_eq(st.st_size, 0);
}

/* ---- how long a listing is trusted ------------------------------------- */

Test(nodes, a_listing_is_reused_for_dir_timeout_then_listed_again)
{
	fake_list_add("f", 1, 1700000000);
	cr_assert_eq(fs_dir_load(fs, root), 0);
	cr_assert_eq(fs_dir_load(fs, root), 0);
	cr_assert_eq(fake_list.calls, 1);
	cr_assert_str_eq(fake_list.last_prefix, "pre/");
	age_listing(root, 11);
	cr_assert_eq(fs_dir_load(fs, root), 0);
	cr_assert_eq(fake_list.calls, 2);
	/* a change of this mount to the bucket: the next look lists */
	fs->listing_gen++;
	cr_assert_eq(fs_dir_load(fs, root), 0);
	cr_assert_eq(fake_list.calls, 3);
}

/* Through an outage what was listed stays readable (doc/architecture.md):
 * a LIST failing with a transient error serves the last listing, fresh
 * for another dir_timeout; a final answer (403) is an error. */
Test(nodes, an_outage_serves_the_last_listing)
{
	fake_list_add("ckpt-1/", 0, 0);
	fx_list(fs, root);
	age_listing(root, 11);
	fake_list.http_status = 503;
	cr_assert_eq(fs_dir_load(fs, root), 0);
	cr_assert_not_null(ns_dir_find(root->listing, "ckpt-1"));
	cr_assert_eq(fs_dir_load(fs, root), 0);
	cr_assert_eq(fake_list.calls, 2, "fresh again for dir_timeout");
	fake_list.http_status = 403;
	cr_assert_eq(fs_dir_refetch(fs, root), -EACCES);
}

Test(nodes, an_outage_before_any_listing_is_an_error)
{
	fake_list.http_status = 503;
	cr_assert_lt(fs_dir_load(fs, root), 0);
	cr_assert_null(root->listing);
}

/* A directory found gone is asked again at the next look, and so is its
 * parent, whose listing may still name it (issue 21). */
Test(nodes, a_vanished_directory_is_never_answered_from_its_listing)
{
	fake_list_add("ckpt-1/", 0, 0);
	fx_list(fs, root);
	fs_inode *d = fx_node(fs, root, "ckpt-1", true);
	fake_list_reset();
	fake_list.any.vanished = true;
	cr_assert_eq(fs_dir_load(fs, d), 0);
	cr_assert_eq(fake_list.calls, 1);
	cr_assert_eq(fs_dir_load(fs, d), 0);
	cr_assert_eq(fake_list.calls, 2);
	cr_assert_eq(fs_dir_load(fs, root), 0);
	cr_assert_eq(fake_list.calls, 3, "the parent lists again");
}

/* The stale-listing rule (fs_dir_stale_entry): past dir_timeout, within
 * 4 x dir_timeout, a lookup may answer a subdirectory's name (a path walk
 * would wait for a LIST per directory) but not a file's in a small
 * directory. */
Test(nodes, stale_listing_answers_subdirectories_not_files)
{
	fake_list_add("f", 1, 1700000000);
	fake_list_add("sub/", 0, 0);
	fx_list(fs, root);
	cr_assert_null(fs_dir_stale_entry(fs, root, "sub"), "fresh");
	age_listing(root, 15);
	const ns_entry *e = fs_dir_stale_entry(fs, root, "sub");
	cr_assert_not_null(e);
	cr_assert(e->is_dir);
	cr_assert_null(fs_dir_stale_entry(fs, root, "f"));
	cr_assert_null(fs_dir_stale_entry(fs, root, "new"));
	age_listing(root, 41);
	cr_assert_null(fs_dir_stale_entry(fs, root, "sub"), "too old");
}

Test(nodes, stale_listing_answers_any_name_of_a_large_directory)
{
	ns_dir *l = calloc(1, sizeof *l);
	ns_dir_init(l, NULL, NULL);
	ns_dir_finish(l);
	char name[32];
	for (int i = 0; i < 1000; i++) {
		snprintf(name, sizeof name, "shard-%04d", i);
		cr_assert_eq(ns_dir_put(l, name, false, 1,
					(struct timespec){1700000000, 0}),
			     0);
	}
	root->listing = l;
	root->listing_gen = fs->listing_gen;
	age_listing(root, 15);
	cr_assert_not_null(fs_dir_stale_entry(fs, root, "shard-0500"));
	ns_dir_drop(l, "shard-0999");
	cr_assert_null(fs_dir_stale_entry(fs, root, "shard-0500"),
		       "999 entries: a small directory");
}

/* Never after this mount changed the bucket, never with dir_timeout=0. */
Test(nodes, stale_listing_never_outlives_a_change_or_dir_timeout_zero)
{
	fake_list_add("sub/", 0, 0);
	fx_list(fs, root);
	age_listing(root, 15);
	cr_assert_not_null(fs_dir_stale_entry(fs, root, "sub"));
	fs->listing_gen++;
	cr_assert_null(fs_dir_stale_entry(fs, root, "sub"));
	fs->listing_gen--;
	fs->o.dir_timeout = 0;
	cr_assert_null(fs_dir_stale_entry(fs, root, "sub"));
}

/* A directory being read is listed again ahead of its expiry, from 3/4
 * of dir_timeout, so its next open never waits for a LIST. */
Test(nodes, a_listing_near_its_expiry_is_refreshed_ahead)
{
	fx_list(fs, root);
	age_listing(root, 5);
	fs_dir_refresh_ahead(fs, root);
	cr_assert_eq(fake_list.calls, 1, "half way: not yet");
	age_listing(root, 8);
	fs_dir_refresh_ahead(fs, root);
	cr_assert_eq(fake_list.calls, 2);
	cr_assert_lt(fs_now() - root->listing_time, 1);
	age_listing(root, 11);
	fs_dir_refresh_ahead(fs, root);
	cr_assert_eq(fake_list.calls, 2, "expired: the next look lists");
}

/* ---- directory mtimes --------------------------------------------------- */

Test(nodes, a_directory_shows_its_newest_object_once_listed)
{
	fake_list_add("sub/", 0, 0);
	fx_list(fs, root);
	fs_inode *d = fx_child(fs, root, "sub");
	struct fuse_entry_param ep;
	fs_fill_entry(fs, d, &ep);
	cr_assert_eq(ep.attr_timeout, 0, "mtime not known yet: ask again");
	fake_list_reset();
	fake_list_add("a", 1, 1700000000);
	fake_list_add("b", 1, 1700000500);
	fx_list(fs, d);
	fs_fill_entry(fs, d, &ep);
	cr_assert_eq(ep.attr.st_mtim.tv_sec, 1700000500);
	cr_assert_eq(ep.attr_timeout, 1);
}

/* A listing fetched before this mount's change landed never moves the
 * directory's mtime back before that change (doc/posix.md, "Times"). */
Test(nodes, an_older_listing_never_moves_a_directory_mtime_back)
{
	fake_list_add("a", 1, 1700000000);
	fs_inode *d = fx_listed_dir(fs, root, "ckpt");
	cr_assert_eq(d->mtime.tv_sec, 1700000000);
	wr_dir_changed(fs, d); /* a name came or went here, now */
	struct timespec changed = d->mtime;
	cr_assert_gt(changed.tv_sec, 1700000000);
	fake_list_add("a", 1, 1700000000);
	fx_list(fs, d);
	cr_assert_eq(d->mtime.tv_sec, changed.tv_sec);
	cr_assert_eq(d->mtime.tv_nsec, changed.tv_nsec);
	/* nor its parent's entry for it */
	fake_list_reset();
	fake_list_add("ckpt/", 0, 0);
	fx_list(fs, root);
	fs_child_for(fs, root, ns_dir_find(root->listing, "ckpt"));
	cr_assert_eq(d->mtime.tv_sec, changed.tv_sec);
	/* a listing from after the change lands shows the newer object */
	fake_list_reset();
	fake_list_add("a", 1, changed.tv_sec + 60);
	fx_list(fs, d);
	cr_assert_eq(d->mtime.tv_sec, changed.tv_sec + 60);
}

/* Where this mount added or removed a name and its change reached the
 * bucket after the listing, the kernel asks for attributes again. */
Test(nodes, a_changed_directory_is_asked_again_after_its_commit)
{
	fs_inode *d = fx_listed_dir(fs, root, "ckpt");
	struct fuse_entry_param ep;
	fs_fill_entry(fs, d, &ep);
	cr_assert_eq(ep.attr_timeout, 1);
	wr_dir_changed(fs, d);
	fs_fill_entry(fs, d, &ep);
	cr_assert_eq(ep.attr_timeout, 1, "the listing is as new as the change");
	fs->listing_gen++; /* the change landed */
	fs_fill_entry(fs, d, &ep);
	cr_assert_eq(ep.attr_timeout, 0);
}

/* ---- versions ----------------------------------------------------------- */

/* The root lists "latest" (4 bytes), then it is replaced by a 5-byte
 * version: the inode of the first (*first) and that of the second. */
static fs_inode *replaced_latest(bool pages_held, fs_inode **first)
{
	fake_list_add("latest", 4, 1700000000);
	fx_list(fs, root);
	fs_inode *a = fx_child(fs, root, "latest");
	cr_assert_eq(fx_child(fs, root, "latest"), a, "same version");
	if (pages_held)
		a->kc_etag = strdup(a->etag);
	fake_list_reset();
	fake_list_add("latest", 5, 1700000100);
	fx_list(fs, root);
	*first = a;
	return fx_child(fs, root, "latest");
}

/* An object replaced remotely while the kernel may hold pages of the old
 * version gets a new inode: handles and mappings of the old one keep the
 * old size and bytes, as a file replaced by rename does on a disk. */
Test(nodes, a_new_version_gets_a_new_inode_once_pages_are_held)
{
	fs_inode *a;
	fs_inode *b = replaced_latest(true, &a);
	cr_assert_neq(b->ino, a->ino);
	cr_assert_eq(b->size, 5);
	cr_assert(a->detached);
	cr_assert_eq(a->size, 4, "the old inode keeps the old size");
}

Test(nodes, a_new_version_without_pages_keeps_the_inode)
{
	fs_inode *a;
	fs_inode *b = replaced_latest(false, &a);
	cr_assert_eq(b, a);
	cr_assert_eq(b->size, 5);
}

/* ---- manifests ---------------------------------------------------------- */

/* A committed manifest naming f (mode 0600, owner 7:8, mtime 1.5e9 s)
 * and directory d; time_ns its commit time. */
static char *manifest(int64_t time_ns, int64_t dir_mtime_ns)
{
	proto_meta fm = {.mode = 0600, .uid = 7, .gid = 8,
			 .mtime_ns = 1500000000000000000LL};
	proto_meta dm = {.mode = 0750, .uid = 7, .gid = 8,
			 .mtime_ns = dir_mtime_ns};
	proto_mfile f[] = {{"f", 1, "\"f-1-1700000000\"", 0, false, &fm, 0,
			    NULL}};
	proto_mdir d[] = {{"d", &dm, false}};
	char *j = proto_manifest_json("w", 1, time_ns, f, 1, d, 1);
	cr_assert_not_null(j);
	return j;
}

/* Inside a transaction root only what its committed manifests name
 * shows, with the attributes they recorded. */
Test(nodes, a_committed_manifest_filters_and_speaks_for_its_files)
{
	char *j = manifest(1700000000000000000LL, 1600000000000000000LL);
	fake_list_add("f", 1, 1700000000);
	fake_list_add("stray", 1, 1700000000);
	fake_list_add("d/", 0, 0);
	fake_list_add("e/", 0, 0);
	fake_list.any.manifest = j;
	fs_inode *r = fx_listed_dir(fs, root, "ckpt");
	cr_assert_not_null(r->manifest);
	cr_assert_eq(r->listing->n, 2, "f and d only");
	cr_assert_null(ns_dir_find(r->listing, "stray"));
	cr_assert_null(ns_dir_find(r->listing, "e"));
	cr_assert(!fs_dir_uncommitted(r));
	struct stat st;
	fs_fill_stat(fs, fx_child(fs, r, "f"), &st);
	cr_assert_eq(st.st_mode, S_IFREG | 0600);
	cr_assert_eq(st.st_uid, 7);
	cr_assert_eq(st.st_gid, 8);
	cr_assert_eq(st.st_mtim.tv_sec, 1500000000);
	cr_assert_eq(st.st_ctim.tv_sec, 1700000000, "when it was stored");
	fs_fill_stat(fs, fx_child(fs, r, "d"), &st);
	cr_assert_eq(st.st_mode, S_IFDIR | 0750);
	cr_assert_eq(st.st_uid, 7);
	free(j);
}

/* A directory keeps the mtime its transaction recorded until an object
 * newer than that manifest lands directly in it (doc/posix.md,
 * "Directory attributes"). */
Test(nodes, a_recorded_directory_mtime_stands_until_a_newer_object)
{
	char *j = manifest(1700000000000000000LL, 1600000000000000000LL);
	fake_list_add("d/", 0, 0);
	fake_list.any.manifest = j;
	fs_inode *r = fx_listed_dir(fs, root, "ckpt");
	fs_inode *d = fx_child(fs, r, "d");
	fake_list_add("x", 1, 1690000000); /* before the commit */
	fx_list(fs, d);
	cr_assert_eq(d->mtime.tv_sec, 1600000000);
	fake_list_reset();
	fake_list_add("x", 1, 1690000000);
	fake_list_add("y", 1, 1710000000); /* a later commit's */
	fx_list(fs, d);
	cr_assert_eq(d->mtime.tv_sec, 1710000000);
	free(j);
}

/* A transaction root whose manifests are all pending is not there for
 * readers yet. */
Test(nodes, a_root_with_only_pending_manifests_is_uncommitted)
{
	char *j = proto_intent_json("w", 1);
	fake_list_add("f", 1, 1700000000);
	fake_list.any.manifest = j;
	fs_inode *r = fx_listed_dir(fs, root, "ckpt");
	cr_assert(fs_dir_uncommitted(r));
	cr_assert_eq(r->listing->n, 0, "nothing in it shows");
	fs_inode *sub = fx_node(fs, r, "sub", true);
	cr_assert(fs_dir_uncommitted(sub), "nor below it");
	cr_assert(!fs_dir_uncommitted(root));
	free(j);
}

/* Downloads are checked against the manifest's block checksums only for
 * the version it names (doc/commit.md, "Block checksums"). */
Test(nodes, block_checksums_only_for_the_recorded_version)
{
	const uint64_t size = 128u << 10;
	proto_mfile f[] = {{"f", size, "\"e1\"", 0, false, NULL, 64u << 10,
			    "0000000100000002"}};
	char *j = proto_manifest_json("w", 1, 1, f, 1, NULL, 0);
	fake_list_add("f", size, 1700000000);
	fake_list.any.manifest = j;
	fs_inode *r = fx_listed_dir(fs, root, "ckpt");
	cache_expect x = {0};
	uint32_t *crc = NULL;
	cr_assert(fs_manifest_blocks_at(r, "ckpt/f", "\"e1\"", size, &x,
					&crc));
	cr_assert_eq(x.n, 2);
	cr_assert_eq(x.block, 64u << 10);
	cr_assert_eq(crc[1], 2);
	free(crc);
	crc = NULL;
	cr_assert(!fs_manifest_blocks_at(r, "ckpt/f", "\"e2\"", size, &x,
					 &crc),
		  "replaced by other means");
	cr_assert(!fs_manifest_blocks_at(r, "ckpt/f", "\"e1\"", size + 1, &x,
					 &crc));
	cr_assert(!fs_manifest_blocks_at(root, "g", "\"e1\"", size, &x,
					 &crc),
		  "outside any transaction root");
	free(j);
}

/* -o object_meta=auto reads a file's metadata only when its listing
 * holds a hint for it, or the listing is not known. */
Test(nodes, object_metadata_is_read_as_object_meta_says)
{
	fake_list_add("f", 1, 1700000000);
	fx_list(fs, root);
	fs_inode *f = fx_child(fs, root, "f");
	fs->o.object_meta = FS_META_AUTO;
	cr_assert(!fs_meta_wanted(fs, f), "no hints in the directory");
	root->listing->saw_hints = true;
	cr_assert(!fs_meta_wanted(fs, f));
	ns_dir_hint(root->listing, "f");
	cr_assert(fs_meta_wanted(fs, f));
	fs->o.object_meta = FS_META_OFF;
	cr_assert(!fs_meta_wanted(fs, f));
	fs->o.object_meta = FS_META_ON;
	root->listing->saw_hints = false;
	cr_assert(fs_meta_wanted(fs, f));
}
