/*
 * fs_pt: FUSE passthrough for fully cached files.
 *
 * Linux 6.9+ can serve reads of a FUSE file straight from a "backing" file
 * (here: the cache file), at local-disk speed with no round trip through
 * this process.  libfuse 3.14 predates the feature, so ckptfs negotiates it
 * itself through libfuse's custom I/O hooks (fuse_session_custom_io): the
 * read hook sees the kernel's INIT request and learns whether passthrough
 * is offered; the writev hook adds FUSE_PASSTHROUGH to the INIT reply and
 * stamps FOPEN_PASSTHROUGH plus the backing id into the open reply that
 * rd_open (fs/read.c) sends right after registering the cache file's
 * descriptor (FUSE_DEV_IOC_BACKING_OPEN, which needs CAP_SYS_ADMIN).
 * Everything falls back to ordinary FUSE reads when the kernel, the
 * privilege or the ioctl says no.  Files written through the mount pass
 * through to their staging file the same way (fs/write-pt.c); the create
 * reply is stamped like an open reply.  The same INIT hook accepts
 * FUSE_HANDLE_KILLPRIV_V2 (see patch_init).
 */
#ifndef CKPTFS_FS_PASSTHROUGH_H
#define CKPTFS_FS_PASSTHROUGH_H

#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct fs_pt {
	int dev_fd;           /* /dev/fuse of the session */
	bool wanted;          /* option passthrough=on */
	bool offered;         /* the kernel's INIT offered it */
	bool enabled;         /* our INIT reply accepted it */
	bool killpriv_offered; /* ... and FUSE_HANDLE_KILLPRIV_V2 */
	bool init_done;       /* the INIT reply went out */
	uint64_t init_unique; /* unique of the INIT request */
} fs_pt;

/* Installs the I/O hooks on a mounted session (one per process); pt
 * must outlive it. */
int fs_pt_install(struct fuse_session *se, fs_pt *pt);

/* Registers fd as a backing file: the id, or a negative errno. */
int fs_pt_backing_open(fs_pt *pt, int fd);
void fs_pt_backing_close(fs_pt *pt, int id);

/* The next open reply sent by this thread passes through to backing id. */
void fs_pt_mark_next_open(int backing_id);

#endif
