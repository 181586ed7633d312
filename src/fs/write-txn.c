/*
 * The write path: transactions and staging files (fs/write.c has the
 * overview).  Which transaction a new name joins (wr_txn_for_new), sealing
 * one (a commit trigger), handing a file's staging file to the engine
 * (wr_put_file: a single-file transaction then commits), and the staging
 * files themselves: created empty, or copied when the engine already has
 * the old one (wr_writable_stage).
 */
#include "fs/write-txn.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commit/engine.h"
#include "fs/ctx.h"
#include "fs/nodes.h"
#include "fs/write-deletes.h"
#include "fs/write-local.h"
#include "util/log.h"

char *wr_manifest_root(fs_ctx *fs, fs_inode *p)
{
	for (fs_inode *a = p; a; a = a->parent) {
		ov_node *o = wr_local_of(fs, a);
		/* committing: has a manifest; so will one restored from the
		 * journal (merge), queued before any step issued now (a
		 * rename into it recorded in the root above, whose record
		 * its own manifest then hid: model seed 7717) */
		if (o && o->kind == OV_DIR && o->txn && o->txn->is_dir &&
		    !strcmp(o->txn->root, a->path) &&
		    (o->txn->sealed || o->merge))
			return strdup(a->path);
		/* a directory restored from the journal (merge) is also the
		 * bucket's: after a SIGKILL, a committed directory holding a
		 * pending file is such a node, and its manifest still
		 * governs the names made in it */
		if (o && !o->merge)
			continue;
		if (a->manifest && a->manifest->committed)
			return strdup(a->path);
	}
	return NULL;
}

char *wr_manifest_root_known(fs_ctx *fs, fs_inode *p)
{
	fs_inode_ref(p);
	for (fs_inode *a = p; a; a = a->parent) {
		ov_node *o = wr_local_of(fs, a);
		if (o && !o->merge)
			continue; /* this mount's: wr_manifest_root knows it */
		int rc = 0;
		if (a->listing_held) /* as of this mount's commit */
			rc = fs_dir_refetch(fs, a);
		else if (!a->listing || a->listing_gen != fs->listing_gen)
			rc = fs_dir_load(fs, a);
		if (rc < 0 || (a->manifest && a->manifest->committed))
			break;
	}
	char *root = wr_manifest_root(fs, p);
	fs_itable_unref(fs->it, p);
	return root;
}

/*
 * The transaction a new name at path (child of directory inode p) joins:
 * the one of a local parent directory still open, else a new one rooted
 * at path.  Table locked; drops it while the engine PUTs a marker.
 */
int wr_txn_for_new(fs_ctx *fs, fs_inode *p, const char *path, bool is_dir,
		       ov_txn **out)
{
	ov_node *pd = wr_local_of(fs, p);
	if (pd && pd->kind == OV_DIR && pd->txn && !pd->txn->sealed) {
		*out = pd->txn;
		return 0;
	}
	char *mroot = wr_manifest_root_known(fs, p);
	log_debug("%s: a transaction of its own, recorded in the manifests "
		  "of /%s",
		  path, mroot ? mroot : "(none)");
	wr_ordered_for(fs, path);
	fs_itable_unlock(fs->it);
	uint64_t id = 0;
	int rc = eng_txn_begin(fs->eng, path, is_dir, mroot, &id);
	free(mroot);
	fs_itable_lock(fs->it);
	if (rc < 0) {
		log_error("%s: cannot start its transaction: %s", path,
			  strerror(-rc));
		return rc;
	}
	ov_txn *x = ov_txn_add(&fs->ov, id, path, is_dir);
	if (!x)
		return -ENOMEM;
	x->last_change = wr_now_s();
	*out = x;
	return 0;
}

struct dir_refresh {
	fs_ctx *fs;
	ov_txn *x;
	int rc;
};

static void dir_refresh_one(void *arg, ov_node *o)
{
	struct dir_refresh *r = arg;
	if (o->kind != OV_DIR || o->txn != r->x || !o->meta_dirty || r->rc)
		return;
	eng_meta m;
	buf xa = BUF_INIT;
	wr_meta_of(o, &m, &xa);
	r->rc = eng_dir_put(r->fs->eng, r->x->id, o->path, &m);
	buf_free(&xa);
	if (!r->rc)
		o->meta_dirty = false;
}

/* The committed directory x's root is made in (or whose file x stores
 * again), as it is now, for x's addendum: readers take its mtime from
 * there, not from the LastModified of what x stores (doc/posix.md,
 * "Directory attributes").  Table locked. */
