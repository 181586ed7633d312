/*
 * Opens and reads of remote files (fs/read.c), called as the kernel calls
 * them, on a bucket whose LISTs are fakes and with no S3 client at all: an
 * open that sent a HEAD or a GET would crash, so each test also shows
 * which opens cost no request.  The mount has no cache (reads would go
 * uncached through ranged GETs) and no engine (read-only).
 *
 * The bucket: /ckpt/ with files a (4 bytes) and b (6 bytes).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "../support/fs-ops.h"

static fs_ctx *fs;
static fuse_ino_t ckpt;
static fake_dir *dir;

static void setup(void)
{
	fs = fx_new(10);
	fake_invals = 0;
	fake_list_add("ckpt/", 0, 0);
	dir = fake_list_in("pre/ckpt/");
	fake_dir_add(dir, "a", 4, 1700000000);
	fake_dir_add(dir, "b", 6, 1700000000);
	ckpt = fx_lookup(fs, ROOT_INO, "ckpt");
}

static void teardown(void)
{
	fs->se = NULL;
	fs_ctx_free(fs);
}

TestSuite(read, .init = setup, .fini = teardown, .timeout = 30);

static fs_handle *handle(const struct fuse_file_info *fi)
{
	return (fs_handle *)(uintptr_t)fi->fh;
}

static void release(fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fuse_req *r = fx_req(fs);
	fs_lowlevel_ops()->release(r, ino, fi);
	cr_assert_eq(fx_replied(r), 0);
}

/* The application opens ino and closes it. */
static void open_once(fuse_ino_t ino)
{
	struct fuse_file_info fi;
	cr_assert_eq(fx_open(fs, ino, O_RDONLY, &fi), 0);
	release(ino, &fi);
}

/* The remote file b is replaced by a 7-byte version (the next LISTs). */
static void replace_b(void)
{
	dir->n = 0;
	fake_dir_add(dir, "a", 4, 1700000000);
	fake_dir_add(dir, "b", 7, 1700000100);
}

/* A file just listed opens without a request: its version is the one the
 * listing showed. */
Test(read, an_open_pins_the_listed_version_without_a_request)
{
	fuse_ino_t b = fx_lookup(fs, ckpt, "b");
	struct fuse_file_info fi;
	cr_assert_eq(fx_open(fs, b, O_RDONLY, &fi), 0);
	cr_assert_str_eq(handle(&fi)->etag, "\"b-6-1700000000\"");
	cr_assert_eq(handle(&fi)->size, 6);
	cr_assert_eq(fake_list.calls, 2, "the LISTs of the lookups only");
	release(b, &fi);
}

Test(read, what_is_not_a_readable_file_does_not_open)
{
	struct fuse_file_info fi;
	cr_assert_eq(fx_open(fs, ckpt, O_RDONLY, &fi), EISDIR);
	cr_assert_eq(fx_open(fs, 9999, O_RDONLY, &fi), ENOENT);
	fuse_ino_t a = fx_lookup(fs, ckpt, "a");
	cr_assert_eq(fx_open(fs, a, O_WRONLY, &fi), EROFS, "read-only mount");
	cr_assert_eq(fx_open(fs, a, O_RDONLY | O_TRUNC, &fi), EROFS);
}

/* The kernel keeps a file's pages across opens of one version, and
 * drops them for a new one. */
Test(read, pages_are_kept_across_opens_of_one_version)
{
	fuse_ino_t a = fx_lookup(fs, ckpt, "a");
	struct fuse_file_info fi;
	cr_assert_eq(fx_open(fs, a, O_RDONLY, &fi), 0);
	cr_assert_eq(fi.keep_cache, 0, "first open");
	release(a, &fi);
	cr_assert_eq(fx_open(fs, a, O_RDONLY, &fi), 0);
	cr_assert_eq(fi.keep_cache, 1);
	cr_assert_eq(fi.direct_io, 0);
	release(a, &fi);
}

/* A file replaced remotely, reached by a new lookup, is a new inode
 * whose first open keeps no pages; the old inode still opens its old
 * version (as a file replaced by rename does on a disk). */
