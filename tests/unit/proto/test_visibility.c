/* Unit tests for proto/visibility: pending markers, and the listing
 * filters readers apply with a root's manifests. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "proto/keys.h"
#include "proto/visibility.h"

#include "../support/manifest-fixture.h"

Test(vis, markers_parse_and_expire)
{
	char *child = NULL;
	unsigned lease = 0;
	cr_assert_eq(vis_parse_marker("checkpoint-100/ab12@60", &child, &lease),
		     0);
	cr_assert_str_eq(child, "checkpoint-100");
	cr_assert_eq(lease, 60);
	free(child);
	cr_assert_eq(vis_parse_marker("c/w@", &child, &lease), -1);
	cr_assert_eq(vis_parse_marker("c/w@0", &child, &lease), -1);
	cr_assert_eq(vis_parse_marker("c/w@x", &child, &lease), -1);
	cr_assert_eq(vis_parse_marker("c/w", &child, &lease), -1);
	cr_assert_eq(vis_parse_marker("/w@5", &child, &lease), -1);
	cr_assert_eq(vis_parse_marker("c/d/w@5", &child, &lease), -1);
	cr_assert(vis_marker_live(1000, 60, 1059));
	cr_assert_not(vis_marker_live(1000, 60, 1060));
}

static void add_entry(ns_dir *d, const char *name, bool is_dir)
{
	d->v = realloc(d->v, (d->n + 1) * sizeof *d->v);
	d->v[d->n] = (ns_entry){.name = strdup(name), .is_dir = is_dir};
	d->n++;
}

Test(vis, filter_keeps_only_manifest_files)
{
	add("{\"state\":\"committed\",\"files\":[{\"path\":\"a.pt\",\"size\":1},"
	    "{\"path\":\"sub/b.pt\",\"size\":1}]}");
	vis_manifest_finish(&m);
	ns_dir d;
	ns_dir_init(&d, NULL, NULL);
	add_entry(&d, "a.pt", false);
	add_entry(&d, "partial.pt", false);
	add_entry(&d, "stale", true);
	add_entry(&d, "sub", true);
	vis_filter_listing(&d, &m, "");
	cr_assert_eq(d.n, 2);
	cr_assert_str_eq(d.v[0].name, "a.pt");
	cr_assert_str_eq(d.v[1].name, "sub");
	ns_dir_free(&d);

	ns_dir_init(&d, NULL, NULL);
	add_entry(&d, "b.pt", false);
	add_entry(&d, "c.pt", false);
	vis_filter_listing(&d, &m, "sub");
	cr_assert_eq(d.n, 1);
	cr_assert_str_eq(d.v[0].name, "b.pt");
	ns_dir_free(&d);

	ns_dir_init(&d, NULL, NULL);
	add_entry(&d, "x", false);
	vis_filter_listing(&d, NULL, "");
	cr_assert_eq(d.n, 1, "no manifests: everything shows");
	ns_dir_free(&d);
}

Test(vis, hide_names)
{
	ns_dir d;
	ns_dir_init(&d, NULL, NULL);
	add_entry(&d, "checkpoint-1", true);
	add_entry(&d, "checkpoint-2", true);
	char *hidden[] = {"checkpoint-2", "absent"};
	vis_hide_names(&d, hidden, 2);
	cr_assert_eq(d.n, 1);
	cr_assert_str_eq(d.v[0].name, "checkpoint-1");
	ns_dir_free(&d);
}

Test(vis, own_markers_prefix_and_hide_all)
{
	char *p = vis_own_markers_prefix("run/checkpoint-2/");
	cr_assert_str_eq(p, "run/.ckptfs-pending/checkpoint-2/");
	free(p);
	p = vis_own_markers_prefix("top/");
	cr_assert_str_eq(p, ".ckptfs-pending/top/");
	free(p);
	p = vis_own_markers_prefix("a b/c%d/e/");
	cr_assert_str_eq(p, "a b/c%d/.ckptfs-pending/e/");
	free(p);
	cr_assert_null(vis_own_markers_prefix(""), "the bucket root");
	cr_assert_null(vis_own_markers_prefix("noslash"));
	ns_dir d;
	ns_dir_init(&d, NULL, NULL);
	add_entry(&d, "a.bin", false);
	add_entry(&d, "sub", true);
	vis_hide_all(&d);
	cr_assert_eq(d.n, 0);
	vis_hide_all(&d);
	ns_dir_free(&d);
}

Test(vis, listing_misses_a_manifest_file)
{
	cr_assert_eq(add("{\"version\":1,\"writer\":\"a\",\"state\":\"committed\","
			 "\"files\":[{\"path\":\"a.bin\",\"size\":1},"
			 "{\"path\":\"sub/x\",\"size\":1},"
			 "{\"path\":\"sub/y\",\"size\":1},"
			 "{\"path\":\"z.bin\",\"size\":1}]}"),
		     0);
	vis_manifest_finish(&m);
	ns_dir d;
	ns_dir_init(&d, NULL, NULL);
	add_entry(&d, "a.bin", false);
	add_entry(&d, "extra", false);
	add_entry(&d, "sub", true);
	add_entry(&d, "z.bin", false);
	cr_assert_not(vis_listing_misses(&d, &m), "all there (extra names do not count)");
	char *gone[] = {"z.bin"};
	vis_hide_names(&d, gone, 1);
	cr_assert(vis_listing_misses(&d, &m), "z.bin deleted");
	vis_hide_all(&d);
	cr_assert(vis_listing_misses(&d, &m));
	vis_manifest m0;
	vis_manifest_init(&m0);
	vis_manifest_finish(&m0);
	cr_assert_not(vis_listing_misses(&d, &m0), "no files, nothing missing");
	vis_manifest_free(&m0);
	ns_dir_free(&d);
}

Test(vis, keep_listed_drops_names_gone_or_new_in_the_second_listing)
{
	/* first listing: an old name (its objects deleted before its marker)
	 * and a committed checkpoint; second: the old name is gone and a new
	 * transaction appeared whose marker the reader may have missed */
	ns_dir d, again;
	ns_dir_init(&d, NULL, NULL);
	ns_dir_init(&again, NULL, NULL);
	add_entry(&d, "ckpt-1", true);
	add_entry(&d, "latest", false);
	add_entry(&d, "staging-1", true);
	add_entry(&again, "ckpt-1", true);
	add_entry(&again, "ckpt-2", true);
	add_entry(&again, "latest", false);
	vis_keep_listed(&d, &again);
	cr_assert_eq(d.n, 2);
	cr_assert_str_eq(d.v[0].name, "ckpt-1");
	cr_assert_str_eq(d.v[1].name, "latest");
	vis_keep_listed(&d, &(ns_dir){0});
	cr_assert_eq(d.n, 0, "nothing listed again: nothing shows");
	ns_dir_free(&d);
	ns_dir_free(&again);
}

