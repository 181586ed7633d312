/*
 * eng facts: the calls the FUSE layer hands its facts through (engine.h):
 * transactions begun, files put, re-attributed, dropped and moved, empty
 * directories, seals and aborts, remote deletes and renames.  Each journals
 * its fact (journal.c) under mu before it returns, updates the model and
 * lets the queue rules (order.c) schedule what became uploadable.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commit/internal.h"
#include "util/log.h"
#include "util/vec.h"

#ifdef CKPTFS_ASSERTS
/*
 * Checked where a failed journal write can leave the model ahead of the
 * journal: eng_file_move moves its files in the model inside the journal
 * transaction, and a COMMIT that fails (a full disk) leaves them moved in
 * the model only, until their next put or move journals their rows whole;
 * a later move or drop finds that.  Logged there, not asserted.  (Every
 * other fact leaves the model as it was when its transaction fails.)
 */
#define JOURNAL_CHECK(cond)                                                    \
	do {                                                                   \
		if (!(cond))                                                   \
			log_error("%s:%d: journal check failed: %s", __FILE__, \
				  __LINE__, #cond);                            \
	} while (0)
#else
#define JOURNAL_CHECK(cond) ((void)sizeof(!(cond)))
#endif

#ifdef CKPTFS_ASSERTS
/* The journal checkers: false inside a journal transaction or when the
 * row is not what the call left; a query that cannot run at all (the
 * disk full) checks nothing and answers true. */
static int count_row(void *arg, sqlite3_stmt *s)
{
	(void)s;
	++*(int *)arg;
	return 0;
}

bool eng_journaled_txn(eng *e, int64_t id, enum tstate st)
{
	int n = 0;
	if (jr_in_txn(e->j))
		return false;
	return jr_exec(e->j, count_row, &n,
		       "SELECT 1 FROM txns WHERE id = ?1 AND state = ?2", "ii",
		       id, (int64_t)st) ||
	       n == 1;
}

bool eng_journaled_file(eng *e, const efile *f)
{
	int n = 0;
	if (jr_in_txn(e->j) || !f->t)
		return false;
	return jr_exec(e->j, count_row, &n,
		       "SELECT 1 FROM files WHERE id = ?1 AND txn = ?2 AND "
		       "path = ?3 AND sid = ?4 AND size = ?5",
		       "iitii", f->id, f->t->id, f->path, (int64_t)f->sid,
		       (int64_t)f->size) ||
	       n == 1;
}

bool eng_journaled_dir(eng *e, int64_t txn, const char *path)
{
	int n = 0;
	if (jr_in_txn(e->j))
		return false;
	return jr_exec(e->j, count_row, &n,
		       "SELECT 1 FROM dirs WHERE txn = ?1 AND path = ?2", "it",
		       txn, path) ||
	       n == 1;
}

bool eng_journaled_none_under(eng *e, int64_t txn, const char *path)
{
	int n = 0;
	if (jr_in_txn(e->j))
		return false;
	return jr_exec(e->j, count_row, &n,
		       "SELECT 1 FROM files WHERE txn = ?1 AND (path = ?2 OR "
		       "substr(path, 1, length(?2) + 1) = ?2 || '/')",
		       "it", txn, path) ||
	       n == 0;
}
#endif

int eng_txn_begin(eng *e, const char *path, bool is_dir,
		  const char *mroot, uint64_t *txn)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	ckpt_lock(&e->mu);
	int64_t row = 0;
	int rc = jr_txn_insert(e->j, is_dir ? T_DIR : T_FILE, path, NULL,
			       is_dir, TS_OPEN, mroot, &row);
	etxn *t = NULL;
	if (!rc) {
		t = eng_txn_new(e, row, is_dir ? T_DIR : T_FILE, path, NULL,
				is_dir, TS_OPEN, mroot);
		if (!t)
			rc = -ENOMEM;
	}
	bool final = t && is_dir && eng_root_final(e, t);
	int64_t id = t ? t->id : 0;
	ckpt_unlock(&e->mu);
	if (!rc && final)
		rc = eng_announce(e, path, (uint64_t)id);
	ckpt_lock(&e->mu);
	/* mu was dropped for the announce: another thread (`ckptfs drop`)
	 * may have given the transaction up meanwhile */
	if (t && !(t = eng_find_txn(e, id)) && !rc)
		rc = -ENOENT;
	if (rc && t) {
		jr_txn_delete(e->j, id);
		t->done = true;
		eng_free_txn(e, t);
	} else if (t) {
		t->has_marker = final;
		*txn = (uint64_t)id;
		CKPTFS_ASSERT(eng_journaled_txn(e, id, t->state));
	}
	pthread_cond_broadcast(&e->cv);
	ckpt_unlock(&e->mu);
	return rc;
}

