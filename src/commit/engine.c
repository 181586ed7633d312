/*
 * eng: the commit engine's life cycle (engine.h): eng_open loads the
 * journal into the in-memory model (the rows decoded by journal.c, the
 * resume rules of doc/commit.md), sweeps unreferenced staging files and
 * starts the threads; eng_close waits for what can still land and stops
 * them; eng_wait_file, eng_wait_txn and eng_sync wait on the queue.  The
 * facts themselves are facts.c; commit/internal.h maps the other files.
 *
 * Threads (design notes in doc/commit.md, "Engine threads"):
 *   - `conns` upload workers doing blocking S3 calls (transfer.c): single
 *     PUTs, CreateMultipartUpload, parts, completions;
 *   - one visibility thread running the ordered queue (visible.c, its
 *     steps in steps.c): commits, single-file PUTs/completions, remote
 *     deletes and renames, aborts;
 *   - one renewal thread re-PUTting pending markers every lease/3
 *     (marker.c);
 *   - one index thread writing the manifest index of directories many
 *     writers committed (mindex.c).
 * Every fact is journaled under the mutex before the call returns; the
 * in-memory model (core.c) is rebuilt from the journal by eng_open.
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

/* ---- journal load ------------------------------------------------------- */

/* The journal's rows (journal.c decodes them) into the model. */

