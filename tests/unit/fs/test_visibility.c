/* Unit tests for the reader side of the commit protocol: manifests,
 * pending markers, listing filters. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "fs/visibility.h"

static vis_manifest m;

static void setup(void)
{
	vis_manifest_init(&m);
}

static void teardown(void)
{
	vis_manifest_free(&m);
}

TestSuite(vis, .init = setup, .fini = teardown);

static int add(const char *json)
{
	char *err = NULL;
	int rc = vis_manifest_add_json(&m, json, strlen(json), &err);
	if (rc < 0)
		cr_assert_not_null(err, "a rejection explains itself");
	free(err);
	return rc;
}

Test(vis, committed_manifest_lists_files)
{
	cr_assert_eq(add("{\"version\":1,\"writer\":\"a\",\"state\":\"committed\","
			 "\"files\":[{\"path\":\"model.pt\",\"size\":10,"
			 "\"etag\":\"\\\"e1\\\"\",\"crc32c\":\"deadbeef\"},"
			 "{\"path\":\"sub/opt.pt\",\"size\":0}]}"),
		     0);
	vis_manifest_finish(&m);
	cr_assert_eq(m.n, 2);
	cr_assert_eq(m.committed, 1);
	const vis_file *f = vis_manifest_find(&m, "model.pt");
	cr_assert_not_null(f);
	cr_assert_eq(f->size, 10);
	cr_assert_str_eq(f->etag, "\"e1\"");
	cr_assert(f->has_crc);
	cr_assert_eq(f->crc32c, 0xdeadbeefu);
	cr_assert_null(vis_manifest_find(&m, "model"));
	cr_assert(vis_manifest_has_dir(&m, "sub"));
	cr_assert(vis_manifest_has_dir(&m, ""));
	cr_assert_not(vis_manifest_has_dir(&m, "su"));
	cr_assert_not(vis_manifest_has_dir(&m, "model.pt"));
}

Test(vis, pending_manifest_adds_nothing)
{
	cr_assert_eq(add("{\"state\":\"pending\"}"), 0);
	vis_manifest_finish(&m);
	cr_assert_eq(m.n, 0);
	cr_assert_eq(m.pending, 1);
	cr_assert_eq(m.committed, 0);
	cr_assert_not(vis_manifest_has_dir(&m, ""));
}

Test(vis, union_of_writers_deduplicated)
{
	add("{\"state\":\"committed\",\"files\":[{\"path\":\"__0_0.distcp\","
	    "\"size\":1},{\"path\":\".metadata\",\"size\":2}]}");
	add("{\"state\":\"committed\",\"files\":[{\"path\":\"__1_0.distcp\","
	    "\"size\":1},{\"path\":\".metadata\",\"size\":2}]}");
	vis_manifest_finish(&m);
	cr_assert_eq(m.n, 3);
	cr_assert_str_eq(m.files[0].path, ".metadata");
	cr_assert_not_null(vis_manifest_find(&m, "__1_0.distcp"));
}

Test(vis, malformed_manifests_rejected_whole)
{
	cr_assert_eq(add("not json"), -1);
	cr_assert_eq(add("[]"), -1);
	cr_assert_eq(add("{\"state\":\"done\",\"files\":[]}"), -1);
	cr_assert_eq(add("{\"state\":\"committed\"}"), -1);
	cr_assert_eq(add("{\"state\":\"committed\",\"files\":[{\"path\":\"ok\","
			 "\"size\":1},{\"path\":\"../escape\",\"size\":1}]}"),
		     -1);
	cr_assert_eq(add("{\"state\":\"committed\",\"files\":[{\"path\":\"/abs\","
			 "\"size\":1}]}"),
		     -1);
	cr_assert_eq(add("{\"state\":\"committed\",\"files\":[{\"path\":\"a//b\","
			 "\"size\":1}]}"),
		     -1);
	cr_assert_eq(add("{\"state\":\"committed\",\"files\":[{\"path\":\"a\","
			 "\"size\":-1}]}"),
		     -1);
	cr_assert_eq(add("{\"state\":\"committed\",\"files\":[{\"path\":\"a\"}]}"),
		     -1);
	vis_manifest_finish(&m);
	cr_assert_eq(m.n, 0, "a rejected manifest leaves nothing behind");
	cr_assert_eq(m.committed, 0);
}

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

Test(vis, time_rule_newest_manifest_wins)
{
	/* an addendum (later "time") rewrites model.pt; order of adding
	 * must not matter */
	add("{\"state\":\"committed\",\"time\":200,\"files\":[{\"path\":"
	    "\"model.pt\",\"size\":2,\"etag\":\"\\\"new\\\"\"}]}");
	add("{\"state\":\"committed\",\"time\":100,\"files\":[{\"path\":"
	    "\"model.pt\",\"size\":1,\"etag\":\"\\\"old\\\"\"},{\"path\":"
	    "\"b\",\"size\":3}]}");
	vis_manifest_finish(&m);
	cr_assert_eq(m.n, 2);
	const vis_file *f = vis_manifest_find(&m, "model.pt");
	cr_assert_str_eq(f->etag, "\"new\"");
	cr_assert_eq(f->size, 2);
	cr_assert_eq(f->time, 200);
}

Test(vis, time_rule_ties_go_to_the_last_added)
{
	add("{\"state\":\"committed\",\"files\":[{\"path\":\"x\",\"size\":1}]}");
	add("{\"state\":\"committed\",\"files\":[{\"path\":\"x\",\"size\":2}]}");
	vis_manifest_finish(&m);
	cr_assert_eq(m.n, 1);
	cr_assert_eq(m.files[0].size, 2);
}

Test(vis, dirs_and_attributes)
{
	cr_assert_eq(add("{\"state\":\"committed\",\"files\":[{\"path\":\"a\","
			 "\"size\":1,\"mode\":420,\"uid\":7,\"gid\":8,"
			 "\"mtime\":99,\"symlink\":\"t\",\"xattrs\":"
			 "{\"user.x\":\"AA==\"}}],\"dirs\":[{\"path\":"
			 "\"e/f\"},{\"path\":\"e/f\"}]}"),
		     0);
	vis_manifest_finish(&m);
	cr_assert_eq(m.n_dirs, 1, "deduplicated");
	cr_assert(vis_manifest_has_dir(&m, "e"));
	cr_assert(vis_manifest_has_dir(&m, "e/f"));
	cr_assert_not(vis_manifest_has_dir(&m, "e/g"));
	const vis_file *f = vis_manifest_find(&m, "a");
	cr_assert(f->has_attrs);
	cr_assert_eq(f->mode, 0644);
	cr_assert_eq(f->uid, 7);
	cr_assert_eq(f->mtime_ns, 99);
	cr_assert_str_eq(f->symlink, "t");
	cr_assert_str_eq(f->xattrs_json, "{\"user.x\":\"AA==\"}");
	/* only the empty directory: the root still shows */
	vis_manifest_free(&m);
	vis_manifest_init(&m);
	add("{\"state\":\"committed\",\"files\":[],\"dirs\":[{\"path\":\"d\"}]}");
	vis_manifest_finish(&m);
	cr_assert(vis_manifest_has_dir(&m, ""));
	cr_assert_eq(add("{\"state\":\"committed\",\"files\":[],\"dirs\":"
			 "[{\"path\":\"../x\"}]}"),
		     -1, "bad dir path rejects the manifest");
}
