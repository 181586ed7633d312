/*
 * vec: growing a malloc'd array by doubling (the one copy of the tree).
 */
#ifndef CKPTFS_UTIL_VEC_H
#define CKPTFS_UTIL_VEC_H

#include <stdlib.h>

/*
 * The array v (of *cap elements of elem bytes, full) with twice the room,
 * or first elements when it has none yet: returns the new array and sets
 * *cap, or returns NULL (v and *cap unchanged) when out of memory.
 */
static inline void *vec_grow(void *v, size_t *cap, size_t elem, size_t first)
{
	size_t nc = *cap ? *cap * 2 : first;
	void *nv = realloc(v, nc * elem);
	if (nv)
		*cap = nc;
	return nv;
}

#endif
