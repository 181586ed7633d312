/*
 * eng order: the rules of the visibility queue (doc/commit.md "Ordering"),
 * on the live queue under mu.
 *
 *  - parked: a transaction whose root has a temp name waits aside, in no
 *    order, until a move gives it a final name (eng_parked); it then
 *    takes a fresh place at the tail (eng_requeue);
 *  - a step set aside (failed for good, or failing with transient errors
 *    for longer than transient_limit: eng_set_aside) holds back the later
 *    steps that depend on it, transitively (eng_blocker, eng_next_step:
 *    one scan of the queue), and nothing else; one set aside by transient
 *    errors takes its turn again at its retry time (eng_next_step), and
 *    its success ends the holding back in queue order;
 *  - an upload waits for every earlier unfinished step touching an
 *    overlapping path (eng_order_waits, stated on plain paths and unit
 *    tested through eng_order_blocked; eng_upload_blocked applies it to
 *    the live queue), for its root's final name, and for the upload hold;
 *    eng_sched_file turns an uploadable file into upload jobs;
 *  - eng_settled says when nothing up to a queue position can make more
 *    progress (sync, unmount); eng_seal_all and eng_drop_parked are the
 *    unmount's and sync's bulk changes.
 *
 * Calls core.c and the journal only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commit/internal.h"
#include "util/log.h"

/* ---- the rule on plain paths -------------------------------------------- */

bool eng_order_waits(const eng_order_step *s, const char *path)
{
	if (s->done)
		return false;
	return (s->a && proto_overlap(s->a, path)) ||
	       (s->b && proto_overlap(s->b, path));
}

bool eng_order_blocked(const eng_order_step *q, size_t n, size_t self,
		       const char *path)
{
	for (size_t i = 0; i < self && i < n; i++)
		if (eng_order_waits(&q[i], path))
			return true;
	return false;
}

/* ---- parked and failed steps --------------------------------------------- */

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

/* The set-aside step at the root of what holds t back among the n steps
 * held back so far (stuck, each with its cause), or NULL. */
static etxn *held_by(const etxn *t, etxn **stuck, etxn **cause, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (eng_depends(t, stuck[i]))
			return cause[i];
	return NULL;
}

/* Whether t, set aside by transient errors, may be tried again now: its
 * backoff is over and its step could run (uploads of its files are
 * retried by the workers on their own). */
static bool retry_due(eng *e, const etxn *t, double now)
{
	return eng_retrying(e, t, now) && t->retry_at <= now &&
	       eng_step_ready(e, t);
}

/*
 * One pass over the queue in order, keeping the steps held back by a
 * set-aside one (each with the set-aside step at its root).  Stops at
 * `upto` and returns its blocker, or, with upto NULL, at the first step
 * that may run (not held back, and not set aside unless its retry is
 * due) and returns it in *next.  mu
 */
static etxn *scan(eng *e, const etxn *upto, etxn **next)
{
	size_t cap = 0, n = 0;
	for (etxn *t = e->txns; t; t = t->next)
		cap++;
	etxn **stuck = calloc(cap ? cap : 1, sizeof *stuck);
	etxn **cause = calloc(cap ? cap : 1, sizeof *cause);
	etxn *found = NULL;
	double now = eng_now();
	if (next)
		*next = NULL;
	for (etxn *t = e->txns; t && stuck && cause; t = t->next) {
		if (t->done || t->state == TS_ABORTED || eng_parked(e, t))
			continue;
		etxn *dep = held_by(t, stuck, cause, n);
		etxn *c = eng_set_aside(e, t, now) ? t : dep;
		if (t == upto) {
			found = c;
			break;
		}
		if (!upto && (!c || (!dep && retry_due(e, t, now)))) {
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

/* Whether some live step is set aside (else nothing is held back). */
static bool any_set_aside(eng *e)
{
	double now = eng_now();
	for (etxn *x = e->txns; x; x = x->next)
		if (!x->done && eng_set_aside(e, x, now))
			return true;
	return false;
}

etxn *eng_blocker(eng *e, const etxn *t)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	return any_set_aside(e) ? scan(e, t, NULL) : NULL;
}

etxn **eng_blockers(eng *e)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	size_t cap = 0, i = 0, n = 0;
	for (etxn *t = e->txns; t; t = t->next)
		cap++;
	/* as scan: the steps held back so far, each with its cause */
	etxn **out = calloc(cap ? cap : 1, sizeof *out);
	etxn **stuck = calloc(cap ? cap : 1, sizeof *stuck);
	etxn **cause = calloc(cap ? cap : 1, sizeof *cause);
	double now = eng_now();
	if (!out || !stuck || !cause) {
		free(out);
		out = NULL;
	}
	for (etxn *t = e->txns; out && t; t = t->next, i++) {
		if (t->done || t->state == TS_ABORTED || eng_parked(e, t))
			continue;
		etxn *c = eng_set_aside(e, t, now) ? t
						  : held_by(t, stuck, cause, n);
		if (c) {
			out[i] = c;
			stuck[n] = t;
			cause[n++] = c;
		}
	}
	free(stuck);
	free(cause);
	return out;
}

etxn *eng_next_step(eng *e)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	etxn *next;
	scan(e, NULL, &next);
	return next;
}

