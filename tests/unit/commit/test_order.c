/* Unit test for the ordering rule of the visibility queue
 * (commit/order.c), and for steps set aside by transient errors past
 * transient_limit (doc/commit.md "Errors"). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commit/internal.h"
#include "util/log.h"

Test(order, upload_blocked_by_earlier_overlapping_steps)
{
	eng_order_step q[] = {
	    {"ckpt-1", NULL, false},          /* commit of ckpt-1 */
	    {"old", NULL, false},             /* delete of old */
	    {"a", "b/c", false},              /* rename a -> b/c */
	    {"ckpt-1", NULL, false},          /* rewrite of ckpt-1 */
	    {"done", NULL, true},             /* finished: constrains nothing */
	    {"x", NULL, false},
	};
	size_t n = sizeof q / sizeof *q;
	cr_assert_not(eng_order_blocked(q, n, 0, "ckpt-1/model.pt"));
	cr_assert(eng_order_blocked(q, n, 3, "ckpt-1/model.pt"));
	cr_assert(eng_order_blocked(q, n, 5, "old/x"));
	cr_assert(eng_order_blocked(q, n, 5, "b/c/d"));
	cr_assert(eng_order_blocked(q, n, 5, "b"));
	cr_assert_not(eng_order_blocked(q, n, 5, "b/d"));
	cr_assert_not(eng_order_blocked(q, n, 5, "done/x"));
	cr_assert_not(eng_order_blocked(q, n, 1, "old/x"),
		      "only earlier steps count");
}

Test(order, one_step_waits_for_overlapping_paths)
{
	eng_order_step commit = {"ckpt-1", NULL, false};
	eng_order_step rename = {"a", "b/c", false};
	eng_order_step gone = {"ckpt-1", NULL, true};
	cr_assert(eng_order_waits(&commit, "ckpt-1/model.pt"));
	cr_assert(eng_order_waits(&commit, "ckpt-1"));
	cr_assert_not(eng_order_waits(&commit, "ckpt-10/model.pt"));
	cr_assert(eng_order_waits(&rename, "a/x"));
	cr_assert(eng_order_waits(&rename, "b"), "above the target");
	cr_assert_not(eng_order_waits(&rename, "b/d"));
	cr_assert_not(eng_order_waits(&gone, "ckpt-1/model.pt"),
		      "done, aborted or parked: constrains nothing");
}

/* The streak rule alone: set aside once failing for transient_limit. */
Test(aside, transient_streak_past_the_limit)
{
	struct eng e;
	memset(&e, 0, sizeof e);
	e.o.transient_limit_s = 5;
	ckpt_mutex_init(&e.mu);
	ckpt_lock(&e.mu);
	etxn t;
	memset(&t, 0, sizeof t);
	cr_assert_not(eng_set_aside(&e, &t, 100), "never failed");
	t.err_since = 96;
	cr_assert_not(eng_set_aside(&e, &t, 100), "failing for 4 s of 5");
	cr_assert(eng_set_aside(&e, &t, 101));
	cr_assert(eng_retrying(&e, &t, 101));
	eng_txn_progress(&e, &t);
	cr_assert_not(eng_set_aside(&e, &t, 200), "a success ends the streak");
	t.failed = true;
	cr_assert(eng_set_aside(&e, &t, 200), "failed for good");
	cr_assert_not(eng_retrying(&e, &t, 200), "not retried by itself");
	ckpt_unlock(&e.mu);
	ckpt_mutex_destroy(&e.mu);
}

