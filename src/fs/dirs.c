/*
 * The namespace operations of the read side: lookup, forget, getattr,
 * opendir, readdir(plus) and releasedir.  Names come from the overlay
 * first (fs/local.c: files and directories written here, whiteouts), then
 * from the directory's listing (fs/nodes.c; namespace rules in
 * proto/namespace.h).  A directory handle is a snapshot of the listing
 * merged with the overlay, so offsets stay stable while it is refreshed.
 */
#include "fs/dirs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/ctx.h"
#include "fs/handles.h"
#include "fs/local.h"
#include "fs/metaread.h"
#include "fs/nodes.h"
#include "proto/namespace.h"
#include "util/buf.h"
#include "util/log.h"

void rd_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fs_ctx *fs = fs_req_ctx(req);
	double asked = fs_now();
	fs_itable_lock(fs->it);
	fs_inode *p = fs_itable_get(fs->it, parent);
	if (!p || !p->is_dir || strlen(name) > 255) {
		fs_itable_unlock(fs->it);
		fuse_reply_err(req, !p ? ENOENT : p->is_dir ? ENAMETOOLONG
						      : ENOTDIR);
		return;
	}
	fs_inode *local = NULL;
	int wr = fs_local_lookup(fs, p, name, &local);
	if (wr && local) {
		local->nlookup++;
		struct fuse_entry_param ep;
		fs_fill_entry(fs, local, &ep);
		fs_itable_unlock(fs->it);
		fuse_reply_entry(req, &ep);
		return;
	}
	/* a large directory's names, and subdirectories, keep answering
	 * from the last listing while it is refreshed (fs_dir_stale_entry) */
	bool remote = !wr && !fs_local_is_dir(fs, p);
	const ns_entry *e = remote ? fs_dir_stale_entry(fs, p, name) : NULL;
	bool refresh = e && !p->listing_busy; /* e: past dir_timeout */
	int rc = e || !remote ? 0 : fs_dir_load(fs, p);
	if (!e && rc == 0 && remote && p->listing)
		e = ns_dir_find(p->listing, name);
	/* a miss is never answered from a listing sent before this lookup
	 * came: the name may belong to an effect the caller has already
	 * seen (a `latest` naming it, a `ckptfs sync` that returned), so it
	 * is asked again, once (doc/architecture.md) */
	if (!e && rc == 0 && remote && p->listing && p->listing_began < asked) {
		rc = fs_dir_refetch(fs, p);
		if (rc == 0 && p->listing)
			e = ns_dir_find(p->listing, name);
	}
	if (rc < 0 || !e) {
		fs_itable_unlock(fs->it);
		if (rc < 0) {
			fuse_reply_err(req, -rc);
		} else {
			struct fuse_entry_param ep = {0};
			ep.entry_timeout = fs->o.entry_timeout;
			fuse_reply_entry(req, &ep); /* cached negative entry */
		}
		return;
	}
	fs_inode *c = fs_child_for(fs, p, e);
	if (!c) {
		fs_itable_unlock(fs->it);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fs_inode_ref(c);
	fs_check_meta(fs, c);
	c->nlookup++;
	struct fuse_entry_param ep;
	fs_fill_entry(fs, c, &ep);
	fs_itable_unref(fs->it, c);
	if (refresh)
		fs_inode_ref(p);
	fs_itable_unlock(fs->it);
	fuse_reply_entry(req, &ep);
	if (refresh) { /* after the reply: the next lookups see it */
		fs_itable_lock(fs->it);
		if (fs_dir_load(fs, p) < 0)
			log_debug("lookup in %s: refresh failed", p->path);
		fs_itable_unref(fs->it, p);
		fs_itable_unlock(fs->it);
	}
}

void rd_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	fs_ctx *fs = fs_req_ctx(req);
	fs_itable_lock(fs->it);
	fs_inode *n = fs_itable_get(fs->it, ino);
	if (n)
		fs_itable_forget(fs->it, n, nlookup);
	fs_itable_unlock(fs->it);
	fuse_reply_none(req);
}

void rd_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	fs_ctx *fs = fs_req_ctx(req);
	fs_itable_lock(fs->it);
	for (size_t i = 0; i < count; i++) {
		fs_inode *n = fs_itable_get(fs->it, forgets[i].ino);
		if (n)
			fs_itable_forget(fs->it, n, forgets[i].nlookup);
	}
	fs_itable_unlock(fs->it);
	fuse_reply_none(req);
}

