/*
 * fs_mcache: bodies of manifests already downloaded, by key and ETag.
 *
 * A transaction root accumulates manifests: one per writer, and one
 * addendum per later transaction committed inside it (a checkpoint saved
 * into a run directory made through the mount adds one each time).  A
 * listing of such a directory reads all of them; with this cache it GETs
 * only those whose ETag it has not seen, so a directory with a thousand
 * addenda costs one LIST of .ckptfs/ instead of a thousand GETs per look.
 * Bodies are kept up to a byte budget, the oldest stored going first.
 * Thread-safe.
 */
#ifndef CKPTFS_FS_MCACHE_H
#define CKPTFS_FS_MCACHE_H

#include <stddef.h>

typedef struct fs_mcache fs_mcache;

/* NULL on ENOMEM.  max_bytes: budget for the bodies (0: a default). */
fs_mcache *fs_mcache_new(size_t max_bytes);
void fs_mcache_free(fs_mcache *mc);

/* A malloc'd copy of the body stored for key with exactly etag (*len set),
 * or NULL. */
char *fs_mcache_get(fs_mcache *mc, const char *key, const char *etag,
		    size_t *len);

/* Stores body (copied) for key/etag, replacing what key had.  A body over
 * the whole budget is not kept.  Returns -1 on ENOMEM (nothing stored). */
int fs_mcache_put(fs_mcache *mc, const char *key, const char *etag,
		  const char *body, size_t len);

/* Bytes and entries held (tests, status). */
size_t fs_mcache_bytes(fs_mcache *mc);
size_t fs_mcache_count(fs_mcache *mc);

#endif
