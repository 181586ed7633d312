/*
 * Reads of remote files (rd_open, rd_read; ops.c sends every handle of a
 * file that is not local or writable here).  Open pins the object version
 * (the ETag listed or HEADed within attr_timeout, else a fresh HEAD) and
 * opens it in the read cache (cache/cache.h), downloads checked against
 * the manifest's block CRCs when it has them; reads splice from the cache
 * file, or the kernel reads it itself by FUSE passthrough
 * (fs/passthrough.h) when every byte was cached at open.  When the cache
 * cannot take the object (pinned data fills it, after waiting up to
 * RELEASE_WAIT_S for handles just closed to let go), or its disk fails
 * later (full, read-only: local_cache_error), the handle reads uncached
 * through a window of ranged GETs that carry If-Match, checked against the
 * block CRCs too, so a handle never mixes two versions of an object and
 * losing the cache never fails a read by itself.  An object replaced
 * before a cold open's first chunk came is pinned again at open
 * (version_gone); one replaced later, before a handle returned any byte,
 * is switched to (switch_version, the
 * version served recorded on the inode by mark_served); otherwise the
 * read fails with EIO.  The page cache mode (keep_cache) follows the
 * version the inode holds.
 */
#include "fs/read.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <time.h>

#include "fs/ctx.h"
#include "fs/handles.h"
#include "fs/local.h"
#include "fs/nodes.h"
#include "fs/readahead.h"
#include "proto/crc.h"
#include "util/log.h"

/* How long an open whose object the cache cannot take waits for handles
 * already closed to release their pins (a loaded host may take a while to
 * deliver FUSE releases). */
#define RELEASE_WAIT_S 5

/* Opens the handle's object in the cache; on failure reads go uncached. */
static void attach_cache(fs_ctx *fs, fs_handle *h)
{
	if (!fs->cache || h->size == 0)
		return;
	/* downloads of a manifest-listed file are checked against it */
	cache_expect x = {0};
	uint32_t *crc = NULL;
	fs_itable_lock(fs->it);
	bool check = fs_manifest_blocks(h->node, h->etag, h->size, &x, &crc);
	fs_itable_unlock(fs->it);
	/* FUSE sends release after close() returns: a file just closed may
	 * still hold the space this open needs.  Each release that arrives
	 * is a reason to try again, for up to RELEASE_WAIT_S. */
	struct timespec deadline;
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += RELEASE_WAIT_S;
	int rc;
	uint64_t seen = fs_releases(fs);
	do
		rc = cache_file_open_expect(fs->cache, h->key, h->etag, h->size,
					    check ? &x : NULL, &h->cf, &h->hit);
	while (rc == -ENOSPC && fs_wait_release(fs, &deadline, &seen));
	if (check && rc != 0) { /* uncached reads check whole blocks */
		h->vcrc = crc;
		h->vblock = x.block;
		h->vn = x.n;
		crc = NULL;
	}
	free(crc);
	if (rc == 0)
		return;
	h->cf = NULL;
	cache_count_uncached(fs->cache);
	if (rc == -ENOSPC || rc == -EBUSY)
		log_info("open %s: the cache is full of pinned data; reading "
			 "uncached",
			 h->key);
	else
		log_warn("open %s: cache unavailable (%s); reading uncached",
			 h->key, strerror(-rc));
}

/*
 * FUSE passthrough (fs/passthrough.h).  The kernel refuses to mix modes on
 * one inode: while any handle is open without passthrough, a passthrough
 * open fails, and an inode bound to a backing file must be opened with it.
 * So the decision is taken under the table lock together with counting the
 * handle, and an open that registers the backing file makes concurrent
 * opens of the inode wait (pt_pending) until it is known.
 *
 * Table locked; returns true when the caller must register the backing
 * file (register_backing) after dropping the lock.
 */
static bool choose_backing(fs_ctx *fs, fs_inode *n, fs_handle *h)
{
	while (n->pt_pending)
		fs_itable_wait(fs->it);
	if (n->pt_backing_id > 0) {
		/* same version, checked by the caller: the inode stays bound */
		h->backing_id = n->pt_backing_id;
		return false;
	}
	if (!h->cf || !h->hit || !fs->pt.enabled || n->open_handles > 0)
		return false;
	n->pt_pending = true;
	return true;
}

