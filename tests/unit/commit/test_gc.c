/* Unit tests for gc's decisions (commit/gc.h): durations, marker keys,
 * and which keys a plan deletes over a listing. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "commit/gc.h"

/* ---- durations ------------------------------------------------------------ */

static double dur(const char *s)
{
	double v = -1;
	cr_assert_eq(gc_parse_duration(s, &v), 0, "%s parses", s);
	return v;
}

Test(gc_duration, units)
{
	cr_assert_float_eq(dur("30s"), 30, 1e-9);
	cr_assert_float_eq(dur("10m"), 600, 1e-9);
	cr_assert_float_eq(dur("2h"), 7200, 1e-9);
	cr_assert_float_eq(dur("1d"), 86400, 1e-9);
	cr_assert_float_eq(dur("45"), 45, 1e-9);
	cr_assert_float_eq(dur("1.5h"), 5400, 1e-9);
	cr_assert_float_eq(dur("0s"), 0, 1e-9);
	cr_assert_float_eq(dur("24h"), 86400, 1e-9);
}

Test(gc_duration, rejects)
{
	const char *bad[] = {"", "h", "-1h", "1x", "1hh", "1 h", " 1h",
			     "1h ", "inf", "nan", "0x10", "1e3", "1w", NULL};
	for (int i = 0; bad[i]; i++) {
		double v = 7;
		cr_assert_eq(gc_parse_duration(bad[i], &v), -1, "'%s' refused",
			     bad[i]);
		cr_assert_float_eq(v, 7, 1e-9, "'%s' leaves the output", bad[i]);
	}
	double v;
	cr_assert_eq(gc_parse_duration(NULL, &v), -1);
}

Test(gc_upload, age)
{
	cr_assert(gc_upload_expired(1000, 1000 + 86401, 86400));
	cr_assert_not(gc_upload_expired(1000, 1000 + 86400, 86400));
	cr_assert_not(gc_upload_expired(1000, 1000 + 5, 86400));
	cr_assert(gc_upload_expired(1000, 1001, 0));
}

/* ---- marker keys ---------------------------------------------------------- */

Test(gc_marker, parse)
{
	char *root, *writer;
	unsigned lease;
	cr_assert_eq(gc_parse_marker_key("run/.ckptfs-pending/ckpt-3/host-ab12@60",
					 &root, &writer, &lease),
		     0);
	cr_assert_str_eq(root, "run/ckpt-3/");
	cr_assert_str_eq(writer, "host-ab12");
	cr_assert_eq(lease, 60);
	free(root);
	free(writer);
	cr_assert_eq(gc_parse_marker_key(".ckptfs-pending/c/w@1", &root,
					 &writer, &lease),
		     0);
	cr_assert_str_eq(root, "c/");
	free(root);
	free(writer);
	/* nested levels: the last .ckptfs-pending component counts */
	cr_assert_eq(gc_parse_marker_key("a/.ckptfs-pending/x/b/.ckptfs-pending/c/w@5",
					 &root, &writer, &lease),
		     0);
	cr_assert_str_eq(root, "a/.ckptfs-pending/x/b/c/");
	free(root);
	free(writer);
	const char *bad[] = {"run/ckpt/w@60", "run/.ckptfs-pending/c/w",
			     "run/.ckptfs-pending/c/w@0", "run/.ckptfs-pending/c",
			     "run/.ckptfs-pending/c/d/w@60",
			     "run/x.ckptfs-pending/c/w@60", NULL};
	for (int i = 0; bad[i]; i++)
		cr_assert_eq(gc_parse_marker_key(bad[i], &root, &writer, &lease),
			     -1, "%s is no marker", bad[i]);
}

/* ---- plans ---------------------------------------------------------------- */

#define NOW 1000000

typedef struct fixture {
	gc_object objs[64];
	size_t n;
	gc_doc docs[16];
	size_t n_docs;
	gc_plan plan;
} fixture;

static fixture F;

