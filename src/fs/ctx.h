/*
 * The state the FUSE operations of src/fs share: the mount's context
 * (struct fs_ctx), open handles (fs_handle, fs_dirhandle) and the two
 * inline helpers every operation starts with.  Types only: the functions
 * are declared by the header of the file that defines them (fs/nodes.h,
 * fs/handles.h, fs/local.h, fs/write.h, ...).  Private to src/fs.
 */
#ifndef CKPTFS_FS_CTX_H
#define CKPTFS_FS_CTX_H

#include <errno.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "cache/cache.h"
#include "fs/inode.h"
#include "fs/mcache.h"
#include "fs/opts.h"
#include "fs/overlay.h"
#include "fs/passthrough.h"
#include "proto/complete.h"
#include "s3/client.h"

typedef struct fs_ctx fs_ctx;
typedef struct eng eng;

#define LOGGED_MAX 4096
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
	/* [table lock] attributes of committed directories whose change is
	 * not stored yet (fs/write-dirattrs.c): they show meanwhile */
	struct fs_dir_pending *dpend;
	size_t n_dpend, cap_dpend;
	pthread_t idle_thread;
	bool idle_running, idle_stop; /* [table lock] */
	pthread_cond_t idle_cv;
};

/* A committed directory's attributes as a pending eng_dir_set step stores
 * them (fs/write-dirattrs.c); fs/nodes.c shows them over the manifests'
 * until the step is done. */
typedef struct fs_dir_pending {
	char *path;
	char *root; /* the transaction root whose manifests record it; NULL
		     * after a restart (looked up when the step is done) */
	uint64_t step;
	uint64_t ino; /* the inode it shows on (0 after a restart: any at
		       * path): a directory made at that name after a removal
		       * or a rename is another one */
	/* the listing generation its step was seen done in (0: pending): it
	 * shows until root's manifests are listed again after that */
	uint64_t done_gen;
	uint32_t mode, uid, gid;
	struct timespec mtime, ctime;
	char *xattrs_json; /* NULL: none */
} fs_dir_pending;

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
	uint64_t gen; /* fs->listing_gen when the snapshot was taken */
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

#endif