/* Forgets f's current upload: its object (if stored under another key than
 * the one it will get) becomes garbage, an open multipart upload is
 * aborted, progress restarts.  mu */
static void reset_upload(eng *e, etxn *garbage_txn, efile *f,
			 const char *new_key)
{
	CKPTFS_ASSERT_HELD(&e->mu);
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
	jr_parts_clear(e->j, f->id);
}

/* The dirs row of path in txn with attributes m. */
static jr_dir_row dir_row(int64_t txn, const char *path, const proto_meta *m)
{
	return (jr_dir_row){.txn = txn,
			    .path = path,
			    .mode = m->mode,
			    .uid = m->uid,
			    .gid = m->gid,
			    .mtime_ns = m->mtime_ns,
			    .xattrs = m->xattrs_len ? m->xattrs : NULL,
			    .xattrs_len = m->xattrs_len};
}

static int journal_file(eng *e, efile *f)
{
	jr_file_row r = {
	    .id = f->id,
	    .txn = f->t->id,
	    .path = f->path,
	    .sid = f->sid,
	    .size = f->size,
	    .mode = f->m.mode,
	    .uid = f->m.uid,
	    .gid = f->m.gid,
	    .mtime_ns = f->m.mtime_ns,
	    .rdev = f->m.rdev,
	    .xattrs = f->m.xattrs,
	    .xattrs_len = f->m.xattrs_len,
	    .symlink = f->m.symlink,
	    .state = f->state,
	    .key = f->key,
	    .upload_id = f->upload_id,
	    .part_size = f->part_size,
	    .etag = f->etag[0] ? f->etag : NULL,
	    .crc = f->crc,
	    .blocks = f->blocks,
	};
	return jr_file_update(e->j, &r);
}

/*
 * A file of t is to be stored at path: the object there that another
 * transaction keeps as garbage (the old name of a file moved away) is t's
 * from now on.  Deleted when that one became visible, it went after t had
 * stored its own there (model seed 7400: a file renamed out of an open
 * checkpoint, another put at its name; the rename's transaction, visible
 * after the checkpoint, deleted the new object).  A step never deletes a
 * key it commits (eng_garbage_plan); aborted, or the file moved on, t
 * deletes the old object.  mu, inside a journal transaction.
 */
static int claim_garbage(eng *e, etxn *t, const char *path)
{
	char *key = proto_key(e->prefix, path);
	int rc = key ? jr_garbage_take(e->j, t->id, key) : -ENOMEM;
	free(key);
	return rc;
}

/*
 * One try of file_put, inside a journal transaction; on an error the
 * model is left as it was (what reset_upload forgot aside: the file is
 * uploaded again), since the journal keeps nothing of the transaction.
 * Before, a new file stayed in the model with the id of a row that a
 * failed COMMIT had rolled back: its next put updated no row and
 * "succeeded" (the check of the row failed), and the id could be given to
 * another file.  mu.
 */
