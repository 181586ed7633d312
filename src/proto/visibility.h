/*
 * vis: what readers see of transactions written by ckptfs mounts (the
 * reader side of the format, doc/commit.md).  The writer's side, which
 * makes transactions visible in order, is commit/visible.c.
 *
 * Pending markers: P/.ckptfs-pending/<C>/<writer>@<lease-seconds>
 * (proto/keys.h).  A child C of P with a live marker (LastModified + lease
 * later than the server's clock at listing time) is hidden: its
 * transaction is in progress.  A delete record (writer "W.gone") is live
 * whatever its age: C is gone (ENOENT) from the moment it is PUT.
 *
 * Manifests (proto/manifest.h): a directory holding manifests in
 * .ckptfs/ shows exactly the union of the files of its committed
 * manifests (paths relative to it), plus the directories of "dirs" (empty
 * directories); pending manifests add nothing.  The time rule: when
 * several committed manifests name the same path (an addendum overwriting
 * a file, two writers), the entry of the manifest with the greatest
 * "time" (the writer's clock at commit, ns since the epoch; absent = 0)
 * wins, ties going to the one added last (vis_manifest_finish).
 * A directory whose manifests are all pending, with no live marker left,
 * is an abandoned transaction and is hidden too.  Directories without
 * manifests (written by other tools) show every key.
 *
 * The functions below apply these rules to finished listings (ns_dir,
 * proto/namespace.h); fs/listing.c does the listing and fetching.
 */
#ifndef CKPTFS_PROTO_VISIBILITY_H
#define CKPTFS_PROTO_VISIBILITY_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "proto/manifest.h"
#include "proto/namespace.h"

/*
 * Parses a marker key relative to P/.ckptfs-pending/ ("C/W@60").  Fills
 * child (malloc'd) and lease; returns -1 for keys that are not markers.
 */
int vis_parse_marker(const char *rel, char **child, unsigned *lease);

/* Whether a marker key relative to P/.ckptfs-pending/ ("C/W.gone@86400")
 * is a delete record (proto_gone_key): its directory is gone, whatever
 * its age, until the record itself is deleted after the directory's
 * objects (doc/commit.md, "Deletes and renames"). */
bool vis_marker_is_gone(const char *rel);

/* Whether a marker written at last_modified with lease is live at now. */
bool vis_marker_live(time_t last_modified, unsigned lease, time_t now);

/*
 * Where the markers of directory dir_prefix ("P/C/", ending in '/') itself
 * live: "P/.ckptfs-pending/C/" (malloc'd), or NULL for "" (the bucket's
 * root has no parent) or no memory.
 */
char *vis_own_markers_prefix(const char *dir_prefix);

/*
 * Filters a finished listing of directory rel (relative to the transaction
 * root of m; "" for the root) down to what m makes visible.  m may be NULL
 * (no manifests: nothing is removed).
 */
void vis_filter_listing(ns_dir *d, const vis_manifest *m, const char *rel);

/* Removes the entries named in hidden[0..n) from a finished listing. */
void vis_hide_names(ns_dir *d, char *const *hidden, size_t n);

/* Removes the entries of d whose name is not in again (a later listing of
 * the same directory, finished). */
void vis_keep_listed(ns_dir *d, const ns_dir *again);

/* Removes every entry (a directory being created, deleted or renamed onto
 * by a ckptfs writer shows nothing inside). */
void vis_hide_all(ns_dir *d);

/* Whether listing d (finished) of a transaction root lacks a name that a
 * file of m (the root's manifests) needs: a file deleted since, or the
 * whole directory on its way out. */
bool vis_listing_misses(const ns_dir *d, const vis_manifest *m);

#endif
