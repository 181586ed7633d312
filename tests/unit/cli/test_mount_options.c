/*
 * Tests for the mount option table (cli/mount-options.c) and the value
 * parsers under it (cli/options.c): what a user typing -o gets.  Numbers
 * that are not numbers (NaN, infinities, overflow, signs, garbage, empty)
 * are refused by every option of their kind with one line naming the
 * option; good values land in the right field; every row is consistent;
 * and doc/ckptfs.1 documents exactly the options of the table.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/mount-options.h"
#include "cli/options.h"
#include "../support/doc.h"

/* ---- the value parsers ----------------------------------------------- */

static const char *const not_numbers[] = {
	"", " 5", "5 ", "-1", "-0.5", "nan", "NaN", "inf", "-inf", "infinity",
	"1e400", "10x", "abc", ".", "+", "--1", "5,", "0x", NULL,
};

Test(parse, double_good)
{
	double d;
	cr_assert_eq(cli_parse_double("0", &d), 0);
	cr_expect_eq(d, 0);
	cr_assert_eq(cli_parse_double("2.5", &d), 0);
	cr_expect_eq(d, 2.5);
	cr_assert_eq(cli_parse_double(".5", &d), 0);
	cr_expect_eq(d, 0.5);
	cr_expect_eq(cli_parse_double("1e", &d), -1);
	cr_assert_eq(cli_parse_double("1e3", &d), 0);
	cr_expect_eq(d, 1000);
	cr_assert_eq(cli_parse_double("+7", &d), 0);
	cr_expect_eq(d, 7);
}

Test(parse, double_bad)
{
	for (int i = 0; not_numbers[i]; i++) {
		double d = 42;
		cr_expect_eq(cli_parse_double(not_numbers[i], &d), -1, "'%s'",
			     not_numbers[i]);
		cr_expect_eq(d, 42, "'%s' changed the output", not_numbers[i]);
	}
	cr_expect_eq(cli_parse_double(NULL, &(double){0}), -1);
}

Test(parse, uint_good)
{
	uint64_t n;
	cr_assert_eq(cli_parse_uint("0", 10, &n), 0);
	cr_expect_eq(n, 0);
	cr_assert_eq(cli_parse_uint("18446744073709551615", 10, &n), 0);
	cr_expect_eq(n, UINT64_MAX);
	cr_assert_eq(cli_parse_uint("027", 8, &n), 0);
	cr_expect_eq(n, 027);
}

Test(parse, uint_bad)
{
	static const char *const bad[] = {
		"99999999999999999999", "18446744073709551616", "1.5", "+1",
		"1e3", "1e", NULL,
	};
	uint64_t n = 42;
	for (int i = 0; not_numbers[i]; i++)
		cr_expect_eq(cli_parse_uint(not_numbers[i], 10, &n), -1, "'%s'",
			     not_numbers[i]);
	for (int i = 0; bad[i]; i++)
		cr_expect_eq(cli_parse_uint(bad[i], 10, &n), -1, "'%s'", bad[i]);
	cr_expect_eq(cli_parse_uint("8", 8, &n), -1);
	cr_expect_eq(cli_parse_uint("0x10", 10, &n), -1);
	cr_expect_eq(n, 42);
}

Test(parse, size_good)
{
	static const struct {
		const char *v;
		uint64_t n;
	} good[] = {
		{"0", 0},
		{"4096", 4096},
		{"64K", 64 << 10},
		{"64k", 64 << 10},
		{"512M", 512ull << 20},
		{"512MiB", 512ull << 20},
		{"512MB", 512ull << 20},
		{"10G", 10ull << 30},
		{"1.5T", 3ull << 39},
		{"2P", 2ull << 50},
		{"4E", 4ull << 60},
		{"100B", 100},
		{"1e", 1ull << 60}, /* e is exa, as k is kilo */
	};
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		uint64_t n = 1;
		cr_expect_eq(cli_parse_size(good[i].v, &n), 0, "%s", good[i].v);
		cr_expect_eq(n, good[i].n, "%s: %llu", good[i].v,
			     (unsigned long long)n);
	}
}

