/*
 * eng status: what `ckptfs status`, `ckptfs retry` and `ckptfs drop` see
 * and do (eng_status, eng_failed_text, eng_step_retry, eng_step_drop), and
 * the pending state the FUSE layer rebuilds its overlay from at mount
 * (eng_foreach_pending_*).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "commit/internal.h"
#include "util/log.h"

static const char *state_name(eng *e, const etxn *t, bool head, double now)
{
	if (t->poison)
		return "poisoned";
	if (eng_set_aside(e, t, now))
		return "failed";
	switch (t->kind) {
	case T_RDEL:
		return head ? "deleting" : "queued";
	case T_RREN:
		return head ? "renaming" : "queued";
	case T_RATTR:
		return head ? "recording" : "queued";
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

/* t's last error, and for a step set aside by transient errors how long
 * it has been failing and that it is still retried (malloc'd, or NULL). */
static char *error_text(const eng *e, const etxn *t, double now)
{
	if (t->poison)
		return eng_poison_text(t);
	if (!t->error && !t->err)
		return NULL;
	buf b = BUF_INIT;
	buf_puts(&b, t->error ? t->error : strerror(t->err));
	if (eng_retrying(e, t, now))
		buf_printf(&b, " (transient: failing for %.0f s, still retried)",
			   now - t->err_since);
	return buf_steal(&b);
}

int eng_status(eng *e, eng_txn_status **v, size_t *n)
{
	ckpt_lock(&e->mu);
	size_t cnt = 0;
	for (etxn *t = e->txns; t; t = t->next)
		cnt++;
	eng_txn_status *out = calloc(cnt ? cnt : 1, sizeof *out);
	if (!out) {
		ckpt_unlock(&e->mu);
		return -ENOMEM;
	}
	size_t i = 0;
	double now = eng_now();
	etxn *next = eng_next_step(e);
	etxn **blk = eng_blockers(e);
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
		s->age = now - t->created_at;
		etxn *b = t->done || !blk || blk[i] == t ? NULL : blk[i];
		s->state = b ? "blocked" : state_name(e, t, t == next, now);
		s->retrying = !b && eng_retrying(e, t, now);
		if (b) {
			char *why = error_text(e, b, now);
			buf m = BUF_INIT;
			buf_printf(&m, "waits for step %" PRId64 " (%s), which "
				       "failed: %s",
				   b->id, b->root, why ? why : "?");
			free(why);
			s->error = buf_steal(&m);
		} else {
			s->error = t->error || t->poison ? error_text(e, t, now)
							 : NULL;
		}
	}
	free(blk);
	*v = out;
	*n = i;
	ckpt_unlock(&e->mu);
	return 0;
}

/* What joins a step's root and its dest in reports. */
static const char *dest_sep(const etxn *t)
{
	return !t->dest ? "" : t->kind == T_RREN ? " to " : ", keeping ";
}

static const char *step_what(const etxn *t)
{
	switch (t->kind) {
	case T_RDEL:
		return "delete";
	case T_RREN:
		return "rename";
	case T_RATTR:
		return "attributes";
	default:
		return "commit";
	}
}

char *eng_failed_text(eng *e)
{
	ckpt_lock(&e->mu);
	buf b = BUF_INIT;
	size_t n = 0, retriable = 0;
	etxn **blk = eng_blockers(e);
	double now = eng_now();
	for (etxn *t = e->txns; t; t = t->next) {
		if (t->done || !eng_set_aside(e, t, now))
			continue;
		size_t held = 0, k = 0;
		for (etxn *y = e->txns; blk && y; y = y->next, k++)
			if (y != t && blk[k] == t)
				held++;
		if (!t->poison)
			retriable++;
		char *why = error_text(e, t, now);
		buf_printf(&b, "%sstep %" PRId64 ", %s of %s%s%s, failed: %s",
			   n++ ? "; " : "", t->id, step_what(t), t->root,
			   dest_sep(t), t->dest ? t->dest : "",
			   why ? why : strerror(EIO));
		free(why);
		if (held)
			buf_printf(&b, " (%zu later step%s wait%s for it)", held,
				   held == 1 ? "" : "s", held == 1 ? "s" : "");
	}
	free(blk);
	ckpt_unlock(&e->mu);
	if (!n) {
		buf_free(&b);
		return NULL;
	}
	/* a poisoned step's own text says what lifts it (its file written
	 * again or removed, or a drop); `ckptfs retry` does not */
	if (retriable)
		buf_puts(&b, "; `ckptfs retry MOUNT` tries again, `ckptfs drop "
			     "MOUNT STEP` gives a step up");
	return buf_steal(&b);
}

/* A step set aside by transient errors is tried again now: its step's
 * backoff and its files' queued upload jobs' are over.  mu */
static void retry_now(eng *e, etxn *t)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	t->retry_at = 0;
	for (job *j = e->jobs; j; j = j->next)
		if (j->f && j->f->t == t)
			j->not_before = 0;
	log_info("commit: step %" PRId64 " (%s of %s) tried again now",
		 t->id, step_what(t), t->root);
}