static int file_put_once(eng *e, etxn *t, const char *path, uint64_t sid,
			 uint64_t size, const eng_meta *m, efile **out,
			 char **old_staging)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	efile *f = eng_find_file(t, path);
	bool is_new = !f;
	int rc = jr_begin(e->j);
	if (!rc && is_new) {
		int64_t row = 0;
		rc = jr_file_insert(e->j, t->id, path, sid, size, &row);
		f = rc ? NULL : calloc(1, sizeof *f);
		if (f) {
			f->id = row;
			f->path = strdup(path);
			f->refs = 1;
			eng_link_file(t, f);
		} else if (!rc) {
			rc = -ENOMEM;
		}
	} else if (!rc) {
		reset_upload(e, t, f, NULL);
	}
	if (rc) {
		jr_rollback(e->j);
		return rc;
	}
	uint64_t was_sid = f->sid, was_size = f->size;
	double was_at = f->put_at;
	proto_meta was_m = f->m;
	f->m = (proto_meta){0};
	f->sid = sid;
	f->size = size;
	f->put_at = eng_now();
	eng_meta_from(&f->m, m);
	rc = journal_file(e, f);
	if (!rc)
		rc = claim_garbage(e, t, path);
	if (!rc)
		rc = jr_commit(e->j);
	else
		jr_rollback(e->j);
	if (rc && is_new) {
		eng_unlink_file(t, f);
		eng_file_unref(e, f);
		proto_meta_free(&was_m);
		return rc;
	}
	if (rc) {
		proto_meta_free(&f->m);
		f->m = was_m;
		f->sid = was_sid;
		f->size = was_size;
		f->put_at = was_at;
		return rc;
	}
	proto_meta_free(&was_m);
	if (!is_new && was_sid != sid)
		*old_staging = eng_staging_path(e, was_sid);
	*out = f;
	return 0;
}

/* eng_file_put; short: the bytes of a failed write, which leave the
 * poison as it is (eng_file_put_short). */
static int file_put(eng *e, uint64_t txn, const char *path, uint64_t sid,
		    uint64_t size, const eng_meta *m, bool short_file)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	ckpt_lock(&e->mu);
	etxn *t = eng_find_txn(e, txn);
	int rc = t && t->state != TS_ABORTED ? 0 : -ENOENT;
	efile *f = NULL;
	char *old_staging = NULL;
	/* the put of a new file (the close of a checkpoint file) does not
	 * wait for an fsync of the journal: close(2) promises no
	 * durability, and the staged bytes are not synced either.  The next
	 * durable commit (its upload, a seal, fsync) takes the row to disk. */
	bool lazy = !rc && !eng_find_file(t, path);
	if (lazy && jr_set_durable(e->j, false) < 0)
		lazy = false;
	if (!rc)
		rc = file_put_once(e, t, path, sid, size, m, &f, &old_staging);
	/* a full disk: once more in the room of the journal's reserve (a
	 * short file's put must reach the journal: doc/commit.md "Failed
	 * writes") */
	if (rc == -ENOSPC && jr_free_reserve(e->j))
		rc = file_put_once(e, t, path, sid, size, m, &f, &old_staging);
	if (lazy)
		jr_set_durable(e->j, true);
	if (!rc) {
		CKPTFS_ASSERT(eng_journaled_file(e, f));
		if (old_staging)
			unlink(old_staging);
		eng_sched_file(e, f);
		if (!short_file)
			eng_poison_clear(e, t, path, false); /* rewritten */
	}
	free(old_staging);
	pthread_cond_broadcast(&e->cv);
	ckpt_unlock(&e->mu);
	return rc;
}

int eng_file_put(eng *e, uint64_t txn, const char *path, uint64_t sid,
		 uint64_t size, const eng_meta *m)
{
	return file_put(e, txn, path, sid, size, m, false);
}

int eng_file_put_short(eng *e, uint64_t txn, const char *path, uint64_t sid,
		       uint64_t size, const eng_meta *m)
{
	return file_put(e, txn, path, sid, size, m, true);
}

