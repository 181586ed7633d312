/*
 * eng visible: the writer's publish queue, one thread running the steps in
 * queue order (COALESCE(seq, id), order.c): the head waits until it is
 * ready (sealed, final name, every upload stored), then its step runs
 * (steps.c); nothing behind it becomes visible before it.  Uploads of
 * later transactions run meanwhile (transfer.c).  A step is idempotent
 * (PUTs and DELETEs of fixed keys), so after a transient failure or a
 * crash it simply runs again from its start, after the retry policy's
 * backoff; a permanent failure fails the step (order.c holds back what
 * depends on it), and so do transient ones lasting past transient_limit,
 * except that the step is still tried again at its retry time.  Aborted transactions are cleaned out of order: they
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

/* After a step: the journal forgets it, staging files go to the read
 * cache (or away), waiting uploads may start.  mu */
static void finish(eng *e, etxn *t, eng_snap *sn, bool adopt)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	/* staging files go only once their transaction is visible or
	 * aborted (commit/internal.h): never an open one's */
	CKPTFS_ASSERT(t->state != TS_OPEN);
	jr_txn_delete(e->j, t->id);
	t->done = true;
	bool rewant = (t->kind == T_DIR || t->kind == T_RDEL ||
		       t->kind == T_RREN) &&
		      (eng_marker_wanted(e, t->root, t) ||
		       (t->kind == T_RREN && t->dest &&
			eng_marker_wanted(e, t->dest, t)));
	eng_free_txn(e, t);
	ckpt_unlock(&e->mu);
	if (rewant) { /* a later transaction of the same name needs it back */
		s3_err x;
		if (eng_put_marker(e, sn->root, &x) < 0 ||
		    (sn->kind == T_RREN && sn->dest &&
		     eng_put_marker(e, sn->dest, &x) < 0))
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
	ckpt_lock(&e->mu);
	eng_sched_all(e);
	pthread_cond_broadcast(&e->cv);
}

/* Aborted: uploaded objects, open uploads, marker and intent go. */
static int clean_aborted(eng *e, etxn *t, eng_snap *sn, s3_err *x)
{
	CKPTFS_ASSERT_HELD(&e->mu);
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
	ckpt_unlock(&e->mu);
	int rc = keys ? (n ? eng_delete_keys(e, keys, n, x) : 0) : -1;
	for (size_t i = 0; i < n; i++)
		free(keys[i]);
	free(keys);
	ckpt_lock(&e->mu);
	return rc;
}

/* The first aborted transaction to clean up: not failed for good, and
 * not set aside by transient errors before its retry time (so a clean-up
 * the store keeps refusing does not hold the queue for ever either). */
static etxn *next_aborted(eng *e)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	double now = eng_now();
	for (etxn *t = e->txns; t; t = t->next)
		if (!t->done && t->state == TS_ABORTED && !t->failed &&
		    eng_files_idle(t) &&
		    (!eng_retrying(e, t, now) || t->retry_at <= now))
			return t;
	return NULL;
}

/*
 * A transient failure of t's step (began at eng_now() `began`): it runs
 * again after the policy's backoff (s3/retry.h: at most retry_max_delay,
 * longer after throttling).  Until transient_limit the queue waits with
 * it, as nothing behind it may pass it; set aside, it is tried again at
 * retry_at while the steps that do not depend on it go on.  mu
 */
static void retry_later(eng *e, etxn *t, const s3_err *x, double began)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	eng_txn_error(e, t, x, false, began);
	t->attempt++;
	metrics_commit_retry(eng_metrics(e));
	double delay = s3_client_retry_delay_ms(e->s3, t->attempt, x) / 1000.0;
	t->retry_at = eng_now() + delay;
	if (!eng_set_aside(e, t, eng_now()))
		eng_sleep(e, delay);
}

void *eng_vis_main(void *arg)
{
	eng *e = arg;
	ckpt_lock(&e->mu);
	while (!e->stopping) {
		etxn *t = next_aborted(e);
		bool abort = t != NULL;
		if (!t) {
			/* the first step whose turn has come: a set-aside one
			 * holds back only what depends on it (and takes its
			 * turn again at its retry time), a temp-named root
			 * waits aside for its rename */
			t = eng_next_step(e);
			if (!t || !eng_step_ready(e, t)) {
				eng_sleep(e, 1);
				continue;
			}
		}
		eng_snap sn;
		eng_snap_take(e, t, &sn);
		s3_err x = {0};
		int64_t id = t->id;
		double began = eng_now();
		int rc = abort		   ? clean_aborted(e, t, &sn, &x)
			 : t->kind == T_RREN ? eng_run_rename(e, t, &sn, &x)
					     : eng_run_step(e, t, &sn, &x);
		/* t may have been aborted or changed while mu was released */
		etxn *now = eng_find_txn(e, (uint64_t)id);
		if (rc == 0 && now) {
			free(now->error);
			now->error = NULL;
			if (!abort && (now->kind == T_DIR || now->kind == T_FILE))
				metrics_commit(eng_metrics(e),
					       eng_now() - now->sealed_at);
			finish(e, now, &sn, !abort);
		} else if (rc == -2 || !now) {
			/* changed meanwhile: look again */
		} else if (eng_err_transient(&x)) {
			retry_later(e, now, &x, began);
		} else {
			eng_txn_error(e, now, &x, true, began);
		}
		eng_snap_free(&sn);
	}
	ckpt_unlock(&e->mu);
	return NULL;
}
