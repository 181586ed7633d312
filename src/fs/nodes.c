/*
 * What the mount knows of remote names, kept on the inodes (fs/inode.h):
 * directory listings (fs_dir_load: ListObjectsV2 through fs/listing.h,
 * cached for dir_timeout, shared by concurrent lookups, the last one kept
 * through an outage), the manifests that filter them (proto/visibility.h),
 * and file attributes from listings and manifests (object metadata is
 * fs/metaread.c's).  It answers stat and entry replies (fs_fill_stat,
 * fs_fill_entry) for both sides: a local node's attributes come from the
 * overlay (fs/local.c).
 *
 * Concurrency: called with the table locked; a thread that needs a listing
 * marks the directory busy, drops the lock, lists, and publishes the
 * result; others wait on the table's condition variable instead of listing
 * the same directory twice.
 *
 * Directory mtime: the newest LastModified among the objects of its own
 * listing (marker included), known once the directory has been listed.
 * Until then the entry is returned with attr_timeout 0 so that a stat asks
 * again (getattr lists the directory to learn it).
 */
#include "fs/nodes.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/ctx.h"
#include "fs/listing.h"
#include "fs/local.h"
#include "proto/namespace.h"
#include "util/buf.h"
#include "util/log.h"

/* Logs each skipped key once per mount (bounded memory). */
static void report_key(void *arg, const char *key, size_t key_len,
		       ns_reason why)
{
	fs_ctx *fs = arg;
	uint64_t h = 1469598103934665603ULL;
	for (size_t i = 0; i < key_len; i++)
		h = (h ^ (unsigned char)key[i]) * 1099511628211ULL;
	pthread_mutex_lock(&fs->log_mu);
	bool seen = false;
	for (size_t i = 0; i < fs->n_logged && !seen; i++)
		seen = fs->logged[i] == h;
	if (!seen && fs->n_logged < LOGGED_MAX)
		fs->logged[fs->n_logged++] = h;
	pthread_mutex_unlock(&fs->log_mu);
	if (seen)
		return;
	log_warn("skipping key \"%.*s\": %s", (int)key_len, key,
		 why == NS_SKIP_SHADOWED_BY_DIR
			 ? "a directory of the same name hides it"
			 : "it cannot be a path (empty, '.', '..' or over 255 bytes component)");
}

char *fs_object_key(fs_ctx *fs, const fs_inode *n)
{
	buf b = BUF_INIT;
	buf_printf(&b, "%s%s", fs->prefix, n->path);
	return buf_steal(&b);
}

static char *dir_prefix(fs_ctx *fs, const fs_inode *d)
{
	buf b = BUF_INIT;
	buf_puts(&b, fs->prefix);
	if (d->path[0])
		buf_printf(&b, "%s/", d->path);
	return buf_steal(&b);
}

