/*
 * fs/nodes.c: listings and attributes of remote nodes.  Table locked where
 * noted.
 */
#ifndef CKPTFS_FS_NODES_H
#define CKPTFS_FS_NODES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "cache/cache.h"
#include "fs/ctx.h"
#include "proto/namespace.h"

/* st_blksize of remote files (fs_fill_stat): 128 KiB, 512 KiB for files of
 * 8 MiB or more.  cat and Python size their buffer from it: 1 MiB
 * overflows the L2 cache on a hot read; 128 and 256 KiB reads with the
 * POSIX_FADV_SEQUENTIAL that cat asks for made warm passthrough reads of
 * big files erratic, up to twice as slow (doc/architecture.md, "Reads") */
#define FS_READ_BLKSIZE (128u << 10)
#define FS_BIG_BLKSIZE (512u << 10)
#define FS_BIG_FILE (8ull << 20)



char *fs_object_key(fs_ctx *fs, const fs_inode *n);
void fs_fill_stat(fs_ctx *fs, const fs_inode *n, struct stat *st);
/* Whether -o object_meta= wants file n's object metadata read: on always,
 * off never, auto when n's directory listing holds a metadata hint for it
 * (or is not known).  Table locked. */
bool fs_meta_wanted(fs_ctx *fs, const fs_inode *n);
/* Whether file n's object metadata is still to be read for its version
 * (fs/metaread.c fs_check_meta): wanted (fs_meta_wanted), not read for
 * this version (its ETag and LastModified), and neither a manifest nor
 * this mount's commit speaks for n.  Metadata read for another version
 * counts as unread: a name renamed server-side (a copy: a new
 * LastModified) or stored again shows the listing's LastModified until
 * it is read.  Table locked. */
bool fs_meta_unread(fs_ctx *fs, const fs_inode *n);
void fs_fill_entry(fs_ctx *fs, fs_inode *n, struct fuse_entry_param *ep);
/* Makes d->listing fresh; drops the lock while listing.  0 or -errno. */
int fs_dir_load(fs_ctx *fs, fs_inode *d);          /* table locked */
int fs_dir_refetch(fs_ctx *fs, fs_inode *d);       /* table locked */
/* Lists d again when its listing is still fresh but near the end of
 * dir_timeout (and no listing of d is under way), so that a directory
 * being read never makes its next open or lookup wait for a LIST.  For
 * after a reply.  Table locked (dropped while listing). */
void fs_dir_refresh_ahead(fs_ctx *fs, fs_inode *d);
/* Whether d's listing, past dir_timeout or not, is recent enough to
 * answer a stat of d before it is listed again behind the reply: within
 * the STALE_OK_FACTOR x dir_timeout lookups answer from (a directory's
 * attributes and mtime come from its own listing).  Table locked. */
bool fs_dir_recent(fs_ctx *fs, const fs_inode *d);
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
/* The transaction root whose manifests readers take directory d's
 * attributes from (its nearest ancestor that is one and records d, else
 * d itself when its own "dir" does), malloc'd; NULL when none records it
 * (a directory other tools made).  Table locked. */
char *fs_dir_record_root(const fs_inode *d);
/* The latest change of directory c's attributes this mount made that is
 * not stored yet (fs->dpend, fs/write-dirattrs.c) shown over what the
 * manifests say; false when there is none.  Table locked. */
bool fs_dir_show_pending(fs_ctx *fs, fs_inode *c);
/* The block checksums n's manifest records for version (etag, size), to
 * check downloads against.  Table locked. */
bool fs_manifest_blocks(const fs_inode *n, const char *etag, uint64_t size,
			cache_expect *x, uint32_t **crc);
/* The same for the file at path (a child of directory dir, with or without
 * an inode).  Table locked. */
bool fs_manifest_blocks_at(const fs_inode *dir, const char *path,
			   const char *etag, uint64_t size, cache_expect *x,
			   uint32_t **crc);

#endif
