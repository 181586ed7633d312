/*
 * The write path: attributes (setattr: size, mode, owner, mtime) and
 * extended attributes (fs/write.c has the overview).  A remote file's
 * attributes live in its object's metadata or its manifest, which S3
 * cannot change without writing the object again: changing them, or its
 * size, copies it into staging first (fs/write-cow.c).  Extended
 * attributes of remote files are read from what the manifest or the
 * object metadata recorded; only local nodes take new ones.
 */
#include "fs/write-attrs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "commit/engine.h"
#include "fs/ctx.h"
#include "fs/metaread.h"
#include "fs/nodes.h"
#include "fs/write-cow.h"
#include "fs/write-deletes.h"
#include "fs/write-dirattrs.h"
#include "fs/write-idle.h"
#include "fs/write-local.h"
#include "fs/write-txn.h"
#include "proto/meta.h"

/* A closed file of a transaction that is committing or committed, whose
 * bytes are not being staged again. */
static bool sealed_clean(const ov_node *o)
{
	return o->kind != OV_DIR && o->kind != OV_WHITEOUT && o->writers == 0 &&
	       o->txn && o->txn->sealed && !o->dirty && !o->meta_dirty;
}

/* A change of o's attributes or xattrs when sealed_clean(o): stores it
 * again with them (a copy of the staged bytes), or a change of a
 * transaction that became visible meanwhile would be lost.  0 or -errno.
 * Table locked. */
static int put_again(fs_ctx *fs, ov_node *o)
{
	ov_node_ref(o);
	int rc = wr_writable_stage(fs, o, o->size);
	if (rc == 0) {
		o->meta_dirty = true;
		rc = wr_put_file(fs, o);
	}
	ov_node_unref(o);
	return rc;
}

/*
 * An accepted change of local node o's attributes or xattrs reaches the
 * engine, whichever way it came (path or handle, open for writing or not):
 * a directory's "dirs" entry is replaced; a file handed over in a
 * transaction still open takes the new attributes (eng_file_set_meta); a
 * closed file of a committing or committed transaction is stored again; a
 * file still open for writing, or not handed yet, is marked and goes with
 * its next put (the last writer's close, or now when none is open).
 * Before, a copy-on-write node changed through a writable handle (touch,
 * futimens, fchmod) got the attributes but was never stored again.
 * 0 or -errno.  Table locked.
 */
static int meta_changed(fs_ctx *fs, ov_node *o)
{
	wr_touch(o->txn);
	if (o->kind == OV_WHITEOUT || !o->txn)
		return 0;
	eng_meta m;
	buf xa = BUF_INIT;
	int rc = 0;
	if (o->kind == OV_DIR) {
		if (o->txn->sealed) /* dir_change_refused: not reached */
			return -ENOTSUP;
		/* the manifest's "dirs" entry takes the new ones */
		wr_ordered(fs, o->path, NULL);
		wr_meta_of(o, &m, &xa);
		rc = eng_dir_put(fs->eng, o->txn->id, o->path, &m);
		buf_free(&xa);
		if (rc == 0)
			o->meta_dirty = false;
		return rc;
	}
	if (sealed_clean(o))
		return put_again(fs, o);
	if (o->st && o->st->handed && !o->dirty && !o->meta_dirty &&
	    !o->txn->sealed) {
		wr_ordered(fs, o->path, NULL);
		wr_meta_of(o, &m, &xa);
		rc = eng_file_set_meta(fs->eng, o->txn->id, o->path, &m);
		buf_free(&xa);
		if (rc != -ENOENT)
			return rc;
		rc = 0; /* the engine is done with it: stored again below */
	}
	o->meta_dirty = true;
	if (o->writers == 0) {
		ov_node_ref(o);
		if (o->st && o->st->handed)
			rc = wr_writable_stage(fs, o, o->size);
		if (rc == 0)
			rc = wr_put_file(fs, o);
		ov_node_unref(o);
	}
	return rc;
}

/*
 * Whether a change of directory n's attributes or xattrs must be refused
 * (ENOTSUP) rather than accepted and lost: a directory whose transaction
 * is being committed (its manifest is on its way; a change after it
 * would take a step of its own, which starts once the directory is
 * committed, fs/write-dirattrs.c).  Directories other tools made keep the
 * old rule (the call succeeds, nothing is stored: doc/posix.md).  Table
 * locked.
 */
static bool dir_change_refused(const ov_node *o)
{
	return o && o->kind == OV_DIR && o->txn && o->txn->sealed;
}