/* A transient error starts a streak at the attempt's start, once. */
Test(aside, streak_starts_with_the_failed_attempt)
{
	struct eng e;
	memset(&e, 0, sizeof e);
	e.o.transient_limit_s = 5;
	pthread_cond_init(&e.cv, NULL);
	ckpt_mutex_init(&e.mu);
	ckpt_lock(&e.mu);
	etxn t;
	memset(&t, 0, sizeof t);
	t.root = "ckpt";
	log_init(LOG_LVL_ERROR, false);
	s3_err x = {.err = EIO, .http_status = 503, .msg = "HTTP 503"};
	double now = eng_now();
	eng_txn_error(&e, &t, &x, false, now - 3);
	cr_assert_float_eq(t.err_since, now - 3, 1e-9);
	eng_txn_error(&e, &t, &x, false, now);
	cr_assert_float_eq(t.err_since, now - 3, 1e-9, "the streak goes on");
	cr_assert_not(t.failed);
	cr_assert_str_eq(t.error, "HTTP 503");
	free(t.error);
	ckpt_unlock(&e.mu);
	ckpt_mutex_destroy(&e.mu);
	pthread_cond_destroy(&e.cv);
}

static char dir[256];

static void setup(void)
{
	log_init(LOG_LVL_ERROR, false);
	snprintf(dir, sizeof dir, "/tmp/ckptfs-order-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

/* t has failed transiently for `for_s` seconds (mu held). */
static void failing(etxn *t, double for_s)
{
	t->err = EIO;
	free(t->error);
	t->error = strdup("SlowDown (HTTP 503)");
	t->err_since = eng_now() - for_s;
}

/*
 * On a live queue (no server: single-file transactions left unsealed, so
 * no step ever runs): run/ckpt-2.pt fails transiently, other/ckpt-3.pt is
 * independent, run/latest beside the failing one depends on it.
 */
Test(aside, holds_back_only_what_depends_on_it_and_is_retried, .init = setup,
     .fini = teardown)
{
	eng *e;
	char *err = NULL;
	eng_opts o = {.transient_limit_s = 5};
	cr_assert_eq(eng_open(NULL, NULL, dir, "b", "", &o, &e, &err), 0);
	uint64_t id1, id2, id3;
	cr_assert_eq(eng_txn_begin(e, "run/ckpt-2.pt", false, NULL, &id1), 0);
	cr_assert_eq(eng_txn_begin(e, "other/ckpt-3.pt", false, NULL, &id2), 0);
	cr_assert_eq(eng_txn_begin(e, "run/latest", false, NULL, &id3), 0);

	ckpt_lock(&e->mu);
	etxn *t1 = eng_find_txn(e, id1), *t2 = eng_find_txn(e, id2),
	     *t3 = eng_find_txn(e, id3);
	/* within the limit the failing step keeps the head of the queue */
	failing(t1, 4);
	cr_assert_eq(eng_next_step(e), t1);
	cr_assert_null(eng_blocker(e, t3));
	cr_assert_eq(eng_blocked_err(e, t1), 0);
	/* past it: set aside, what is beside it waits, the rest goes on */
	failing(t1, 6);
	cr_assert_eq(eng_next_step(e), t2);
	cr_assert_eq(eng_blocker(e, t1), t1);
	cr_assert_null(eng_blocker(e, t2));
	cr_assert_eq(eng_blocker(e, t3), t1);
	cr_assert_eq(eng_blocked_err(e, t3), -EIO);
	/* its turn comes again at its retry time, if its step could run */
	t1->state = TS_SEALED; /* in memory only: a file-less step, ready */
	t1->retry_at = eng_now() + 100;
	cr_assert_eq(eng_next_step(e), t2, "backing off");
	t1->retry_at = eng_now() - 1;
	cr_assert_eq(eng_next_step(e), t1, "retry due");
	t1->state = TS_OPEN;
	cr_assert_eq(eng_next_step(e), t2, "not ready: its uploads retry");
	ckpt_unlock(&e->mu);

	eng_txn_status *v;
	size_t n;
	cr_assert_eq(eng_status(e, &v, &n), 0);
	cr_assert_eq(n, 3);
	cr_assert_str_eq(v[0].state, "failed");
	cr_assert(v[0].retrying);
	cr_assert_not_null(strstr(v[0].error, "SlowDown (HTTP 503)"));
	cr_assert_not_null(strstr(v[0].error, "still retried"), "%s", v[0].error);
	cr_assert_str_eq(v[1].state, "open");
	cr_assert_not(v[1].retrying);
	cr_assert_str_eq(v[2].state, "blocked");
	cr_assert_not(v[2].retrying);
	cr_assert_not_null(strstr(v[2].error, "run/ckpt-2.pt"));
	eng_status_free(v, n);
	char *why = eng_failed_text(e);
	cr_assert_not_null(why);
	cr_assert_not_null(strstr(why, "commit of run/ckpt-2.pt"), "%s", why);
	cr_assert_not_null(strstr(why, "still retried"), "%s", why);
	cr_assert_not_null(strstr(why, "1 later step waits"), "%s", why);
	free(why);

	/* `ckptfs retry`: its next attempt is now */
	ckpt_lock(&e->mu);
	t1->retry_at = eng_now() + 100;
	ckpt_unlock(&e->mu);
	cr_assert_eq(eng_step_retry(e, id1), 1);
	cr_assert_eq(eng_step_retry(e, id2), -ENOENT, "not failed");
	ckpt_lock(&e->mu);
	cr_assert_eq(t1->retry_at, 0);
	cr_assert(eng_set_aside(e, t1, eng_now()), "still failing");
	/* a success: back at the head, holding what depends on it in order */
	eng_txn_progress(e, t1);
	cr_assert_eq(eng_next_step(e), t1);
	cr_assert_null(eng_blocker(e, t3));
	ckpt_unlock(&e->mu);
	cr_assert_null(eng_failed_text(e));
	eng_close(e, false);
}

/*
 * A poisoned step (a failed write, commit/poison.c) is reported with what
 * lifts it (the file written again or removed, or `ckptfs drop`), never
 * with `ckptfs retry`, which does not lift it; a retry of it says so
 * (-EBUSY) and tries nothing.  With a step failing for other reasons
 * beside it, the hint names retry again, for that one.
 */
Test(aside, a_poisoned_step_is_not_offered_to_retry, .init = setup,
     .fini = teardown)
{
	eng *e;
	char *err = NULL;
	eng_opts o = {.transient_limit_s = 5};
	cr_assert_eq(eng_open(NULL, NULL, dir, "b", "", &o, &e, &err), 0);
	uint64_t id1, id2;
	/* a single file: a directory's marker would need a server */
	cr_assert_eq(eng_txn_begin(e, "run/big.bin", false, NULL, &id1), 0);
	cr_assert_eq(eng_file_poison(e, id1, "run/big.bin", ENOSPC), 0);
	char *why = eng_failed_text(e);
	cr_assert_not_null(why);
	cr_assert_not_null(strstr(why, "step"), "%s", why);
	cr_assert_not_null(strstr(why, "run/big.bin"), "%s", why);
	cr_assert_not_null(strstr(why, "No space left on device"), "%s", why);
	cr_assert_not_null(strstr(why, "written again or removed"), "%s", why);
	cr_assert_not_null(strstr(why, "`ckptfs drop"), "%s", why);
	cr_assert_null(strstr(why, "ckptfs retry"), "%s", why);
	free(why);
	cr_assert_eq(eng_step_retry(e, id1), -EBUSY);
	cr_assert_eq(eng_step_retry(e, 0), -EBUSY);

	cr_assert_eq(eng_txn_begin(e, "other/ckpt-2.pt", false, NULL, &id2), 0);
	ckpt_lock(&e->mu);
	failing(eng_find_txn(e, id2), 6);
	ckpt_unlock(&e->mu);
	why = eng_failed_text(e);
	cr_assert_not_null(strstr(why, "`ckptfs retry MOUNT` tries again"), "%s", why);
	free(why);
	cr_assert_eq(eng_step_retry(e, 0), 1, "the transient one only");
	cr_assert_eq(eng_step_retry(e, id1), -EBUSY);
	eng_close(e, false);
}