void rd_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	fs_ctx *fs = fs_req_ctx(req);
	fs_inode *n = fs_lock_inode(req, fs, ino);
	if (!n)
		return;
	if (!n->is_dir && !fs_local_fill_stat(fs, n, &(struct stat){0})) {
		fs_inode_ref(n);
		fs_check_meta(fs, n);
		fs_itable_unref(fs->it, n);
	}
	/*
	 * A directory's mtime comes from its listing.  Listed before: reply
	 * with what that listing said, then refresh it, so the next stat
	 * sees a new mtime.  The kernel asks for the attributes of every
	 * directory on a path whose attr_timeout ran out (a permission
	 * check), and a writer's open(2) must not wait for a LIST: with a
	 * pending marker a listing is three, ~100 ms on the bench's server.
	 * Not past STALE_OK_FACTOR x dir_timeout, the bound lookups keep
	 * (fs_dir_recent): a directory last listed long before showed the
	 * mode and owner it had then to the first stat (another mount saw a
	 * directory renamed over another with the old one's attributes,
	 * model seed 7509), so it is listed first.
	 */
	bool refresh = false;
	if (n->is_dir && !fs_local_is_dir(fs, n)) {
		if (n->listing && !n->listing_held && fs_dir_recent(fs, n)) {
			refresh = true;
			fs_inode_ref(n);
		} else if (fs_dir_load(fs, n) < 0) {
			log_debug("getattr %s: listing failed, mtime unknown",
				  n->path);
		}
	}
	struct stat st;
	fs_fill_stat(fs, n, &st);
	n->k_size = (uint64_t)st.st_size;
	n->k_told = true;
	fs_itable_unlock(fs->it);
	fuse_reply_attr(req, &st, fs->o.attr_timeout);
	if (refresh) {
		fs_itable_lock(fs->it);
		if (fs_dir_load(fs, n) < 0)
			log_debug("getattr %s: listing failed, stale mtime",
				  n->path);
		fs_itable_unref(fs->it, n);
		fs_itable_unlock(fs->it);
	}
}

void rd_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	fs_ctx *fs = fs_req_ctx(req);
	fs_itable_lock(fs->it);
	fs_inode *d = fs_itable_get(fs->it, ino);
	if (!d || !d->is_dir) {
		fs_itable_unlock(fs->it);
		fuse_reply_err(req, d ? ENOTDIR : ENOENT);
		return;
	}
	bool local = fs_local_is_dir(fs, d);
	int rc = local ? 0 : fs_dir_load(fs, d);
	if (rc < 0) {
		fs_itable_unlock(fs->it);
		fuse_reply_err(req, -rc);
		return;
	}
	/* a snapshot keeps offsets stable while the listing is refreshed */
	fs_dirhandle *dh = calloc(1, sizeof *dh);
	size_t n = local || !d->listing ? 0 : d->listing->n;
	if (dh && n)
		dh->v = calloc(n, sizeof *dh->v);
	if (!dh || (n && !dh->v)) {
		fs_itable_unlock(fs->it);
		free(dh);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const ns_entry *e = &d->listing->v[i];
		dh->v[i] = (fs_dirent_snap){strdup(e->name),
					    e->etag ? strdup(e->etag) : NULL,
					    e->is_dir, e->size, e->mtime};
		if (!dh->v[i].name)
			break;
		dh->n++;
	}
	if (fs_local_merge_listing(fs, d, dh) < 0) {
		fs_itable_unlock(fs->it);
		fs_dirhandle_free(dh);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* gone from the bucket (deleted since the parent was listed, or
	 * being deleted): ENOENT as for a removed local directory, never an
	 * empty listing; the mount root always exists, and so does a
	 * directory this mount holds in its overlay (a temp-named directory
	 * restored after a crash is in no listing).  So does a transaction
	 * root whose manifests are all pending (issue 21): a parent listing
	 * can name it while its transaction is aborted and started again
	 * under the same name (the name in both of the parent's listings,
	 * its marker in neither: a crashed in-place save redone), or after
	 * its marker went; nothing in it is committed, so it is not there
	 * (an abandoned transaction is hidden, proto/visibility.h) */
	if (!local && !fs_local_has_node(fs, d) && dh->n == 0 &&
	    d->listing && (d->listing->vanished || fs_dir_uncommitted(d)) &&
	    d->path[0]) {
		fs_itable_unlock(fs->it);
		fs_dirhandle_free(dh);
		fuse_reply_err(req, ENOENT);
		return;
	}
	dh->gen = fs->listing_gen;
	dh->prev = NULL;
	dh->next = fs->dirhandles;
	if (fs->dirhandles)
		fs->dirhandles->prev = dh;
	fs->dirhandles = dh;
	fs_itable_unlock(fs->it);
	fi->fh = (uint64_t)(uintptr_t)dh;
	fi->cache_readdir = 0;
	fuse_reply_open(req, fi);
}

