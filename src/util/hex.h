/*
 * hex: hexadecimal digits both ways, a digit's value and bytes written as
 * lowercase digits (the one copy of each in the tree).
 */
#ifndef CKPTFS_UTIL_HEX_H
#define CKPTFS_UTIL_HEX_H

#include <stddef.h>

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

/* Writes the 2n lowercase hex digits of the n bytes at p, then a NUL, to
 * out (2n + 1 chars). */
static inline void hex_encode(const void *p, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * n] = '\0';
}

#endif
