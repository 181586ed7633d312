/*
 * Write passthrough: files written through the mount are written by the
 * kernel straight into their staging file (see below).
 */
#include "fs/write-pt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "commit/engine.h"
#include "fs/ctx.h"
#include "fs/write-local.h"
#include "fs/write-sync.h"
#include "fs/write-txn.h"
#include "util/log.h"

/*
 * A file written through the mount is written by the kernel straight into
 * its staging file (FUSE passthrough, fs/passthrough.h): no round trip
 * through ckptfs per write, so close() returns at local-disk speed.  The
 * price is that ckptfs no longer sees the writes.  It learns of them from
 * the staging file's ctime and size (wr_pt_absorb) at getattr, setattr,
 * fsync, flush and release.  The last writer's flush hands the file to the
 * commit engine as before; a dup'd descriptor or a shared mapping can still
 * write after that close, which release finds and answers by storing a
 * copy; the commit triggers first wait for releases still in flight
 * (wr_wait_releases, fs/write-sync.c); fsync hands a copy, since the
 * kernel may write on.  While any passthrough handle of an inode is open
 * the kernel binds the inode to that one backing file, so every handle
 * opened meanwhile passes through to the same staging file; the binding
 * ends with the inode's last handle (wr_pt_unbind).  Writes go through
 * ckptfs instead when it must be able to hold or retry them: with
 * max_staged set, and when the staging disk is nearly full.
 */

#define PT_WRITE_HEADROOM (1ull << 30)

/* Whether writes may bypass ckptfs (see above). */
static bool pt_room(fs_ctx *fs)
{
	struct statvfs sv;
	if (!fs->cache || eng_max_staged(fs->eng) ||
	    statvfs(cache_dir(fs->cache), &sv) < 0)
		return false;
	uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	return avail > cache_min_free(fs->cache) + PT_WRITE_HEADROOM;
}

/*
 * Whether a new handle of local file o at inode n can be opened at all:
 * false when n is bound to a staging file o no longer writes to (a handle
 * opened while the file was written is still open, and the file was
 * committed since).  Table locked.
 */
bool wr_pt_compatible(const fs_inode *n, const ov_node *o)
{
	return !n->pt_stage || n->pt_backing_id <= 0 || !n->open_handles ||
	       (o->st && n->pt_sid == o->st->sid);
}

/* Chooses passthrough for h, new and counted in n->open_handles.  Table
 * locked. */
void wr_pt_choose(fs_ctx *fs, fs_inode *n, ov_node *o, fs_handle *h)
{
	if (!fs->pt.enabled || o->kind != OV_FILE || !o->st)
		return;
	if (n->pt_stage && n->pt_backing_id > 0 && n->pt_sid == o->st->sid) {
		h->backing_id = n->pt_backing_id; /* must: the inode is bound */
	} else if (h->writable && n->open_handles == 1 && !o->st->handed &&
		   pt_room(fs)) {
		int id = fs_pt_backing_open(&fs->pt, o->st->fd);
		if (id <= 0) {
			log_debug("write passthrough for %s: %s", o->path,
				  strerror(-id));
			return;
		}
		if (n->pt_backing_id > 0)
			fs_pt_backing_close(&fs->pt, n->pt_backing_id);
		free(n->pt_etag);
		n->pt_etag = NULL;
		n->pt_backing_id = id;
		n->pt_stage = true;
		n->pt_sid = o->st->sid;
		h->backing_id = id;
	} else {
		return;
	}
	log_debug("%s: passthrough to staging file %llu (backing %d)",
		  o->path, (unsigned long long)o->st->sid, h->backing_id);
	if (h->writable) {
		h->pt_write = true;
		if (o->pt_writers++ == 0)
			wr_pt_snap(o);
	}
}

void wr_pt_unbind(fs_ctx *fs, fs_inode *n)
{
	if (n->pt_backing_id > 0)
		fs_pt_backing_close(&fs->pt, n->pt_backing_id);
	n->pt_backing_id = 0;
	n->pt_stage = false;
	n->pt_sid = 0;
}

/*
 * fsync of a file the kernel may go on writing: hands the engine a copy of
 * the staging file.  Table locked; dropped for the copy.
 */
int wr_pt_put_copy(fs_ctx *fs, ov_node *o)
{
	uint64_t sid = 0, size = o->size;
	int fd = eng_stage_create(fs->eng, &sid);
	if (fd < 0)
		return fd;
	ov_stage *c = wr_stage_new(fs, fd, sid);
	if (!c) {
		close(fd);
		eng_stage_discard(fs->eng, sid);
		return -ENOMEM;
	}
	ov_stage *s = o->st;
	ov_stage_ref(s);
	ov_node_ref(o);
	fs_itable_unlock(fs->it);
	int rc = wr_copy_fd(s->fd, c->fd, size);
	fs_itable_lock(fs->it);
	ov_stage_unref(s);
	/* writes during the copy show in the staging file's ctime: the
	 * next absorb finds the file dirty again */
	if (rc == 0 && o->linked)
		rc = wr_put_stage(fs, o, c, size);
	ov_node_unref(o);
	ov_stage_unref(c);
	return rc;
}