static void obj(const char *key, time_t mtime)
{
	F.objs[F.n++] = (gc_object){key, 10, mtime};
}

static void doc(const char *key, const char *json)
{
	obj(key, NOW - 100);
	F.docs[F.n_docs++] = (gc_doc){key, json, strlen(json)};
}

static void plan(void)
{
	/* step 1 must name every manifest the fixture wants read */
	size_t *idx, nk;
	cr_assert_eq(gc_manifests_needed(F.objs, F.n, NOW, &idx, &nk), 0);
	free(idx);
	cr_assert_eq(gc_make_plan(F.objs, F.n, NOW, F.docs, F.n_docs, &F.plan),
		     0);
}

static bool deleted(const char *key, gc_kind kind)
{
	for (size_t i = 0; i < F.plan.n_del; i++)
		if (!strcmp(F.plan.del[i].key, key))
			return F.plan.del[i].kind == kind;
	return false;
}

static bool mentioned(const char *key)
{
	for (size_t i = 0; i < F.plan.n_del; i++)
		if (!strcmp(F.plan.del[i].key, key))
			return true;
	return false;
}

static void fini(void)
{
	gc_plan_free(&F.plan);
	memset(&F, 0, sizeof F);
}

TestSuite(gc_plan, .fini = fini);

#define PENDING(w) "{\"version\":1,\"writer\":\"" w "\",\"state\":\"pending\"}"
#define COMMITTED(w, files)                                                    \
	"{\"version\":1,\"writer\":\"" w "\",\"state\":\"committed\","         \
	"\"files\":[" files "]}"
#define F1(p) "{\"path\":\"" p "\",\"size\":10,\"etag\":\"\\\"e\\\"\"}"

Test(gc_plan, abandoned_transaction_goes_entirely)
{
	obj("run/.ckptfs-pending/ckpt-3/w1@1", NOW - 10);
	obj("run/ckpt-3/model.pt", NOW - 9);
	obj("run/ckpt-3/sub/opt.pt", NOW - 9);
	obj("run/ckpt-3/sub/", NOW - 9);
	doc("run/ckpt-3/.ckptfs/manifest.w1.json", PENDING("w1"));
	obj("run/ckpt-2/model.pt", NOW - 500); /* other directories: kept */
	plan();
	cr_assert_eq(F.plan.n_txns, 1);
	cr_assert_str_eq(F.plan.txns[0].root, "run/ckpt-3/");
	cr_assert_null(F.plan.txns[0].skip);
	cr_assert_str_eq(F.plan.txns[0].pending_dir,
			 "run/.ckptfs-pending/ckpt-3/");
	cr_assert(deleted("run/ckpt-3/model.pt", GC_OBJECT));
	cr_assert(deleted("run/ckpt-3/sub/opt.pt", GC_OBJECT));
	cr_assert(deleted("run/ckpt-3/sub/", GC_OBJECT));
	cr_assert(deleted("run/ckpt-3/.ckptfs/manifest.w1.json", GC_MANIFEST));
	cr_assert(deleted("run/.ckptfs-pending/ckpt-3/w1@1", GC_MARKER));
	cr_assert_not(mentioned("run/ckpt-2/model.pt"));
	cr_assert_eq(F.plan.n_del, 5);
	/* order: objects, then the manifest, then the marker last */
	cr_assert_eq(F.plan.del[3].kind, GC_MANIFEST);
	cr_assert_eq(F.plan.del[4].kind, GC_MARKER);
}

Test(gc_plan, live_marker_is_left_alone)
{
	obj("run/.ckptfs-pending/ckpt-4/w2@600", NOW - 10);
	obj("run/ckpt-4/model.pt", NOW - 9);
	doc("run/ckpt-4/.ckptfs/manifest.w2.json", PENDING("w2"));
	plan();
	cr_assert_eq(F.plan.n_txns, 0);
	cr_assert_eq(F.plan.n_del, 0);
	cr_assert(gc_in_live_root(&F.plan, "run/ckpt-4/model.pt"));
	cr_assert_not(gc_in_live_root(&F.plan, "run/ckpt-40/model.pt"));
}

