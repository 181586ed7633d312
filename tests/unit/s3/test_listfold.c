/*
 * Unit tests for s3/listfold: a flat page folded into the delimiter
 * listing a correct server gives (objects in the directory, one common
 * prefix per child, across pages), keys outside the prefix and with NUL
 * bytes, and the read-only probe's comparison of a flat and a delimiter
 * page as s3rver 3 answers them.  Run under ASan to prove no leaks.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "s3/listfold.h"
#include "s3/xml.h"

/* A page of objects with the given keys (NULL-terminated list). */
static s3_list_result page_of(const char *const *keys)
{
	s3_list_result r = {0};
	size_t n = 0;
	while (keys[n])
		n++;
	r.objects = calloc(n ? n : 1, sizeof *r.objects);
	for (size_t i = 0; i < n; i++) {
		r.objects[i].key = strdup(keys[i]);
		r.objects[i].key_len = strlen(keys[i]);
		r.objects[i].etag = strdup("\"e\"");
		r.objects[i].size = i;
	}
	r.n_objects = n;
	return r;
}

static void add_prefix(s3_list_result *r, const char *p)
{
	r->prefixes = realloc(r->prefixes, (r->n_prefixes + 1) * sizeof(char *));
	r->prefix_lens =
	    realloc(r->prefix_lens, (r->n_prefixes + 1) * sizeof(size_t));
	r->prefixes[r->n_prefixes] = strdup(p);
	r->prefix_lens[r->n_prefixes++] = strlen(p);
}

Test(listfold, folds_children_into_common_prefixes)
{
	const char *keys[] = {"run/a",     "run/b/x", "run/b/y",
			      "run/c/d/e", "run/f",   NULL};
	s3_list_result r = page_of(keys);
	s3_fold st = {0};
	cr_assert_eq(s3_fold_page(&st, "run/", "/", &r), 0);
	cr_assert_eq(r.n_objects, 2);
	cr_assert_str_eq(r.objects[0].key, "run/a");
	cr_assert_str_eq(r.objects[1].key, "run/f");
	cr_assert_eq(r.objects[1].size, 4, "object fields move with it");
	cr_assert_eq(r.n_prefixes, 2);
	cr_assert_str_eq(r.prefixes[0], "run/b/");
	cr_assert_str_eq(r.prefixes[1], "run/c/");
	cr_assert_eq(r.prefix_lens[1], 6);
	s3_list_result_free(&r);
	s3_fold_free(&st);
}

Test(listfold, a_child_spread_over_pages_appears_once)
{
	const char *p1[] = {"a", "b/1", "b/2", NULL};
	const char *p2[] = {"b/3/deep", "b/4", "c", NULL};
	s3_fold st = {0};
	s3_list_result r1 = page_of(p1), r2 = page_of(p2);
	cr_assert_eq(s3_fold_page(&st, "", "/", &r1), 0);
	cr_assert_eq(s3_fold_page(&st, "", "/", &r2), 0);
	cr_assert_eq(r1.n_prefixes, 1);
	cr_assert_str_eq(r1.prefixes[0], "b/");
	cr_assert_eq(r2.n_prefixes, 0, "b/ was given by the page before");
	cr_assert_eq(r2.n_objects, 1);
	cr_assert_str_eq(r2.objects[0].key, "c");
	s3_list_result_free(&r1);
	s3_list_result_free(&r2);
	s3_fold_free(&st);
}

Test(listfold, keys_outside_the_prefix_and_nul_bytes)
{
	const char *keys[] = {"other/x/y", "p/q", NULL};
	s3_list_result r = page_of(keys);
	/* "p/" + "a\0b" + "::" + "c": the delimiter after an embedded NUL */
	r.objects = realloc(r.objects, 3 * sizeof *r.objects);
	static const char k[] = "p/a\0b::c";
	r.objects[2] = (s3_object){.key = malloc(sizeof k),
				   .key_len = sizeof k - 1,
				   .etag = strdup("\"e\"")};
	memcpy(r.objects[2].key, k, sizeof k);
	r.n_objects = 3;
	s3_fold st = {0};
	cr_assert_eq(s3_fold_page(&st, "p/", "::", &r), 0);
	cr_assert_eq(r.n_objects, 2);
	cr_assert_str_eq(r.objects[0].key, "other/x/y", "outside: untouched");
	cr_assert_str_eq(r.objects[1].key, "p/q");
	cr_assert_eq(r.n_prefixes, 1);
	cr_assert_eq(r.prefix_lens[0], 7);
	cr_assert_eq(memcmp(r.prefixes[0], "p/a\0b::", 7), 0);
	s3_list_result_free(&r);
	s3_fold_free(&st);
}

