/*
 * Tests for hex: digit values both cases, bytes encoded as lowercase
 * digits with a NUL, every byte value round-tripping.
 */
#include <criterion/criterion.h>

#include <string.h>

#include "util/hex.h"

Test(hex, digit_values)
{
	cr_assert_eq(hex_val('0'), 0);
	cr_assert_eq(hex_val('9'), 9);
	cr_assert_eq(hex_val('a'), 10);
	cr_assert_eq(hex_val('F'), 15);
	cr_assert_eq(hex_val('g'), -1);
	cr_assert_eq(hex_val('\0'), -1);
}

Test(hex, encode_is_lowercase_and_terminated)
{
	const unsigned char b[] = {0x00, 0x0f, 0xa5, 0xff};
	char out[2 * sizeof b + 2];
	memset(out, '#', sizeof out);
	hex_encode(b, sizeof b, out);
	cr_assert_str_eq(out, "000fa5ff");
	cr_assert_eq(out[2 * sizeof b + 1], '#'); /* nothing past the NUL */
	hex_encode(b, 0, out);
	cr_assert_str_eq(out, "");
}

Test(hex, every_byte_round_trips)
{
	unsigned char b[256];
	for (int i = 0; i < 256; i++)
		b[i] = (unsigned char)i;
	char out[2 * 256 + 1];
	hex_encode(b, sizeof b, out);
	for (int i = 0; i < 256; i++)
		cr_assert_eq(hex_val(out[2 * i]) * 16 + hex_val(out[2 * i + 1]),
			     i);
}