Test(gc_plan, lease_judged_by_server_clock)
{
	/* LastModified + lease == now: expired (readers show it) */
	obj("p/.ckptfs-pending/a/w@60", NOW - 60);
	/* one second short: live */
	obj("p/.ckptfs-pending/b/w@60", NOW - 59);
	obj("p/a/x", NOW);
	obj("p/b/x", NOW);
	plan();
	cr_assert(deleted("p/a/x", GC_OBJECT));
	cr_assert_not(mentioned("p/b/x"));
	cr_assert_not(mentioned("p/.ckptfs-pending/b/w@60"));
}

Test(gc_plan, committed_files_survive_a_dead_co_writer)
{
	/* multi-writer: w1 committed, w2 died */
	obj("r/.ckptfs-pending/c/w2@1", NOW - 100);
	doc("r/c/.ckptfs/manifest.w1.json",
	    COMMITTED("w1", F1("rank0.pt") "," F1("sub/meta.json")));
	doc("r/c/.ckptfs/manifest.w2.json", PENDING("w2"));
	obj("r/c/rank0.pt", NOW - 200);
	obj("r/c/sub/meta.json", NOW - 200);
	obj("r/c/sub/", NOW - 200);
	obj("r/c/rank1.pt", NOW - 150);
	plan();
	cr_assert(deleted("r/c/rank1.pt", GC_OBJECT));
	cr_assert_not(mentioned("r/c/rank0.pt"));
	cr_assert_not(mentioned("r/c/sub/meta.json"));
	cr_assert_not(mentioned("r/c/sub/"), "directory of committed files");
	cr_assert_not(mentioned("r/c/.ckptfs/manifest.w1.json"));
	cr_assert(deleted("r/c/.ckptfs/manifest.w2.json", GC_MANIFEST));
	cr_assert(deleted("r/.ckptfs-pending/c/w2@1", GC_MARKER));
}

Test(gc_plan, live_co_writer_protects_everything)
{
	obj("r/.ckptfs-pending/c/w1@1", NOW - 100);
	obj("r/.ckptfs-pending/c/w2@600", NOW - 100);
	obj("r/c/rank1.pt", NOW - 150);
	doc("r/c/.ckptfs/manifest.w1.json", PENDING("w1"));
	plan();
	cr_assert_eq(F.plan.n_txns, 0, "a root with a live marker is no "
				       "abandoned transaction");
	cr_assert_eq(F.plan.n_del, 0);
}

Test(gc_plan, live_marker_below_or_above_protects)
{
	obj("r/.ckptfs-pending/c/w1@1", NOW - 100);
	obj("r/c/.ckptfs-pending/d/w2@600", NOW - 1);
	obj("r/c/d/x", NOW - 1);
	obj(".ckptfs-pending/top/w3@600", NOW - 1);
	obj("top/.ckptfs-pending/in/w4@1", NOW - 100);
	obj("top/in/y", NOW - 100);
	plan();
	cr_assert_eq(F.plan.n_txns, 2);
	cr_assert_not_null(F.plan.txns[0].skip);
	cr_assert_not_null(F.plan.txns[1].skip);
	cr_assert_eq(F.plan.n_del, 0);
}

Test(gc_plan, completed_commit_keeps_its_files)
{
	/* died between the committed manifest and the marker's DELETE */
	obj("r/.ckptfs-pending/c/w1@1", NOW - 100);
	doc("r/c/.ckptfs/manifest.w1.json", COMMITTED("w1", F1("a.pt")));
	obj("r/c/a.pt", NOW - 100);
	plan();
	cr_assert_not(mentioned("r/c/a.pt"));
	cr_assert_not(mentioned("r/c/.ckptfs/manifest.w1.json"));
	cr_assert(deleted("r/.ckptfs-pending/c/w1@1", GC_MARKER));
	cr_assert_eq(F.plan.n_del, 1);
}

