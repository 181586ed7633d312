/*
 * The write path: transactions, staging files, the idle-commit thread,
 * `ckptfs commit` and `sync`, and the restart from the journal (fs/write.c
 * has the overview).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "proto/crc.h"
#include "fs/write-internal.h"
#include "util/log.h"

/* ---- setup ------------------------------------------------------------- */

void wr_init(fs_ctx *fs)
{
	ov_init(&fs->ov);
	pthread_cond_init(&fs->idle_cv, NULL);
	fs->dels = calloc(1, sizeof *fs->dels);
}

void wr_dels_clear(struct wr_deletes *d)
{
	for (size_t i = 0; d && i < d->n; i++)
		free(d->v[i].path);
	if (d)
		d->n = 0;
}

void wr_destroy(fs_ctx *fs)
{
	wr_shutdown(fs);
	ov_destroy(&fs->ov);
	pthread_cond_destroy(&fs->idle_cv);
	if (fs->dels) {
		wr_dels_clear(fs->dels);
		free(fs->dels->v);
		free(fs->dels);
	}
}

eng *fs_ctx_engine(fs_ctx *fs)
{
	return fs->eng;
}

char *wr_child_path(const fs_inode *p, const char *name)
{
	return ov_join(p->path, name);
}

double wr_now_s(void)
{
	return fs_now();
}

/* ---- transactions ------------------------------------------------------ */

void wr_meta_of(const ov_node *o, eng_meta *m, buf *xa)
{
	memset(m, 0, sizeof *m);
	m->mode = o->mode & 07777;
	m->uid = o->uid;
	m->gid = o->gid;
	m->mtime = o->mtime;
	/* the engine takes the overlay's own record format */
	(void)xa;
	if (o->xattrs.len) {
		m->xattrs = o->xattrs.data;
		m->xattrs_len = o->xattrs.len;
	}
	m->symlink = o->kind == OV_LINK ? o->target : NULL;
}

/* Sends the held remote deletes to the engine, in order.  Table locked. */
void wr_flush_deletes(fs_ctx *fs)
{
	struct wr_deletes *d = fs->dels;
	for (size_t i = 0; d && i < d->n; i++) {
		int rc = eng_remote_delete(fs->eng, d->v[i].path,
					   d->v[i].is_dir);
		if (rc < 0)
			log_error("delete of %s could not be journaled: %s",
				  d->v[i].path, strerror(-rc));
	}
	wr_dels_clear(d);
}

void wr_fetch_done(fs_ctx *fs)
{
	if (fs->dels && fs->dels->n)
		fs->dels->last = wr_now_s();
}

