/*
 * The restart from the journal (fs_ctx_restore): what a dead mount's
 * journal still holds — transactions, files, directories with their
 * attributes, deletes and renames — shows in the overlay again, as it did before the restart,
 * until the engine, resuming on its own, has made it visible (doc/commit.md,
 * "Resume rules").
 */
#include "fs/write-resume.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "commit/engine.h"
#include "fs/ctx.h"
#include "fs/write-deletes.h"
#include "fs/write-dirattrs.h"
#include "fs/write-local.h"
#include "util/log.h"

typedef struct restore_ctx {
	fs_ctx *fs;
	size_t n, txns;
} restore_ctx;

/* A directory node of x at path, unless one exists; merged with whatever
 * the bucket has there (the journal does not say which directories are
 * new).  Table locked. */
static ov_node *restore_dir_node(fs_ctx *fs, ov_txn *x, const char *path)
{
	ov_node *d = ov_get(&fs->ov, path);
	if (d)
		return NULL;
	d = ov_add(&fs->ov, path, OV_DIR, x);
	if (d) {
		d->merge = true;
		d->placeholder = true; /* until a journaled row says more */
		d->mode = 0755;
	}
	return d;
}

/* path's directories from its parent up to x's root (a directory
 * transaction's root is its topmost new directory: what lies above
 * exists without it).  Table locked. */
static void restore_parents(fs_ctx *fs, ov_txn *x, const char *path)
{
	size_t rl = x && x->is_dir ? strlen(x->root) : 0;
	char *dir = ov_parent(path);
	while (dir && dir[0]) {
		bool in_txn = x && x->is_dir &&
			      (!strcmp(dir, x->root) ||
			       (!strncmp(dir, x->root, rl) && dir[rl] == '/'));
		/* a transaction that is not a directory, or a path outside
		 * its root (not expected): keep the old rule, every parent */
		if (x && x->is_dir && !in_txn)
			break;
		restore_dir_node(fs, x, dir);
		char *up = ov_parent(dir);
		free(dir);
		dir = up;
	}
	free(dir);
}

/*
 * A transaction of the journal, as it was before the restart: its root and
 * kind, so that removing the root aborts it and renaming the root moves
 * it; sealed as it was, except that a temp-named root always waits for its
 * rename; an open one commits by the same triggers as before the crash
 * (its idle time starts now).  Table locked.
 */
static void restore_txn(void *arg, uint64_t txn, const char *root,
			bool is_dir, bool sealed)
{
	restore_ctx *r = arg;
	fs_ctx *fs = r->fs;
	if (ov_txn_find(&fs->ov, txn))
		return;
	ov_txn *x = ov_txn_add(&fs->ov, txn, root, is_dir);
	if (!x)
		return;
	x->sealed = sealed && !eng_path_has_temp(fs->eng, root);
	x->last_change = wr_now_s();
	if (is_dir) {
		restore_dir_node(fs, x, root);
		restore_parents(fs, x, root);
	}
	r->txns++;
}

static void restore_dir(void *arg, uint64_t txn, const char *path,
			const eng_meta *m)
{
	restore_ctx *r = arg;
	fs_ctx *fs = r->fs;
	ov_txn *x = ov_txn_find(&fs->ov, txn);
	if (!x)
		return;
	restore_parents(fs, x, path);
	ov_node *d = restore_dir_node(fs, x, path);
	if (!d) { /* made already: the root, or a parent of an earlier row */
		ov_node *e = ov_get(&fs->ov, path);
		d = e && e->kind == OV_DIR && e->txn == x ? e : NULL;
	}
	if (d && m) {
		d->placeholder = false;
		d->mode = m->mode;
		d->uid = m->uid;
		d->gid = m->gid;
		d->mtime = d->ctime = m->mtime;
		buf_free(&d->xattrs); /* journal version 5 keeps them */
		if (m->xattrs_len)
			buf_append(&d->xattrs, m->xattrs, m->xattrs_len);
	}
}

static void restore_one(void *arg, uint64_t txn, const char *path,
			const char *staging_path, uint64_t size,
			const eng_meta *m)
{
	restore_ctx *r = arg;
	fs_ctx *fs = r->fs;
	ov_node *had = ov_get(&fs->ov, path);
	if (had && had->put && (had->kind == OV_FILE || had->kind == OV_LINK)) {
		/* the files come in queue order: an earlier transaction's
		 * version of path (committing when the file was written
		 * again, or renamed away and the name written anew) is
		 * replaced by the later one, as it was before the restart
		 * and as the bucket will be once both are visible.  Before,
		 * the first one stayed: a file renamed and rewritten showed
		 * its old bytes after a SIGKILL (model seed 9000) */
		ov_remove(&fs->ov, had);
		r->n--;
	} else if (had) {
		return;
	}
	ov_txn *x = ov_txn_find(&fs->ov, txn);
	if (!x && (x = ov_txn_add(&fs->ov, txn, path, false)))
		x->sealed = true; /* the engine resumes it on its own */
	int fd = staging_path ? open(staging_path, O_RDONLY | O_CLOEXEC) : -1;
	ov_node *o = x ? ov_add(&fs->ov, path,
				m && m->symlink ? OV_LINK : OV_FILE, x)
		       : NULL;
	if (!o) {
		if (fd >= 0)
			close(fd);
		return;
	}
	o->size = size;
	o->put = true; /* the engine has it: removing it drops it there */
	restore_parents(fs, x, path);
	if (m) {
		o->mode = m->mode;
		o->rdev = m->rdev;
		o->uid = m->uid;
		o->gid = m->gid;
		o->mtime = o->ctime = m->mtime;
		if (m->symlink)
			o->target = strdup(m->symlink);
		/* the journal keeps them in the overlay's record format */
		if (m->xattrs_len)
			buf_append(&o->xattrs, m->xattrs, m->xattrs_len);
	}
	if (fd >= 0) {
		o->st = ov_stage_new(fd, 0);
		if (o->st)
			o->st->handed = true;
		else
			close(fd);
	}
	r->n++;
}

/*
 * A name a journaled delete or rename (step id) takes away: a whiteout
 * until its step runs, as before the restart (the resumed job saw
 * deleted checkpoints again and deleted them once more).  What the
 * journal restored there from a transaction made before that step goes:
 * the step removes it after that transaction's commit (a removal held
 * for after the commit, issue 21's seal: model seed 8100, an rmdir'd
 * directory shown again after a SIGKILL).  A newer one (the name made
 * again after its removal) stays.  Table locked.
 */
static void restore_removal(void *arg, uint64_t id, const char *path,
			    bool is_dir)
{
	restore_ctx *r = arg;
	(void)is_dir;
	wr_hide_restored(r->fs, path, id);
}

void wr_restore(fs_ctx *fs)
{
	if (!fs->eng)
		return;
	restore_ctx r = {fs, 0, 0};
	fs_itable_lock(fs->it);
	eng_foreach_pending_txn(fs->eng, restore_txn, restore_dir, &r);
	eng_foreach_pending_file(fs->eng, restore_one, &r);
	eng_foreach_pending_removal(fs->eng, restore_removal, &r);
	wr_dels_revive(fs);
	wr_dirattr_restore(fs);
	fs_itable_unlock(fs->it);
	if (r.n || r.txns)
		log_info("resuming %zu journaled transaction%s, %zu file%s",
			 r.txns, r.txns == 1 ? "" : "s", r.n,
			 r.n == 1 ? "" : "s");
}