void fs_fill_stat(fs_ctx *fs, const fs_inode *n, struct stat *st)
{
	if (fs_local_fill_stat(fs, n, st))
		return;
	memset(st, 0, sizeof *st);
	st->st_ino = n->ino;
	st->st_uid = fs->o.uid;
	st->st_gid = fs->o.gid;
	if (n->is_dir) {
		st->st_mode = S_IFDIR | (0777 & ~fs->o.umask);
		st->st_nlink = 2;
		st->st_size = 4096;
	} else {
		st->st_mode = S_IFREG | (0666 & ~fs->o.umask);
		st->st_nlink = 1;
		st->st_size = (off_t)n->size;
		st->st_blocks = (blkcnt_t)((n->size + 511) / 512);
	}
	if (n->has_attrs && n->is_dir) {
		/* what the manifest's "dirs" entry recorded */
		st->st_mode = S_IFDIR | (n->mode & 07777);
		st->st_uid = n->uid;
		st->st_gid = n->gid;
	}
	if (n->has_attrs && !n->is_dir) {
		/* what the writer recorded in the manifest */
		st->st_mode = n->symlink ? S_IFLNK | 0777
					 : proto_file_mode(n->mode);
		st->st_uid = n->uid;
		st->st_gid = n->gid;
		if (n->symlink)
			st->st_size = (off_t)strlen(n->symlink);
		if (!n->symlink && !S_ISREG(st->st_mode)) {
			st->st_size = st->st_blocks = 0;
			st->st_rdev = (dev_t)n->rdev;
		}
	}
	/* the buffer cat, cp and Python's buffered files size from it.  A
	 * fresh buffer costs a page fault per page it touches, for every file
	 * opened: a 1 MiB one nearly doubled the time of a hot `cat` of 400
	 * files of 256 KiB.  Large files keep 1 MiB: with 128 KiB, a warm
	 * `cat` of 64 MiB files from the cache's disk took twice as long
	 * (though `dd bs=128K` did not), while a hot one gained 20%.
	 * Uncached reads are sized by the kernel's read-ahead
	 * (max_readahead), not by this (doc/architecture.md, "Reads") */
	st->st_blksize = !n->is_dir && n->size >= FS_BIG_FILE ? FS_BIG_BLKSIZE
							     : FS_READ_BLKSIZE;
	struct timespec t = n->mtime;
	if (t.tv_sec == 0 && t.tv_nsec == 0)
		t = fs->mount_time;
	st->st_mtim = st->st_ctim = st->st_atim = t;
	/* ctime: the bucket keeps none.  The last change this mount can
	 * know of is when the object was stored (its LastModified; for a
	 * directory the newest one in its listing), never earlier than the
	 * recorded mtime: a file copied today with a 2024 mtime has today's
	 * ctime, as on a local disk (doc/posix.md, "Times of committed
	 * names").  atime stays the mtime. */
	const struct timespec *lm = &n->obj_mtime;
	if (n->is_dir && n->rec_since.tv_sec) /* recorded since (nodes.c) */
		lm = &n->rec_since;
	if (lm->tv_sec > t.tv_sec ||
	    (lm->tv_sec == t.tv_sec && lm->tv_nsec > t.tv_nsec))
		st->st_ctim = *lm;
}

void fs_meta_version(char out[FS_META_VER_MAX], const char *etag,
		     struct timespec lm)
{
	snprintf(out, FS_META_VER_MAX, "%s@%lld.%09ld", etag ? etag : "",
		 (long long)lm.tv_sec, lm.tv_nsec);
}

bool fs_meta_read_for(const fs_inode *n, const char *etag,
		      struct timespec lm)
{
	return n->meta_etag && etag && !strcmp(n->meta_etag, etag) &&
	       n->meta_mtime.tv_sec == lm.tv_sec &&
	       n->meta_mtime.tv_nsec == lm.tv_nsec;
}

void fs_set_version(fs_inode *n, const char *etag, struct timespec lm)
{
	if (n->etag && !strcmp(n->etag, etag) &&
	    (!lm.tv_sec || n->obj_mtime.tv_sec == lm.tv_sec))
		return;
	if (n->etag && strcmp(n->etag, etag) != 0)
		n->attrs_committed = false; /* another version */
	free(n->etag);
	n->etag = strdup(etag);
	n->obj_mtime = lm;
}

/* n's attributes from entry e of d's listing, as old as that listing (now
 * when d has none): a lookup answered from a listing past dir_timeout
 * (the stale rule) leaves them that old, so that open asks again rather
 * than pin a version that may have been replaced since (and the kernel
 * then learns the size of the one it pins, fs/read.c rd_open). */
static void set_file_attrs(fs_inode *n, const ns_entry *e, const fs_inode *d)
{
	n->size = e->size;
	/* what this mount committed stands for the first version listed
	 * after the commit and for that version only (another host's
	 * later one shows its own) */
	if (n->attrs_committed && n->etag && e->etag &&
	    strcmp(n->etag, e->etag) != 0)
		n->attrs_committed = false;
	/* the writer's mtime, read from this version's metadata or
	 * committed by this mount, stays */
	if (!(n->has_attrs && (n->attrs_committed ||
			       fs_meta_read_for(n, e->etag, e->mtime))))
		n->mtime = e->mtime;
	n->obj_mtime = e->mtime;
	if (!n->etag || !e->etag || strcmp(n->etag, e->etag) != 0) {
		free(n->etag);
		n->etag = e->etag ? strdup(e->etag) : NULL;
	}
	/* and the request they came from (fs/read.c look_current) */
	bool listed = d->listing != NULL;
	n->attr_time = listed ? d->listing_time : fs_now();
	n->obs_began = listed ? d->listing_began : 0;
	n->obs_replied = listed ? d->listing_replied : 0;
}

