/*
 * The write path when the application is quiet (fs/write.c has the
 * overview): the idle-commit thread, started with the engine
 * (fs_ctx_set_engine), wakes every 250 ms to send held deletes after a
 * second of quiet, seal directory transactions idle for commit_delay
 * seconds (half a second once it holds a checkpoint's last file by the
 * completion rules), and drop the local nodes of what the engine made visible
 * (reap); and the upload hold (eng_hold_uploads) while writable handles
 * are open.
 */
#include "fs/write-idle.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commit/engine.h"
#include "fs/ctx.h"
#include "fs/write-deletes.h"
#include "fs/write-dirattrs.h"
#include "fs/write-local.h"
#include "fs/write-txn.h"
#include "proto/meta.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/vec.h"

typedef struct drop_ctx {
	fs_ctx *fs;
	uint64_t *pending;
	size_t n;
	bool changed;
	bool whiteouts; /* pending is the engine's whole queue: whiteouts of
	                 * finished deletes may go when it is empty */
} drop_ctx;

static bool pending_has(const drop_ctx *d, uint64_t id)
{
	for (size_t i = 0; i < d->n; i++)
		if (d->pending[i] == id)
			return true;
	return false;
}

/*
 * What a reaped node leaves in the listings this mount holds.  Those may
 * predate the commit, and while the store is unreachable the last listing
 * of a directory is served (fs/nodes.c dir_fetch_once): without this, a
 * checkpoint just committed would vanish from its own writer for the
 * whole outage.  So a committed name goes into its parent's listing and a
 * delete that went through takes the name out; a directory this mount
 * made gets a listing of its own, filled by its children here.  Nothing
 * here makes a listing fresh: the next look lists the store as before,
 * and only when that fails are these served.  A file entry carries no
 * ETag (the version is the store's to tell).  Table locked.
 */
static ns_dir *held_listing(fs_ctx *fs, const char *path, bool make)
{
	fs_inode *n = fs_itable_find(fs->it, path);
	if (!n || !n->is_dir)
		return NULL;
	if (!n->listing && make) {
		n->listing = calloc(1, sizeof *n->listing);
		if (n->listing) {
			ns_dir_init(n->listing, NULL, NULL);
			n->listing_time = 0;
			n->listing_gen = fs->listing_gen;
			n->listing_held = true;
		}
	}
	return n->listing;
}

static void leave_in_listings(fs_ctx *fs, ov_node **v, size_t k)
{
	for (size_t i = 0; i < k; i++) {
		if (v[i]->kind != OV_DIR || v[i]->shadows)
			continue;
		/* one restored from the journal (merge) keeps the bucket's
		 * listing it had, from before the commit (its manifests an
		 * intent, no "dir": mode 0755 after a kill), held as well */
		ns_dir *l = held_listing(fs, v[i]->path, !v[i]->merge);
		fs_inode *n = l && v[i]->merge
				  ? fs_itable_find(fs->it, v[i]->path)
				  : NULL;
		if (n)
			n->listing_held = true;
	}
	for (size_t i = 0; i < k; i++) {
		const ov_node *o = v[i];
		char *pp = ov_parent(o->path);
		ns_dir *l = pp ? held_listing(fs, pp, false) : NULL;
		free(pp);
		if (!l)
			continue;
		const char *slash = strrchr(o->path, '/');
		const char *name = slash ? slash + 1 : o->path;
		if (o->kind == OV_WHITEOUT)
			ns_dir_drop(l, name);
		else if (ns_dir_put(l, name, o->kind == OV_DIR, o->size,
				    o->mtime) < 0)
			log_warn("out of memory keeping /%s listed", o->path);
	}
}

/*
 * The nodes v[0..k) leave the overlay: their names are remote again (a
 * commit made them visible, or a delete went through).  The inodes of the
 * paths show what was committed until a listing says more, and their
 * version is asked again (the object is another version than any the
 * inode saw before it became local).  Table locked.
 */
static void drop_nodes(fs_ctx *fs, ov_node **v, size_t k)
{
	leave_in_listings(fs, v, k);
	for (size_t i = 0; i < k; i++) {
		fs_inode *n = fs_itable_find(fs->it, v[i]->path);
		ov_node *o = v[i];
		if (n && o->kind != OV_WHITEOUT && !o->placeholder) {
			free(n->etag);
			n->etag = NULL;
			n->attr_time = 0;
			/* what was committed, until a listing says more */
			n->has_attrs = true;
			n->attrs_committed = o->kind != OV_DIR;
			n->mode = o->mode;
			n->rdev = o->rdev;
			/* and the xattrs it committed with */
			free(n->xattrs_json);
			n->xattrs_json =
			    wr_xattrs_text(o->xattrs.data, o->xattrs.len);
			n->uid = o->uid;
			n->gid = o->gid;
			n->mtime = o->mtime;
			n->size = o->kind == OV_FILE ? o->size : 0;
			free(n->symlink);
			n->symlink = o->kind == OV_LINK && o->target
					     ? strdup(o->target)
					     : NULL;
		}
		ov_remove(&fs->ov, v[i]);
	}
}

