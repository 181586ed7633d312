/*
 * fs_ops: the FUSE low-level operations of the mount, and the context they
 * share (fs_ctx).
 *
 * One function per fuse_lowlevel_ops entry, each replying exactly once.
 * Reads: directory contents come from ListObjectsV2 listings cached per
 * directory inode for dir_timeout seconds (namespace rules in
 * proto/namespace.h); file attributes come from those listings, manifests
 * and object metadata, and are refreshed by a HEAD at open, which also pins
 * the ETag the handle reads.  Reads are served from the local cache
 * (cache/cache.h) by splicing from the cache file; when the cache cannot
 * take the object (pinned data fills it) the handle reads uncached with
 * ranged GETs that carry If-Match, so a handle never mixes two versions of
 * an object either way.
 *
 * Writes (doc/commit.md, "The FUSE layer"): with a commit engine attached
 * (fs_ctx_set_engine) the mount is writable; what is written is staged
 * locally, shows in the mount at once through an overlay over the remote
 * namespace, and is committed to the bucket in transactions.  Without an
 * engine (-o ro) every write fails with EROFS.
 */
#ifndef CKPTFS_FS_OPS_H
#define CKPTFS_FS_OPS_H

#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cache/cache.h"
#include "fs/opts.h"
#include "fs/passthrough.h"
#include "s3/client.h"

typedef struct fs_ctx fs_ctx;

/* prefix: "" or "a/b/" (the bucket prefix that is the mount's root).
 * rc, the read cache, may be NULL (every read goes to S3). */
fs_ctx *fs_ctx_new(s3_client *s3, cache *rc, const char *prefix,
		   const fs_opts *o);
/* Frees handles the kernel never released (a lazy or forced unmount);
 * call after the FUSE session ended, while the cache is still up. */
void fs_ctx_close_handles(fs_ctx *fs);
void fs_ctx_free(fs_ctx *fs);

const struct fuse_lowlevel_ops *fs_lowlevel_ops(void);

/* The FUSE session, for notifications to the kernel (set once, before
 * the session serves requests). */
void fs_ctx_set_session(fs_ctx *fs, struct fuse_session *se);

/* The passthrough state of this mount (fs/passthrough.h). */
fs_pt *fs_ctx_pt(fs_ctx *fs);

/* The mount's completion rules (proto/complete.h), for listings made
 * outside the fs (ctl's prefetch). */
struct vis_rules;
const struct vis_rules *fs_ctx_complete(fs_ctx *fs);

/* ---- writes (fs/write*.c) --------------------------------------------- */

typedef struct eng eng;

/* Attaches the commit engine: from then on the mount is writable.  Without
 * one every write fails with EROFS (-o ro).  commit_delay: seconds without
 * an open handle or a change after which a transaction commits. */
void fs_ctx_set_engine(fs_ctx *fs, eng *e, double commit_delay);
eng *fs_ctx_engine(fs_ctx *fs);
/* After a restart: files the journal still holds show in the mount again
 * (read-only) until they are visible remotely. */
void fs_ctx_restore(fs_ctx *fs);
/* Stops the idle-commit thread (before the engine closes). */
void fs_ctx_stop_writes(fs_ctx *fs);

/* `ckptfs commit PATH` (relpath relative to the mount root, "" = root):
 * seals every transaction at or under relpath, or the one holding it, and
 * waits until they are visible.  Returns 0, or -errno with a message in
 * err (-ENOENT: nothing pending there). */
int fs_commit_path(fs_ctx *fs, const char *relpath, char *err, size_t errsz);

/* `ckptfs sync`: seals every open transaction and waits for the whole
 * queue (eng_sync).  progress may be NULL. */
int fs_sync(fs_ctx *fs,
	    void (*progress)(void *arg, uint64_t done, uint64_t total),
	    void *arg);

#endif
