/* Unit tests for the inode table: numbering, path index, lookup counting,
 * forget, internal references, type changes and growth. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/inode.h"

static fs_itable *t;

static void setup(void)
{
	t = fs_itable_new();
	cr_assert_not_null(t);
	fs_itable_lock(t);
}

static void teardown(void)
{
	fs_itable_unlock(t);
	fs_itable_free(t);
}

TestSuite(inode, .init = setup, .fini = teardown);

Test(inode, root_is_one)
{
	fs_inode *r = fs_itable_root(t);
	cr_assert_eq(r->ino, 1);
	cr_assert(r->is_dir);
	cr_assert_str_eq(r->path, "");
	cr_assert_eq(fs_itable_get(t, 1), r);
	cr_assert_null(fs_itable_get(t, 2));
}

Test(inode, child_paths_and_identity)
{
	fs_inode *r = fs_itable_root(t);
	fs_inode *a = fs_itable_child(t, r, "a", true);
	fs_inode *b = fs_itable_child(t, a, "b c", false);
	cr_assert_str_eq(a->path, "a");
	cr_assert_str_eq(b->path, "a/b c");
	cr_assert_eq(fs_itable_child(t, a, "b c", false), b);
	cr_assert_eq(fs_itable_get(t, b->ino), b);
	cr_assert_neq(a->ino, b->ino);
}

Test(inode, forget_frees_leaf_and_unreferenced_parent)
{
	fs_inode *r = fs_itable_root(t);
	fs_inode *a = fs_itable_child(t, r, "a", true);
	a->nlookup = 1;
	fs_inode *b = fs_itable_child(t, a, "b", false);
	b->nlookup = 2;
	uint64_t ai = a->ino, bi = b->ino;
	cr_assert_eq(fs_itable_count(t), 3);
	fs_itable_forget(t, b, 1);
	cr_assert_not_null(fs_itable_get(t, bi));
	fs_itable_forget(t, a, 1); /* child still holds a */
	cr_assert_not_null(fs_itable_get(t, ai));
	fs_itable_forget(t, b, 1);
	cr_assert_null(fs_itable_get(t, bi));
	cr_assert_null(fs_itable_get(t, ai));
	cr_assert_eq(fs_itable_count(t), 1);
}

Test(inode, internal_reference_keeps_node)
{
	fs_inode *f = fs_itable_child(t, fs_itable_root(t), "f", false);
	f->nlookup = 1;
	fs_inode_ref(f);
	uint64_t fi = f->ino;
	fs_itable_forget(t, f, 5); /* over-forget clamps at 0 */
	cr_assert_not_null(fs_itable_get(t, fi));
	fs_itable_unref(t, f);
	cr_assert_null(fs_itable_get(t, fi));
}

Test(inode, type_change_gives_new_inode)
{
	fs_inode *r = fs_itable_root(t);
	fs_inode *f = fs_itable_child(t, r, "x", false);
	f->nlookup = 1;
	fs_inode *d = fs_itable_child(t, r, "x", true);
	cr_assert_neq(f, d);
	cr_assert(f->detached);
	cr_assert_eq(fs_itable_get(t, f->ino), f); /* old number still valid */
	cr_assert_eq(fs_itable_child(t, r, "x", true), d);
	fs_itable_forget(t, f, 1);
	cr_assert_eq(fs_itable_child(t, r, "x", true), d);
}

Test(inode, numbers_unique_and_growth)
{
	fs_inode *r = fs_itable_root(t);
	uint64_t last = 1;
	char name[32];
	for (int i = 0; i < 5000; i++) {
		snprintf(name, sizeof name, "n%d", i);
		fs_inode *n = fs_itable_child(t, r, name, false);
		cr_assert_gt(n->ino, last);
		last = n->ino;
	}
	cr_assert_eq(fs_itable_count(t), 5001);
	for (int i = 0; i < 5000; i += 7) {
		snprintf(name, sizeof name, "n%d", i);
		fs_inode *n = fs_itable_child(t, r, name, false);
		cr_assert_str_eq(n->name, name);
	}
	fs_inode *n = fs_itable_child(t, r, "n1", false);
	uint64_t n1 = n->ino;
	n->nlookup = 1;
	fs_itable_forget(t, n, 1);
	cr_assert_null(fs_itable_get(t, n1));
	fs_inode *fresh = fs_itable_child(t, r, "never-seen", false);
	cr_assert_gt(fresh->ino, last, "a new path gets a new number");
	fs_inode *again = fs_itable_child(t, r, "n1", false);
	cr_assert_eq(again->ino, n1, "a forgotten path gets its number back");
}