static void set_manifest(fs_inode *d, vis_manifest *man)
{
	if (d->manifest) {
		vis_manifest_free(d->manifest);
		free(d->manifest);
	}
	d->manifest = man;
}

/* The manifests governing path below dir (its nearest ancestor, dir
 * included, that is a transaction root) and path relative to that root
 * in *rel; NULL when none.  Table locked. */
static const vis_manifest *root_manifest(const fs_inode *dir,
					 const char *path, const char **rel)
{
	const fs_inode *r = dir;
	while (r && !r->manifest)
		r = r->parent;
	if (!r)
		return NULL;
	*rel = path + strlen(r->path);
	if (**rel == '/')
		(*rel)++;
	return r->manifest;
}

static void remote_dir_attrs(fs_ctx *fs, fs_inode *parent, fs_inode *c);

bool fs_dir_uncommitted(const fs_inode *d)
{
	const char *rel;
	const vis_manifest *m = root_manifest(d, d->path, &rel);
	return m && m->committed == 0 && m->pending > 0;
}

/* Inside a transaction root only the files of its committed manifests
 * show (proto/visibility.h).  Table locked. */
static void apply_manifest(fs_inode *d, ns_dir *nd)
{
	const char *rel;
	const vis_manifest *m = root_manifest(d, d->path, &rel);
	if (m)
		vis_filter_listing(nd, m, rel);
}

/*
 * Makes d->listing fresh.  Called and returns with the table locked; drops
 * the lock while listing.  Returns 0 or a negative errno.
 */
static int dir_fetch(fs_ctx *fs, fs_inode *d);

int fs_dir_load(fs_ctx *fs, fs_inode *d)
{
	for (;;) {
		if (d->listing && d->listing_gen == fs->listing_gen &&
		    fs_now() - d->listing_time < fs->o.dir_timeout)
			return 0;
		if (!d->listing_busy)
			break;
		fs_itable_wait(fs->it);
	}
	return dir_fetch(fs, d);
}

/* Lists d again whatever its age (a miss that must not be answered from
 * an older look).  Table locked. */
int fs_dir_refetch(fs_ctx *fs, fs_inode *d)
{
	while (d->listing_busy)
		fs_itable_wait(fs->it);
	return dir_fetch(fs, d);
}

/* A listing this far into dir_timeout is refreshed ahead of its expiry
 * by fs_dir_refresh_ahead. */
#define AHEAD_AT 0.75

void fs_dir_refresh_ahead(fs_ctx *fs, fs_inode *d)
{
	double age = fs_now() - d->listing_time;
	if (!d->listing || d->listing_busy || d->listing_gen != fs->listing_gen ||
	    fs->o.dir_timeout <= 0 || age < AHEAD_AT * fs->o.dir_timeout ||
	    age >= fs->o.dir_timeout)
		return;
	if (dir_fetch(fs, d) < 0)
		log_debug("refresh of /%s ahead of its expiry failed", d->path);
}

static int dir_fetch_once(fs_ctx *fs, fs_inode *d);

/*
 * Lists d (fs_dir_load without the freshness check).  Table locked.  A
 * commit of this mount that became visible while the LIST ran (the
 * listing generation moved) may have dropped local nodes the listing was
 * too early to show: merged with what is local now, the listing would
 * miss a name this mount just wrote (a file closed in a committed
 * directory, its addendum landing mid-LIST).  So d is listed again, a
 * few times at most.
 */
static int dir_fetch(fs_ctx *fs, fs_inode *d)
{
	for (int i = 0;; i++) {
		uint64_t gen = fs->listing_gen;
		int rc = dir_fetch_once(fs, d);
		if (rc < 0 || gen == fs->listing_gen || i == 3)
			return rc;
		while (d->listing_busy)
			fs_itable_wait(fs->it);
	}
}

/*
 * The manifests that filter d's names and record d's attributes are those
 * of its nearest ancestor with manifests (root_manifest).  When that
 * ancestor was listed
 * before this mount's last change to the bucket (listing_gen), a commit
 * since may have recorded d again (its addendum's parent record): it is
 * listed again first.  Otherwise d's own listing, newer, showed an object
 * stored since as newer than the record, d's mtime became that object's
 * LastModified, and the next commit recorded that (CI saw a committed
 * directory's mtime move when a file in it was stored again).  Table
 * locked; dropped while listing.
 */