int eng_step_retry(eng *e, uint64_t id)
{
	ckpt_lock(&e->mu);
	int n = 0;
	double now = eng_now();
	bool poisoned = false;
	for (etxn *t = e->txns; t; t = t->next) {
		if (t->done || !eng_set_aside(e, t, now) ||
		    (id && (uint64_t)t->id != id))
			continue;
		if (t->poison) { /* only a rewrite, a removal or a drop */
			poisoned = true;
			continue;
		}
		n++;
		if (!t->failed) {
			retry_now(e, t);
			continue;
		}
		t->failed = false;
		t->err_logged = 0;
		for (efile *f = t->files; f; f = f->next)
			f->failed = false;
		jr_txn_set_error(e->j, t->id, NULL);
		log_info("commit: step %" PRId64 " (%s of %s) tried again",
			 t->id, step_what(t), t->root);
	}
	if (n)
		eng_sched_all(e);
	ckpt_unlock(&e->mu);
	return n ? n : poisoned ? -EBUSY : -ENOENT;
}

int eng_step_drop(eng *e, uint64_t id, char **what)
{
	ckpt_lock(&e->mu);
	etxn *t = eng_find_txn(e, id);
	int rc = t ? 0 : -ENOENT;
	if (t && what) {
		buf b = BUF_INIT;
		buf_printf(&b, "%s of %s%s%s", step_what(t), t->root,
			   dest_sep(t), t->dest ? t->dest : "");
		*what = buf_steal(&b);
	}
	if (t && (t->kind == T_RDEL || t->kind == T_RREN ||
		  t->kind == T_RATTR)) {
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
		rc = jr_txn_set_state(e->j, t->id, TS_ABORTED);
		if (!rc) {
			t->state = TS_ABORTED;
			t->failed = false;
			eng_txn_progress(e, t); /* its clean-up starts afresh */
			for (efile *f = t->files; f; f = f->next)
				f->gen++;
		}
	}
	eng_sched_all(e);
	ckpt_unlock(&e->mu);
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

/* Whether a remote delete or rename after t in the queue takes path away
 * (a file renamed away or removed while its transaction was committing:
 * the FUSE layer showed a whiteout there).  mu */
static bool removed_later(const etxn *t, const char *path)
{
	for (const etxn *x = t->next; x; x = x->next)
		if (!x->done && (x->kind == T_RDEL || x->kind == T_RREN) &&
		    proto_under(path, x->root, NULL))
			return true;
	return false;
}

void eng_foreach_pending_file(eng *e,
			      void (*fn)(void *arg, uint64_t txn,
					 const char *path,
					 const char *staging_path,
					 uint64_t size, const eng_meta *m),
			      void *arg)
{
	ckpt_lock(&e->mu);
	for (etxn *t = e->txns; t; t = t->next) {
		if (t->done || t->state == TS_ABORTED)
			continue;
		for (efile *f = t->files; f; f = f->next) {
			if (removed_later(t, f->path))
				continue;
			char *p = eng_staging_path(e, f->sid);
			eng_meta m;
			eng_meta_to(&f->m, &m);
			fn(arg, (uint64_t)t->id, f->path, p, f->size, &m);
			free(p);
		}
	}
	ckpt_unlock(&e->mu);
}

void eng_foreach_pending_txn(eng *e, eng_pending_txn_fn txn_fn,
			     eng_pending_dir_fn dir_fn, void *arg)
{
	ckpt_lock(&e->mu);
	for (etxn *t = e->txns; t; t = t->next) {
		if (t->done || t->state == TS_ABORTED ||
		    (t->kind != T_DIR && t->kind != T_FILE))
			continue;
		if (txn_fn)
			txn_fn(arg, (uint64_t)t->id, t->root, t->is_dir,
			       t->state == TS_SEALED);
		for (edir *d = t->dirs; dir_fn && d; d = d->next) {
			if (!proto_under(d->path, t->root, NULL))
				continue; /* a parent it records (not its) */
			eng_meta m;
			eng_meta_to(&d->m, &m);
			dir_fn(arg, (uint64_t)t->id, d->path, &m);
		}
	}
	ckpt_unlock(&e->mu);
}

void eng_foreach_pending_removal(eng *e,
				 void (*fn)(void *arg, uint64_t id,
					    const char *path, bool is_dir),
				 void *arg)
{
	ckpt_lock(&e->mu);
	for (etxn *t = e->txns; t; t = t->next)
		if (!t->done && (t->kind == T_RDEL || t->kind == T_RREN))
			fn(arg, (uint64_t)t->id, t->root, t->is_dir);
	ckpt_unlock(&e->mu);
}

void eng_foreach_pending_dir_set(eng *e, eng_pending_dir_fn fn, void *arg)
{
	ckpt_lock(&e->mu);
	for (etxn *t = e->txns; t; t = t->next) {
		if (t->done || t->kind != T_RATTR)
			continue;
		for (edir *d = t->dirs; d; d = d->next) {
			eng_meta m;
			eng_meta_to(&d->m, &m);
			fn(arg, (uint64_t)t->id, d->path, &m);
		}
	}
	ckpt_unlock(&e->mu);
}

bool eng_txn_pending(eng *e, uint64_t txn)
{
	ckpt_lock(&e->mu);
	bool pending = eng_find_txn(e, txn) != NULL;
	ckpt_unlock(&e->mu);
	return pending;
}