/* The error that keeps t from becoming visible (for good, or until a
 * retry of a step set aside succeeds), or 0. */
int eng_blocked_err(eng *e, const etxn *t)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	const etxn *x = eng_set_aside(e, t, eng_now()) ? t : eng_blocker(e, t);
	return x ? -(x->err ? x->err : EIO) : 0;
}

/* ---- when a step can run ------------------------------------------------- */

bool eng_files_idle(const etxn *t)
{
	for (const efile *f = t->files; f; f = f->next)
		if (f->jobs)
			return false;
	return true;
}

bool eng_step_ready(eng *e, const etxn *t)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	if (t->kind == T_RDEL || t->kind == T_RREN || t->kind == T_RATTR)
		return true;
	if (t->state != TS_SEALED || !eng_root_final(e, t) ||
	    !eng_files_idle(t))
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

/* ---- uploads ------------------------------------------------------------ */

bool eng_upload_blocked(eng *e, const etxn *t, const char *path)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	/* the overlap first: eng_parked matches the temp patterns */
	for (etxn *x = e->txns; x && x != t; x = x->next) {
		eng_order_step s = {x->root, x->dest,
				    x->done || x->state == TS_ABORTED};
		if (eng_order_waits(&s, path) && !eng_parked(e, x))
			return true;
	}
	return false;
}

static bool held(eng *e, const efile *f);

bool eng_file_uploadable(eng *e, const efile *f)
{
	CKPTFS_ASSERT_HELD(&e->mu);
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
	CKPTFS_ASSERT_HELD(&e->mu);
	const etxn *t = f->t;
	return e->writing && e->o.upload_hold_s > 0 && t->kind == T_DIR &&
	       t->state != TS_SEALED && !f->urgent && !f->upload_id &&
	       eng_now() - f->put_at < e->o.upload_hold_s;
}

void eng_sched_file(eng *e, efile *f)
{
	CKPTFS_ASSERT_HELD(&e->mu);
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
	CKPTFS_ASSERT_HELD(&e->mu);
	e->staged_dirty = true;
	for (etxn *t = e->txns; t; t = t->next)
		for (efile *f = t->files; f; f = f->next)
			eng_sched_file(e, f);
	pthread_cond_broadcast(&e->cv);
}

/* ---- sync and unmount --------------------------------------------------- */

/* Whether nothing up to queue position upto (0: everything) can make
 * progress any more than it is: remaining steps are set aside (failed, or
 * failing transiently past transient_limit: their retries go on), held
 * back by one, or wait for a move of their temp-named root. */
bool eng_settled(eng *e, int64_t upto, uint64_t *done, uint64_t *total)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	bool all = true, any_failed = any_set_aside(e);
	double now = eng_now();
	*done = *total = 0;
	etxn **blk = any_failed ? eng_blockers(e) : NULL;
	size_t i = 0;
	for (etxn *t = e->txns; t; t = t->next, i++) {
		if (upto && t->seq > upto)
			break;
		for (efile *f = t->files; f; f = f->next) {
			*total += f->size;
			*done += f->state == F_STORED ? f->size : f->bytes_done;
		}
		if (t->done || eng_parked(e, t))
			continue;
		if (t->state == TS_ABORTED) {
			/* its clean-up, unless that is set aside */
			if (!eng_set_aside(e, t, now))
				all = false;
			continue;
		}
		if (!any_failed || !blk || !blk[i])
			all = false;
	}
	free(blk);
	return all;
}

void eng_seal_all(eng *e, int64_t upto)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	bool any = false;
	for (etxn *t = e->txns; t; t = t->next) {
		if (upto && t->seq > upto)
			break;
		if (t->state == TS_OPEN && !t->done && !t->poison) {
			t->state = TS_SEALED;
			t->sealed_at = eng_now();
			jr_txn_set_state(e->j, t->id, TS_SEALED);
			any = true;
		}
	}
	if (any)
		eng_sched_all(e);
}

/*
 * t leaves its place in the queue for the tail: a root renamed from a temp
 * name to a final one, or a single file renamed, is ordered by its rename,
 * which is when the application means it (doc/commit.md "Ordering").  Its new position is a
 * fresh value of the txns id sequence, so later transactions come after
 * it.  mu, inside a journal transaction.
 */
int eng_requeue(eng *e, etxn *t)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	int64_t seq = 0;
	int rc = jr_txn_requeue(e->j, t->id, &seq);
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

/* Drops the transactions still waiting for a final name: the mount ends,
 * so no rename can give them one.  Nothing of them was uploaded (uploads
 * wait for the final name) and nothing was visible.  mu */
void eng_drop_parked(eng *e)
{
	CKPTFS_ASSERT_HELD(&e->mu);
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
