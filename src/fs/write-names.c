/*
 * The write path: creating, removing and renaming names (fs/write.c has
 * the overview).  Removing a remote name leaves a whiteout in the overlay
 * and a held delete (wr_hold_delete, fs/write-deletes.c); renames decide
 * which transaction a name moves to.
 */
#include "fs/write-names.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commit/engine.h"
#include "fs/ctx.h"
#include "fs/local.h"
#include "fs/metaread.h"
#include "fs/nodes.h"
#include "fs/write-cow.h"
#include "fs/write-deletes.h"
#include "fs/write-idle.h"
#include "fs/write-local.h"
#include "fs/write-sync.h"
#include "fs/write-txn.h"
#include "fs/write.h"
#include "proto/keys.h"
#include "proto/meta.h"
#include "util/log.h"

/* ---- creating names ---------------------------------------------------- */

/* Table locked: whether a name exists at child `name` of p. */
static int wr_name_state(fs_ctx *fs, fs_inode *p, const char *name,
		      bool *remote, bool *local)
{
	*remote = *local = false;
	char *path = wr_child_path(p, name);
	if (!path)
		return -ENOMEM;
	ov_node *o = ov_get(&fs->ov, path);
	free(path);
	if (o) {
		*local = o->kind != OV_WHITEOUT;
		return 0;
	}
	if (fs_local_is_dir(fs, p))
		return 0;
	int rc = fs_dir_load(fs, p);
	if (rc < 0)
		return rc;
	*remote = p->listing && ns_dir_find(p->listing, name);
	return 0;
}

static fs_inode *wr_parent_dir(fs_ctx *fs, fuse_ino_t ino, int *err)
{
	fs_inode *p = fs_itable_get(fs->it, ino);
	*err = !p ? ENOENT : !p->is_dir ? ENOTDIR : 0;
	return *err ? NULL : p;
}

static bool wr_name_ok(const char *name)
{
	return strncmp(name, ".ckptfs", 7) != 0 && strlen(name) <= 255;
}

/*
 * A new local node of kind at child name of p.  Table locked.  Replaces a
 * whiteout (the remote delete is ordered before this name's commit).
 */
static int new_node(fuse_req_t req, fs_ctx *fs, fs_inode *p, const char *name,
		    ov_kind kind, mode_t mode, ov_node **out, fs_inode **nout)
{
	if (!wr_name_ok(name))
		return name[0] == '.' ? -EPERM : -ENAMETOOLONG;
	bool remote, local;
	int rc = wr_name_state(fs, p, name, &remote, &local);
	if (rc < 0)
		return rc;
	if (remote || local)
		return -EEXIST;
	char *path = wr_child_path(p, name);
	if (!path)
		return -ENOMEM;
	if (!proto_key_fits(fs->prefix, path, kind == OV_DIR)) {
		free(path); /* its key: more than S3 takes */
		return -ENAMETOOLONG;
	}
	fs_inode_ref(p);
	ov_txn *x = NULL;
	rc = wr_txn_for_new(fs, p, path, kind == OV_DIR, &x);
	ov_node *o = NULL;
	if (rc == 0) {
		ov_node *old = ov_get(&fs->ov, path);
		bool wo = old && old->kind == OV_WHITEOUT;
		if (old && !wo)
			rc = -EEXIST; /* raced */
		if (wo)
			ov_remove(&fs->ov, old);
		if (rc == 0 && !(o = ov_add(&fs->ov, path, kind, x)))
			rc = -ENOMEM;
		if (o)
			o->shadows = wo;
	}
	if (rc == 0) {
		const struct fuse_ctx *fc = fuse_req_ctx(req);
		o->mode = mode & 07777;
		o->uid = fc ? fc->uid : 0;
		o->gid = fc ? fc->gid : 0;
		/* a set-group-ID directory hands down its group, and to
		 * directories the bit itself */
		struct stat pst;
		fs_fill_stat(fs, p, &pst);
		if (pst.st_mode & S_ISGID) {
			o->gid = pst.st_gid;
			if (kind == OV_DIR)
				o->mode |= S_ISGID;
		}
		wr_touch(x);
		/* the engine records every directory of a transaction with
		 * its attributes, its root's too (doc/posix.md) */
		if (kind == OV_DIR) {
			wr_ordered(fs, o->path, NULL);
			eng_meta m;
			buf xa = BUF_INIT;
			wr_meta_of(o, &m, &xa);
			rc = eng_dir_put(fs->eng, x->id, path, &m);
			buf_free(&xa);
			if (rc < 0)
				ov_remove(&fs->ov, o);
		}
	}
	free(path);
	fs_inode *c = NULL;
	if (rc == 0) {
		c = fs_itable_child(fs->it, p, name, kind == OV_DIR);
		if (!c) {
			ov_remove(&fs->ov, o);
			rc = -ENOMEM;
		}
	}
	if (rc == 0)
		wr_dir_changed(fs, p);
	fs_itable_unref(fs->it, p);
	*out = rc == 0 ? o : NULL;
	*nout = c;
	return rc;
}

