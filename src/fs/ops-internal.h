/*
 * The state the FUSE operations share (struct fs_ctx, open handles) and
 * the functions of src/fs below the operation table, each with the file
 * that defines it.  Private to src/fs.  The files form layers that call
 * only downwards:
 *
 *   fs/ops.c, fs/context.c          the table; the context's life cycle
 *   fs/dirs.c, fs/read.c            the read side's operations
 *   fs/readahead.c                  directory read-ahead (for read.c)
 *   fs/write*.c                     the write side (fs/write-internal.h)
 *   fs/metaread.c                   object metadata, in parallel batches
 *   fs/nodes.c, fs/handles.c        listings and attributes; handles
 *   fs/local.c, fs/write-deletes.c  the overlay as lookups see it; deletes
 *   fs/inode.c, fs/overlay.c, fs/listing.c, fs/mcache.c, fs/passthrough.c
 */
#ifndef CKPTFS_FS_OPS_INTERNAL_H
#define CKPTFS_FS_OPS_INTERNAL_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "fs/inode.h"
#include "fs/mcache.h"
#include "fs/ops.h"
#include "fs/overlay.h"
#include "proto/complete.h"
#include "proto/namespace.h"
#include "util/buf.h"

#define LOGGED_MAX 4096
/* st_blksize of remote files (fs_fill_stat): 128 KiB, 512 KiB for files of
 * 8 MiB or more.  cat and Python size their buffer from it: 1 MiB
 * overflows the L2 cache on a hot read; 128 and 256 KiB reads with the
 * POSIX_FADV_SEQUENTIAL that cat asks for made warm passthrough reads of
 * big files erratic, up to twice as slow (doc/architecture.md, "Reads") */
#define FS_READ_BLKSIZE (128u << 10)
#define FS_BIG_BLKSIZE (512u << 10)
#define FS_BIG_FILE (8ull << 20)

struct fs_ctx {
	fs_pt pt;
	struct fuse_session *se; /* for notifications; NULL before mount */
	s3_client *s3;
	cache *cache;
	char *prefix;
	fs_itable *it;
	fs_mcache *mcache; /* manifest bodies by ETag (fs/mcache.h) */
	fs_mcache *metacache; /* object metadata by ETag (fs/metaread.c) */
	/* directory listings being fetched (fs_dir_load; table lock): while
	 * one is, the application is not quiet, it waits for the store (a
	 * stalled request), so held deletes are not sent yet */
	unsigned fetching;
	fs_opts o;
	vis_rules complete; /* parsed o.complete */
	struct timespec mount_time;
	pthread_mutex_t log_mu;
	/* handles closed by the application (flush) whose asynchronous
	 * release has not arrived yet: their cache pins are about to go */
	unsigned closing; /* [table lock] */
	/* handles opened with FOPEN_NOFLUSH (files cached whole, fs/read.c):
	 * the kernel sends no flush, so any of them may be closing */
	unsigned noflush_open; /* [table lock] */
	uint64_t released; /* [table lock] releases of those so far */
	/* those of them that were writable: release ends their part in a
	 * transaction (it stays open until then, and a sync leaves an open
	 * transaction unsealed) and, with passthrough, hands their bytes to
	 * the commit engine (fs/write.c) */
	unsigned wr_closing; /* [table lock] */
	/* the upload hold (eng_hold_uploads): writable handles open, when
	 * the last one closed, what the engine was last told */
	unsigned writers;      /* [table lock] */
	double writers_idle_at; /* [table lock] */
	bool hold_on;           /* [table lock] */
	/* open handles, freed at unmount if the kernel never released them */
	struct fs_handle *handles;       /* [table lock] */
	struct fs_dirhandle *dirhandles; /* [table lock] */
	uint64_t logged[LOGGED_MAX]; /* hashes of keys already reported */
	size_t n_logged;

	/* writes (fs/write.c); eng NULL: read-only */
	eng *eng;
	double commit_delay;
	ov_table ov;            /* [table lock] */
	uint64_t listing_gen;   /* [table lock] bumped when remote state
	                         * changed under cached listings */
	struct wr_deletes *dels; /* [table lock] remote deletes not yet sent */
	pthread_t idle_thread;
	bool idle_running, idle_stop; /* [table lock] */
	pthread_cond_t idle_cv;
};

