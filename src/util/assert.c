/* assert: the failure path of CKPTFS_ASSERT and the lock owner ids
 * (util/assert.h). */
#include "util/assert.h"

#ifdef CKPTFS_ASSERTS
#include <stdlib.h>

#include "util/log.h"

void ckpt_assert_fail(const char *file, int line, const char *cond)
{
	log_error("%s:%d: assertion failed: %s", file, line, cond);
	abort();
}

/* The address of a thread-local byte: distinct for every live thread. */
static _Thread_local char thread_tag;

uintptr_t ckpt_thread_id(void)
{
	return (uintptr_t)&thread_tag;
}

bool ckpt_mutex_held(const ckpt_mutex *mu)
{
	return atomic_load_explicit(&((ckpt_mutex *)mu)->owner,
				    memory_order_relaxed) == ckpt_thread_id();
}
#else
/* ISO C wants a translation unit to declare something. */
typedef int ckpt_assert_unused;
#endif
