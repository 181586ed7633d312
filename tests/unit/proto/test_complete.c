/* Unit tests for proto/complete: completion rules (what a framework
 * writes last) parsed from the mount option and applied to listings. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "proto/complete.h"

static void add_entry(ns_dir *d, const char *name, bool is_dir)
{
	d->v = realloc(d->v, (d->n + 1) * sizeof *d->v);
	d->v[d->n] = (ns_entry){.name = strdup(name), .is_dir = is_dir};
	d->n++;
}

Test(complete, parse_default_and_lists)
{
	vis_rules r = {0};
	char *err = NULL;
	cr_assert_eq(vis_rules_parse(&r, VIS_RULES_DEFAULT, &err), 0);
	cr_assert_eq(r.n, 1);
	cr_assert_str_eq(r.v[0].trigger, "*.distcp");
	cr_assert_str_eq(r.v[0].required, ".metadata");
	cr_assert_eq(vis_rules_parse(&r, "*.distcp/.metadata:*.data-*/*.index",
				     &err), 0);
	cr_assert_eq(r.n, 2);
	cr_assert_str_eq(r.v[1].trigger, "*.data-*");
	cr_assert_str_eq(r.v[1].required, "*.index");
	cr_assert_eq(vis_rules_parse(&r, "none", &err), 0);
	cr_assert_eq(r.n, 0);
	cr_assert_eq(vis_rules_parse(&r, "", &err), 0);
	cr_assert_eq(r.n, 0);
	vis_rules_free(&r);
}

Test(complete, parse_rejects_bad_rules)
{
	static const char *const bad[] = {
		"*.distcp", "/.metadata", "*.distcp/", "a/b/c", "x/y:z", NULL,
	};
	for (int i = 0; bad[i]; i++) {
		vis_rules r = {0};
		char *err = NULL;
		cr_assert_eq(vis_rules_parse(&r, bad[i], &err), -1, "%s", bad[i]);
		cr_assert_not_null(err);
		cr_assert_not_null(strstr(err, "bad completion rule"), "%s", err);
		cr_assert_eq(r.n, 0);
		free(err);
	}
}

Test(complete, shards_without_metadata_show_nothing)
{
	vis_rules r = {0};
	char *err = NULL;
	cr_assert_eq(vis_rules_parse(&r, VIS_RULES_DEFAULT, &err), 0);
	ns_dir d;
	ns_dir_init(&d, NULL, NULL);
	add_entry(&d, "__0_0.distcp", false);
	add_entry(&d, "__1_0.distcp", false);
	add_entry(&d, "sub", true);
	cr_assert(vis_rules_incomplete(&d, &r));
	cr_assert(vis_rules_apply(&d, &r));
	cr_assert_eq(d.n, 0);
	ns_dir_free(&d);

	ns_dir_init(&d, NULL, NULL);
	add_entry(&d, ".metadata", false);
	add_entry(&d, "__0_0.distcp", false);
	cr_assert_not(vis_rules_apply(&d, &r));
	cr_assert_eq(d.n, 2);
	ns_dir_free(&d);

	/* no trigger: other directories are untouched; a directory named
	 * .metadata does not complete a checkpoint */
	ns_dir_init(&d, NULL, NULL);
	add_entry(&d, "model.pt", false);
	add_entry(&d, "x.distcp", true);
	cr_assert_not(vis_rules_apply(&d, &r));
	cr_assert_eq(d.n, 2);
	add_entry(&d, "a.distcp", false);
	add_entry(&d, ".metadata", true);
	cr_assert(vis_rules_incomplete(&d, &r));
	ns_dir_free(&d);
	cr_assert_not(vis_rules_incomplete(&d, NULL));
	vis_rules_free(&r);
}
