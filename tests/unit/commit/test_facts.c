/* Unit test for the facts API (commit/facts.c) on an engine without a
 * server: transactions under temp names (nothing is uploaded before their
 * rename), closed and reopened as a crash right after a call would leave
 * them, since every fact is journaled before its call returns. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commit/internal.h"
#include "util/log.h"

#include "../support/tmpdir.h"

static char dir[256];

static void setup(void)
{
	log_init(LOG_LVL_ERROR, false);
	tmpdir_make(dir, sizeof dir, "facts");
}

static void teardown(void)
{
	tmpdir_remove(dir);
}

TestSuite(facts, .init = setup, .fini = teardown, .timeout = 30);

static eng *open_eng(void)
{
	eng *e;
	char *err = NULL;
	cr_assert_eq(eng_open(NULL, NULL, dir, "b", "", NULL, &e, &err), 0,
		     "%s", err ? err : "");
	return e;
}

/* A staging file holding data; its path in path. */
static uint64_t staged(eng *e, const char *data, char path[300])
{
	uint64_t sid;
	int fd = eng_stage_create(e, &sid);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, data, strlen(data)), (ssize_t)strlen(data));
	close(fd);
	snprintf(path, 300, "%s/staging/%llu", dir, (unsigned long long)sid);
	return sid;
}

static bool exists(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0;
}

/* What the overlay gets back after a restart. */
struct seen {
	int n;
	char path[8][64];
	uint64_t size[8];
	uint32_t mode[8];
};

static void on_file(void *arg, uint64_t txn, const char *path,
		    const char *staging_path, uint64_t size, const eng_meta *m)
{
	(void)txn, (void)staging_path;
	struct seen *s = arg;
	if (s->n >= 8)
		return;
	snprintf(s->path[s->n], 64, "%s", path);
	s->size[s->n] = size;
	s->mode[s->n] = m->mode;
	s->n++;
}

/* The files a crash right now would leave pending. */
static struct seen after_crash(eng **e)
{
	eng_close(*e, false);
	*e = open_eng();
	struct seen s = {0};
	eng_foreach_pending_file(*e, on_file, &s);
	return s;
}

/* A file closed again replaces what it was: its new size and attributes
 * survive a crash right after the call, and the old staging file's space
 * is given back at once. */
Test(facts, a_rewrite_replaces_the_file_and_frees_its_old_bytes)
{
	eng *e = open_eng();
	uint64_t t;
	char p1[300], p2[300];
	cr_assert_eq(eng_txn_begin(e, "step.tmp", true, NULL, &t), 0);
	uint64_t s1 = staged(e, "first version", p1);
	eng_meta m = {.mode = 0600};
	cr_assert_eq(eng_file_put(e, t, "step.tmp/model.pt", s1, 13, &m), 0);
	uint64_t s2 = staged(e, "second", p2);
	m.mode = 0644;
	cr_assert_eq(eng_file_put(e, t, "step.tmp/model.pt", s2, 6, &m), 0);
	cr_assert_not(exists(p1), "the replaced bytes are freed");
	cr_assert(exists(p2));
	struct seen s = after_crash(&e);
	cr_assert_eq(s.n, 1, "one file, not two");
	cr_assert_str_eq(s.path[0], "step.tmp/model.pt");
	cr_assert_eq(s.size[0], 6);
	cr_assert_eq(s.mode[0], 0644);
	eng_close(e, false);
}

/* An aborted transaction (rm of a file that filled the disk, before its
 * commit) gives its staging space back at once, not when its clean-up's
 * turn comes; a crash right after leaves nothing pending. */
Test(facts, an_abort_frees_the_staged_bytes_at_once)
{
	eng *e = open_eng();
	uint64_t t;
	char p1[300];
	cr_assert_eq(eng_txn_begin(e, "big.bin", false, NULL, &t), 0);
	uint64_t s1 = staged(e, "bytes that filled the disk", p1);
	cr_assert_eq(eng_file_put(e, t, "big.bin", s1, 26, NULL), 0);
	cr_assert(exists(p1));
	cr_assert_eq(eng_txn_abort(e, t), 0);
	cr_assert_not(exists(p1), "the aborted file's bytes are freed at once");
	struct seen s = after_crash(&e);
	cr_assert_eq(s.n, 0, "nothing pending after a crash (%d)", s.n);
	eng_close(e, false);
}

/* A rename inside a checkpoint moves the file under its new name, and a
 * removal takes the whole subtree and its staging space with it; both
 * hold after a crash right after the call. */
