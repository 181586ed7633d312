/*
 * Test support: FUSE operations called as the kernel would, through the
 * mount's operation table, with fake requests (fake-fuse.h) on a mount
 * whose engine is the fake one (fake-eng.h) and whose LISTs fake-listing.h
 * answers.  Each returns the errno replied (0: success).  Call them with
 * the table unlocked.  Included by unit tests only, once per program.
 */
#ifndef CKPTFS_TEST_FS_OPS_H
#define CKPTFS_TEST_FS_OPS_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "fs/ctx.h"
#include "fs/dirs.h"
#include "fs/handles.h"
#include "fs/local.h"
#include "fs/nodes.h"
#include "fs/ops.h"
#include "fs/read.h"
#include "fs/write.h"
#include "fs/write-attrs.h"
#include "fs/write-cow.h"
#include "fs/write-deletes.h"
#include "fs/write-idle.h"
#include "fs/write-local.h"
#include "fs/write-names.h"
#include "fs/write-pt.h"
#include "fs/write-resume.h"
#include "fs/write-sync.h"
#include "fs/write-txn.h"

#include "fake-eng.h"
#include "fake-fuse.h"
#include "fs-fixture.h"

#define ROOT_INO FUSE_ROOT_ID

/* A writable mount (no idle thread: commit_delay rules are the test's). */
static inline fs_ctx *fx_new_writable(double dir_timeout)
{
	fs_ctx *fs = fx_new(dir_timeout);
	fake_eng_reset();
	fs->eng = FAKE_ENG;
	fs->commit_delay = 5;
	fake_invals = 0;
	return fs;
}

/* The request an operation gets; checked to have been replied once. */
static inline struct fuse_req *fx_req(fs_ctx *fs)
{
	static struct fuse_req r;
	fake_req_init(&r, fs);
	return &r;
}

static inline int fx_replied(struct fuse_req *r)
{
	cr_assert_eq(r->replies, 1, "one reply, not %d", r->replies);
	return r->err;
}

/* The inode number a lookup of name in parent answers, 0: ENOENT. */
static inline fuse_ino_t fx_lookup(fs_ctx *fs, fuse_ino_t parent,
				   const char *name)
{
	struct fuse_req *r = fx_req(fs);
	fs_lowlevel_ops()->lookup(r, parent, name);
	cr_assert_eq(fx_replied(r), 0, "lookup %s: %s", name,
		     strerror(r->err));
	return r->ep.ino;
}

static inline int fx_mkdir(fs_ctx *fs, fuse_ino_t parent, const char *name,
			   mode_t mode)
{
	struct fuse_req *r = fx_req(fs);
	fs_lowlevel_ops()->mkdir(r, parent, name, mode);
	return fx_replied(r);
}

static inline int fx_unlink(fs_ctx *fs, fuse_ino_t parent, const char *name)
{
	struct fuse_req *r = fx_req(fs);
	fs_lowlevel_ops()->unlink(r, parent, name);
	return fx_replied(r);
}

static inline int fx_rmdir(fs_ctx *fs, fuse_ino_t parent, const char *name)
{
	struct fuse_req *r = fx_req(fs);
	fs_lowlevel_ops()->rmdir(r, parent, name);
	return fx_replied(r);
}

static inline int fx_rename(fs_ctx *fs, fuse_ino_t parent, const char *name,
			    fuse_ino_t newparent, const char *newname,
			    unsigned flags)
{
	struct fuse_req *r = fx_req(fs);
	fs_lowlevel_ops()->rename(r, parent, name, newparent, newname, flags);
	return fx_replied(r);
}

static inline struct stat fx_getattr(fs_ctx *fs, fuse_ino_t ino)
{
	struct fuse_req *r = fx_req(fs);
	fs_lowlevel_ops()->getattr(r, ino, NULL);
	cr_assert_eq(fx_replied(r), 0, "getattr: %s", strerror(r->err));
	return r->attr;
}

/* setattr of ino: the attributes of attr that to_set names
 * (FUSE_SET_ATTR_*), as chmod, chown, utimensat and truncate call it.  0
 * (the reply's attributes in *out, when out is not NULL) or the errno. */
static inline int fx_setattr(fs_ctx *fs, fuse_ino_t ino,
			     const struct stat *attr, int to_set,
			     struct stat *out)
{
	struct stat a = *attr;
	struct fuse_req *r = fx_req(fs);
	fs_lowlevel_ops()->setattr(r, ino, &a, to_set, NULL);
	int err = fx_replied(r);
	if (!err && out)
		*out = r->attr;
	return err;
}

/* setxattr of ino's name to the text value with flags (XATTR_CREATE,
 * XATTR_REPLACE or 0).  0 or the errno. */
static inline int fx_setxattr(fs_ctx *fs, fuse_ino_t ino, const char *name,
			      const char *value, int flags)
{
	struct fuse_req *r = fx_req(fs);
	fs_lowlevel_ops()->setxattr(r, ino, name, value, strlen(value), flags);
	return fx_replied(r);
}

static inline int fx_removexattr(fs_ctx *fs, fuse_ino_t ino, const char *name)
{
	struct fuse_req *r = fx_req(fs);
	fs_lowlevel_ops()->removexattr(r, ino, name);
	return fx_replied(r);
}

/* getxattr of ino's name: 0 with the value as a string in out, or the
 * errno (ENODATA: it has none). */
