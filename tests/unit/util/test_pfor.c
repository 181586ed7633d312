/*
 * Tests for pfor: every index runs exactly once, calls really overlap when
 * par > 1 (each waits until another has started), and par <= 1 or n == 0
 * are handled.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "util/pfor.h"

typedef struct counts {
	atomic_int hits[1000];
	atomic_int running, peak;
} counts;

static void count_one(void *arg, size_t i)
{
	counts *c = arg;
	atomic_fetch_add(&c->hits[i], 1);
	int now = atomic_fetch_add(&c->running, 1) + 1;
	int p = atomic_load(&c->peak);
	while (now > p && !atomic_compare_exchange_weak(&c->peak, &p, now))
		;
	struct timespec ts = {0, 2 * 1000 * 1000};
	nanosleep(&ts, NULL);
	atomic_fetch_sub(&c->running, 1);
}

Test(pfor, every_index_once)
{
	static counts c;
	pfor(1000, 8, count_one, &c);
	for (int i = 0; i < 1000; i++)
		cr_assert_eq(atomic_load(&c.hits[i]), 1, "index %d", i);
	cr_assert_gt(atomic_load(&c.peak), 1, "calls never overlapped");
	cr_assert_leq(atomic_load(&c.peak), 8);
}

Test(pfor, serial_when_par_is_one)
{
	static counts c;
	pfor(50, 1, count_one, &c);
	for (int i = 0; i < 50; i++)
		cr_assert_eq(atomic_load(&c.hits[i]), 1);
	cr_assert_eq(atomic_load(&c.peak), 1);
	pfor(0, 4, count_one, &c); /* nothing to do */
	cr_assert_eq(atomic_load(&c.hits[50]), 0);
}

Test(pfor, fewer_items_than_threads)
{
	static counts c;
	pfor(3, 64, count_one, &c);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(atomic_load(&c.hits[i]), 1);
	cr_assert_leq(atomic_load(&c.peak), 3);
}
