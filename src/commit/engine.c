/*
 * eng: the commit engine's interface (engine.h): opening and resuming the
 * journal, the facts the FUSE layer hands over, waiting and status.
 *
 * Threads (design notes in doc/commit.md, "Engine threads"):
 *   - `conns` upload workers doing blocking S3 calls (transfer.c): single
 *     PUTs, CreateMultipartUpload, parts, completions;
 *   - one visibility thread running the ordered queue (visible.c): commits,
 *     single-file PUTs/completions, remote deletes and renames, aborts;
 *   - one renewal thread re-PUTting pending markers every lease/3.
 * Every fact is journaled under the mutex before the call returns; the
 * in-memory model below is rebuilt from the journal by eng_open.
 */
#include "commit/engine.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "commit/internal.h"
#include "util/clock.h"
#include "util/log.h"

double eng_now(void)
{
	return clock_mono();
}

int64_t eng_wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

char *eng_staging_path(const eng *e, uint64_t sid)
{
	buf b = BUF_INIT;
	buf_printf(&b, "%s/%" PRIu64, e->staging, sid);
	return buf_steal(&b);
}

void eng_sleep(eng *e, double seconds)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	double t = (double)ts.tv_sec + ts.tv_nsec / 1e9 + seconds;
	ts.tv_sec = (time_t)t;
	ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
	if (!e->stopping)
		pthread_cond_timedwait(&e->cv, &e->mu, &ts);
}

/* ---- the in-memory model ------------------------------------------------ */

static etxn *find_txn(eng *e, uint64_t id)
{
	for (etxn *t = e->txns; t; t = t->next)
		if ((uint64_t)t->id == id && !t->done)
			return t;
	return NULL;
}

static void file_free(efile *f)
{
	free(f->path);
	proto_meta_free(&f->m);
	free(f->key);
	free(f->upload_id);
	eng_free_parts(f);
	free(f->blocks);
	free(f);
}

void eng_file_unref(eng *e, efile *f)
{
	(void)e;
	if (--f->refs == 0)
		file_free(f);
}

void eng_free_txn(eng *e, etxn *t)
{
	for (etxn **pp = &e->txns; *pp; pp = &(*pp)->next) {
		if (*pp == t) {
			*pp = t->next;
			if (e->txns_tail == t) {
				e->txns_tail = NULL;
				for (etxn *x = e->txns; x; x = x->next)
					e->txns_tail = x;
			}
			break;
		}
	}
	while (t->files) {
		efile *f = t->files;
		t->files = f->next;
		f->t = NULL;
		f->gen++;
		eng_file_unref(e, f);
	}
	while (t->dirs) {
		edir *d = t->dirs;
		t->dirs = d->next;
		free(d->path);
		proto_meta_free(&d->m);
		free(d);
	}
	free(t->root);
	free(t->dest);
	free(t->mroot);
	free(t->error);
	free(t);
}

static etxn *txn_new(eng *e, int64_t id, enum tkind k, const char *root,
		     const char *dest, bool is_dir, enum tstate st,
		     const char *mroot)
{
	etxn *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	t->id = id;
	t->seq = id;
	t->kind = k;
	t->root = strdup(root);
	t->dest = dest ? strdup(dest) : NULL;
	t->is_dir = is_dir;
	t->state = st;
	t->mroot = mroot ? strdup(mroot) : NULL;
	t->rate_t0 = eng_now();
	if (e->txns_tail)
		e->txns_tail->next = t;
	else
		e->txns = t;
	e->txns_tail = t;
	return t;
}

static efile *find_file(etxn *t, const char *path)
{
	for (efile *f = t->files; f; f = f->next)
		if (!strcmp(f->path, path))
			return f;
	return NULL;
}

static void unlink_file(etxn *t, efile *f)
{
	for (efile **pp = &t->files; *pp; pp = &(*pp)->next) {
		if (*pp == f) {
			*pp = f->next;
			break;
		}
	}
	f->next = NULL;
	f->t = NULL;
}

static void link_file(etxn *t, efile *f)
{
	f->t = t;
	f->next = t->files;
	t->files = f;
}

bool eng_root_final(const eng *e, const etxn *t)
{
	return !proto_has_temp(&e->pats, t->root);
}

bool eng_parked(const eng *e, const etxn *t)
{
	return (t->kind == T_DIR || t->kind == T_FILE) &&
	       t->state != TS_ABORTED && !eng_root_final(e, t);
}

/* Whether a and b are entries of one directory. */
static bool siblings(const char *a, const char *b)
{
	const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
	size_t la = sa ? (size_t)(sa - a) : 0, lb = sb ? (size_t)(sb - b) : 0;
	return la == lb && !strncmp(a, b, la);
}

/*
 * Whether step t must wait for an earlier step s that failed for good.
 * It must when it touches s's paths (a delete or rename of the failed
 * directory, something written inside it), and when it is a delete or
 * rename of a sibling (the rotation removing an older checkpoint after
 * the one that failed) or a single file beside it (a `latest` file that
 * may name it).  A new directory elsewhere, or beside it, is independent.
 */
static bool eng_depends(const etxn *t, const etxn *s)
{
	const char *tp[2] = {t->root, t->dest}, *sp[2] = {s->root, s->dest};
	bool near = t->kind == T_RDEL || t->kind == T_RREN || t->kind == T_FILE;
	for (int i = 0; i < 2; i++)
		for (int k = 0; k < 2; k++) {
			if (!tp[i] || !sp[k])
				continue;
			if (proto_overlap(tp[i], sp[k]))
				return true;
			if (near && siblings(tp[i], sp[k]))
				return true;
		}
	return false;
}

/*
 * One pass over the queue in order, keeping the steps held back by a
 * failed one (each with the failed step at its root).  Stops at `upto`
 * and returns its blocker, or, with upto NULL, at the first step that is
 * not held back and returns it in *next.  mu
 */
static etxn *scan(eng *e, const etxn *upto, etxn **next)
{
	size_t cap = 0, n = 0;
	for (etxn *t = e->txns; t; t = t->next)
		cap++;
	etxn **stuck = calloc(cap ? cap : 1, sizeof *stuck);
	etxn **cause = calloc(cap ? cap : 1, sizeof *cause);
	etxn *found = NULL;
	if (next)
		*next = NULL;
	for (etxn *t = e->txns; t && stuck && cause; t = t->next) {
		if (t->done || t->state == TS_ABORTED || eng_parked(e, t))
			continue;
		etxn *c = t->failed ? t : NULL;
		for (size_t i = 0; !c && i < n; i++)
			if (eng_depends(t, stuck[i]))
				c = cause[i];
		if (t == upto) {
			found = c;
			break;
		}
		if (!c && !upto) {
			*next = t;
			break;
		}
		if (c) {
			stuck[n] = t;
			cause[n++] = c;
		}
	}
	free(stuck);
	free(cause);
	return found;
}

etxn *eng_blocker(eng *e, const etxn *t)
{
	return scan(e, t, NULL);
}

etxn *eng_next_step(eng *e)
{
	etxn *next;
	scan(e, NULL, &next);
	return next;
}

void eng_key_claim(eng *e, struct eng_busy *b, const char *key)
{
	for (;;) {
		bool busy = false;
		for (struct eng_busy *o = e->busy; o && !busy; o = o->next)
			busy = !strcmp(o->key, key);
		if (!busy)
			break;
		pthread_cond_wait(&e->cv, &e->mu);
	}
	b->key = key;
	b->next = e->busy;
	e->busy = b;
}

void eng_key_release(eng *e, struct eng_busy *b)
{
	for (struct eng_busy **pp = &e->busy; *pp; pp = &(*pp)->next)
		if (*pp == b) {
			*pp = b->next;
			break;
		}
	pthread_cond_broadcast(&e->cv);
}

