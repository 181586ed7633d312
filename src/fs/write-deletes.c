/*
 * Remote deletes held back (struct wr_deletes): `rm -r` unlinks every file
 * before it removes the directory, and a directory delete is atomic for
 * readers while file-by-file deletes are not, so unlinks of remote names
 * are held until the directory above them goes (then one directory delete
 * replaces them), until any other change reaches the engine (order is
 * kept: wr_ordered, wr_ordered_for), or for a second of quiet with no
 * listing being fetched (the idle thread, fs/write-idle.c).  Each one is
 * in the journal from the start (eng_hold_delete), so a killed mount's
 * next mount holds them again (wr_dels_revive).  Those revived deletes
 * wait for the rmdir that ends the killed `rm -r` (one directory delete,
 * as if no kill had come), a change overlapping their names, a sync or
 * the unmount; not for a second of quiet or a change elsewhere: sent then,
 * they showed other hosts a checkpoint cut short by the kill (the crash
 * loop's rotation, killed mid-rmtree).  Sent later than issued, they
 * still reach the bucket after what came before them: the safe direction.
 */
#include "fs/write-deletes.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "commit/engine.h"
#include "fs/ctx.h"
#include "fs/write-local.h"
#include "proto/keys.h"
#include "util/log.h"
#include "util/vec.h"

void wr_dels_clear(struct wr_deletes *d)
{
	for (size_t i = 0; d && i < d->n; i++) {
		free(d->v[i].path);
		free(d->v[i].keep);
	}
	if (d)
		d->n = 0;
}

/* Whether held delete v goes now: every one that is not revived, and a
 * revived one when all do or when it overlaps a or b. */
static bool goes(const wr_del *v, bool all, const char *a, const char *b)
{
	return !v->revived || all || (a && proto_overlap(v->path, a)) ||
	       (b && proto_overlap(v->path, b));
}

/* Sends the held remote deletes that go (goes), in order, to the engine;
 * of removals in a row in one directory only the last stores the
 * directory's object again (one PUT for `rm a b c`).  The others stay
 * held, in order.  Table locked. */
static void flush_held(fs_ctx *fs, bool all, const char *a, const char *b)
{
	struct wr_deletes *d = fs->dels;
	size_t k = 0;
	for (size_t i = 0; d && i < d->n; i++) {
		wr_del *v = &d->v[i];
		if (!goes(v, all, a, b)) {
			d->v[k++] = *v;
			continue;
		}
		/* the next one sent stores the same directory again */
		size_t j = i + 1;
		while (j < d->n && !goes(&d->v[j], all, a, b))
			j++;
		bool again = v->keep && j < d->n && d->v[j].keep &&
			     !strcmp(d->v[j].keep, v->keep);
		int rc = eng_release_delete(fs->eng, v->hid, v->path,
					    v->is_dir,
					    again ? NULL : v->keep);
		if (rc < 0)
			log_error("delete of %s could not be journaled: %s",
				  v->path, strerror(-rc));
		free(v->path);
		free(v->keep);
	}
	if (d)
		d->n = k;
}

void wr_flush_deletes(fs_ctx *fs)
{
	flush_held(fs, true, NULL, NULL);
}

void wr_flush_quiet(fs_ctx *fs)
{
	flush_held(fs, false, NULL, NULL);
}

/* Whether path lies in the tree of the held deletes (they all share their
 * top directory: a delete of another tree sends them first). */
static bool related(const struct wr_deletes *d, const char *path)
{
	size_t i = 0;
	while (i < d->n && d->v[i].revived)
		i++;
	if (i == d->n)
		return true; /* only revived ones: they wait (top of file) */
	const char *top = d->v[i].path;
	const char *slash = strchr(top, '/');
	size_t tl = slash ? (size_t)(slash - top) : strlen(top);
	return !strncmp(path, top, tl) && (path[tl] == '/' || path[tl] == 0);
}

/* Whether held delete v is replaced by a directory delete of path (pl its
 * length). */
static bool under(const wr_del *v, const char *path, size_t pl)
{
	return !strncmp(v->path, path, pl) && v->path[pl] == '/';
}

/* Holds a remote delete of path (see the top of the file), journaled at
 * once (eng_hold_delete): a SIGKILL after the call returned does not
 * bring the name back. */