/*
 * The start of every call that makes a name: a new local node of kind at
 * name under directory parent (new_node), *o and *c set on success.  Table
 * locked.  0 or -errno.
 */
static int make_node(fuse_req_t req, fs_ctx *fs, fuse_ino_t parent,
		     const char *name, ov_kind kind, mode_t mode,
		     ov_node **o, fs_inode **c)
{
	int err;
	fs_inode *p = wr_parent_dir(fs, parent, &err);
	return p ? new_node(req, fs, p, name, kind, mode, o, c) : -err;
}

/* A new regular file with its empty staging file (make_node). */
static int make_file(fuse_req_t req, fs_ctx *fs, fuse_ino_t parent,
		     const char *name, mode_t mode, ov_node **o, fs_inode **c)
{
	int rc = make_node(req, fs, parent, name, OV_FILE, mode, o, c);
	if (rc == 0 && (rc = wr_new_stage(fs, *o)) < 0)
		ov_remove(&fs->ov, *o);
	return rc;
}

/*
 * The end of every call that makes a name but opens nothing: counts a
 * lookup of counted (NULL: none), unlocks the table and replies with
 * counted's entry when rc is 0, else with -rc.
 */
static void reply_made(fuse_req_t req, fs_ctx *fs, fs_inode *counted, int rc)
{
	struct fuse_entry_param ep;
	if (counted) {
		counted->nlookup++;
		fs_fill_entry(fs, counted, &ep);
	}
	fs_itable_unlock(fs->it);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_entry(req, &ep);
}

void wr_create(fuse_req_t req, fuse_ino_t parent, const char *name,
	       mode_t mode, struct fuse_file_info *fi)
{
	if (!wr_require_engine(req))
		return;
	fs_ctx *fs = fs_req_ctx(req);
	fs_itable_lock(fs->it);
	ov_node *o = NULL;
	fs_inode *c = NULL;
	int rc = make_file(req, fs, parent, name, mode, &o, &c);
	fs_handle *h = NULL;
	if (rc == 0) {
		o->dirty = true; /* an empty file is a file too */
		h = wr_local_handle(fs, c, o, true);
		if (!h)
			rc = -ENOMEM;
		else
			h->opener = fuse_req_ctx(req)->pid;
	}
	struct fuse_entry_param ep;
	if (rc == 0) {
		c->nlookup++;
		fs_fill_entry(fs, c, &ep);
	}
	fs_itable_unlock(fs->it);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)h;
	fi->direct_io = 0;
	fi->keep_cache = 0;
	fs_pt_mark_next_open(h->backing_id);
	if (fuse_reply_create(req, &ep, fi) == -ENOENT)
		wr_handle_free(fs, h, true);
}

/*
 * A regular file, or a special one: FIFOs, sockets (bind(2) makes one) and
 * device nodes are files whose mode carries the type, with an empty
 * staging file, committed as empty objects (doc/posix.md).  The kernel
 * never sends their opens here: a FIFO opened on this host is a FIFO of
 * this host's kernel, a device node opens the device (unless the mount
 * is nodev, as FUSE mounts are by default).
 */
