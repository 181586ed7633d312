/*
 * vec: growing a malloc'd array by doubling (the one copy of the tree):
 * vec_grow for one more element, vec_reserve for room for `need`.
 */
#ifndef CKPTFS_UTIL_VEC_H
#define CKPTFS_UTIL_VEC_H

#include <stdint.h>
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

/*
 * The array v (of *cap elements of elem bytes) with room for at least
 * need elements: *cap doubled (from first when 0) until it fits.  Returns
 * v itself when it has the room already (NULL for a NULL v and need 0:
 * test need > *cap first where that can be), the new array with *cap set,
 * or NULL (v and *cap unchanged) when out of memory or need * elem
 * overflows.
 */
static inline void *vec_reserve(void *v, size_t *cap, size_t elem,
				size_t need, size_t first)
{
	if (need <= *cap)
		return v;
	if (need > SIZE_MAX / elem)
		return NULL;
	size_t nc = *cap ? *cap : first;
	while (nc < need)
		nc = nc > SIZE_MAX / elem / 2 ? need : nc * 2;
	void *nv = realloc(v, nc * elem);
	if (nv)
		*cap = nc;
	return nv;
}

#endif