/* n's local node, once more after the reap when its transaction seemed
 * still to be committing: a commit done since makes it a committed
 * directory, whose change is stored by a step of its own, not refused
 * (model seed 7716: setxattr of a directory whose commit had landed a
 * moment before answered ENOTSUP).  Table locked. */
static ov_node *local_after_reap(fs_ctx *fs, fs_inode *n, ov_node *o)
{
	if (!dir_change_refused(o))
		return o;
	wr_reap(fs);
	return wr_local_of(fs, n);
}

/* Whether the times a setattr sets can be recorded (proto_time_ok): the
 * bucket keeps mtimes from 1677 to 2262 but the epoch itself, which the
 * format reads as "not recorded" (doc/posix.md). */
static bool times_ok(const struct stat *attr, int to_set)
{
	return !(to_set & FUSE_SET_ATTR_MTIME) ||
	       proto_time_ok(&attr->st_mtim);
}

/*
 * Local node for a change of the attributes or xattrs of n: n's own, or,
 * for a remote file, a copy of it (copy-on-write through the cache),
 * marked to be stored again with them.  *out NULL for a remote
 * directory.  0 or -errno.  Table locked; dropped for the copy.
 */
static int local_for_meta(fs_ctx *fs, fs_inode *n, bool truncating,
			  ov_node **out)
{
	*out = wr_local_of(fs, n);
	if (*out || n->is_dir)
		return 0;
	fs_inode_ref(n);
	fs_check_meta(fs, n);
	int rc = wr_make_local_file(fs, n, truncating, out);
	if (rc == 0)
		(*out)->meta_dirty = true;
	fs_itable_unref(fs->it, n);
	return rc;
}

/* A truncate of local node o (not a directory) to size; mark: its mtime
 * moves (truncate(2) marks the times only when the size changes, POSIX,
 * ext4, XFS; ftruncate, with a handle, always, as Linux does).  Table
 * locked. */
static int set_size(fs_ctx *fs, ov_node *o, off_t size, bool mark)
{
	if (o->kind != OV_FILE)
		return -EISDIR;
	ov_node_ref(o);
	uint64_t keep = (uint64_t)size < o->size ? (uint64_t)size : o->size;
	int rc = wr_writable_stage(fs, o, keep);
	if (rc == 0 && ftruncate(o->st->fd, size) < 0)
		rc = -errno;
	if (rc == 0 && o->pt_writers)
		wr_pt_snap(o); /* seen: ours */
	if (rc == 0) {
		/* emptied: written again, as by O_TRUNC; its next put clears
		 * the poison */
		if (size == 0)
			o->failed = 0;
		o->size = (uint64_t)size;
		o->dirty = true;
		if (mark)
			clock_gettime(CLOCK_REALTIME, &o->mtime);
		wr_touch(o->txn);
	}
	ov_node_unref(o);
	return rc;
}

