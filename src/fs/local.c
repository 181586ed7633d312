/*
 * Local nodes (the overlay, fs/overlay.h) as lookups, stats and listings
 * see them, for both sides: whether a path is local, its attributes, the
 * overlay's part of a lookup and of a directory listing; and the small
 * facts about local nodes the write files share (the staging file as the
 * kernel wrote it through passthrough, a transaction's last change, the
 * engine's view of a node's attributes).  Calls no operation file.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>

#include "fs/write-internal.h"
#include "proto/meta.h"
#include "util/log.h"

ov_node *wr_local_of(fs_ctx *fs, const fs_inode *n)
{
	if (!fs->eng && !fs->ov.n)
		return NULL;
	ov_node *o = ov_get(&fs->ov, n->path);
	return o && o->kind != OV_WHITEOUT ? o : NULL;
}

bool wr_fill_stat(fs_ctx *fs, const fs_inode *n, struct stat *st)
{
	ov_node *o = wr_local_of(fs, n);
	if (!o)
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

bool wr_is_local_dir(fs_ctx *fs, const fs_inode *n)
{
	ov_node *o = wr_local_of(fs, n);
	return o && o->kind == OV_DIR && !o->merge;
}

bool wr_has_local_node(fs_ctx *fs, const fs_inode *n)
{
	return wr_local_of(fs, n) != NULL;
}

int wr_lookup(fs_ctx *fs, fs_inode *p, const char *name, fs_inode **out)
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
	if (dh->n == m->cap || !dh->v) {
		size_t cap = m->cap ? 2 * m->cap : 16;
		if (cap < dh->n + 1)
			cap = dh->n + 16;
		fs_dirent_snap *v = realloc(dh->v, cap * sizeof *v);
		if (!v) {
			m->rc = -1;
			return;
		}
		dh->v = v;
		m->cap = cap;
	}
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

int wr_merge_listing(fs_ctx *fs, fs_inode *d, fs_dirhandle *dh)
{
	if (!fs->ov.n)
		return 0;
	merge_ctx m = {dh, dh->n, 0};
	ov_children(&fs->ov, d->path, merge_one, &m);
	return m.rc;
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

/* The thread group of thread id t, or 0 when /proc does not say (gone). */
static pid_t tgid_of(pid_t t)
{
	char p[64], line[128];
	snprintf(p, sizeof p, "/proc/%d/status", (int)t);
	FILE *f = fopen(p, "re");
	pid_t g = 0;
	while (f && fgets(line, sizeof line, f))
		if (!strncmp(line, "Tgid:", 5)) {
			g = (pid_t)atoi(line + 5);
			break;
		}
	if (f)
		fclose(f);
	return g;
}

bool wr_same_process(pid_t a, pid_t b)
{
	if (a == b || a <= 0 || b <= 0)
		return true;
	pid_t ga = tgid_of(a), gb = tgid_of(b);
	return !ga || !gb || ga == gb;
}

void wr_dir_changed(fs_ctx *fs, fs_inode *d)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
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