Test(listfold, evidence_is_a_child_whose_keys_all_lie_two_levels_down)
{
	/* run/ has its own marker key: s3rver shows it, so it tells nothing;
	 * b/ has only deep keys, over two pages; e/ ends the listing */
	const char *p1[] = {"a/x", "b/c/d", NULL};
	const char *p2[] = {"b/c/e", "b/f/g", "run/", "run/c/d", NULL};
	s3_list_result r1 = page_of(p1), r2 = page_of(p2);
	s3_fold st = {0};
	cr_assert_eq(s3_fold_page(&st, "", "/", &r1), 0);
	cr_assert_null(st.deep, "b/'s run has not ended yet");
	cr_assert_eq(s3_fold_page(&st, "", "/", &r2), 0);
	cr_assert_eq(st.deep_len, 2);
	cr_assert_eq(memcmp(st.deep, "b/", 2), 0);
	s3_list_result_free(&r1);
	s3_list_result_free(&r2);
	s3_fold_free(&st);
	cr_assert_null(st.deep);

	const char *p3[] = {"run/", "run/c/d", NULL};
	s3_list_result r3 = page_of(p3);
	cr_assert_eq(s3_fold_page(&st, "", "/", &r3), 0);
	s3_fold_finish(&st);
	cr_assert_null(st.deep, "run/ holds a key one level down");
	s3_list_result_free(&r3);
	s3_fold_free(&st);

	const char *p4[] = {"x", "e/f/g", NULL};
	s3_list_result r4 = page_of(p4);
	cr_assert_eq(s3_fold_page(&st, "", "/", &r4), 0);
	cr_assert_null(st.deep);
	s3_fold_finish(&st);
	cr_assert_eq(memcmp(st.deep, "e/", 2), 0, "the last run, at finish");
	s3_list_result_free(&r4);
	s3_fold_free(&st);
}

Test(listfold, check_sees_the_missing_prefix_as_s3rver_answers)
{
	/* s3rver: "deep/" has only keys two levels down and is left out */
	const char *fk[] = {"ckpt-1/model.pt", "deep/a/b/file", "top", NULL};
	const char *dk[] = {"top", NULL};
	s3_list_result flat = page_of(fk), del = page_of(dk);
	add_prefix(&del, "ckpt-1/");
	char *ex = NULL;
	cr_assert_eq(s3_fold_check("", "/", &flat, &del, &ex), 1);
	cr_assert_str_eq(ex, "deep/");
	free(ex);
	/* a correct server */
	add_prefix(&del, "deep/");
	ex = NULL;
	cr_assert_eq(s3_fold_check("", "/", &flat, &del, &ex), 0);
	cr_assert_null(ex);
	s3_list_result_free(&flat);
	s3_list_result_free(&del);
}

Test(listfold, shallow_keys_are_no_evidence)
{
	/* one level down: s3rver lists these right, so they tell nothing */
	const char *fk[] = {"ckpt-1/model.pt", "ckpt-2/model.pt",
			    "run/", "run/ckpt/x", NULL};
	s3_list_result flat = page_of(fk), del = page_of((const char *[]){NULL});
	add_prefix(&del, "ckpt-1/");
	add_prefix(&del, "ckpt-2/");
	add_prefix(&del, "run/");
	cr_assert_eq(s3_fold_check("", "/", &flat, &del, NULL), -1);
	/* the flat page's last run may go on in its next page */
	const char *tk[] = {"a/b/c", NULL};
	s3_list_result trunc = page_of(tk);
	trunc.truncated = true;
	cr_assert_eq(s3_fold_check("", "/", &trunc, &del, NULL), -1);
	s3_list_result_free(&trunc);
	s3_list_result empty = page_of((const char *[]){NULL});
	cr_assert_eq(s3_fold_check("", "/", &empty, &del, NULL), -1);
	s3_list_result_free(&flat);
	s3_list_result_free(&del);
	s3_list_result_free(&empty);
}

Test(listfold, verdict_only_within_the_range_the_page_covers)
{
	s3_list_result del = page_of((const char *[]){"m", NULL});
	add_prefix(&del, "a/");
	del.truncated = true; /* stopped at "m": "z/" may come later */
	cr_assert_eq(s3_fold_verdict("z/", 2, &del), -1);
	cr_assert_eq(s3_fold_verdict("c/", 2, &del), 1, "c/ sorts before m");
	cr_assert_eq(s3_fold_verdict("a/", 2, &del), 0);
	del.truncated = false;
	cr_assert_eq(s3_fold_verdict("z/", 2, &del), 1);
	s3_list_result_free(&del);
}

/* s3rver ignores encoding-type=url and says nothing about it: its keys
 * are literal and must not be percent-decoded ('+' stays '+'). */
Test(listfold, s3rver_reply_keys_are_literal)
{
	static const char body[] =
	    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
	    "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
	    "<IsTruncated>false</IsTruncated>"
	    "<Contents><Key>page+1%41.bin</Key>"
	    "<LastModified>2026-11-26T10:00:00.000Z</LastModified>"
	    "<ETag>&quot;e&quot;</ETag><Size>1</Size>"
	    "<StorageClass>STANDARD</StorageClass></Contents>"
	    "<Name>b</Name><Prefix></Prefix><MaxKeys>1000</MaxKeys>"
	    "<KeyCount>1</KeyCount></ListBucketResult>";
	s3_list_result r;
	char *err = NULL;
	cr_assert_eq(s3xml_parse_list(body, strlen(body), false, &r, &err), 0,
		     "%s", err ? err : "");
	cr_assert_str_eq(r.objects[0].key, "page+1%41.bin");
	s3_list_result_free(&r);
}