int wr_hold_delete(fs_ctx *fs, const char *path, bool is_dir,
		   const char *keep)
{
	struct wr_deletes *d = fs->dels;
	size_t pl = strlen(path);
	/* deletes of unrelated trees keep their order: send what is held */
	if (d->n && !related(d, path))
		wr_flush_quiet(fs);
	if (d->n == d->cap) {
		wr_del *v = vec_grow(d->v, &d->cap, sizeof *v, 64);
		if (!v)
			return -ENOMEM;
		d->v = v;
	}
	/* a directory delete replaces the deletes of what it holds */
	size_t nr = 0;
	uint64_t *rep = NULL;
	for (size_t i = 0; is_dir && i < d->n; i++)
		nr += under(&d->v[i], path, pl);
	if (nr && !(rep = malloc(nr * sizeof *rep)))
		return -ENOMEM;
	nr = 0;
	for (size_t i = 0; rep && i < d->n; i++)
		if (under(&d->v[i], path, pl))
			rep[nr++] = d->v[i].hid;
	wr_del n = {strdup(path), is_dir, keep ? strdup(keep) : NULL, 0,
		    false};
	int rc = !n.path || (keep && !n.keep) ? -ENOMEM : 0;
	if (!rc)
		rc = eng_hold_delete(fs->eng, path, is_dir, keep, rep, nr,
				     &n.hid);
	free(rep);
	if (rc) {
		free(n.path);
		free(n.keep);
		return rc;
	}
	size_t k = 0;
	for (size_t i = 0; i < d->n; i++) {
		if (is_dir && under(&d->v[i], path, pl)) {
			free(d->v[i].path);
			free(d->v[i].keep);
		} else
			d->v[k++] = d->v[i];
	}
	d->n = k;
	d->v[d->n++] = n;
	d->last = wr_now_s();
	return 0;
}

bool wr_keeps_parent(const fs_inode *p)
{
	return p->has_attrs && p->path[0];
}

/* The parent of path a removal keeps (malloc'd), or NULL: in_txn, the
 * parent is a directory of path's transaction, which its manifest
 * records; else as wr_keeps_parent says.  Table locked. */
static char *kept_parent(fs_ctx *fs, const char *path, bool in_txn)
{
	char *parent = ov_parent(path);
	fs_inode *p = parent && parent[0] && !in_txn
			  ? fs_itable_find(fs->it, parent)
			  : NULL;
	if (parent && parent[0] &&
	    (in_txn || (p && p->is_dir && wr_keeps_parent(p))))
		return parent;
	free(parent);
	return NULL;
}

int wr_hold_delete_in(fs_ctx *fs, const char *path, bool is_dir,
		      bool in_txn)
{
	char *keep = kept_parent(fs, path, in_txn);
	int rc = wr_hold_delete(fs, path, is_dir, keep);
	free(keep);
	return rc;
}

int wr_remote_delete_in(fs_ctx *fs, const char *path, bool is_dir,
			bool in_txn)
{
	char *keep = kept_parent(fs, path, in_txn);
	int rc = keep ? eng_remote_delete_keep(fs->eng, path, is_dir, keep)
		      : eng_remote_delete(fs->eng, path, is_dir);
	free(keep);
	return rc;
}

/* Before any other fact reaches the engine.  Table locked. */
void wr_ordered(fs_ctx *fs, const char *a, const char *b)
{
	if (fs->dels && fs->dels->n)
		flush_held(fs, false, a, b);
}

/* Before a fact about path only: held deletes of other paths (an rm -r in
 * progress) stay held, so its rmdir still makes them one directory delete
 * (a `latest` written in the middle of a rotation's rm -r split it into
 * file deletes, seen by readers).  Those deletes then reach the bucket
 * after this fact, never before it: the safe direction.  Table locked. */
void wr_ordered_for(fs_ctx *fs, const char *path)
{
	struct wr_deletes *d = fs->dels;
	for (size_t i = 0; d && i < d->n; i++)
		if (proto_overlap(d->v[i].path, path)) {
			flush_held(fs, false, path, NULL);
			return;
		}
}

struct under_ctx {
	const char *path;
	uint64_t before;
	ov_node **v;
	size_t n, cap;
};

