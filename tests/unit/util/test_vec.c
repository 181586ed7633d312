/*
 * Tests for vec: vec_grow doubles from `first`, vec_reserve doubles until
 * the need fits and leaves an array with room as it is, contents kept.
 */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdlib.h>

#include "util/vec.h"

Test(vec, grow_doubles_from_first_and_keeps_contents)
{
	int *v = NULL;
	size_t cap = 0;
	v = vec_grow(v, &cap, sizeof *v, 4);
	cr_assert_not_null(v);
	cr_assert_eq(cap, 4);
	for (int i = 0; i < 4; i++)
		v[i] = i * 7;
	v = vec_grow(v, &cap, sizeof *v, 4);
	cr_assert_eq(cap, 8);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(v[i], i * 7);
	free(v);
}

Test(vec, reserve_doubles_until_it_fits)
{
	char *v = NULL;
	size_t cap = 0;
	v = vec_reserve(v, &cap, 1, 100, 16);
	cr_assert_not_null(v);
	cr_assert_eq(cap, 128); /* 16, 32, 64, 128 */
	v[0] = 'x';
	char *same = vec_reserve(v, &cap, 1, 128, 16);
	cr_assert_eq(same, v); /* room already: untouched */
	cr_assert_eq(cap, 128);
	v = vec_reserve(v, &cap, 1, 129, 16);
	cr_assert_eq(cap, 256);
	cr_assert_eq(v[0], 'x');
	free(v);
}

Test(vec, reserve_refuses_an_overflowing_need)
{
	size_t cap = 0;
	cr_assert_null(vec_reserve(NULL, &cap, 8, SIZE_MAX / 4, 16));
	cr_assert_eq(cap, 0);
}