static void fresh_root_manifest(fs_ctx *fs, fs_inode *d)
{
	fs_inode *r = d->parent;
	while (r && !r->manifest)
		r = r->parent;
	if (!r || r->listing_gen == fs->listing_gen)
		return;
	fs_inode_ref(r);
	if (fs_dir_load(fs, r) < 0)
		log_debug("listing of /%s for the attributes of /%s failed",
			  r->path, d->path);
	fs_itable_unref(fs->it, r);
}

static int dir_fetch_once(fs_ctx *fs, fs_inode *d)
{
	d->listing_busy = true;
	uint64_t gen = fs->listing_gen;
	double began = fs_now();
	fs_inode_ref(d);
	char *prefix = dir_prefix(fs, d);
	fs->fetching++;
	fs_itable_unlock(fs->it);

	ns_dir *nd = calloc(1, sizeof *nd);
	vis_manifest *man = NULL;
	s3_err e = {0};
	int rc = nd ? fs_listing_fetch(fs->s3, fs->mcache, prefix,
				       fs->o.object_meta == FS_META_AUTO,
				       report_key, fs, nd, &man, &e)
		    : -1;
	/* the store unreachable or failing (transport, 5xx, throttled) and
	 * a listing from before: keep serving that one, so what is cached
	 * stays readable through an outage; it counts as fresh for another
	 * dir_timeout, so a path's lookups do not each wait out the retries.
	 * A final answer (403, no such bucket) is an error. */
	bool stale = false;
	if (rc < 0) {
		free(nd);
		nd = NULL;
		rc = -(e.err ? e.err : EIO);
		stale = e.err != ENOMEM && s3_err_transient(&e);
	}
	free(prefix);

	fs_itable_lock(fs->it);
	d->listing_busy = false;
	if (--fs->fetching == 0)
		fs_local_fetch_done(fs);
	fs_itable_broadcast(fs->it);
	if (stale && d->listing) {
		log_warn("%s (serving the last listing of /%s)", e.msg,
			 d->path);
		d->listing_time = fs_now();
		rc = 0;
	} else if (rc < 0) {
		log_error("%s", e.msg[0] ? e.msg : "out of memory listing");
	}
	if (nd) {
		/* the manifests that filter d's names first: an object this
		 * listing shows, committed since the root above was listed,
		 * is recorded in an addendum that listing does not have, and
		 * was hidden (model seed 7708: a symlink just committed
		 * vanished from its directory on the writer) */
		fresh_root_manifest(fs, d);
		if (d->listing) {
			ns_dir_free(d->listing);
			free(d->listing);
		}
		set_manifest(d, man);
		apply_manifest(d, nd);
		/* a checkpoint whose last file has not come (rule) */
		vis_rules_apply(nd, &fs->complete);
		d->listing = nd;
		d->listing_held = false;
		/* a directory found gone (or not committed yet) is asked
		 * again at the next look, never answered from this listing:
		 * a reader that just read a `latest` naming it must not get
		 * ENOENT from a look older than that (issue 21) */
		d->listing_time = nd->vanished ? 0 : fs_now();
		/* and its parent, whose listing may still name it: the next
		 * readdir or lookup there lists again instead of sending a
		 * reader back to the name it just found gone (adaptdl's
		 * loader: listdir, newest checkpoint-N, open a file in it) */
		if (nd->vanished && d->parent)
			d->parent->listing_time = -1e9;
		d->listing_began = began;
		d->listing_replied = fs_now();
		d->listing_gen = gen;
		if (nd->newest.tv_sec)
			d->mtime = d->obj_mtime = nd->newest;
		/* what the writer recorded (a transaction root's own "dir") */
		remote_dir_attrs(fs, d->parent, d);
		d->attr_time = d->listing_time;
	}
	fs_itable_unref(fs->it, d);
	return rc;
}

