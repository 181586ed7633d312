/*
 * The door between the two sides (fs/local.h): local nodes (the overlay,
 * fs/overlay.h) as lookups, stats and listings of the read side see them:
 * whether a path is local, its attributes, the overlay's part of a lookup
 * and of a directory listing; and the end of a listing's fetch, which the
 * held deletes wait for.  Calls no operation file.
 */
#include "fs/local.h"

#include "fs/ctx.h"
#include "fs/write-deletes.h"
#include "fs/write-local.h"
#include "proto/meta.h"
#include "util/vec.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

bool fs_local_fill_stat(fs_ctx *fs, const fs_inode *n, struct stat *st)
{
	ov_node *o = wr_local_of(fs, n);
	if (!o || o->placeholder)
		return false;
	wr_pt_absorb(fs, o);
	memset(st, 0, sizeof *st);
	st->st_ino = n->ino;
	st->st_uid = o->uid;
	st->st_gid = o->gid;
	switch (o->kind) {
	case OV_DIR:
		st->st_mode = S_IFDIR | (o->mode & 07777);
		st->st_nlink = 2;
		st->st_size = 4096;
		break;
	case OV_LINK:
		st->st_mode = S_IFLNK | 0777;
		st->st_nlink = 1;
		st->st_size = (off_t)strlen(o->target);
		break;
	default:
		st->st_mode = proto_file_mode(o->mode);
		st->st_nlink = 1;
		if (S_ISREG(st->st_mode)) {
			st->st_size = (off_t)o->size;
			st->st_blocks = (blkcnt_t)((o->size + 511) / 512);
		}
		st->st_rdev = (dev_t)o->rdev;
	}
	st->st_blksize = 1 << 20;
	st->st_mtim = st->st_atim = o->mtime;
	if (o->atime.tv_sec || o->atime.tv_nsec)
		st->st_atim = o->atime;
	st->st_ctim = o->ctime;
	return true;
}

bool fs_local_is_dir(fs_ctx *fs, const fs_inode *n)
{
	ov_node *o = wr_local_of(fs, n);
	return o && o->kind == OV_DIR && !o->merge;
}

bool fs_local_has_node(fs_ctx *fs, const fs_inode *n)
{
	return wr_local_of(fs, n) != NULL;
}

int fs_local_lookup(fs_ctx *fs, fs_inode *p, const char *name,
		    fs_inode **out)
{
	*out = NULL;
	if (!fs->ov.n)
		return 0;
	char *path = wr_child_path(p, name);
	if (!path)
		return 0;
	ov_node *o = ov_get(&fs->ov, path);
	free(path);
	if (!o)
		return 0;
	if (o->kind == OV_WHITEOUT)
		return 1;
	*out = fs_itable_child(fs->it, p, name, o->kind == OV_DIR);
	return *out ? 1 : 0;
}

typedef struct merge_ctx {
	fs_dirhandle *dh;
	size_t cap;
	int rc;
} merge_ctx;

static void merge_one(void *arg, ov_node *o)
{
	merge_ctx *m = arg;
	fs_dirhandle *dh = m->dh;
	const char *name = strrchr(o->path, '/');
	name = name ? name + 1 : o->path;
	for (size_t i = 0; i < dh->n; i++) {
		if (strcmp(dh->v[i].name, name))
			continue;
		free(dh->v[i].name);
		free(dh->v[i].etag);
		dh->v[i] = dh->v[--dh->n];
		break;
	}
	if (o->kind == OV_WHITEOUT || m->rc)
		return;
	fs_dirent_snap *v = vec_reserve(dh->v, &m->cap, sizeof *v, dh->n + 1, 16);
	if (!v) {
		m->rc = -1;
		return;
	}
	dh->v = v;
	fs_dirent_snap *s = &dh->v[dh->n];
	memset(s, 0, sizeof *s);
	s->name = strdup(name);
	if (!s->name) {
		m->rc = -1;
		return;
	}
	s->is_dir = o->kind == OV_DIR;
	s->size = o->size;
	s->mtime = o->mtime;
	dh->n++;
}

int fs_local_merge_listing(fs_ctx *fs, fs_inode *d, fs_dirhandle *dh)
{
	if (!fs->ov.n)
		return 0;
	merge_ctx m = {dh, dh->n, 0};
	ov_children(&fs->ov, d->path, merge_one, &m);
	return m.rc;
}

void fs_local_fetch_done(fs_ctx *fs)
{
	if (fs->dels && fs->dels->n)
		fs->dels->last = wr_now_s();
}