Test(inode, forgotten_number_not_reused_across_types)
{
	fs_inode *r = fs_itable_root(t);
	fs_inode *f = fs_itable_child(t, r, "x", false);
	uint64_t fi = f->ino;
	f->nlookup = 1;
	fs_itable_forget(t, f, 1);
	fs_inode *d = fs_itable_child(t, r, "x", true);
	cr_assert_neq(d->ino, fi, "a directory must not take a file's number");
	fs_inode *y = fs_itable_child(t, r, "y", false);
	y->nlookup = 1;
	uint64_t yi = y->ino;
	fs_itable_forget(t, y, 1);
	fs_inode *y2 = fs_itable_child(t, r, "y", false);
	cr_assert_eq(y2->ino, yi);
	y2->nlookup = 1;
	fs_itable_forget(t, y2, 1);
	cr_assert_eq(fs_itable_child(t, r, "y", false)->ino, yi,
		     "the number survives several forgets");
}

static ns_dir *listing_with(const char *name)
{
	ns_dir *d = calloc(1, sizeof *d);
	ns_dir_init(d, NULL, NULL);
	d->v = calloc(1, sizeof *d->v);
	d->v[0] = (ns_entry){.name = strdup(name)};
	d->n = 1;
	return d;
}

Test(inode, a_forgotten_directory_leaves_its_listing_to_the_next_inode)
{
	/* the kernel forgets a directory; the next inode of the path gets its
	 * listing back, as fresh as it was (to serve within dir_timeout, and
	 * if the store is unreachable) */
	fs_inode *r = fs_itable_root(t);
	fs_inode *a = fs_itable_child(t, r, "a", true);
	a->nlookup = 1;
	a->listing = listing_with("x.bin");
	a->listing_time = 100;
	a->listing_gen = 7;
	a->mtime.tv_sec = 1234;
	uint64_t ai = a->ino;
	fs_itable_forget(t, a, 1);
	cr_assert_null(fs_itable_get(t, ai));
	fs_inode *b = fs_itable_child(t, r, "a", true);
	cr_assert_eq(b->ino, ai, "the path keeps its number");
	cr_assert_not_null(b->listing);
	cr_assert_not_null(ns_dir_find(b->listing, "x.bin"));
	cr_assert_eq(b->listing_time, 100, "as fresh as it was");
	cr_assert_eq(b->listing_gen, 7);
	cr_assert_eq(b->mtime.tv_sec, 1234);
	/* a file of the same path gets no listing */
	b->nlookup = 1;
	fs_itable_forget(t, b, 1);
	fs_inode *f = fs_itable_child(t, r, "a", false);
	cr_assert_null(f->listing);
}

Test(inode, ghosts_keep_a_bounded_number_of_listings)
{
	fs_inode *r = fs_itable_root(t);
	char name[32];
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof name, "d%d", i);
		fs_inode *d = fs_itable_child(t, r, name, true);
		d->nlookup = 1;
		d->listing = listing_with("f");
		fs_itable_forget(t, d, 1);
	}
	int kept = 0;
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof name, "d%d", i);
		fs_inode *d = fs_itable_child(t, r, name, true);
		kept += d->listing != NULL;
		if (i == 99)
			cr_assert_not_null(d->listing, "the newest is kept");
		if (i == 0)
			cr_assert_null(d->listing, "the oldest was dropped");
	}
	cr_assert_eq(kept, 32);
}
