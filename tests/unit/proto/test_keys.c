/* Unit tests for proto/keys: temp names, the path rules, key names (and
 * the reader parsing the marker the writer names), writer ids, manifest
 * names. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "proto/keys.h"
#include "proto/visibility.h"

Test(proto, temp_patterns)
{
	proto_pats p;
	cr_assert_eq(proto_pats_parse(&p, NULL), 0);
	cr_assert(proto_is_temp(&p, "ckpt/model.pt.tmp"));
	cr_assert(proto_is_temp(&p, "tmpdir"));
	cr_assert(proto_is_temp(&p, "a/b/_checkpoint"));
	cr_assert(proto_is_temp(&p, "x.orbax-checkpoint-tmp-12"));
	cr_assert(proto_is_temp(&p, "state.tempstate123"));
	cr_assert(proto_is_temp(&p, "step_temp"));
	cr_assert(proto_is_temp(&p, "a.__lock"));
	cr_assert_not(proto_is_temp(&p, "ckpt/model.pt"));
	cr_assert_not(proto_is_temp(&p, "tmp/model.pt"), "last component only");
	cr_assert(proto_has_temp(&p, "tmp/model.pt"));
	cr_assert(proto_has_temp(&p, "a/step.tmp/b"));
	cr_assert_not(proto_has_temp(&p, "checkpoint-100/model.safetensors"));
	proto_pats_free(&p);
	cr_assert_eq(proto_pats_parse(&p, " *.part , x?"), 0);
	cr_assert_eq(p.n, 2);
	cr_assert(proto_is_temp(&p, "a.part"));
	cr_assert(proto_is_temp(&p, "xy"));
	cr_assert_not(proto_is_temp(&p, "a.tmp"));
	proto_pats_free(&p);
}

Test(proto, paths_and_overlap)
{
	const char *rest;
	cr_assert(proto_under("a/b/c", "a/b", &rest));
	cr_assert_str_eq(rest, "c");
	cr_assert(proto_under("a/b", "a/b", &rest));
	cr_assert_str_eq(rest, "");
	cr_assert_not(proto_under("a/bc", "a/b", NULL));
	cr_assert(proto_under("x", "", &rest));
	cr_assert_str_eq(rest, "x");
	cr_assert(proto_overlap("a", "a/b"));
	cr_assert(proto_overlap("a/b", "a"));
	cr_assert_not(proto_overlap("a", "ab"));
}

Test(proto, keys)
{
	char *k = proto_marker_key("pre/", "runs/ckpt-10", "h-0a0b0c0d", 60);
	cr_assert_str_eq(k, "pre/runs/.ckptfs-pending/ckpt-10/h-0a0b0c0d@60");
	char *child = NULL;
	unsigned lease = 0;
	/* the reader parses what we write (relative to P/.ckptfs-pending/) */
	cr_assert_eq(vis_parse_marker(strstr(k, "pending/") + 8, &child, &lease),
		     0);
	cr_assert_str_eq(child, "ckpt-10");
	cr_assert_eq(lease, 60);
	free(child);
	free(k);
	k = proto_marker_key("", "top", "w", 30);
	cr_assert_str_eq(k, ".ckptfs-pending/top/w@30");
	free(k);
	k = proto_manifest_key("p/", "c", "w");
	cr_assert_str_eq(k, "p/c/.ckptfs/manifest.w.json");
	free(k);
	k = proto_addendum_key("p/", "m", "w", 7);
	cr_assert_str_eq(k, "p/m/.ckptfs/manifest.w.7.json");
	free(k);
}

Test(proto, writer_id)
{
	char w[PROTO_WRITER_MAX];
	proto_writer_id(w);
	size_t n = strlen(w);
	cr_assert_gt(n, 9);
	cr_assert_eq(w[n - 9], '-');
	for (size_t i = 0; i < n; i++)
		cr_assert(strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS"
				 "TUVWXYZ0123456789-",
				 w[i]),
			  "%s", w);
	char w2[PROTO_WRITER_MAX];
	proto_writer_id(w2);
	cr_assert_str_neq(w, w2);
}

Test(proto, manifest_names)
{
	cr_assert(proto_is_manifest_name("manifest.w.json"));
	cr_assert(proto_is_manifest_name("manifest.h-0a0b0c0d.7.json"));
	cr_assert_not(proto_is_manifest_name("manifest.json"), "no writer");
	cr_assert_not(proto_is_manifest_name("manifest.w.txt"));
	cr_assert_not(proto_is_manifest_name("other.w.json"));
	cr_assert_not(proto_is_manifest_name("sub/manifest.w.json"));
	cr_assert(proto_manifest_of("manifest.w.json", "w"));
	cr_assert(proto_manifest_of("manifest.w.12.json", "w"));
	cr_assert_not(proto_manifest_of("manifest.w.json", "v"));
	cr_assert_not(proto_manifest_of("manifest.wx.json", "w"));
	cr_assert_not(proto_manifest_of("manifest.w.1x.json", "w"));
	cr_assert_not(proto_manifest_of("manifest.w..json", "w"));
	cr_assert_not(proto_manifest_of("other.w.json", "w"));
	/* what the writer names, the reader recognises */
	char *k = proto_addendum_key("", "m", "w", 7);
	cr_assert(proto_is_manifest_name(strrchr(k, '/') + 1));
	cr_assert(proto_manifest_of(strrchr(k, '/') + 1, "w"));
	free(k);
	k = proto_manifest_key("p/", "c", "w");
	cr_assert(proto_is_meta_key(k + strlen("p/c/")));
	cr_assert(proto_manifest_of(strrchr(k, '/') + 1, "w"));
	free(k);
}