/*
 * The inode of snapshot entry s of d.  A snapshot taken before a commit of
 * this mount landed (the listing generation moved since) does not
 * overwrite the attributes of a file that commit stored: they are what
 * was committed, and the snapshot (and the manifests d was listed with)
 * may be from before it (model seed 8200: a file written and closed,
 * os.walk's opendir while its commit was on its way, the next readdir
 * after it landed: the file showed its new size with the mtime the
 * manifest listed before the commit recorded).  Table locked.
 */
static fs_inode *snap_child(fs_ctx *fs, fs_inode *d, const fs_dirhandle *dh,
			    const fs_dirent_snap *s)
{
	if (dh->gen != fs->listing_gen && !s->is_dir) {
		buf p = BUF_INIT;
		if (d->path[0])
			buf_printf(&p, "%s/", d->path);
		buf_puts(&p, s->name);
		fs_inode *c = p.data ? fs_itable_find(fs->it, p.data) : NULL;
		buf_free(&p);
		if (c && !c->is_dir && c->attrs_committed)
			return c;
	}
	ns_entry e = {.name = s->name, .is_dir = s->is_dir, .size = s->size,
		      .etag = s->etag, .mtime = s->mtime};
	return fs_child_for(fs, d, &e);
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
		       off_t off, struct fuse_file_info *fi, bool plus)
{
	fs_ctx *fs = fs_req_ctx(req);
	fs_dirhandle *dh = (fs_dirhandle *)(uintptr_t)fi->fh;
	char *out = malloc(size);
	if (!out) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	size_t used = 0;
	fs_itable_lock(fs->it);
	fs_inode *d = fs_itable_get(fs->it, ino);
	for (size_t i = (size_t)off; d && i < dh->n + 2; i++) {
		const char *name;
		fs_inode *c = NULL, *held = NULL;
		struct stat st;
		memset(&st, 0, sizeof st);
		if (i < 2) {
			name = i == 0 ? "." : "..";
			c = i == 0 || !d->parent ? d : d->parent;
		} else {
			name = dh->v[i - 2].name;
			c = snap_child(fs, d, dh, &dh->v[i - 2]);
			if (!c)
				break;
			/* an empty object may be a symlink (its metadata
			 * says): the type must be right from the first
			 * reply, the kernel refuses an inode changing type */
			if (!c->is_dir && c->size == 0 && !c->has_attrs &&
			    !fs_local_fill_stat(fs, c, &st)) {
				fs_inode_ref(c);
				held = c;
				fs_check_meta(fs, c);
				memset(&st, 0, sizeof st);
			}
		}
		size_t need;
		if (plus) {
			struct fuse_entry_param ep;
			fs_fill_entry(fs, c, &ep);
			if (i < 2) {
				/* "." and "..": no entry, no lookup count */
				ep.ino = 0;
				ep.entry_timeout = ep.attr_timeout = 0;
			}
			need = fuse_add_direntry_plus(req, out + used,
						      size - used, name, &ep,
						      (off_t)(i + 1));
			if (need <= size - used && i >= 2)
				c->nlookup++;
		} else {
			fs_fill_stat(fs, c, &st);
			need = fuse_add_direntry(req, out + used, size - used,
						 name, &st, (off_t)(i + 1));
		}
		if (held) /* after the entry took its lookup count */
			fs_itable_unref(fs->it, held);
		if (need > size - used)
			break;
		used += need;
	}
	fs_itable_unlock(fs->it);
	fuse_reply_buf(req, out, used);
	free(out);
}

void rd_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, false);
}

void rd_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, true);
}

void rd_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	fs_ctx *fs = fs_req_ctx(req);
	fs_dirhandle *dh = (fs_dirhandle *)(uintptr_t)fi->fh;
	fs_itable_lock(fs->it);
	fs_dirhandle_unlink(fs, dh);
	fs_itable_unlock(fs->it);
	fs_dirhandle_free(dh);
	fuse_reply_err(req, 0);
}
