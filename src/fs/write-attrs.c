/*
 * The write path: attributes (setattr: size, mode, owner, mtime) and
 * extended attributes (fs/write.c has the overview).  A remote file's
 * attributes live in its object's metadata or its manifest, which S3
 * cannot change without writing the object again: changing them, or its
 * size, copies it into staging first (fs/write-cow.c).  Extended
 * attributes of remote files are read from what the manifest or the
 * object metadata recorded; only local nodes take new ones.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fs/write-internal.h"
#include "proto/meta.h"

/* A closed file of a transaction that is committing or committed, whose
 * bytes are not being staged again. */
static bool sealed_clean(const ov_node *o)
{
	return o->kind == OV_FILE && o->writers == 0 && o->txn &&
	       o->txn->sealed && !o->dirty;
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
		o->dirty = true;
		rc = wr_put_file(fs, o);
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
		wr_pt_absorb(o);
	int rc = 0;
	bool meta_set = to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID |
				  FUSE_SET_ATTR_GID | FUSE_SET_ATTR_MTIME |
				  FUSE_SET_ATTR_MTIME_NOW);
	bool truncating = (to_set & FUSE_SET_ATTR_SIZE) && attr->st_size == 0;
	if (!o && !n->is_dir && ((to_set & FUSE_SET_ATTR_SIZE) || meta_set)) {
		/* attributes live in the object's metadata or manifest: a
		 * remote file written by someone else is copied in (through
		 * the cache) and stored again with them */
		fs_check_meta(fs, n);
		struct stat cur;
		fs_fill_stat(fs, n, &cur);
		rc = wr_make_local_file(fs, n, truncating, &o);
		if (rc == 0) {
			o->mode = proto_mode_type(cur.st_mode) == S_IFREG
					  ? cur.st_mode & 07777
					  : cur.st_mode & (S_IFMT | 07777);
			o->rdev = cur.st_rdev;
			o->uid = cur.st_uid;
			o->gid = cur.st_gid;
			o->mtime = cur.st_mtim;
			o->dirty = true;
		}
	}
	if (rc == 0 && o && (to_set & FUSE_SET_ATTR_SIZE)) {
		if (o->kind != OV_FILE) {
			rc = -EISDIR;
		} else {
			ov_node_ref(o);
			uint64_t keep = (uint64_t)attr->st_size < o->size
						? (uint64_t)attr->st_size
						: o->size;
			rc = wr_writable_stage(fs, o, keep);
			if (rc == 0 && ftruncate(o->st->fd, attr->st_size) < 0)
				rc = -errno;
			if (rc == 0 && o->pt_writers)
				wr_pt_snap(o); /* seen: ours */
			if (rc == 0) {
				o->size = (uint64_t)attr->st_size;
				o->dirty = true;
				clock_gettime(CLOCK_REALTIME, &o->mtime);
				wr_touch(o->txn);
				if (o->writers == 0)
					rc = wr_put_file(fs, o);
			}
			ov_node_unref(o);
		}
	}
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
		if (to_set & FUSE_SET_ATTR_ATIME)
			o->atime = attr->st_atim;
		if (to_set & FUSE_SET_ATTR_ATIME_NOW)
			o->atime = now;
		o->ctime = now;
		wr_touch(o->txn);
		bool meta = to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID |
				      FUSE_SET_ATTR_GID | FUSE_SET_ATTR_MTIME |
				      FUSE_SET_ATTR_MTIME_NOW);
		if (meta && sealed_clean(o)) {
			rc = put_again(fs, o);
		} else if (meta && (o->kind == OV_FILE || o->kind == OV_LINK) &&
			   o->dirty &&
			   o->writers == 0 && o->st && !o->st->handed) {
			rc = wr_put_file(fs, o);
		} else if (meta && o->kind == OV_DIR && o->txn &&
			   !o->txn->done) {
			/* the manifest's "dirs" entry takes the new ones */
			wr_ordered(fs);
			eng_meta m;
			buf xa = BUF_INIT;
			wr_meta_of(o, &m, &xa);
			rc = eng_dir_put(fs->eng, o->txn->id, o->path, &m);
			buf_free(&xa);
		} else if (meta && o->txn && o->st && o->st->handed && !o->dirty) {
			wr_ordered(fs);
			eng_meta m;
			buf xa = BUF_INIT;
			wr_meta_of(o, &m, &xa);
			rc = eng_file_set_meta(fs->eng, o->txn->id, o->path, &m);
			buf_free(&xa);
		}
	}
	/* remote names: attributes other than the size are not stored
	 * remotely for objects this mount did not write (that would take a
	 * copy of the object); the call succeeds as on s3fs -o complement */
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

/* The xattrs of local node o changed: the engine learns it.  0 or
 * -errno.  Table locked. */
static int xattr_changed(fs_ctx *fs, ov_node *o)
{
	wr_touch(o->txn);
	clock_gettime(CLOCK_REALTIME, &o->ctime);
	int rc = 0;
	if (sealed_clean(o)) {
		rc = put_again(fs, o);
	} else if (o->txn && o->st && o->st->handed && !o->dirty) {
		wr_ordered(fs);
		eng_meta m;
		buf xa = BUF_INIT;
		wr_meta_of(o, &m, &xa);
		eng_file_set_meta(fs->eng, o->txn->id, o->path, &m);
		buf_free(&xa);
	}
	return rc;
}

void wr_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		 const char *value, size_t size, int flags)
{
	fs_ctx *fs = fs_req_ctx(req);
	if (!fs->eng) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (strncmp(name, "user.", 5)) {
		fuse_reply_err(req, ENOTSUP);
		return;
	}
	fs_itable_lock(fs->it);
	fs_inode *n = fs_itable_get(fs->it, ino);
	ov_node *o = n ? wr_local_of(fs, n) : NULL;
	int rc = 0;
	if (n && !o && !n->is_dir) {
		/* a remote file's xattrs live in its manifest or metadata:
		 * it is copied in and stored again with them, as chmod does */
		fs_inode_ref(n);
		fs_check_meta(fs, n);
		rc = wr_make_local_file(fs, n, false, &o);
		if (rc == 0)
			o->dirty = true;
		fs_itable_unref(fs->it, n);
	}
	/* a remote directory's cannot be stored (it is no object) */
	if (rc == 0)
		rc = !o ? -ENOTSUP : ov_xattr_set(o, name, value, size, flags);
	if (rc == 0)
		rc = xattr_changed(fs, o);
	if (rc == 0 && o->kind == OV_FILE && o->dirty && o->writers == 0 &&
	    o->st && !o->st->handed)
		rc = wr_put_file(fs, o);
	fs_itable_unlock(fs->it);
	fuse_reply_err(req, -rc);
}

void wr_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	if (!wr_require_engine(req))
		return;
	fs_ctx *fs = fs_req_ctx(req);
	fs_itable_lock(fs->it);
	fs_inode *n = fs_itable_get(fs->it, ino);
	ov_node *o = n ? wr_local_of(fs, n) : NULL;
	int rc = !o ? -ENODATA : ov_xattr_remove(o, name);
	if (rc == 0)
		rc = xattr_changed(fs, o);
	fs_itable_unlock(fs->it);
	fuse_reply_err(req, -rc);
}