/* Verifies the cached file and registers it as the inode's backing file. */
static void register_backing(fs_ctx *fs, fs_inode *n, fs_handle *h)
{
	int fd = cache_file_ready(h->cf, 0, h->size);
	int id = fd >= 0 ? fs_pt_backing_open(&fs->pt, fd) : fd;
	if (id <= 0)
		log_debug("passthrough for %s: %s", h->key, strerror(-id));
	fs_itable_lock(fs->it);
	n->pt_pending = false;
	if (id > 0) {
		n->pt_backing_id = id;
		free(n->pt_etag);
		n->pt_etag = strdup(h->etag);
		h->backing_id = id;
	}
	fs_itable_broadcast(fs->it);
	fs_itable_unlock(fs->it);
}

/*
 * Kernel page cache policy.  Pages of an inode hold one object version; the
 * inode remembers which (kc_etag).  Reopening the same version keeps them
 * (keep_cache); a new version invalidates them.  (Handles open on another
 * version never share the inode: bound_to_other_version.)  Table locked.
 */
static void set_page_cache_mode(fs_inode *n, const fs_handle *h,
				struct fuse_file_info *fi)
{
	fi->direct_io = 0;
	fi->keep_cache = n->kc_etag && strcmp(n->kc_etag, h->etag) == 0;
	if (!fi->keep_cache) {
		free(n->kc_etag);
		n->kc_etag = strdup(h->etag);
	}
}

/* The version of n that its parent's listing shows, when that listing is
 * no older than dir_timeout: copied into hr.  Table locked. */
static bool listed_attrs(fs_ctx *fs, fs_inode *n, s3_head_result *hr)
{
	fs_inode *d = n->parent;
	if (n->detached || !d || !d->listing ||
	    d->listing_gen != fs->listing_gen ||
	    fs_now() - d->listing_time >= fs->o.dir_timeout)
		return false;
	const ns_entry *e = ns_dir_find(d->listing, n->name);
	if (!e || e->is_dir || !e->etag || !e->etag[0])
		return false;
	hr->size = e->size;
	hr->mtime = e->mtime;
	snprintf(hr->etag, sizeof hr->etag, "%s", e->etag);
	return true;
}

/* Listings of directories up to this many entries (one page) revalidate
 * their files' versions at open: one LIST for all of them instead of a
 * HEAD each. */
#define LIST_REVALIDATE_MAX 1000

/* The request a pinned version's attributes came from (fs_now times). */
typedef struct {
	double began, replied;
} fs_look;

/*
 * Whether attributes from look may be pinned in directory d: the request
 * was sent after the reply of the newest one an open pinned there, or is
 * that same request.  Each name's attributes are cached on their own, for
 * attr_timeout; without this rule a reader that opened an index file
 * another host had just rewritten (listed again) and then a shard written
 * before it (its attributes still fresh from an earlier look) paired the
 * new index with the old shard, which S3 itself never shows.  Table
 * locked.
 */
static bool look_current(const fs_inode *d, fs_look look)
{
	return !d || look.began >= d->pin_replied ||
	       (look.began == d->pin_began && look.replied == d->pin_replied);
}

/* Records look as pinned in n's directory (look_current).  Table locked. */
static void pin_floor(fs_inode *n, fs_look look)
{
	fs_inode *d = n->detached ? NULL : n->parent;
	if (d && look.replied > d->pin_replied) {
		d->pin_began = look.began;
		d->pin_replied = look.replied;
	}
}

/*
 * Copies n's attributes into hr when they are recent enough to pin: set
 * within attr_timeout (the same staleness the kernel's attribute cache
 * has), or listed by a listing within dir_timeout, and no older than what
 * an open pinned in the same directory before (look_current; the newer
 * of the two when both are).  Otherwise a directory of at most one
 * listing page is listed again (shared by every file opened meanwhile);
 * false: the caller HEADs.  any_age: whatever their age, whenever they
 * name a version (the server is unreachable).  *look: where they came
 * from.  Table not locked.
 */
