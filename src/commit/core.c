/*
 * eng core: the engine's in-memory model and the primitives every other
 * file of the engine uses (commit/internal.h has the map): clocks and
 * sleeping on the condition variable, staging paths, transactions and
 * files (find, create, link, free), the per-key claims, the job FIFO the
 * upload workers take from (pushes only; transfer.c pops), and the error
 * rule (transient or for good, and when transient ones have lasted long
 * enough to set a step aside) with its journal row and garbage rows.
 *
 * The bottom of the engine: it calls only the journal (journal.c), the
 * metadata conversion (meta.c) and the layers below commit, never another
 * engine file, so every file above may call it without a cycle.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commit/internal.h"
#include "http/loop.h"
#include "s3/client.h"
#include "util/clock.h"
#include "util/log.h"

double eng_now(void)
{
	return clock_mono();
}

struct metrics *eng_metrics(eng *e)
{
	return e->s3 ? http_loop_metrics(s3_client_loop(e->s3)) : NULL;
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
	CKPTFS_ASSERT_HELD(&e->mu);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	double t = (double)ts.tv_sec + ts.tv_nsec / 1e9 + seconds;
	ts.tv_sec = (time_t)t;
	ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
	if (!e->stopping)
		ckpt_cond_timedwait(&e->cv, &e->mu, &ts);
}

/* ---- the in-memory model ------------------------------------------------ */

etxn *eng_find_txn(eng *e, uint64_t id)
{
	CKPTFS_ASSERT_HELD(&e->mu);
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
	CKPTFS_ASSERT_HELD(&e->mu);
	(void)e;
	if (--f->refs == 0)
		file_free(f);
}

void eng_free_txn(eng *e, etxn *t)
{
	CKPTFS_ASSERT_HELD(&e->mu);
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
	free(t->poison);
	free(t);
}

etxn *eng_txn_new(eng *e, int64_t id, enum tkind k, const char *root,
		     const char *dest, bool is_dir, enum tstate st,
		     const char *mroot)
{
	CKPTFS_ASSERT_HELD(&e->mu);
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
	t->created_at = t->rate_t0;
	if (st == TS_SEALED)
		t->sealed_at = t->created_at;
	if (e->txns_tail)
		e->txns_tail->next = t;
	else
		e->txns = t;
	e->txns_tail = t;
	return t;
}

efile *eng_find_file(etxn *t, const char *path)
{
	for (efile *f = t->files; f; f = f->next)
		if (!strcmp(f->path, path))
			return f;
	return NULL;
}

void eng_unlink_file(etxn *t, efile *f)
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

void eng_link_file(etxn *t, efile *f)
{
	f->t = t;
	f->next = t->files;
	t->files = f;
}

bool eng_root_final(const eng *e, const etxn *t)
{
	return !proto_has_temp(&e->pats, t->root);
}

/* ---- key claims --------------------------------------------------------- */

void eng_key_claim(eng *e, struct eng_busy *b, const char *key)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	for (;;) {
		bool busy = false;
		for (struct eng_busy *o = e->busy; o && !busy; o = o->next)
			busy = !strcmp(o->key, key);
		if (!busy)
			break;
		ckpt_cond_wait(&e->cv, &e->mu);
	}
	b->key = key;
	b->next = e->busy;
	e->busy = b;
}

void eng_key_release(eng *e, struct eng_busy *b)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	for (struct eng_busy **pp = &e->busy; *pp; pp = &(*pp)->next)
		if (*pp == b) {
			*pp = b->next;
			break;
		}
	pthread_cond_broadcast(&e->cv);
}

/* ---- the job FIFO ------------------------------------------------------- */

/* Appends j to the FIFO and wakes the workers.  mu held. */
static void enqueue(eng *e, job *j)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	if (e->jobs_tail)
		e->jobs_tail->next = j;
	else
		e->jobs = j;
	e->jobs_tail = j;
	pthread_cond_broadcast(&e->cv);
}

void eng_push_job(eng *e, jkind k, efile *f, unsigned part)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	job *j = calloc(1, sizeof *j);
	if (!j) {
		log_error("commit: out of memory queueing an upload");
		return;
	}
	/* one upload in flight per file (commit/internal.h): a PUT, a create
	 * or a completion is queued only while no job of f is queued or
	 * running, a part only while it is not on its way already */
	CKPTFS_ASSERT(k == J_PART ? f->pst && f->pst[part] == P_TODO
				  : f->jobs == 0);
	j->k = k;
	j->f = f;
	j->part = part;
	j->gen = f->gen;
	f->refs++;
	f->jobs++;
	if (k == J_PART)
		f->pst[part] = P_BUSY;
	enqueue(e, j);
}

void eng_push_abort(eng *e, const char *key, const char *upload_id)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	job *j = calloc(1, sizeof *j);
	if (!j || !(j->key = strdup(key)) ||
	    !(j->upload_id = strdup(upload_id))) {
		if (j)
			free(j->key);
		free(j);
		return;
	}
	j->k = J_ABORT;
	enqueue(e, j);
}

void eng_free_parts(efile *f)
{
	for (unsigned i = 0; f->pseg && i < f->n_parts; i++)
		free(f->pseg[i]);
	free(f->pseg);
	free(f->pst);
	free(f->petag);
	free(f->pcrc);
	f->pseg = NULL;
	f->pst = NULL;
	f->petag = NULL;
	f->pcrc = NULL;
}

/* ---- errors and garbage ------------------------------------------------- */

bool eng_err_transient(const s3_err *x)
{
	/* the one rule of s3/retry.c (retry_classify_err), local errors
	 * included: bad metadata or a short staging file are final */
	return s3_err_transient(x);
}

void eng_txn_error(eng *e, etxn *t, const s3_err *x, bool permanent,
		   double began)
{
	CKPTFS_ASSERT_HELD(&e->mu);
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
			jr_txn_set_error(e->j, t->id, x->msg);
		}
		pthread_cond_broadcast(&e->cv);
		return;
	}
	/* the streak began with the attempt: a request the client retried
	 * within its own budget was failing all that time */
	if (t && t->err_since == 0)
		t->err_since = began > 0 && began < now ? began : now;
	double *last = t ? &t->err_logged : &e->last_err_log;
	if (now - *last >= 60 || *last == 0) {
		*last = now;
		log_warn("%s: %s (retrying until it works%s)",
			 t ? t->root : "commit", x->msg,
			 t && eng_retrying(e, t, now)
			     ? "; set aside meanwhile: later steps that do not "
			       "depend on it go on"
			     : "");
	}
}

void eng_txn_progress(eng *e, etxn *t)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	(void)e;
	if (t) {
		t->err_since = 0;
		t->attempt = 0;
		t->retry_at = 0;
	}
}

bool eng_set_aside(const eng *e, const etxn *t, double now)
{
	return t->failed || t->poison || eng_retrying(e, t, now);
}

bool eng_retrying(const eng *e, const etxn *t, double now)
{
	return !t->failed && t->err_since > 0 &&
	       now - t->err_since >= e->o.transient_limit_s;
}

void eng_garbage(eng *e, etxn *t, const char *key)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	jr_garbage_add(e->j, t->id, key);
}