static inline int fx_getxattr(fs_ctx *fs, fuse_ino_t ino, const char *name,
			      char *out, size_t size)
{
	struct fuse_req *r = fx_req(fs);
	fs_lowlevel_ops()->getxattr(r, ino, name, size - 1);
	int err = fx_replied(r);
	if (!err) {
		cr_assert_lt(r->buf_len, size);
		memcpy(out, r->buf, r->buf_len);
		out[r->buf_len] = '\0';
	}
	return err;
}

/* Creates name in parent and writes text into it; the handle stays open
 * in fi (close it with fx_close).  0 or the errno. */
static inline int fx_create(fs_ctx *fs, fuse_ino_t parent, const char *name,
			    const char *text, struct fuse_file_info *fi)
{
	memset(fi, 0, sizeof *fi);
	fi->flags = O_WRONLY | O_CREAT;
	struct fuse_req *r = fx_req(fs);
	fs_lowlevel_ops()->create(r, parent, name, 0644, fi);
	int err = fx_replied(r);
	fi->fh = r->fi.fh;
	fuse_ino_t ino = r->ep.ino;
	if (err || !text[0])
		return err;
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(strlen(text));
	bv.buf[0].mem = (void *)text;
	r = fx_req(fs);
	fs_lowlevel_ops()->write_buf(r, ino, &bv, 0, fi);
	err = fx_replied(r);
	cr_assert(err || r->written == strlen(text));
	return err;
}

/* Opens ino with flags: 0 (the handle in fi, the reply's flags too) or
 * the errno. */
static inline int fx_open(fs_ctx *fs, fuse_ino_t ino, int flags,
			  struct fuse_file_info *fi)
{
	memset(fi, 0, sizeof *fi);
	fi->flags = flags;
	struct fuse_req *r = fx_req(fs);
	fs_lowlevel_ops()->open(r, ino, fi);
	int err = fx_replied(r);
	if (!err)
		*fi = r->fi;
	return err;
}

/* The application closes the handle in fi: flush, then release. */
static inline void fx_close(fs_ctx *fs, fuse_ino_t ino,
			    struct fuse_file_info *fi)
{
	struct fuse_req *r = fx_req(fs);
	fs_lowlevel_ops()->flush(r, ino, fi);
	cr_assert_eq(fx_replied(r), 0);
	r = fx_req(fs);
	fs_lowlevel_ops()->release(r, ino, fi);
	cr_assert_eq(fx_replied(r), 0);
}

/* Writes a whole file: create, write, close.  0 or the errno. */
static inline int fx_write_file(fs_ctx *fs, fuse_ino_t parent,
				const char *name, const char *text)
{
	struct fuse_file_info fi;
	int err = fx_create(fs, parent, name, text, &fi);
	if (err)
		return err;
	fuse_ino_t ino = fx_lookup(fs, parent, name);
	fx_close(fs, ino, &fi);
	return 0;
}

/* The names `ls -a` shows in directory ino, space-separated in name
 * order ("." and ".." first), in out. */
static inline void fx_readdir(fs_ctx *fs, fuse_ino_t ino, char *out,
			      size_t size)
{
	struct fuse_file_info fi = {0};
	struct fuse_req *r = fx_req(fs);
	fs_lowlevel_ops()->opendir(r, ino, &fi);
	cr_assert_eq(fx_replied(r), 0, "opendir: %s", strerror(r->err));
	fi = r->fi;
	r = fx_req(fs);
	fs_lowlevel_ops()->readdir(r, ino, sizeof r->buf, 0, &fi);
	cr_assert_eq(fx_replied(r), 0, "readdir: %s", strerror(r->err));
	/* struct fuse_dirent: ino, off (8 bytes each), namelen, type (4
	 * each), the name, padded to 8 bytes */
	out[0] = '\0';
	for (size_t at = 0; at + 24 <= r->buf_len;) {
		uint32_t len;
		memcpy(&len, r->buf + at + 16, sizeof len);
		size_t used = strlen(out);
		snprintf(out + used, size - used, "%s%.*s", used ? " " : "",
			 (int)len, r->buf + at + 24);
		at += (24 + len + 7) & ~(size_t)7;
	}
	r = fx_req(fs);
	fs_lowlevel_ops()->releasedir(r, ino, &fi);
	cr_assert_eq(fx_replied(r), 0);
}

/* A new directory name in parent holding file (text): the directory's
 * inode number. */
static inline fuse_ino_t fx_dir_with_file(fs_ctx *fs, fuse_ino_t parent,
					  const char *name, const char *file,
					  const char *text)
{
	cr_assert_eq(fx_mkdir(fs, parent, name, 0755), 0);
	fuse_ino_t d = fx_lookup(fs, parent, name);
	cr_assert_eq(fx_write_file(fs, d, file, text), 0);
	return d;
}

/* The transaction of the local node at path (table locked). */
static inline ov_txn *fx_txn_of(fs_ctx *fs, const char *path)
{
	ov_node *o = ov_get(&fs->ov, path);
	cr_assert_not_null(o, "%s is local", path);
	cr_assert_not_null(o->txn);
	return o->txn;
}

/* A commit trigger for the transaction of path: wr_seal's return code. */
static inline int fx_seal(fs_ctx *fs, const char *path)
{
	fs_itable_lock(fs->it);
	int rc = wr_seal(fs, fx_txn_of(fs, path));
	fs_itable_unlock(fs->it);
	return rc;
}

#endif