bool eng_upload_blocked(eng *e, const etxn *t, const char *path)
{
	for (etxn *x = e->txns; x && x != t; x = x->next) {
		if (x->done || x->state == TS_ABORTED || eng_parked(e, x))
			continue;
		if (proto_overlap(x->root, path) ||
		    (x->dest && proto_overlap(x->dest, path)))
			return true;
	}
	return false;
}

static bool held(eng *e, const efile *f);

bool eng_file_uploadable(eng *e, const efile *f)
{
	const etxn *t = f->t;
	if (!t || t->done || t->state == TS_ABORTED || f->failed)
		return false;
	if (!eng_root_final(e, t))
		return false;
	if (t->state != TS_SEALED && proto_has_temp(&e->pats, f->path))
		return false;
	if (held(e, f))
		return false;
	return !eng_upload_blocked(e, t, f->path);
}

/* Whether f waits for the application to stop writing.  mu */
static bool held(eng *e, const efile *f)
{
	const etxn *t = f->t;
	return e->writing && e->o.upload_hold_s > 0 && t->kind == T_DIR &&
	       t->state != TS_SEALED && !f->urgent && !f->upload_id &&
	       eng_now() - f->put_at < e->o.upload_hold_s;
}

void eng_hold_uploads(eng *e, bool writing)
{
	pthread_mutex_lock(&e->mu);
	bool was = e->writing;
	e->writing = writing;
	/* released, or maybe some held file's time is up */
	if (was)
		eng_sched_all(e);
	pthread_mutex_unlock(&e->mu);
}

/* Bytes staged but not yet stored of files that will upload without
 * waiting for a rename (temp-named files do not count: a writer blocked
 * on them could never rename them).  Recomputed after changes. */
static uint64_t staged_now(eng *e)
{
	if (!e->staged_dirty)
		return e->staged;
	uint64_t s = 0;
	for (etxn *t = e->txns; t; t = t->next) {
		if (t->done || t->state == TS_ABORTED || !eng_root_final(e, t))
			continue;
		for (efile *f = t->files; f; f = f->next)
			if (f->state != F_STORED && !f->failed &&
			    (t->state == TS_SEALED ||
			     !proto_has_temp(&e->pats, f->path)))
				s += f->size > f->bytes_done
					 ? f->size - f->bytes_done
					 : 0;
	}
	e->staged = s;
	e->staged_dirty = false;
	return s;
}

void eng_sched_file(eng *e, efile *f)
{
	etxn *t = f->t;
	e->staged_dirty = true;
	if (!t || f->state == F_STORED || f->jobs || !eng_file_uploadable(e, f))
		return;
	bool mpu = f->size >= e->o.multipart_min || f->upload_id ||
		   (t->kind == T_FILE && f->want_durable);
	if (t->kind == T_FILE && !mpu)
		return; /* the visibility thread PUTs it at its turn */
	if (!mpu) {
		eng_push_job(e, J_PUT, f, 0);
		return;
	}
	if (!f->upload_id) {
		eng_push_job(e, J_CREATE, f, 0);
		return;
	}
	if (f->parts_done == f->n_parts) {
		if (t->kind == T_DIR)
			eng_push_job(e, J_COMPLETE, f, 0);
		return;
	}
	for (unsigned i = 0; i < f->n_parts; i++)
		if (f->pst[i] == P_TODO)
			eng_push_job(e, J_PART, f, i);
}

void eng_sched_all(eng *e)
{
	e->staged_dirty = true;
	for (etxn *t = e->txns; t; t = t->next)
		for (efile *f = t->files; f; f = f->next)
			eng_sched_file(e, f);
	pthread_cond_broadcast(&e->cv);
}

bool eng_err_transient(const s3_err *x)
{
	/* the one rule of s3/retry.c (retry_classify_err), local errors
	 * included: bad metadata or a short staging file are final */
	return s3_err_transient(x);
}

void eng_txn_error(eng *e, etxn *t, const s3_err *x, bool permanent)
{
	double now = eng_now();
	if (t) {
		free(t->error);
		t->error = strdup(x->msg[0] ? x->msg : strerror(x->err));
		t->err = x->err ? x->err : EIO;
	}
	if (permanent) {
		if (t && !t->failed) {
			t->failed = true;
			log_error("commit of %s failed for good: %s (staged bytes "
				  "kept; the journal retries at the next mount)",
				  t ? t->root : "?", x->msg);
			jr_exec(e->j, NULL, NULL,
				"UPDATE txns SET error = ? WHERE id = ?", "ti",
				x->msg, t->id);
		}
		pthread_cond_broadcast(&e->cv);
		return;
	}
	double *last = t ? &t->err_logged : &e->last_err_log;
	if (now - *last >= 60 || *last == 0) {
		*last = now;
		log_warn("%s: %s (retrying until it works)",
			 t ? t->root : "commit", x->msg);
	}
}

void eng_garbage(eng *e, etxn *t, const char *key)
{
	jr_exec(e->j, NULL, NULL,
		"INSERT OR IGNORE INTO garbage(txn, key) VALUES(?, ?)", "it",
		t->id, key);
}

/* ---- journal load ------------------------------------------------------- */

struct loader {
	eng *e;
	etxn *t;
	efile *f;
	int rc;
};

static const char *col_text(sqlite3_stmt *s, int i)
{
	return (const char *)sqlite3_column_text(s, i);
}

static int load_txn_row(void *arg, sqlite3_stmt *s)
{
	struct loader *l = arg;
	etxn *t = txn_new(l->e, sqlite3_column_int64(s, 0),
			  (enum tkind)sqlite3_column_int(s, 1), col_text(s, 2),
			  col_text(s, 3), sqlite3_column_int(s, 4),
			  (enum tstate)sqlite3_column_int(s, 5),
			  col_text(s, 6));
	if (!t)
		return -ENOMEM;
	t->seq = sqlite3_column_int64(s, 7);
	t->has_marker = t->kind == T_DIR && eng_root_final(l->e, t) &&
			t->state != TS_ABORTED;
	return 0;
}

static void meta_cols(sqlite3_stmt *s, int i, proto_meta *m)
{
	m->mode = (uint32_t)sqlite3_column_int64(s, i);
	m->uid = (uint32_t)sqlite3_column_int64(s, i + 1);
	m->gid = (uint32_t)sqlite3_column_int64(s, i + 2);
	m->mtime_ns = sqlite3_column_int64(s, i + 3);
}

static int alloc_parts(efile *f)
{
	unsigned n = f->n_parts ? f->n_parts : 1;
	f->pst = calloc(n, 1);
	f->petag = calloc(n, sizeof *f->petag);
	f->pcrc = calloc(n, sizeof *f->pcrc);
	f->pseg = calloc(n, sizeof *f->pseg);
	return f->pst && f->petag && f->pcrc && f->pseg ? 0 : -ENOMEM;
}

static int load_part_row(void *arg, sqlite3_stmt *s)
{
	efile *f = arg;
	int64_t n = sqlite3_column_int64(s, 0);
	if (n < 0 || n >= f->n_parts || f->pst[n] == P_DONE)
		return 0;
	f->pst[n] = P_DONE;
	snprintf(f->petag[n], S3_ETAG_MAX, "%s", col_text(s, 1));
	f->pcrc[n] = (uint32_t)sqlite3_column_int64(s, 2);
	/* NULL when journaled by a version without block checksums: the
	 * manifest then records none for the file */
	f->pseg[n] = col_text(s, 4) ? strdup(col_text(s, 4)) : NULL;
	f->parts_done++;
	uint64_t len = (uint64_t)sqlite3_column_int64(s, 3);
	f->bytes_done += len;
	return 0;
}

