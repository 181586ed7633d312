/*
 * Poisoned transactions (doc/commit.md, "Failed writes"): a write that
 * failed (EIO, ENOSPC, EDQUOT) on a file of an open transaction keeps the
 * transaction from being sealed until the file is put again (rewritten)
 * or dropped (removed), or an operator drops the step.  The poisoned
 * paths are journaled, one meta row per transaction ("poison.<id>": lines
 * "<errno> <path>"; a negative errno: inferred, not seen — the staging disk
 * filled while the file was written through passthrough), so a restart
 * keeps them.  The step counts as set
 * aside (eng_set_aside): steps that depend on it wait, `ckptfs sync`
 * returns an error naming it, `ckptfs status` shows it "poisoned".
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commit/internal.h"
#include "util/log.h"

static void row_key(const etxn *t, char out[40])
{
	snprintf(out, 40, "poison.%" PRId64, t->id);
}

static int save(eng *e, etxn *t)
{
	char k[40];
	row_key(t, k);
	int rc = jr_meta_set(e->j, k, t->poison);
	if (rc < 0 && !t->poison_unsaved)
		log_warn("commit: cannot journal that %s is poisoned (%s); "
			 "tried again at its next commit trigger",
			 t->root, strerror(-rc));
	t->poison_unsaved = rc < 0;
	return rc;
}

/* The path of line l ("<errno> <path>\n"), and its length. */
static const char *line_path(const char *l, size_t *len)
{
	const char *sp = strchr(l, ' '), *nl = strchr(l, '\n');
	if (!sp || !nl || sp > nl)
		return NULL;
	*len = (size_t)(nl - sp - 1);
	return sp + 1;
}

/* Whether path (of length len) lies under dir (proto_under). */
static bool line_under(const char *path, size_t len, const char *dir,
		       bool under)
{
	size_t dl = strlen(dir);
	if (len < dl || strncmp(path, dir, dl))
		return false;
	return len == dl || (under && (!dl || path[dl] == '/'));
}

/* Removes the lines of t->poison whose path is path (under: or lies
 * under it); journals the change.  mu. */
static void clear(eng *e, etxn *t, const char *path, bool under)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	if (!t->poison)
		return;
	buf b = BUF_INIT;
	bool changed = false;
	for (const char *l = t->poison; *l;) {
		const char *nl = strchr(l, '\n');
		if (!nl)
			break;
		size_t len = 0;
		const char *p = line_path(l, &len);
		if (p && line_under(p, len, path, under)) {
			changed = true;
			log_info("commit: %.*s written again or removed: it no "
				 "longer holds back %s",
				 (int)len, p, t->root);
		} else {
			buf_append(&b, l, (size_t)(nl + 1 - l));
		}
		l = nl + 1;
	}
	if (!changed) {
		buf_free(&b);
		return;
	}
	free(t->poison);
	t->poison = b.len ? buf_steal(&b) : NULL;
	buf_free(&b);
	save(e, t);
	eng_sched_all(e);
	pthread_cond_broadcast(&e->cv);
}

void eng_poison_clear(eng *e, etxn *t, const char *path, bool under)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	clear(e, t, path, under);
}

int eng_file_poison(eng *e, uint64_t txn, const char *path, int err)
{
	ckpt_lock(&e->mu);
	etxn *t = eng_find_txn(e, txn);
	int rc =
	    t && (t->kind == T_DIR || t->kind == T_FILE) && t->state == TS_OPEN
		? 0
		: -ENOENT;
	bool known = false;
	for (const char *l = rc ? "" : t->poison ? t->poison : ""; *l;) {
		size_t len = 0;
		const char *p = line_path(l, &len);
		const char *nl = strchr(l, '\n');
		if (p && line_under(p, len, path, false))
			known = true;
		if (!nl)
			break;
		l = nl + 1;
	}
	if (!rc && known && t->poison_unsaved)
		rc = save(e, t);
	if (!rc && !known) {
		buf b = BUF_INIT;
		buf_printf(&b, "%s%d %s\n", t->poison ? t->poison : "", err,
			   path);
		free(t->poison);
		t->poison = buf_steal(&b);
		rc = save(e, t);
		if (err < 0)
			log_warn("commit: the staging disk filled while %s was "
				 "written through passthrough (%s): %s is not "
				 "committed until the file is written again or "
				 "removed, or `ckptfs drop` gives step %" PRId64
				 " up",
				 path, strerror(-err), t->root, t->id);
		else
			log_warn("commit: a write to %s failed (%s): %s is not "
				 "committed until the file is written again or "
				 "removed, or `ckptfs drop` gives step %" PRId64
				 " up",
				 path, strerror(err), t->root, t->id);
	}
	ckpt_unlock(&e->mu);
	return rc;
}

bool eng_txn_poisoned(eng *e, uint64_t txn)
{
	ckpt_lock(&e->mu);
	etxn *t = eng_find_txn(e, txn);
	bool p = t && t->poison;
	if (p && t->poison_unsaved)
		save(e, t);
	ckpt_unlock(&e->mu);
	return p;
}

int eng_poison_load(eng *e, etxn *t)
{
	char k[40];
	row_key(t, k);
	char *v = jr_meta_get(e->j, k);
	if (v && !*v) {
		free(v);
		v = NULL;
	}
	t->poison = v;
	return 0;
}

char *eng_poison_text(const etxn *t)
{
	if (!t->poison)
		return NULL;
	size_t len = 0, n = 0;
	const char *p = line_path(t->poison, &len);
	for (const char *l = t->poison; (l = strchr(l, '\n')); l++)
		n++;
	int err = atoi(t->poison);
	buf b = BUF_INIT;
	if (err < 0) /* inferred (eng_file_poison) */
		buf_printf(&b,
			   "poisoned: the cache disk filled while %.*s was "
			   "written through passthrough (%s): it may be short",
			   (int)len, p ? p : "?", strerror(-err));
	else
		buf_printf(&b, "poisoned: a write to %.*s failed (%s)",
			   (int)len, p ? p : "?", strerror(err > 0 ? err : EIO));
	if (n > 1)
		buf_printf(&b, " and to %zu more file%s", n - 1,
			   n == 2 ? "" : "s");
	buf_puts(&b, "; it is not committed until the file is written again "
		     "or removed, or `ckptfs drop` gives the step up");
	return buf_steal(&b);
}
