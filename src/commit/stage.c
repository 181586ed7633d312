/*
 * eng stage: the staging files the FUSE layer writes before it hands them
 * over with eng_file_put (STATE_DIR/staging/<sid>), the backpressure on
 * bytes staged but not yet stored (max_staged), and the upload hold
 * (eng_hold_uploads: files of an open directory transaction wait while
 * the application writes, doc/commit.md "Upload hold").
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "commit/internal.h"

int eng_stage_create(eng *e, uint64_t *sid)
{
	ckpt_lock(&e->mu);
	uint64_t id = e->next_sid++;
	ckpt_unlock(&e->mu);
	char *p = eng_staging_path(e, id);
	int fd = p ? open(p, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : -1;
	int rc = fd >= 0 ? fd : -(p ? errno : ENOMEM);
	free(p);
	if (fd >= 0)
		*sid = id;
	return rc;
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

int eng_stage_reserve(eng *e, uint64_t n)
{
	(void)n;
	if (!e->o.max_staged)
		return 0;
	ckpt_lock(&e->mu);
	if (e->writing && staged_now(e) >= e->o.max_staged / 2) {
		e->writing = false; /* the hold ends here (until the next
				     * eng_hold_uploads) */
		eng_sched_all(e);
	}
	while (!e->stopping && staged_now(e) > e->o.max_staged)
		ckpt_cond_wait(&e->cv, &e->mu);
	int rc = e->stopping ? -EINTR : 0;
	ckpt_unlock(&e->mu);
	return rc;
}

uint64_t eng_max_staged(const eng *e)
{
	return e->o.max_staged;
}

bool eng_space_pending(eng *e)
{
	ckpt_lock(&e->mu);
	bool any = e->releasing > 0;
	ckpt_unlock(&e->mu);
	return any;
}

void eng_stage_discard(eng *e, uint64_t sid)
{
	char *p = eng_staging_path(e, sid);
	if (p)
		unlink(p);
	free(p);
}

void eng_hold_uploads(eng *e, bool writing)
{
	ckpt_lock(&e->mu);
	bool was = e->writing;
	e->writing = writing;
	/* released, or maybe some held file's time is up */
	if (was)
		eng_sched_all(e);
	ckpt_unlock(&e->mu);
}
