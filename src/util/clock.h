/*
 * clock: the monotonic clock in seconds, for timeouts, TTLs and rates;
 * condition-variable deadlines.
 */
#ifndef CKPTFS_UTIL_CLOCK_H
#define CKPTFS_UTIL_CLOCK_H

#include <time.h>

double clock_mono(void);

/* *ts = the CLOCK_REALTIME time ms milliseconds from now: the deadline of
 * a pthread_cond_timedwait. */
void clock_realtime_in(struct timespec *ts, long ms);

#endif