void wr_drop_committed(fs_ctx *fs, ov_node *o)
{
	drop_nodes(fs, &o, 1);
	fs->listing_gen++; /* a listing from before does not show it */
}

bool wr_drop_if_done(fs_ctx *fs, const char *path)
{
	ov_node *o = ov_get(&fs->ov, path);
	if (!o || o->kind != OV_FILE || !o->txn || !o->txn->sealed ||
	    o->writers || o->dirty || o->meta_dirty ||
	    (!o->txn->done && eng_txn_pending(fs->eng, o->txn->id)))
		return false;
	wr_drop_committed(fs, o);
	return true;
}

/* Removes the nodes of transactions now visible remotely, and whiteouts
 * whose delete went through.  Table locked. */
static void reap(fs_ctx *fs, drop_ctx *d)
{
	for (ov_txn *x = fs->ov.txns; x; x = x->next)
		if (x->sealed && !x->done && !pending_has(d, x->id)) {
			x->done = true;
			d->changed = true;
		}
	/* collect nodes first: removing while walking the table is not safe */
	size_t cap = 64, k = 0;
	ov_node **v = malloc(cap * sizeof *v);
	for (size_t i = 0; v && i < fs->ov.nb; i++) {
		for (ov_node *o = fs->ov.b[i]; o; o = o->hnext) {
			bool go = false;
			if (o->kind == OV_WHITEOUT)
				go = d->whiteouts && d->n == 0 &&
				     !wr_dels_held_now(fs) &&
				     wr_now_s() - o->wo_time > 1.0 &&
				     !wr_dels_revived_at(fs, o->path);
			else
				go = o->txn && o->txn->done && o->refs == 0;
			if (!go)
				continue;
			if (k == cap) {
				ov_node **nv = vec_grow(v, &cap, sizeof *v, 64);
				if (!nv)
					break;
				v = nv;
			}
			v[k++] = o;
		}
	}
	drop_nodes(fs, v, k);
	if (k)
		d->changed = true;
	free(v);
	ov_txn_free_done(&fs->ov);
}

typedef struct files_ctx {
	ov_txn *x;
	bool any;
} files_ctx;

static void has_file_one(void *arg, ov_node *o)
{
	files_ctx *f = arg;
	if (o->txn == f->x && (o->kind == OV_FILE || o->kind == OV_LINK))
		f->any = true;
}

/*
 * Whether x holds a file.  A directory made and not written yet does not
 * commit by idleness: in a multi-host save every host makes the directory
 * first and writes later, and its empty transaction committing early
 * would drop its marker, letting the others' files show without its own.
 * Table locked.
 */
static bool txn_has_files(fs_ctx *fs, ov_txn *x)
{
	if (!x->is_dir)
		return true;
	files_ctx f = {x, false};
	ov_each(&fs->ov, has_file_one, &f);
	return f.any;
}

/* ---- completion rules (proto/complete.h) ------------------------------ */

typedef struct rule_ctx {
	ov_txn *x;
	const vis_rules *r;
	unsigned char *seen; /* per rule: 1 trigger, 2 required */
} rule_ctx;

static void rule_one(void *arg, ov_node *o)
{
	rule_ctx *c = arg;
	if (o->txn != c->x || o->kind != OV_FILE)
		return;
	const char *slash = strrchr(o->path, '/');
	const char *name = slash ? slash + 1 : o->path;
	for (size_t i = 0; i < c->r->n; i++) {
		if (fnmatch(c->r->v[i].trigger, name, 0) == 0)
			c->seen[i] |= 1;
		if (fnmatch(c->r->v[i].required, name, 0) == 0)
			c->seen[i] |= 2;
	}
}

/*
 * Whether directory transaction x holds a checkpoint's last file: a file
 * matching a rule's required pattern beside one matching its trigger
 * (.metadata beside the .distcp shards).  The framework has said the
 * checkpoint is done, so x seals once the application is quiet instead of
 * after commit_delay.  Table locked.
 */
static bool txn_completed(fs_ctx *fs, ov_txn *x)
{
	if (!x->is_dir || !fs->complete.n)
		return false;
	unsigned char seen[16] = {0};
	rule_ctx c = {x, &fs->complete, seen};
	vis_rules r = fs->complete;
	if (r.n > sizeof seen)
		r.n = sizeof seen;
	c.r = &r;
	ov_each(&fs->ov, rule_one, &c);
	for (size_t i = 0; i < r.n; i++)
		if (seen[i] == 3)
			return true;
	return false;
}

/* ---- the upload hold (eng_hold_uploads) -------------------------------- */

/* Seconds without a writable handle after which the application counts as
 * done writing: a checkpoint's files are written one after another, and
 * the instant between one close and the next open is not the end. */
#define WRITE_QUIET_S 0.3

/* Seconds of quiet after which a transaction holding a checkpoint's last
 * file (txn_completed) seals, whatever commit_delay says. */