/* A delete record: the old format reads it as a marker of writer "W.gone"
 * with a one-day lease (hidden), this one as gone for ever. */
Test(vis, delete_records)
{
	char *k = proto_gone_key("pre/", "run/ckpt-3", "host-ab12cd34");
	cr_assert_str_eq(k, "pre/run/.ckptfs-pending/ckpt-3/"
			    "host-ab12cd34.gone@86400");
	const char *rel = k + strlen("pre/run/.ckptfs-pending/");
	cr_assert(vis_marker_is_gone(rel));
	char *child;
	unsigned lease;
	cr_assert_eq(vis_parse_marker(rel, &child, &lease), 0);
	cr_assert_str_eq(child, "ckpt-3");
	cr_assert_eq(lease, 86400);
	free(child);
	free(k);
	cr_assert_not(vis_marker_is_gone("ckpt-3/host-ab12cd34@60"));
	cr_assert_not(vis_marker_is_gone("ckpt-3/.gone@60"));
	cr_assert_not(vis_marker_is_gone("ckpt-3.gone/w@60"));
	cr_assert_not(vis_marker_is_gone("nochild"));
	k = proto_gone_key("", "top", "w");
	cr_assert_str_eq(k, ".ckptfs-pending/top/w.gone@86400");
	free(k);
}
