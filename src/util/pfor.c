/* pfor: a parallel for over blocking calls (util/pfor.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "util/pfor.h"

typedef struct pfor_run {
	atomic_size_t next;
	size_t n;
	void (*fn)(void *arg, size_t i);
	void *arg;
} pfor_run;

static void *pfor_main(void *p)
{
	pfor_run *r = p;
	for (;;) {
		size_t i = atomic_fetch_add(&r->next, 1);
		if (i >= r->n)
			return NULL;
		r->fn(r->arg, i);
	}
}

void pfor(size_t n, unsigned par, void (*fn)(void *arg, size_t i), void *arg)
{
	pfor_run r = {.n = n, .fn = fn, .arg = arg};
	atomic_init(&r.next, 0);
	if (n == 0)
		return;
	size_t extra = par > 1 ? par - 1 : 0;
	if (extra > n - 1)
		extra = n - 1;
	pthread_t *t = extra ? calloc(extra, sizeof *t) : NULL;
	size_t started = 0;
	for (; t && started < extra; started++)
		if (pthread_create(&t[started], NULL, pfor_main, &r) != 0)
			break;
	pfor_main(&r); /* the caller works too */
	for (size_t k = 0; k < started; k++)
		pthread_join(t[k], NULL);
	free(t);
}