Test(gc_plan, manifests_above_protect_files_below)
{
	/* an addendum transaction inside a committed directory */
	doc("g/.ckptfs/manifest.w0.json", COMMITTED("w0", F1("c/old.pt")));
	doc("g/.ckptfs/manifest.w1.7.json", PENDING("w1"));
	doc("g/.ckptfs/manifest.w9.3.json", PENDING("w9"));
	obj("g/.ckptfs-pending/c/w1@1", NOW - 100);
	obj("g/.ckptfs-pending/other/w9@600", NOW - 1);
	obj("g/c/old.pt", NOW - 1000);
	obj("g/c/new.pt", NOW - 100);
	plan();
	cr_assert_not(mentioned("g/c/old.pt"));
	cr_assert(deleted("g/c/new.pt", GC_OBJECT));
	cr_assert(deleted("g/.ckptfs/manifest.w1.7.json", GC_MANIFEST),
		  "the dead writer's addendum");
	cr_assert_not(mentioned("g/.ckptfs/manifest.w9.3.json"),
		      "a live writer's addendum");
	cr_assert_not(mentioned("g/.ckptfs/manifest.w0.json"));
}

Test(gc_plan, committed_dirs_keep_their_markers)
{
	obj("r/.ckptfs-pending/c/w2@1", NOW - 100);
	doc("r/c/.ckptfs/manifest.w1.json",
	    "{\"version\":1,\"writer\":\"w1\",\"state\":\"committed\","
	    "\"files\":[],\"dirs\":[{\"path\":\"empty\"}]}");
	obj("r/c/empty/", NOW - 100);
	obj("r/c/junk/", NOW - 100);
	plan();
	cr_assert_not(mentioned("r/c/empty/"));
	cr_assert(deleted("r/c/junk/", GC_OBJECT));
}

Test(gc_plan, unreadable_manifest_skips_the_root)
{
	obj("r/.ckptfs-pending/c/w1@1", NOW - 100);
	doc("r/c/.ckptfs/manifest.w0.json", "{not json");
	obj("r/c/a.pt", NOW - 100);
	plan();
	cr_assert_eq(F.plan.n_txns, 1);
	cr_assert_not_null(F.plan.txns[0].skip);
	cr_assert_eq(F.plan.n_del, 0);
}

Test(gc_plan, other_writers_pending_manifest_is_kept)
{
	/* a pending manifest whose writer holds no marker here is not ours
	 * to delete (it may belong to a writer whose marker is elsewhere) */
	obj("r/.ckptfs-pending/c/w1@1", NOW - 100);
	doc("r/c/.ckptfs/manifest.w1.json", PENDING("w1"));
	doc("r/c/.ckptfs/manifest.w11.json", PENDING("w11"));
	plan();
	cr_assert(deleted("r/c/.ckptfs/manifest.w1.json", GC_MANIFEST));
	cr_assert_not(mentioned("r/c/.ckptfs/manifest.w11.json"));
}

Test(gc_plan, manifests_needed_are_on_the_branch)
{
	obj("r/.ckptfs-pending/c/w1@1", NOW - 100);
	doc("r/c/.ckptfs/manifest.w1.json", PENDING("w1"));
	doc(".ckptfs/manifest.w0.json", COMMITTED("w0", F1("x")));
	doc("r/c/d/.ckptfs/manifest.w3.json", COMMITTED("w3", F1("y")));
	doc("r/cc/.ckptfs/manifest.w4.json", COMMITTED("w4", F1("z")));
	doc("s/.ckptfs/manifest.w5.json", COMMITTED("w5", F1("z")));
	size_t *idx, nk;
	cr_assert_eq(gc_manifests_needed(F.objs, F.n, NOW, &idx, &nk), 0);
	cr_assert_eq(nk, 3);
	cr_assert_str_eq(F.objs[idx[0]].key, "r/c/.ckptfs/manifest.w1.json");
	cr_assert_str_eq(F.objs[idx[1]].key, ".ckptfs/manifest.w0.json");
	cr_assert_str_eq(F.objs[idx[2]].key, "r/c/d/.ckptfs/manifest.w3.json");
	free(idx);
}