int eng_file_set_meta(eng *e, uint64_t txn, const char *path,
		      const eng_meta *m)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	ckpt_lock(&e->mu);
	etxn *t = eng_find_txn(e, txn);
	efile *f = t ? eng_find_file(t, path) : NULL;
	int rc = f ? 0 : -ENOENT;
	if (f) {
		proto_meta_free(&f->m);
		eng_meta_from(&f->m, m);
		/* object metadata is written with the bytes: re-upload (the
		 * manifest alone would do, but the object should agree) */
		if (f->state == F_STORED || f->upload_id || f->jobs) {
			f->gen++;
			reset_upload(e, t, f, NULL);
		}
		rc = journal_file(e, f);
		CKPTFS_ASSERT(rc || eng_journaled_file(e, f));
		eng_sched_file(e, f);
	} else if (t) {
		for (edir *d = t->dirs; d; d = d->next) {
			if (!strcmp(d->path, path)) {
				proto_meta_free(&d->m);
				eng_meta_from(&d->m, m);
				jr_dir_row r = dir_row(t->id, path, &d->m);
				rc = jr_dir_set_meta(e->j, &r);
			}
		}
	}
	ckpt_unlock(&e->mu);
	return rc;
}

/* f's staging file goes (its space comes back once no job reads it:
 * eng_space_pending).  mu. */
static void free_staging(eng *e, efile *f)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	char *p = eng_staging_path(e, f->sid);
	unlink(p);
	free(p);
	if (f->jobs && !f->releasing) {
		f->releasing = true;
		e->releasing++;
	}
}

/* Forgets f (its rows are gone): the model, its staging file.  mu. */
static void forget_file(eng *e, etxn *t, efile *f)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	free_staging(e, f);
	eng_unlink_file(t, f);
	eng_file_unref(e, f);
}

/* Drops f from its transaction: rows, upload, staging file.  mu, inside a
 * journal transaction. */
static void drop_file(eng *e, etxn *t, efile *f)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	reset_upload(e, t, f, NULL);
	jr_file_delete(e->j, f->id);
	forget_file(e, t, f);
}

/* Forgets the directories of t under path (their rows are gone).  mu. */
static void forget_dirs(eng *e, etxn *t, const char *path)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	for (edir **pp = &t->dirs; *pp;) {
		edir *d = *pp;
		if (!proto_under(d->path, path, NULL)) {
			pp = &d->next;
			continue;
		}
		*pp = d->next;
		free(d->path);
		proto_meta_free(&d->m);
		free(d);
	}
}

int eng_file_drop(eng *e, uint64_t txn, const char *path)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	ckpt_lock(&e->mu);
	etxn *t = eng_find_txn(e, txn);
	int rc = t ? jr_begin(e->j) : -ENOENT;
	/* the rows first; the model and the staging files only once they
	 * are gone (a failed COMMIT keeps them: the file is still there for
	 * the journal, so it must be for the model and the staging dir) */
	for (efile *f = rc ? NULL : t->files; f && !rc; f = f->next) {
		if (!proto_under(f->path, path, NULL))
			continue;
		reset_upload(e, t, f, NULL); /* its object is garbage */
		rc = jr_file_delete(e->j, f->id);
	}
	for (edir *d = rc ? NULL : t->dirs; d && !rc; d = d->next)
		if (proto_under(d->path, path, NULL))
			rc = jr_dir_delete(e->j, t->id, d->path);
	if (t && !rc) {
		rc = jr_commit(e->j);
	} else if (t) {
		jr_rollback(e->j);
	}
	if (!rc) {
		for (efile *f = t->files, *nx; f; f = nx) {
			nx = f->next;
			if (proto_under(f->path, path, NULL))
				forget_file(e, t, f);
		}
		forget_dirs(e, t, path);
		/* a failed eng_file_move can leave rows the model moved
		 * elsewhere (see there) */
		JOURNAL_CHECK(eng_journaled_none_under(e, t->id, path));
		eng_poison_clear(e, t, path, true); /* removed */
	}
	pthread_cond_broadcast(&e->cv);
	ckpt_unlock(&e->mu);
	return rc;
}

