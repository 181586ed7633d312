/* Unit test for the decisions of the remote steps (commit/steps.c) that
 * need no server: in which order a step deletes the garbage of old names
 * (what a reader of the old name may see meanwhile), that it never
 * deletes what it just committed, and which directories of a checkpoint
 * get an object of their own (which empty directories a reader sees). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "commit/internal.h"

#define W "w0123456789abcdef"

/* A snapshot with files at paths (committed at key paths[i] when keyed)
 * and garbage keys; freed with eng_snap_free. */
static void snap(eng_snap *sn, const char *root, const char *const *files,
		 size_t nf, const char *const *dirs, size_t nd,
		 const char *const *garbage, size_t ng)
{
	memset(sn, 0, sizeof *sn);
	sn->root = strdup(root);
	sn->f = calloc(nf + 1, sizeof *sn->f);
	for (size_t i = 0; i < nf; i++) {
		sn->f[i].path = strdup(files[i]);
		sn->f[i].key = proto_key("p/", files[i]);
		sn->f[i].etag = strdup("\"e\"");
	}
	sn->nf = nf;
	sn->dpath = calloc(nd + 1, sizeof *sn->dpath);
	sn->dm = calloc(nd + 1, sizeof *sn->dm);
	for (size_t i = 0; i < nd; i++)
		sn->dpath[i] = strdup(dirs[i]);
	sn->nd = nd;
	sn->garbage = calloc(ng + 1, sizeof *sn->garbage);
	for (size_t i = 0; i < ng; i++)
		sn->garbage[i] = strdup(garbage[i]);
	sn->ng = ng;
}

/* A checkpoint renamed from "old" (or rewritten) leaves the old name's
 * objects, manifests and marker as garbage: they go objects first, then
 * the manifests and addenda, the marker last, so a reader of the old
 * name never sees objects without the marker that hides them. */
Test(steps, garbage_goes_objects_then_manifests_then_the_marker)
{
	char *marker = proto_marker_key("p/", "old", W, 60);
	char *manifest = proto_manifest_key("p/", "old", W);
	char *addendum = proto_addendum_key("p/", "", W, 7);
	char *obj1 = proto_key("p/", "old/model.pt");
	char *obj2 = proto_key("p/", "old/opt/state.pt");
	/* listed in the worst order */
	const char *g[] = {marker, manifest, obj1, addendum, obj2};
	eng_snap sn;
	snap(&sn, "new", NULL, 0, NULL, 0, g, 5);
	size_t n[3];
	cr_assert_eq(eng_garbage_plan(&sn, n), 0);
	cr_assert_eq(sn.ng, 5);
	cr_assert_eq(n[0], 2, "objects");
	cr_assert_eq(n[1], 2, "manifests");
	cr_assert_eq(n[2], 1, "marker");
	cr_assert_str_eq(sn.garbage[0], obj1, "listed order kept in a rank");
	cr_assert_str_eq(sn.garbage[1], obj2);
	cr_assert_str_eq(sn.garbage[2], manifest);
	cr_assert_str_eq(sn.garbage[3], addendum);
	cr_assert_str_eq(sn.garbage[4], marker);
	eng_snap_free(&sn);
	free(marker);
	free(manifest);
	free(addendum);
	free(obj1);
	free(obj2);
}

/* A file removed and written again under the same name: its old object is
 * garbage under the key the new one is committed at.  The step must not
 * delete what it just made visible. */
Test(steps, garbage_never_includes_what_the_step_commits)
{
	const char *files[] = {"ckpt/model.pt"};
	char *same = proto_key("p/", "ckpt/model.pt");
	char *other = proto_key("p/", "ckpt/old.pt");
	/* a directory named like a marker folder is data, not a marker */
	char *lookalike = proto_key("p/", "ckpt/x.ckptfs-pending.d/y");
	const char *g[] = {same, other, lookalike};
	eng_snap sn;
	snap(&sn, "ckpt", files, 1, NULL, 0, g, 3);
	size_t n[3];
	cr_assert_eq(eng_garbage_plan(&sn, n), 0);
	cr_assert_eq(sn.ng, 2, "the committed key is kept");
	cr_assert_eq(n[0], 2);
	cr_assert_eq(n[1] + n[2], 0);
	cr_assert_str_eq(sn.garbage[0], other);
	cr_assert_str_eq(sn.garbage[1], lookalike);
	eng_snap_free(&sn);
	free(same);
	free(other);
	free(lookalike);
}

/* Which directories of a checkpoint get a "dir/" object: a reader sees a
 * directory that holds files through their keys and the root through its
 * manifest; only an empty directory needs one, and a directory whose only
 * content is an empty directory exists through that one's object. */
Test(steps, only_empty_directories_get_an_object)
{
	const char *files[] = {"ckpt/opt/state.pt", "ckpt/model.pt"};
	const char *dirs[] = {"ckpt", "ckpt/opt", "ckpt/logs",
			      "ckpt/tb", "ckpt/tb/run1", "ckpt/optx"};
	eng_snap sn;
	snap(&sn, "ckpt", files, 2, dirs, 6, NULL, 0);
	cr_assert_not(eng_dir_needs_object(&sn, 0), "the root: its manifest");
	cr_assert_not(eng_dir_needs_object(&sn, 1), "holds a file");
	cr_assert(eng_dir_needs_object(&sn, 2), "empty");
	cr_assert_not(eng_dir_needs_object(&sn, 3), "holds an empty dir");
	cr_assert(eng_dir_needs_object(&sn, 4), "empty, under another");
	cr_assert(eng_dir_needs_object(&sn, 5),
		  "ckpt/opt/... is not under ckpt/optx");
	eng_snap_free(&sn);
}
