/*
 * fs/metaread.c: object metadata, read in parallel batches.
 */
#ifndef CKPTFS_FS_METAREAD_H
#define CKPTFS_FS_METAREAD_H

#include <stddef.h>

#include "fs/ctx.h"
#include "s3/client.h"
#include "util/buf.h"

/* Reads a plain object's attributes from its metadata, with those of the
 * files after it in its directory's listing that need theirs, in one
 * parallel batch.  Table locked; dropped for the HEADs. */
void fs_check_meta(fs_ctx *fs, fs_inode *n);
/* Object metadata as fs->metacache keeps it: "name NUL value NUL" pairs
 * appended to out (0, or -1 out of memory); and back, pointing into body
 * (at most max pairs; an unterminated tail is ignored). */
int fs_meta_pack(const s3_meta *v, size_t n, buf *out);
size_t fs_meta_unpack(const char *body, size_t len, s3_meta *v, size_t max);

#endif