void wr_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
	      mode_t mode, dev_t rdev)
{
	if (!wr_require_engine(req))
		return;
	if (!S_ISREG(mode) && !S_ISFIFO(mode) && !S_ISSOCK(mode) &&
	    !S_ISCHR(mode) && !S_ISBLK(mode)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	fs_ctx *fs = fs_req_ctx(req);
	fs_itable_lock(fs->it);
	ov_node *o = NULL;
	fs_inode *c = NULL;
	int rc = make_file(req, fs, parent, name, mode, &o, &c);
	fs_inode *counted = rc == 0 ? c : NULL;
	if (rc == 0) {
		if (!S_ISREG(mode)) {
			o->mode |= mode & S_IFMT;
			o->rdev = S_ISCHR(mode) || S_ISBLK(mode) ? rdev : 0;
		}
		o->dirty = true;
		rc = wr_put_file(fs, o);
	}
	reply_made(req, fs, counted, rc);
}

void wr_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
	      mode_t mode)
{
	if (!wr_require_engine(req))
		return;
	fs_ctx *fs = fs_req_ctx(req);
	fs_itable_lock(fs->it);
	ov_node *o = NULL;
	fs_inode *c = NULL;
	int rc = make_node(req, fs, parent, name, OV_DIR, mode, &o, &c);
	reply_made(req, fs, rc == 0 ? c : NULL, rc);
}

/*
 * Whether a new name in directory parent is recorded in a manifest: it
 * joins the open transaction of a local directory, or a governed
 * directory's addendum.  A symlink target too long for object metadata
 * is kept there only (doc/commit.md, "Names the store refuses").
 */
static bool in_manifest(fs_ctx *fs, fuse_ino_t parent)
{
	int err;
	fs_inode *p = wr_parent_dir(fs, parent, &err);
	if (!p)
		return true; /* make_node says why not */
	ov_node *pd = wr_local_of(fs, p);
	if (pd && pd->kind == OV_DIR && pd->txn && pd->txn->is_dir &&
	    !pd->txn->sealed)
		return true;
	char *m = wr_manifest_root_known(fs, p);
	bool governed = m != NULL;
	free(m);
	return governed;
}

void wr_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		const char *name)
{
	if (!wr_require_engine(req))
		return;
	fs_ctx *fs = fs_req_ctx(req);
	fs_itable_lock(fs->it);
	ov_node *o = NULL;
	fs_inode *c = NULL;
	int rc = 0;
	if (!proto_meta_symlink_fits(link) && !in_manifest(fs, parent))
		rc = -ENAMETOOLONG; /* neither metadata nor a manifest */
	if (rc == 0)
		rc = make_node(req, fs, parent, name, OV_LINK, 0777, &o, &c);
	if (rc == 0 && !(o->target = strdup(link)))
		rc = -ENOMEM;
	if (rc == 0 && (rc = wr_new_stage(fs, o)) == 0) {
		o->dirty = true;
		rc = wr_put_file(fs, o);
	}
	if (rc < 0 && o)
		ov_remove(&fs->ov, o);
	reply_made(req, fs, rc == 0 ? c : NULL, rc);
}

void wr_readlink(fuse_req_t req, fuse_ino_t ino)
{
	fs_ctx *fs = fs_req_ctx(req);
	fs_itable_lock(fs->it);
	fs_inode *n = fs_itable_get(fs->it, ino);
	ov_node *o = n ? wr_local_of(fs, n) : NULL;
	if (n && !o) {
		fs_inode_ref(n);
		fs_check_meta(fs, n);
		fs_itable_unref(fs->it, n);
	}
	char *t = o && o->kind == OV_LINK ? strdup(o->target)
		  : !o && n && n->symlink ? strdup(n->symlink)
					  : NULL;
	fs_itable_unlock(fs->it);
	if (!t) {
		fuse_reply_err(req, o ? EINVAL : EINVAL);
		return;
	}
	fuse_reply_readlink(req, t);
	free(t);
}

void wr_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
	     const char *newname)
{
	if (wr_require_engine(req))
		fuse_reply_err(req, EPERM); /* S3 has no hard links */
}

/* ---- removing names ---------------------------------------------------- */

/* Whether a and b are entries of one directory. */
static bool same_dir(const char *a, const char *b)
{
	const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
	size_t la = sa ? (size_t)(sa - a) : 0, lb = sb ? (size_t)(sb - b) : 0;
	return la == lb && !strncmp(a, b, la);
}

struct later_file {
	uint64_t id;
	const char *root;
	bool seen, found;
};