static int load_txn(void *arg, const jr_txn_row *r)
{
	eng *e = arg;
	etxn *t = eng_txn_new(e, r->id, (enum tkind)r->kind, r->root, r->dest,
			      r->is_dir, (enum tstate)r->state, r->mroot);
	if (!t)
		return -ENOMEM;
	t->seq = r->seq;
	eng_poison_load(e, t);
	t->has_marker = t->kind == T_DIR && eng_root_final(e, t) &&
			t->state != TS_ABORTED;
	t->check_committed = t->has_marker;
	return 0;
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

static int load_part(void *arg, const jr_part_row *r)
{
	efile *f = arg;
	int64_t n = r->n;
	if (n < 0 || n >= f->n_parts || f->pst[n] == P_DONE)
		return 0;
	f->pst[n] = P_DONE;
	snprintf(f->petag[n], S3_ETAG_MAX, "%s", r->etag);
	f->pcrc[n] = r->crc;
	/* NULL when journaled by a version without block checksums: the
	 * manifest then records none for the file */
	f->pseg[n] = r->segs ? strdup(r->segs) : NULL;
	f->parts_done++;
	f->bytes_done += r->len;
	return 0;
}

static int load_file(void *arg, const jr_file_row *r)
{
	eng *e = arg;
	etxn *t = eng_find_txn(e, (uint64_t)r->txn);
	if (!t)
		return 0;
	efile *f = calloc(1, sizeof *f);
	if (!f)
		return -ENOMEM;
	f->id = r->id;
	f->path = strdup(r->path);
	f->sid = r->sid;
	f->size = r->size;
	f->m.mode = r->mode;
	f->m.uid = r->uid;
	f->m.gid = r->gid;
	f->m.mtime_ns = r->mtime_ns;
	f->m.rdev = r->rdev;
	if (r->xattrs_len && (f->m.xattrs = malloc(r->xattrs_len))) {
		memcpy(f->m.xattrs, r->xattrs, r->xattrs_len);
		f->m.xattrs_len = r->xattrs_len;
	}
	f->m.symlink = r->symlink ? strdup(r->symlink) : NULL;
	f->state = (enum fstate)r->state;
	f->key = r->key ? strdup(r->key) : NULL;
	f->upload_id = r->upload_id ? strdup(r->upload_id) : NULL;
	f->part_size = r->part_size;
	if (r->etag)
		snprintf(f->etag, sizeof f->etag, "%s", r->etag);
	f->crc = r->crc;
	f->blocks = r->blocks ? strdup(r->blocks) : NULL;
	f->refs = 1;
	eng_link_file(t, f);
	if (f->state == F_STORED) {
		f->bytes_done = f->size;
		if (t->kind == T_DIR)
			t->check_stored = true;
		return 0;
	}
	if (f->upload_id && f->part_size) {
		f->n_parts = (unsigned)s3_part_count(f->size, f->part_size);
		if (alloc_parts(f) < 0)
			return -ENOMEM;
		jr_load_parts(e->j, f->id, load_part, f);
	}
	return 0;
}

static int load_dir(void *arg, const jr_dir_row *r)
{
	eng *e = arg;
	etxn *t = eng_find_txn(e, (uint64_t)r->txn);
	edir *d = t ? calloc(1, sizeof *d) : NULL;
	if (!d)
		return t ? -ENOMEM : 0;
	d->path = strdup(r->path);
	d->m.mode = r->mode;
	d->m.uid = r->uid;
	d->m.gid = r->gid;
	d->m.mtime_ns = r->mtime_ns;
	if (r->xattrs_len && (d->m.xattrs = malloc(r->xattrs_len))) {
		memcpy(d->m.xattrs, r->xattrs, r->xattrs_len);
		d->m.xattrs_len = r->xattrs_len;
	}
	d->next = t->dirs;
	t->dirs = d;
	return 0;
}

static int load_journal(eng *e)
{
	jr_loader l = {load_txn, load_file, load_dir, e};
	ckpt_lock(&e->mu); /* no other thread yet: the model's own rule */
	int rc = jr_load(e->j, &l);
	ckpt_unlock(&e->mu);
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
	if (!(o->transient_limit_s > 0))
		o->transient_limit_s = ENG_DEFAULT_TRANSIENT_LIMIT_S;
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
	if (pthread_create(&e->ix_thr, NULL, eng_index_main, e))
		return -EAGAIN;
	e->ix_started = true;
	return 0;
}

static void stop_threads(eng *e)
{
	ckpt_lock(&e->mu);
	e->stopping = true;
	pthread_cond_broadcast(&e->cv);
	ckpt_unlock(&e->mu);
	for (unsigned i = 0; i < e->n_workers; i++)
		pthread_join(e->workers[i], NULL);
	if (e->vis_started)
		pthread_join(e->vis_thr, NULL);
	if (e->renew_started)
		pthread_join(e->renew_thr, NULL);
	if (e->ix_started)
		pthread_join(e->ix_thr, NULL);
	e->n_workers = 0;
	e->vis_started = e->renew_started = e->ix_started = false;
}

static void eng_free(eng *e)
{
	for (size_t i = 0; i < e->ix_n; i++) /* index thread never ran */
		free(e->ix_q[i]);
	free(e->ix_q);
	ckpt_lock(&e->mu); /* no other thread any more: the model's rule */
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
	ckpt_unlock(&e->mu);
	jr_close(e->j);
	proto_pats_free(&e->pats);
	ckpt_mutex_destroy(&e->mu);
	ckpt_mutex_destroy(&e->marker_mu);
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
	ckpt_mutex_init(&e->mu);
	ckpt_mutex_init(&e->marker_mu);
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
	eng_resume_markers(e); /* before any upload is scheduled */
	ckpt_lock(&e->mu);
	eng_sched_all(e);
	ckpt_unlock(&e->mu);
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

void eng_close(eng *e, bool wait)
{
	if (!e)
		return;
	if (wait) {
		ckpt_lock(&e->mu);
		eng_seal_all(e, 0);
		double last = eng_now();
		uint64_t done, total;
		while (!eng_settled(e, 0, &done, &total)) {
			if (eng_now() - last >= 5) {
				last = eng_now();
				log_info("commit: waiting for pending uploads: "
					 "%" PRIu64 " of %" PRIu64 " MiB",
					 done >> 20, total >> 20);
			}
			eng_sleep(e, 1);
		}
		eng_drop_parked(e);
		ckpt_unlock(&e->mu);
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

/* ---- waiting ------------------------------------------------------------ */

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
	ckpt_lock(&e->mu);
	int rc = 0;
	for (;;) {
		efile *f = latest_file(e, path);
		if (!f || f->state == F_STORED)
			break;
		if (!eng_root_final(e, f->t) ||
		    (f->t->state != TS_SEALED &&
		     proto_has_temp(&e->pats, f->path)))
			break; /* journaled locally; uploads after a move */
		if ((rc = eng_blocked_err(e, f->t)) != 0 || e->stopping) {
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
	ckpt_unlock(&e->mu);
	return rc;
}

int eng_wait_txn(eng *e, uint64_t txn)
{
	ckpt_lock(&e->mu);
	int rc = 0;
	etxn *t;
	while ((t = eng_find_txn(e, txn)) != NULL) {
		if (t->state == TS_ABORTED || !eng_root_final(e, t))
			break;
		if ((rc = eng_blocked_err(e, t)) != 0)
			break;
		if (e->stopping) {
			rc = -EINTR;
			break;
		}
		eng_sleep(e, 1);
	}
	ckpt_unlock(&e->mu);
	return rc;
}

int eng_sync(eng *e, void (*progress)(void *arg, uint64_t done,
				      uint64_t total),
	     void *arg)
{
	ckpt_lock(&e->mu);
	int64_t upto = e->txns_tail ? e->txns_tail->seq : 0;
	eng_seal_all(e, upto);
	uint64_t done, total;
	int rc = 0;
	while (upto && !eng_settled(e, upto, &done, &total)) {
		if (e->stopping) {
			rc = -EINTR;
			break;
		}
		if (progress) {
			ckpt_unlock(&e->mu);
			progress(arg, done, total);
			ckpt_lock(&e->mu);
		}
		eng_sleep(e, 1);
	}
	for (etxn *t = e->txns; !rc && t && t->seq <= upto; t = t->next)
		if (!t->done && !eng_parked(e, t) && t->state != TS_ABORTED)
			rc = eng_blocked_err(e, t);
	ckpt_unlock(&e->mu);
	return rc;
}
