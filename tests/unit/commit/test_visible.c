/* Unit test for the publish queue's thread (commit/visible.c), on a live
 * engine without a server: only steps that need no request run (single-
 * file transactions with nothing to upload, aborted transactions with
 * nothing uploaded), which is enough to see in which order steps leave
 * the queue and what an abort leaves behind. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commit/internal.h"
#include "util/clock.h"
#include "util/log.h"

#include "../support/tmpdir.h"

static char dir[256];

static void setup(void)
{
	log_init(LOG_LVL_ERROR, false);
	tmpdir_make(dir, sizeof dir, "visible");
}

static void teardown(void)
{
	tmpdir_remove(dir);
}

TestSuite(visible, .init = setup, .fini = teardown, .timeout = 30);

/* Whether step id is still pending (eng_status). */
static bool pending(eng *e, uint64_t id)
{
	eng_txn_status *v;
	size_t n;
	cr_assert_eq(eng_status(e, &v, &n), 0);
	bool found = false;
	for (size_t i = 0; i < n; i++)
		found = found || v[i].id == id;
	eng_status_free(v, n);
	return found;
}

/* Waits up to 5 s for step id to leave the queue. */
static bool gone_within(eng *e, uint64_t id)
{
	double t0 = clock_mono();
	while (clock_mono() - t0 < 5) {
		if (!pending(e, id))
			return true;
		usleep(20 * 1000);
	}
	return false;
}

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

/* Nothing behind a step becomes visible before it: a sealed step waits
 * while an earlier one is still open, and goes once that one is done. */
Test(visible, a_later_step_waits_for_an_earlier_open_one)
{
	eng *e;
	char *err = NULL;
	cr_assert_eq(eng_open(NULL, NULL, dir, "b", "", NULL, &e, &err), 0);
	uint64_t first, second;
	cr_assert_eq(eng_txn_begin(e, "run/a", false, NULL, &first), 0);
	cr_assert_eq(eng_txn_begin(e, "run/b", false, NULL, &second), 0);
	cr_assert_eq(eng_txn_seal(e, second), 0);
	usleep(1500 * 1000); /* the thread has looked more than once */
	cr_assert(pending(e, second), "went past the open step before it");
	cr_assert(pending(e, first));
	cr_assert_eq(eng_txn_seal(e, first), 0);
	cr_assert(gone_within(e, first));
	cr_assert(gone_within(e, second));
	eng_close(e, false);
}

/* A step whose root still has a temp name waits aside for its rename: it
 * does not hold back the steps behind it. */
Test(visible, a_temp_named_step_waits_aside)
{
	eng *e;
	char *err = NULL;
	cr_assert_eq(eng_open(NULL, NULL, dir, "b", "", NULL, &e, &err), 0);
	uint64_t parked, later;
	cr_assert_eq(eng_txn_begin(e, "ckpt.tmp", false, NULL, &parked), 0);
	cr_assert_eq(eng_txn_seal(e, parked), 0);
	cr_assert_eq(eng_txn_begin(e, "latest", false, NULL, &later), 0);
	cr_assert_eq(eng_txn_seal(e, later), 0);
	cr_assert(gone_within(e, later), "held back by a temp-named step");
	cr_assert(pending(e, parked), "visible under its temp name");
	eng_close(e, false);
}

/* An aborted transaction never becomes visible: it leaves the queue, its
 * staging file goes and a restart does not bring it back, while an open
 * one before it still waits. */
Test(visible, an_abort_leaves_nothing_behind)
{
	eng *e;
	char *err = NULL;
	cr_assert_eq(eng_open(NULL, NULL, dir, "b", "", NULL, &e, &err), 0);
	uint64_t open_one, aborted;
	char p1[300], p2[300];
	cr_assert_eq(eng_txn_begin(e, "keep", false, NULL, &open_one), 0);
	uint64_t s1 = staged(e, "kept", p1);
	cr_assert_eq(eng_file_put(e, open_one, "keep", s1, 4, NULL), 0);
	cr_assert_eq(eng_txn_begin(e, "latest", false, NULL, &aborted), 0);
	uint64_t s2 = staged(e, "abandoned", p2);
	cr_assert_eq(eng_file_put(e, aborted, "latest", s2, 9, NULL), 0);
	cr_assert_eq(eng_txn_abort(e, aborted), 0);
	cr_assert(gone_within(e, aborted), "cleaned out of order");
	/* its staging file goes right after it leaves the queue */
	struct stat st;
	for (int i = 0; i < 250 && stat(p2, &st) == 0; i++)
		usleep(20 * 1000);
	cr_assert_neq(stat(p2, &st), 0, "its staging file is gone");
	cr_assert_eq(stat(p1, &st), 0, "the open one's is kept");
	cr_assert(pending(e, open_one));
	eng_close(e, false);

	cr_assert_eq(eng_open(NULL, NULL, dir, "b", "", NULL, &e, &err), 0);
	cr_assert(pending(e, open_one), "journaled");
	cr_assert_not(pending(e, aborted), "the abort's end is journaled");
	cr_assert_eq(eng_file_put(e, aborted, "latest", s2, 9, NULL), -ENOENT);
	eng_close(e, false);
}