Test(facts, rename_and_remove_inside_a_checkpoint)
{
	eng *e = open_eng();
	uint64_t t;
	char pa[300], pb[300], pc[300];
	cr_assert_eq(eng_txn_begin(e, "step.tmp", true, NULL, &t), 0);
	uint64_t sa = staged(e, "a", pa), sb = staged(e, "bb", pb),
		 sc = staged(e, "ccc", pc);
	cr_assert_eq(eng_file_put(e, t, "step.tmp/opt/a", sa, 1, NULL), 0);
	cr_assert_eq(eng_file_put(e, t, "step.tmp/opt/b", sb, 2, NULL), 0);
	cr_assert_eq(eng_file_put(e, t, "step.tmp/c.part", sc, 3, NULL), 0);
	cr_assert_eq(eng_file_move(e, t, "step.tmp/c.part", t, "step.tmp/c", NULL), 0);
	cr_assert_eq(eng_file_drop(e, t, "step.tmp/opt"), 0);
	cr_assert_not(exists(pa));
	cr_assert_not(exists(pb));
	cr_assert(exists(pc), "a rename keeps the bytes");
	struct seen s = after_crash(&e);
	cr_assert_eq(s.n, 1);
	cr_assert_str_eq(s.path[0], "step.tmp/c");
	cr_assert_eq(s.size[0], 3);
	eng_close(e, false);
}

/* A file moved from one checkpoint to another belongs to the target
 * (it is committed with it), replacing a file of that name there. */
Test(facts, a_move_between_checkpoints_replaces_the_target)
{
	eng *e = open_eng();
	uint64_t t1, t2;
	char p1[300], p2[300];
	cr_assert_eq(eng_txn_begin(e, "a.tmp", true, NULL, &t1), 0);
	cr_assert_eq(eng_txn_begin(e, "b.tmp", true, NULL, &t2), 0);
	uint64_t s1 = staged(e, "from a", p1), s2 = staged(e, "old b", p2);
	cr_assert_eq(eng_file_put(e, t1, "a.tmp/x", s1, 6, NULL), 0);
	cr_assert_eq(eng_file_put(e, t2, "b.tmp/x", s2, 5, NULL), 0);
	cr_assert_eq(eng_file_move(e, t1, "a.tmp/x", t2, "b.tmp/x", NULL), 0);
	cr_assert_not(exists(p2), "the replaced target's bytes are freed");
	struct seen s = after_crash(&e);
	cr_assert_eq(s.n, 1);
	cr_assert_str_eq(s.path[0], "b.tmp/x");
	cr_assert_eq(s.size[0], 6);
	/* the source checkpoint has nothing left to commit under x */
	cr_assert_eq(eng_file_set_meta(e, t1, "a.tmp/x", NULL), -ENOENT);
	eng_close(e, false);
}

/* A directory transaction whose root moves into another one (mkdir b;
 * mv b a/c with a not committed) has nothing left to commit: it is
 * aborted with the move, in one journal transaction (a crash right after
 * keeps it aborted), so its clean-up deletes its marker and intent
 * instead of a commit showing an empty b; what moved is the target's. */
Test(facts, a_root_moved_into_another_transaction_leaves_nothing_behind)
{
	eng *e = open_eng();
	uint64_t t1, t2;
	char p[300], q[300];
	cr_assert_eq(eng_txn_begin(e, "a.tmp", true, NULL, &t1), 0);
	cr_assert_eq(eng_txn_begin(e, "b.tmp", true, NULL, &t2), 0);
	uint64_t s1 = staged(e, "in b", p), s2 = staged(e, "late", q);
	cr_assert_eq(eng_file_put(e, t2, "b.tmp/x", s1, 4, NULL), 0);
	cr_assert_eq(eng_file_move(e, t2, "b.tmp", t1, "a.tmp/c", NULL), 0);
	/* aborted: it takes nothing more (it would commit it at b) */
	cr_assert_eq(eng_file_put(e, t2, "b.tmp/y", s2, 4, NULL), -ENOENT);
	struct seen s = after_crash(&e);
	cr_assert_eq(s.n, 1);
	cr_assert_str_eq(s.path[0], "a.tmp/c/x");
	cr_assert_eq(eng_file_put(e, t2, "b.tmp/y", s2, 4, NULL), -ENOENT,
		     "still aborted after the crash");
	cr_assert_eq(eng_file_put(e, t1, "a.tmp/c/y", s2, 4, NULL), 0);
	eng_close(e, false);
}

/* A checkpoint a write failed in is never sealed (it would publish a
 * short file), also after a restart, until the file is written again. */