typedef struct fs_handle fs_handle;
struct fs_handle {
	fs_handle *prev, *next; /* fs->handles [table lock] */
	bool linked;
	fs_inode *node; /* holds a reference */
	/* NULL: uncached reads through the window.  Replaced once at most,
	 * by a read that found the version gone (switch_version): read and
	 * written with __atomic builtins, the old one kept in stale_cf until
	 * release (reads in flight may still use it) */
	cache_file *cf;
	cache_file *stale_cf;
	atomic_bool served; /* a read returned bytes */
	bool hit;       /* every byte was cached at open */
	bool flushed;   /* counted in fs->closing */
	bool noflush;   /* opened with FOPEN_NOFLUSH: in fs->noflush_open */
	atomic_bool cache_failed; /* download failed: read uncached from now on */
	/* reads hold it shared; release takes it exclusively, because the
	 * kernel may release a file while readahead reads are still replying */
	pthread_rwlock_t busy;
	int backing_id; /* > 0: reads pass through to the cache file */
	char *key;
	char etag[128];
	uint64_t size;
	pthread_mutex_t mu;
	char *win;          /* read window */
	uint64_t win_off;
	size_t win_len, win_cap;
	uint64_t next_seq;  /* where a sequential reader would read next */
	/* manifest block CRCs (fs_manifest_blocks) for uncached reads to
	 * check whole blocks against; NULL: none */
	uint32_t *vcrc;
	uint32_t vblock;
	size_t vn;
	size_t ra;          /* current read-ahead size */
	/* local files (fs/write.c): reads and writes go to the staging file */
	ov_node *ov;        /* holds a reference */
	bool writable;
	pid_t opener; /* the caller of the open (a thread id) */
	bool wrote;
	bool pt_write; /* writes pass through to the staging file */
};

typedef struct fs_dirent_snap {
	char *name;
	char *etag;
	bool is_dir;
	uint64_t size;
	struct timespec mtime;
} fs_dirent_snap;

typedef struct fs_dirhandle fs_dirhandle;
struct fs_dirhandle {
	fs_dirhandle *prev, *next; /* fs->dirhandles [table lock] */
	fs_dirent_snap *v;
	size_t n;
};