static void collect_under(void *arg, ov_node *o)
{
	struct under_ctx *u = arg;
	if (o->kind == OV_WHITEOUT || !proto_under(o->path, u->path, NULL))
		return;
	if (u->before != UINT64_MAX && (!o->txn || o->txn->id >= u->before))
		return;
	if (u->n == u->cap) {
		ov_node **v = vec_grow(u->v, &u->cap, sizeof *v, 16);
		if (!v)
			return;
		u->v = v;
	}
	u->v[u->n++] = o;
}

void wr_hide_restored(fs_ctx *fs, const char *path, uint64_t before)
{
	struct under_ctx u = {path, before, NULL, 0, 0};
	ov_each(&fs->ov, collect_under, &u);
	for (size_t i = 0; i < u.n; i++)
		ov_remove(&fs->ov, u.v[i]);
	free(u.v);
	if (!ov_get(&fs->ov, path)) {
		ov_node *w = ov_add(&fs->ov, path, OV_WHITEOUT, NULL);
		if (w)
			w->wo_time = wr_now_s();
	}
}

static void revive_one(void *arg, uint64_t id, const char *path, bool is_dir,
		       const char *keep)
{
	fs_ctx *fs = arg;
	struct wr_deletes *d = fs->dels;
	if (d->n == d->cap) {
		wr_del *v = vec_grow(d->v, &d->cap, sizeof *v, 64);
		if (!v)
			return; /* stays in the journal for the next mount */
		d->v = v;
	}
	wr_del n = {strdup(path), is_dir, keep ? strdup(keep) : NULL, id,
		    true};
	if (!n.path || (keep && !n.keep)) {
		free(n.path);
		free(n.keep);
		return;
	}
	d->v[d->n++] = n;
	d->last = wr_now_s();
	wr_hide_restored(fs, path, UINT64_MAX);
}

void wr_dels_revive(fs_ctx *fs)
{
	if (!fs->eng || !fs->dels)
		return;
	int rc = eng_held_foreach(fs->eng, revive_one, fs);
	if (rc < 0)
		log_error("the deletes held at the crash could not be read: %s",
			  strerror(-rc));
	else if (fs->dels->n)
		log_info("%zu remote delete(s) held at the crash held again "
			 "(sent with the rmdir that ends them, a change to "
			 "their names, a sync or the unmount)",
			 fs->dels->n);
}

char **wr_dels_moving(fs_ctx *fs, const char *dir)
{
	struct wr_deletes *d = fs->dels;
	size_t k = 0;
	char **v = calloc((d ? d->n : 0) + 1, sizeof *v);
	for (size_t i = 0; d && i < d->n; i++) {
		wr_del *h = &d->v[i];
		if (!proto_under(h->path, dir, NULL))
			continue;
		if (h->keep && proto_under(h->keep, dir, NULL)) {
			free(h->keep); /* never made at the old name */
			h->keep = NULL;
		}
		if (v && (v[k] = strdup(h->path)))
			k++;
	}
	return v;
}

void wr_dels_free_paths(char **paths)
{
	for (size_t i = 0; paths && paths[i]; i++)
		free(paths[i]);
	free(paths);
}

/* The held deletes still name the old names, and the commit at the new
 * one brought them back (model seed 7504: rmdir f0/g/c, mv f0 c, and
 * c/g/c showed again after the sync). */
int wr_dels_drop_moved(fs_ctx *fs, uint64_t txn, const char *from,
		       const char *to, char **gone)
{
	int rc = 0;
	for (size_t i = 0; !rc && gone[i]; i++) {
		const char *rest = NULL;
		if (!proto_under(gone[i], from, &rest) || !rest[0])
			continue; /* the root itself: not what moves */
		char *np = ov_join(to, rest);
		rc = np ? eng_file_drop(fs->eng, txn, np) : -ENOMEM;
		free(np);
	}
	return rc;
}

bool wr_dels_held_now(const fs_ctx *fs)
{
	const struct wr_deletes *d = fs->dels;
	for (size_t i = 0; d && i < d->n; i++)
		if (!d->v[i].revived)
			return true;
	return false;
}

bool wr_dels_revived_at(const fs_ctx *fs, const char *path)
{
	const struct wr_deletes *d = fs->dels;
	for (size_t i = 0; d && i < d->n; i++)
		if (d->v[i].revived && proto_overlap(d->v[i].path, path))
			return true;
	return false;
}