/* eng_dir_put of t's directory path, mu held. */
static int dir_put(eng *e, etxn *t, const char *path, const eng_meta *m)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	edir *d = t ? calloc(1, sizeof *d) : NULL;
	int rc = d ? 0 : t ? -ENOMEM : -ENOENT;
	if (d) {
		d->path = strdup(path);
		eng_meta_from(&d->m, m);
		/* replaces an earlier put of path (new attributes), not the
		 * directories under it */
		for (edir **pp = &t->dirs; *pp; pp = &(*pp)->next) {
			edir *o = *pp;
			if (strcmp(o->path, path))
				continue;
			*pp = o->next;
			free(o->path);
			proto_meta_free(&o->m);
			free(o);
			break;
		}
		d->next = t->dirs;
		t->dirs = d;
		jr_dir_row r = dir_row(t->id, path, &d->m);
		rc = jr_dir_put(e->j, &r);
		/* inside a journal transaction (remote_step) the caller checks
		 * after its commit: eng_journaled_dir looks only outside one */
		CKPTFS_ASSERT(rc || jr_in_txn(e->j) ||
			      eng_journaled_dir(e, t->id, path));
	}
	return rc;
}

int eng_dir_put(eng *e, uint64_t txn, const char *path, const eng_meta *m)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	ckpt_lock(&e->mu);
	int rc = dir_put(e, eng_find_txn(e, txn), path, m);
	ckpt_unlock(&e->mu);
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
	CKPTFS_ASSERT_HELD(&e->mu);
	/* the objects already stored under the old name are garbage of the
	 * transaction whose marker hides them: tf's when its root moves
	 * into another (it is left an orphan, aborted, and its clean-up
	 * deletes them with that marker).  As tt's garbage they outlived
	 * the orphan's marker until tt committed, and showed meanwhile as a
	 * plain directory at the old name (model seed 8511) */
	etxn *g = tf != tt && tf->kind == T_DIR && !strcmp(from, tf->root)
			  ? tf
			  : tt;
	for (efile *f = tf->files, *nx; f; f = nx) {
		nx = f->next;
		if (!proto_under(f->path, from, NULL))
			continue;
		char *np = rebase(f->path, from, to);
		efile *old = tt ? eng_find_file(tt, np) : NULL;
		if (old && old != f)
			drop_file(e, tt, old);
		reset_upload(e, g, f, NULL);
		eng_unlink_file(tf, f);
		free(f->path);
		f->path = np;
		eng_link_file(tt, f);
		journal_file(e, f);
		claim_garbage(e, tt, f->path);
	}
	for (edir *d = tf->dirs, **pp = &tf->dirs; d; d = *pp) {
		if (!proto_under(d->path, from, NULL)) {
			pp = &d->next;
			continue;
		}
		char *np = rebase(d->path, from, to);
		jr_dir_delete(e->j, tf->id, d->path);
		jr_dir_row r = dir_row(tt->id, np, &d->m);
		jr_dir_put(e->j, &r);
		free(d->path);
		d->path = np;
		*pp = d->next;
		d->next = tt->dirs;
		tt->dirs = d;
	}
}

/* The old name's marker and intent manifest go with the garbage of t. */
static void retire_root(eng *e, etxn *t)
{
	CKPTFS_ASSERT_HELD(&e->mu);
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

/* Whether a step queued after t, not done, touches name `to` (a delete
 * of the name a directory moves onto, sent as the rename replaced it).
 * mu */
static bool later_step_on(eng *e, const etxn *t, const char *to)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	for (const etxn *l = t->next; l; l = l->next)
		if (!l->done && l->state != TS_ABORTED &&
		    (proto_overlap(l->root, to) ||
		     (l->kind == T_RREN && l->dest &&
		      proto_overlap(l->dest, to))))
			return true;
	return false;
}

