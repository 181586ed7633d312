/*
 * eng visible: the writer's publish queue, one thread running the steps in
 * queue order (COALESCE(seq, id), order.c): the head waits until it is
 * ready (sealed, final name, every upload stored), then its step runs
 * (steps.c); nothing behind it becomes visible before it.  Uploads of
 * later transactions run meanwhile (transfer.c).  A step is idempotent
 * (PUTs and DELETEs of fixed keys), so after a transient failure or a
 * crash it simply runs again from its start, after the retry policy's
 * backoff; a permanent failure fails the step (order.c holds back what
 * depends on it).  Aborted transactions are cleaned out of order: they
 * never become visible.  A finished step leaves the journal and hands its
 * staging files to the read cache.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commit/internal.h"
#include "util/log.h"
#include "util/metrics.h"

static bool files_idle(const etxn *t)
{
	for (const efile *f = t->files; f; f = f->next)
		if (f->jobs)
			return false;
	return true;
}

static bool ready(eng *e, etxn *t)
{
	if (t->kind == T_RDEL || t->kind == T_RREN)
		return true;
	if (t->state != TS_SEALED || !eng_root_final(e, t) || !files_idle(t))
		return false;
	for (efile *f = t->files; f; f = f->next) {
		if (f->failed)
			return false;
		if (t->kind == T_DIR && f->state != F_STORED)
			return false;
		if (t->kind == T_FILE && f->state == F_STAGED &&
		    (f->size >= e->o.multipart_min || f->upload_id ||
		     f->want_durable))
			return false; /* parts still to upload */
	}
	return true;
}

/* After a step: the journal forgets it, staging files go to the read
 * cache (or away), waiting uploads may start.  mu */
static void finish(eng *e, etxn *t, eng_snap *sn, bool adopt)
{
	jr_txn_delete(e->j, t->id);
	t->done = true;
	bool rewant = (t->kind == T_DIR || t->kind == T_RDEL ||
		       t->kind == T_RREN) &&
		      (eng_marker_wanted(e, t->root, t) ||
		       (t->dest && eng_marker_wanted(e, t->dest, t)));
	eng_free_txn(e, t);
	pthread_mutex_unlock(&e->mu);
	if (rewant) { /* a later transaction of the same name needs it back */
		s3_err x;
		if (eng_put_marker(e, sn->root, &x) < 0 ||
		    (sn->dest && eng_put_marker(e, sn->dest, &x) < 0))
			log_warn("commit: re-PUT of a marker: %s (the renewal "
				 "retries)",
				 x.msg);
	}
	for (size_t i = 0; i < sn->nf; i++) {
		char *p = eng_staging_path(e, sn->f[i].sid);
		bool adopted = false;
		if (adopt && e->rc && sn->f[i].key && sn->f[i].etag[0] &&
		    sn->kind != T_RDEL && !sn->f[i].m.symlink)
			adopted = cache_adopt(e->rc, sn->f[i].key, sn->f[i].etag,
					      p) == 0;
		if (!adopted)
			unlink(p);
		free(p);
	}
	pthread_mutex_lock(&e->mu);
	eng_sched_all(e);
	pthread_cond_broadcast(&e->cv);
}

/* Aborted: uploaded objects, open uploads, marker and intent go. */
static int clean_aborted(eng *e, etxn *t, eng_snap *sn, s3_err *x)
{
	char **keys = calloc(sn->nf + sn->ng + 3, sizeof *keys);
	size_t n = 0;
	for (efile *f = t->files; keys && f; f = f->next) {
		if (f->upload_id && f->key)
			eng_push_abort(e, f->key, f->upload_id);
		if (f->key && f->state == F_STORED)
			keys[n++] = strdup(f->key);
	}
	for (size_t i = 0; keys && i < sn->ng; i++)
		keys[n++] = strdup(sn->garbage[i]);
	bool own = t->kind == T_DIR && eng_root_final(e, t) &&
		   !eng_marker_wanted(e, t->root, t);
	if (keys && own) {
		keys[n++] = proto_manifest_key(e->prefix, t->root, e->writer);
		keys[n++] = proto_marker_key(e->prefix, t->root, e->writer,
					     e->o.lease_s);
	}
	pthread_mutex_unlock(&e->mu);
	int rc = keys ? (n ? eng_delete_keys(e, keys, n, x) : 0) : -1;
	for (size_t i = 0; i < n; i++)
		free(keys[i]);
	free(keys);
	pthread_mutex_lock(&e->mu);
	return rc;
}

static etxn *next_aborted(eng *e)
{
	for (etxn *t = e->txns; t; t = t->next)
		if (!t->done && t->state == TS_ABORTED && !t->failed &&
		    files_idle(t))
			return t;
	return NULL;
}

void *eng_vis_main(void *arg)
{
	eng *e = arg;
	pthread_mutex_lock(&e->mu);
	unsigned attempt = 0;
	while (!e->stopping) {
		etxn *t = next_aborted(e);
		bool abort = t != NULL;
		if (!t) {
			/* the first step whose turn has come: a failed one
			 * holds back only what depends on it, a temp-named
			 * root waits aside for its rename */
			t = eng_next_step(e);
			if (!t || !ready(e, t)) {
				eng_sleep(e, 1);
				continue;
			}
		}
		eng_snap sn;
		eng_snap_take(e, t, &sn);
		s3_err x = {0};
		int64_t id = t->id;
		int rc = abort ? clean_aborted(e, t, &sn, &x)
			       : eng_run_step(e, t, &sn, &x);
		/* t may have been aborted or changed while mu was released */
		etxn *now = eng_find_txn(e, (uint64_t)id);
		if (rc == 0 && now) {
			attempt = 0;
			free(now->error);
			now->error = NULL;
			if (!abort && (now->kind == T_DIR || now->kind == T_FILE))
				metrics_commit(eng_metrics(e),
					       eng_now() - now->sealed_at);
			finish(e, now, &sn, !abort);
		} else if (rc == -2 || !now) {
			/* changed meanwhile: look again */
		} else if (eng_err_transient(&x)) {
			eng_txn_error(e, now, &x, false);
			attempt++;
			metrics_commit_retry(eng_metrics(e));
			/* the policy's backoff (s3/retry.h): at most
			 * retry_max_delay, longer after throttling */
			eng_sleep(e, s3_client_retry_delay_ms(e->s3, attempt, &x) /
					 1000.0);
		} else {
			eng_txn_error(e, now, &x, true);
		}
		eng_snap_free(&sn);
	}
	pthread_mutex_unlock(&e->mu);
	return NULL;
}
