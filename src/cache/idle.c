/*
 * idle: complete entries that no handle of this process holds any more
 * (design: doc/cache.md, "Idle entries").  Such an entry keeps its open
 * cache file and its pin in the index, so reopening it (a warm or hot
 * read of a directory, the next rank opening the same shard) costs no
 * index transaction.  It is released (centry_free: the pin goes in one
 * transaction) when the first of these comes:
 *
 *   - CACHE_IDLE_KEEP seconds without a handle;
 *   - more than idle_max entries are idle (each holds a descriptor): the
 *     longest idle go first;
 *   - this process needs room (cache_idle_free_all, by the caller);
 *   - another process sharing the cache needs room.  A pin is a deletion
 *     lock other processes must respect, so they cannot evict an idle
 *     entry: they ask instead (cache_idle_ask appends a byte to
 *     DIR/release-idle), and the cache writer thread of every process,
 *     which looks at that file's size and times every 100 ms
 *     (cache_idle_tick), releases all its idle entries when they changed.
 *     The asker tries again meanwhile (cache.c, make_room_shared).
 *
 * An idle entry is never read: a reopen takes it back (refs > 0, under
 * cache.mu) before any byte is served, and release happens only under the
 * same mutex with refs == 0, so the pin covers every read.  A file
 * changed while idle (its fstat differs from the one taken when it went
 * idle) has its chunks CRC-checked again as they are read
 * (cache_idle_take), as a new process's open would (doc/cache.md).  Calls
 * entry.c only; cache.c and fetch.c call it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/internal.h"
#include "util/clock.h"
#include "util/log.h"

/* The request file is cut back to nothing past this size. */
#define ASK_FILE_MAX 4096

static bool same_sig(const struct stat *a, const struct stat *b)
{
	return a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
	       a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
	       a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

unsigned cache_idle_max_for(uint64_t nofile)
{
	/* a quarter of the descriptors, the rest for everything else */
	uint64_t m = nofile / 4;
	return m < 16 ? 16 : m > CACHE_IDLE_MAX ? CACHE_IDLE_MAX : (unsigned)m;
}

int cache_idle_init(cache *c)
{
	struct rlimit rl;
	c->idle_max = cache_idle_max_for(
		getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
			? (uint64_t)rl.rlim_cur
			: 1024);
	size_t len = strlen(c->dir) + sizeof "/release-idle";
	c->idle_ask_path = malloc(len);
	if (!c->idle_ask_path)
		return -1;
	snprintf(c->idle_ask_path, len, "%s/release-idle", c->dir);
	int fd = open(c->idle_ask_path,
		      O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd >= 0)
		close(fd);
	else
		log_warn("cache: %s: %s (other mounts sharing the cache cannot "
			 "ask for idle entries)",
			 c->idle_ask_path, strerror(errno));
	c->idle_sig_ok = stat(c->idle_ask_path, &c->idle_sig) == 0;
	return 0;
}

void cache_idle_ask(cache *c)
{
	int fd = open(c->idle_ask_path,
		      O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
		      0600);
	if (fd < 0) {
		log_debug("cache: cannot ask for idle entries: %s",
			  strerror(errno));
		return;
	}
	struct stat st;
	if (fstat(fd, &st) == 0 && st.st_size >= ASK_FILE_MAX &&
	    ftruncate(fd, 0) < 0)
		log_debug("cache: %s: %s", c->idle_ask_path, strerror(errno));
	if (write(fd, "r", 1) != 1)
		log_debug("cache: cannot ask for idle entries: %s",
			  strerror(errno));
	close(fd);
}

unsigned cache_idle_free_all(cache *c)
{
	unsigned n = 0;
	for (centry **pp = &c->entries; *pp;) {
		centry *e = *pp;
		if (e->refs == 0 && e->idle_since > 0) {
			centry_free(c, e); /* unlinks it from *pp */
			n++;
		} else {
			pp = &e->next;
		}
	}
	return n;
}

/* The entry idle longest, NULL if none; *count: how many are idle.  mu */
static centry *oldest_idle(cache *c, unsigned *count)
{
	CKPTFS_ASSERT_HELD(&c->mu);
	centry *old = NULL;
	*count = 0;
	for (centry *e = c->entries; e; e = e->next) {
		if (e->refs || e->idle_since <= 0)
			continue;
		(*count)++;
		if (!old || e->idle_since < old->idle_since)
			old = e;
	}
	return old;
}

unsigned cache_idle_expire(cache *c, double now, double keep, unsigned max)
{
	unsigned freed = 0, count;
	for (centry **pp = &c->entries; *pp;) {
		centry *e = *pp;
		if (e->refs == 0 && e->idle_since > 0 &&
		    now - e->idle_since >= keep) {
			centry_free(c, e); /* unlinks it from *pp */
			freed++;
		} else {
			pp = &e->next;
		}
	}
	centry *e;
	while ((e = oldest_idle(c, &count)) && count > max) {
		centry_free(c, e);
		freed++;
	}
	return freed;
}

void cache_idle_tick(cache *c)
{
	struct stat st;
	bool ok = stat(c->idle_ask_path, &st) == 0;
	bool asked = ok != c->idle_sig_ok || (ok && !same_sig(&st, &c->idle_sig));
	if (ok)
		c->idle_sig = st;
	c->idle_sig_ok = ok;
	if (c->stopping || asked) {
		unsigned n = cache_idle_free_all(c);
		if (n && asked)
			log_debug("cache: %u idle entries released for another "
				  "process",
				  n);
		return;
	}
	cache_idle_expire(c, clock_mono(), CACHE_IDLE_KEEP, c->idle_max);
}

uint64_t cache_idle_bytes(cache *c)
{
	uint64_t b = 0;
	for (centry *e = c->entries; e; e = e->next)
		if (e->refs == 0 && e->idle_since > 0)
			b += e->size;
	return b;
}

void cache_idle_take(cache *c, centry *e)
{
	if (e->idle_since <= 0)
		return;
	e->idle_since = 0;
	struct stat st;
	if (fstat(e->fd, &st) == 0 && same_sig(&st, &e->idle_st))
		return;
	if (!c->o.verify)
		return;
	log_info("cache file of %s changed while no handle held it; "
		 "checking it again",
		 e->key);
	for (uint32_t i = 0; i < e->n_chunks; i++)
		e->verified[i] = 0;
	e->stamped = false;
}