int eng_file_move(eng *e, uint64_t txn_from, const char *from,
		  uint64_t txn_to, const char *to, const char *manifest_root)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	ckpt_lock(&e->mu);
	etxn *tf = eng_find_txn(e, txn_from), *tt = eng_find_txn(e, txn_to);
	int rc = tf && tt ? 0 : -ENOENT;
	bool whole = !rc && tf == tt && !strcmp(from, tf->root);
	bool announce_new = false, orphan = false;
	if (whole)
		announce_new = tf->kind == T_DIR && !proto_has_temp(&e->pats, to);
	ckpt_unlock(&e->mu);
	/* the new name's marker first: the moved transaction is hidden there
	 * before anything of it can appear */
	if (announce_new)
		rc = eng_announce(e, to, txn_from);
	ckpt_lock(&e->mu);
	tf = eng_find_txn(e, txn_from);
	tt = eng_find_txn(e, txn_to);
	if (!rc && (!tf || !tt))
		rc = -ENOENT;
	if (!rc)
		rc = jr_begin(e->j);
	if (!rc) {
		if (whole) {
			bool was_parked = eng_parked(e, tf);
			bool after = later_step_on(e, tf, to);
			retire_root(e, tf);
			char *nr = strdup(to);
			move_entries(e, tf, from, tf, to);
			free(tf->root);
			tf->root = nr;
			tf->has_marker = announce_new;
			/* the root governing the new name (a single file moved
			 * into a checkpoint directory is recorded in its
			 * manifest; model seed 7404 stored it as a plain
			 * object that manifest hid) */
			free(tf->mroot);
			tf->mroot = manifest_root ? strdup(manifest_root) : NULL;
			jr_txn_set_root(e->j, tf->id, to, tf->mroot);
			/* a single file renamed is ordered by its rename too:
			 * after what it replaces (f0's own commit queued
			 * behind it landed last: the old f0 won); so is a
			 * directory moved onto a name a later step deletes
			 * (model seed 7507: the delete of the empty directory
			 * it replaced ran after its commit and took it) */
			if ((was_parked || tf->kind == T_FILE || after) &&
			    !eng_parked(e, tf) && eng_requeue(e, tf) < 0)
				log_error("commit: %s keeps its place in the "
					  "queue (journal error)",
					  tf->root);
		} else {
			move_entries(e, tf, from, tt, to);
			/* a directory transaction's root moved into another
			 * (mkdir b; mv b a/c, a still open): nothing is left
			 * of it but its marker and intent, which its clean-up
			 * deletes; its commit showed an empty b */
			orphan = tf->kind == T_DIR && !strcmp(from, tf->root);
			if (orphan)
				rc = jr_txn_set_state(e->j, tf->id,
						      TS_ABORTED);
		}
		if (rc)
			jr_rollback(e->j);
		else
			rc = jr_commit(e->j);
	}
	if (!rc && orphan) {
		tf->state = TS_ABORTED;
		eng_txn_progress(e, tf);
	}
	if (!rc) {
		JOURNAL_CHECK(eng_journaled_none_under(e, tf->id, from) ||
			      (tf == tt && (proto_under(to, from, NULL) ||
					    proto_under(from, to, NULL))));
		for (efile *f = tt->files; f; f = f->next)
			JOURNAL_CHECK(eng_journaled_file(e, f));
		eng_sched_all(e);
	}
	ckpt_unlock(&e->mu);
	return rc;
}