static int record_parent(fs_ctx *fs, ov_txn *x)
{
	char *parent = ov_parent(x->root);
	fs_inode *p = parent && parent[0] ? fs_itable_find(fs->it, parent)
					  : NULL;
	free(parent);
	eng_meta m;
	buf xa = BUF_INIT;
	int rc = wr_recorded_dir(fs, p, &m, &xa)
		     ? eng_dir_put(fs->eng, x->id, p->path, &m)
		     : 0;
	buf_free(&xa);
	return rc;
}

/* Seals x (a commit trigger).  Table locked. */
int wr_seal(fs_ctx *fs, ov_txn *x)
{
	if (x->sealed)
		return 0;
	if (eng_path_has_temp(fs->eng, x->root))
		return 0; /* waits for a final name (a file too) */
	if (eng_txn_poisoned(fs->eng, x->id))
		return 0; /* a failed write: stays open (eng_file_poison);
			   * waiting for it fails (eng_wait_txn) */
	wr_ordered_for(fs, x->root);
	/* the directories' mtimes moved as names came (wr_dir_changed): the
	 * manifest records them as they are now, once per commit rather
	 * than a journal write per name */
	struct dir_refresh r = {fs, x, 0};
	if (x->is_dir)
		ov_each(&fs->ov, dir_refresh_one, &r);
	if (!r.rc)
		r.rc = record_parent(fs, x);
	int rc = r.rc ? r.rc : eng_txn_seal(fs->eng, x->id);
	if (rc == -ENOENT) {
		/* the engine no longer has it (an operator dropped it before
		 * any trigger fired): sealed here, the reap drops its nodes
		 * as for any transaction the engine is done with */
		x->sealed = true;
		return 0;
	}
	if (rc == 0)
		x->sealed = true;
	else
		log_error("commit of %s could not be journaled: %s", x->root,
			  strerror(-rc));
	return rc;
}

void wr_seal_closed(fs_ctx *fs)
{
	for (ov_txn *x = fs->ov.txns; x; x = x->next)
		if (!x->done && x->open == 0)
			wr_seal(fs, x);
}

/*
 * The manifest root of a new transaction for single file o, rewritten
 * while its own commits: the directory governing it, as for the first
 * one (wr_txn_for_new).  Without it the second change of a committed file
 * inside a checkpoint directory (a chmod, then a touch) was stored as a
 * plain object, which readers ignore there: the manifest speaks for the
 * file, and it still held the first change.  Table locked.
 */
static char *single_mroot(fs_ctx *fs, const ov_node *o)
{
	char *parent = ov_parent(o->path);
	fs_inode *p = parent ? fs_itable_find(fs->it, parent) : NULL;
	free(parent);
	return p ? wr_manifest_root(fs, p) : NULL;
}

/*
 * Hands o's staging file to the engine (its bytes are final for now).  A
 * single-file transaction then commits.  Table locked.
 */
int wr_put_file(fs_ctx *fs, ov_node *o)
{
	return wr_put_stage(fs, o, o->st, o->size);
}

/* wr_put_file with the size bytes of s, o's staging file or a copy. */
int wr_put_stage(fs_ctx *fs, ov_node *o, ov_stage *s, uint64_t size)
{
	if ((!o->dirty && !o->meta_dirty) || !s || !o->txn)
		return 0;
	ov_stage_ref(s);
	/* immutable from now on: a write or an open while the lock is
	 * dropped below copies it first (wr_writable_stage) */
	bool was_handed = s->handed;
	s->handed = true;
	/* a file of a transaction already committing gets its own, whose
	 * manifest names it under the committing one's root (mroot); a
	 * rewrite of a committing single file gets a new transaction,
	 * ordered after the first */
	if (o->txn->sealed) {
		char *mroot = wr_is_single_root(o) ? single_mroot(fs, o)
						   : strdup(o->txn->root);
		wr_ordered_for(fs, o->path);
		/* held: a release or the reap must not drop it meanwhile */
		ov_node_ref(o);
		fs_itable_unlock(fs->it);
		uint64_t id = 0;
		int rc = eng_txn_begin(fs->eng, o->path, false, mroot, &id);
		free(mroot);
		fs_itable_lock(fs->it);
		if (rc == 0 && !o->linked) { /* removed or renamed meanwhile */
			eng_txn_abort(fs->eng, id);
			rc = -ENOENT;
		}
		ov_node_unref(o);
		if (rc < 0) {
			s->handed = was_handed;
			ov_stage_unref(s);
			return rc;
		}
		ov_txn *nx = ov_txn_add(&fs->ov, id, o->path, false);
		if (!nx) {
			s->handed = was_handed;
			ov_stage_unref(s);
			return -ENOMEM;
		}
		ov_node_set_txn(o, nx);
		/* the committing one stores its version at this name: a
		 * rename or removal of the name deletes it, as a remote
		 * original (it stayed, and showed again) */
		if (o->put)
			o->shadows = true;
	}
	wr_ordered_for(fs, o->path);
	eng_meta m;
	buf xa = BUF_INIT;
	wr_meta_of(o, &m, &xa);
	/* after a failed write the transaction stays poisoned (poisoned
	 * here first when it is a new one) */
	if (o->failed)
		eng_file_poison(fs->eng, o->txn->id, o->path, o->failed);
	int rc = (o->failed ? eng_file_put_short : eng_file_put)(
	    fs->eng, o->txn->id, o->path, s->sid, size, &m);
	buf_free(&xa);
	if (rc < 0)
		s->handed = was_handed;
	ov_stage_unref(s);
	if (rc < 0) {
		log_error("%s: cannot hand the file to the commit engine: %s",
			  o->path, strerror(-rc));
		return rc;
	}
	o->put = true;
	o->dirty = o->meta_dirty = false;
	wr_touch(o->txn);
	if (wr_is_single_root(o) && o->writers == 0)
		return wr_seal(fs, o->txn);
	return 0;
}

