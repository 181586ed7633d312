/*
 * Copy-on-write: a remote file becomes local (opened for writing without
 * O_TRUNC, truncated, or its attributes changed) by copying its bytes into
 * a staging file through the read cache, or by ranged GETs without one,
 * checked against its manifest's block CRCs as a read would be; never
 * guessed (fs/write.c has the overview).
 */
#include "fs/write-cow.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs/ctx.h"
#include "fs/nodes.h"
#include "fs/write-txn.h"
#include "proto/crc.h"
#include "proto/meta.h"
#include "util/log.h"

/* Downloads [off, off+want) into b; with an expected block CRC (check),
 * a damaged download is tried again, then fails with EIO. */
static int fetch_range(fs_ctx *fs, const char *key, const char *etag,
		       uint64_t off, size_t want, char *b, bool check,
		       uint32_t expect)
{
	for (int attempt = 1;; attempt++) {
		s3_err e;
		size_t got = 0;
		if (s3_get_range(fs->s3, key, off, want, etag, b, &got, &e) < 0 ||
		    got != want) {
			log_error("copy-on-write of %s: %s", key,
				  got != want ? "short read" : e.msg);
			return -(got != want || !e.err ? EIO : e.err);
		}
		uint32_t crc = check ? proto_crc32c(0, b, got) : expect;
		if (crc == expect)
			return 0;
		if (attempt > CACHE_VERIFY_RETRIES) {
			log_error("copy-on-write of %s: bytes at offset %llu do "
				  "not match its manifest (CRC-32C %08x, the "
				  "manifest says %08x)",
				  key, (unsigned long long)off, crc, expect);
			return -EIO;
		}
	}
}

int wr_fetch_remote(fs_ctx *fs, fs_inode *n, const char *key, int fd,
		    uint64_t *size)
{
	s3_head_result hr;
	s3_err e;
	if (s3_head(fs->s3, key, &hr, &e) < 0) {
		log_error("copy-on-write of %s: %s", key, e.msg);
		return -(e.err ? e.err : EIO);
	}
	*size = hr.size;
	if (hr.size == 0)
		return 0;
	/* checked against its manifest, as a read would be */
	cache_expect x = {0};
	uint32_t *crc = NULL;
	fs_itable_lock(fs->it);
	bool check = fs_manifest_blocks(n, hr.etag, hr.size, &x, &crc);
	fs_itable_unlock(fs->it);
	if (fs->cache) {
		cache_file *cf = NULL;
		bool hit = false;
		int rc = cache_file_open_expect(fs->cache, key, hr.etag, hr.size,
						check ? &x : NULL, &cf, &hit);
		if (rc == 0) {
			int in = cache_file_ready(cf, 0, (size_t)hr.size);
			if (in == -ESTALE) /* replaced meanwhile */
				in = -EIO;
			rc = in < 0 ? in : wr_copy_fd(in, fd, hr.size);
			cache_file_close(cf);
			if (rc == 0 || in < 0) {
				/* a failed download is not tried again
				 * around the cache: it may be damaged */
				free(crc);
				return rc;
			}
		}
		log_info("copy-on-write of %s: cache unavailable (%s); "
			 "downloading directly",
			 key, strerror(-rc));
	}
	size_t chunk = check ? x.block : 8u << 20;
	char *b = malloc(chunk);
	int rc = b ? 0 : -ENOMEM;
	for (uint64_t off = 0, i = 0; rc == 0 && off < hr.size; i++) {
		size_t want = hr.size - off > chunk ? chunk
						    : (size_t)(hr.size - off);
		rc = fetch_range(fs, key, hr.etag, off, want, b, check,
				 check ? crc[i] : 0);
		if (rc == 0 && pwrite(fd, b, want, (off_t)off) != (ssize_t)want)
			rc = -errno;
		off += want;
	}
	free(b);
	free(crc);
	return rc;
}

/* A remote file becomes local (copy-on-write).  Table locked; dropped for
 * the download. */
int wr_make_local_file(fs_ctx *fs, fs_inode *n, bool truncate,
			   ov_node **out)
{
	ov_txn *x = NULL;
	fs_inode *p = n->parent;
	int rc = wr_txn_for_new(fs, p, n->path, false, &x);
	if (rc < 0)
		return rc;
	ov_node *o = ov_get(&fs->ov, n->path);
	if (o && o->kind != OV_WHITEOUT) { /* raced with another open */
		*out = o;
		return 0;
	}
	if (o)
		ov_remove(&fs->ov, o);
	/* the copy keeps what the file showed: type, mode, owner */
	struct stat cur;
	fs_fill_stat(fs, n, &cur);
	o = ov_add(&fs->ov, n->path, OV_FILE, x);
	if (!o)
		return -ENOMEM;
	o->shadows = true;
	o->mode = proto_mode_type(cur.st_mode) == S_IFREG
			  ? cur.st_mode & 07777
			  : cur.st_mode & (S_IFMT | 07777);
	if (n->symlink) { /* a symlink stays one (chown, utimensat) */
		o->kind = OV_LINK;
		o->target = strdup(n->symlink);
		if (!o->target) {
			ov_remove(&fs->ov, o);
			return -ENOMEM;
		}
	}
	o->rdev = cur.st_rdev;
	o->uid = cur.st_uid;
	o->gid = cur.st_gid;
	o->mtime = cur.st_mtim;
	o->ctime = cur.st_ctim;
	if (n->xattrs_json) { /* and its xattrs */
		buf blob = BUF_INIT;
		proto_xattrs_decode(n->xattrs_json, &blob);
		size_t pos = 0;
		const char *name, *val;
		uint32_t vlen;
		while (proto_xattr_next(blob.data, blob.len, &pos, &name, &val,
					&vlen))
			ov_xattr_set(o, name, val, vlen, 0);
		buf_free(&blob);
	}
	rc = wr_new_stage(fs, o);
	if (rc == 0 && !truncate) {
		char *key = fs_object_key(fs, n);
		ov_node_ref(o);
		ov_stage *s = o->st;
		ov_stage_ref(s);
		o->writers++; /* keeps the idle thread away */
		fs_itable_unlock(fs->it);
		uint64_t size = 0;
		rc = key ? wr_fetch_remote(fs, n, key, s->fd, &size) : -ENOMEM;
		free(key);
		fs_itable_lock(fs->it);
		o->writers--;
		if (rc == 0)
			o->size = size;
		ov_stage_unref(s);
		ov_node_unref(o);
	}
	if (rc < 0) {
		if (o->linked)
			ov_remove(&fs->ov, o);
		return rc;
	}
	o->dirty = truncate;
	*out = o;
	return 0;
}

int wr_copy_in(fs_ctx *fs, fs_inode *n, ov_node **out)
{
	ov_node *o = NULL;
	int rc = wr_make_local_file(fs, n, false, &o);
	if (rc < 0)
		return rc;
	o->dirty = true;
	/* handed over, not sealed: a single file with no writer seals at
	 * its put (wr_put_stage), here at the old name */
	o->writers++;
	rc = wr_put_file(fs, o);
	o->writers--;
	if (rc == 0)
		*out = o;
	return rc;
}
