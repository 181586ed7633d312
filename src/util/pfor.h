/*
 * pfor: runs fn(arg, i) for every i in [0, n) on up to `par` threads at
 * once, each thread taking the next index as it finishes one.  For
 * blocking calls that wait on the network (one HEAD each, say): the http
 * loop multiplexes them, the threads only wait.  Returns when every call
 * returned.  With par <= 1, or a thread that cannot be created, the calls
 * run on fewer threads (at least the caller's): none is ever skipped.
 */
#ifndef CKPTFS_UTIL_PFOR_H
#define CKPTFS_UTIL_PFOR_H

#include <stddef.h>

void pfor(size_t n, unsigned par, void (*fn)(void *arg, size_t i), void *arg);

#endif