Test(proto, metadata_hints)
{
	char *k = proto_hint_key("pre/", "run/latest");
	cr_assert_str_eq(k, "pre/run/.ckptfs-meta/latest");
	const char *name = NULL;
	cr_assert(proto_is_hint_key(k, &name));
	cr_assert_str_eq(name, "latest");
	free(k);
	k = proto_hint_key("", "latest");
	cr_assert_str_eq(k, ".ckptfs-meta/latest");
	cr_assert(proto_is_hint_key(k, &name));
	cr_assert_str_eq(name, "latest");
	cr_assert(proto_in_hint_dir(k));
	free(k);
	k = proto_hint_key("p/", "a/b/c d");
	cr_assert_str_eq(k, "p/a/b/.ckptfs-meta/c d");
	free(k);
	/* what is not a hint */
	cr_assert_not(proto_is_hint_key("run/latest", NULL));
	cr_assert_not(proto_is_hint_key("run/.ckptfs-meta/", NULL));
	cr_assert_not(proto_is_hint_key("run/x.ckptfs-meta/a", NULL));
	cr_assert_not(proto_is_hint_key("run/.ckptfs-metadata/a", NULL));
	cr_assert_not(proto_is_hint_key("run/.ckptfs/manifest.w.json", NULL));
	cr_assert_not(proto_is_hint_key("run/.ckptfs-pending/c/w@60", NULL));
	cr_assert_not(proto_is_hint_key(".ckptfs-meta/a/b", NULL),
		      "a hint names one component");
	cr_assert(proto_in_hint_dir(".ckptfs-meta/a/b"));
	cr_assert(proto_in_hint_dir("x/.ckptfs-meta/a"));
	cr_assert_not(proto_in_hint_dir("x/y.ckptfs-meta/a"));
	cr_assert_not(proto_in_hint_dir("x/.ckptfs-meta"));
	/* reserved: the namespace rules hide it */
	cr_assert_eq(strncmp(PROTO_HINT_DIR, PROTO_RESERVED,
			     strlen(PROTO_RESERVED)), 0);
}

/* A renamed directory's manifest names its old name relative to itself
 * (doc/commit.md, "Deletes and renames"), resolved in key space. */
Test(proto, relative_paths_between_directories)
{
	struct { const char *from, *to, *rel, *key, *resolved; } c[] = {
		{"run/ckpt-2", "run/ckpt-1", "../ckpt-1", "p/run/ckpt-2/",
		 "p/run/ckpt-1/"},
		{"a", "b", "../b", "a/", "b/"},
		{"x/y", "x", "..", "p/x/y/", "p/x/"},
		{"best", "runs/r1/ckpt-9", "../runs/r1/ckpt-9", "best/",
		 "runs/r1/ckpt-9/"},
		{"runs/r1/ckpt-9", "best", "../../../best", "q/runs/r1/ckpt-9/",
		 "q/best/"},
		{"ab/c", "a/c", "../../a/c", "ab/c/", "a/c/"},
	};
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		char *r = proto_rel_path(c[i].from, c[i].to);
		cr_assert_str_eq(r, c[i].rel, "%s -> %s", c[i].from, c[i].to);
		char *k = proto_key_resolve(c[i].key, r);
		cr_assert_str_eq(k, c[i].resolved, "%s + %s", c[i].key, r);
		free(k);
		free(r);
	}
	cr_assert_null(proto_key_resolve("a/", "../.."));
	cr_assert_null(proto_key_resolve("a/", ""));
	cr_assert_null(proto_key_resolve("a", "../b"));
}

/* S3 takes keys of at most 1 024 bytes: a writer refuses longer names
 * (ENAMETOOLONG); a directory's keys are one byte longer at least. */
Test(proto, key_fits)
{
	char path[PROTO_KEY_MAX + 2];
	memset(path, 'a', sizeof path - 1);
	path[sizeof path - 1] = '\0';
	path[PROTO_KEY_MAX - 4] = '\0'; /* 1020 bytes */
	cr_assert(proto_key_fits("pre/", path, false));
	cr_assert_not(proto_key_fits("pre/", path, true));
	cr_assert(proto_key_fits("pre", path, true));
	path[PROTO_KEY_MAX - 4] = 'a';
	path[PROTO_KEY_MAX] = '\0'; /* 1024 bytes */
	cr_assert(proto_key_fits("", path, false));
	cr_assert(proto_key_fits(NULL, path, false));
	cr_assert_not(proto_key_fits("p/", path, false));
	cr_assert_not(proto_key_fits("", path, true));
}
