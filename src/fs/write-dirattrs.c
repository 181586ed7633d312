/*
 * Changes of a committed directory's attributes.  A directory is no
 * object: what readers show for one written through ckptfs (mode, owner,
 * mtime, xattrs) is the newest record of it in the manifests of a
 * transaction root (fs/nodes.c).  So chmod, chown, utimensat, setxattr and
 * removexattr of one store a new record: a step of their own
 * (eng_dir_set) PUTs an addendum that records the directory with all of
 * its attributes as they are now, ordered after every step before it like
 * any other effect, resumed after a crash.  Until that step is done, and
 * the root's manifests were listed again after it, this mount shows the
 * change from fs->dpend (fs/nodes.c fs_dir_show_pending), after a restart
 * too (wr_dirattr_restore): an inode's manifests from before would show
 * the old record.  doc/posix.md, "Changing a
 * committed directory".
 */
#include "fs/write-dirattrs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commit/engine.h"
#include "fs/nodes.h"
#include "fs/write-deletes.h"
#include "fs/write-local.h"
#include "proto/meta.h"
#include "util/log.h"
#include "util/vec.h"

/* Whether directory n's record is known, listing it first when it was
 * looked up and never listed: a transaction root's own "dir" is in its
 * listing's manifests (chmod(2) sends no getattr first).  Table locked;
 * dropped for the listing. */
static bool record_known(fs_ctx *fs, fs_inode *n)
{
	if (!n->has_attrs && !n->listing) {
		fs_inode_ref(n);
		if (fs_dir_load(fs, n) < 0)
			log_debug("%s: listing failed, attributes unknown",
				  n->path);
		fs_itable_unref(fs->it, n);
	}
	return n->has_attrs;
}

/* Whether o is a placeholder of a file's transaction: a committed
 * directory above a file the journal restored (fs/write-resume.c), which
 * the bucket's attributes speak for. */
static bool file_placeholder(const ov_node *o)
{
	return o && o->placeholder && o->kind == OV_DIR && o->txn &&
	       !o->txn->is_dir;
}

bool wr_dirattr_remote(fs_ctx *fs, fs_inode *n)
{
	ov_node *o = wr_local_of(fs, n);
	if (!n->is_dir || (o && !file_placeholder(o)))
		return false;
	if (!record_known(fs, n))
		return false;
	o = wr_local_of(fs, n);
	return !o || file_placeholder(o);
}

ov_node *wr_dirattr_adopt(fs_ctx *fs, fs_inode *n, ov_node *o)
{
	if (!o || !o->placeholder || o->kind != OV_DIR || !n->is_dir)
		return o;
	if (file_placeholder(o))
		return NULL; /* a committed directory: a step of its own */
	if (!record_known(fs, n))
		return wr_local_of(fs, n);
	o = wr_local_of(fs, n); /* the lock may have been dropped */
	if (o && o->placeholder && o->kind == OV_DIR) {
		o->mode = n->mode & 07777;
		o->uid = n->uid;
		o->gid = n->gid;
		o->mtime = n->mtime;
		buf_reset(&o->xattrs);
		if (n->xattrs_json)
			proto_xattrs_decode(n->xattrs_json, &o->xattrs);
		o->placeholder = false;
	}
	return o;
}

void wr_dirattr_node(const fs_inode *n, ov_node *tmp)
{
	memset(tmp, 0, sizeof *tmp);
	tmp->kind = OV_DIR;
	tmp->mode = n->mode & 07777;
	tmp->uid = n->uid;
	tmp->gid = n->gid;
	tmp->mtime = n->mtime;
	buf_init(&tmp->xattrs);
	if (n->xattrs_json)
		proto_xattrs_decode(n->xattrs_json, &tmp->xattrs);
}

static void pending_free(fs_dir_pending *p)
{
	free(p->path);
	free(p->root);
	free(p->xattrs_json);
}

