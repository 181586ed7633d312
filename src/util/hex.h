/*
 * hex: one hexadecimal digit's value (the one copy of the tree).
 */
#ifndef CKPTFS_UTIL_HEX_H
#define CKPTFS_UTIL_HEX_H

/* The value of hex digit c (either case), or -1. */
static inline int hex_val(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

#endif
