/*
 * clock: the monotonic clock in seconds, for timeouts, TTLs and rates.
 */
#ifndef CKPTFS_UTIL_CLOCK_H
#define CKPTFS_UTIL_CLOCK_H

double clock_mono(void);

#endif