static void later_file_txn(void *arg, uint64_t txn, const char *root,
			   bool is_dir, bool sealed)
{
	struct later_file *l = arg;
	(void)sealed;
	if (txn == l->id)
		l->seen = true;
	else if (l->seen && !is_dir && same_dir(root, l->root))
		l->found = true;
}

/*
 * Whether directory transaction x, not committed yet, has a single-file
 * transaction beside it later in the queue: a `latest` file written
 * after the checkpoint, which may name it (issue 21).  Table locked.
 */
static bool named_by_later_file(fs_ctx *fs, const ov_txn *x)
{
	struct later_file l = {x->id, x->root, false, false};
	eng_foreach_pending_txn(fs->eng, later_file_txn, NULL, &l);
	return l.found;
}

/*
 * Removes local node o (a file or an empty directory).  Table locked.
 */
static int wr_remove_local(fs_ctx *fs, ov_node *o)
{
	ov_txn *x = o->txn;
	int rc = 0;
	/*
	 * A directory transaction not sealed yet (an in-place checkpoint
	 * within commit_delay, or resumed after a crash) used to be aborted
	 * by its rm -r, out of queue order: a `latest` file written after it
	 * and naming it then became visible with the checkpoint never shown
	 * (issue 21; the engine skips aborted steps, commit/order.c).  When
	 * such a file follows it in the queue, the removal seals it first:
	 * it commits in its place, the file after it, and the rm -r becomes
	 * one directory delete held and queued after both (the branch for
	 * sealed transactions below), as the application ordered them.
	 */
	if (x && !x->sealed && x->is_dir && named_by_later_file(fs, x) &&
	    wr_seal(fs, x) < 0)
		log_warn("%s: removed before its commit; could not seal it, "
			 "so it is aborted", x->root);
	bool root = x && !strcmp(x->root, o->path);
	/* bytes nobody else holds go first: on a full disk the journal
	 * needs that space to record the removal */
	if (o->st && !o->st->handed && o->st->refs == 1 && o->opens == 0 &&
	    ftruncate(o->st->fd, 0) == 0)
		o->size = 0;
	if (x && x->sealed) {
		/* being committed: deleted after the commit, held like a
		 * remote name (an rm -r is one atomic directory delete, not
		 * one per unlink: readers saw the checkpoint shrink file by
		 * file), keeping its parent when that is x's (model seed
		 * 8000: rmdir a/g/b, sealed by issue 21's rule, lost a/g) */
		rc = wr_hold_delete_in(fs, o->path, o->kind == OV_DIR, !root);
	} else if ((wr_ordered(fs, o->path, NULL), root)) {
		rc = eng_txn_abort(fs->eng, x->id);
		if (rc == 0)
			x->done = true;
	} else if (x && (o->put || o->kind == OV_DIR)) {
		/* (a file never handed over is unknown to the engine: its
		 * staging file goes with the node, which frees the space a
		 * full disk needs first) */
		rc = eng_file_drop(fs->eng, x->id, o->path);
	}
	if (rc == 0 && o->shadows && !(x && x->sealed))
		rc = wr_remote_delete_in(fs, o->path, o->kind == OV_DIR, !root);
	if (rc < 0)
		return rc;
	char *path = strdup(o->path);
	bool wo = o->shadows || (x && x->sealed);
	ov_remove(&fs->ov, o);
	if (wo && path) {
		ov_node *w = ov_add(&fs->ov, path, OV_WHITEOUT, NULL);
		if (w)
			w->wo_time = wr_now_s();
	}
	free(path);
	return 0;
}

/* Whether remote directory d (with children hidden by whiteouts) is
 * empty.  Table locked. */
static int wr_remote_dir_empty(fs_ctx *fs, fs_inode *d, bool *empty)
{
	*empty = true;
	int rc = fs_dir_load(fs, d);
	if (rc < 0)
		return rc;
	for (size_t i = 0; d->listing && i < d->listing->n; i++) {
		char *cp = wr_child_path(d, d->listing->v[i].name);
		ov_node *o = cp ? ov_get(&fs->ov, cp) : NULL;
		free(cp);
		if (!o || o->kind != OV_WHITEOUT) {
			*empty = false;
			return 0;
		}
	}
	if (ov_has_children(&fs->ov, d->path))
		*empty = false;
	return 0;
}

