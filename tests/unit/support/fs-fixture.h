/*
 * Test support for src/fs without FUSE or a server: a mount context
 * (fs_ctx) on prefix "pre/" with no S3 client and no cache, whose LISTs
 * fake-listing.c answers and, for a writable one, whose engine is
 * fake-eng.c's (no idle thread: a test seals and reaps by hand).
 * Included by unit tests only, once per test program.
 */
#ifndef CKPTFS_TEST_FS_FIXTURE_H
#define CKPTFS_TEST_FS_FIXTURE_H

#include <criterion/criterion.h>
#include <string.h>

#include "fs/ctx.h"
#include "fs/dirs.h"
#include "fs/handles.h"
#include "fs/local.h"
#include "fs/nodes.h"
#include "fs/ops.h"
#include "fs/read.h"
#include "util/log.h"

#include "fake-listing.h"

/* A read-only mount: listings kept dir_timeout seconds, attributes 1 s,
 * uid/gid 1000, umask 022. */
static inline fs_ctx *fx_new(double dir_timeout)
{
	log_init(LOG_LVL_ERROR, false);
	fake_list_reset();
	fs_opts o = {.entry_timeout = 1, .attr_timeout = 1,
		     .dir_timeout = dir_timeout, .uid = 1000, .gid = 1000,
		     .umask = 022};
	fs_ctx *fs = fs_ctx_new(NULL, NULL, "pre/", &o);
	cr_assert_not_null(fs);
	return fs;
}

/* The inode of child name of p as the kernel holds it after a lookup (a
 * node nothing holds is freed when a listing's reference goes). */
static inline fs_inode *fx_node(fs_ctx *fs, fs_inode *p, const char *name,
				bool is_dir)
{
	fs_inode *c = fs_itable_child(fs->it, p, name, is_dir);
	cr_assert_not_null(c);
	c->nlookup++;
	return c;
}

/* Lists d now (table locked), answering with fake_list. */
static inline void fx_list(fs_ctx *fs, fs_inode *d)
{
	cr_assert_eq(fs_dir_refetch(fs, d), 0, "LIST of /%s", d->path);
}

/* The inode of entry name of d's listing (table locked). */
static inline fs_inode *fx_child(fs_ctx *fs, fs_inode *d, const char *name)
{
	cr_assert_not_null(d->listing, "/%s is listed", d->path);
	const ns_entry *e = ns_dir_find(d->listing, name);
	cr_assert_not_null(e, "/%s lists %s", d->path, name);
	fs_inode *c = fs_child_for(fs, d, e);
	cr_assert_not_null(c);
	c->nlookup++;
	return c;
}

/* A directory d listed with the entries added to fake_list, which is
 * reset after (table locked). */
static inline fs_inode *fx_listed_dir(fs_ctx *fs, fs_inode *parent,
				      const char *name)
{
	fs_inode *d = name ? fx_node(fs, parent, name, true) : parent;
	fx_list(fs, d);
	fake_list_reset();
	return d;
}

#endif
