/*
 * fs_opts: the mount options of the fs layer (filled in by cli/mount-options.c,
 * kept in fs_ctx as o).  Types only: fs/ops.h and fs/ctx.h include it.
 */
#ifndef CKPTFS_FS_OPTS_H
#define CKPTFS_FS_OPTS_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

/* -o object_meta= (doc/ckptfs.1): which files outside manifests have their
 * object metadata read with a HEAD */
typedef enum fs_object_meta {
	/* those with a metadata hint (doc/commit.md, "Metadata hints") */
	FS_META_AUTO = 0,
	FS_META_ON,  /* every one (buckets written before hints) */
	FS_META_OFF, /* none */
} fs_object_meta;

typedef struct fs_opts {
	double entry_timeout; /* seconds the kernel caches names */
	double attr_timeout;  /* seconds the kernel caches attributes */
	double dir_timeout;   /* seconds a directory listing is reused */
	uid_t uid;
	gid_t gid;
	mode_t umask;
	size_t readahead_max; /* per-handle read window, bytes */
	bool passthrough;     /* serve fully cached files by FUSE passthrough */
	/* completion rules (proto/complete.h), NULL for VIS_RULES_DEFAULT;
	 * checked by the caller (vis_rules_parse) */
	const char *complete;
	/* directory read-ahead (fs/readahead.c): bytes of the next files of a
	 * directory read in name order downloaded ahead; 0: off */
	uint64_t dir_readahead;
	/* files outside manifests: which have their object metadata (mode,
	 * owner, mtime, symlink) read (fs/metaread.c); the others show the
	 * defaults */
	fs_object_meta object_meta;
} fs_opts;

#endif
