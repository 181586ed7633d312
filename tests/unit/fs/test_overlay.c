/* The local overlay: nodes by path, moves of subtrees, children, xattrs,
 * stage references. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fs/overlay.h"

static ov_table t;

static void setup(void)
{
	cr_assert_eq(ov_init(&t), 0);
}

static void teardown(void)
{
	ov_destroy(&t);
}

TestSuite(overlay, .init = setup, .fini = teardown);

Test(overlay, add_get_remove)
{
	ov_txn *x = ov_txn_add(&t, 7, "ckpt", true);
	ov_node *d = ov_add(&t, "ckpt", OV_DIR, x);
	ov_node *f = ov_add(&t, "ckpt/a.pt", OV_FILE, x);
	cr_assert(d && f);
	cr_assert_eq(ov_get(&t, "ckpt"), d);
	cr_assert_eq(ov_get(&t, "ckpt/a.pt"), f);
	cr_assert_null(ov_get(&t, "ckpt/b.pt"));
	cr_assert_eq(x->nodes, 2);
	ov_remove(&t, f);
	cr_assert_null(ov_get(&t, "ckpt/a.pt"));
	cr_assert_eq(x->nodes, 1);
}

/* A node moving to another transaction (a file written on after its
 * directory committed, a rename) takes its open handles along: release
 * counts them off the node's transaction of the moment.  Before, the old
 * transaction kept them for good and the new one's count wrapped below 0. */
Test(overlay, node_moves_to_another_transaction_with_its_handles)
{
	ov_txn *x = ov_txn_add(&t, 7, "ckpt", true);
	ov_txn *y = ov_txn_add(&t, 8, "ckpt/open.log", false);
	ov_node *f = ov_add(&t, "ckpt/open.log", OV_FILE, x);
	cr_assert(x && y && f);
	f->opens = 2;
	x->open = 2;
	ov_node_set_txn(f, y);
	cr_assert_eq(f->txn, y);
	cr_assert_eq(x->nodes, 0);
	cr_assert_eq(x->open, 0);
	cr_assert_eq(y->nodes, 1);
	cr_assert_eq(y->open, 2);
}

Test(overlay, many_nodes_survive_growth)
{
	char p[64];
	for (int i = 0; i < 5000; i++) {
		snprintf(p, sizeof p, "d/f%d", i);
		cr_assert_not_null(ov_add(&t, p, OV_FILE, NULL));
	}
	for (int i = 0; i < 5000; i++) {
		snprintf(p, sizeof p, "d/f%d", i);
		ov_node *n = ov_get(&t, p);
		cr_assert_not_null(n);
		cr_assert_str_eq(n->path, p);
	}
}

Test(overlay, move_renames_the_subtree_only)
{
	ov_add(&t, "_checkpoint", OV_DIR, NULL);
	ov_add(&t, "_checkpoint/model.pt", OV_FILE, NULL);
	ov_add(&t, "_checkpoint/sub", OV_DIR, NULL);
	ov_add(&t, "_checkpoint/sub/x", OV_FILE, NULL);
	ov_add(&t, "_checkpoint2/y", OV_FILE, NULL); /* same prefix */
	cr_assert_eq(ov_move(&t, "_checkpoint", "checkpoint-3"), 0);
	cr_assert_null(ov_get(&t, "_checkpoint"));
	cr_assert_null(ov_get(&t, "_checkpoint/model.pt"));
	cr_assert_not_null(ov_get(&t, "checkpoint-3"));
	cr_assert_not_null(ov_get(&t, "checkpoint-3/model.pt"));
	cr_assert_not_null(ov_get(&t, "checkpoint-3/sub/x"));
	cr_assert_not_null(ov_get(&t, "_checkpoint2/y"));
}

static void count(void *arg, ov_node *n)
{
	(void)n;
	(*(int *)arg)++;
}

Test(overlay, children_are_direct_only)
{
	ov_add(&t, "a", OV_DIR, NULL);
	ov_add(&t, "a/b", OV_FILE, NULL);
	ov_add(&t, "a/c", OV_DIR, NULL);
	ov_add(&t, "a/c/d", OV_FILE, NULL);
	ov_add(&t, "ab", OV_FILE, NULL);
	int n = 0;
	ov_children(&t, "a", count, &n);
	cr_assert_eq(n, 2);
	n = 0;
	ov_children(&t, "", count, &n);
	cr_assert_eq(n, 2); /* "a" and "ab" */
	cr_assert(ov_has_children(&t, "a/c"));
	cr_assert_not(ov_has_children(&t, "a/c/d"));
	ov_add(&t, "e/gone", OV_WHITEOUT, NULL);
	cr_assert_not(ov_has_children(&t, "e"));
}