Test(gc_plan, nothing_to_do)
{
	obj("a/b", NOW);
	doc("a/.ckptfs/manifest.w.json", COMMITTED("w", F1("b")));
	plan();
	cr_assert_eq(F.plan.n_txns, 0);
	cr_assert_eq(F.plan.n_del, 0);
}

/* ---- unfinished deletes (a delete record: doc/commit.md) ------------------- */

Test(gc_plan, unfinished_delete_is_finished_whatever_its_age)
{
	/* a committed checkpoint, its delete record PUT a second ago by a
	 * writer that died: everything under it goes, data first, then its
	 * manifest and hints, the record last; no lease is waited for */
	obj("run/.ckptfs-pending/ckpt-5/w1.gone@86400", NOW - 1);
	obj("run/ckpt-5/model.pt", NOW - 50);
	obj("run/ckpt-5/sub/opt.pt", NOW - 50);
	obj("run/ckpt-5/.ckptfs-meta/model.pt", NOW - 50);
	doc("run/ckpt-5/.ckptfs/manifest.w1.json",
	    COMMITTED("w1", F1("model.pt") "," F1("sub/opt.pt")));
	obj("run/ckpt-6/model.pt", NOW - 50); /* a neighbour: kept */
	plan();
	cr_assert_eq(F.plan.n_txns, 1);
	cr_assert(F.plan.txns[0].gone);
	cr_assert_null(F.plan.txns[0].skip);
	cr_assert(deleted("run/ckpt-5/model.pt", GC_OBJECT));
	cr_assert(deleted("run/ckpt-5/sub/opt.pt", GC_OBJECT));
	cr_assert(deleted("run/ckpt-5/.ckptfs/manifest.w1.json", GC_MANIFEST));
	cr_assert(deleted("run/ckpt-5/.ckptfs-meta/model.pt", GC_MANIFEST));
	cr_assert(deleted("run/.ckptfs-pending/ckpt-5/w1.gone@86400",
			  GC_MARKER));
	cr_assert_not(mentioned("run/ckpt-6/model.pt"));
	cr_assert_eq(F.plan.n_del, 5);
	cr_assert_eq(F.plan.del[0].kind, GC_OBJECT);
	cr_assert_eq(F.plan.del[1].kind, GC_OBJECT);
	cr_assert_eq(F.plan.del[4].kind, GC_MARKER);
}

Test(gc_plan, unfinished_delete_keeps_what_came_after_it)
{
	/* the name written again by another host after the delete was
	 * decided: its keys are newer than the record and stay, and so does
	 * its live marker */
	obj("p/.ckptfs-pending/c/w1.gone@86400", NOW - 30);
	obj("p/.ckptfs-pending/c/w2@600", NOW - 5);
	obj("p/c/old.bin", NOW - 40);
	obj("p/c/new.bin", NOW - 5);
	plan();
	cr_assert(deleted("p/c/old.bin", GC_OBJECT));
	cr_assert_not(mentioned("p/c/new.bin"));
	cr_assert(deleted("p/.ckptfs-pending/c/w1.gone@86400", GC_MARKER));
	cr_assert_not(mentioned("p/.ckptfs-pending/c/w2@600"));
}

Test(gc_marker, gone_records)
{
	cr_assert(gc_is_gone_key("run/.ckptfs-pending/ckpt-3/host-ab12.gone@86400"));
	cr_assert(gc_is_gone_key(".ckptfs-pending/c/w.gone@86400"));
	cr_assert_not(gc_is_gone_key("run/.ckptfs-pending/ckpt-3/host-ab12@60"));
	cr_assert_not(gc_is_gone_key("run/ckpt-3/w.gone@86400"));
	cr_assert_not(gc_is_gone_key("run/.ckptfs-pending/ckpt-3/.gone@86400"));
}