static bool fresh_attrs(fs_ctx *fs, fs_inode *n, s3_head_result *hr,
			bool any_age, fs_look *look)
{
	fs_itable_lock(fs->it);
	fs_inode *d = n->detached ? NULL : n->parent;
	fs_look own = {n->obs_began, n->obs_replied};
	bool fresh = n->etag && n->etag[0] &&
		     (any_age || (fs_now() - n->attr_time < fs->o.attr_timeout &&
				  look_current(d, own)));
	if (fresh) {
		hr->size = n->size;
		hr->mtime = n->mtime;
		snprintf(hr->etag, sizeof hr->etag, "%s", n->etag);
		*look = own;
	}
	if (any_age) {
		fs_itable_unlock(fs->it);
		return fresh;
	}
	/* the parent's listing, when it is newer than n's own look */
	fs_look listed = d ? (fs_look){d->listing_began, d->listing_replied}
			   : (fs_look){0, 0};
	if (d && (!fresh || listed.began > own.began) &&
	    look_current(d, listed) && listed_attrs(fs, n, hr)) {
		fresh = true;
		*look = listed;
	}
	/* only a listing that really came back counts: one kept through an
	 * outage (fs_dir_load) leaves the choice to the HEAD's failure */
	const ns_dir *before = d ? d->listing : NULL;
	if (!fresh && d && d->listing &&
	    d->listing->n <= LIST_REVALIDATE_MAX &&
	    !fs_local_is_dir(fs, d) && fs_dir_load(fs, d) == 0 &&
	    d->listing != before) {
		listed = (fs_look){d->listing_began, d->listing_replied};
		fresh = look_current(d, listed) && listed_attrs(fs, n, hr);
		if (fresh)
			*look = listed;
	}
	fs_itable_unlock(fs->it);
	return fresh;
}

/* Pins the version a handle of n (key) reads: the one listed or HEADed
 * recently (fresh_attrs), else (or with head) a fresh HEAD; the server unreachable, the
 * version listed last (*offline; the caller checks it is cached whole).
 * *look: the request it came from.
 * Returns a new handle, or NULL after replying the error (key and n's
 * reference dropped).  Table not locked. */
static fs_handle *open_version(fuse_req_t req, fs_ctx *fs, fs_inode *n,
			       char *key, s3_head_result *hr, s3_err *e,
			       bool *offline, bool head, fs_look *look)
{
	/* pin the version this handle reads: the one listed or HEADed
	 * recently (fresh_attrs), else (or when head says so) a fresh HEAD */
	fs_handle *h = calloc(1, sizeof *h);
	bool fresh = !head && fresh_attrs(fs, n, hr, false, look);
	/* the server unreachable: the version listed last, if it is cached
	 * whole (checked below), as listings serve the last one */
	bool ok = fresh;
	*offline = false;
	if (h && key && !fresh) {
		look->began = fs_now();
		ok = s3_head(fs->s3, key, hr, e) == 0;
		look->replied = fs_now();
		if (!ok && s3_err_transient(e) &&
		    fresh_attrs(fs, n, hr, true, look))
			ok = *offline = true;
	}
	if (!h || !key || !ok) {
		int err = h && key ? e->err : ENOMEM;
		if (h && key)
			log_warn("open %s: %s", key, e->msg);
		free(h);
		free(key);
		fs_itable_lock(fs->it);
		fs_itable_unref(fs->it, n);
		fs_itable_unlock(fs->it);
		fuse_reply_err(req, err);
		return NULL;
	}
	return h;
}

/* After the reply to an open of n: a directory read file after file has
 * its listing, and those of the directories above it (the path walk's
 * lookups), listed again before they expire, by this worker, so the next
 * opens and lookups find them fresh (doc/architecture.md, "Reads").
 * Drops the open's reference to n.  Table not locked. */
static void refresh_up(fs_ctx *fs, fs_inode *n)
{
	fs_itable_lock(fs->it);
	fs_inode *d = n->detached ? NULL : n->parent;
	if (d)
		fs_inode_ref(d);
	while (d) { /* each held while the lock is dropped to list it */
		if (!fs_local_is_dir(fs, d))
			fs_dir_refresh_ahead(fs, d);
		fs_inode *up = d->detached ? NULL : d->parent;
		if (up)
			fs_inode_ref(up);
		fs_itable_unref(fs->it, d);
		d = up;
	}
	fs_itable_unref(fs->it, n);
	fs_itable_unlock(fs->it);
}

/* n's attributes from the version an open pinned (hr), from look (NULL:
 * the server unreachable, the last one listed).  Table locked. */