static fs_dir_pending *pending_add(fs_ctx *fs, const char *path,
				   const char *root, uint64_t step,
				   const eng_meta *m)
{
	if (fs->n_dpend == fs->cap_dpend) {
		fs_dir_pending *nv =
		    vec_grow(fs->dpend, &fs->cap_dpend, sizeof *nv, 4);
		if (!nv)
			return NULL;
		fs->dpend = nv;
	}
	fs_dir_pending *p = &fs->dpend[fs->n_dpend];
	*p = (fs_dir_pending){.path = strdup(path),
			      .step = step,
			      .mode = m->mode & 07777,
			      .uid = m->uid,
			      .gid = m->gid,
			      .mtime = m->mtime};
	p->root = root ? strdup(root) : NULL;
	if (!p->path || (root && !p->root)) {
		free(p->path);
		free(p->root);
		return NULL;
	}
	p->xattrs_json = wr_xattrs_text(m->xattrs, m->xattrs_len);
	clock_gettime(CLOCK_REALTIME, &p->ctime);
	fs->n_dpend++;
	return p;
}

/* The root whose manifests record n, listing n and its ancestors when
 * their manifests are not loaded (a directory this mount committed and
 * never listed since).  Table locked; dropped while listing. */
static char *record_root(fs_ctx *fs, fs_inode *n)
{
	char *root = fs_dir_record_root(n);
	if (root)
		return root;
	fs_inode_ref(n);
	for (fs_inode *a = n; a && !root; a = a->parent) {
		if (fs_dir_load(fs, a) < 0)
			break;
		root = fs_dir_record_root(n);
	}
	fs_itable_unref(fs->it, n);
	return root;
}

int wr_dirattr_store(fs_ctx *fs, fs_inode *n, const ov_node *tmp)
{
	char *root = record_root(fs, n);
	if (!root)
		return -ENOTSUP;
	wr_ordered(fs, n->path, NULL);
	eng_meta m;
	buf xa = BUF_INIT;
	wr_meta_of(tmp, &m, &xa);
	uint64_t step = 0;
	int rc = eng_dir_set(fs->eng, n->path, &m, root, &step);
	fs_dir_pending *p = rc ? NULL
			       : pending_add(fs, n->path, root, step, &m);
	if (p) /* not a directory made at that name later */
		p->ino = n->ino;
	free(root);
	buf_free(&xa);
	if (rc)
		return rc;
	if (!p)
		return -ENOMEM; /* stored, but not shown until it lands */
	fs_dir_show_pending(fs, n); /* at once, as a listing will */
	return 0;
}

/* Whether done change p no longer needs to show: its root's manifests
 * were listed since its step was done (they hold its record), or no
 * inode holds them (the next one lists them afresh).  Table locked. */
static bool settled(fs_ctx *fs, fs_dir_pending *p)
{
	if (!p->root) { /* restored after a restart */
		fs_inode *d = fs_itable_find(fs->it, p->path);
		p->root = d && d->is_dir ? fs_dir_record_root(d) : NULL;
		if (!p->root)
			return true;
	}
	fs_inode *r = fs_itable_find(fs->it, p->root);
	return !r || (!r->listing_busy && r->listing &&
		      r->listing_gen >= p->done_gen);
}

void wr_dirattr_reap(fs_ctx *fs)
{
	size_t w = 0;
	for (size_t i = 0; i < fs->n_dpend; i++) {
		fs_dir_pending *p = &fs->dpend[i];
		if (!p->done_gen && !eng_txn_pending(fs->eng, p->step))
			/* a listing from before does not show the record */
			p->done_gen = ++fs->listing_gen;
		if (!p->done_gen || !settled(fs, p)) {
			fs->dpend[w++] = *p;
			continue;
		}
		pending_free(p);
	}
	fs->n_dpend = w;
}

static void restore_one(void *arg, uint64_t step, const char *path,
			const eng_meta *m)
{
	pending_add(arg, path, NULL, step, m);
}

void wr_dirattr_restore(fs_ctx *fs)
{
	eng_foreach_pending_dir_set(fs->eng, restore_one, fs);
}

void wr_dirattr_free(fs_ctx *fs)
{
	for (size_t i = 0; i < fs->n_dpend; i++)
		pending_free(&fs->dpend[i]);
	free(fs->dpend);
	fs->dpend = NULL;
	fs->n_dpend = fs->cap_dpend = 0;
}