static int load_file_row(void *arg, sqlite3_stmt *s)
{
	struct loader *l = arg;
	eng *e = l->e;
	etxn *t = find_txn(e, (uint64_t)sqlite3_column_int64(s, 1));
	if (!t)
		return 0;
	efile *f = calloc(1, sizeof *f);
	if (!f)
		return -ENOMEM;
	f->id = sqlite3_column_int64(s, 0);
	f->path = strdup(col_text(s, 2));
	f->sid = (uint64_t)sqlite3_column_int64(s, 3);
	f->size = (uint64_t)sqlite3_column_int64(s, 4);
	meta_cols(s, 5, &f->m);
	int xl = sqlite3_column_bytes(s, 9);
	if (xl > 0 && (f->m.xattrs = malloc((size_t)xl))) {
		memcpy(f->m.xattrs, sqlite3_column_blob(s, 9), (size_t)xl);
		f->m.xattrs_len = (size_t)xl;
	}
	f->m.symlink = col_text(s, 10) ? strdup(col_text(s, 10)) : NULL;
	f->state = (enum fstate)sqlite3_column_int(s, 11);
	f->key = col_text(s, 12) ? strdup(col_text(s, 12)) : NULL;
	f->upload_id = col_text(s, 13) ? strdup(col_text(s, 13)) : NULL;
	f->part_size = (uint64_t)sqlite3_column_int64(s, 14);
	if (col_text(s, 15))
		snprintf(f->etag, sizeof f->etag, "%s", col_text(s, 15));
	f->crc = (uint32_t)sqlite3_column_int64(s, 16);
	f->blocks = col_text(s, 17) ? strdup(col_text(s, 17)) : NULL;
	f->refs = 1;
	link_file(t, f);
	if (f->state == F_STORED) {
		f->bytes_done = f->size;
		return 0;
	}
	if (f->upload_id && f->part_size) {
		f->n_parts = (unsigned)s3_part_count(f->size, f->part_size);
		if (alloc_parts(f) < 0)
			return -ENOMEM;
		jr_exec(e->j, load_part_row, f,
			"SELECT n, etag, crc32c, len, segs FROM parts "
			"WHERE file = ?",
			"i", f->id);
	}
	return 0;
}

static int load_dir_row(void *arg, sqlite3_stmt *s)
{
	struct loader *l = arg;
	etxn *t = find_txn(l->e, (uint64_t)sqlite3_column_int64(s, 0));
	edir *d = t ? calloc(1, sizeof *d) : NULL;
	if (!d)
		return t ? -ENOMEM : 0;
	d->path = strdup(col_text(s, 1));
	meta_cols(s, 2, &d->m);
	d->next = t->dirs;
	t->dirs = d;
	return 0;
}

static int load_journal(eng *e)
{
	struct loader l = {e, NULL, NULL, 0};
	int rc = jr_exec(e->j, load_txn_row, &l,
			 "SELECT id, kind, root, dest, is_dir, state, "
			 "manifest_root, COALESCE(seq, id) FROM txns "
			 "ORDER BY COALESCE(seq, id)",
			 "");
	if (!rc)
		rc = jr_exec(e->j, load_file_row, &l,
			     "SELECT id, txn, path, sid, size, mode, uid, gid, "
			     "mtime_ns, xattrs, symlink, state, key, upload_id, "
			     "part_size, etag, crc32c, blocks FROM files "
			     "ORDER BY id",
			     "");
	if (!rc)
		rc = jr_exec(e->j, load_dir_row, &l,
			     "SELECT txn, path, mode, uid, gid, mtime_ns "
			     "FROM dirs",
			     "");
	return rc;
}

/* Removes staging files no journal row references; finds the next sid. */
static void sweep_staging(eng *e)
{
	DIR *d = opendir(e->staging);
	if (!d)
		return;
	uint64_t max = 0;
	for (etxn *t = e->txns; t; t = t->next)
		for (efile *f = t->files; f; f = f->next)
			if (f->sid > max)
				max = f->sid;
	struct dirent *de;
	while ((de = readdir(d))) {
		char *end;
		uint64_t sid = strtoull(de->d_name, &end, 10);
		if (de->d_name[0] < '0' || de->d_name[0] > '9' || *end)
			continue;
		bool used = false;
		for (etxn *t = e->txns; t && !used; t = t->next)
			for (efile *f = t->files; f && !used; f = f->next)
				used = f->sid == sid;
		if (!used) {
			char *p = eng_staging_path(e, sid);
			log_info("commit: removing unreferenced staging file %s",
				 p);
			unlink(p);
			free(p);
		}
		if (sid > max)
			max = sid;
	}
	closedir(d);
	e->next_sid = max + 1;
}

/* ---- open and close ----------------------------------------------------- */

static void apply_defaults(eng_opts *o)
{
	if (!o->lease_s)
		o->lease_s = 60;
	if (!o->part_size)
		o->part_size = S3_DEFAULT_PART_SIZE;
	if (!o->multipart_min)
		o->multipart_min = 16 * S3_MIB;
	if (o->multipart_min < S3_MIN_PART_SIZE)
		o->multipart_min = S3_MIN_PART_SIZE;
	if (!o->conns)
		o->conns = 16;
}

static int load_writer(eng *e)
{
	char *w = jr_meta_get(e->j, "writer");
	int rc = 0;
	if (w && *w && strlen(w) < sizeof e->writer) {
		snprintf(e->writer, sizeof e->writer, "%s", w);
	} else {
		proto_writer_id(e->writer);
		rc = jr_meta_set(e->j, "writer", e->writer);
	}
	free(w);
	return rc;
}

static int start_threads(eng *e)
{
	e->workers = calloc(e->o.conns, sizeof *e->workers);
	if (!e->workers)
		return -ENOMEM;
	for (unsigned i = 0; i < e->o.conns; i++) {
		if (pthread_create(&e->workers[i], NULL, eng_worker_main, e))
			return -EAGAIN;
		e->n_workers++;
	}
	if (pthread_create(&e->vis_thr, NULL, eng_vis_main, e))
		return -EAGAIN;
	e->vis_started = true;
	if (pthread_create(&e->renew_thr, NULL, eng_renew_main, e))
		return -EAGAIN;
	e->renew_started = true;
	return 0;
}

static void stop_threads(eng *e)
{
	pthread_mutex_lock(&e->mu);
	e->stopping = true;
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
	for (unsigned i = 0; i < e->n_workers; i++)
		pthread_join(e->workers[i], NULL);
	if (e->vis_started)
		pthread_join(e->vis_thr, NULL);
	if (e->renew_started)
		pthread_join(e->renew_thr, NULL);
	e->n_workers = 0;
	e->vis_started = e->renew_started = false;
}

static void eng_free(eng *e)
{
	while (e->txns)
		eng_free_txn(e, e->txns);
	while (e->jobs) {
		job *jb = e->jobs;
		e->jobs = jb->next;
		if (jb->f)
			eng_file_unref(e, jb->f);
		free(jb->key);
		free(jb->upload_id);
		free(jb);
	}
	jr_close(e->j);
	proto_pats_free(&e->pats);
	pthread_mutex_destroy(&e->mu);
	pthread_mutex_destroy(&e->marker_mu);
	pthread_cond_destroy(&e->cv);
	free(e->workers);
	free(e->vis_marker);
	free(e->dir);
	free(e->staging);
	free(e->bucket);
	free(e->prefix);
	free(e);
}