/* Holds a remote delete of path (see the top of the file). */
int wr_hold_delete(fs_ctx *fs, const char *path, bool is_dir)
{
	struct wr_deletes *d = fs->dels;
	size_t pl = strlen(path);
	/* a directory delete replaces the deletes of what it holds */
	if (is_dir) {
		size_t k = 0;
		for (size_t i = 0; i < d->n; i++) {
			if (!strncmp(d->v[i].path, path, pl) &&
			    d->v[i].path[pl] == '/')
				free(d->v[i].path);
			else
				d->v[k++] = d->v[i];
		}
		d->n = k;
	}
	/* deletes of unrelated trees keep their order: send what is held */
	if (d->n) {
		char *top = strdup(d->v[0].path);
		char *slash = top ? strchr(top, '/') : NULL;
		if (slash)
			*slash = 0;
		bool related = top && !strncmp(path, top, strlen(top)) &&
			       (path[strlen(top)] == '/' ||
				path[strlen(top)] == 0);
		free(top);
		if (!related)
			wr_flush_deletes(fs);
	}
	if (d->n == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 64;
		wr_del *v = realloc(d->v, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		d->v = v;
		d->cap = cap;
	}
	d->v[d->n].path = strdup(path);
	if (!d->v[d->n].path)
		return -ENOMEM;
	d->v[d->n++].is_dir = is_dir;
	d->last = wr_now_s();
	return 0;
}

/* Before any other fact reaches the engine.  Table locked. */
void wr_ordered(fs_ctx *fs)
{
	if (fs->dels && fs->dels->n)
		wr_flush_deletes(fs);
}

/* Whether one of a and b is the other or lies under it. */
static bool overlaps(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t l = la < lb ? la : lb;
	return !strncmp(a, b, l) &&
	       (la == lb || (la < lb ? b[l] : a[l]) == '/');
}

/* Before a fact about path only: held deletes of other paths (an rm -r in
 * progress) stay held, so its rmdir still makes them one directory delete
 * (a `latest` written in the middle of a rotation's rm -r split it into
 * file deletes, seen by readers).  Those deletes then reach the bucket
 * after this fact, never before it: the safe direction.  Table locked. */
void wr_ordered_for(fs_ctx *fs, const char *path)
{
	struct wr_deletes *d = fs->dels;
	for (size_t i = 0; d && i < d->n; i++)
		if (overlaps(d->v[i].path, path)) {
			wr_flush_deletes(fs);
			return;
		}
}

/* Nearest ancestor of directory inode p (p included) that readers filter
 * by manifests, or NULL (malloc'd).  Table locked. */
char *wr_manifest_root(fs_ctx *fs, fs_inode *p)
{
	for (fs_inode *a = p; a; a = a->parent) {
		ov_node *o = wr_local_of(fs, a);
		if (o && o->kind == OV_DIR && o->txn && o->txn->is_dir &&
		    !strcmp(o->txn->root, a->path) && o->txn->sealed)
			return strdup(a->path); /* committing: has a manifest */
		if (o)
			continue;
		if (a->manifest && a->manifest->committed)
			return strdup(a->path);
	}
	return NULL;
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
	wr_ordered_for(fs, path);
	char *mroot = wr_manifest_root(fs, p);
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

void wr_touch(ov_txn *x)
{
	if (x)
		x->last_change = wr_now_s();
}

bool wr_is_single_root(const ov_node *o)
{
	return o->txn && !o->txn->is_dir && !strcmp(o->txn->root, o->path);
}

/* Seals x (a commit trigger).  Table locked. */
int wr_seal(fs_ctx *fs, ov_txn *x)
{
	if (x->sealed)
		return 0;
	if (eng_path_has_temp(fs->eng, x->root))
		return 0; /* waits for a final name (a file too) */
	wr_ordered_for(fs, x->root);
	int rc = eng_txn_seal(fs->eng, x->id);
	if (rc == 0)
		x->sealed = true;
	else
		log_error("commit of %s could not be journaled: %s", x->root,
			  strerror(-rc));
	return rc;
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
	if (!o->dirty || !s || !o->txn)
		return 0;
	ov_stage_ref(s);
	/* immutable from now on: a write or an open while the lock is
	 * dropped below copies it first (wr_writable_stage) */
	bool was_handed = s->handed;
	s->handed = true;
	/* a file of a transaction already committing gets its own */
	if (o->txn->sealed && !wr_is_single_root(o)) {
		ov_txn *nx = NULL;
		char *mroot = strdup(o->txn->root);
		wr_ordered_for(fs, o->path);
		fs_itable_unlock(fs->it);
		uint64_t id = 0;
		int rc = eng_txn_begin(fs->eng, o->path, false, mroot, &id);
		free(mroot);
		fs_itable_lock(fs->it);
		if (rc < 0) {
			s->handed = was_handed;
			ov_stage_unref(s);
			return rc;
		}
		nx = ov_txn_add(&fs->ov, id, o->path, false);
		if (!nx) {
			s->handed = was_handed;
			ov_stage_unref(s);
			return -ENOMEM;
		}
		o->txn->nodes--;
		o->txn = nx;
		nx->nodes++;
	} else if (o->txn->sealed) {
		/* a rewrite of a committing single file: a new transaction,
		 * ordered after the first */
		wr_ordered_for(fs, o->path);
		fs_itable_unlock(fs->it);
		uint64_t id = 0;
		int rc = eng_txn_begin(fs->eng, o->path, false, NULL, &id);
		fs_itable_lock(fs->it);
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
		o->txn->nodes--;
		o->txn = nx;
		nx->nodes++;
	}
	wr_ordered_for(fs, o->path);
	eng_meta m;
	buf xa = BUF_INIT;
	wr_meta_of(o, &m, &xa);
	int rc = eng_file_put(fs->eng, o->txn->id, o->path, s->sid, size, &m);
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
	o->dirty = false;
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

/*
 * Copy-on-write of a remote file into staging file fd: its bytes come
 * through the read cache (or ranged GETs without one), never guessed.
 */
/* Downloads [off, off+want) into b; with an expected block CRC (check),
 * a damaged download is tried again, then fails with EIO. */
static int fetch_range(fs_ctx *fs, const char *key, const char *etag,
		       uint64_t off, size_t want, char *b, bool check,
		       uint32_t expect)
{
	for (int attempt = 1;; attempt++) {
		s3_err e;
		size_t got = 0;
		if (s3_get_range(fs->s3, key, off, want, etag, b, &got, &e) < 0 ||
		    got != want) {
			log_error("copy-on-write of %s: %s", key,
				  got != want ? "short read" : e.msg);
			return -(got != want || !e.err ? EIO : e.err);
		}
		uint32_t crc = check ? proto_crc32c(0, b, got) : expect;
		if (crc == expect)
			return 0;
		if (attempt > CACHE_VERIFY_RETRIES) {
			log_error("copy-on-write of %s: bytes at offset %llu do "
				  "not match its manifest (CRC-32C %08x, the "
				  "manifest says %08x)",
				  key, (unsigned long long)off, crc, expect);
			return -EIO;
		}
	}
}

int wr_fetch_remote(fs_ctx *fs, fs_inode *n, const char *key, int fd,
		    uint64_t *size)
{
	s3_head_result hr;
	s3_err e;
	if (s3_head(fs->s3, key, &hr, &e) < 0) {
		log_error("copy-on-write of %s: %s", key, e.msg);
		return -(e.err ? e.err : EIO);
	}
	*size = hr.size;
	if (hr.size == 0)
		return 0;
	/* checked against its manifest, as a read would be */
	cache_expect x = {0};
	uint32_t *crc = NULL;
	fs_itable_lock(fs->it);
	bool check = fs_manifest_blocks(n, hr.etag, hr.size, &x, &crc);
	fs_itable_unlock(fs->it);
	if (fs->cache) {
		cache_file *cf = NULL;
		bool hit = false;
		int rc = cache_file_open_expect(fs->cache, key, hr.etag, hr.size,
						check ? &x : NULL, &cf, &hit);
		if (rc == 0) {
			int in = cache_file_ready(cf, 0, (size_t)hr.size);
			if (in == -ESTALE) /* replaced meanwhile */
				in = -EIO;
			rc = in < 0 ? in : wr_copy_fd(in, fd, hr.size);
			cache_file_close(cf);
			if (rc == 0 || in < 0) {
				/* a failed download is not tried again
				 * around the cache: it may be damaged */
				free(crc);
				return rc;
			}
		}
		log_info("copy-on-write of %s: cache unavailable (%s); "
			 "downloading directly",
			 key, strerror(-rc));
	}
	size_t chunk = check ? x.block : 8u << 20;
	char *b = malloc(chunk);
	int rc = b ? 0 : -ENOMEM;
	for (uint64_t off = 0, i = 0; rc == 0 && off < hr.size; i++) {
		size_t want = hr.size - off > chunk ? chunk
						    : (size_t)(hr.size - off);
		rc = fetch_range(fs, key, hr.etag, off, want, b, check,
				 check ? crc[i] : 0);
		if (rc == 0 && pwrite(fd, b, want, (off_t)off) != (ssize_t)want)
			rc = -errno;
		off += want;
	}
	free(b);
	free(crc);
	return rc;
}

/* ---- the idle thread ---------------------------------------------------- */

typedef struct drop_ctx {
	fs_ctx *fs;
	uint64_t *pending;
	size_t n;
	bool changed;
} drop_ctx;

static bool pending_has(const drop_ctx *d, uint64_t id)
{
	for (size_t i = 0; i < d->n; i++)
		if (d->pending[i] == id)
			return true;
	return false;
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
				go = d->n == 0 && !fs->dels->n &&
				     wr_now_s() - o->wo_time > 1.0;
			else
				go = o->txn && o->txn->done && o->refs == 0;
			if (!go)
				continue;
			if (k == cap) {
				ov_node **nv = realloc(v, 2 * cap * sizeof *v);
				if (!nv)
					break;
				v = nv;
				cap *= 2;
			}
			v[k++] = o;
		}
	}
	for (size_t i = 0; i < k; i++) {
		/* the remote object is another version than any the inode
		 * saw before it became local: forget its attributes */
		fs_inode *n = fs_itable_find(fs->it, v[i]->path);
		ov_node *o = v[i];
		if (n && o->kind != OV_WHITEOUT) {
			free(n->etag);
			n->etag = NULL;
			n->attr_time = 0;
			/* what was committed, until a listing says more */
			n->has_attrs = o->kind != OV_DIR;
			n->mode = o->mode;
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

/* ---- the upload hold (eng_hold_uploads) -------------------------------- */

/* Seconds without a writable handle after which the application counts as
 * done writing: a checkpoint's files are written one after another, and
 * the instant between one close and the next open is not the end. */
#define WRITE_QUIET_S 0.3

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
 * what is still pending.  locked: called with the table locked (it stays
 * locked), else the table is locked around the reap only (the idle
 * thread: eng_status then runs without it). */
static void reap_now(fs_ctx *fs, bool locked)
{
	eng_txn_status *st = NULL;
	size_t n = 0;
	int rc = eng_status(fs->eng, &st, &n);
	drop_ctx d = {fs, NULL, 0, false};
	if (rc == 0 && n)
		d.pending = calloc(n, sizeof *d.pending);
	for (size_t i = 0; d.pending && i < n; i++)
		d.pending[d.n++] = st[i].id;
	if (rc == 0)
		eng_status_free(st, n);
	if (!locked)
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
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 250 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&fs->idle_cv, fs_itable_mutex(fs->it),
				       &ts);
		if (fs->idle_stop)
			break;
		double t = wr_now_s();
		hold_tick(fs, t);
		/* quiet: no change for a while and no listing on its way
		 * (an rm -r waiting for a stalled LIST is not done) */
		if (fs->dels->n && t - fs->dels->last > DELETE_QUIET_S &&
		    !fs->fetching)
			wr_flush_deletes(fs);
		for (ov_txn *x = fs->ov.txns; x; x = x->next) {
			if (!x->sealed && !x->done && x->open == 0 &&
			    t - x->last_change >= fs->commit_delay &&
			    txn_has_files(fs, x))
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
		reap_now(fs, false);
	}
	fs_itable_unlock(fs->it);
	return NULL;
}

void wr_reap(fs_ctx *fs)
{
	bool any_sealed = false;
	for (ov_txn *x = fs->ov.txns; x; x = x->next)
		any_sealed |= x->sealed && !x->done;
	if (any_sealed)
		reap_now(fs, true);
}

void fs_ctx_set_engine(fs_ctx *fs, eng *e, double commit_delay)
{
	fs->eng = e;
	fs->commit_delay = commit_delay;
	if (e && !fs->idle_running &&
	    pthread_create(&fs->idle_thread, NULL, idle_main, fs) == 0)
		fs->idle_running = true;
}

void fs_ctx_stop_writes(fs_ctx *fs)
{
	wr_shutdown(fs);
}

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
	if (d && m) {
		d->mode = m->mode;
		d->uid = m->uid;
		d->gid = m->gid;
		d->mtime = d->ctime = m->mtime;
	}
}

static void restore_one(void *arg, uint64_t txn, const char *path,
			const char *staging_path, uint64_t size,
			const eng_meta *m)
{
	restore_ctx *r = arg;
	fs_ctx *fs = r->fs;
	if (ov_get(&fs->ov, path))
		return;
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
		o->uid = m->uid;
		o->gid = m->gid;
		o->mtime = o->ctime = m->mtime;
		if (m->symlink)
			o->target = strdup(m->symlink);
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

/* A remote name a journaled delete or rename takes away: a whiteout until
 * its step runs, as before the restart (the resumed job saw deleted
 * checkpoints again and deleted them once more).  Table locked. */
static void restore_removal(void *arg, const char *path, bool is_dir)
{
	restore_ctx *r = arg;
	(void)is_dir;
	if (ov_get(&r->fs->ov, path))
		return;
	ov_node *w = ov_add(&r->fs->ov, path, OV_WHITEOUT, NULL);
	if (w)
		w->wo_time = wr_now_s();
}

void fs_ctx_restore(fs_ctx *fs)
{
	if (!fs->eng)
		return;
	restore_ctx r = {fs, 0, 0};
	fs_itable_lock(fs->it);
	eng_foreach_pending_txn(fs->eng, restore_txn, restore_dir, &r);
	eng_foreach_pending_file(fs->eng, restore_one, &r);
	eng_foreach_pending_removal(fs->eng, restore_removal, &r);
	fs_itable_unlock(fs->it);
	if (r.n || r.txns)
		log_info("resuming %zu journaled transaction%s, %zu file%s",
			 r.txns, r.txns == 1 ? "" : "s", r.n,
			 r.n == 1 ? "" : "s");
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

/* ---- commit and sync ---------------------------------------------------- */

int fs_commit_path(fs_ctx *fs, const char *relpath, char *err, size_t errsz)
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
	wr_pt_wait_releases(fs);
	wr_ordered(fs);
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

int fs_sync(fs_ctx *fs,
	    void (*progress)(void *arg, uint64_t done, uint64_t total),
	    void *arg)
{
	if (!fs->eng)
		return 0;
	fs_itable_lock(fs->it);
	wr_pt_wait_releases(fs);
	wr_flush_deletes(fs);
	for (ov_txn *x = fs->ov.txns; x; x = x->next)
		if (!x->done && x->open == 0)
			wr_seal(fs, x);
	fs_itable_unlock(fs->it);
	int rc = eng_sync(fs->eng, progress, arg);
	/* what became visible is remote from now on, not in 250 ms */
	fs_itable_lock(fs->it);
	wr_reap(fs);
	fs_itable_unlock(fs->it);
	return rc;
}