int eng_txn_seal(eng *e, uint64_t txn)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	ckpt_lock(&e->mu);
	etxn *t = eng_find_txn(e, txn);
	int rc = t ? 0 : -ENOENT;
	if (t && t->poison)
		rc = -EIO; /* a failed write: not with the short file */
	else if (t && t->state == TS_OPEN) {
		rc = jr_txn_set_state(e->j, t->id, TS_SEALED);
		if (!rc) {
			t->state = TS_SEALED;
			t->sealed_at = eng_now();
		}
		eng_sched_all(e);
	}
	CKPTFS_ASSERT(!t || rc || eng_journaled_txn(e, t->id, t->state));
	ckpt_unlock(&e->mu);
	return rc;
}

int eng_txn_abort(eng *e, uint64_t txn)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	ckpt_lock(&e->mu);
	etxn *t = eng_find_txn(e, txn);
	int rc = t ? jr_txn_set_state(e->j, t->id, TS_ABORTED) : -ENOENT;
	if (!rc) {
		t->state = TS_ABORTED;
		CKPTFS_ASSERT(eng_journaled_txn(e, t->id, TS_ABORTED));
		eng_txn_progress(e, t); /* its clean-up starts afresh */
		for (efile *f = t->files; f; f = f->next) {
			f->gen++;
			/* its bytes are never needed again: the space comes
			 * back now, as a local disk gives it back at rm, not
			 * once the clean-up's turn comes (a write right after
			 * `rm` of a file that filled the disk failed with
			 * ENOSPC while the clean-up waited behind a commit) */
			free_staging(e, f);
		}
		eng_sched_all(e);
	}
	ckpt_unlock(&e->mu);
	return rc;
}

/* ---- remote namespace --------------------------------------------------- */

/* held: the row of the held delete this step replaces (eng_release_delete),
 * forgotten with it, or 0. */
static int remote_step_id(eng *e, enum tkind k, const char *from,
			  const char *to, bool is_dir, const char *mroot,
			  const eng_dir_attrs *pd, size_t npd, int64_t held,
			  uint64_t *id)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	ckpt_lock(&e->mu);
	int64_t row = 0;
	bool tx = npd || held;
	int rc = tx ? jr_begin(e->j) : 0;
	if (!rc)
		rc = jr_txn_insert(e->j, k, from, to, is_dir, TS_SEALED, mroot,
				   &row);
	etxn *t = NULL;
	if (!rc &&
	    !(t = eng_txn_new(e, row, k, from, to, is_dir, TS_SEALED, mroot)))
		rc = -ENOMEM;
	/* the parents it records (eng_remote_rename_in), with it or not at
	 * all: nothing runs it before mu is released */
	for (size_t i = 0; !rc && i < npd; i++)
		rc = dir_put(e, t, pd[i].path, &pd[i].m);
	if (!rc && held)
		rc = jr_held_delete(e->j, held);
	if (tx && !rc)
		rc = jr_commit(e->j);
	else if (tx)
		jr_rollback(e->j);
	if (rc && t)
		eng_free_txn(e, t);
	CKPTFS_ASSERT(rc || eng_journaled_txn(e, row, TS_SEALED));
	for (size_t i = 0; !rc && i < npd; i++)
		CKPTFS_ASSERT(eng_journaled_dir(e, row, pd[i].path));
	pthread_cond_broadcast(&e->cv);
	ckpt_unlock(&e->mu);
	if (id)
		*id = rc ? 0 : (uint64_t)row;
	return rc;
}

static int remote_step(eng *e, enum tkind k, const char *from, const char *to,
		       bool is_dir, const char *mroot, const eng_dir_attrs *pd,
		       size_t npd, int64_t held)
{
	return remote_step_id(e, k, from, to, is_dir, mroot, pd, npd, held,
			      NULL);
}

int eng_remote_delete(eng *e, const char *path, bool is_dir)
{
	return remote_step(e, T_RDEL, path, NULL, is_dir, NULL, NULL, 0, 0);
}

int eng_remote_delete_keep(eng *e, const char *path, bool is_dir,
			   const char *keep)
{
	return remote_step(e, T_RDEL, path, keep, is_dir, NULL, NULL, 0, 0);
}

