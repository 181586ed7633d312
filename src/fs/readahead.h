/*
 * fs/readahead.c: directory read-ahead.
 */
#ifndef CKPTFS_FS_READAHEAD_H
#define CKPTFS_FS_READAHEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fs/ctx.h"
#include "proto/namespace.h"

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

#endif