static inline fs_ctx *fs_req_ctx(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* Locks the table and returns inode ino; when there is none, unlocks it,
 * replies ENOENT to req and returns NULL. */
static inline fs_inode *fs_lock_inode(fuse_req_t req, fs_ctx *fs,
				      fuse_ino_t ino)
{
	fs_itable_lock(fs->it);
	fs_inode *n = fs_itable_get(fs->it, ino);
	if (!n) {
		fs_itable_unlock(fs->it);
		fuse_reply_err(req, ENOENT);
	}
	return n;
}

/* ---- fs/nodes.c: listings and attributes.  Table locked where noted. -- */

char *fs_object_key(fs_ctx *fs, const fs_inode *n);
void fs_fill_stat(fs_ctx *fs, const fs_inode *n, struct stat *st);
/* Whether -o object_meta= wants file n's object metadata read: on always,
 * off never, auto when n's directory listing holds a metadata hint for it
 * (or is not known).  Table locked. */
bool fs_meta_wanted(fs_ctx *fs, const fs_inode *n);
void fs_fill_entry(fs_ctx *fs, fs_inode *n, struct fuse_entry_param *ep);
/* Makes d->listing fresh; drops the lock while listing.  0 or -errno. */
int fs_dir_load(fs_ctx *fs, fs_inode *d);          /* table locked */
int fs_dir_refetch(fs_ctx *fs, fs_inode *d);       /* table locked */
/* Lists d again when its listing is still fresh but near the end of
 * dir_timeout (and no listing of d is under way), so that a directory
 * being read never makes its next open or lookup wait for a LIST.  For
 * after a reply.  Table locked (dropped while listing). */
void fs_dir_refresh_ahead(fs_ctx *fs, fs_inode *d);
/* name's entry in d's listing when the listing is past dir_timeout and a
 * lookup may still answer from it (a large directory's name, or a
 * subdirectory: refreshed after the reply), else NULL.  Table locked. */
const ns_entry *fs_dir_stale_entry(fs_ctx *fs, const fs_inode *d,
				   const char *name);
/* Whether d lies in (or is) a transaction root whose manifests, at its
 * last listing, are all pending: nothing in it is committed, so it shows
 * nothing and is not there for readers.  Table locked. */
bool fs_dir_uncommitted(const fs_inode *d);
/* The string a version's object metadata is kept under (fs->metacache,
 * with fs_inode.meta_etag and meta_mtime): its ETag and LastModified. */
#define FS_META_VER_MAX 192 /* an ETag (64+ bytes), '@', a time */
void fs_meta_version(char out[FS_META_VER_MAX], const char *etag,
		     struct timespec lm);
/* n's version as a HEAD saw it (ETag, LastModified in whole seconds): the
 * listing's finer LastModified stays while the ETag and second agree.
 * Table locked. */
void fs_set_version(fs_inode *n, const char *etag, struct timespec lm);
/* Whether n's object metadata was read for the version with ETag etag
 * and LastModified lm.  Table locked. */
bool fs_meta_read_for(const fs_inode *n, const char *etag,
		      struct timespec lm);
/* Child inode for a listing entry, attributes updated.  Table locked. */
fs_inode *fs_child_for(fs_ctx *fs, fs_inode *parent, const ns_entry *e);
/* Whether n serves another version than etag (it then gets a new inode). */
bool fs_bound_to_other_version(const fs_inode *n, const char *etag);
/* The block checksums n's manifest records for version (etag, size), to
 * check downloads against.  Table locked. */
bool fs_manifest_blocks(const fs_inode *n, const char *etag, uint64_t size,
			cache_expect *x, uint32_t **crc);
/* The same for the file at path (a child of directory dir, with or without
 * an inode).  Table locked. */
bool fs_manifest_blocks_at(const fs_inode *dir, const char *path,
			   const char *etag, uint64_t size, cache_expect *x,
			   uint32_t **crc);

/* ---- fs/metaread.c ---------------------------------------------------- */

/* Reads a plain object's attributes from its metadata, with those of the
 * files after it in its directory's listing that need theirs, in one
 * parallel batch.  Table locked; dropped for the HEADs. */
void fs_check_meta(fs_ctx *fs, fs_inode *n);
/* Object metadata as fs->metacache keeps it: "name NUL value NUL" pairs
 * appended to out (0, or -1 out of memory); and back, pointing into body
 * (at most max pairs; an unterminated tail is ignored). */
int fs_meta_pack(const s3_meta *v, size_t n, buf *out);
size_t fs_meta_unpack(const char *body, size_t len, s3_meta *v, size_t max);

/* ---- fs/readahead.c --------------------------------------------------- */

/* A remote file n was opened: when its directory is read forward in name
 * order, starts the downloads of the files after it (dir_readahead).
 * Table not locked; blocks for the cache's index, not for the network. */
void fs_readahead_opened(fs_ctx *fs, fs_inode *n);
/* Whether opening entry at of listing l goes forward in name order: after
 * last (the name opened before), or, without one, the first file. */
bool fs_ra_forward(const ns_dir *l, size_t at, const char *last);
/* The files after entry at of l to download ahead, as indexes into l->v
 * (at most max, into idx; returns how many): files with a size, in order,
 * while their sizes add up to at most budget (one: at least one file),
 * skipping those named up to upto (started before; NULL: none). */
size_t fs_ra_window(const ns_dir *l, size_t at, const char *upto,
		    uint64_t budget, bool one, size_t max, size_t *idx);

/* ---- fs/handles.c ------------------------------------------------------ */

void fs_handle_link(fs_ctx *fs, fs_handle *h);     /* table locked */
/* Frees a handle of a remote object; counted: it counts in its inode's
 * open_handles.  A local file's handle: wr_handle_free. */
void fs_handle_free(fs_ctx *fs, fs_handle *h, bool counted);
/* The two halves of a free, for wr_handle_free. */
void fs_handle_settle(fs_handle *h);
void fs_handle_drop(fs_ctx *fs, fs_handle *h, bool counted);
/* Whether a handle was closed (flushed) and its release is still to come:
 * the space it holds is about to be freed. */
bool fs_closing_handles(fs_ctx *fs);
/* Releases of closed handles so far (for fs_wait_release's seen). */
uint64_t fs_releases(fs_ctx *fs);
/* Waits until a release arrives after *seen (fs_releases before the
 * attempt that failed for want of room: one that came during the attempt
 * counts), or until deadline (CLOCK_REALTIME); false when none came and
 * none is to come (nothing closing) or the deadline passed.  Updates
 * *seen.  Handles opened without flush (fs->noflush_open) count as
 * closing, for at most 1 s when no other one is. */
bool fs_wait_release(fs_ctx *fs, const struct timespec *deadline,
		     uint64_t *seen);
void fs_dirhandle_unlink(fs_ctx *fs, fs_dirhandle *dh); /* table locked */
void fs_dirhandle_free(fs_dirhandle *dh);

/* ---- fs/local.c: the overlay as lookups see it.  Table locked. -------- */

/* Lookup of name in p answered by the overlay: 1 (found: *out, or
 * *out NULL for a whiteout: ENOENT), 0 (ask the remote listing). */
int wr_lookup(fs_ctx *fs, fs_inode *p, const char *name, fs_inode **out);
/* Attributes of a local node; false when n is not one. */
bool wr_fill_stat(fs_ctx *fs, const fs_inode *n, struct stat *st);
/* Whether the overlay has a local directory at n's path. */
bool wr_is_local_dir(fs_ctx *fs, const fs_inode *n);
/* Whether n has a node in the overlay at all (a directory restored from the
 * journal and merged with the bucket's listing included). */
bool wr_has_local_node(fs_ctx *fs, const fs_inode *n);
/* Merges the overlay into a directory snapshot. */
int wr_merge_listing(fs_ctx *fs, fs_inode *d, fs_dirhandle *dh);
/* Whether thread ids a and b belong to one process (true when /proc no
 * longer knows one of them).  No lock: it reads /proc. */
bool wr_same_process(pid_t a, pid_t b);

/* ---- fs/write-deletes.c ------------------------------------------------ */

/* The last directory listing being fetched returned: the quiet time of
 * held deletes starts again now.  Table locked. */
void wr_fetch_done(fs_ctx *fs);

/* ---- the operations (for fs/ops.c and fs/context.c) --------------------- */

/* fs/dirs.c */
void rd_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void rd_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void rd_forget_multi(fuse_req_t req, size_t count,
		     struct fuse_forget_data *forgets);
void rd_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void rd_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void rd_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi);
void rd_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi);
void rd_releasedir(fuse_req_t req, fuse_ino_t ino,
		   struct fuse_file_info *fi);