int eng_remote_rename(eng *e, const char *from, const char *to, bool is_dir,
		      const char *manifest_root)
{
	return remote_step(e, T_RREN, from, to, is_dir, manifest_root, NULL,
			   0, 0);
}

int eng_remote_rename_in(eng *e, const char *from, const char *to,
			 bool is_dir, const char *manifest_root,
			 const eng_dir_attrs *parents, size_t n)
{
	return remote_step(e, T_RREN, from, to, is_dir, manifest_root,
			   parents, n, 0);
}

int eng_dir_set(eng *e, const char *path, const eng_meta *m,
		const char *record_root, uint64_t *id)
{
	if (!record_root || !proto_under(path, record_root, NULL))
		return -EINVAL;
	eng_dir_attrs d = {path, *m};
	return remote_step_id(e, T_RATTR, path, NULL, false, record_root, &d,
			      1, 0, id);
}

/* ---- held deletes (doc/commit.md "Journal") ----------------------------- */

/* The row goes to the WAL without an fsync, as a first put does: a killed
 * ckptfs keeps it (the page cache has it), and unlink(2) promises no more
 * than close(2) until an fsync; an `rm -r` of many files costs no fsync
 * per name. */
int eng_hold_delete(eng *e, const char *path, bool is_dir, const char *keep,
		    const uint64_t *replaced, size_t n, uint64_t *id)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	ckpt_lock(&e->mu);
	bool lazy = jr_set_durable(e->j, false) == 0;
	int64_t row = 0;
	int rc = n ? jr_begin(e->j) : 0;
	if (!rc)
		rc = jr_held_insert(e->j, path, is_dir, keep, &row);
	for (size_t i = 0; !rc && i < n; i++)
		rc = jr_held_delete(e->j, (int64_t)replaced[i]);
	if (n && !rc)
		rc = jr_commit(e->j);
	else if (n)
		jr_rollback(e->j);
	if (lazy)
		jr_set_durable(e->j, true);
	ckpt_unlock(&e->mu);
	*id = rc ? 0 : (uint64_t)row;
	return rc;
}

int eng_release_delete(eng *e, uint64_t id, const char *path, bool is_dir,
		       const char *keep)
{
	return remote_step(e, T_RDEL, path, keep, is_dir, NULL, NULL, 0,
			   (int64_t)id);
}

typedef struct held_vec {
	struct held_one {
		int64_t id;
		char *path, *keep;
		bool is_dir;
	} *v;
	size_t n, cap;
} held_vec;

static int held_one(void *arg, int64_t id, const char *path, bool is_dir,
		    const char *keep)
{
	held_vec *h = arg;
	if (h->n == h->cap) {
		struct held_one *v = vec_grow(h->v, &h->cap, sizeof *v, 16);
		if (!v)
			return -ENOMEM;
		h->v = v;
	}
	struct held_one *o = &h->v[h->n++];
	o->id = id;
	o->path = strdup(path ? path : "");
	o->keep = keep ? strdup(keep) : NULL;
	o->is_dir = is_dir;
	return !o->path || (keep && !o->keep) ? -ENOMEM : 0;
}

int eng_held_foreach(eng *e,
		     void (*fn)(void *arg, uint64_t id, const char *path,
				bool is_dir, const char *keep),
		     void *arg)
{
	held_vec h = {0};
	ckpt_lock(&e->mu);
	int rc = jr_held_list(e->j, held_one, &h);
	ckpt_unlock(&e->mu);
	for (size_t i = 0; !rc && i < h.n; i++)
		fn(arg, (uint64_t)h.v[i].id, h.v[i].path, h.v[i].is_dir,
		   h.v[i].keep);
	for (size_t i = 0; i < h.n; i++) {
		free(h.v[i].path);
		free(h.v[i].keep);
	}
	free(h.v);
	return rc;
}