#define COMPLETE_QUIET_S 0.5

/* A writable handle was opened.  Table locked. */
void wr_writer_opened(fs_ctx *fs)
{
	fs->writers++;
	if (fs->eng && !fs->hold_on) {
		fs->hold_on = true;
		eng_hold_uploads(fs->eng, true);
	}
}

/* Each tick of the idle thread: still writing?  Table locked. */
static void hold_tick(fs_ctx *fs, double now)
{
	bool w = fs->writers > 0 || now - fs->writers_idle_at < WRITE_QUIET_S;
	if (fs->eng && (w || fs->hold_on)) {
		fs->hold_on = w;
		eng_hold_uploads(fs->eng, w);
	}
}

/* Drops the nodes of what the engine made visible (reap), after asking it
 * what is still pending (eng_status runs without the table lock, which is
 * taken around the reap and stays taken). */
static void reap_now(fs_ctx *fs)
{
	eng_txn_status *st = NULL;
	size_t n = 0;
	int rc = eng_status(fs->eng, &st, &n);
	drop_ctx d = {fs, NULL, 0, false, true};
	if (rc == 0 && n)
		d.pending = calloc(n, sizeof *d.pending);
	for (size_t i = 0; d.pending && i < n; i++)
		d.pending[d.n++] = st[i].id;
	if (rc == 0)
		eng_status_free(st, n);
	fs_itable_lock(fs->it);
	if (rc == 0 && (n == 0 || d.pending))
		reap(fs, &d);
	if (d.changed)
		fs->listing_gen++;
	free(d.pending);
}

static void *idle_main(void *arg)
{
	fs_ctx *fs = arg;
	fs_itable_lock(fs->it);
	while (!fs->idle_stop) {
		struct timespec ts;
		clock_realtime_in(&ts, 250);
		pthread_cond_timedwait(&fs->idle_cv, fs_itable_mutex(fs->it),
				       &ts);
		if (fs->idle_stop)
			break;
		double t = wr_now_s();
		hold_tick(fs, t);
		if (fs->n_dpend)
			wr_dirattr_reap(fs);
		/* quiet: no change for a while and no listing on its way
		 * (an rm -r waiting for a stalled LIST is not done) */
		if (fs->dels->n && t - fs->dels->last > DELETE_QUIET_S &&
		    !fs->fetching)
			wr_flush_quiet(fs);
		for (ov_txn *x = fs->ov.txns; x; x = x->next) {
			if (x->sealed || x->done || x->open != 0)
				continue;
			double idle = t - x->last_change;
			if (idle >= fs->commit_delay ? txn_has_files(fs, x)
			    : idle >= COMPLETE_QUIET_S && txn_completed(fs, x))
				wr_seal(fs, x);
		}
		bool any_sealed = false;
		for (ov_txn *x = fs->ov.txns; x; x = x->next)
			any_sealed |= x->sealed && !x->done;
		bool whiteouts = false;
		if (!any_sealed) {
			for (size_t i = 0; i < fs->ov.nb && !whiteouts; i++)
				for (ov_node *o = fs->ov.b[i]; o; o = o->hnext)
					if (o->kind == OV_WHITEOUT) {
						whiteouts = true;
						break;
					}
		}
		if (!any_sealed && !whiteouts)
			continue;
		fs_itable_unlock(fs->it);
		reap_now(fs);
	}
	fs_itable_unlock(fs->it);
	return NULL;
}

void wr_reap(fs_ctx *fs)
{
	/* the sealed transactions the engine still has, asked one by one
	 * (a rename must not wait for a whole eng_status snapshot); the
	 * whiteouts are left to the idle thread, which sees the whole queue */
	size_t n = 0, k = 0;
	for (ov_txn *x = fs->ov.txns; x; x = x->next)
		n += x->sealed && !x->done;
	if (!n)
		return;
	drop_ctx d = {fs, calloc(n, sizeof(uint64_t)), 0, false, false};
	if (!d.pending)
		return;
	for (ov_txn *x = fs->ov.txns; x; x = x->next)
		if (x->sealed && !x->done && eng_txn_pending(fs->eng, x->id))
			d.pending[k++] = x->id;
	d.n = k;
	reap(fs, &d);
	if (d.changed)
		fs->listing_gen++;
	free(d.pending);
}

void wr_shutdown(fs_ctx *fs)
{
	if (!fs->idle_running)
		return;
	fs_itable_lock(fs->it);
	fs->idle_stop = true;
	pthread_cond_broadcast(&fs->idle_cv);
	fs_itable_unlock(fs->it);
	pthread_join(fs->idle_thread, NULL);
	fs->idle_running = false;
}

void wr_set_engine(fs_ctx *fs, eng *e, double commit_delay)
{
	fs->eng = e;
	fs->commit_delay = commit_delay;
	if (e && !fs->idle_running &&
	    pthread_create(&fs->idle_thread, NULL, idle_main, fs) == 0)
		fs->idle_running = true;
}