/* fs/read.c: open and read of a remote file (wr_open declined it) */
void rd_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void rd_read(fuse_req_t req, size_t size, off_t off,
	     struct fuse_file_info *fi);

/* fs/write.c: open of a local file, or for writing: true when it replied */
bool wr_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
bool wr_read(fuse_req_t req, fs_handle *h, size_t size, off_t off);
/* flush of a handle with h->ov.
 * req: the closing process's; a writer other than root loses the file's
 * set-user-ID bit (and set-group-ID, as on a local disk: wr_kill_suid) */
void wr_flush(fs_ctx *fs, fs_handle *h, fuse_req_t req);
/* Frees a handle with h->ov (counted: as for fs_handle_free); the file is
 * handed to the engine if it was its last writer. */
void wr_handle_free(fs_ctx *fs, fs_handle *h, bool counted);
void wr_statfs(fs_ctx *fs, struct statvfs *sv);
/* fs/write-idle.c: stops the idle thread */
void wr_shutdown(fs_ctx *fs);

/* FUSE operations of the write path (fs/write.c, fs/write-attrs.c,
 * fs/write-names.c). */
void wr_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		 size_t size);
void wr_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void wr_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
		 const char *value, size_t size, int flags);
void wr_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);
void wr_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
	      mode_t mode, dev_t rdev);
void wr_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
	      mode_t mode);
void wr_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void wr_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void wr_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		const char *name);
void wr_readlink(fuse_req_t req, fuse_ino_t ino);
void wr_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
	       fuse_ino_t newparent, const char *newname, unsigned int flags);
void wr_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
	     const char *newname);
void wr_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		int to_set, struct fuse_file_info *fi);
void wr_create(fuse_req_t req, fuse_ino_t parent, const char *name,
	       mode_t mode, struct fuse_file_info *fi);
void wr_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *bufv,
		  off_t off, struct fuse_file_info *fi);
void wr_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
	      struct fuse_file_info *fi);
void wr_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
		 struct fuse_file_info *fi);
void wr_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset,
		  off_t length, struct fuse_file_info *fi);

#endif