Test(parse, size_bad)
{
	static const char *const bad[] = {
		"16E", "99999999999999999999999", "1e30", "10GG", "10 G",
		"10Gi", "G", "10X", "1KiBB", "nanK", "infG", NULL,
	};
	uint64_t n = 42;
	for (int i = 0; not_numbers[i]; i++)
		cr_expect_eq(cli_parse_size(not_numbers[i], &n), -1, "'%s'",
			     not_numbers[i]);
	for (int i = 0; bad[i]; i++)
		cr_expect_eq(cli_parse_size(bad[i], &n), -1, "'%s'", bad[i]);
	cr_expect_eq(n, 42);
}

/* ---- applying items -------------------------------------------------- */

/* Runs mount_opt_apply with stderr captured into err (NUL-terminated). */
static int apply(mount_args *a, const char *k, const char *v, char *err,
		 size_t n)
{
	fflush(stderr);
	int saved = dup(2);
	FILE *t = tmpfile();
	cr_assert(t && saved >= 0);
	dup2(fileno(t), 2);
	int rc = mount_opt_apply(a, k, v);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(t);
	size_t got = fread(err, 1, n - 1, t);
	err[got] = '\0';
	fclose(t);
	return rc;
}

/* One refusal: -1, exactly one line, naming the option. */
static void expect_refused(const char *k, const char *v)
{
	mount_args a;
	mount_args_init(&a);
	char err[1024];
	cr_expect_eq(apply(&a, k, v, err, sizeof err), -1, "%s=%s accepted", k,
		     v ? v : "(none)");
	cr_expect(strstr(err, k) != NULL, "%s=%s: message without the name: %s",
		  k, v ? v : "(none)", err);
	cr_expect(!strncmp(err, "ckptfs: ", 8), "%s", err);
	char *nl = strchr(err, '\n');
	cr_expect(nl && !nl[1], "%s=%s: not one line: %s", k, v, err);
	mount_args_free(&a);
}

static bool ranged(const mount_opt *o)
{
	return o->kind == MO_SECONDS || o->kind == MO_INTEGER ||
	       o->kind == MO_SIZE;
}

Test(apply, every_option_refuses_garbage)
{
	static const char *const for_all[] = {"", "\x01", "nan", "10x", NULL};
	for (size_t i = 0; i < mount_opts_count; i++) {
		const mount_opt *o = &mount_opts[i];
		if (o->kind == MO_FLAG || o->kind == MO_IGNORED) {
			expect_refused(o->name, "1");
			expect_refused(o->name, "");
			continue;
		}
		expect_refused(o->name, NULL);
		/* free text takes anything but nothing */
		for (int j = 0; for_all[j]; j++)
			if (!for_all[j][0] || o->choices ||
			    (o->kind != MO_STRING && o->kind != MO_CUSTOM))
				expect_refused(o->name, for_all[j]);
		for (int j = 0; ranged(o) && not_numbers[j]; j++)
			expect_refused(o->name, not_numbers[j]);
	}
}

/* The first value below and above each range, spelled as a user would. */
Test(apply, every_range_is_enforced)
{
	for (size_t i = 0; i < mount_opts_count; i++) {
		const mount_opt *o = &mount_opts[i];
		if (!ranged(o))
			continue;
		char v[64];
		if (o->flags & MOF_OCTAL)
			snprintf(v, sizeof v, "%o", (unsigned)o->max + 1);
		else if (o->kind == MO_SECONDS)
			snprintf(v, sizeof v, "%.17g", o->max + 0.001);
		else
			snprintf(v, sizeof v, "%llu",
				 (unsigned long long)o->max + 1);
		expect_refused(o->name, v);
		if (o->flags & MOF_ABOVE_MIN) {
			snprintf(v, sizeof v, "%.17g", o->min);
			expect_refused(o->name, v);
		} else if (o->min > 0) {
			snprintf(v, sizeof v, "%.0f", o->min - 1);
			expect_refused(o->name, v);
		}
	}
}

Test(apply, issue_23_values)
{
	expect_refused("lease", "0");
	expect_refused("lease", "-5");
	expect_refused("cache_size", "nan");
	expect_refused("cache_size", "1e400");
	expect_refused("cache_min_free", "nan");
	expect_refused("entry_timeout", "1e400");
	expect_refused("uid", "-1");
	expect_refused("uid", "4294967295"); /* (uid_t)-1: "no owner" */
	expect_refused("umask", "999");
	expect_refused("no_such_option", NULL);
	expect_refused("no_such_option", "1");
}

