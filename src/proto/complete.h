/*
 * vis_rules: completion rules, what a checkpoint framework writes last
 * (doc/commit.md, "Completion rules").  A rule TRIGGER/REQUIRED says: a
 * directory holding a file whose name matches TRIGGER (fnmatch) is a
 * checkpoint that is complete only once it also holds a file matching
 * REQUIRED; until then readers see it empty.  The default,
 * "*.distcp/.metadata", is torch.distributed.checkpoint's: every rank
 * writes its __R_N.distcp, rank 0 writes .metadata after a barrier, and
 * a directory with shards and no .metadata cannot be loaded.
 *
 * The rule is applied by readers to every finished listing, after the
 * markers and manifests (proto/visibility.h) have done their part, so it
 * holds whichever host commits first and however long the barrier lasts.
 */
#ifndef CKPTFS_PROTO_COMPLETE_H
#define CKPTFS_PROTO_COMPLETE_H

#include <stdbool.h>
#include <stddef.h>

#include "proto/namespace.h"

#define VIS_RULES_DEFAULT "*.distcp/.metadata"

typedef struct vis_rule {
	char *trigger;
	char *required;
} vis_rule;

typedef struct vis_rules {
	vis_rule *v;
	size_t n, cap;
} vis_rules;

/*
 * Parses spec: rules TRIGGER/REQUIRED separated by ':' (mount options are
 * separated by commas), "" or "none" for no rule.  Replaces *r's rules.
 * Returns 0, or -1 with *err (malloc'd) naming the bad rule; *r is then
 * left empty.
 */
int vis_rules_parse(vis_rules *r, const char *spec, char **err);
void vis_rules_free(vis_rules *r);

/* Whether d (finished listing) holds a file matching some rule's trigger
 * and no file matching that rule's required pattern. */
bool vis_rules_incomplete(const ns_dir *d, const vis_rules *r);

/* Hides every entry of d when it is incomplete; returns whether it did. */
bool vis_rules_apply(ns_dir *d, const vis_rules *r);

#endif