void wr_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		int to_set, struct fuse_file_info *fi)
{
	fs_ctx *fs = fs_req_ctx(req);
	wr_caller who; /* before the lock: it reads /proc */
	if (to_set & FUSE_SET_ATTR_KILL_SUID)
		wr_caller_of(req, &who);
	else
		who.n = -1;
	fs_inode *n = fs_lock_inode(req, fs, ino);
	if (!n)
		return;
	if (!fs->eng) {
		fs_itable_unlock(fs->it);
		fuse_reply_err(req, EROFS);
		return;
	}
	fs_inode_ref(n);
	ov_node *o = wr_local_of(fs, n);
	if (o)
		wr_pt_absorb(fs, o);
	int rc = times_ok(attr, to_set) ? 0 : -EINVAL;
	bool meta_set = to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID |
				  FUSE_SET_ATTR_GID | FUSE_SET_ATTR_MTIME |
				  FUSE_SET_ATTR_MTIME_NOW);
	if (rc == 0 && meta_set)
		o = wr_dirattr_adopt(fs, n, local_after_reap(fs, n, o));
	if (rc == 0 && meta_set && dir_change_refused(o))
		rc = -ENOTSUP;
	/* a committed directory's: stored by a step of its own */
	ov_node dtmp;
	bool rdir = rc == 0 && meta_set && !o && wr_dirattr_remote(fs, n);
	if (rdir) {
		wr_dirattr_node(n, &dtmp);
		o = &dtmp;
	}
	bool truncating = (to_set & FUSE_SET_ATTR_SIZE) && attr->st_size == 0;
	struct stat was; /* the size before (a remote file's copy has none) */
	if (to_set & FUSE_SET_ATTR_SIZE)
		fs_fill_stat(fs, n, &was);
	/* attributes live in the object's metadata or manifest: a remote
	 * file is copied in (through the cache) and stored again with them */
	if (rc == 0 && !o && ((to_set & FUSE_SET_ATTR_SIZE) || meta_set))
		rc = local_for_meta(fs, n, truncating, &o);
	if (rc == 0 && o && (to_set & FUSE_SET_ATTR_SIZE))
		rc = set_size(fs, o, attr->st_size,
			      fi || attr->st_size != was.st_size);
	if (rc == 0 && o) {
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		if (to_set & FUSE_SET_ATTR_MODE)
			o->mode = (o->mode & S_IFMT) | (attr->st_mode & 07777);
		/* truncate or chown by an unprivileged caller, under
		 * FUSE_HANDLE_KILLPRIV_V2 */
		if ((to_set & FUSE_SET_ATTR_KILL_SUID) &&
		    (o->mode & (S_ISUID | S_ISGID))) {
			wr_kill_suid(o, wr_caller_in(&who, o->gid));
			to_set |= FUSE_SET_ATTR_MODE;
		}
		if (to_set & FUSE_SET_ATTR_UID)
			o->uid = attr->st_uid;
		if (to_set & FUSE_SET_ATTR_GID)
			o->gid = attr->st_gid;
		if (to_set & FUSE_SET_ATTR_MTIME)
			o->mtime = attr->st_mtim;
		if (to_set & FUSE_SET_ATTR_MTIME_NOW)
			o->mtime = now;
		/* a time set after the last name came stands */
		if (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW))
			n->name_change = (struct timespec){0, 0};
		if (to_set & FUSE_SET_ATTR_ATIME)
			o->atime = attr->st_atim;
		if (to_set & FUSE_SET_ATTR_ATIME_NOW)
			o->atime = now;
		o->ctime = now;
		wr_touch(o->txn);
		if (rdir)
			rc = wr_dirattr_store(fs, n, o);
		else if (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID |
				   FUSE_SET_ATTR_GID | FUSE_SET_ATTR_MTIME |
				   FUSE_SET_ATTR_MTIME_NOW))
			rc = meta_changed(fs, o); /* stores the size too */
		else if ((to_set & FUSE_SET_ATTR_SIZE) && o->writers == 0)
			rc = wr_put_file(fs, o);
	}
	/* remote names: attributes other than the size are not stored
	 * remotely for objects this mount did not write (that would take a
	 * copy of the object); the call succeeds as on s3fs -o complement */
	if (rdir) /* o stays &dtmp: the reply shows what was stored */
		buf_free(&dtmp.xattrs);
	struct stat st;
	fs_fill_stat(fs, n, &st);
	if (!o && (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_MTIME |
			     FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_ATIME))) {
		if (to_set & FUSE_SET_ATTR_MODE)
			st.st_mode = (st.st_mode & S_IFMT) |
				     (attr->st_mode & 07777);
		if (to_set & FUSE_SET_ATTR_MTIME)
			st.st_mtim = attr->st_mtim;
		if (to_set & FUSE_SET_ATTR_ATIME)
			st.st_atim = attr->st_atim;
	}
	fs_itable_unref(fs->it, n);
	fs_itable_unlock(fs->it);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, 0);
}

/* The xattrs a manifest recorded for remote file n, in the overlay's
 * record format (so the same get/list code serves both).  Table locked. */
static int remote_xattrs(const fs_inode *n, ov_node *tmp)
{
	memset(tmp, 0, sizeof *tmp);
	if (!n->xattrs_json)
		return 0;
	buf blob = BUF_INIT;
	proto_xattrs_decode(n->xattrs_json, &blob);
	size_t pos = 0;
	const char *name, *val;
	uint32_t vlen;
	while (proto_xattr_next(blob.data, blob.len, &pos, &name, &val, &vlen))
		ov_xattr_set(tmp, name, val, vlen, 0);
	buf_free(&blob);
	return 0;
}

/* getxattr (name) or listxattr (name NULL): the overlay node's xattrs, or
 * what the manifest or object metadata recorded for a remote file. */