Test(apply, refusal_names_the_range)
{
	mount_args a;
	mount_args_init(&a);
	char err[512];
	cr_assert_eq(apply(&a, "lease", "0", err, sizeof err), -1);
	cr_expect_str_eq(err, "ckptfs: invalid value for mount option lease=0: "
			      "must be a whole number of seconds from 1 to "
			      "86400\n");
	cr_assert_eq(apply(&a, "part_size", "1K", err, sizeof err), -1);
	cr_expect(strstr(err, "from 64K to 1G"), "%s", err);
	cr_assert_eq(apply(&a, "addressing", "sideways", err, sizeof err), -1);
	cr_expect(strstr(err, "one of auto, path, virtual"), "%s", err);
	mount_args_free(&a);
}

static void ok(mount_args *a, const char *k, const char *v)
{
	char err[512];
	cr_assert_eq(apply(a, k, v, err, sizeof err), 0, "%s=%s: %s", k,
		     v ? v : "", err);
	cr_expect_str_empty(err);
}

Test(apply, good_values_land_in_their_fields)
{
	mount_args a;
	mount_args_init(&a);
	ok(&a, "lease", "86400");
	cr_expect_eq(a.eng.lease_s, 86400);
	ok(&a, "first_byte_timeout", "0.5");
	cr_expect_eq(a.retry.first_byte_ms, 500);
	ok(&a, "retry_timeout", "0");
	cr_expect_eq(a.retry.budget_ms, 0);
	ok(&a, "cache_size", "10G");
	cr_expect_eq(a.cache.cap, 10ull << 30);
	ok(&a, "part_size", "64K");
	cr_expect_eq(a.cache.chunk_size, 65536);
	ok(&a, "upload_part_size", "5G");
	cr_expect_eq(a.eng.part_size, 5ull << 30);
	ok(&a, "low_speed_limit", "64K");
	cr_expect_eq(a.retry.low_speed_bytes, 65536);
	ok(&a, "umask", "027");
	cr_expect_eq(a.fs.umask, 027);
	ok(&a, "uid", "4294967294");
	cr_expect_eq(a.fs.uid, 4294967294u);
	ok(&a, "gid", "0");
	cr_expect_eq(a.fs.gid, 0);
	ok(&a, "entry_timeout", "86400");
	cr_expect_eq(a.fs.entry_timeout, 86400);
	ok(&a, "transient_limit", "0.001");
	cr_expect_eq(a.eng.transient_limit_s, 0.001);
	ok(&a, "conns", "1024");
	cr_expect_eq(a.cache.global_conns, 1024);
	ok(&a, "cache_verify", "off");
	cr_expect(!a.cache.verify);
	ok(&a, "cache_verify", "1");
	cr_expect(a.cache.verify);
	ok(&a, "addressing", "path");
	cr_expect_eq(a.addressing, S3_ADDR_PATH);
	ok(&a, "listing", "flat");
	cr_expect_eq(a.listing, S3_LISTING_FLAT);
	ok(&a, "object_meta", "off");
	cr_expect_eq(a.fs.object_meta, FS_META_OFF);
	mount_args_free(&a);
}

Test(apply, flags_strings_and_odd_ones)
{
	mount_args a;
	mount_args_init(&a);
	ok(&a, "no_passthrough", NULL);
	cr_expect(!a.fs.passthrough);
	ok(&a, "ro", NULL);
	cr_expect(a.read_only);
	ok(&a, "rw", NULL);
	cr_expect(!a.read_only);
	ok(&a, "allow_other", NULL);
	cr_expect(a.allow_other);
	ok(&a, "_netdev", NULL);
	ok(&a, "default_permissions", NULL);
	ok(&a, "endpoint", "http://h:1/x=y");
	cr_expect_str_eq(a.endpoint, "http://h:1/x=y");
	ok(&a, "cache_dir", "/var/tmp/c");
	cr_expect_str_eq(a.cache_dir, "/var/tmp/c");
	ok(&a, "temp_patterns", "*.tmp:x_*");
	cr_expect_str_eq(a.eng.temp_patterns, "*.tmp,x_*");
	ok(&a, "temp_patterns", "none");
	cr_expect_str_eq(a.eng.temp_patterns, "");
	ok(&a, "complete", "*.distcp/.metadata:*.ckpt/done");
	cr_expect_str_eq(a.fs.complete, "*.distcp/.metadata:*.ckpt/done");
	ok(&a, "log", "syslog");
	cr_expect(a.use_syslog && a.log_set);
	ok(&a, "metrics", "127.0.0.1:0");
	cr_expect_str_eq(a.metrics, "127.0.0.1:0");
	mount_args_free(&a);
}