/*
 * The entry of name in d's listing when a lookup may answer from that
 * listing although it is older than dir_timeout (the caller then
 * refreshes it after replying), else NULL (also while it is fresh: the
 * lookup's usual path answers then, with one search of the listing).  Within STALE_OK_FACTOR x
 * dir_timeout, never with dir_timeout=0, never after this mount changed
 * the bucket (listing_gen), and only for
 *  - any name of a large directory (STALE_OK_MIN entries: a LIST of
 *    several pages, ~1 s over a WAN for 10 000 entries, which `ls -l`
 *    would otherwise wait for again every dir_timeout);
 *  - a subdirectory's name in any directory: walking a path to a file
 *    would otherwise wait for one LIST per directory above it, in turn,
 *    every dir_timeout, and a subdirectory's contents come from its own
 *    listing anyway (a directory removed since answers ENOENT at opendir
 *    and has no names).
 * A name new since is looked up as before (the lookup lists); a removed
 * one answers until the refresh lands.  Table locked.
 */
#define STALE_OK_MIN 1000
#define STALE_OK_FACTOR 4
bool fs_dir_recent(fs_ctx *fs, const fs_inode *d)
{
	return d->listing && d->listing_gen == fs->listing_gen &&
	       fs_now() - d->listing_time < STALE_OK_FACTOR * fs->o.dir_timeout;
}

const ns_entry *fs_dir_stale_entry(fs_ctx *fs, const fs_inode *d,
				   const char *name)
{
	if (!fs_dir_recent(fs, d) || fs->o.dir_timeout <= 0 ||
	    fs_now() - d->listing_time < fs->o.dir_timeout)
		return NULL; /* fresh: fs_dir_load keeps it; too old: lists */
	const ns_entry *e = ns_dir_find(d->listing, name);
	return e && (e->is_dir || d->listing->n >= STALE_OK_MIN) ? e : NULL;
}

/* An inode bound to a passthrough backing file of another version of its
 * object, or whose pages the kernel may hold for another version, cannot
 * serve the new one: the path gets a new inode, so old handles keep the
 * old size and bytes, as a file replaced by rename keeps them on a disk
 * filesystem.  Open handles are not the only holders: a mapping outlives
 * its file's close (safetensors keeps its mmap), and the new, maybe
 * shorter, size on the same inode would SIGBUS it. */
bool fs_bound_to_other_version(const fs_inode *n, const char *etag)
{
	if (!etag)
		return false;
	if (n->pt_backing_id > 0 && n->pt_etag && strcmp(n->pt_etag, etag))
		return true;
	return n->kc_etag && strcmp(n->kc_etag, etag);
}

/* Attributes of file c from the manifests of its transaction root, when
 * they recorded some (mode, owner, mtime, symlink, xattrs).  Table locked. */
static void remote_attrs(fs_inode *parent, fs_inode *c)
{
	const char *rel;
	const vis_manifest *m = root_manifest(parent, c->path, &rel);
	const vis_file *v = m ? vis_manifest_find(m, rel) : NULL;
	if (!v || !v->has_attrs) {
		if (!c->meta_etag && !c->attrs_committed)
			c->has_attrs = false;
		return;
	}
	c->attrs_committed = false; /* the manifest speaks for it */
	free(c->meta_etag);
	c->meta_etag = NULL; /* the manifest speaks for it */
	c->has_attrs = true;
	c->mode = v->mode;
	c->rdev = v->rdev;
	c->uid = v->uid;
	c->gid = v->gid;
	if (v->mtime_ns) /* 0: not recorded (proto/meta.h) */
		proto_ns_time(v->mtime_ns, &c->mtime);
	if (!c->symlink != !v->symlink ||
	    (v->symlink && strcmp(c->symlink, v->symlink))) {
		free(c->symlink);
		c->symlink = v->symlink ? strdup(v->symlink) : NULL;
	}
	if (!c->xattrs_json != !v->xattrs_json ||
	    (v->xattrs_json && strcmp(c->xattrs_json, v->xattrs_json))) {
		free(c->xattrs_json);
		c->xattrs_json = v->xattrs_json ? strdup(v->xattrs_json) : NULL;
	}
}

/* Attributes of directory c from the "dirs" entry of the manifests of the
 * transaction it was made in, or its own "dir" when it is a transaction
 * root: mode, owner, user xattrs and mtime (to the ns), as the writer
 * recorded them.  The recorded mtime stands until an object directly in
 * c is newer than the newest manifest that recorded it (a name came
 * since by other means: ckptfs' commits record c again, as a "parent"):
 * then the newest LastModified shows, as for directories other tools
 * made (doc/posix.md, "Directory attributes").
 * Table locked. */