/* ---- staging ----------------------------------------------------------- */

static void stage_discard_cb(void *arg, uint64_t sid)
{
	eng_stage_discard(arg, sid);
}

ov_stage *wr_stage_new(fs_ctx *fs, int fd, uint64_t sid)
{
	ov_stage *s = ov_stage_new(fd, sid);
	if (s) {
		s->discard = stage_discard_cb;
		s->discard_arg = fs->eng;
	}
	return s;
}

/* A new empty staging file for o.  Table locked (creation is local). */
int wr_new_stage(fs_ctx *fs, ov_node *o)
{
	uint64_t sid = 0;
	int fd = eng_stage_create(fs->eng, &sid);
	if (fd < 0)
		return fd;
	ov_stage *s = wr_stage_new(fs, fd, sid);
	if (!s) {
		close(fd);
		eng_stage_discard(fs->eng, sid);
		return -ENOMEM;
	}
	ov_set_stage(o, s);
	return 0;
}

int wr_copy_fd(int in, int out, uint64_t len)
{
	loff_t io = 0, oo = 0;
	while ((uint64_t)io < len) {
		ssize_t n = copy_file_range(in, &io, out, &oo,
					    (size_t)(len - (uint64_t)io), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EXDEV || errno == ENOSYS ||
			      errno == EOPNOTSUPP || errno == EINVAL)) {
			/* plain copy */
			char *b = malloc(1 << 20);
			if (!b)
				return -ENOMEM;
			while ((uint64_t)io < len) {
				size_t want = len - (uint64_t)io > (1 << 20)
						      ? (1 << 20)
						      : (size_t)(len - (uint64_t)io);
				ssize_t r = pread(in, b, want, io);
				if (r <= 0) {
					free(b);
					return r < 0 ? -errno : -EIO;
				}
				if (pwrite(out, b, (size_t)r, oo) != r) {
					free(b);
					return -errno ? -errno : -EIO;
				}
				io += r;
				oo += r;
			}
			free(b);
			return 0;
		}
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO; /* the source is shorter than recorded */
	}
	return 0;
}

/*
 * Makes o's staging file writable: one handed to the engine is copied
 * first (keep bytes [0, keep)).  Table locked; drops it for the copy.
 */
int wr_writable_stage(fs_ctx *fs, ov_node *o, uint64_t keep)
{
	if (o->st && !o->st->handed)
		return 0;
	ov_stage *old = o->st;
	if (old)
		ov_stage_ref(old);
	uint64_t sid = 0;
	int fd = eng_stage_create(fs->eng, &sid);
	if (fd < 0) {
		if (old)
			ov_stage_unref(old);
		return fd;
	}
	int rc = 0;
	if (old && keep) {
		fs_itable_unlock(fs->it);
		rc = wr_copy_fd(old->fd, fd, keep);
		fs_itable_lock(fs->it);
	}
	if (old)
		ov_stage_unref(old);
	ov_stage *s = rc == 0 ? wr_stage_new(fs, fd, sid) : NULL;
	if (!s) {
		close(fd);
		eng_stage_discard(fs->eng, sid);
		return rc < 0 ? rc : -ENOMEM;
	}
	if (o->st != old && o->st && !o->st->handed) {
		/* another thread made one meanwhile */
		ov_stage_unref(s); /* discards it */
		return 0;
	}
	ov_set_stage(o, s);
	return 0;
}