Test(overlay, referenced_node_outlives_remove)
{
	ov_node *f = ov_add(&t, "f", OV_FILE, NULL);
	ov_node_ref(f);
	ov_remove(&t, f);
	cr_assert_null(ov_get(&t, "f"));
	cr_assert_str_eq(f->path, "f"); /* still valid for its handle */
	ov_node_unref(f);
}

Test(overlay, xattrs)
{
	ov_node *f = ov_add(&t, "f", OV_FILE, NULL);
	cr_assert_eq(ov_xattr_set(f, "user.a", "1", 1, 0), 0);
	cr_assert_eq(ov_xattr_set(f, "user.b", "\0x\0", 3, 0), 0);
	cr_assert_eq(ov_xattr_set(f, "user.a", "2", 1, XATTR_CREATE), -EEXIST);
	cr_assert_eq(ov_xattr_set(f, "user.c", "2", 1, XATTR_REPLACE),
		     -ENODATA);
	cr_assert_eq(ov_xattr_set(f, "user.a", "22", 2, XATTR_REPLACE), 0);
	char v[8];
	cr_assert_eq(ov_xattr_get(f, "user.a", NULL, 0), 2);
	cr_assert_eq(ov_xattr_get(f, "user.a", v, 1), -ERANGE);
	cr_assert_eq(ov_xattr_get(f, "user.a", v, sizeof v), 2);
	cr_assert_eq(memcmp(v, "22", 2), 0);
	cr_assert_eq(ov_xattr_get(f, "user.b", v, sizeof v), 3);
	cr_assert_eq(memcmp(v, "\0x\0", 3), 0);
	char names[64];
	int n = ov_xattr_list(f, names, sizeof names);
	cr_assert_eq(n, 14); /* "user.b\0user.a\0" in some order */
	cr_assert_eq(ov_xattr_list(f, names, 3), -ERANGE);
	buf enc = BUF_INIT;
	cr_assert_eq(ov_xattr_encode(f, &enc), 0);
	cr_assert_eq(enc.len, strlen("user.b") + 1 + 6 + 1 +
				      strlen("user.a") + 1 + 4 + 1);
	buf_free(&enc);
	cr_assert_eq(ov_xattr_remove(f, "user.b"), 0);
	cr_assert_eq(ov_xattr_get(f, "user.b", v, sizeof v), -ENODATA);
	cr_assert_eq(ov_xattr_list(f, NULL, 0), 7);
}

Test(overlay, stage_closes_with_last_reference)
{
	int p[2];
	cr_assert_eq(pipe(p), 0);
	ov_stage *s = ov_stage_new(p[0], 1);
	ov_node *f = ov_add(&t, "f", OV_FILE, NULL);
	ov_set_stage(f, s); /* the node takes the first reference */
	ov_stage_ref(s);    /* a reader */
	ov_remove(&t, f);   /* node gone: the reader still holds the fd */
	cr_assert_neq(fcntl(p[0], F_GETFD), -1);
	ov_stage_unref(s);
	cr_assert_eq(fcntl(p[0], F_GETFD), -1);
	close(p[1]);
}

Test(overlay, paths)
{
	char *a = ov_parent("a/b/c"), *b = ov_parent("c"),
	     *c = ov_join("", "x"), *d = ov_join("a/b", "x");
	cr_assert_str_eq(a, "a/b");
	cr_assert_str_eq(b, "");
	cr_assert_str_eq(c, "x");
	cr_assert_str_eq(d, "a/b/x");
	free(a);
	free(b);
	free(c);
	free(d);
}

static int discarded[4];

static void count_discard(void *arg, uint64_t sid)
{
	(void)arg;
	if (sid < 4)
		discarded[sid]++;
}

/* At unmount the staging files never handed over go while the engine
 * that names them is open: once, and freeing the table later calls
 * nothing (before, it reached the closed engine). */
Test(overlay, unhanded_stages_are_discarded_once_before_the_table_goes)
{
	int p[2];
	cr_assert_eq(pipe(p), 0);
	ov_stage *a = ov_stage_new(p[0], 1), *b = ov_stage_new(p[1], 2);
	a->discard = b->discard = count_discard;
	b->handed = true; /* the engine has it: its file is the engine's */
	ov_set_stage(ov_add(&t, "a", OV_FILE, NULL), a);
	ov_set_stage(ov_add(&t, "b", OV_FILE, NULL), b);
	ov_discard_unhanded(&t);
	cr_assert_eq(discarded[1], 1);
	cr_assert_eq(discarded[2], 0);
	ov_destroy(&t);
	cr_assert_eq(discarded[1], 1, "discarded again when the table went");
	cr_assert_eq(discarded[2], 0);
	cr_assert_eq(ov_init(&t), 0); /* for the teardown */
}
