/*
 * Remote deletes held back (struct wr_deletes): `rm -r` unlinks every file
 * before it removes the directory, and a directory delete is atomic for
 * readers while file-by-file deletes are not, so unlinks of remote names
 * are held until the directory above them goes (then one directory delete
 * replaces them), until any other change reaches the engine (order is
 * kept: wr_ordered, wr_ordered_for), or for a second of quiet with no
 * listing being fetched (the idle thread, fs/write-idle.c).  Each one is
 * in the journal from the start (eng_hold_delete), so a killed mount's
 * next mount sends those it held (eng_open).
 */
#include "fs/write-deletes.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "commit/engine.h"
#include "fs/ctx.h"
#include "fs/write-local.h"
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

/* Whether the delete held right after d->v[i] stores the same directory
 * object again: v[i]'s store of it is then not needed. */
static bool kept_next(const struct wr_deletes *d, size_t i)
{
	return i + 1 < d->n && d->v[i + 1].keep &&
	       !strcmp(d->v[i + 1].keep, d->v[i].keep);
}

/* Sends the held remote deletes to the engine, in order; of removals in
 * a row in one directory only the last stores the directory's object
 * again (one PUT for `rm a b c`).  Table locked. */
void wr_flush_deletes(fs_ctx *fs)
{
	struct wr_deletes *d = fs->dels;
	for (size_t i = 0; d && i < d->n; i++) {
		const char *keep = d->v[i].keep && !kept_next(d, i)
					   ? d->v[i].keep
					   : NULL;
		int rc = eng_release_delete(fs->eng, d->v[i].hid, d->v[i].path,
					    d->v[i].is_dir, keep);
		if (rc < 0)
			log_error("delete of %s could not be journaled: %s",
				  d->v[i].path, strerror(-rc));
	}
	wr_dels_clear(d);
}

/* Whether path lies in the tree of the held deletes (they all share their
 * top directory: a delete of another tree sends them first). */
static bool related(const struct wr_deletes *d, const char *path)
{
	const char *top = d->v[0].path;
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
		wr_flush_deletes(fs);
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
	wr_del n = {strdup(path), is_dir, keep ? strdup(keep) : NULL, 0};
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

/* Before any other fact reaches the engine.  Table locked. */
void wr_ordered(fs_ctx *fs)
{
	if (fs->dels && fs->dels->n)
		wr_flush_deletes(fs);
}

/* Whether one of a and b is the other or lies under it. */
static bool overlaps(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t l = la < lb ? la : lb;
	return !strncmp(a, b, l) &&
	       (la == lb || (la < lb ? b[l] : a[l]) == '/');
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
		if (overlaps(d->v[i].path, path)) {
			wr_flush_deletes(fs);
			return;
		}
}