static int do_remove(fuse_req_t req, fuse_ino_t parent, const char *name,
		     bool dir)
{
	fs_ctx *fs = fs_req_ctx(req);
	int err;
	fs_itable_lock(fs->it);
	/* a file closed just before (`dd ...; rm f`) may still have its
	 * release on the way: its handle keeps the staging file, and the
	 * space rm frees on a local disk would come back only later (a
	 * write right after rm got ENOSPC on a full cache disk) */
	if (!dir)
		wr_wait_releases(fs);
	fs_inode *p = wr_parent_dir(fs, parent, &err);
	if (!p) {
		fs_itable_unlock(fs->it);
		return -err;
	}
	char *path = wr_child_path(p, name);
	ov_node *o = path ? ov_get(&fs->ov, path) : NULL;
	int rc = 0;
	if (!path) {
		rc = -ENOMEM;
	} else if (o && o->kind == OV_WHITEOUT) {
		rc = -ENOENT;
	} else if (o) {
		if (dir && o->kind != OV_DIR)
			rc = -ENOTDIR;
		else if (!dir && o->kind == OV_DIR)
			rc = -EISDIR;
		else if (dir && ov_has_children(&fs->ov, path))
			rc = -ENOTEMPTY;
		else {
			/* handles still open on it keep its size */
			fs_inode *c = fs_itable_find(fs->it, path);
			if (c && o->kind == OV_FILE) {
				c->size = o->size;
				c->mtime = o->mtime;
			}
			rc = wr_remove_local(fs, o);
		}
	} else {
		/* a remote name */
		bool remote, local;
		rc = wr_name_state(fs, p, name, &remote, &local);
		const ns_entry *e = rc == 0 && remote
					    ? ns_dir_find(p->listing, name)
					    : NULL;
		if (rc == 0 && !e)
			rc = -ENOENT;
		else if (rc == 0 && dir && !e->is_dir)
			rc = -ENOTDIR;
		else if (rc == 0 && !dir && e->is_dir)
			rc = -EISDIR;
		bool ckpt_root = false;
		if (rc == 0 && dir) {
			fs_inode *c = fs_itable_child(fs->it, p, name, true);
			bool empty = false;
			if (!c)
				rc = -ENOMEM;
			else {
				fs_inode_ref(c);
				rc = wr_remote_dir_empty(fs, c, &empty);
				ckpt_root = c->manifest && c->manifest->committed;
				fs_itable_unref(fs->it, c);
			}
			if (rc == 0 && !empty)
				rc = -ENOTEMPTY;
		}
		if (rc == 0)
			rc = wr_hold_delete(fs, path, dir,
					    wr_keeps_parent(p) ? p->path
								      : NULL);
		/* a checkpoint directory's own rmdir ends what its delete
		 * needs: journal it now, so a SIGKILL right after `rm -r`
		 * returns loses nothing (held, it lived only in memory) */
		if (rc == 0 && ckpt_root)
			wr_flush_deletes(fs);
		if (rc == 0) {
			ov_node *w = ov_add(&fs->ov, path, OV_WHITEOUT, NULL);
			if (w)
				w->wo_time = wr_now_s();
			else
				rc = -ENOMEM;
		}
	}
	if (rc == 0) {
		wr_dir_changed(fs, p);
		fs_inode *c = fs_itable_find(fs->it, path);
		if (c)
			fs_itable_detach(fs->it, c);
	}
	free(path);
	fs_itable_unlock(fs->it);
	return rc;
}

void wr_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (!wr_require_engine(req))
		return;
	fuse_reply_err(req, -do_remove(req, parent, name, false));
}

void wr_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (!wr_require_engine(req))
		return;
	fuse_reply_err(req, -do_remove(req, parent, name, true));
}

/* ---- rename ------------------------------------------------------------ */

typedef struct rn_ctx {
	fs_ctx *fs;
	const char *from;
	size_t fl;
	ov_txn *from_txn;
	ov_txn *to_txn;
} rn_ctx;