/* ---- the table itself ------------------------------------------------ */

Test(table, rows_are_consistent)
{
	for (size_t i = 0; i < mount_opts_count; i++) {
		const mount_opt *o = &mount_opts[i];
		cr_expect(o->name && o->name[0] && o->help && o->help[0]);
		cr_expect_eq(mount_opt_find(o->name), o, "%s twice", o->name);
		bool takes_value = o->kind != MO_FLAG && o->kind != MO_IGNORED;
		cr_expect_eq(takes_value, o->arg != NULL, "%s", o->name);
		cr_expect_eq(o->kind == MO_CUSTOM, o->set != NULL, "%s", o->name);
		if (ranged(o))
			cr_expect(o->min <= o->max, "%s", o->name);
		if (o->kind == MO_ENUM)
			cr_expect(o->choices && o->choices[0].name, "%s",
				  o->name);
	}
}

/* A default shown as a value must be one the option takes. */
Test(table, shown_defaults_are_accepted)
{
	for (size_t i = 0; i < mount_opts_count; i++) {
		const mount_opt *o = &mount_opts[i];
		if (!o->def || (o->kind != MO_ENUM && !ranged(o) &&
				o->kind != MO_CUSTOM))
			continue;
		if (!strcmp(o->name, "metrics") || !strcmp(o->name, "log") ||
		    !strcmp(o->def, "the mounting user") ||
		    !strcmp(o->def, "the mounting group"))
			continue; /* words, not values */
		mount_args a;
		mount_args_init(&a);
		ok(&a, o->name, o->def);
		mount_args_free(&a);
	}
}

Test(table, help_lists_every_option)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	mount_opts_help(f);
	fclose(f);
	for (size_t i = 0; i < mount_opts_count; i++) {
		const mount_opt *o = &mount_opts[i];
		char want[64];
		snprintf(want, sizeof want, " %s%s", o->name, o->arg ? "=" : "");
		cr_expect(strstr(text, want), "--help lacks '%s'", want);
	}
	free(text);
}

/* ---- doc/ckptfs.1 ---------------------------------------------------- */

/* The words of a .TP header that look like option names ("lease=",
 * "ro"), one per call into out; 0 at the end of the line. */
static int next_name(const char **p, char *out, size_t n)
{
	while (**p && **p != '\n') {
		while (**p == ' ')
			(*p)++;
		const char *w = *p;
		bool quoted = *w == '"';
		if (quoted)
			w++;
		const char *e = w;
		while (*e && *e != '\n' && (quoted ? *e != '"' : *e != ' '))
			e++;
		*p = e + (quoted && *e == '"');
		size_t len = (size_t)(e - w);
		bool name = len > 0 && len < n && w[0] != '.';
		for (size_t i = 0; name && i < len; i++)
			name = (w[i] >= 'a' && w[i] <= 'z') || w[i] == '_' ||
			       (w[i] == '=' && i == len - 1);
		if (name) {
			memcpy(out, w, len);
			out[len - (w[len - 1] == '=')] = '\0';
			return 1;
		}
	}
	return 0;
}

Test(man, documents_exactly_the_table)
{
	char *text = read_doc("ckptfs.1");
	char *sec = strstr(text, "\n.SH MOUNT OPTIONS\n");
	cr_assert(sec, "no MOUNT OPTIONS section");
	char *end = strstr(sec + 1, "\n.SH ");
	if (end)
		*end = '\0';
	bool seen[256] = {false};
	cr_assert(mount_opts_count < 256);
	for (const char *p = strstr(sec, "\n.TP\n"); p;
	     p = strstr(p + 1, "\n.TP\n")) {
		const char *h = p + 5; /* the header line */
		char name[64];
		while (next_name(&h, name, sizeof name)) {
			const mount_opt *o = mount_opt_find(name);
			cr_expect(o, "ckptfs.1 documents -o %s, not in the table",
				  name);
			if (o)
				seen[o - mount_opts] = true;
		}
	}
	for (size_t i = 0; i < mount_opts_count; i++)
		cr_expect(seen[i], "-o %s is not in ckptfs.1's MOUNT OPTIONS",
			  mount_opts[i].name);
	free(text);
}
