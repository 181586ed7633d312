/*
 * s3/probe: what a mount checks about its server before it serves
 * (doc/portability.md).
 *
 * Listing mode.  A mount lists directories with ListObjectsV2 and the
 * delimiter '/'.  Some servers (s3rver 3) drop the common prefixes of keys
 * two or more levels down, which would hide directories and the commit
 * protocol's pending markers; for them the client lists without the
 * delimiter and folds the pages itself (S3_QUIRK_FLAT_LISTING,
 * s3/listfold.h).  -o listing=auto decides at mount time:
 *   - a writable mount writes one empty object under probe_dir (a prefix
 *     of names ckptfs owns), lists probe_dir with the delimiter and
 *     deletes the object again: three requests, a definite answer;
 *   - a read-only mount writes nothing: it compares the first pages of
 *     its prefix listed with and without the delimiter, which tells only
 *     when a key two levels down is among the first thousand;
 *   - without a verdict (a read-only mount of a shallow or empty prefix, a
 *     refused probe write, a network error) the client lists flat, which
 *     is right on every server, and the first listing that meets a key
 *     two levels down settles the question with one more request
 *     (S3_QUIRK_LISTING_UNSURE, s3_list_all).
 * The mount goes on whatever the probe meets; each of its requests has at
 * most 3 attempts within 15 s, as the bucket check.
 */
#ifndef CKPTFS_S3_PROBE_H
#define CKPTFS_S3_PROBE_H

#include <stdbool.h>

#include "s3/client.h"

typedef enum {
	S3_LISTING_AUTO = 0,
	S3_LISTING_DELIMITER,
	S3_LISTING_FLAT,
} s3_listing_mode;

/* "auto", "delimiter", "flat": 0, or -1 for anything else. */
int s3_parse_listing_mode(const char *v, s3_listing_mode *out);

/*
 * Applies mode to c (S3_QUIRK_FLAT_LISTING), probing for AUTO as above
 * (probe_dir NULL: read-only, no writes; else ends with '/').  prefix is
 * the mount's key prefix.  Returns true when c lists flat (for now).
 */
bool s3_probe_listing(s3_client *c, s3_listing_mode mode, const char *prefix,
		      const char *probe_dir);

#endif
