/*
 * assert: invariants checked in debug and sanitizer builds.
 *
 * CKPTFS_ASSERT(cond) is compiled in when CKPTFS_ASSERTS is defined
 * (configure --enable-debug, implied by --enable-sanitizers and
 * --enable-tsan): a false cond logs "file:line: assertion failed: cond"
 * and aborts.  In a release build it compiles to nothing, but cond is
 * still type-checked (and never evaluated), so an assertion cannot rot.
 * A condition must have no side effects.
 *
 * ckpt_mutex is a pthread mutex that, with assertions on, records which
 * thread holds it, so code can assert the lock it needs instead of saying
 * so in a comment: CKPTFS_ASSERT_HELD(&e->mu), CKPTFS_ASSERT_NOT_HELD(...)
 * (this thread does not hold it: before network I/O, or before a call
 * that takes it).  The owner is a relaxed atomic written only by the
 * holding thread (set after the lock, cleared before the unlock and
 * around condition waits), so a thread reads its own id there exactly
 * while it holds the mutex: exact under ThreadSanitizer too, and it
 * creates no happens-before edge that could hide a race.  Release builds
 * keep a bare pthread_mutex_t and the plain calls.
 */
#ifndef CKPTFS_UTIL_ASSERT_H
#define CKPTFS_UTIL_ASSERT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#ifdef CKPTFS_ASSERTS
#include <stdatomic.h>
#endif

#ifdef CKPTFS_ASSERTS
_Noreturn void ckpt_assert_fail(const char *file, int line, const char *cond);
#define CKPTFS_ASSERT(cond)                                                   \
	((cond) ? (void)0 : ckpt_assert_fail(__FILE__, __LINE__, #cond))
#else
#define CKPTFS_ASSERT(cond) ((void)sizeof(!(cond)))
#endif

typedef struct ckpt_mutex {
	pthread_mutex_t m;
#ifdef CKPTFS_ASSERTS
	atomic_uintptr_t owner; /* ckpt_thread_id() of the holder; 0: none */
#endif
} ckpt_mutex;

/* Whether the calling thread holds mu (only meaningful, and only defined,
 * with assertions on: use it inside CKPTFS_ASSERT). */
bool ckpt_mutex_held(const ckpt_mutex *mu);
#define CKPTFS_ASSERT_HELD(mu) CKPTFS_ASSERT(ckpt_mutex_held(mu))
#define CKPTFS_ASSERT_NOT_HELD(mu) CKPTFS_ASSERT(!ckpt_mutex_held(mu))

#ifdef CKPTFS_ASSERTS
/* A non-zero id of the calling thread, unique among live threads. */
uintptr_t ckpt_thread_id(void);

static inline void ckpt_owner_set(ckpt_mutex *mu, uintptr_t id)
{
	atomic_store_explicit(&mu->owner, id, memory_order_relaxed);
}
#define CKPT_OWNER_TAKEN(mu) ckpt_owner_set(mu, ckpt_thread_id())
#define CKPT_OWNER_GIVEN(mu)                                                  \
	(CKPTFS_ASSERT_HELD(mu), ckpt_owner_set(mu, 0))
#else
#define CKPT_OWNER_TAKEN(mu) ((void)(mu))
#define CKPT_OWNER_GIVEN(mu) ((void)(mu))
#endif

static inline void ckpt_mutex_init(ckpt_mutex *mu)
{
	pthread_mutex_init(&mu->m, NULL);
#ifdef CKPTFS_ASSERTS
	atomic_init(&mu->owner, 0);
#endif
}

static inline void ckpt_mutex_destroy(ckpt_mutex *mu)
{
	CKPTFS_ASSERT_NOT_HELD(mu);
	pthread_mutex_destroy(&mu->m);
}

static inline void ckpt_lock(ckpt_mutex *mu)
{
	pthread_mutex_lock(&mu->m);
	CKPT_OWNER_TAKEN(mu);
}

static inline void ckpt_unlock(ckpt_mutex *mu)
{
	CKPT_OWNER_GIVEN(mu);
	pthread_mutex_unlock(&mu->m);
}

/* pthread_cond_wait and _timedwait on a ckpt_mutex the caller holds. */
static inline int ckpt_cond_wait(pthread_cond_t *cv, ckpt_mutex *mu)
{
	CKPT_OWNER_GIVEN(mu);
	int rc = pthread_cond_wait(cv, &mu->m);
	CKPT_OWNER_TAKEN(mu);
	return rc;
}

static inline int ckpt_cond_timedwait(pthread_cond_t *cv, ckpt_mutex *mu,
				      const struct timespec *ts)
{
	CKPT_OWNER_GIVEN(mu);
	int rc = pthread_cond_timedwait(cv, &mu->m, ts);
	CKPT_OWNER_TAKEN(mu);
	return rc;
}

#endif
