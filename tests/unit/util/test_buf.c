/*
 * Tests for buf: the NUL-termination invariant after every operation,
 * append/printf growth, steal and reset semantics.
 */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "util/buf.h"

/* data == NULL with len == cap == 0, or data[len] == '\0' and len < cap. */
static void check_invariant(const buf *b)
{
	if (!b->data) {
		cr_assert_eq(b->len, 0);
		cr_assert_eq(b->cap, 0);
		return;
	}
	cr_assert_lt(b->len, b->cap);
	cr_assert_eq(b->data[b->len], '\0');
}

Test(buf, init_is_empty)
{
	buf a = BUF_INIT, b;
	buf_init(&b);
	check_invariant(&a);
	check_invariant(&b);
	cr_assert_null(b.data);
	cr_assert_str_eq(buf_cstr(&b), "");
	buf_free(&b); /* freeing an unused buffer is fine */
	check_invariant(&b);
}

Test(buf, append_puts_putc)
{
	buf b = BUF_INIT;
	cr_assert_eq(buf_append(&b, "ab", 2), 0);
	cr_assert_eq(buf_puts(&b, "cd"), 0);
	cr_assert_eq(buf_putc(&b, 'e'), 0);
	cr_assert_eq(buf_append(&b, "zzz", 0), 0);
	check_invariant(&b);
	cr_assert_eq(b.len, 5);
	cr_assert_str_eq(buf_cstr(&b), "abcde");
	buf_free(&b);
	check_invariant(&b);
}

Test(buf, binary_with_nul)
{
	buf b = BUF_INIT;
	cr_assert_eq(buf_append(&b, "a\0b", 3), 0);
	cr_assert_eq(b.len, 3);
	cr_assert_eq(memcmp(b.data, "a\0b", 4), 0);
	check_invariant(&b);
	buf_free(&b);
}

Test(buf, grows_across_many_appends)
{
	buf b = BUF_INIT;
	for (int i = 0; i < 10000; i++) {
		cr_assert_eq(buf_putc(&b, (char)('a' + i % 26)), 0);
		check_invariant(&b);
	}
	cr_assert_eq(b.len, 10000);
	for (size_t i = 0; i < b.len; i++)
		cr_assert_eq(b.data[i], (char)('a' + i % 26));
	buf_free(&b);
}

Test(buf, reserve_keeps_contents)
{
	buf b = BUF_INIT;
	cr_assert_eq(buf_puts(&b, "keep"), 0);
	cr_assert_eq(buf_reserve(&b, 1000), 0);
	cr_assert_geq(b.cap, b.len + 1000 + 1);
	cr_assert_str_eq(buf_cstr(&b), "keep");
	check_invariant(&b);
	char *before = b.data;
	cr_assert_eq(buf_append(&b, "x", 1), 0); /* no realloc needed */
	cr_assert_eq(b.data, before);
	buf_free(&b);
}

Test(buf, printf_appends_and_grows)
{
	buf b = BUF_INIT;
	cr_assert_eq(buf_printf(&b, "%s=%d", "n", 42), 0);
	cr_assert_eq(buf_printf(&b, "&%05u", 7u), 0);
	cr_assert_str_eq(buf_cstr(&b), "n=42&00007");
	cr_assert_eq(b.len, 10);
	char big[3000];
	memset(big, 'q', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	cr_assert_eq(buf_printf(&b, "[%s]", big), 0);
	cr_assert_eq(b.len, 10 + 2 + sizeof big - 1);
	cr_assert_eq(b.data[10], '[');
	cr_assert_eq(b.data[b.len - 1], ']');
	check_invariant(&b);
	cr_assert_eq(buf_printf(&b, "%s", ""), 0);
	cr_assert_eq(b.len, 10 + 2 + sizeof big - 1);
	buf_free(&b);
}

Test(buf, reset_keeps_memory)
{
	buf b = BUF_INIT;
	buf_reset(&b); /* on an empty buffer: no-op */
	check_invariant(&b);
	cr_assert_eq(buf_puts(&b, "hello"), 0);
	size_t cap = b.cap;
	char *data = b.data;
	buf_reset(&b);
	cr_assert_eq(b.len, 0);
	cr_assert_eq(b.cap, cap);
	cr_assert_eq(b.data, data);
	cr_assert_str_eq(buf_cstr(&b), "");
	check_invariant(&b);
	cr_assert_eq(buf_puts(&b, "again"), 0);
	cr_assert_str_eq(buf_cstr(&b), "again");
	buf_free(&b);
}

Test(buf, steal_transfers_ownership)
{
	buf b = BUF_INIT;
	cr_assert_eq(buf_puts(&b, "owned"), 0);
	char *s = buf_steal(&b);
	cr_assert_str_eq(s, "owned");
	cr_assert_null(b.data);
	cr_assert_eq(b.len, 0);
	cr_assert_eq(b.cap, 0);
	cr_assert_eq(buf_puts(&b, "new"), 0); /* b is reusable */
	cr_assert_str_eq(buf_cstr(&b), "new");
	cr_assert_str_eq(s, "owned");
	free(s);
	buf_free(&b);
}

Test(buf, steal_empty_gives_empty_string)
{
	buf b = BUF_INIT;
	char *s = buf_steal(&b);
	cr_assert_not_null(s);
	cr_assert_str_eq(s, "");
	free(s);
	cr_assert_eq(buf_puts(&b, "x"), 0);
	buf_reset(&b);
	s = buf_steal(&b); /* reset but allocated: still "" */
	cr_assert_str_eq(s, "");
	check_invariant(&b);
	free(s);
}
