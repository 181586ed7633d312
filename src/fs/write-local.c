/*
 * Local nodes (the overlay, fs/overlay.h): the small facts about them the
 * write files share (the staging file as the kernel wrote it through
 * passthrough, a transaction's last change, the engine's view of a node's
 * attributes, who made a request).  The read side asks through
 * fs/local.h.  Calls no other file of the write side.
 */
#include "fs/write-local.h"

#include "fs/ctx.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>

#include <jansson.h>

#include "cache/cache.h"
#include "commit/engine.h"
#include "proto/meta.h"
#include "util/log.h"

ov_node *wr_local_of(fs_ctx *fs, const fs_inode *n)
{
	if (!fs->eng && !fs->ov.n)
		return NULL;
	ov_node *o = ov_get(&fs->ov, n->path);
	return o && o->kind != OV_WHITEOUT ? o : NULL;
}

static bool same_ts(struct timespec a, struct timespec b)
{
	return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

/* Records what the staging file looks like now, as seen. */
void wr_pt_snap(ov_node *o)
{
	struct stat st;
	if (o->st && fstat(o->st->fd, &st) == 0) {
		o->pt_ctime = st.st_ctim;
		o->pt_size = (uint64_t)st.st_size;
	}
}

/*
 * Whether the staging disk is full as a write that failed for lack of
 * space leaves it: less than PT_FULL_FREE available to unprivileged users
 * (f_bavail: a root ckptfs may still write into ext4's reserved blocks,
 * but its own ENOSPC comes only once they are gone, with f_bavail 0 well
 * before).  A write that fails with ENOSPC leaves less than one block
 * free; PT_FULL_FREE leaves room for what can come back before the close
 * is seen: the journal's reserve (4 MiB, commit/journal.c), freed to
 * journal a fact on the full disk, and the reservations a filesystem
 * gives back when a file is closed.  Passthrough is chosen only with more
 * than cache_min_free + 1 GiB free (fs/write-pt.c), so a disk that went
 * from there to less than 8 MiB while the file was written has almost
 * always failed a write.
 */
#define PT_FULL_FREE (8ull << 20)

static bool staging_disk_full(fs_ctx *fs)
{
	struct statvfs sv;
	if (!fs->cache || statvfs(cache_dir(fs->cache), &sv) < 0)
		return false;
	return (uint64_t)sv.f_bavail * sv.f_frsize < PT_FULL_FREE;
}

void wr_pt_absorb(fs_ctx *fs, ov_node *o)
{
	struct stat st;
	if (!o->pt_writers || !o->st || fstat(o->st->fd, &st) < 0)
		return;
	if (same_ts(st.st_ctim, o->pt_ctime) &&
	    (uint64_t)st.st_size == o->pt_size)
		return;
	o->pt_ctime = st.st_ctim;
	o->pt_size = o->size = (uint64_t)st.st_size;
	o->mtime = o->ctime = st.st_mtim;
	o->dirty = true;
	wr_touch(o->txn);
	/* the kernel's writes never reach ckptfs, nor their errors: a file
	 * written while the disk filled may be short (the application got
	 * ENOSPC), and is treated as a failed write (doc/commit.md "Failed
	 * writes"); -ENOSPC: inferred, not seen (eng_file_poison) */
	if (o->failed || !staging_disk_full(fs))
		return;
	o->failed = -ENOSPC;
	log_warn("%s: the staging disk filled while it was written through "
		 "passthrough: it may be short, and is not committed until "
		 "it is written again or removed",
		 o->path);
	if (o->txn && o->linked)
		eng_file_poison(fs->eng, o->txn->id, o->path, o->failed);
}

void wr_touch(ov_txn *x)
{
	if (x)
		x->last_change = wr_now_s();
}

bool wr_is_single_root(const ov_node *o)
{
	return o->txn && !o->txn->is_dir && !strcmp(o->txn->root, o->path);
}

char *wr_child_path(const fs_inode *p, const char *name)
{
	return ov_join(p->path, name);
}

double wr_now_s(void)
{
	return fs_now();
}

void wr_meta_of(const ov_node *o, eng_meta *m, buf *xa)
{
	memset(m, 0, sizeof *m);
	m->mode = o->mode;
	m->rdev = o->rdev;
	m->uid = o->uid;
	m->gid = o->gid;
	m->mtime = o->mtime;
	/* the engine takes the overlay's own record format */
	(void)xa;
	if (o->xattrs.len) {
		m->xattrs = o->xattrs.data;
		m->xattrs_len = o->xattrs.len;
	}
	m->symlink = o->kind == OV_LINK ? o->target : NULL;
}

char *wr_xattrs_text(const char *blob, size_t len)
{
	json_t *xj = len ? proto_xattrs_json(blob, len) : NULL;
	char *s = xj && json_object_size(xj) ? json_dumps(xj, JSON_COMPACT)
					     : NULL;
	json_decref(xj);
	return s;
}

/* What a change of a file's bytes or owner does to its set-id bits. */
void wr_kill_suid(ov_node *o, bool in_group)
{
	if (o->kind != OV_FILE)
		return; /* a directory keeps them (chown) */
	o->mode &= ~(mode_t)S_ISUID;
	/* set-group-ID without group execute marks mandatory locking: it
	 * goes only for a caller outside the file's group (Linux 6.2+) */
	if ((o->mode & S_IXGRP) || !in_group)
		o->mode &= ~(mode_t)S_ISGID;
}

void wr_caller_of(fuse_req_t req, wr_caller *c)
{
	const struct fuse_ctx *fc = fuse_req_ctx(req);
	c->uid = fc ? fc->uid : 0;
	c->gid = fc ? fc->gid : 0;
	c->n = fuse_req_getgroups(req, WR_CALLER_GROUPS, c->g);
	if (c->n > WR_CALLER_GROUPS)
		c->n = WR_CALLER_GROUPS;
}

bool wr_caller_in(const wr_caller *c, gid_t gid)
{
	if (c->n < 0 || c->uid == 0 || c->gid == gid)
		return true; /* unknown: keep the bit, as root's call would */
	for (int i = 0; i < c->n; i++)
		if (c->g[i] == gid)
			return true;
	return false;
}

void wr_dir_changed(fs_ctx *fs, fs_inode *d)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	wr_dir_changed_at(fs, d, &now);
}

