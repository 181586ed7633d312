/* fs_mcache: see mcache.h.  A chained hash table of entries, also linked
 * in the order they were stored (eviction takes the oldest). */
#include "fs/mcache.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NBUCKETS 4096u
#define DEFAULT_MAX (32u << 20)

typedef struct ment {
	char *key, *etag, *body;
	size_t len;
	struct ment *chain;       /* same bucket */
	struct ment *older, *newer; /* storage order */
} ment;

struct fs_mcache {
	pthread_mutex_t mu;
	ment *b[NBUCKETS];
	ment *oldest, *newest;
	size_t bytes, count, max;
};

static uint32_t hash(const char *s)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h % NBUCKETS;
}

fs_mcache *fs_mcache_new(size_t max_bytes)
{
	fs_mcache *mc = calloc(1, sizeof *mc);
	if (!mc)
		return NULL;
	pthread_mutex_init(&mc->mu, NULL);
	mc->max = max_bytes ? max_bytes : DEFAULT_MAX;
	return mc;
}

static size_t cost(const ment *m)
{
	return m->len + strlen(m->key) + strlen(m->etag) + sizeof *m;
}

static void ment_free(ment *m)
{
	free(m->key);
	free(m->etag);
	free(m->body);
	free(m);
}

static void unlink_free(fs_mcache *mc, ment *m)
{
	ment **pp = &mc->b[hash(m->key)];
	while (*pp != m)
		pp = &(*pp)->chain;
	*pp = m->chain;
	if (m->older)
		m->older->newer = m->newer;
	else
		mc->oldest = m->newer;
	if (m->newer)
		m->newer->older = m->older;
	else
		mc->newest = m->older;
	mc->bytes -= cost(m);
	mc->count--;
	ment_free(m);
}

void fs_mcache_free(fs_mcache *mc)
{
	if (!mc)
		return;
	while (mc->oldest)
		unlink_free(mc, mc->oldest);
	pthread_mutex_destroy(&mc->mu);
	free(mc);
}

static ment *find(fs_mcache *mc, const char *key)
{
	for (ment *m = mc->b[hash(key)]; m; m = m->chain)
		if (!strcmp(m->key, key))
			return m;
	return NULL;
}

char *fs_mcache_get(fs_mcache *mc, const char *key, const char *etag,
		    size_t *len)
{
	char *out = NULL;
	pthread_mutex_lock(&mc->mu);
	ment *m = find(mc, key);
	if (m && !strcmp(m->etag, etag)) {
		out = malloc(m->len ? m->len : 1);
		if (out) {
			memcpy(out, m->body, m->len);
			*len = m->len;
		}
	}
	pthread_mutex_unlock(&mc->mu);
	return out;
}

int fs_mcache_put(fs_mcache *mc, const char *key, const char *etag,
		  const char *body, size_t len)
{
	ment *n = calloc(1, sizeof *n);
	if (n) {
		n->key = strdup(key);
		n->etag = strdup(etag);
		n->body = malloc(len ? len : 1);
		n->len = len;
	}
	if (!n || !n->key || !n->etag || !n->body) {
		if (n)
			ment_free(n);
		return -1;
	}
	memcpy(n->body, body, len);
	pthread_mutex_lock(&mc->mu);
	ment *old = find(mc, key);
	if (old)
		unlink_free(mc, old);
	if (cost(n) > mc->max) {
		pthread_mutex_unlock(&mc->mu);
		ment_free(n);
		return 0;
	}
	while (mc->oldest && mc->bytes + cost(n) > mc->max)
		unlink_free(mc, mc->oldest);
	uint32_t h = hash(key);
	n->chain = mc->b[h];
	mc->b[h] = n;
	n->older = mc->newest;
	if (mc->newest)
		mc->newest->newer = n;
	else
		mc->oldest = n;
	mc->newest = n;
	mc->bytes += cost(n);
	mc->count++;
	pthread_mutex_unlock(&mc->mu);
	return 0;
}

size_t fs_mcache_bytes(fs_mcache *mc)
{
	pthread_mutex_lock(&mc->mu);
	size_t b = mc->bytes;
	pthread_mutex_unlock(&mc->mu);
	return b;
}

size_t fs_mcache_count(fs_mcache *mc)
{
	pthread_mutex_lock(&mc->mu);
	size_t n = mc->count;
	pthread_mutex_unlock(&mc->mu);
	return n;
}
