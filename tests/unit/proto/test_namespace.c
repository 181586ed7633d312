/*
 * Unit tests for ns (src/proto/namespace.c): every rule of DESIGN.md
 * "Namespace" as listing pages built by hand (s3xml is not called).
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/namespace.h"

/* --- helpers ---------------------------------------------------------- */

#define MAX_REPORTS 64

typedef struct reports {
	size_t n, invalid, shadowed;
	char key[MAX_REPORTS][600];
	size_t len[MAX_REPORTS];
	ns_reason why[MAX_REPORTS];
} reports;

static void
record(void *arg, const char *key, size_t key_len, ns_reason why)
{
	reports *r = arg;

	cr_assert_not_null(key);
	if (why == NS_SKIP_INVALID_NAME)
		r->invalid++;
	else if (why == NS_SKIP_SHADOWED_BY_DIR)
		r->shadowed++;
	if (r->n < MAX_REPORTS && key_len < sizeof(r->key[0])) {
		memcpy(r->key[r->n], key, key_len);
		r->len[r->n] = key_len;
		r->why[r->n] = why;
	}
	r->n++;
}

/* Whether the reports hold key (key_len bytes) with reason why. */
static bool
reported(const reports *r, const char *key, size_t key_len, ns_reason why)
{
	for (size_t i = 0; i < r->n && i < MAX_REPORTS; i++)
		if (r->why[i] == why && r->len[i] == key_len &&
		    memcmp(r->key[i], key, key_len) == 0)
			return true;
	return false;
}

static s3_object
obj_n(const char *key, size_t key_len, uint64_t size, time_t sec)
{
	return (s3_object){
		.key = (char *)key,
		.key_len = key_len,
		.size = size,
		.etag = (char *)"\"0123456789abcdef\"",
		.mtime = {sec, 0},
	};
}

static s3_object
obj(const char *key, uint64_t size, time_t sec)
{
	return obj_n(key, strlen(key), size, sec);
}

/* A page of objects only, or of prefixes only, or both.  Prefix lengths are
 * computed with strlen unless lens is given. */
static s3_list_result
page(s3_object *objs, size_t n_objs, const char **pfx, size_t *lens,
     size_t n_pfx)
{
	return (s3_list_result){
		.objects = objs,
		.n_objects = n_objs,
		.prefixes = (char **)pfx,
		.prefix_lens = lens,
		.n_prefixes = n_pfx,
	};
}

static void
add_objs(ns_dir *d, const char *dir, s3_object *objs, size_t n)
{
	s3_list_result p = page(objs, n, NULL, NULL, 0);
	cr_assert_eq(ns_dir_add_page(d, dir, &p), 0);
}