Test(facts, a_failed_write_keeps_the_checkpoint_from_sealing)
{
	eng *e = open_eng();
	uint64_t t;
	char p[300];
	cr_assert_eq(eng_txn_begin(e, "step.tmp", true, NULL, &t), 0);
	uint64_t s1 = staged(e, "shor", p);
	cr_assert_eq(eng_file_poison(e, t, "step.tmp/w.pt", EIO), 0);
	cr_assert_eq(eng_file_put_short(e, t, "step.tmp/w.pt", s1, 4, NULL), 0);
	cr_assert_eq(eng_txn_seal(e, t), -EIO);
	eng_close(e, false);
	e = open_eng();
	cr_assert_eq(eng_txn_seal(e, t), -EIO, "the failure is journaled");
	uint64_t s2 = staged(e, "whole file", p);
	cr_assert_eq(eng_file_put(e, t, "step.tmp/w.pt", s2, 10, NULL), 0);
	cr_assert_eq(eng_txn_seal(e, t), 0, "written again: it may commit");
	eng_close(e, false);
}

static int int_row(void *arg, sqlite3_stmt *s)
{
	*(int64_t *)arg = sqlite3_column_int64(s, 0);
	return 0;
}

/* A put the journal cannot take (it is full: max_page_count stands in
 * for the disk) fails and leaves nothing behind it in the model either:
 * the next put of that file journals its row.  Before, the file stayed
 * in the model with the id of a row the failed transaction had rolled
 * back, the next put updated no row and returned 0, and a crash lost the
 * file. */
Test(facts, a_put_the_journal_cannot_take_leaves_no_trace)
{
	eng *e = open_eng();
	uint64_t t;
	char p[300];
	cr_assert_eq(eng_txn_begin(e, "step.tmp", true, NULL, &t), 0);
	int64_t pages = 0;
	cr_assert_eq(jr_exec(e->j, int_row, &pages, "PRAGMA page_count", ""), 0);
	char q[64];
	snprintf(q, sizeof q, "PRAGMA max_page_count = %lld", (long long)pages);
	cr_assert_eq(jr_exec(e->j, NULL, NULL, q, ""), 0);
	static char big[64 << 10];
	memset(big, 'x', sizeof big);
	eng_meta m = {.mode = 0600, .xattrs = big, .xattrs_len = sizeof big};
	uint64_t s1 = staged(e, "short", p);
	cr_assert_eq(eng_file_put(e, t, "step.tmp/w.pt", s1, 5, &m), -ENOSPC);
	cr_assert_eq(jr_exec(e->j, NULL, NULL, "PRAGMA max_page_count = 1000000",
			     ""), 0);
	m = (eng_meta){.mode = 0644};
	cr_assert_eq(eng_file_put(e, t, "step.tmp/w.pt", s1, 5, &m), 0);
	struct seen s = after_crash(&e);
	cr_assert_eq(s.n, 1, "the put after the failed one is journaled");
	cr_assert_str_eq(s.path[0], "step.tmp/w.pt");
	cr_assert_eq(s.mode[0], 0644);
	eng_close(e, false);
}

/* The rows of garbage key in transaction txn. */
static int64_t garbage_rows(eng *e, uint64_t txn, const char *key)
{
	int64_t n = -1;
	cr_assert_eq(jr_exec(e->j, int_row, &n,
			     "SELECT COUNT(*) FROM garbage WHERE txn = ? AND "
			     "key = ?",
			     "it", (int64_t)txn, key),
		     0);
	return n;
}

/* A file put or moved where another transaction keeps the old object as
 * garbage (a stored file renamed away from there) takes that garbage:
 * the other one, visible after this one's commit, deleted the new object
 * (model seed 7400).  Its own step never deletes a key it commits. */
Test(facts, a_file_stored_where_another_keeps_garbage_takes_it)
{
	eng *e = open_eng();
	uint64_t t1, t2;
	char p[300];
	cr_assert_eq(eng_txn_begin(e, "b.tmp", true, NULL, &t1), 0);
	cr_assert_eq(eng_txn_begin(e, "f1", false, NULL, &t2), 0);
	cr_assert_eq(jr_garbage_add(e->j, (int64_t)t2, "b.tmp/c"), 0);
	cr_assert_eq(jr_garbage_add(e->j, (int64_t)t2, "b.tmp/d"), 0);
	uint64_t s1 = staged(e, "new c", p);
	cr_assert_eq(eng_file_put(e, t1, "b.tmp/c", s1, 5, NULL), 0);
	cr_assert_eq(garbage_rows(e, t2, "b.tmp/c"), 0);
	cr_assert_eq(garbage_rows(e, t1, "b.tmp/c"), 1);
	/* moved there (rename_local): the same */
	uint64_t s2 = staged(e, "new d", p);
	cr_assert_eq(eng_file_put(e, t1, "b.tmp/x", s2, 5, NULL), 0);
	cr_assert_eq(eng_file_move(e, t1, "b.tmp/x", t1, "b.tmp/d", NULL), 0);
	cr_assert_eq(garbage_rows(e, t2, "b.tmp/d"), 0);
	cr_assert_eq(garbage_rows(e, t1, "b.tmp/d"), 1);
	eng_close(e, false);
}

