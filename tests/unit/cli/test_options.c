/*
 * Tests for the -o list parser the subcommands share (cli/options.c):
 * splitting at commas, "key" and "key=value" items (the value keeps any
 * further '='), stopping at the first item that fails, and the small
 * helpers (cli_set_str, cli_parse_addressing).
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/options.h"

/* Records "key" or "key=value" per item; fails on the key "bad". */
typedef struct seen {
	char items[8][64];
	int n;
} seen;

static int record(void *arg, const char *k, const char *v)
{
	seen *s = arg;
	if (s->n < 8)
		snprintf(s->items[s->n++], sizeof s->items[0], "%s%s%s", k,
			 v ? "=" : "", v ? v : "");
	return strcmp(k, "bad") ? 0 : -1;
}

Test(options, items_in_order)
{
	seen s = {0};
	cr_assert_eq(cli_parse_opts("ro,endpoint=http://h:1/x,uid=5", record,
				    &s),
		     0);
	cr_assert_eq(s.n, 3);
	cr_expect_str_eq(s.items[0], "ro");
	cr_expect_str_eq(s.items[1], "endpoint=http://h:1/x");
	cr_expect_str_eq(s.items[2], "uid=5");
}

Test(options, value_keeps_later_equals_and_empty_items_skip)
{
	seen s = {0};
	cr_assert_eq(cli_parse_opts(",a=b=c,,d,", record, &s), 0);
	cr_assert_eq(s.n, 2);
	cr_expect_str_eq(s.items[0], "a=b=c");
	cr_expect_str_eq(s.items[1], "d");
}

Test(options, empty_value_is_not_null)
{
	seen s = {0};
	cr_assert_eq(cli_parse_opts("log=", record, &s), 0);
	cr_assert_eq(s.n, 1);
	cr_expect_str_eq(s.items[0], "log=");
}

Test(options, stops_at_first_failure)
{
	seen s = {0};
	cr_assert_eq(cli_parse_opts("a,bad,c", record, &s), -1);
	cr_assert_eq(s.n, 2);
	cr_expect_str_eq(s.items[1], "bad");
}

Test(options, empty_list)
{
	seen s = {0};
	cr_assert_eq(cli_parse_opts("", record, &s), 0);
	cr_assert_eq(s.n, 0);
}

Test(options, set_str_replaces)
{
	char *p = NULL;
	cr_assert_eq(cli_set_str(&p, "one"), 0);
	cr_expect_str_eq(p, "one");
	cr_assert_eq(cli_set_str(&p, "two"), 0);
	cr_expect_str_eq(p, "two");
	free(p);
}

Test(options, addressing)
{
	s3_addressing a = S3_ADDR_AUTO;
	cr_assert_eq(cli_parse_addressing("path", &a), 0);
	cr_expect_eq(a, S3_ADDR_PATH);
	cr_assert_eq(cli_parse_addressing("virtual", &a), 0);
	cr_expect_eq(a, S3_ADDR_VIRTUAL);
	cr_assert_eq(cli_parse_addressing("auto", &a), 0);
	cr_expect_eq(a, S3_ADDR_AUTO);
	a = S3_ADDR_PATH;
	cr_expect_eq(cli_parse_addressing("Path", &a), -1);
	cr_expect_eq(a, S3_ADDR_PATH);
}

Test(options, object_meta)
{
	fs_object_meta m = FS_META_OFF;
	cr_assert_eq(FS_META_AUTO, 0, "a zeroed fs_opts means auto");
	cr_assert_eq(cli_parse_object_meta("auto", &m), 0);
	cr_expect_eq(m, FS_META_AUTO);
	cr_assert_eq(cli_parse_object_meta("on", &m), 0);
	cr_expect_eq(m, FS_META_ON);
	cr_assert_eq(cli_parse_object_meta("off", &m), 0);
	cr_expect_eq(m, FS_META_OFF);
	cr_expect_eq(cli_parse_object_meta("Auto", &m), -1);
	cr_expect_eq(cli_parse_object_meta("", &m), -1);
	cr_expect_eq(cli_parse_object_meta(NULL, &m), -1);
	cr_expect_eq(m, FS_META_OFF, "unchanged after a bad value");
}