static void retxn_one(void *arg, ov_node *o)
{
	rn_ctx *r = arg;
	if (o->txn != r->from_txn || o->kind == OV_WHITEOUT)
		return;
	if (strcmp(o->path, r->from) &&
	    !(!strncmp(o->path, r->from, r->fl) && o->path[r->fl] == '/'))
		return;
	ov_node_set_txn(o, r->to_txn);
}

/*
 * Rename of local node o (and what is under it) to path `to` whose parent
 * directory inode is np.  Table locked.
 */
static int rename_local(fs_ctx *fs, ov_node *o, fs_inode *np, const char *to)
{
	ov_txn *x = o->txn;
	if (x->sealed && strcmp(x->root, o->path))
		return -EBUSY; /* sealed since wr_wait_sealed: wr_rename waits */
	char *from = strdup(o->path);
	if (!from)
		return -ENOMEM;
	bool root = !strcmp(x->root, from);
	ov_node *npo = wr_local_of(fs, np);
	ov_txn *dest = npo && npo->kind == OV_DIR && npo->txn &&
				       !npo->txn->sealed
			       ? npo->txn
			       : NULL;
	int rc = 0;
	bool reseal = false, was_sealed = x->sealed;
	if (dest == x || (!dest && root)) {
		/* within the transaction, or the whole transaction moves */
		char **gone = root && was_sealed ? wr_dels_moving(fs, from) : 0;
		wr_ordered(fs, from, to);
		char *mroot = root ? wr_manifest_root(fs, np) : NULL;
		fs_itable_unlock(fs->it);
		rc = eng_file_move(fs->eng, x->id, from, x->id, to, mroot);
		fs_itable_lock(fs->it);
		free(mroot);
		if (rc == 0 && gone)
			rc = wr_dels_drop_moved(fs, x->id, from, to, gone);
		wr_dels_free_paths(gone);
		if (rc == 0 && root) {
			free(x->root);
			x->root = strdup(to);
			reseal = true; /* renaming a root commits it */
			x->sealed = false;
		}
	} else {
		/* into another transaction, or out into a remote directory
		 * as a transaction of its own */
		if (!dest) {
			rc = wr_txn_for_new(fs, np, to, o->kind == OV_DIR, &dest);
			if (rc == 0)
				reseal = o->kind != OV_DIR || o->writers == 0;
		}
		if (rc == 0) {
			wr_ordered(fs, from, to);
			fs_itable_unlock(fs->it);
			rc = eng_file_move(fs->eng, x->id, from, dest->id, to,
					   NULL);
			fs_itable_lock(fs->it);
		}
		if (rc == 0) {
			rn_ctx r = {fs, from, strlen(from), x, dest};
			ov_each(&fs->ov, retxn_one, &r);
			wr_touch(x);
		}
	}
	/* a single file committing as it moves may land at the old name
	 * (its PUT on its way): that goes too */
	bool wo = rc == 0 && (o->shadows || (root && !x->is_dir && was_sealed));
	if (wo) { /* the remote original of the old name goes */
		rc = wr_hold_delete(fs, from, o->kind == OV_DIR, NULL);
		o->shadows = false;
	}
	ov_node *tw = rc == 0 ? ov_get(&fs->ov, to) : NULL;
	if (tw && tw->kind == OV_WHITEOUT) /* its delete is ordered first */
		ov_remove(&fs->ov, tw);     /* (it hid the name: seed 7407) */
	if (rc == 0 && ov_move(&fs->ov, from, to) < 0)
		rc = -ENOMEM;
	ov_node *w = wo ? ov_add(&fs->ov, from, OV_WHITEOUT, NULL) : NULL;
	if (w) /* after the move, which would take it along */
		w->wo_time = wr_now_s();
	if (rc == 0) {
		ov_node *moved = ov_get(&fs->ov, to);
		ov_txn *nx = moved ? moved->txn : NULL;
		wr_touch(nx);
		/* a copy made for a write that changed nothing (opened for
		 * writing, closed clean) was never handed to the engine:
		 * its bytes were stored only under the old name, whose
		 * object goes (wo).  They are stored under the new one
		 * (model seed 8312: a rename after a write of 0 bytes lost
		 * the file at the next sync) */
		if (wo && moved && moved->kind != OV_DIR && !moved->put &&
		    !moved->dirty) {
			moved->dirty = true;
			if (moved->writers == 0)
				rc = wr_put_file(fs, moved);
		}
		if (reseal && nx && nx->open == 0 &&
		    (nx->is_dir || moved->writers == 0))
			rc = wr_seal(fs, nx);
	}
	free(from);
	return rc;
}

