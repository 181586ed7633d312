#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/mcache.h"

static char *get(fs_mcache *mc, const char *key, const char *etag)
{
	size_t len = 0;
	char *b = fs_mcache_get(mc, key, etag, &len);
	if (!b)
		return NULL;
	char *s = malloc(len + 1);
	memcpy(s, b, len);
	s[len] = 0;
	free(b);
	return s;
}

Test(mcache, hit_only_for_the_same_etag)
{
	fs_mcache *mc = fs_mcache_new(0);
	cr_assert_null(get(mc, "run/.ckptfs/manifest.w.json", "\"a\""));
	cr_assert_eq(fs_mcache_put(mc, "run/.ckptfs/manifest.w.json", "\"a\"",
				   "{\"state\":\"pending\"}", 19), 0);
	char *s = get(mc, "run/.ckptfs/manifest.w.json", "\"a\"");
	cr_assert_str_eq(s, "{\"state\":\"pending\"}");
	free(s);
	cr_assert_null(get(mc, "run/.ckptfs/manifest.w.json", "\"b\""),
		       "rewritten manifest (new ETag): not served");
	cr_assert_null(get(mc, "run/.ckptfs/manifest.x.json", "\"a\""));
	/* the committed version replaces the pending one */
	fs_mcache_put(mc, "run/.ckptfs/manifest.w.json", "\"b\"",
		      "{\"state\":\"committed\"}", 21);
	cr_assert_null(get(mc, "run/.ckptfs/manifest.w.json", "\"a\""));
	s = get(mc, "run/.ckptfs/manifest.w.json", "\"b\"");
	cr_assert_str_eq(s, "{\"state\":\"committed\"}");
	free(s);
	cr_assert_eq(fs_mcache_count(mc), 1);
	fs_mcache_free(mc);
}

Test(mcache, empty_body)
{
	fs_mcache *mc = fs_mcache_new(0);
	fs_mcache_put(mc, "k", "\"e\"", "", 0);
	size_t len = 99;
	char *b = fs_mcache_get(mc, "k", "\"e\"", &len);
	cr_assert_not_null(b);
	cr_assert_eq(len, 0);
	free(b);
	fs_mcache_free(mc);
}

Test(mcache, budget_evicts_the_oldest_first)
{
	fs_mcache *mc = fs_mcache_new(8192);
	char body[1000];
	memset(body, 'x', sizeof body);
	char key[64];
	for (int i = 0; i < 40; i++) {
		snprintf(key, sizeof key, "run/.ckptfs/manifest.w.%d.json", i);
		cr_assert_eq(fs_mcache_put(mc, key, "\"e\"", body, sizeof body),
			     0);
		cr_assert_leq(fs_mcache_bytes(mc), 8192);
	}
	cr_assert_gt(fs_mcache_count(mc), 3);
	cr_assert_lt(fs_mcache_count(mc), 9);
	char *s = get(mc, "run/.ckptfs/manifest.w.39.json", "\"e\"");
	cr_assert_not_null(s, "the newest stays");
	free(s);
	cr_assert_null(get(mc, "run/.ckptfs/manifest.w.0.json", "\"e\""),
		       "the oldest went");
	/* a body over the whole budget is not kept, and evicts nothing */
	size_t before = fs_mcache_count(mc);
	char *big = calloc(1, 10000);
	cr_assert_eq(fs_mcache_put(mc, "huge", "\"e\"", big, 10000), 0);
	free(big);
	cr_assert_null(get(mc, "huge", "\"e\""));
	cr_assert_eq(fs_mcache_count(mc), before);
	fs_mcache_free(mc);
}

Test(mcache, many_keys_in_few_buckets)
{
	fs_mcache *mc = fs_mcache_new(64u << 20);
	char key[64], val[32];
	for (int i = 0; i < 20000; i++) {
		snprintf(key, sizeof key, "d/.ckptfs/manifest.w.%d.json", i);
		snprintf(val, sizeof val, "%d", i);
		fs_mcache_put(mc, key, "\"e\"", val, strlen(val));
	}
	cr_assert_eq(fs_mcache_count(mc), 20000);
	for (int i = 0; i < 20000; i += 997) {
		snprintf(key, sizeof key, "d/.ckptfs/manifest.w.%d.json", i);
		snprintf(val, sizeof val, "%d", i);
		char *s = get(mc, key, "\"e\"");
		cr_assert_str_eq(s, val);
		free(s);
	}
	fs_mcache_free(mc);
}