int eng_open(s3_client *s3, cache *rc, const char *state_dir,
	     const char *bucket, const char *prefix, const eng_opts *o,
	     eng **out, char **err)
{
	*out = NULL;
	eng *e = calloc(1, sizeof *e);
	if (!e)
		return -ENOMEM;
	e->s3 = s3;
	e->rc = rc;
	e->o = o ? *o : (eng_opts){0};
	apply_defaults(&e->o);
	pthread_mutex_init(&e->mu, NULL);
	pthread_mutex_init(&e->marker_mu, NULL);
	pthread_cond_init(&e->cv, NULL);
	e->dir = strdup(state_dir);
	e->bucket = strdup(bucket);
	buf p = BUF_INIT;
	buf_puts(&p, prefix ? prefix : "");
	if (p.len && p.data[p.len - 1] != '/')
		buf_putc(&p, '/');
	e->prefix = strdup(buf_cstr(&p));
	buf_reset(&p);
	buf_printf(&p, "%s/staging", state_dir);
	e->staging = buf_steal(&p);
	int r = proto_pats_parse(&e->pats, e->o.temp_patterns) ? -ENOMEM : 0;
	e->o.temp_patterns = NULL; /* not kept: parsed */
	if (!r)
		r = jr_open(state_dir, &e->j, err);
	if (!r && mkdir(e->staging, 0700) < 0 && errno != EEXIST) {
		r = -errno;
		buf_printf(&p, "%s: %s", e->staging, strerror(errno));
		*err = buf_steal(&p);
	}
	if (!r)
		r = load_writer(e);
	if (!r)
		r = load_journal(e);
	if (r) {
		if (err && !*err)
			*err = strdup(strerror(-r));
		eng_free(e);
		return r;
	}
	sweep_staging(e);
	size_t n = 0;
	for (etxn *t = e->txns; t; t = t->next)
		n++;
	if (n)
		log_info("commit: resuming %zu journaled step(s) as writer %s",
			 n, e->writer);
	pthread_mutex_lock(&e->mu);
	eng_sched_all(e);
	pthread_mutex_unlock(&e->mu);
	r = start_threads(e);
	if (r) {
		stop_threads(e);
		eng_free(e);
		*err = strdup("cannot start the commit engine threads");
		return r;
	}
	*out = e;
	return 0;
}

static void seal_all(eng *e, int64_t upto);

/* Whether nothing up to queue position upto (0: everything) can make
 * progress any more than it is: remaining steps are failed, held back by
 * a failed one, or wait for a move of their temp-named root. */
static bool settled(eng *e, int64_t upto, uint64_t *done, uint64_t *total)
{
	bool all = true, any_failed = false;
	*done = *total = 0;
	for (etxn *t = e->txns; t; t = t->next)
		any_failed |= !t->done && t->failed;
	for (etxn *t = e->txns; t; t = t->next) {
		if (upto && t->seq > upto)
			break;
		for (efile *f = t->files; f; f = f->next) {
			*total += f->size;
			*done += f->state == F_STORED ? f->size : f->bytes_done;
		}
		if (t->done || eng_parked(e, t))
			continue;
		if (t->state == TS_ABORTED) {
			/* its clean-up, unless that failed for good */
			if (!t->failed)
				all = false;
			continue;
		}
		if (!any_failed || !eng_blocker(e, t))
			all = false;
	}
	return all;
}

/* Drops the transactions still waiting for a final name: the mount ends,
 * so no rename can give them one.  Nothing of them was uploaded (uploads
 * wait for the final name) and nothing was visible.  mu */
static void drop_parked(eng *e)
{
	for (etxn *t = e->txns, *nx; t; t = nx) {
		nx = t->next;
		if (t->done || !eng_parked(e, t))
			continue;
		log_info("commit: %s was never renamed to a final name; its "
			 "%s dropped at unmount (it was never visible)",
			 t->root, t->files ? "staged files are" : "transaction is");
		for (efile *f = t->files; f; f = f->next) {
			char *p = eng_staging_path(e, f->sid);
			unlink(p);
			free(p);
		}
		jr_txn_delete(e->j, t->id);
		t->done = true;
		eng_free_txn(e, t);
	}
}

void eng_close(eng *e, bool wait)
{
	if (!e)
		return;
	if (wait) {
		pthread_mutex_lock(&e->mu);
		seal_all(e, 0);
		double last = eng_now();
		uint64_t done, total;
		while (!settled(e, 0, &done, &total)) {
			if (eng_now() - last >= 5) {
				last = eng_now();
				log_info("commit: waiting for pending uploads: "
					 "%" PRIu64 " of %" PRIu64 " MiB",
					 done >> 20, total >> 20);
			}
			eng_sleep(e, 1);
		}
		drop_parked(e);
		pthread_mutex_unlock(&e->mu);
	}
	stop_threads(e);
	eng_free(e);
}

const char *eng_writer(const eng *e)
{
	return e->writer;
}

bool eng_is_temp_name(const eng *e, const char *path)
{
	return proto_is_temp(&e->pats, path);
}

bool eng_path_has_temp(const eng *e, const char *path)
{
	return proto_has_temp(&e->pats, path);
}

/* ---- staging ------------------------------------------------------------ */