/* wr_rename over an existing name: the target at to (newname in np)
 * goes first, when it may (a directory only for a directory, and empty).
 * 0 or -errno. */
static int rename_clear_target(fs_ctx *fs, fs_inode *np, const char *newname,
			       const char *to, bool src_dir)
{
	int rc = 0;
	ov_node *dobj = ov_get(&fs->ov, to);
	const ns_entry *de = !dobj && np->listing
				     ? ns_dir_find(np->listing, newname)
				     : NULL;
	bool dst_dir = dobj ? dobj->kind == OV_DIR : de && de->is_dir;
	if (dst_dir && !src_dir)
		rc = -EISDIR;
	else if (!dst_dir && src_dir)
		rc = -ENOTDIR;
	else if (dst_dir && dobj && ov_has_children(&fs->ov, to))
		rc = -ENOTEMPTY;
	else if (dst_dir && !dobj) {
		fs_inode *c = fs_itable_child(fs->it, np, newname, true);
		bool empty = false;
		if (c) {
			fs_inode_ref(c);
			rc = wr_remote_dir_empty(fs, c, &empty);
			fs_itable_unref(fs->it, c);
		}
		if (rc == 0 && !empty)
			rc = -ENOTEMPTY;
	}
	if (rc == 0 && dobj) {
		/* a remote original under the local target is replaced by
		 * what moves in: no delete for a file (the PUT replaces it) */
		dobj->shadows = false;
		if (!dst_dir && dobj->txn && dobj->txn->sealed)
			/* committing: the file moving in replaces its
			 * object, in order (a delete now would be
			 * queued behind the newer transaction) */
			ov_remove(&fs->ov, dobj);
		else
			rc = wr_remove_local(fs, dobj);
		ov_node *w = ov_get(&fs->ov, to);
		if (w && w->kind == OV_WHITEOUT)
			ov_remove(&fs->ov, w);
	}
	return rc;
}

/* wr_rename's move of from (name in p) to to (in np): a local node
 * moves in the overlay, a remote file into a local directory is copied
 * in, a remote name is renamed server-side.  0 or -errno. */
static int rename_move(fs_ctx *fs, fs_inode *p, const char *name,
		       fs_inode *np, const char *from, const char *to,
		       bool src_dir, const struct timespec *now)
{
	int rc = 0;
	ov_node *so = wr_drop_if_done(fs, from) ? NULL : ov_get(&fs->ov, from);
	if (so && so->kind != OV_WHITEOUT) {
		rc = rename_local(fs, so, np, to);
	} else if (fs_local_is_dir(fs, np) && !src_dir) {
		/* a remote file into a local directory: copy it in
		 * (copy-on-write), then the old name goes */
		fs_inode *sc = fs_itable_child(fs->it, p, name, false);
		ov_node *o = NULL;
		if (!sc)
			rc = -ENOMEM;
		if (rc == 0) {
			fs_inode_ref(sc);
			rc = wr_copy_in(fs, sc, &o);
			fs_itable_unref(fs->it, sc);
		}
		if (rc == 0)
			rc = rename_local(fs, o, np, to);
	} else if (fs_local_is_dir(fs, np)) {
		rc = -EXDEV; /* mv copies it */
	} else {
		/* remote to remote: server-side, in order, shown once visible;
		 * all ahead commits first (eng_sync, wr_seal_all) */
		char *mroot = wr_manifest_root_known(fs, np);
		wr_ordered(fs, from, to);
		eng_dir_attrs pd[3];
		buf xa[3] = {BUF_INIT, BUF_INIT, BUF_INIT};
		size_t npd = wr_rename_records(
		    fs, p, np, src_dir ? fs_itable_find(fs->it, from) : NULL,
		    now, pd, xa);
		wr_seal_closed(fs); /* wr_seal records parents, too */
		rc = eng_remote_rename_in(fs->eng, from, to, src_dir, mroot, pd,
					  npd);
		for (int i = 0; i < 3; i++)
			buf_free(&xa[i]);
		free(mroot);
		if (rc == 0)
			rc = wr_sync_shown(fs, to);
	}
	return rc;
}