static void
add_pfxs(ns_dir *d, const char *dir, const char **pfx, size_t n)
{
	s3_list_result p = page(NULL, 0, pfx, NULL, n);
	cr_assert_eq(ns_dir_add_page(d, dir, &p), 0);
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void
assert_sorted_unique(const ns_dir *d)
{
	for (size_t i = 1; i < d->n; i++)
		cr_assert_lt(strcmp(d->v[i - 1].name, d->v[i].name), 0,
			     "not sorted at %zu: '%s' '%s'", i,
			     d->v[i - 1].name, d->v[i].name);
}

static const ns_entry *
must_find(const ns_dir *d, const char *name, bool is_dir)
{
	const ns_entry *e = ns_dir_find(d, name);
	cr_assert_not_null(e, "'%s' missing", name);
	cr_assert_str_eq(e->name, name);
	cr_assert_eq(e->is_dir, is_dir, "'%s': is_dir %d", name, e->is_dir);
	if (is_dir)
		cr_assert_null(e->etag);
	return e;
}

/* --- names ------------------------------------------------------------ */

Test(ns_name, valid)
{
	char b[257];

	cr_assert(ns_name_valid("a", 1));
	cr_assert(ns_name_valid("...", 3));
	cr_assert(ns_name_valid(".a", 2));
	cr_assert(ns_name_valid("a b+c%20#?", 10));
	cr_assert_not(ns_name_valid("", 0));
	cr_assert_not(ns_name_valid(".", 1));
	cr_assert_not(ns_name_valid("..", 2));
	cr_assert_not(ns_name_valid("a/b", 3));
	cr_assert_not(ns_name_valid("a\0b", 3));
	memset(b, 'x', sizeof(b));
	cr_assert(ns_name_valid(b, 255));
	cr_assert_not(ns_name_valid(b, 256));
}

Test(ns_name, hidden)
{
	cr_assert(ns_name_hidden(".ckptfs", 7));
	cr_assert(ns_name_hidden(".ckptfs-pending", 15));
	cr_assert(ns_name_hidden(".ckptfsX", 8));
	cr_assert_not(ns_name_hidden(".ckptf", 6));
	cr_assert_not(ns_name_hidden(".ckptfs", 6)); /* length counts */
	cr_assert_not(ns_name_hidden("ckptfs", 6));
	cr_assert_not(ns_name_hidden(".CKPTFS", 7));
	cr_assert_not(ns_name_hidden("x.ckptfs", 8));
}

/* --- basic listing ---------------------------------------------------- */

Test(ns_dir, empty)
{
	ns_dir d;

	ns_dir_init(&d, NULL, NULL);
	ns_dir_finish(&d);
	cr_assert_eq(d.n, 0);
	cr_assert_null(ns_dir_find(&d, "a"));
	cr_assert_eq(d.newest.tv_sec, 0);
	ns_dir_free(&d);
	ns_dir_free(&d); /* idempotent */
}

/* An empty page (an empty directory's listing) adds nothing and is no
 * error, first page or not. */
Test(ns_dir, empty_page_is_no_error)
{
	ns_dir d;
	s3_list_result page = {0};

	ns_dir_init(&d, NULL, NULL);
	cr_assert_eq(ns_dir_add_page(&d, "p/", &page), 0);
	cr_assert_eq(ns_dir_add_page(&d, "p/", &page), 0);
	ns_dir_finish(&d);
	cr_assert_eq(d.n, 0);
	ns_dir_free(&d);
}

Test(ns_dir, files_and_prefixes_keep_metadata)
{
	reports r = {0};
	ns_dir d;
	s3_object o[] = {obj("ck/b.bin", 42, 200), obj("ck/a.json", 7, 100)};
	const char *p[] = {"ck/step-1/", "ck/step-0/"};
	s3_list_result pg = page(o, N(o), p, NULL, N(p));

	o[1].mtime.tv_nsec = 5;
	ns_dir_init(&d, record, &r);
	cr_assert_eq(ns_dir_add_page(&d, "ck/", &pg), 0);
	ns_dir_finish(&d);
	cr_assert_eq(d.n, 4);
	assert_sorted_unique(&d);
	cr_assert_str_eq(d.v[0].name, "a.json");
	cr_assert_str_eq(d.v[1].name, "b.bin");
	cr_assert_str_eq(d.v[2].name, "step-0");
	cr_assert_str_eq(d.v[3].name, "step-1");

	const ns_entry *a = must_find(&d, "a.json", false);
	cr_assert_eq(a->size, 7);
	cr_assert_str_eq(a->etag, "\"0123456789abcdef\"");
	cr_assert_neq(a->etag, o[1].etag, "etag must be a copy");
	cr_assert_eq(a->mtime.tv_sec, 100);
	cr_assert_eq(a->mtime.tv_nsec, 5);
	cr_assert_eq(must_find(&d, "b.bin", false)->size, 42);
	const ns_entry *s = must_find(&d, "step-0", true);
	cr_assert_eq(s->mtime.tv_sec, 0);
	cr_assert_eq(s->size, 0);
	cr_assert_eq(d.newest.tv_sec, 200);
	cr_assert_eq(r.n, 0);
	ns_dir_free(&d);
}

Test(ns_dir, root_prefix)
{
	ns_dir d;
	s3_object o[] = {obj("top", 1, 1)};
	const char *p[] = {"models/"};
	s3_list_result pg = page(o, N(o), p, NULL, N(p));

	ns_dir_init(&d, NULL, NULL);
	cr_assert_eq(ns_dir_add_page(&d, "", &pg), 0);
	ns_dir_finish(&d);
	cr_assert_eq(d.n, 2);
	must_find(&d, "top", false);
	must_find(&d, "models", true);
	ns_dir_free(&d);
}

Test(ns_dir, names_are_owned_copies)
{
	ns_dir d;
	char key[] = "p/name";
	char pfx[] = "p/sub/";
	s3_object o[] = {obj(key, 1, 1)};
	const char *p[] = {pfx};

	ns_dir_init(&d, NULL, NULL);
	add_objs(&d, "p/", o, N(o));
	add_pfxs(&d, "p/", p, N(p));
	memset(key, 'z', sizeof(key) - 1);
	memset(pfx, 'z', sizeof(pfx) - 1);
	ns_dir_finish(&d);
	must_find(&d, "name", false);
	must_find(&d, "sub", true);
	ns_dir_free(&d);
}

Test(ns_dir, missing_etag_and_null_report_fn)
{
	ns_dir d;
	s3_object o[] = {obj("p/x", 1, 1), obj("p/.", 1, 1)};

	o[0].etag = NULL;
	ns_dir_init(&d, NULL, NULL);
	add_objs(&d, "p/", o, N(o)); /* "." is reported to nobody */
	ns_dir_finish(&d);
	cr_assert_eq(d.n, 1);
	cr_assert_null(must_find(&d, "x", false)->etag);
	ns_dir_free(&d);
}

/* --- markers ---------------------------------------------------------- */

Test(ns_dir, own_marker_is_not_an_entry)
{
	reports r = {0};
	ns_dir d;
	s3_object o[] = {obj("ck/", 0, 900), obj("ck/f", 3, 100)};

	ns_dir_init(&d, record, &r);
	add_objs(&d, "ck/", o, N(o));
	ns_dir_finish(&d);
	cr_assert_eq(d.n, 1);
	must_find(&d, "f", false);
	cr_assert_eq(d.newest.tv_sec, 900, "marker counts toward newest");
	cr_assert_eq(r.n, 0);
	ns_dir_free(&d);
}

Test(ns_dir, child_marker_object_is_a_directory)
{
	reports r = {0};
	ns_dir d;
	s3_object o[] = {obj("ck/empty/", 0, 300)};
	s3_object nsec = obj("ck/z/", 0, 300);

	nsec.mtime.tv_nsec = 7;
	ns_dir_init(&d, record, &r);
	add_objs(&d, "ck/", o, N(o));
	add_objs(&d, "ck/", &nsec, 1);
	ns_dir_finish(&d);
	cr_assert_eq(d.n, 2);
	const ns_entry *e = must_find(&d, "empty", true);
	cr_assert_eq(e->mtime.tv_sec, 300);
	cr_assert_eq(e->size, 0);
	cr_assert_eq(must_find(&d, "z", true)->mtime.tv_nsec, 7);
	cr_assert_eq(d.newest.tv_sec, 300);
	cr_assert_eq(d.newest.tv_nsec, 7);
	cr_assert_eq(r.n, 0);
	ns_dir_free(&d);
}

Test(ns_dir, marker_and_prefix_merge_keep_marker_mtime)
{
	reports r = {0};
	ns_dir d;
	s3_object o[] = {obj("ck/s/", 0, 500)};
	const char *p[] = {"ck/s/"};

	/* Both orders: prefix page first, then marker page, and reverse. */
	for (int order = 0; order < 2; order++) {
		ns_dir_init(&d, record, &r);
		if (order == 0) {
			add_pfxs(&d, "ck/", p, N(p));
			add_objs(&d, "ck/", o, N(o));
		} else {
			add_objs(&d, "ck/", o, N(o));
			add_pfxs(&d, "ck/", p, N(p));
		}
		ns_dir_finish(&d);
		cr_assert_eq(d.n, 1);
		cr_assert_eq(must_find(&d, "s", true)->mtime.tv_sec, 500);
		ns_dir_free(&d);
	}
	cr_assert_eq(r.n, 0);
}

/* --- invalid names ---------------------------------------------------- */

Test(ns_dir, deep_object_is_not_a_child)
{
	reports r = {0};
	ns_dir d;
	s3_object o[] = {obj("ck/a/b", 1, 1), obj("ck/a//", 0, 1),
			 obj("ck/ok", 1, 1)};

	ns_dir_init(&d, record, &r);
	add_objs(&d, "ck/", o, N(o));
	ns_dir_finish(&d);
	cr_assert_eq(d.n, 1);
	must_find(&d, "ok", false);
	cr_assert_eq(r.n, 2);
	cr_assert_eq(r.invalid, 2);
	cr_assert(reported(&r, "ck/a/b", 6, NS_SKIP_INVALID_NAME));
	cr_assert(reported(&r, "ck/a//", 6, NS_SKIP_INVALID_NAME));
	ns_dir_free(&d);
}

Test(ns_dir, double_slash)
{
	reports r = {0};
	ns_dir d;
	/* Listing "a/" with delimiter over key "a//b" yields prefix "a//";
	 * a key "a//" is an object with an empty name. */
	const char *p[] = {"a//"};
	s3_object o[] = {obj("a//", 0, 1)};

	ns_dir_init(&d, record, &r);
	add_pfxs(&d, "a/", p, N(p));
	add_objs(&d, "a/", o, N(o));
	ns_dir_finish(&d);
	cr_assert_eq(d.n, 0);
	cr_assert_eq(r.n, 2);
	cr_assert_eq(r.invalid, 2);
	cr_assert(reported(&r, "a//", 3, NS_SKIP_INVALID_NAME));
	ns_dir_free(&d);
}

Test(ns_dir, dot_and_dotdot)
{
	reports r = {0};
	ns_dir d;
	s3_object o[] = {obj("p/.", 1, 1), obj("p/..", 1, 1), obj("p/./", 0, 1),
			 obj("p/...", 1, 1)};
	const char *p[] = {"p/../", "p/./", "p/.../"};

	ns_dir_init(&d, record, &r);
	add_objs(&d, "p/", o, N(o));
	add_pfxs(&d, "p/", p, N(p));
	ns_dir_finish(&d);
	cr_assert_eq(r.n, 6);
	cr_assert_eq(r.invalid, 5);
	cr_assert(reported(&r, "p/.", 3, NS_SKIP_INVALID_NAME));
	cr_assert(reported(&r, "p/..", 4, NS_SKIP_INVALID_NAME));
	cr_assert(reported(&r, "p/./", 4, NS_SKIP_INVALID_NAME));
	cr_assert(reported(&r, "p/../", 5, NS_SKIP_INVALID_NAME));
	/* "..." is an ordinary name: a file shadowed by a directory. */
	cr_assert_eq(r.shadowed, 1);
	cr_assert(reported(&r, "p/...", 5, NS_SKIP_SHADOWED_BY_DIR));
	cr_assert_eq(d.n, 1);
	must_find(&d, "...", true);
	cr_assert_null(ns_dir_find(&d, "."));
	cr_assert_null(ns_dir_find(&d, ".."));
	ns_dir_free(&d);
}

Test(ns_dir, name_length_255_ok_256_rejected)
{
	reports r = {0};
	ns_dir d;
	char k255[3 + 255 + 1], k256[3 + 256 + 1];
	char p255[3 + 255 + 2], p256[3 + 256 + 2];

	memcpy(k255, "pp/", 3);
	memset(k255 + 3, 'f', 255);
	k255[3 + 255] = '\0';
	memcpy(k256, "pp/", 3);
	memset(k256 + 3, 'f', 256);
	k256[3 + 256] = '\0';
	snprintf(p255, sizeof(p255), "pp/%.255s/", k256 + 3);
	memset(p255 + 3, 'd', 255);
	snprintf(p256, sizeof(p256), "pp/%.256s/", k256 + 3);
	memset(p256 + 3, 'd', 256);
	s3_object o[] = {obj(k255, 1, 1), obj(k256, 1, 1)};
	const char *p[] = {p255, p256};

	ns_dir_init(&d, record, &r);
	add_objs(&d, "pp/", o, N(o));
	add_pfxs(&d, "pp/", p, N(p));
	ns_dir_finish(&d);
	cr_assert_eq(d.n, 2);
	cr_assert_eq(strlen(must_find(&d, k255 + 3, false)->name), 255);
	p255[3 + 255] = '\0';
	cr_assert_eq(strlen(must_find(&d, p255 + 3, true)->name), 255);
	cr_assert_eq(r.n, 2);
	cr_assert(reported(&r, k256, strlen(k256), NS_SKIP_INVALID_NAME));
	cr_assert(reported(&r, p256, strlen(p256), NS_SKIP_INVALID_NAME));
	ns_dir_free(&d);
}

Test(ns_dir, nul_in_key)
{
	reports r = {0};
	ns_dir d;
	/* "p/a%00b" and prefix "p/c%00d/" after URL decoding. */
	static const char key[] = "p/a\0b";
	static const char pfx[] = "p/c\0d/";
	s3_object o[] = {obj_n(key, 5, 1, 1), obj_n("p/a", 3, 2, 1)};
	const char *p[] = {pfx};
	size_t lens[] = {6};
	s3_list_result pg = page(o, N(o), p, lens, N(p));

	ns_dir_init(&d, record, &r);
	cr_assert_eq(ns_dir_add_page(&d, "p/", &pg), 0);
	ns_dir_finish(&d);
	cr_assert_eq(d.n, 1);
	cr_assert_eq(must_find(&d, "a", false)->size, 2);
	cr_assert_eq(r.n, 2);
	cr_assert(reported(&r, key, 5, NS_SKIP_INVALID_NAME));
	cr_assert(reported(&r, pfx, 6, NS_SKIP_INVALID_NAME));
	cr_assert_null(ns_dir_find(&d, "c"));
	ns_dir_free(&d);
}

Test(ns_dir, odd_prefixes)
{
	reports r = {0};
	ns_dir d;
	/* The directory itself, a foreign prefix, one without the delimiter,
	 * one with an inner '/'. */
	const char *p[] = {"ck/", "other/x/", "ck/nodelim", "ck/a/b/"};

	ns_dir_init(&d, record, &r);
	add_pfxs(&d, "ck/", p, N(p));
	ns_dir_finish(&d);
	cr_assert_eq(d.n, 0);
	cr_assert_eq(r.n, 2);
	cr_assert(reported(&r, "ck/nodelim", 10, NS_SKIP_INVALID_NAME));
	cr_assert(reported(&r, "ck/a/b/", 7, NS_SKIP_INVALID_NAME));
	ns_dir_free(&d);
}

Test(ns_dir, foreign_keys_ignored)
{
	reports r = {0};
	ns_dir d;
	s3_object o[] = {obj("other/f", 1, 999), obj("c", 1, 999),
			 obj("ckx/f", 1, 999), obj("ck/f", 1, 5)};

	ns_dir_init(&d, record, &r);
	add_objs(&d, "ck/", o, N(o));
	ns_dir_finish(&d);
	cr_assert_eq(d.n, 1);
	must_find(&d, "f", false);
	cr_assert_eq(r.n, 0);
	cr_assert_eq(d.newest.tv_sec, 5, "foreign keys do not count");
	ns_dir_free(&d);
}

/* --- special characters ----------------------------------------------- */

Test(ns_dir, special_characters)
{
	reports r = {0};
	ns_dir d;
	const char *names[] = {
		"with space", " lead", "trail ", "caf\xc3\xa9", "\xe6\x97\xa5\xe6\x9c\xac",
		"\xf0\x9f\x98\x80", "a+b", "100%", "%2F", "x#y", "q?a=1", "~$&'()*,;=@",
		"\\back", "tab\there", "\x7f\xff",
	};
	s3_object o[N(names)];
	char keys[N(names)][64];

	for (size_t i = 0; i < N(names); i++) {
		snprintf(keys[i], sizeof(keys[i]), "dir with space/%s", names[i]);
		o[i] = obj(keys[i], i, 1);
	}
	const char *p[] = {"dir with space/sub +%#?/"};
	s3_list_result pg = page(o, N(o), p, NULL, N(p));

	ns_dir_init(&d, record, &r);
	cr_assert_eq(ns_dir_add_page(&d, "dir with space/", &pg), 0);
	ns_dir_finish(&d);
	cr_assert_eq(r.n, 0);
	cr_assert_eq(d.n, N(names) + 1);
	assert_sorted_unique(&d);
	for (size_t i = 0; i < N(names); i++)
		cr_assert_eq(must_find(&d, names[i], false)->size, i);
	must_find(&d, "sub +%#?", true);
	ns_dir_free(&d);
}

/* --- hidden names ----------------------------------------------------- */

Test(ns_dir, hidden_dropped_silently)
{
	reports r = {0};
	ns_dir d;
	s3_object o[] = {obj("ck/.ckptfs-pending", 1, 1), obj("ck/.ckptfsX", 1, 1),
			 obj("ck/.ckptfs", 1, 1), obj("ck/.ckptfs-m/", 0, 1),
			 obj("ck/.ckpt", 1, 1), obj("ck/.CKPTFS", 1, 1)};
	const char *p[] = {"ck/.ckptfs/", "ck/.ckptfs-txn/"};

	ns_dir_init(&d, record, &r);
	add_objs(&d, "ck/", o, N(o));
	add_pfxs(&d, "ck/", p, N(p));
	ns_dir_finish(&d);
	cr_assert_eq(r.n, 0, "a hidden file under a hidden dir is not reported");
	cr_assert_eq(d.n, 2);
	must_find(&d, ".ckpt", false);
	must_find(&d, ".CKPTFS", false);
	cr_assert_null(ns_dir_find(&d, ".ckptfs"));
	cr_assert_null(ns_dir_find(&d, ".ckptfs-pending"));
	cr_assert_null(ns_dir_find(&d, ".ckptfsX"));
	ns_dir_free(&d);
}

/* --- conflicts and duplicates ----------------------------------------- */

static void
check_shadowed(int order)
{
	reports r = {0};
	ns_dir d;
	s3_object o[] = {obj("ck/x", 10, 1)};
	const char *p[] = {"ck/x/"};

	ns_dir_init(&d, record, &r);
	if (order == 0) {
		add_objs(&d, "ck/", o, N(o));
		add_pfxs(&d, "ck/", p, N(p));
	} else {
		add_pfxs(&d, "ck/", p, N(p));
		add_objs(&d, "ck/", o, N(o));
	}
	ns_dir_finish(&d);
	cr_assert_eq(d.n, 1);
	const ns_entry *e = must_find(&d, "x", true);
	cr_assert_eq(e->size, 0);
	cr_assert_eq(r.n, 1);
	cr_assert_eq(r.shadowed, 1);
	cr_assert(reported(&r, "ck/x", 4, NS_SKIP_SHADOWED_BY_DIR));
	cr_assert_eq(d.newest.tv_sec, 1, "a shadowed object still counts");
	ns_dir_free(&d);
}

Test(ns_dir, file_then_dir_pages) { check_shadowed(0); }
Test(ns_dir, dir_then_file_pages) { check_shadowed(1); }

Test(ns_dir, file_and_dir_same_page)
{
	reports r = {0};
	ns_dir d;
	s3_object o[] = {obj("ck/m", 10, 1), obj("ck/m/", 0, 4)};
	const char *p[] = {"ck/m/"};
	s3_list_result pg = page(o, N(o), p, NULL, N(p));

	ns_dir_init(&d, record, &r);
	cr_assert_eq(ns_dir_add_page(&d, "ck/", &pg), 0);
	ns_dir_finish(&d);
	cr_assert_eq(d.n, 1);
	cr_assert_eq(must_find(&d, "m", true)->mtime.tv_sec, 4);
	cr_assert_eq(r.n, 1);
	cr_assert(reported(&r, "ck/m", 4, NS_SKIP_SHADOWED_BY_DIR));
	ns_dir_free(&d);
}

Test(ns_dir, file_shadowed_by_marker_only)
{
	reports r = {0};
	ns_dir d;
	s3_object o1[] = {obj("ck/m/", 0, 4)};
	s3_object o2[] = {obj("ck/m", 10, 1)};

	ns_dir_init(&d, record, &r);
	add_objs(&d, "ck/", o1, N(o1));
	add_objs(&d, "ck/", o2, N(o2));
	ns_dir_finish(&d);
	cr_assert_eq(d.n, 1);
	must_find(&d, "m", true);
	cr_assert_eq(r.shadowed, 1);
	cr_assert_eq(r.n, 1);
	ns_dir_free(&d);
}

Test(ns_dir, duplicate_dirs_across_pages)
{
	reports r = {0};
	ns_dir d;
	const char *p1[] = {"ck/a/", "ck/b/"};
	const char *p2[] = {"ck/b/", "ck/a/", "ck/b/"};

	ns_dir_init(&d, record, &r);
	add_pfxs(&d, "ck/", p1, N(p1));
	add_pfxs(&d, "ck/", p2, N(p2));
	ns_dir_finish(&d);
	cr_assert_eq(d.n, 2);
	must_find(&d, "a", true);
	must_find(&d, "b", true);
	cr_assert_eq(r.n, 0);
	ns_dir_free(&d);
}

Test(ns_dir, duplicate_files_keep_first)
{
	reports r = {0};
	ns_dir d;
	s3_object o1[] = {obj("ck/f", 111, 1), obj("ck/g", 1, 1)};
	s3_object o2[] = {obj("ck/f", 222, 2), obj("ck/f", 333, 3)};

	ns_dir_init(&d, record, &r);
	add_objs(&d, "ck/", o1, N(o1));
	add_objs(&d, "ck/", o2, N(o2));
	ns_dir_finish(&d);
	cr_assert_eq(d.n, 2);
	const ns_entry *f = must_find(&d, "f", false);
	cr_assert_eq(f->size, 111);
	cr_assert_eq(f->mtime.tv_sec, 1);
	cr_assert_eq(r.n, 0);
	ns_dir_free(&d);
}

Test(ns_dir, two_files_one_dir_same_name)
{
	reports r = {0};
	ns_dir d;
	s3_object o[] = {obj("ck/f", 1, 1), obj("ck/f", 1, 1)};
	const char *p[] = {"ck/f/"};
	s3_list_result pg = page(o, N(o), p, NULL, N(p));

	ns_dir_init(&d, record, &r);
	cr_assert_eq(ns_dir_add_page(&d, "ck/", &pg), 0);
	ns_dir_finish(&d);
	cr_assert_eq(d.n, 1);
	must_find(&d, "f", true);
	cr_assert_eq(r.shadowed, 2, "each listed copy is reported");
	ns_dir_free(&d);
}

/* --- order ------------------------------------------------------------ */

Test(ns_dir, unsorted_input_sorted_bytewise)
{
	reports r = {0};
	ns_dir d;
	s3_object o[] = {obj("p/\xc3\xa9", 1, 1), obj("p/z", 1, 1),
			 obj("p/B", 1, 1), obj("p/a", 1, 1), obj("p/ab", 1, 1),
			 obj("p/A", 1, 1), obj("p/-", 1, 1), obj("p/_", 1, 1)};
	const char *p[] = {"p/zz/", "p/0/", "p/a-/"};
	const char *want[] = {"-", "0", "A", "B", "_", "a", "a-", "ab", "z",
			      "zz", "\xc3\xa9"};
	s3_list_result pg = page(o, N(o), p, NULL, N(p));

	ns_dir_init(&d, record, &r);
	cr_assert_eq(ns_dir_add_page(&d, "p/", &pg), 0);
	ns_dir_finish(&d);
	cr_assert_eq(d.n, N(want));
	for (size_t i = 0; i < N(want); i++)
		cr_assert_str_eq(d.v[i].name, want[i]);
	cr_assert_null(ns_dir_find(&d, ""));
	cr_assert_null(ns_dir_find(&d, " "));
	cr_assert_null(ns_dir_find(&d, "aa"));
	cr_assert_null(ns_dir_find(&d, "\xff"));
	ns_dir_free(&d);
}

Test(ns_dir, newest_across_pages)
{
	ns_dir d;
	s3_object o1[] = {obj("ck/a", 1, 50), obj("ck/.ckptfs-x", 1, 70)};
	s3_object o2[] = {obj("ck/b", 1, 60), obj("ck/c/d", 1, 65)};

	o1[1].mtime.tv_nsec = 3;
	ns_dir_init(&d, NULL, NULL);
	add_objs(&d, "ck/", o1, N(o1));
	add_objs(&d, "ck/", o2, N(o2));
	ns_dir_finish(&d);
	cr_assert_eq(d.newest.tv_sec, 70);
	cr_assert_eq(d.newest.tv_nsec, 3);
	ns_dir_free(&d);
}

/* --- scale ------------------------------------------------------------ */

#define BIG 20000
#define BIG_PAGE 1000

/* 20 000 names spread over 20 pages in a scrambled order, a third of them
 * common prefixes, plus every 1000th name also listed as a file in another
 * page (shadowed) and every 500th file listed twice. */
Test(ns_dir, twenty_thousand_entries, .timeout = 30)
{
	reports r = {0};
	ns_dir d;
	static char keys[BIG][32];
	static s3_object objs[BIG_PAGE];
	static const char *pfx[BIG_PAGE];
	size_t shadow = 0, dups = 0;

	ns_dir_init(&d, record, &r);
	for (size_t i = 0; i < BIG; i++) {
		size_t k = (i * 7919) % BIG; /* 7919 is prime: a permutation */
		snprintf(keys[i], sizeof(keys[i]), "run/n%05zu%s", k,
			 k % 3 == 0 ? "/" : "");
	}
	for (size_t base = 0; base < BIG; base += BIG_PAGE) {
		size_t no = 0, np = 0;
		for (size_t i = base; i < base + BIG_PAGE; i++) {
			if (keys[i][strlen(keys[i]) - 1] == '/')
				pfx[np++] = keys[i];
			else
				objs[no++] = obj(keys[i], i + 2, (time_t)i);
		}
		s3_list_result pg = page(objs, no, pfx, NULL, np);
		cr_assert_eq(ns_dir_add_page(&d, "run/", &pg), 0);
	}
	/* Extra page: files under directory names, and repeated files. */
	static char extra[BIG_PAGE][32];
	size_t ne = 0;
	for (size_t k = 0; k < BIG && ne < BIG_PAGE; k += 500) {
		snprintf(extra[ne], sizeof(extra[ne]), "run/n%05zu", k);
		objs[ne] = obj(extra[ne], 1, 1);
		if (k % 3 == 0)
			shadow++;
		else
			dups++;
		ne++;
	}
	s3_list_result pg = page(objs, ne, NULL, NULL, 0);
	cr_assert_eq(ns_dir_add_page(&d, "run/", &pg), 0);
	cr_assert_eq(d.n, BIG + ne);
	ns_dir_finish(&d);

	cr_assert_eq(d.n, BIG);
	assert_sorted_unique(&d);
	cr_assert_eq(r.n, shadow);
	cr_assert_eq(r.shadowed, shadow);
	cr_assert_gt(dups, 0);
	for (size_t k = 0; k < BIG; k++) {
		char name[16];
		snprintf(name, sizeof(name), "n%05zu", k);
		const ns_entry *e = ns_dir_find(&d, name);
		cr_assert_not_null(e, "%s missing", name);
		cr_assert_eq(e->is_dir, k % 3 == 0);
		if (!e->is_dir)
			cr_assert_neq(e->size, 1, "%s: duplicate replaced first", name);
	}
	ns_dir_free(&d);
}

/* --- failure paths ---------------------------------------------------- */

Test(ns_dir, oversized_page_fails_cleanly)
{
	ns_dir d;
	s3_object o[] = {obj("ck/a", 1, 1)};
	s3_list_result huge = page(o, SIZE_MAX, NULL, NULL, 0);
	s3_list_result huge2 = page(o, 2, NULL, NULL, SIZE_MAX);
	s3_list_result huge3 = page(o, SIZE_MAX / sizeof(ns_entry), NULL, NULL, 0);

	ns_dir_init(&d, NULL, NULL);
	add_objs(&d, "ck/", o, N(o));
	/* Counts beyond what can be allocated are refused before any
	 * allocation or any read of the arrays. */
	cr_assert_eq(ns_dir_add_page(&d, "ck/", &huge), -1);
	cr_assert_eq(ns_dir_add_page(&d, "ck/", &huge2), -1);
	cr_assert_eq(ns_dir_add_page(&d, "ck/", &huge3), -1);
	/* The directory is still usable and freeable. */
	s3_object o2[] = {obj("ck/b", 1, 1)};
	add_objs(&d, "ck/", o2, N(o2));
	ns_dir_finish(&d);
	cr_assert_eq(d.n, 2);
	must_find(&d, "a", false);
	must_find(&d, "b", false);
	ns_dir_free(&d);
}

/* seen counts every key and prefix of the pages, hidden names and the
 * directory's own marker too: a directory is gone only when it is 0. */
Test(ns_dir, seen_counts_hidden_names_and_the_marker)
{
	ns_dir d;
	ns_dir_init(&d, NULL, NULL);
	cr_assert_eq(d.seen, 0);
	cr_assert_not(d.vanished);
	s3_object o[] = {obj("ck/", 0, 100)};
	add_objs(&d, "ck/", o, N(o));
	const char *p[] = {"ck/.ckptfs/"};
	add_pfxs(&d, "ck/", p, N(p));
	ns_dir_finish(&d);
	cr_assert_eq(d.n, 0, "nothing to show");
	cr_assert_eq(d.seen, 2, "but the directory exists");
	ns_dir_free(&d);
}

Test(ns_dir, metadata_hints)
{
	ns_dir d;
	s3_object o[] = {obj("ck/latest", 3, 1), obj("ck/other", 3, 1)};
	const char *p[] = {"ck/.ckptfs-meta/", "ck/sub/"};

	ns_dir_init(&d, NULL, NULL);
	add_objs(&d, "ck/", o, N(o));
	add_pfxs(&d, "ck/", p, N(p));
	ns_dir_finish(&d);
	cr_assert(d.saw_hints);
	cr_assert_not(d.saw_meta);
	cr_assert_eq(d.n, 3, "the hints' prefix is hidden");
	cr_assert_null(ns_dir_find(&d, ".ckptfs-meta"));
	cr_assert(ns_dir_hint(&d, "latest"));
	cr_assert_not(ns_dir_hint(&d, "gone"), "a stale hint marks nothing");
	cr_assert_not(ns_dir_hint(&d, "sub"), "directories are never HEADed");
	cr_assert(must_find(&d, "latest", false)->hinted);
	cr_assert_not(must_find(&d, "other", false)->hinted);
	cr_assert_not(must_find(&d, "sub", true)->hinted);
	cr_assert_not(ns_dir_only_hints(&d));
	ns_dir_free(&d);

	/* hints whose objects are gone: the directory is gone */
	ns_dir_init(&d, NULL, NULL);
	add_pfxs(&d, "ck/", p, 1);
	ns_dir_finish(&d);
	cr_assert(d.saw_hints);
	cr_assert(ns_dir_only_hints(&d));
	ns_dir_free(&d);

	/* ... but not an empty directory that has its own marker object */
	s3_object m[] = {obj("ck/", 0, 1)};
	ns_dir_init(&d, NULL, NULL);
	add_objs(&d, "ck/", m, N(m));
	add_pfxs(&d, "ck/", p, 1);
	ns_dir_finish(&d);
	cr_assert_not(ns_dir_only_hints(&d));
	ns_dir_free(&d);
}

/* --- names put into and dropped from a finished listing --------------- */

/* What a mount committed itself goes into the listing it holds (which may
 * predate the commit) in order, replacing a same-named entry; a removal
 * takes the name out; a listing found gone is not gone any more. */
Test(ns_dir, put_and_drop_keep_order)
{
	ns_dir d;
	s3_object o[] = {obj("p/b", 1, 10), obj("p/d", 2, 10)};

	ns_dir_init(&d, NULL, NULL);
	add_objs(&d, "p/", o, N(o));
	ns_dir_finish(&d);
	d.vanished = true;
	cr_assert_eq(ns_dir_put(&d, "c", true, 99, (struct timespec){20, 5}), 0);
	cr_assert_eq(ns_dir_put(&d, "a", false, 7, (struct timespec){21, 0}), 0);
	cr_assert_eq(ns_dir_put(&d, "e", false, 8, (struct timespec){22, 0}), 0);
	cr_assert_eq(ns_dir_put(&d, "b", false, 3, (struct timespec){23, 0}), 0);
	cr_assert_not(d.vanished);
	cr_assert_eq(d.n, 5);
	assert_sorted_unique(&d);
	cr_assert_eq(must_find(&d, "c", true)->size, 0);
	const ns_entry *b = must_find(&d, "b", false);
	cr_assert_eq(b->size, 3);
	cr_assert_null(b->etag); /* the version is not known */
	cr_assert_eq(b->mtime.tv_sec, 23);
	cr_assert_eq(must_find(&d, "a", false)->size, 7);
	ns_dir_drop(&d, "c");
	ns_dir_drop(&d, "zz"); /* absent: nothing */
	ns_dir_drop(&d, "e");
	cr_assert_eq(d.n, 3);
	assert_sorted_unique(&d);
	cr_assert_null(ns_dir_find(&d, "c"));
	cr_assert_null(ns_dir_find(&d, "e"));
	must_find(&d, "d", false);
	ns_dir_free(&d);

	ns_dir_init(&d, NULL, NULL); /* an empty listing made by hand */
	cr_assert_eq(ns_dir_put(&d, "x", true, 0, (struct timespec){0, 0}), 0);
	must_find(&d, "x", true);
	ns_dir_free(&d);
}
