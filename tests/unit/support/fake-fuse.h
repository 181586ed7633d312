/* FUSE requests for unit tests of src/fs (tests/unit/support/fake-fuse.c):
 * the fuse_req_* and fuse_reply_* functions the operations call, linked in
 * place of libfuse3's, so a test calls an operation (wr_unlink, rd_open,
 * ...) with a request of its own and reads the reply from it. */
#ifndef CKPTFS_TEST_FAKE_FUSE_H
#define CKPTFS_TEST_FAKE_FUSE_H

#include <stdbool.h>
#include <stddef.h>

#include "fs/ctx.h"
#include "fs/dirs.h"
#include "fs/handles.h"
#include "fs/local.h"
#include "fs/nodes.h"
#include "fs/ops.h"
#include "fs/read.h"

struct fuse_req {
	fs_ctx *fs;
	struct fuse_ctx ctx; /* the caller: this process, root unless set */
	int replies;         /* replies sent (an operation sends one) */
	int err;             /* fuse_reply_err's, 0 for any other reply */
	struct fuse_entry_param ep; /* fuse_reply_entry's, fuse_reply_create's */
	struct fuse_file_info fi;   /* fuse_reply_open's, fuse_reply_create's */
	size_t buf_len;             /* fuse_reply_buf's size ... */
	char buf[8192];             /* ... and its first bytes */
	size_t written;             /* fuse_reply_write's count */
	struct stat attr;           /* fuse_reply_attr's */
};

/* fuse_lowlevel_notify_inval_inode calls so far */
extern unsigned fake_invals;

/* A request of this process on fs, as root. */
void fake_req_init(struct fuse_req *r, fs_ctx *fs);

#endif