static void set_pinned(fs_inode *n, const s3_head_result *hr,
		       const fs_look *look)
{
	n->size = hr->size;
	/* HEAD has whole seconds, listings milliseconds: keep the finer one
	 * unless the second changed, or the kernel would see the mtime flip
	 * and drop the file's page cache on every open */
	if (hr->mtime.tv_sec && hr->mtime.tv_sec != n->mtime.tv_sec &&
	    !n->has_attrs)
		n->mtime = hr->mtime;
	fs_set_version(n, hr->etag, hr->mtime);
	/* as old as the look they came from: an open that used cached
	 * attributes does not make them fresh for another attr_timeout */
	if (look) {
		n->attr_time = look->replied;
		n->obs_began = look->began;
		n->obs_replied = look->replied;
		pin_floor(n, *look);
	}
}

/* How many times an open pins a version again when the one it pinned is
 * gone from the bucket before its first chunk came (version_gone). */
#define REPIN_TRIES 3

/*
 * Whether the version a cold handle pinned was replaced in the bucket
 * before its first chunk came (the GET's If-Match failed).  The open
 * waits for that chunk before it replies, so the size the kernel and the
 * application (fstat, mmap) learn at open belongs to bytes the handle can
 * still read: before, a reader of safetensors shards replaced on another
 * host mapped the old version's size and got the new version's bytes.
 * The first read would wait for that chunk anyway.  A file cached whole
 * (or read uncached, or offline) is not waited for.
 */
static bool version_gone(fs_handle *h, bool offline)
{
	if (!h->cf || h->hit || offline)
		return false;
	return cache_file_ready(h->cf, 0, 1) == -ESTALE;
}

void rd_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fs_ctx *fs = fs_req_ctx(req);
	fs_itable_lock(fs->it);
	fs_inode *n = fs_itable_get(fs->it, ino);
	if (!n || n->is_dir) {
		fs_itable_unlock(fs->it);
		fuse_reply_err(req, n ? EISDIR : ENOENT);
		return;
	}
	fs_inode_ref(n);
	char *key = fs_object_key(fs, n);
	fs_itable_unlock(fs->it);

	s3_head_result hr;
	s3_err e;
	bool offline = false;
	fs_look look = {0, 0};
	fs_handle *h;
	for (int tries = 0;; tries++) {
		h = open_version(req, fs, n, key, &hr, &e, &offline,
				 tries > 0, &look);
		if (!h)
			return;
		h->node = n;
		h->key = key;
		h->size = hr.size;
		snprintf(h->etag, sizeof h->etag, "%s", hr.etag);
		pthread_mutex_init(&h->mu, NULL);
		pthread_rwlock_init(&h->busy, NULL);
		h->ra = 1u << 20;
		attach_cache(fs, h);
		if (offline && !h->hit) {
			log_warn("open %s: %s", key, e.msg);
			fs_handle_free(fs, h, false);
			fuse_reply_err(req, e.err ? e.err : EIO);
			return;
		}
		if (tries == REPIN_TRIES || !version_gone(h, offline))
			break;
		/* pin again, from a HEAD: this handle goes, n and key stay */
		cache_count_replaced(fs->cache);
		log_info("open %s: replaced since it was listed; opening the "
			 "new version", key);
		h->key = NULL;
		fs_itable_lock(fs->it);
		fs_inode_ref(n);
		n->attr_time = 0;
		if (n->parent)
			n->parent->listing_time = -1e9;
		fs_itable_unlock(fs->it);
		fs_handle_free(fs, h, false);
	}
	if (offline)
		log_info("open %s: %s (reading the cached version)", key,
			 e.msg);

	fs_itable_lock(fs->it);
	if (fs_bound_to_other_version(n, hr.etag)) {
		/* the VFS retries the path walk, whose lookup gets a new inode
		 * (from a fresh listing: the cached one may still name the
		 * old version) */
		fs_itable_detach(fs->it, n);
		if (n->parent)
			n->parent->listing_time = -1e9;
		fs_itable_unlock(fs->it);
		fs_handle_free(fs, h, false);
		fuse_reply_err(req, ESTALE);
		return;
	}
	bool reg = choose_backing(fs, n, h);
	n->open_handles++;
	fs_handle_link(fs, h);
	/* a handle of a file cached whole has nothing to do at close: no
	 * FLUSH round trip (FOPEN_NOFLUSH) for each file a reader walks.
	 * Its close is then unseen until the release, so it counts as
	 * possibly closing (fs->noflush_open, fs_wait_release) */
	if (h->cf && h->hit) {
		fi->noflush = 1;
		h->noflush = true;
		fs->noflush_open++;
	}
	/* another size than the kernel may hold for n (its attributes of
	 * an older version, cached for attr_timeout): without this, fstat
	 * and mmap of the new version used the old size (a reader of
	 * safetensors' replaced shards got the old length of new bytes) */
	bool resized = n->k_told && n->k_size != hr.size;
	fuse_ino_t ino_n = n->ino;
	set_pinned(n, &hr, offline ? NULL : &look);
	set_page_cache_mode(n, h, fi);
	fs_inode_ref(n); /* the handle may go at once after the reply */
	fs_itable_unlock(fs->it);
	if (resized && fs->se) /* attributes only: open is no related op */
		fuse_lowlevel_notify_inval_inode(fs->se, ino_n, -1, 0);
	if (reg)
		register_backing(fs, n, h);
	if (h->backing_id > 0) /* the kernel reads the backing file */
		fi->keep_cache = fi->direct_io = 0;

	fi->fh = (uint64_t)(uintptr_t)h;
	fs_pt_mark_next_open(h->backing_id);
	bool cached = h->cf != NULL;
	if (fuse_reply_open(req, fi) == -ENOENT)
		fs_handle_free(fs, h, true); /* interrupted open */
	else if (cached) /* after the reply: the open never waits for it */
		fs_readahead_opened(fs, n);
	refresh_up(fs, n);
}

