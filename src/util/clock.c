/*
 * clock: CLOCK_MONOTONIC as a double; never goes back, unaffected by
 * changes of the wall clock.
 */
#include "util/clock.h"

#include <time.h>

double clock_mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