int eng_stage_create(eng *e, uint64_t *sid)
{
	pthread_mutex_lock(&e->mu);
	uint64_t id = e->next_sid++;
	pthread_mutex_unlock(&e->mu);
	char *p = eng_staging_path(e, id);
	int fd = p ? open(p, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : -1;
	int rc = fd >= 0 ? fd : -(p ? errno : ENOMEM);
	free(p);
	if (fd >= 0)
		*sid = id;
	return rc;
}

int eng_stage_reserve(eng *e, uint64_t n)
{
	(void)n;
	if (!e->o.max_staged)
		return 0;
	pthread_mutex_lock(&e->mu);
	if (e->writing && staged_now(e) >= e->o.max_staged / 2) {
		e->writing = false; /* the hold ends here (until the next
				     * eng_hold_uploads) */
		eng_sched_all(e);
	}
	while (!e->stopping && staged_now(e) > e->o.max_staged)
		pthread_cond_wait(&e->cv, &e->mu);
	int rc = e->stopping ? -EINTR : 0;
	pthread_mutex_unlock(&e->mu);
	return rc;
}

uint64_t eng_max_staged(const eng *e)
{
	return e->o.max_staged;
}

bool eng_space_pending(eng *e)
{
	pthread_mutex_lock(&e->mu);
	bool any = e->releasing > 0;
	pthread_mutex_unlock(&e->mu);
	return any;
}

void eng_stage_discard(eng *e, uint64_t sid)
{
	char *p = eng_staging_path(e, sid);
	if (p)
		unlink(p);
	free(p);
}

/* ---- transactions ------------------------------------------------------- */

int eng_put_marker(eng *e, const char *root, s3_err *x)
{
	char *key = proto_marker_key(e->prefix, root, e->writer, e->o.lease_s);
	char lease[16];
	snprintf(lease, sizeof lease, "%u", e->o.lease_s);
	s3_meta meta[2] = {{"lease", lease}, {"writer", e->writer}};
	s3_put_opts po = {.meta = meta, .n_meta = 2};
	http_upload body = http_upload_mem("", 0);
	int rc = key ? s3_put_object(e->s3, key, &body, &po, NULL, x) : -1;
	free(key);
	return rc;
}

int eng_put_intent(eng *e, const char *root, uint64_t txn, s3_err *x)
{
	char *key = proto_manifest_key(e->prefix, root, e->writer);
	char *json = proto_intent_json(e->writer, txn);
	s3_put_opts po = {.content_type = "application/json"};
	http_upload body = http_upload_mem(json, json ? strlen(json) : 0);
	int rc = key && json ? s3_put_object(e->s3, key, &body, &po, NULL, x)
			     : -1;
	free(key);
	free(json);
	return rc;
}

/* Marker and intent manifest of a final-named directory root, with the
 * engine's retry loop for transient failures kept short: the caller is a
 * mkdir waiting. */
static int announce(eng *e, const char *root, uint64_t txn)
{
	s3_err x = {0};
	if (eng_put_marker(e, root, &x) == 0 &&
	    eng_put_intent(e, root, txn, &x) == 0)
		return 0;
	log_error("cannot start the transaction of %s: %s", root, x.msg);
	return -(x.err ? x.err : EIO);
}

int eng_txn_begin(eng *e, const char *path, bool is_dir,
		  const char *mroot, uint64_t *txn)
{
	pthread_mutex_lock(&e->mu);
	int rc = jr_exec(e->j, NULL, NULL,
			 "INSERT INTO txns(kind, root, is_dir, state, "
			 "manifest_root) VALUES(?, ?, ?, 0, ?)",
			 "itit", (int64_t)(is_dir ? T_DIR : T_FILE), path,
			 (int64_t)is_dir, mroot);
	etxn *t = NULL;
	if (!rc) {
		t = txn_new(e, jr_last_id(e->j), is_dir ? T_DIR : T_FILE, path,
			    NULL, is_dir, TS_OPEN, mroot);
		if (!t)
			rc = -ENOMEM;
	}
	bool final = t && is_dir && eng_root_final(e, t);
	int64_t id = t ? t->id : 0;
	pthread_mutex_unlock(&e->mu);
	if (!rc && final)
		rc = announce(e, path, (uint64_t)id);
	pthread_mutex_lock(&e->mu);
	if (rc && t) {
		jr_txn_delete(e->j, id);
		t->done = true;
		eng_free_txn(e, t);
	} else if (t) {
		t->has_marker = final;
		*txn = (uint64_t)id;
	}
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
	return rc;
}

/* Forgets f's current upload: its object (if stored under another key than
 * the one it will get) becomes garbage, an open multipart upload is
 * aborted, progress restarts.  mu */
static void reset_upload(eng *e, etxn *garbage_txn, efile *f,
			 const char *new_key)
{
	if (f->key && f->state == F_STORED &&
	    (!new_key || strcmp(f->key, new_key)))
		eng_garbage(e, garbage_txn, f->key);
	if (f->upload_id && f->key)
		eng_push_abort(e, f->key, f->upload_id);
	free(f->upload_id);
	free(f->key);
	free(f->blocks);
	eng_free_parts(f);
	f->upload_id = f->key = f->blocks = NULL;
	f->n_parts = f->parts_done = 0;
	f->part_size = 0;
	f->bytes_done = 0;
	f->state = F_STAGED;
	f->failed = false;
	f->etag[0] = '\0';
	f->gen++;
	jr_exec(e->j, NULL, NULL, "DELETE FROM parts WHERE file = ?", "i",
		f->id);
}

static int journal_file(eng *e, efile *f)
{
	return jr_exec(e->j, NULL, NULL,
		       "UPDATE files SET txn = ?, path = ?, sid = ?, size = ?, "
		       "mode = ?, uid = ?, gid = ?, mtime_ns = ?, xattrs = ?, "
		       "symlink = ?, state = ?, key = ?, upload_id = ?, "
		       "part_size = ?, etag = ?, crc32c = ?, blocks = ? "
		       "WHERE id = ?",
		       "itiiiiiibtittititi", f->t->id, f->path, (int64_t)f->sid,
		       (int64_t)f->size, (int64_t)f->m.mode, (int64_t)f->m.uid,
		       (int64_t)f->m.gid, f->m.mtime_ns, f->m.xattrs,
		       f->m.xattrs_len, f->m.symlink, (int64_t)f->state, f->key,
		       f->upload_id, (int64_t)f->part_size,
		       f->etag[0] ? f->etag : NULL, (int64_t)f->crc, f->blocks,
		       f->id);
}

int eng_file_put(eng *e, uint64_t txn, const char *path, uint64_t sid,
		 uint64_t size, const eng_meta *m)
{
	pthread_mutex_lock(&e->mu);
	etxn *t = find_txn(e, txn);
	int rc = t && t->state != TS_ABORTED ? 0 : -ENOENT;
	efile *f = t ? find_file(t, path) : NULL;
	char *old_staging = NULL;
	/* the put of a new file (the close of a checkpoint file) does not
	 * wait for an fsync of the journal: close(2) promises no
	 * durability, and the staged bytes are not synced either.  The next
	 * durable commit (its upload, a seal, fsync) takes the row to disk. */
	bool lazy = !rc && !f;
	if (lazy && jr_set_durable(e->j, false) < 0)
		lazy = false;
	if (!rc)
		rc = jr_begin(e->j);
	if (!rc && !f) {
		rc = jr_exec(e->j, NULL, NULL,
			     "INSERT INTO files(txn, path, sid, size, state) "
			     "VALUES(?, ?, ?, ?, 0)",
			     "itii", t->id, path, (int64_t)sid, (int64_t)size);
		f = rc ? NULL : calloc(1, sizeof *f);
		if (f) {
			f->id = jr_last_id(e->j);
			f->path = strdup(path);
			f->refs = 1;
			link_file(t, f);
		} else if (!rc) {
			rc = -ENOMEM;
		}
	} else if (!rc) {
		reset_upload(e, t, f, NULL);
		if (f->sid != sid)
			old_staging = eng_staging_path(e, f->sid);
	}
	if (!rc) {
		f->sid = sid;
		f->size = size;
		f->put_at = eng_now();
		proto_meta_free(&f->m);
		proto_meta_from(&f->m, m);
		rc = journal_file(e, f);
	}
	if (!rc)
		rc = jr_commit(e->j);
	else
		jr_rollback(e->j);
	if (lazy)
		jr_set_durable(e->j, true);
	if (!rc) {
		if (old_staging)
			unlink(old_staging);
		eng_sched_file(e, f);
	}
	free(old_staging);
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
	return rc;
}

int eng_file_set_meta(eng *e, uint64_t txn, const char *path,
		      const eng_meta *m)
{
	pthread_mutex_lock(&e->mu);
	etxn *t = find_txn(e, txn);
	efile *f = t ? find_file(t, path) : NULL;
	int rc = f ? 0 : -ENOENT;
	if (f) {
		proto_meta_free(&f->m);
		proto_meta_from(&f->m, m);
		/* object metadata is written with the bytes: re-upload (the
		 * manifest alone would do, but the object should agree) */
		if (f->state == F_STORED || f->upload_id || f->jobs) {
			f->gen++;
			reset_upload(e, t, f, NULL);
		}
		rc = journal_file(e, f);
		eng_sched_file(e, f);
	} else if (t) {
		for (edir *d = t->dirs; d; d = d->next) {
			if (!strcmp(d->path, path)) {
				proto_meta_free(&d->m);
				proto_meta_from(&d->m, m);
				rc = jr_exec(e->j, NULL, NULL,
					     "UPDATE dirs SET mode = ?, uid = ?, "
					     "gid = ?, mtime_ns = ? WHERE txn = ? "
					     "AND path = ?",
					     "iiiiit", (int64_t)d->m.mode,
					     (int64_t)d->m.uid, (int64_t)d->m.gid,
					     d->m.mtime_ns, t->id, path);
			}
		}
	}
	pthread_mutex_unlock(&e->mu);
	return rc;
}

/* Drops f from its transaction: rows, upload, staging file.  mu, inside a
 * journal transaction. */
static void drop_file(eng *e, etxn *t, efile *f)
{
	reset_upload(e, t, f, NULL);
	jr_exec(e->j, NULL, NULL, "DELETE FROM files WHERE id = ?", "i", f->id);
	char *p = eng_staging_path(e, f->sid);
	unlink(p);
	free(p);
	unlink_file(t, f);
	if (f->jobs && !f->releasing) {
		f->releasing = true;
		e->releasing++;
	}
	eng_file_unref(e, f);
}

static void drop_dirs(eng *e, etxn *t, const char *path)
{
	for (edir **pp = &t->dirs; *pp;) {
		edir *d = *pp;
		if (!proto_under(d->path, path, NULL)) {
			pp = &d->next;
			continue;
		}
		jr_exec(e->j, NULL, NULL,
			"DELETE FROM dirs WHERE txn = ? AND path = ?", "it",
			t->id, d->path);
		*pp = d->next;
		free(d->path);
		proto_meta_free(&d->m);
		free(d);
	}
}

int eng_file_drop(eng *e, uint64_t txn, const char *path)
{
	pthread_mutex_lock(&e->mu);
	etxn *t = find_txn(e, txn);
	int rc = t ? jr_begin(e->j) : -ENOENT;
	if (!rc) {
		for (efile *f = t->files, *nx; f; f = nx) {
			nx = f->next;
			if (proto_under(f->path, path, NULL))
				drop_file(e, t, f);
		}
		drop_dirs(e, t, path);
		rc = jr_commit(e->j);
	}
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
	return rc;
}

int eng_dir_put(eng *e, uint64_t txn, const char *path, const eng_meta *m)
{
	pthread_mutex_lock(&e->mu);
	etxn *t = find_txn(e, txn);
	edir *d = t ? calloc(1, sizeof *d) : NULL;
	int rc = d ? 0 : t ? -ENOMEM : -ENOENT;
	if (d) {
		d->path = strdup(path);
		proto_meta_from(&d->m, m);
		drop_dirs(e, t, path); /* replaces an earlier put */
		d->next = t->dirs;
		t->dirs = d;
		rc = jr_exec(e->j, NULL, NULL,
			     "INSERT OR REPLACE INTO dirs(txn, path, mode, uid, "
			     "gid, mtime_ns) VALUES(?, ?, ?, ?, ?, ?)",
			     "itiiii", t->id, path, (int64_t)d->m.mode,
			     (int64_t)d->m.uid, (int64_t)d->m.gid,
			     d->m.mtime_ns);
	}
	pthread_mutex_unlock(&e->mu);
	return rc;
}

static char *rebase(const char *path, const char *from, const char *to)
{
	const char *rest;
	if (!proto_under(path, from, &rest))
		return strdup(path);
	buf b = BUF_INIT;
	buf_puts(&b, to);
	if (*rest)
		buf_printf(&b, "/%s", rest);
	return buf_steal(&b);
}

/* Moves every file and dir of tf under `from` to `to` in tt.  mu, inside a
 * journal transaction. */
static void move_entries(eng *e, etxn *tf, const char *from, etxn *tt,
			 const char *to)
{
	for (efile *f = tf->files, *nx; f; f = nx) {
		nx = f->next;
		if (!proto_under(f->path, from, NULL))
			continue;
		char *np = rebase(f->path, from, to);
		efile *old = tt ? find_file(tt, np) : NULL;
		if (old && old != f)
			drop_file(e, tt, old);
		reset_upload(e, tt, f, NULL);
		unlink_file(tf, f);
		free(f->path);
		f->path = np;
		link_file(tt, f);
		journal_file(e, f);
	}
	for (edir *d = tf->dirs, **pp = &tf->dirs; d; d = *pp) {
		if (!proto_under(d->path, from, NULL)) {
			pp = &d->next;
			continue;
		}
		char *np = rebase(d->path, from, to);
		jr_exec(e->j, NULL, NULL,
			"DELETE FROM dirs WHERE txn = ? AND path = ?", "it",
			tf->id, d->path);
		jr_exec(e->j, NULL, NULL,
			"INSERT OR REPLACE INTO dirs(txn, path, mode, uid, gid, "
			"mtime_ns) VALUES(?, ?, ?, ?, ?, ?)",
			"itiiii", tt->id, np, (int64_t)d->m.mode,
			(int64_t)d->m.uid, (int64_t)d->m.gid, d->m.mtime_ns);
		free(d->path);
		d->path = np;
		*pp = d->next;
		d->next = tt->dirs;
		tt->dirs = d;
	}
}

static int int64_row(void *arg, sqlite3_stmt *s)
{
	*(int64_t *)arg = sqlite3_column_int64(s, 0);
	return 0;
}

/*
 * t leaves its place in the queue for the tail: a root renamed from a temp
 * name to a final one is ordered by its rename, which is when the
 * application means it (doc/commit.md "Ordering").  Its new position is a
 * fresh value of the txns id sequence, so later transactions come after
 * it.  mu, inside a journal transaction.
 */
static int requeue(eng *e, etxn *t)
{
	int64_t seq = 0;
	int rc = jr_exec(e->j, NULL, NULL,
			 "UPDATE sqlite_sequence SET seq = seq + 1 "
			 "WHERE name = 'txns'",
			 "");
	if (!rc)
		rc = jr_exec(e->j, int64_row, &seq,
			     "SELECT seq FROM sqlite_sequence WHERE name = "
			     "'txns'",
			     "");
	if (!rc && seq <= 0)
		rc = -EIO;
	if (!rc)
		rc = jr_exec(e->j, NULL, NULL,
			     "UPDATE txns SET seq = ? WHERE id = ?", "ii", seq,
			     t->id);
	if (rc)
		return rc;
	t->seq = seq;
	if (e->txns_tail == t)
		return 0;
	for (etxn **pp = &e->txns; *pp; pp = &(*pp)->next)
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	t->next = NULL;
	e->txns_tail->next = t;
	e->txns_tail = t;
	return 0;
}

/* The old name's marker and intent manifest go with the garbage of t. */
static void retire_root(eng *e, etxn *t)
{
	if (!t->has_marker)
		return;
	char *mk = proto_marker_key(e->prefix, t->root, e->writer,
				    e->o.lease_s);
	char *ik = proto_manifest_key(e->prefix, t->root, e->writer);
	eng_garbage(e, t, mk);
	eng_garbage(e, t, ik);
	free(mk);
	free(ik);
	t->has_marker = false;
}

int eng_file_move(eng *e, uint64_t txn_from, const char *from,
		  uint64_t txn_to, const char *to)
{
	pthread_mutex_lock(&e->mu);
	etxn *tf = find_txn(e, txn_from), *tt = find_txn(e, txn_to);
	int rc = tf && tt ? 0 : -ENOENT;
	bool whole = !rc && tf == tt && !strcmp(from, tf->root);
	bool announce_new = false;
	if (whole) {
		etxn probe = *tf;
		probe.root = (char *)to;
		announce_new = tf->kind == T_DIR && eng_root_final(e, &probe);
	}
	pthread_mutex_unlock(&e->mu);
	/* the new name's marker first: the moved transaction is hidden there
	 * before anything of it can appear */
	if (announce_new)
		rc = announce(e, to, txn_from);
	pthread_mutex_lock(&e->mu);
	tf = find_txn(e, txn_from);
	tt = find_txn(e, txn_to);
	if (!rc && (!tf || !tt))
		rc = -ENOENT;
	if (!rc)
		rc = jr_begin(e->j);
	if (!rc) {
		if (whole) {
			bool was_parked = eng_parked(e, tf);
			retire_root(e, tf);
			char *nr = strdup(to);
			move_entries(e, tf, from, tf, to);
			free(tf->root);
			tf->root = nr;
			tf->has_marker = announce_new;
			jr_exec(e->j, NULL, NULL,
				"UPDATE txns SET root = ? WHERE id = ?", "ti",
				to, tf->id);
			if (was_parked && !eng_parked(e, tf) &&
			    requeue(e, tf) < 0)
				log_error("commit: %s keeps its place in the "
					  "queue (journal error)",
					  tf->root);
		} else {
			move_entries(e, tf, from, tt, to);
		}
		rc = jr_commit(e->j);
	}
	if (!rc)
		eng_sched_all(e);
	pthread_mutex_unlock(&e->mu);
	return rc;
}

int eng_txn_seal(eng *e, uint64_t txn)
{
	pthread_mutex_lock(&e->mu);
	etxn *t = find_txn(e, txn);
	int rc = t ? 0 : -ENOENT;
	if (t && t->state == TS_OPEN) {
		rc = jr_exec(e->j, NULL, NULL,
			     "UPDATE txns SET state = 1 WHERE id = ?", "i",
			     t->id);
		if (!rc)
			t->state = TS_SEALED;
		eng_sched_all(e);
	}
	pthread_mutex_unlock(&e->mu);
	return rc;
}

int eng_txn_abort(eng *e, uint64_t txn)
{
	pthread_mutex_lock(&e->mu);
	etxn *t = find_txn(e, txn);
	int rc = t ? jr_exec(e->j, NULL, NULL,
			     "UPDATE txns SET state = 2 WHERE id = ?", "i",
			     t->id)
		   : -ENOENT;
	if (!rc) {
		t->state = TS_ABORTED;
		for (efile *f = t->files; f; f = f->next) {
			f->gen++;
		}
		eng_sched_all(e);
	}
	pthread_mutex_unlock(&e->mu);
	return rc;
}

/* ---- remote namespace --------------------------------------------------- */

static int remote_step(eng *e, enum tkind k, const char *from, const char *to,
		       bool is_dir, const char *mroot)
{
	pthread_mutex_lock(&e->mu);
	int rc = jr_exec(e->j, NULL, NULL,
			 "INSERT INTO txns(kind, root, dest, is_dir, state, "
			 "manifest_root) VALUES(?, ?, ?, ?, 1, ?)",
			 "ittit", (int64_t)k, from, to, (int64_t)is_dir, mroot);
	if (!rc && !txn_new(e, jr_last_id(e->j), k, from, to, is_dir,
			    TS_SEALED, mroot))
		rc = -ENOMEM;
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
	return rc;
}

int eng_remote_delete(eng *e, const char *path, bool is_dir)
{
	return remote_step(e, T_RDEL, path, NULL, is_dir, NULL);
}

int eng_remote_rename(eng *e, const char *from, const char *to, bool is_dir,
		      const char *manifest_root)
{
	return remote_step(e, T_RREN, from, to, is_dir, manifest_root);
}

/* ---- waiting ------------------------------------------------------------ */

/* The error that keeps t from ever becoming visible, or 0. */
static int blocked_err(eng *e, const etxn *t)
{
	const etxn *x = t->failed ? t : eng_blocker(e, t);
	return x ? -(x->err ? x->err : EIO) : 0;
}

static efile *latest_file(eng *e, const char *path)
{
	efile *found = NULL;
	for (etxn *t = e->txns; t; t = t->next)
		if (!t->done && t->state != TS_ABORTED)
			for (efile *f = t->files; f; f = f->next)
				if (!strcmp(f->path, path))
					found = f;
	return found;
}

int eng_wait_file(eng *e, const char *path)
{
	pthread_mutex_lock(&e->mu);
	int rc = 0;
	for (;;) {
		efile *f = latest_file(e, path);
		if (!f || f->state == F_STORED)
			break;
		if (!eng_root_final(e, f->t) ||
		    (f->t->state != TS_SEALED &&
		     proto_has_temp(&e->pats, f->path)))
			break; /* journaled locally; uploads after a move */
		if ((rc = blocked_err(e, f->t)) != 0 || e->stopping) {
			rc = rc ? rc : -EINTR;
			break;
		}
		if (f->failed) {
			rc = -(f->t->err ? f->t->err : EIO);
			break;
		}
		if (f->t->kind == T_FILE && f->state == F_PARTS)
			break; /* stored as parts; visible at its turn */
		if (!f->urgent) { /* not held any more */
			f->urgent = true;
			eng_sched_file(e, f);
		}
		if (f->t->kind == T_FILE && !f->want_durable) {
			f->want_durable = true;
			eng_sched_file(e, f);
		}
		eng_sleep(e, 1);
	}
	pthread_mutex_unlock(&e->mu);
	return rc;
}

int eng_wait_txn(eng *e, uint64_t txn)
{
	pthread_mutex_lock(&e->mu);
	int rc = 0;
	etxn *t;
	while ((t = find_txn(e, txn)) != NULL) {
		if (t->state == TS_ABORTED || !eng_root_final(e, t))
			break;
		if ((rc = blocked_err(e, t)) != 0)
			break;
		if (e->stopping) {
			rc = -EINTR;
			break;
		}
		eng_sleep(e, 1);
	}
	pthread_mutex_unlock(&e->mu);
	return rc;
}

static void seal_all(eng *e, int64_t upto)
{
	bool any = false;
	for (etxn *t = e->txns; t; t = t->next) {
		if (upto && t->seq > upto)
			break;
		if (t->state == TS_OPEN && !t->done) {
			t->state = TS_SEALED;
			jr_exec(e->j, NULL, NULL,
				"UPDATE txns SET state = 1 WHERE id = ?", "i",
				t->id);
			any = true;
		}
	}
	if (any)
		eng_sched_all(e);
}

int eng_sync(eng *e, void (*progress)(void *arg, uint64_t done,
				      uint64_t total),
	     void *arg)
{
	pthread_mutex_lock(&e->mu);
	int64_t upto = e->txns_tail ? e->txns_tail->seq : 0;
	seal_all(e, upto);
	uint64_t done, total;
	int rc = 0;
	while (upto && !settled(e, upto, &done, &total)) {
		if (e->stopping) {
			rc = -EINTR;
			break;
		}
		if (progress) {
			pthread_mutex_unlock(&e->mu);
			progress(arg, done, total);
			pthread_mutex_lock(&e->mu);
		}
		eng_sleep(e, 1);
	}
	for (etxn *t = e->txns; !rc && t && t->seq <= upto; t = t->next)
		if (!t->done && !eng_parked(e, t) && t->state != TS_ABORTED)
			rc = blocked_err(e, t);
	pthread_mutex_unlock(&e->mu);
	return rc;
}

/* ---- status ------------------------------------------------------------- */

static const char *state_name(eng *e, const etxn *t, bool head)
{
	if (t->failed)
		return "failed";
	switch (t->kind) {
	case T_RDEL:
		return head ? "deleting" : "queued";
	case T_RREN:
		return head ? "renaming" : "queued";
	default:
		break;
	}
	if (t->state == TS_ABORTED)
		return "aborting";
	if (!eng_root_final(e, t))
		return "waiting-for-rename";
	for (efile *f = t->files; f; f = f->next)
		if (f->state != F_STORED && f->state != F_PARTS)
			return t->state == TS_OPEN ? "open" : "uploading";
	if (t->state == TS_OPEN)
		return "open";
	return head ? "committing" : "queued";
}

int eng_status(eng *e, eng_txn_status **v, size_t *n)
{
	pthread_mutex_lock(&e->mu);
	size_t cnt = 0;
	for (etxn *t = e->txns; t; t = t->next)
		cnt++;
	eng_txn_status *out = calloc(cnt ? cnt : 1, sizeof *out);
	if (!out) {
		pthread_mutex_unlock(&e->mu);
		return -ENOMEM;
	}
	size_t i = 0;
	double now = eng_now();
	etxn *next = eng_next_step(e);
	for (etxn *t = e->txns; t; t = t->next, i++) {
		eng_txn_status *s = &out[i];
		s->id = (uint64_t)t->id;
		s->path = strdup(t->root);
		for (efile *f = t->files; f; f = f->next) {
			s->bytes_total += f->size;
			s->bytes_done +=
			    f->state == F_STORED ? f->size : f->bytes_done;
		}
		if (now - t->rate_t0 >= 3) {
			t->rate = (double)(s->bytes_done - t->rate_b0 >
						   s->bytes_done
					       ? 0
					       : s->bytes_done - t->rate_b0) /
				  (now - t->rate_t0);
			t->rate_t0 = now;
			t->rate_b0 = s->bytes_done;
		}
		s->rate = t->rate;
		etxn *b = t->done || t->failed ? NULL : eng_blocker(e, t);
		s->state = b ? "blocked" : state_name(e, t, t == next);
		if (b) {
			buf m = BUF_INIT;
			buf_printf(&m, "waits for step %" PRId64 " (%s), which "
				       "failed: %s",
				   b->id, b->root, b->error ? b->error : "?");
			s->error = buf_steal(&m);
		} else {
			s->error = t->error ? strdup(t->error) : NULL;
		}
	}
	*v = out;
	*n = i;
	pthread_mutex_unlock(&e->mu);
	return 0;
}

static const char *step_what(const etxn *t)
{
	switch (t->kind) {
	case T_RDEL:
		return "delete";
	case T_RREN:
		return "rename";
	default:
		return "commit";
	}
}

char *eng_failed_text(eng *e)
{
	pthread_mutex_lock(&e->mu);
	buf b = BUF_INIT;
	size_t n = 0;
	for (etxn *t = e->txns; t; t = t->next) {
		if (t->done || !t->failed)
			continue;
		size_t held = 0;
		for (etxn *y = t->next; y; y = y->next)
			if (!y->done && !y->failed && eng_blocker(e, y) == t)
				held++;
		buf_printf(&b, "%sstep %" PRId64 ", %s of %s%s%s, failed: %s",
			   n++ ? "; " : "", t->id, step_what(t), t->root,
			   t->dest ? " to " : "", t->dest ? t->dest : "",
			   t->error ? t->error : strerror(t->err ? t->err : EIO));
		if (held)
			buf_printf(&b, " (%zu later step%s wait%s for it)", held,
				   held == 1 ? "" : "s", held == 1 ? "s" : "");
	}
	pthread_mutex_unlock(&e->mu);
	if (!n) {
		buf_free(&b);
		return NULL;
	}
	buf_puts(&b, "; `ckptfs retry MOUNT` tries again, `ckptfs drop MOUNT "
		     "STEP` gives a step up");
	return buf_steal(&b);
}

int eng_step_retry(eng *e, uint64_t id)
{
	pthread_mutex_lock(&e->mu);
	int n = 0;
	for (etxn *t = e->txns; t; t = t->next) {
		if (t->done || !t->failed || (id && (uint64_t)t->id != id))
			continue;
		t->failed = false;
		t->err_logged = 0;
		for (efile *f = t->files; f; f = f->next)
			f->failed = false;
		jr_exec(e->j, NULL, NULL,
			"UPDATE txns SET error = NULL WHERE id = ?", "i", t->id);
		log_info("commit: step %" PRId64 " (%s of %s) tried again",
			 t->id, step_what(t), t->root);
		n++;
	}
	if (n)
		eng_sched_all(e);
	pthread_mutex_unlock(&e->mu);
	return n ? n : -ENOENT;
}

int eng_step_drop(eng *e, uint64_t id, char **what)
{
	pthread_mutex_lock(&e->mu);
	etxn *t = find_txn(e, id);
	int rc = t ? 0 : -ENOENT;
	if (t && what) {
		buf b = BUF_INIT;
		buf_printf(&b, "%s of %s%s%s", step_what(t), t->root,
			   t->dest ? " to " : "", t->dest ? t->dest : "");
		*what = buf_steal(&b);
	}
	if (t && (t->kind == T_RDEL || t->kind == T_RREN)) {
		/* nothing of it is undone: what a half-run rename copied
		 * stays (ckptfs gc removes expired markers) */
		log_warn("commit: step %" PRId64 " (%s of %s) dropped by the "
			 "operator",
			 t->id, step_what(t), t->root);
		jr_txn_delete(e->j, t->id);
		t->done = true;
		eng_free_txn(e, t);
	} else if (t && t->state != TS_ABORTED) {
		/* its uploads, marker and intent manifest are cleaned up by
		 * the visibility thread; it was never visible */
		log_warn("commit: step %" PRId64 " (%s of %s) dropped by the "
			 "operator",
			 t->id, step_what(t), t->root);
		rc = jr_exec(e->j, NULL, NULL,
			     "UPDATE txns SET state = 2 WHERE id = ?", "i",
			     t->id);
		if (!rc) {
			t->state = TS_ABORTED;
			t->failed = false;
			for (efile *f = t->files; f; f = f->next)
				f->gen++;
		}
	}
	eng_sched_all(e);
	pthread_mutex_unlock(&e->mu);
	return rc;
}

void eng_status_free(eng_txn_status *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].path);
		free(v[i].error);
	}
	free(v);
}