/*
 * Fetches the whole blocks [off, off+len) into h->win and checks each
 * against its manifest CRC: 0, -EAGAIN (damaged: try again) or an error
 * (-EIO once attempt is past the retries).  h->mu held.
 */
static int fetch_checked(fs_ctx *fs, fs_handle *h, uint64_t off, size_t len,
			 int attempt)
{
	size_t got = 0;
	s3_err e;
	h->win_len = 0;
	if (s3_get_range(fs->s3, h->key, off, len, h->etag, h->win, &got,
			 &e) < 0 || got != len) {
		log_error("read %s: %s", h->key,
			  got != len ? "short read" : e.msg);
		return got != len || e.err == ESTALE || !e.err ? -EIO : -e.err;
	}
	for (size_t at = 0; at < len; at += h->vblock) {
		uint64_t i = (off + at) / h->vblock;
		size_t n = len - at < h->vblock ? len - at : h->vblock;
		uint32_t crc = proto_crc32c(0, h->win + at, n);
		if (i < h->vn && crc == h->vcrc[i])
			continue;
		if (attempt <= CACHE_VERIFY_RETRIES)
			return -EAGAIN;
		log_error("read %s: bytes at offset %llu (%zu bytes) do not "
			  "match its manifest after %d attempts (CRC-32C %08x, "
			  "the manifest says %08x): reads there fail with EIO",
			  h->key, (unsigned long long)(off + at), n, attempt,
			  crc, i < h->vn ? h->vcrc[i] : 0);
		return -EIO;
	}
	h->win_off = off;
	h->win_len = got;
	return 0;
}

/* Fetches a window starting at off into h->win.  h->mu held. */
static int window_fill(fs_ctx *fs, fs_handle *h, uint64_t off, size_t want)
{
	bool seq = off == h->next_seq;
	h->ra = seq ? h->ra * 2 : (1u << 20);
	if (h->ra > fs->o.readahead_max)
		h->ra = fs->o.readahead_max;
	size_t len = want > h->ra ? want : h->ra;
	if (len > h->size - off)
		len = (size_t)(h->size - off);
	if (h->vcrc) { /* whole blocks, so that each can be checked */
		uint64_t end = off + len;
		off -= off % h->vblock;
		end += (h->vblock - end % h->vblock) % h->vblock;
		len = (size_t)((end < h->size ? end : h->size) - off);
	}
	if (len > h->win_cap) {
		char *p = realloc(h->win, len);
		if (!p)
			return -ENOMEM;
		h->win = p;
		h->win_cap = len;
	}
	size_t got = 0;
	s3_err e;
	for (int attempt = 1; h->vcrc; attempt++) {
		int rc = fetch_checked(fs, h, off, len, attempt);
		if (rc != -EAGAIN)
			return rc;
	}
	if (s3_get_range(fs->s3, h->key, off, len, h->etag, h->win, &got,
			 &e) < 0) {
		h->win_len = 0;
		if (e.err == ESTALE)
			log_error("read %s: the object changed since it was "
				  "opened; reopen to read the new version",
				  h->key);
		else
			log_error("read %s: %s", h->key, e.msg);
		return e.err == ESTALE ? -EIO : -(e.err ? e.err : EIO);
	}
	h->win_off = off;
	h->win_len = got;
	return 0;
}

