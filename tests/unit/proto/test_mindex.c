/* Unit tests for proto/mindex: the manifest index document, written and
 * read back, and malformed documents refused. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/mindex.h"

struct seen {
	int n;
	char names[4][64];
	char bodies[4][64];
};

static int collect(void *arg, const char *name, const char *etag,
		   const char *body, size_t len)
{
	struct seen *s = arg;
	(void)etag;
	if (s->n >= 4)
		return 7;
	snprintf(s->names[s->n], 64, "%s", name);
	snprintf(s->bodies[s->n], 64, "%.*s", (int)len, body);
	s->n++;
	return 0;
}

Test(mindex, names_and_keys)
{
	cr_assert(proto_is_index_name("index.host-1a2b3c4d.txt"));
	cr_assert_not(proto_is_index_name("manifest.host.json"));
	cr_assert_not(proto_is_index_name("index..txt"));
	cr_assert_not(proto_is_index_name("a/index.w.txt"));
	char *k = proto_index_key("p/", "run/step-1", "w1");
	cr_assert_str_eq(k, "p/run/step-1/.ckptfs/index.w1.txt");
	free(k);
	k = proto_claim_key("", "step-1", "host-9");
	cr_assert_str_eq(k, "step-1/.ckptfs/claim.host-9");
	free(k);
	cr_assert(proto_is_claim_name("claim.host-9"));
	cr_assert_not(proto_is_claim_name("claim."));
	cr_assert_not(proto_is_claim_name("index.w.txt"));
	/* claims and indexes list before manifests, readers see the index
	 * before the manifests it holds */
	cr_assert(strcmp("claim.z", "index.a.txt") < 0);
	cr_assert(strcmp("index.z.txt", "manifest.a.json") < 0);
}

Test(mindex, round_trip)
{
	buf b = BUF_INIT;
	cr_assert_eq(proto_index_add(&b, "manifest.a.json", "\"e1\"", "{\"x\":1}", 7), 0);
	cr_assert_eq(proto_index_add(&b, "manifest.b.json", "\"e2\"", "a\nb c", 5), 0);
	cr_assert_eq(proto_index_add(&b, "manifest.c.json", "\"e3\"", "", 0), 0);
	cr_assert_eq(proto_index_add(&b, "bad name", "\"e\"", "", 0), -1);
	cr_assert_eq(proto_index_add(&b, "n", "", "", 0), -1);
	struct seen s = {0};
	cr_assert_eq(proto_index_parse(b.data, b.len, collect, &s), 0);
	cr_assert_eq(s.n, 3);
	cr_assert_str_eq(s.names[1], "manifest.b.json");
	cr_assert_str_eq(s.bodies[0], "{\"x\":1}");
	cr_assert_str_eq(s.bodies[1], "a\nb c");
	cr_assert_str_eq(s.bodies[2], "");
	/* every truncation is malformed or a shorter valid prefix */
	for (size_t cut = 0; cut < b.len; cut++) {
		struct seen t = {0};
		int rc = proto_index_parse(b.data, cut, collect, &t);
		cr_assert(rc == -1 || (rc == 0 && t.n < 3), "cut %zu", cut);
	}
	buf_free(&b);
}

Test(mindex, malformed)
{
	struct seen s = {0};
	const char *bad[] = {
		"nope\n",
		PROTO_INDEX_MAGIC "m e\n",
		PROTO_INDEX_MAGIC "m e -1\n\n",
		PROTO_INDEX_MAGIC "m e 5\nabc\n",
		PROTO_INDEX_MAGIC "m e 3\nabcX",
		NULL,
	};
	for (int i = 0; bad[i]; i++)
		cr_assert_eq(proto_index_parse(bad[i], strlen(bad[i]), collect, &s),
			     -1, "%d", i);
	const char *empty = PROTO_INDEX_MAGIC;
	cr_assert_eq(proto_index_parse(empty, strlen(empty), collect, &s), 0);
}
