/*
 * The mount's context (struct fs_ctx, fs/ctx.h): created before
 * the FUSE session, closed and freed after it.  Everything the operations
 * share hangs off it: the inode table, the manifest cache, the passthrough
 * state, open handles, and the write path's overlay, held deletes and
 * idle-commit thread.  This file sits on top of the others: freeing the
 * context stops the idle thread (fs/write-idle.c) and frees the handles
 * the kernel never released, of both sides.
 */
#include "fs/ops.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/ctx.h"
#include "fs/handles.h"
#include "fs/write-deletes.h"
#include "fs/write-dirattrs.h"
#include "fs/write-idle.h"
#include "fs/write-resume.h"
#include "fs/write-sync.h"
#include "fs/write.h"
#include "util/log.h"

/* The kernel forgot an inode: its passthrough backing can go. */
static void inode_freed(void *arg, fs_inode *n)
{
	fs_ctx *fs = arg;
	if (n->pt_backing_id > 0)
		fs_pt_backing_close(&fs->pt, n->pt_backing_id);
}

/* The write path's state (fs/write-*.h). */
static void writes_init(fs_ctx *fs)
{
	ov_init(&fs->ov);
	pthread_cond_init(&fs->idle_cv, NULL);
	fs->dels = calloc(1, sizeof *fs->dels);
}

static void writes_destroy(fs_ctx *fs)
{
	wr_shutdown(fs);
	wr_dirattr_free(fs);
	ov_destroy(&fs->ov);
	pthread_cond_destroy(&fs->idle_cv);
	if (fs->dels) {
		wr_dels_clear(fs->dels);
		free(fs->dels->v);
		free(fs->dels);
	}
}

fs_ctx *fs_ctx_new(s3_client *s3, cache *rc, const char *prefix,
		   const fs_opts *o)
{
	fs_ctx *fs = calloc(1, sizeof *fs);
	if (!fs)
		return NULL;
	fs->s3 = s3;
	fs->cache = rc;
	fs->prefix = strdup(prefix);
	fs->pt.wanted = o->passthrough;
	fs->it = fs_itable_new();
	fs->mcache = fs_mcache_new(0);
	fs->metacache = fs_mcache_new(16u << 20);
	fs->o = *o;
	if (!fs->o.readahead_max)
		fs->o.readahead_max = 8u << 20;
	char *err = NULL;
	if (vis_rules_parse(&fs->complete,
			    o->complete ? o->complete : VIS_RULES_DEFAULT,
			    &err) < 0) {
		log_error("%s", err ? err : "out of memory");
		free(err);
		fs_ctx_free(fs);
		return NULL;
	}
	fs->o.complete = NULL; /* the caller's string: parsed above */
	clock_gettime(CLOCK_REALTIME, &fs->mount_time);
	pthread_mutex_init(&fs->log_mu, NULL);
	if (!fs->prefix || !fs->it || !fs->mcache || !fs->metacache) {
		fs_ctx_free(fs);
		return NULL;
	}
	fs_itable_root(fs->it)->mtime = fs->mount_time;
	fs_itable_set_free_hook(fs->it, inode_freed, fs);
	writes_init(fs);
	return fs;
}

void fs_ctx_free(fs_ctx *fs)
{
	if (!fs)
		return;
	writes_destroy(fs);
	fs_itable_free(fs->it);
	fs_mcache_free(fs->mcache);
	vis_rules_free(&fs->complete);
	fs_mcache_free(fs->metacache);
	pthread_mutex_destroy(&fs->log_mu);
	free(fs->prefix);
	free(fs);
}

void fs_ctx_close_handles(fs_ctx *fs)
{
	if (!fs)
		return;
	for (;;) {
		fs_itable_lock(fs->it);
		fs_handle *h = fs->handles;
		fs_dirhandle *dh = fs->dirhandles;
		if (dh)
			fs_dirhandle_unlink(fs, dh);
		fs_itable_unlock(fs->it);
		if (h && h->ov) /* a local file's: unlinks it */
			wr_handle_free(fs, h, true);
		else if (h)
			fs_handle_free(fs, h, true); /* unlinks it */
		if (dh)
			fs_dirhandle_free(dh);
		if (!h && !dh)
			break;
	}
}

void fs_ctx_set_session(fs_ctx *fs, struct fuse_session *se)
{
	fs->se = se;
}

const struct vis_rules *fs_ctx_complete(fs_ctx *fs)
{
	return &fs->complete;
}

fs_pt *fs_ctx_pt(fs_ctx *fs)
{
	return &fs->pt;
}

eng *fs_ctx_engine(fs_ctx *fs)
{
	return fs->eng;
}

/* ---- the write path's part of fs/ops.h -------------------------------- */

void fs_ctx_set_engine(fs_ctx *fs, eng *e, double commit_delay)
{
	wr_set_engine(fs, e, commit_delay);
}

void fs_ctx_stop_writes(fs_ctx *fs)
{
	wr_shutdown(fs);
	/* the engine closes next: what was never handed to it goes now
	 * (a failed write's staging file), not when fs_ctx_free frees the
	 * overlay and the discard would reach the closed engine */
	fs_itable_lock(fs->it);
	ov_discard_unhanded(&fs->ov);
	fs_itable_unlock(fs->it);
}

void fs_ctx_restore(fs_ctx *fs)
{
	wr_restore(fs);
}

int fs_commit_path(fs_ctx *fs, const char *relpath, char *err, size_t errsz)
{
	return wr_commit_path(fs, relpath, err, errsz);
}

int fs_sync(fs_ctx *fs,
	    void (*progress)(void *arg, uint64_t done, uint64_t total),
	    void *arg)
{
	return wr_sync(fs, progress, arg);
}