Test(read, a_replaced_file_opens_on_a_new_inode)
{
	fuse_ino_t b = fx_lookup(fs, ckpt, "b");
	open_once(b);
	struct fuse_file_info fi;
	replace_b();
	fs->listing_gen++; /* the next lookup lists again */
	fuse_ino_t b2 = fx_lookup(fs, ckpt, "b");
	cr_assert_neq(b2, b);
	cr_assert_eq(fx_open(fs, b2, O_RDONLY, &fi), 0);
	cr_assert_eq(fi.keep_cache, 0);
	cr_assert_eq(handle(&fi)->size, 7);
	release(b2, &fi);
	cr_assert_eq(fx_open(fs, b, O_RDONLY, &fi), 0);
	cr_assert_eq(handle(&fi)->size, 6, "the old inode, the old version");
	release(b, &fi);
}

/* An inode whose pages hold the old version, opened once its attributes
 * are past attr_timeout and its directory lists the new version, answers
 * ESTALE: the VFS walks the path again and gets the new inode, from a
 * fresh listing. */
Test(read, an_open_that_finds_a_new_version_answers_estale)
{
	fuse_ino_t b = fx_lookup(fs, ckpt, "b");
	open_once(b);
	struct fuse_file_info fi;
	fs->o.attr_timeout = 0; /* its attributes are old now */
	replace_b();
	fs_itable_lock(fs->it);
	fx_list(fs, fs_itable_get(fs->it, ckpt));
	fs_itable_unlock(fs->it);
	cr_assert_eq(fx_open(fs, b, O_RDONLY, &fi), ESTALE);
	unsigned calls = fake_list.calls;
	fuse_ino_t b2 = fx_lookup(fs, ckpt, "b");
	cr_assert_eq(fake_list.calls, calls + 1, "the lookup lists again");
	cr_assert_neq(b2, b);
	cr_assert_eq(fx_open(fs, b2, O_RDONLY, &fi), 0);
	cr_assert_eq(handle(&fi)->size, 7);
	release(b2, &fi);
}

/* Opens of files whose attributes are past attr_timeout, in a directory
 * of one listing page, revalidate by one LIST for all of them instead of
 * a HEAD each. */
Test(read, stale_attributes_revalidate_by_one_list)
{
	fuse_ino_t a = fx_lookup(fs, ckpt, "a");
	fuse_ino_t b = fx_lookup(fs, ckpt, "b");
	fs->o.attr_timeout = 0;
	fs_itable_lock(fs->it);
	fs_itable_get(fs->it, ckpt)->listing_time -= 11; /* expired */
	fs_itable_unlock(fs->it);
	unsigned calls = fake_list.calls;
	struct fuse_file_info fa, fb;
	cr_assert_eq(fx_open(fs, a, O_RDONLY, &fa), 0);
	cr_assert_eq(fx_open(fs, b, O_RDONLY, &fb), 0);
	cr_assert_eq(fake_list.calls, calls + 1);
	release(a, &fa);
	release(b, &fb);
}

/* The kernel was given one size at lookup; an open that pins a version
 * of another size drops the kernel's attributes, or fstat and mmap would
 * use the old size with the new bytes. */
Test(read, an_open_of_another_size_drops_the_kernel_attributes)
{
	static char session;
	fs->se = (struct fuse_session *)&session;
	fuse_ino_t b = fx_lookup(fs, ckpt, "b");
	open_once(b);
	struct fuse_file_info fi;
	cr_assert_eq(fake_invals, 0, "the size the kernel has");
	/* the same inode's attributes updated to a new size (stat of a
	 * growing file) without a lookup telling the kernel */
	fs_itable_lock(fs->it);
	fs_inode *n = fs_itable_get(fs->it, b);
	n->size = 9;
	free(n->etag);
	n->etag = strdup("\"b-9\"");
	n->attr_time = fs_now();
	free(n->kc_etag);
	n->kc_etag = NULL;
	fs_itable_unlock(fs->it);
	cr_assert_eq(fx_open(fs, b, O_RDONLY, &fi), 0);
	cr_assert_eq(handle(&fi)->size, 9);
	cr_assert_eq(fake_invals, 1);
	release(b, &fi);
}

