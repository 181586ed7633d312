/*
 * fs_inode: the inode table of the mount.
 *
 * Every name the kernel knows has an fs_inode.  Numbers come from a 64-bit
 * counter; a number is reused only for the same path and type after the
 * kernel forgot it (a bounded memory of forgotten numbers), so st_ino is
 * stable the way a disk filesystem's is and the FUSE generation can stay 0.  Two
 * indexes: by number (for every FUSE call) and by path (so a lookup of a
 * known path returns the same inode).  Lifetime follows the FUSE protocol:
 * nlookup counts lookups the kernel holds and `forget` drops them; a node
 * also holds internal references (children keep their parent, open handles
 * keep their node).  A node is freed when both reach zero.  If a path
 * changes type remotely (file becomes directory), the old node is detached
 * from the path index and a new one takes its place; the old number stays
 * valid until forgotten.
 *
 * Locking: the table has one mutex; every function here requires it held
 * (fs_itable_lock) except new/free.  Nodes carry no lock of their own.
 */
#ifndef CKPTFS_FS_INODE_H
#define CKPTFS_FS_INODE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "proto/manifest.h"
#include "proto/namespace.h"

typedef struct fs_inode fs_inode;

struct fs_inode {
	uint64_t ino;
	uint64_t nlookup; /* kernel references */
	uint64_t refs;    /* internal references */
	fs_inode *parent; /* NULL for the root */
	char *name;       /* "" for the root */
	char *path;       /* relative to the mount root: "", "a", "a/b" */
	bool is_dir;
	bool detached; /* no longer in the path index */

	/* attributes (files: from listing or HEAD) */
	uint64_t size;
	char *etag;
	struct timespec mtime;
	double attr_time; /* monotonic seconds when attributes were set */
	/* the request those attributes came from (a HEAD, or the parent's
	 * listing): when it was sent and when its reply came (fs_now) */
	double obs_began, obs_replied;

	/* attributes a committed manifest recorded (fs/nodes.c remote_attrs) */
	bool has_attrs;
	uint32_t mode, uid, gid; /* mode: as proto_meta's (proto/meta.h) */
	uint64_t rdev;
	char *symlink;     /* the object is a symlink to this */
	char *xattrs_json; /* {"user.k":"base64"} or NULL */
	/* the attributes above are what this mount committed for the file
	 * (fs/write-idle.c reap): they stand for the version the next
	 * listing shows (whose ETag the mount does not learn from the
	 * commit) and every listing of that same version, with no HEAD; a
	 * listing of another version ends it (fs/nodes.c set_file_attrs) */
	bool attrs_committed;
	/* version whose object metadata was read: ETag and LastModified
	 * (fs_meta_read_for), since an ETag names only the bytes: every
	 * empty object (a symlink) has the same one, and a change of
	 * metadata alone keeps it */
	char *meta_etag;
	struct timespec meta_mtime;
	struct timespec obj_mtime; /* LastModified of version etag */
	/* a directory: when this mount last added or removed a name in it
	 * (wr_dir_changed); a listing fetched before that change landed
	 * never moves the mtime back before it (fs/nodes.c) */
	struct timespec name_change;
	/* a directory whose record in a manifest is newer than every object
	 * in it: the time of the first commit that recorded it as it is
	 * (vis_file.since), its ctime's floor instead of the newest
	 * LastModified; 0 otherwise (fs/nodes.c) */
	struct timespec rec_since;
	/* the size the kernel was last given in attributes it may cache
	 * (lookup, readdirplus, getattr): an open of a version of another
	 * size drops them (fs/read.c rd_open) */
	uint64_t k_size;
	bool k_told;
	bool meta_busy;    /* a batch is reading it (fs/metaread.c) */