void eng_foreach_pending_file(eng *e,
			      void (*fn)(void *arg, uint64_t txn,
					 const char *path,
					 const char *staging_path,
					 uint64_t size, const eng_meta *m),
			      void *arg)
{
	pthread_mutex_lock(&e->mu);
	for (etxn *t = e->txns; t; t = t->next) {
		if (t->done || t->state == TS_ABORTED)
			continue;
		for (efile *f = t->files; f; f = f->next) {
			char *p = eng_staging_path(e, f->sid);
			eng_meta m;
			proto_meta_to(&f->m, &m);
			fn(arg, (uint64_t)t->id, f->path, p, f->size, &m);
			free(p);
		}
	}
	pthread_mutex_unlock(&e->mu);
}

void eng_foreach_pending_txn(eng *e,
			     void (*txn_fn)(void *arg, uint64_t txn,
					    const char *root, bool is_dir,
					    bool sealed),
			     void (*dir_fn)(void *arg, uint64_t txn,
					    const char *path, const eng_meta *m),
			     void *arg)
{
	pthread_mutex_lock(&e->mu);
	for (etxn *t = e->txns; t; t = t->next) {
		if (t->done || t->state == TS_ABORTED ||
		    (t->kind != T_DIR && t->kind != T_FILE))
			continue;
		if (txn_fn)
			txn_fn(arg, (uint64_t)t->id, t->root, t->is_dir,
			       t->state == TS_SEALED);
		for (edir *d = t->dirs; dir_fn && d; d = d->next) {
			eng_meta m;
			proto_meta_to(&d->m, &m);
			dir_fn(arg, (uint64_t)t->id, d->path, &m);
		}
	}
	pthread_mutex_unlock(&e->mu);
}

void eng_foreach_pending_removal(eng *e,
				 void (*fn)(void *arg, const char *path,
					    bool is_dir),
				 void *arg)
{
	pthread_mutex_lock(&e->mu);
	for (etxn *t = e->txns; t; t = t->next)
		if (!t->done && (t->kind == T_RDEL || t->kind == T_RREN))
			fn(arg, t->root, t->is_dir);
	pthread_mutex_unlock(&e->mu);
}
