/*
 * Open handles: the list of file and directory handles of the mount
 * (freed at unmount if the kernel never released them) and the counts of
 * handles closed whose release is still to come (fs->closing, and
 * fs->noflush_open: handles whose close the kernel does not report).  A handle of
 * a remote object is freed by fs_handle_free; one of a local file by
 * wr_handle_free (fs/write.c), which hands the file over between
 * fs_handle_settle and fs_handle_drop.
 */
#include "fs/handles.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fs/ctx.h"

/* Table locked. */
void fs_handle_link(fs_ctx *fs, fs_handle *h)
{
	h->prev = NULL;
	h->next = fs->handles;
	if (fs->handles)
		fs->handles->prev = h;
	fs->handles = h;
	h->linked = true;
}

static void handle_unlink(fs_ctx *fs, fs_handle *h)
{
	if (!h->linked)
		return;
	if (h->prev)
		h->prev->next = h->next;
	else
		fs->handles = h->next;
	if (h->next)
		h->next->prev = h->prev;
	h->linked = false;
}

/* Waits for reads still replying on h and closes its cache files. */
void fs_handle_settle(fs_handle *h)
{
	if (h->node) { /* fully set up: wait for reads still replying */
		pthread_rwlock_wrlock(&h->busy);
		pthread_rwlock_unlock(&h->busy);
		pthread_rwlock_destroy(&h->busy);
	}
	if (h->cf)
		cache_file_close(h->cf);
	if (h->stale_cf)
		cache_file_close(h->stale_cf);
}

/* Unlinks and frees h; counted: it still counts in its inode's
 * open_handles (a local file's handle has left that count already,
 * fs/write.c). */
void fs_handle_drop(fs_ctx *fs, fs_handle *h, bool counted)
{
	fs_itable_lock(fs->it);
	handle_unlink(fs, h);
	if (h->flushed || h->noflush) {
		if (h->flushed)
			fs->closing--;
		else
			fs->noflush_open--;
		fs->released++;
		fs_itable_broadcast(fs->it);
	}
	if (h->flushed && h->writable)
		fs->wr_closing--;
	if (counted)
		h->node->open_handles--;
	fs_itable_unref(fs->it, h->node);
	fs_itable_unlock(fs->it);
	pthread_mutex_destroy(&h->mu);
	free(h->key);
	free(h->win);
	free(h->vcrc);
	free(h);
}

/* A handle of a remote object (no overlay node); counted: the handle was
 * counted in its inode's open_handles. */
void fs_handle_free(fs_ctx *fs, fs_handle *h, bool counted)
{
	fs_handle_settle(h);
	fs_handle_drop(fs, h, counted);
}

bool fs_closing_handles(fs_ctx *fs)
{
	fs_itable_lock(fs->it);
	bool any = fs->closing > 0;
	fs_itable_unlock(fs->it);
	return any;
}

/* How long a wait for releases lasts when only handles opened without
 * flush may be closing: they may as well be held open by their readers. */
#define NOFLUSH_WAIT_NS 1000000000L

uint64_t fs_releases(fs_ctx *fs)
{
	fs_itable_lock(fs->it);
	uint64_t n = fs->released;
	fs_itable_unlock(fs->it);
	return n;
}

bool fs_wait_release(fs_ctx *fs, const struct timespec *deadline,
		     uint64_t *seen)
{
	fs_itable_lock(fs->it);
	bool got = fs->released != *seen;
	struct timespec lim = *deadline;
	if (fs->closing == 0) {
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		now.tv_nsec += NOFLUSH_WAIT_NS;
		now.tv_sec += now.tv_nsec / 1000000000L;
		now.tv_nsec %= 1000000000L;
		if (now.tv_sec < lim.tv_sec ||
		    (now.tv_sec == lim.tv_sec && now.tv_nsec < lim.tv_nsec))
			lim = now;
	}
	while (!got && fs->closing + fs->noflush_open > 0 &&
	       fs_itable_timedwait(fs->it, &lim) == 0)
		got = fs->released != *seen;
	got = got || fs->released != *seen;
	*seen = fs->released;
	fs_itable_unlock(fs->it);
	return got;
}

/* Table locked. */
void fs_dirhandle_unlink(fs_ctx *fs, fs_dirhandle *dh)
{
	if (dh->prev)
		dh->prev->next = dh->next;
	else
		fs->dirhandles = dh->next;
	if (dh->next)
		dh->next->prev = dh->prev;
}

void fs_dirhandle_free(fs_dirhandle *dh)
{
	for (size_t i = 0; i < dh->n; i++) {
		free(dh->v[i].name);
		free(dh->v[i].etag);
	}
	free(dh->v);
	free(dh);
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

bool fs_same_process(pid_t a, pid_t b)
{
	if (a == b || a <= 0 || b <= 0)
		return true;
	pid_t ga = tgid_of(a), gb = tgid_of(b);
	return !ga || !gb || ga == gb;
}
