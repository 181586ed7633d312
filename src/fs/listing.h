/*
 * fs_listing: fetching one directory's view from S3 — the delimiter
 * listing (namespace rules), minus children hidden by live pending markers,
 * plus the directory's own manifests when it is a transaction root
 * (proto/visibility.h).  Runs without any fs lock held (network I/O).
 */
#ifndef CKPTFS_FS_LISTING_H
#define CKPTFS_FS_LISTING_H

#include "fs/mcache.h"
#include "proto/namespace.h"
#include "proto/visibility.h"
#include "s3/client.h"

/*
 * Lists dir_prefix ("" or ending in '/') into out (initialised here with
 * report/arg).  hints: when the listing shows ".ckptfs-meta/", list it and
 * mark the entries it names (ns_entry.hinted; doc/commit.md, "Metadata
 * hints").  *manifest is set to the directory's manifests (malloc'd,
 * caller frees with vis_manifest_free + free) or NULL when it has none;
 * manifest bodies come from mc when it holds their listed ETag (mc may be
 * NULL: every manifest is downloaded).  Returns 0, or -1 with e filled.
 */
int fs_listing_fetch(s3_client *s3, fs_mcache *mc, const char *dir_prefix,
		     bool hints, ns_report_fn report, void *arg, ns_dir *out,
		     vis_manifest **manifest, s3_err *e);

#endif