/* A directory read file after file is listed again ahead of its expiry,
 * after the open's reply, and so are the directories above it: the next
 * open or lookup never waits for a LIST (doc/architecture.md, "Reads"). */
Test(read, an_open_refreshes_the_listings_above_it_ahead_of_expiry)
{
	fuse_ino_t a = fx_lookup(fs, ckpt, "a");
	fs_itable_lock(fs->it);
	fs_inode *d = fs_itable_get(fs->it, ckpt);
	d->listing_time -= 8;
	fs_itable_root(fs->it)->listing_time -= 8;
	fs_itable_unlock(fs->it);
	unsigned calls = fake_list.calls;
	struct fuse_file_info fi;
	cr_assert_eq(fx_open(fs, a, O_RDONLY, &fi), 0);
	cr_assert_eq(fake_list.calls, calls + 2, "ckpt/ and the root");
	cr_assert_str_eq(fake_list.last_prefix, "pre/");
	fs_itable_lock(fs->it);
	cr_assert_lt(fs_now() - d->listing_time, 1);
	fs_itable_unlock(fs->it);
	release(a, &fi);
	/* half way through dir_timeout: nothing to do yet */
	cr_assert_eq(fx_open(fs, a, O_RDONLY, &fi), 0);
	cr_assert_eq(fake_list.calls, calls + 2);
	release(a, &fi);
}

/* Another writer replaced b and then a, in that order.  A reader that
 * pins a's new version from a newer listing never pins b from its own
 * older look afterwards, though b's attributes are within attr_timeout:
 * it takes b from that newer listing, without a request (S3 showed the
 * two writes in order; the mount paired a new index with an old shard). */
Test(read, no_open_pins_an_older_look_than_one_before_it)
{
	fuse_ino_t a = fx_lookup(fs, ckpt, "a");
	fuse_ino_t b = fx_lookup(fs, ckpt, "b");
	fs->o.attr_timeout = 60;
	open_once(b); /* b: the first listing's version */
	dir->n = 0;
	fake_dir_add(dir, "a", 5, 1700000200);
	fake_dir_add(dir, "b", 7, 1700000100);
	fs_itable_lock(fs->it);
	fs_inode *d = fs_itable_get(fs->it, ckpt);
	d->listing_time -= 11; /* expired: the next open lists again */
	fs_itable_get(fs->it, a)->attr_time -= 100; /* a's look is old */
	fs_itable_unlock(fs->it);
	struct fuse_file_info fi;
	cr_assert_eq(fx_open(fs, a, O_RDONLY, &fi), 0);
	cr_assert_eq(handle(&fi)->size, 5, "a from the new listing");
	release(a, &fi);
	unsigned calls = fake_list.calls;
	/* the inode's pages hold b's old version: ESTALE sends the VFS to
	 * a new inode (an_open_that_finds_a_new_version_answers_estale) */
	cr_assert_eq(fx_open(fs, b, O_RDONLY, &fi), ESTALE,
		     "b pinned from its own older look");
	cr_assert_eq(fake_list.calls, calls, "from the listing a came from");
	fuse_ino_t b2 = fx_lookup(fs, ckpt, "b");
	cr_assert_eq(fx_open(fs, b2, O_RDONLY, &fi), 0);
	cr_assert_eq(handle(&fi)->size, 7, "b no older than a");
	release(b2, &fi);
}

/* Reads at or past the end answer no bytes, without a request. */
Test(read, reads_past_the_end_answer_nothing)
{
	fuse_ino_t a = fx_lookup(fs, ckpt, "a");
	struct fuse_file_info fi;
	cr_assert_eq(fx_open(fs, a, O_RDONLY, &fi), 0);
	size_t sizes[] = {4096, 0};
	off_t offs[] = {4, 0};
	for (size_t i = 0; i < 2; i++) {
		struct fuse_req *r = fx_req(fs);
		r->buf_len = 99;
		fs_lowlevel_ops()->read(r, a, sizes[i], offs[i], &fi);
		cr_assert_eq(fx_replied(r), 0);
		cr_assert_eq(r->buf_len, 0);
	}
	release(a, &fi);
}