static void recorded_dir_attrs(fs_inode *parent, fs_inode *c);

bool fs_dir_show_pending(fs_ctx *fs, fs_inode *c)
{
	const fs_dir_pending *p = NULL;
	for (size_t i = 0; i < fs->n_dpend; i++)
		if (!strcmp(fs->dpend[i].path, c->path) &&
		    (!fs->dpend[i].ino || fs->dpend[i].ino == c->ino) &&
		    (!p || fs->dpend[i].step > p->step))
			p = &fs->dpend[i];
	if (!p)
		return false;
	c->has_attrs = true;
	c->mode = p->mode;
	c->uid = p->uid;
	c->gid = p->gid;
	c->mtime = p->mtime;
	c->rec_since = p->ctime;
	c->name_change = (struct timespec){0, 0};
	if (!c->xattrs_json != !p->xattrs_json ||
	    (p->xattrs_json && strcmp(c->xattrs_json, p->xattrs_json))) {
		free(c->xattrs_json);
		c->xattrs_json = p->xattrs_json ? strdup(p->xattrs_json) : NULL;
	}
	return true;
}

static void remote_dir_attrs(fs_ctx *fs, fs_inode *parent, fs_inode *c)
{
	recorded_dir_attrs(parent, c);
	if (fs->n_dpend && fs_dir_show_pending(fs, c))
		return;
	/* a name this mount added or removed since moved it, although the
	 * listing may predate that change's commit (doc/posix.md,
	 * "Times") */
	const struct timespec *t = &c->name_change;
	if (t->tv_sec > c->mtime.tv_sec ||
	    (t->tv_sec == c->mtime.tv_sec && t->tv_nsec > c->mtime.tv_nsec))
		c->mtime = *t;
}

static void recorded_dir_attrs(fs_inode *parent, fs_inode *c)
{
	const char *rel;
	const vis_manifest *m = parent ? root_manifest(parent, c->path, &rel)
				       : NULL;
	const vis_file *v = m ? vis_manifest_dir(m, rel) : NULL;
	if (!v && c->manifest) /* a transaction root: its own "dir" */
		v = vis_manifest_dir(c->manifest, "");
	c->rec_since = (struct timespec){0, 0};
	if (!v) {
		/* a directory this mount committed keeps what it committed
		 * until its own listing says (fs/write-idle.c) */
		if (!c->listing_held)
			c->has_attrs = false;
		return;
	}
	c->has_attrs = true;
	c->mode = v->mode;
	c->uid = v->uid;
	c->gid = v->gid;
	if (!c->xattrs_json != !v->xattrs_json ||
	    (v->xattrs_json && strcmp(c->xattrs_json, v->xattrs_json))) {
		free(c->xattrs_json);
		c->xattrs_json = v->xattrs_json ? strdup(v->xattrs_json) : NULL;
	}
	if (!v->mtime_ns) /* not recorded */
		return;
	const struct timespec *lm = &c->obj_mtime; /* its listing's newest */
	int64_t lm_ns = (int64_t)lm->tv_sec * 1000000000LL + lm->tv_nsec;
	if (lm->tv_sec && lm_ns > v->time) {
		c->mtime = *lm;
	} else {
		proto_ns_time(v->mtime_ns, &c->mtime);
		/* its ctime: from the commit that recorded it as it is, not
		 * from a file stored again since (a later commit recorded
		 * the directory unchanged: doc/posix.md) */
		proto_ns_time(v->since, &c->rec_since);
	}
}

char *fs_dir_record_root(const fs_inode *d)
{
	const fs_inode *r = d->parent;
	while (r && !r->manifest)
		r = r->parent;
	const char *rel = r ? d->path + strlen(r->path) : NULL;
	if (rel && *rel == '/')
		rel++;
	if (r && vis_manifest_dir(r->manifest, rel))
		return strdup(r->path);
	if (d->manifest && vis_manifest_dir(d->manifest, ""))
		return strdup(d->path);
	return NULL;
}

/*
 * The block checksums the manifests of n's transaction root recorded for
 * the version (etag, size) a handle opened (doc/commit.md, "Block
 * checksums"), for the cache to check downloads against: x->crc is
 * *crc, malloc'd.  False when there are none: not in a manifest, a manifest of
 * another version (the object was replaced by other means), no list.
 * Table locked.
 */
