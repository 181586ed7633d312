/*
 * The control socket's commit triggers (fs_commit_path and fs_sync of fs/ops.h,
 * through fs/context.c): `ckptfs commit PATH`
 * seals the transactions at, under or holding a path and waits for them;
 * `ckptfs sync` (and unmount) seals every open transaction and waits for
 * the whole queue.
 */
#include "fs/write-sync.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commit/engine.h"
#include "fs/ctx.h"
#include "fs/write-deletes.h"
#include "fs/write-dirattrs.h"
#include "fs/write-idle.h"
#include "fs/write-txn.h"

/*
 * Waits (at most 2 s) for the releases of writable handles the application
 * has closed: release ends a handle's part in its transaction, which stays
 * open and unsealed until then, and hands passthrough writes over.  close()
 * returns at flush; the release comes asynchronously, so a `ckptfs sync`
 * run right after close() can arrive first.  Table locked.
 */
void wr_wait_releases(fs_ctx *fs)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 2;
	while (fs->wr_closing > 0 &&
	       fs_itable_timedwait(fs->it, &until) == 0)
		;
}

int wr_commit_path(fs_ctx *fs, const char *relpath, char *err, size_t errsz)
{
	if (!fs->eng) {
		snprintf(err, errsz, "the mount is read-only");
		return -EROFS;
	}
	size_t rl = strlen(relpath);
	uint64_t ids[256];
	size_t n = 0;
	bool temp = false;
	fs_itable_lock(fs->it);
	wr_wait_releases(fs);
	wr_flush_deletes(fs);
	for (ov_txn *x = fs->ov.txns; x && n < 256; x = x->next) {
		if (x->done)
			continue;
		bool at_or_under = rl == 0 || !strcmp(x->root, relpath) ||
				   (!strncmp(x->root, relpath, rl) &&
				    x->root[rl] == '/');
		bool holds = !strncmp(relpath, x->root, strlen(x->root)) &&
			     relpath[strlen(x->root)] == '/';
		if (!at_or_under && !holds)
			continue;
		if (x->is_dir && eng_is_temp_name(fs->eng, x->root)) {
			temp = true;
			continue;
		}
		wr_seal(fs, x);
		ids[n++] = x->id;
	}
	fs_itable_unlock(fs->it);
	if (n == 0) {
		snprintf(err, errsz,
			 temp ? "%s: only temporary names are pending there; "
				"they commit when renamed"
			      : "%s: nothing pending there",
			 relpath[0] ? relpath : "/");
		return -ENOENT;
	}
	for (size_t i = 0; i < n; i++) {
		int rc = eng_wait_txn(fs->eng, ids[i]);
		if (rc < 0) {
			snprintf(err, errsz, "%s: commit failed: %s",
				 relpath[0] ? relpath : "/", strerror(-rc));
			return rc;
		}
	}
	return 0;
}

/*
 * Seals every transaction of the mount, those with open handles too, before
 * an eng_sync: it seals the whole queue up to its tail, and a transaction
 * it commits that is still open here is one the next name joins, in a
 * transaction the engine has finished (a mkdir in it failed with ENOENT,
 * and a file closed in it was handed to nobody: lost).  Sealed here, a
 * name made later starts a transaction of its own (wr_txn_for_new), and
 * a file still open is put in a new one when closed (wr_put_stage), as
 * after `ckptfs commit`.  Table locked.
 */
void wr_seal_all(fs_ctx *fs)
{
	for (ov_txn *x = fs->ov.txns; x; x = x->next)
		if (!x->done)
			wr_seal(fs, x);
}

/* The transaction being committed (sealed) that path is a name inside
 * of, not its root, or NULL.  Table locked. */
static ov_txn *sealed_inside(fs_ctx *fs, const char *path)
{
	ov_node *o = ov_get(&fs->ov, path);
	ov_txn *x = o && o->kind != OV_WHITEOUT ? o->txn : NULL;
	return x && x->sealed && !x->done && strcmp(x->root, path) ? x : NULL;
}

int wr_wait_sealed(fs_ctx *fs, const char *a, const char *b)
{
	for (int i = 0; i < 2; i++) {
		ov_txn *x = sealed_inside(fs, i ? b : a);
		if (!x)
			continue;
		uint64_t id = x->id;
		/* what is ahead of it commits too (an open checkpoint
		 * would hold it for commit_delay), as for a remote rename */
		wr_seal_all(fs);
		fs_itable_unlock(fs->it);
		int rc = eng_wait_txn(fs->eng, id);
		fs_itable_lock(fs->it);
		wr_reap(fs); /* its names are remote now */
		if (rc < 0)
			return rc;
	}
	return 0;
}

int wr_rename_ready(fs_ctx *fs, fs_inode *np, const char *a, const char *b)
{
	int rc = wr_wait_sealed(fs, a, b);
	if (rc == 0)
		free(wr_manifest_root_known(fs, np));
	return rc;
}

int wr_sync_shown(fs_ctx *fs, const char *to)
{
	wr_seal_all(fs);
	fs_itable_unlock(fs->it);
	int rc = eng_sync(fs->eng, NULL, NULL);
	fs_itable_lock(fs->it);
	ov_node *w = rc == 0 ? ov_get(&fs->ov, to) : NULL;
	if (w && w->kind == OV_WHITEOUT)
		ov_remove(&fs->ov, w);
	fs->listing_gen++;
	return rc;
}

bool wr_rename_again(fs_ctx *fs, int *rc, const char *a, const char *b)
{
	if (*rc == -ENOENT)
		return wr_drop_if_done(fs, a);
	if (*rc != -EBUSY)
		return false;
	*rc = wr_wait_sealed(fs, a, b);
	return *rc == 0;
}

int wr_sync(fs_ctx *fs,
	    void (*progress)(void *arg, uint64_t done, uint64_t total),
	    void *arg)
{
	if (!fs->eng)
		return 0;
	fs_itable_lock(fs->it);
	wr_wait_releases(fs);
	wr_flush_deletes(fs);
	wr_seal_all(fs);
	fs_itable_unlock(fs->it);
	int rc = eng_sync(fs->eng, progress, arg);
	/* what became visible is remote from now on, not in 250 ms */
	fs_itable_lock(fs->it);
	wr_reap(fs);
	wr_dirattr_reap(fs);
	fs_itable_unlock(fs->it);
	return rc;
}