static void xattr_query(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	fs_ctx *fs = fs_req_ctx(req);
	fs_itable_lock(fs->it);
	fs_inode *n = fs_itable_get(fs->it, ino);
	ov_node *o = n ? wr_local_of(fs, n) : NULL;
	if (o && o->placeholder)
		o = NULL; /* the bucket's xattrs show */
	ov_node tmp;
	if (!o && n && n->xattrs_json) {
		remote_xattrs(n, &tmp);
		o = &tmp;
	}
	char *v = size ? malloc(size) : NULL;
	int rc = !o ? (name ? -ENODATA : 0)
	       : size && !v ? -ENOMEM
	       : name	    ? ov_xattr_get(o, name, v, size)
			    : ov_xattr_list(o, v, size);
	if (o == &tmp)
		buf_free(&tmp.xattrs);
	fs_itable_unlock(fs->it);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)rc);
	else
		fuse_reply_buf(req, v, (size_t)rc);
	free(v);
}

void wr_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		 size_t size)
{
	/* only user xattrs exist here (wr_setxattr refuses the others):
	 * ENOTSUP for security.* and system.posix_acl_*, not ENODATA, tells
	 * ls -l (and libacl, libselinux users) that this filesystem has none,
	 * so they stop asking for each file (doc/posix.md) */
	if (strncmp(name, "user.", 5)) {
		fuse_reply_err(req, ENOTSUP);
		return;
	}
	xattr_query(req, ino, name, size);
}

void wr_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	xattr_query(req, ino, NULL, size);
}

/* Whether remote file n recorded xattr name.  Table locked. */
static bool remote_has_xattr(const fs_inode *n, const char *name)
{
	ov_node tmp;
	remote_xattrs(n, &tmp);
	bool has = ov_xattr_get(&tmp, name, NULL, 0) >= 0;
	buf_free(&tmp.xattrs);
	return has;
}

/*
 * setxattr (value non-NULL) or removexattr of node ino.  A remote file's
 * xattrs live in its manifest or object metadata: it is copied in and
 * stored again without or with them, as chmod does (an XATTR_CREATE or
 * XATTR_REPLACE that must fail, or a removal of a name it does not have,
 * fails before the copy).  A remote directory's cannot be changed yet
 * (ENOTSUP; a directory is no object).
 */
static void xattr_change(fuse_req_t req, fuse_ino_t ino, const char *name,
			 const char *value, size_t size, int flags)
{
	fs_ctx *fs = fs_req_ctx(req);
	fs_itable_lock(fs->it);
	fs_inode *n = fs_itable_get(fs->it, ino);
	ov_node *o = n ? wr_local_of(fs, n) : NULL;
	int rc = n ? 0 : -ENOENT;
	if (n && !o && !n->is_dir) {
		fs_inode_ref(n);
		fs_check_meta(fs, n);
		bool has = remote_has_xattr(n, name);
		if (!value && !has)
			rc = -ENODATA;
		else if (value && has && (flags & XATTR_CREATE))
			rc = -EEXIST;
		else if (value && !has && (flags & XATTR_REPLACE))
			rc = -ENODATA;
		if (rc == 0)
			rc = local_for_meta(fs, n, false, &o);
		fs_itable_unref(fs->it, n);
	}
	if (rc == 0 && n)
		o = wr_dirattr_adopt(fs, n, local_after_reap(fs, n, o));
	if (rc == 0 && n && dir_change_refused(o))
		rc = value || ov_xattr_get(o, name, NULL, 0) >= 0 ? -ENOTSUP
								  : -ENODATA;
	/* a committed directory's: stored by a step of its own */
	ov_node dtmp;
	bool rdir = rc == 0 && n && !o && wr_dirattr_remote(fs, n);
	if (rdir) {
		wr_dirattr_node(n, &dtmp);
		o = &dtmp;
	}
	if (rc == 0 && !o)
		rc = value ? -ENOTSUP : -ENODATA;
	if (rc == 0)
		rc = value ? ov_xattr_set(o, name, value, size, flags)
			   : ov_xattr_remove(o, name);
	if (rc == 0) {
		clock_gettime(CLOCK_REALTIME, &o->ctime);
		rc = rdir ? wr_dirattr_store(fs, n, o) : meta_changed(fs, o);
	}
	if (rdir)
		buf_free(&dtmp.xattrs);
	fs_itable_unlock(fs->it);
	fuse_reply_err(req, -rc);
}

void wr_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		 const char *value, size_t size, int flags)
{
	if (!wr_require_engine(req))
		return;
	if (strncmp(name, "user.", 5)) {
		fuse_reply_err(req, ENOTSUP);
		return;
	}
	xattr_change(req, ino, name, value ? value : "", size, flags);
}

void wr_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	if (!wr_require_engine(req))
		return;
	xattr_change(req, ino, name, NULL, 0, 0);
}