bool fs_manifest_blocks(const fs_inode *n, const char *etag, uint64_t size,
			cache_expect *x, uint32_t **crc)
{
	return fs_manifest_blocks_at(n->parent, n->path, etag, size, x, crc);
}

bool fs_manifest_blocks_at(const fs_inode *dir, const char *path,
			   const char *etag, uint64_t size, cache_expect *x,
			   uint32_t **crc)
{
	const char *rel;
	const vis_manifest *m = root_manifest(dir, path, &rel);
	const vis_file *v = m ? vis_manifest_find(m, rel) : NULL;
	if (!v || !v->blocks)
		return false;
	if (v->size != size || !v->etag || !s3_etag_equal(v->etag, etag)) {
		log_debug("open %s: its manifest names another version; not "
			  "checked against it",
			  path);
		return false;
	}
	if (vis_file_blocks(v, crc, &x->n) < 0)
		return false;
	x->crc = *crc;
	x->block = v->block;
	return true;
}

/* Child inode for a listing entry, attributes updated. Table locked. */
fs_inode *fs_child_for(fs_ctx *fs, fs_inode *parent, const ns_entry *e)
{
	fs_inode *c = fs_itable_child(fs->it, parent, e->name, e->is_dir);
	if (c && !e->is_dir && fs_bound_to_other_version(c, e->etag)) {
		fs_itable_detach(fs->it, c);
		c = fs_itable_child(fs->it, parent, e->name, false);
	}
	if (!c)
		return NULL;
	if (!e->is_dir) {
		set_file_attrs(c, e, parent);
		remote_attrs(parent, c);
	} else {
		if ((!c->listing || c->listing_held) &&
		    (e->mtime.tv_sec || e->mtime.tv_nsec))
			c->mtime = e->mtime;
		remote_dir_attrs(fs, parent, c);
	}
	return c;
}

bool fs_meta_wanted(fs_ctx *fs, const fs_inode *n)
{
	if (fs->o.object_meta != FS_META_AUTO)
		return fs->o.object_meta == FS_META_ON;
	/* auto: only objects with a metadata hint (doc/commit.md, "Metadata
	 * hints"); without the parent's listing we cannot tell: read it */
	const ns_dir *l = n->parent ? n->parent->listing : NULL;
	if (!l)
		return true;
	if (!l->saw_hints)
		return false;
	const ns_entry *e = ns_dir_find(l, n->name);
	return e && e->hinted;
}

bool fs_meta_unread(fs_ctx *fs, const fs_inode *n)
{
	if (n->is_dir || !n->etag || !n->etag[0] ||
	    (n->has_attrs && (!n->meta_etag || n->attrs_committed)))
		return false; /* no version known, or the manifest or this
		               * mount's commit said */
	if (fs_meta_read_for(n, n->etag, n->obj_mtime))
		return false;
	if (!fs_meta_wanted(fs, n))
		return false; /* object_meta: no hint, or off */
	return !fs_local_fill_stat(fs, n, &(struct stat){0});
}

static double entry_attr_timeout(fs_ctx *fs, const fs_inode *n)
{
	/* a directory whose mtime is not known yet: make stat ask again */
	if (n->is_dir && (!n->listing || n->listing_held))
		return 0.0;
	/* nor one where this mount added or removed a name, listed before
	 * its latest change to the bucket landed: the mtime that change
	 * stored shows at the next stat (as on another mount) */
	if (n->is_dir && n->name_change.tv_sec &&
	    n->listing_gen != fs->listing_gen)
		return 0.0;
	/* a file whose object metadata was not read yet for this version
	 * (fs_check_meta) */
	if (fs_meta_unread(fs, n))
		return 0.0;
	return fs->o.attr_timeout;
}

void fs_fill_entry(fs_ctx *fs, fs_inode *n, struct fuse_entry_param *ep)
{
	memset(ep, 0, sizeof *ep);
	ep->ino = n->ino;
	ep->generation = 0;
	ep->entry_timeout = fs->o.entry_timeout;
	ep->attr_timeout = entry_attr_timeout(fs, n);
	fs_fill_stat(fs, n, &ep->attr);
	n->k_size = (uint64_t)ep->attr.st_size;
	n->k_told = true;
}