void wr_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
	       fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	if (!wr_require_engine(req))
		return;
	if (flags & RENAME_EXCHANGE) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (!wr_name_ok(newname)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	fs_ctx *fs = fs_req_ctx(req);
	int err;
	fs_itable_lock(fs->it);
	wr_wait_releases(fs); /* a rename may commit what they wrote */
	wr_reap(fs); /* committed meanwhile: the names are remote now */
	fs_inode *p = wr_parent_dir(fs, parent, &err);
	fs_inode *np = p ? wr_parent_dir(fs, newparent, &err) : NULL;
	if (!np) {
		fs_itable_unlock(fs->it);
		fuse_reply_err(req, err);
		return;
	}
	fs_inode_ref(p);
	fs_inode_ref(np);
	char *from = wr_child_path(p, name), *to = wr_child_path(np, newname);
	int rc = from && to ? wr_rename_ready(fs, np, from, to) : -ENOMEM;
	bool src_remote = false, src_local = false, dst_remote = false,
	     dst_local = false;
	if (rc == 0)
		rc = wr_name_state(fs, p, name, &src_remote, &src_local);
	if (rc == 0)
		rc = wr_name_state(fs, np, newname, &dst_remote, &dst_local);
	if (rc == 0 && !src_remote && !src_local)
		rc = -ENOENT;
	if (rc == 0 && (flags & RENAME_NOREPLACE) && (dst_remote || dst_local))
		rc = -EEXIST;
	if (rc == 0 && !strcmp(from, to))
		goto out;
	if (rc == 0 && !proto_key_fits(fs->prefix, to, false))
		rc = -ENAMETOOLONG; /* more than S3 takes */
	if (rc == 0 && !strncmp(to, from, strlen(from)) &&
	    to[strlen(from)] == '/')
		rc = -EINVAL;
	bool src_dir = false;
	if (rc == 0) {
		ov_node *so = ov_get(&fs->ov, from);
		const ns_entry *se = !so && p->listing
					     ? ns_dir_find(p->listing, name)
					     : NULL;
		src_dir = so ? so->kind == OV_DIR : se && se->is_dir;
	}
	/* EXDEV (rename_move) before the target goes: a failed rename
	 * changes nothing (model seed 8611 lost the target) */
	ov_node *sn = rc == 0 && src_dir ? ov_get(&fs->ov, from) : NULL;
	if (rc == 0 && src_dir && fs_local_is_dir(fs, np) &&
	    (!sn || sn->kind == OV_WHITEOUT))
		rc = -EXDEV;
	/* the target goes first (rename over an existing name) */
	if (rc == 0 && (dst_local || dst_remote))
		rc = rename_clear_target(fs, np, newname, to, src_dir);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	if (rc == 0)
		rc = rename_move(fs, p, name, np, from, to, src_dir, &now);
	if (wr_rename_again(fs, &rc, from, to)) /* committed since */
		rc = rename_move(fs, p, name, np, from, to, src_dir, &now);
	if (rc == 0) {
		fs_inode *c = fs_itable_find(fs->it, from);
		if (c)
			fs_itable_move(fs->it, c, np, newname);
		/* a committed directory renamed: its manifests, or its
		 * root's (none of its own), are the new name's now */
		if (c && c->is_dir && c->listing && !fs_local_is_dir(fs, c)) {
			fs_inode_ref(c);
			if (fs_dir_refetch(fs, c) < 0)
				log_debug("%s: listing after its rename failed",
					  c->path);
			fs_itable_unref(fs->it, c);
		}
		wr_dir_changed_at(fs, p, &now);
		wr_dir_changed_at(fs, np, &now);
		ov_node *moved = ov_get(&fs->ov, to);
		if (moved && moved->kind != OV_WHITEOUT)
			clock_gettime(CLOCK_REALTIME, &moved->ctime);
	}
out:
	free(from);
	free(to);
	fs_itable_unref(fs->it, p);
	fs_itable_unref(fs->it, np);
	fs_itable_unlock(fs->it);
	fuse_reply_err(req, -rc);
}

