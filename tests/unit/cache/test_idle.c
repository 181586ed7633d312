/*
 * Tests for idle entries (cache/idle.c): a complete entry keeps its pin in
 * the index after its last close (another owner of the same cache
 * directory sees it pinned, cannot evict it), the process's own status
 * does not count it as pinned, a reopen is a hit that takes it back, and
 * it is released by expiry (age, count), by cache_idle_free_all, and when
 * another owner asks (cache_idle_ask) within the writer thread's period.
 * Entries are made with cache_adopt (no download, no S3).
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/internal.h"
#include "util/clock.h"
#include "util/log.h"

static char dir[256];

static void setup(void)
{
	log_init(LOG_LVL_ERROR, false);
	snprintf(dir, sizeof dir, "/tmp/ckptfs-test-idle-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void rm_rf(const char *p)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", p);
	cr_assert_eq(system(cmd), 0);
}

static void teardown(void)
{
	rm_rf(dir);
}

static cache *open_cache(uint64_t cap)
{
	cache_opts o = {0};
	o.dir = dir;
	o.cap = cap;
	cache *c = NULL;
	char *err = NULL;
	cr_assert_eq(cache_open(&o, NULL, "bkt", &c, &err), 0, "%s",
		     err ? err : "?");
	return c;
}

/* A complete entry key@"etag-KEY" of size bytes, adopted from a file. */
static void adopt(cache *c, const char *key, size_t size)
{
	char src[512], etag[64];
	snprintf(src, sizeof src, "%s/src-%s", dir, key);
	snprintf(etag, sizeof etag, "etag-%s", key);
	int fd = open(src, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	cr_assert_geq(fd, 0);
	char *b = calloc(1, size);
	memset(b, key[0], size);
	cr_assert_eq(write(fd, b, size), (ssize_t)size);
	close(fd);
	free(b);
	cr_assert_eq(cache_adopt(c, key, etag, src), 0);
}

static cache_file *open_hit(cache *c, const char *key, size_t size)
{
	char etag[64];
	snprintf(etag, sizeof etag, "etag-%s", key);
	cache_file *f = NULL;
	bool hit = false;
	cr_assert_eq(cache_file_open(c, key, etag, size, &f, &hit), 0);
	cr_assert(hit, "%s not a hit", key);
	return f;
}

static uint64_t index_pinned(cache *c)
{
	cidx_stats st;
	cr_assert_eq(cidx_get_stats(c->idx, &st), 0);
	return st.pinned_bytes;
}

static unsigned n_idle(cache *c)
{
	unsigned n = 0;
	ckpt_lock(&c->mu);
	for (centry *e = c->entries; e; e = e->next)
		n += e->refs == 0 && e->idle_since > 0;
	ckpt_unlock(&c->mu);
	return n;
}

Test(idle, max_follows_the_descriptor_limit)
{
	cr_assert_eq(cache_idle_max_for(0), 16);
	cr_assert_eq(cache_idle_max_for(40), 16);
	cr_assert_eq(cache_idle_max_for(1024), 256);
	cr_assert_eq(cache_idle_max_for(20000), 4096);
	cr_assert_eq(cache_idle_max_for(1u << 30), CACHE_IDLE_MAX);
}

Test(idle, closed_entry_stays_pinned_but_not_counted, .init = setup,
     .fini = teardown)
{
	cache *c = open_cache(0);
	adopt(c, "a", 5000);
	cache_file *f = open_hit(c, "a", 5000);
	cache_file_close(f);
	cr_assert_eq(n_idle(c), 1);
	cr_assert_eq(index_pinned(c), 5000, "the idle entry lost its pin");
	cache_stats st;
	cache_get_stats(c, &st);
	cr_assert_eq(st.pinned_bytes, 0, "idle bytes counted as pinned");
	/* a reopen takes it back: a hit, held */
	f = open_hit(c, "a", 5000);
	cr_assert_eq(n_idle(c), 0);
	cache_get_stats(c, &st);
	cr_assert_eq(st.pinned_bytes, 5000);
	cache_file_close(f);
	ckpt_lock(&c->mu);
	cr_assert_eq(cache_idle_free_all(c), 1);
	ckpt_unlock(&c->mu);
	cr_assert_eq(index_pinned(c), 0);
	cache_shutdown(c);
	cache_free(c);
}

Test(idle, expiry_by_age_then_by_count, .init = setup, .fini = teardown)
{
	cache *c = open_cache(0);
	const char *keys[] = {"k1", "k2", "k3"};
	for (int i = 0; i < 3; i++) {
		adopt(c, keys[i], 100 + i);
		cache_file_close(open_hit(c, keys[i], 100 + i));
	}
	ckpt_lock(&c->mu);
	double now = clock_mono();
	/* none old enough, at most 3: nothing */
	cr_assert_eq(cache_idle_expire(c, now, 60, 3), 0);
	/* at most 1: the two idle longest go */
	cr_assert_eq(cache_idle_expire(c, now, 60, 1), 2);
	bool k3 = false;
	for (centry *e = c->entries; e; e = e->next)
		k3 |= !strcmp(e->key, "k3");
	cr_assert(k3, "the entry idle shortest was not the one kept");
	/* old enough: it goes */
	cr_assert_eq(cache_idle_expire(c, now + 61, 60, 10), 1);
	ckpt_unlock(&c->mu);
	cr_assert_eq(index_pinned(c), 0);
	cache_shutdown(c);
	cache_free(c);
}

Test(idle, another_owner_asks_and_gets_the_room, .init = setup,
     .fini = teardown)
{
	cache *c1 = open_cache(20000);
	adopt(c1, "a", 6000);
	adopt(c1, "b", 6000);
	cache_file_close(open_hit(c1, "a", 6000));
	cache_file_close(open_hit(c1, "b", 6000));
	cr_assert_eq(n_idle(c1), 2);

	/* a second owner of the same directory: the entries are pinned for
	 * it, so its room for 12000 more bytes is not there */
	cache *c2 = open_cache(20000);
	cr_assert_eq(index_pinned(c2), 12000);
	cr_assert_eq(cache_free_disk(c2, 0), 0);
	char src[512];
	snprintf(src, sizeof src, "%s/src-big", dir);
	int fd = open(src, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, 12000), 0);
	close(fd);
	/* adopt does not ask: it fails for want of room */
	cr_assert_eq(cache_adopt(c2, "big", "etag-big", src), -ENOSPC);

	/* asked, c1's writer thread releases them within its period */
	cache_idle_ask(c2);
	double t0 = clock_mono();
	while (n_idle(c1) > 0 && clock_mono() - t0 < 5) {
		struct timespec ts = {0, 20 * 1000000L};
		nanosleep(&ts, NULL);
	}
	cr_assert_eq(n_idle(c1), 0, "the idle entries were not released");
	cr_assert_lt(clock_mono() - t0, 1.0);
	cr_assert_eq(index_pinned(c2), 0);
	cr_assert_eq(cache_adopt(c2, "big", "etag-big", src), 0);
	cache_shutdown(c2);
	cache_free(c2);
	cache_shutdown(c1);
	cache_free(c1);
}