	/* files: page cache policy (see fs/read.c set_page_cache_mode) */
	char *kc_etag;         /* version whose pages the kernel may hold */
	char *served_etag;     /* version a read has returned bytes of */
	unsigned open_handles;
	/* FUSE passthrough: the kernel binds an inode to one backing file
	 * for as long as it knows the inode, so the id is kept here and
	 * reused by every open of the same version */
	int pt_backing_id;
	char *pt_etag;
	bool pt_pending; /* an open is registering the backing file */
	/* bound to the staging file of a file written through the mount
	 * (fs/write-pt.c): pt_etag is NULL and the binding ends with the last
	 * handle */
	bool pt_stage;
	uint64_t pt_sid;

	/* directories: cached listing; manifests when a transaction root */
	ns_dir *listing;
	vis_manifest *manifest;
	double listing_time;
	double listing_began; /* when the fetch of that listing was sent */
	double listing_replied; /* and when its reply came */
	/* the request behind the newest version an open pinned in this
	 * directory (fs/read.c pin_floor): no later open pins an older look */
	double pin_began, pin_replied;
	uint64_t listing_gen; /* fs listing generation it was fetched in */
	bool listing_busy; /* a thread is fetching it */
	/* the listing was not fetched: the reap made it of the names this
	 * mount committed (fs/write-idle.c leave_in_listings), to serve
	 * while the store is unreachable; otherwise the directory counts as
	 * not listed yet (its mtime, mode and owner unknown: asked) */
	bool listing_held;
	/* directory read-ahead (fs/readahead.c): the last file opened, and
	 * the last one whose download read-ahead started (names) */
	char *ra_last;
	char *ra_upto;
	/* metadata batches of its files (fs/metaread.c): when the last began
	 * (fs_now) and how many followed one another */
	double meta_at;
	unsigned meta_run;

	/* private to the table */
	fs_inode *next_ino, *next_path;
};

typedef struct fs_itable fs_itable;

fs_itable *fs_itable_new(void);
void fs_itable_free(fs_itable *t);
void fs_itable_lock(fs_itable *t);
void fs_itable_unlock(fs_itable *t);
/* Condition tied to the table mutex, for waiting on listing_busy. */
void fs_itable_wait(fs_itable *t);
void fs_itable_broadcast(fs_itable *t);
/* fs_itable_wait until the CLOCK_REALTIME deadline: 0, or ETIMEDOUT. */
int fs_itable_timedwait(fs_itable *t, const struct timespec *until);
/* The table mutex itself, for timed waits on other conditions. */
pthread_mutex_t *fs_itable_mutex(fs_itable *t);

fs_inode *fs_itable_root(fs_itable *t);
fs_inode *fs_itable_get(fs_itable *t, uint64_t ino);
/* Finds or creates the child `name` of parent with the given type. */
fs_inode *fs_itable_child(fs_itable *t, fs_inode *parent, const char *name,
			  bool is_dir);
/* Drops n kernel references; frees the node when nothing holds it. */
void fs_itable_forget(fs_itable *t, fs_inode *n, uint64_t nlookup);
void fs_inode_ref(fs_inode *n);
void fs_itable_unref(fs_itable *t, fs_inode *n);
size_t fs_itable_count(fs_itable *t);
/* Removes n from the path index: the next lookup of its path creates a new
 * inode (the old number stays valid until forgotten). */
void fs_itable_detach(fs_itable *t, fs_inode *n);
/* A rename: n and every node under it take paths under new_parent/
 * new_name; a node already at the new path is detached.  -1: ENOMEM. */
int fs_itable_move(fs_itable *t, fs_inode *n, fs_inode *new_parent,
		   const char *new_name);
/* The node indexed at path, or NULL. */
fs_inode *fs_itable_find(fs_itable *t, const char *path);
/* Called (table locked) for every node about to be freed. */
void fs_itable_set_free_hook(fs_itable *t, void (*fn)(void *, fs_inode *),
			     void *arg);

/* Monotonic clock in seconds. */
double fs_now(void);

#endif