/* Errors of the local cache disk, as opposed to the remote object's. */
static bool local_cache_error(int err)
{
	return err == ENOSPC || err == EDQUOT || err == EROFS || err == EFBIG;
}

/*
 * The object was replaced since open pinned its version, and the old bytes
 * are gone from the bucket (the GET's If-Match failed).  A cold cached
 * handle's open already made sure of its first chunk (version_gone), so
 * this is a later chunk of a large file, or an uncached handle.  A handle
 * that has returned nothing yet takes the current version, as if it had
 * been opened a moment later: an uncached handle whatever its new size (a
 * reader of a `latest` file another host rewrites gets the new text, not
 * EIO), a cached one only at the size its open gave.  Other
 * handles of the inode do not stop it as long as the kernel holds no bytes
 * of another version (served_etag: every handle opened on the vanished
 * version, as concurrent readers of one `latest` file do, switches the
 * same way).  Otherwise the inode's attributes are dropped, so that the
 * next open sees the new version, and the read fails as before.  Returns 0
 * when switched.
 */
static int switch_version(fs_ctx *fs, fs_handle *h)
{
	s3_head_result hr;
	s3_err e;
	pthread_mutex_lock(&h->mu);
	char was[sizeof h->etag];
	snprintf(was, sizeof was, "%s", h->etag);
	pthread_mutex_unlock(&h->mu);
	fs_look look = {fs_now(), 0};
	int rc = s3_head(fs->s3, h->key, &hr, &e) < 0 ? -EIO : 0;
	look.replied = fs_now();
	if (!rc && !strcmp(hr.etag, was))
		rc = -EIO; /* the same version: it did not change after all */
	/* the kernel's pages of the inode hold no other version's bytes */
	fs_itable_lock(fs->it);
	bool clean = !rc && (!h->node->served_etag ||
			     !strcmp(h->node->served_etag, hr.etag));
	fs_itable_unlock(fs->it);
	pthread_mutex_lock(&h->mu);
	/* a cached handle's open secured its first chunk (version_gone), so
	 * the application may have mapped the old size: only a version of
	 * that size can stand in for it without tearing what it reads */
	bool can = clean && !strcmp(h->etag, was) &&
		   !atomic_load(&h->served) && !h->stale_cf &&
		   (!h->cf || hr.size == h->size);
	/* a longer version: the kernel's size of the file grows first (a
	 * store of no bytes at the new end, which takes no page lock), else
	 * its reads would stop at the old size; a shorter one ends the read
	 * short, and the kernel shrinks its size by itself */
	struct fuse_bufvec none = FUSE_BUFVEC_INIT(0);
	if (can && hr.size > h->size &&
	    (!fs->se || fuse_lowlevel_notify_store(fs->se, h->node->ino,
						   (off_t)hr.size, &none,
						   0) != 0))
		can = false;
	if (can) {
		cache_file *old = __atomic_load_n(&h->cf, __ATOMIC_ACQUIRE);
		snprintf(h->etag, sizeof h->etag, "%s", hr.etag);
		__atomic_store_n(&h->size, hr.size, __ATOMIC_RELEASE);
		free(h->vcrc);
		h->vcrc = NULL;
		h->cf = NULL;
		attach_cache(fs, h);
		cache_file *nw = h->cf;
		h->stale_cf = old;
		__atomic_store_n(&h->cf, nw, __ATOMIC_RELEASE);
		log_info("read %s: replaced since it was opened; reading the "
			 "new version",
			 h->key);
	}
	pthread_mutex_unlock(&h->mu);
	fs_itable_lock(fs->it);
	fs_inode *n = h->node;
	if (!rc) {
		fs_set_version(n, hr.etag, hr.mtime);
		n->size = hr.size;
		n->attr_time = can ? look.replied : 0;
		n->obs_began = look.began;
		n->obs_replied = look.replied;
		if (can) { /* the kernel's pages of n now hold this version */
			pin_floor(n, look);
			free(n->kc_etag);
			n->kc_etag = strdup(hr.etag);
		}
	} else {
		n->attr_time = 0;
	}
	if (n->parent)
		n->parent->listing_time = -1e9;
	fs_itable_unlock(fs->it);
	return can ? 0 : -EIO;
}