/* Facts about a transaction that does not exist (ended, or never begun)
 * fail with ENOENT and leave nothing behind. */
Test(facts, unknown_transaction)
{
	eng *e = open_eng();
	char p[300];
	uint64_t s = staged(e, "x", p);
	cr_assert_eq(eng_file_put(e, 42, "x", s, 1, NULL), -ENOENT);
	cr_assert_eq(eng_dir_put(e, 42, "d", NULL), -ENOENT);
	cr_assert_eq(eng_file_drop(e, 42, "x"), -ENOENT);
	cr_assert_eq(eng_txn_seal(e, 42), -ENOENT);
	cr_assert_eq(eng_txn_abort(e, 42), -ENOENT);
	struct seen seen = after_crash(&e);
	cr_assert_eq(seen.n, 0);
	eng_close(e, false);
}

/* What a restart gets back of pending directory attribute changes. */
struct dir_seen {
	int n;
	uint64_t step[4];
	char path[4][64];
	uint32_t mode[4], uid[4];
	int64_t mtime_s[4];
	char xattrs[4][32];
	size_t xattrs_len[4];
};

static void on_dir_set(void *arg, uint64_t txn, const char *path,
		       const eng_meta *m)
{
	struct dir_seen *s = arg;
	if (s->n >= 4)
		return;
	s->step[s->n] = txn;
	snprintf(s->path[s->n], 64, "%s", path);
	s->mode[s->n] = m->mode;
	s->uid[s->n] = m->uid;
	s->mtime_s[s->n] = m->mtime.tv_sec;
	s->xattrs_len[s->n] = m->xattrs_len < 32 ? m->xattrs_len : 32;
	if (s->xattrs_len[s->n])
		memcpy(s->xattrs[s->n], m->xattrs, s->xattrs_len[s->n]);
	s->n++;
}

/* A committed directory's new attributes (eng_dir_set) are a step that a
 * crash right after the call keeps, with every attribute (xattr values
 * with NULs too), in the order of the calls; a path outside the record
 * root is refused and leaves nothing.  (The steps wait behind a
 * single-file transaction left open at the head of the queue: this engine
 * has no server, so no step may run.) */
Test(facts, a_directory_attribute_change_survives_a_crash)
{
	eng *e = open_eng();
	uint64_t t;
	cr_assert_eq(eng_txn_begin(e, "latest", false, NULL, &t), 0);
	static const char xa[] = "user.k\0\3\0\0\0a\0b";
	eng_meta m = {.mode = 02750, .uid = 7, .gid = 8,
		      .mtime = {1000000000, 5}, .xattrs = xa,
		      .xattrs_len = sizeof xa - 1};
	uint64_t s1 = 0, s2 = 0, s3 = 0;
	cr_assert_eq(eng_dir_set(e, "ckpt/sub", &m, "ckpt", &s1), 0);
	m.mode = 0700;
	m.xattrs = NULL;
	m.xattrs_len = 0;
	cr_assert_eq(eng_dir_set(e, "ckpt", &m, "ckpt", &s2), 0);
	cr_assert_eq(eng_dir_set(e, "elsewhere", &m, "ckpt", &s3), -EINVAL);
	cr_assert(s1 && s2 && s2 != s1);
	eng_close(e, false);
	e = open_eng();
	struct dir_seen s = {0};
	eng_foreach_pending_dir_set(e, on_dir_set, &s);
	cr_assert_eq(s.n, 2);
	cr_assert_eq(s.step[0], s1);
	cr_assert_str_eq(s.path[0], "ckpt/sub");
	cr_assert_eq(s.mode[0] & 07777, 02750);
	cr_assert_eq(s.uid[0], 7);
	cr_assert_eq(s.mtime_s[0], 1000000000);
	cr_assert_eq(s.xattrs_len[0], sizeof xa - 1);
	cr_assert_eq(memcmp(s.xattrs[0], xa, sizeof xa - 1), 0);
	cr_assert_eq(s.step[1], s2);
	cr_assert_str_eq(s.path[1], "ckpt");
	cr_assert_eq(s.mode[1] & 07777, 0700);
	cr_assert_eq(s.xattrs_len[1], 0);
	cr_assert(eng_txn_pending(e, s1));
	/* no file transaction comes of it */
	struct seen f = {0};
	eng_foreach_pending_file(e, on_file, &f);
	cr_assert_eq(f.n, 0);
	eng_close(e, false);
}