bool wr_recorded_dir(fs_ctx *fs, const fs_inode *d, eng_meta *m, buf *xa)
{
	if (!d || !d->is_dir || !d->has_attrs || wr_local_of(fs, d) ||
	    (!d->mtime.tv_sec && !d->mtime.tv_nsec))
		return false;
	memset(m, 0, sizeof *m);
	m->mode = d->mode;
	m->uid = d->uid;
	m->gid = d->gid;
	m->mtime = d->mtime;
	if (d->xattrs_json) {
		proto_xattrs_decode(d->xattrs_json, xa);
		m->xattrs = xa->data;
		m->xattrs_len = xa->len;
	}
	return true;
}

size_t wr_rename_records(fs_ctx *fs, fs_inode *p, fs_inode *np,
			 fs_inode *sd, const struct timespec *now,
			 eng_dir_attrs pd[3], buf xa[3])
{
	size_t n = 0;
	for (int i = 0; i < 3; i++) {
		fs_inode *d = i == 2 ? sd : i ? np : p;
		if ((i == 1 && np == p) ||
		    !wr_recorded_dir(fs, d, &pd[n].m, &xa[n]))
			continue;
		pd[n].path = d->path;
		if (i < 2) /* the source keeps its own mtime */
			pd[n].m.mtime = *now;
		n++;
	}
	return n;
}

void wr_dir_changed_at(fs_ctx *fs, fs_inode *d, const struct timespec *t)
{
	struct timespec now = *t;
	d->mtime = d->name_change = now;
	ov_node *o = wr_local_of(fs, d);
	if (o) {
		o->mtime = o->ctime = now;
		if (o->kind == OV_DIR)
			o->meta_dirty = true; /* recorded again at the seal */
	}
}

bool wr_require_engine(fuse_req_t req)
{
	if (fs_req_ctx(req)->eng)
		return true;
	fuse_reply_err(req, EROFS);
	return false;
}