/* Marks h as having returned bytes; the first time, records the version
 * they came from on the inode (switch_version).  mu_held: h->mu is (it is
 * never taken under the table lock, so the order h->mu, table is safe). */
static void mark_served(fs_ctx *fs, fs_handle *h, bool mu_held)
{
	if (atomic_exchange(&h->served, true))
		return;
	char etag[sizeof h->etag];
	if (!mu_held)
		pthread_mutex_lock(&h->mu);
	snprintf(etag, sizeof etag, "%s", h->etag);
	if (!mu_held)
		pthread_mutex_unlock(&h->mu);
	fs_itable_lock(fs->it);
	fs_inode *n = h->node;
	if (!n->served_etag || strcmp(n->served_etag, etag)) {
		free(n->served_etag);
		n->served_etag = strdup(etag);
	}
	fs_itable_unlock(fs->it);
}

/*
 * Serves a read from the cache file, spliced when the kernel allows.
 * Returns false, without replying, when the local cache cannot hold the
 * handle's object any more (its disk filled up, ...): the caller then reads
 * uncached — losing the cache never fails a read by itself.  Errors of the
 * object (changed or deleted remotely) are replied as they are.
 */
static bool read_cached(fuse_req_t req, fs_handle *h, uint64_t off,
			size_t size, size_t want)
{
	cache_file *cf = __atomic_load_n(&h->cf, __ATOMIC_ACQUIRE);
	int fd = cache_file_ready(cf, off, size);
	if (fd == -ESTALE && switch_version(fs_req_ctx(req), h) == 0) {
		/* the new version's size bounds the read now */
		uint64_t now = __atomic_load_n(&h->size, __ATOMIC_ACQUIRE);
		if (off >= now) {
			fuse_reply_buf(req, NULL, 0);
			return true;
		}
		size = want < now - off ? want : (size_t)(now - off);
		cf = __atomic_load_n(&h->cf, __ATOMIC_ACQUIRE);
		if (!cf)
			return false; /* the cache cannot take it: uncached */
		fd = cache_file_ready(cf, off, size);
	}
	if (fd == -ESTALE)
		fd = -EIO;
	if (fd < 0 && !local_cache_error(-fd)) {
		fuse_reply_err(req, -fd);
		return true;
	}
	if (fd < 0) {
		if (!atomic_exchange(&h->cache_failed, true)) {
			log_warn("read %s: the cache cannot serve it (%s); "
				 "reading uncached",
				 h->key, strerror(-fd));
			cache_count_uncached(fs_req_ctx(req)->cache);
		}
		return false;
	}
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(size);
	bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	bv.buf[0].fd = fd;
	bv.buf[0].pos = (off_t)off;
	mark_served(fs_req_ctx(req), h, false);
	fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
	return true;
}

void rd_read(fuse_req_t req, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	fs_ctx *fs = fs_req_ctx(req);
	fs_handle *h = (fs_handle *)(uintptr_t)fi->fh;
	uint64_t uoff = (uint64_t)off;
	/* switch_version may change it under h->mu */
	uint64_t hsize = __atomic_load_n(&h->size, __ATOMIC_ACQUIRE);
	size_t want = size;
	if (off < 0 || uoff >= hsize || size == 0) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > hsize - uoff)
		size = (size_t)(hsize - uoff);
	if (__atomic_load_n(&h->cf, __ATOMIC_ACQUIRE) &&
	    !atomic_load(&h->cache_failed) &&
	    read_cached(req, h, uoff, size, want))
		return;
	pthread_mutex_lock(&h->mu);
	if (uoff >= h->size) { /* switched to a shorter version meanwhile */
		pthread_mutex_unlock(&h->mu);
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > h->size - uoff)
		size = (size_t)(h->size - uoff);
	bool hit = uoff >= h->win_off && uoff + size <= h->win_off + h->win_len;
	int rc = hit ? 0 : window_fill(fs, h, uoff, size);
	if (rc == 0 && uoff + size > h->win_off + h->win_len)
		size = (size_t)(h->win_off + h->win_len - uoff); /* short */
	if (rc < 0) {
		pthread_mutex_unlock(&h->mu);
		fuse_reply_err(req, -rc);
		return;
	}
	h->next_seq = uoff + size;
	mark_served(fs, h, true);
	fuse_reply_buf(req, h->win + (uoff - h->win_off), size);
	pthread_mutex_unlock(&h->mu);
}
