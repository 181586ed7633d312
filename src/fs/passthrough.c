/*
 * fs_pt: wire-level negotiation of FUSE passthrough (see passthrough.h).
 *
 * Structures and constants below are those of the kernel's FUSE protocol
 * (include/uapi/linux/fuse.h, 7.40+), which Debian 12's headers predate.
 * Only fields at fixed offsets are touched: flags and flags2 of
 * fuse_init_out, and open_flags/backing_id of fuse_open_out.
 */
#include "fs/passthrough.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "util/log.h"

#define PT_INIT_EXT (1u << 30)
#define PT_FLAGS2_PASSTHROUGH (1u << 5) /* FUSE_PASSTHROUGH = 1 << 37 */
#define PT_FOPEN_PASSTHROUGH (1u << 7)
#define PT_HANDLE_KILLPRIV_V2 (1u << 28)

struct pt_backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};

#define PT_IOC_MAGIC 229
#define PT_IOC_BACKING_OPEN _IOW(PT_IOC_MAGIC, 1, struct pt_backing_map)
#define PT_IOC_BACKING_CLOSE _IOW(PT_IOC_MAGIC, 2, uint32_t)

/* fuse_init_in / fuse_init_out as of protocol 7.40 */
struct pt_init_in {
	uint32_t major, minor, max_readahead, flags, flags2;
};
struct pt_init_out {
	uint32_t major, minor, max_readahead, flags;
	uint16_t max_background, congestion_threshold;
	uint32_t max_write, time_gran;
	uint16_t max_pages, map_alignment;
	uint32_t flags2, max_stack_depth;
};
struct pt_open_out {
	uint64_t fh;
	uint32_t open_flags;
	int32_t backing_id;
};

static __thread int tl_backing_id;

/* The state of the session the hooks are installed on (one per process):
 * set by fs_pt_install before the session reads its first request. */
static fs_pt *hooked;

void fs_pt_mark_next_open(int backing_id)
{
	tl_backing_id = backing_id;
}

static ssize_t pt_read(int fd, void *dst, size_t len, void *userdata)
{
	fs_pt *pt = hooked;
	ssize_t r = read(fd, dst, len);
	if (r < (ssize_t)(sizeof(struct fuse_in_header) +
			  sizeof(struct pt_init_in)))
		return r;
	const struct fuse_in_header *h = dst;
	if (h->opcode != FUSE_INIT)
		return r;
	const struct pt_init_in *in = (const void *)(h + 1);
	pt->init_unique = h->unique;
	pt->offered = in->major == 7 && in->minor >= 36 &&
		      (in->flags & PT_INIT_EXT) &&
		      (in->flags2 & PT_FLAGS2_PASSTHROUGH);
	pt->killpriv_offered = in->major == 7 && in->minor >= 33 &&
			       (in->flags & PT_HANDLE_KILLPRIV_V2);
	return r;
}

/*
 * FUSE_HANDLE_KILLPRIV_V2: without it the kernel asks us for
 * security.capability (a GETXATTR round trip) before every write(2), to
 * see whether the write must drop it (FUSE never marks its superblock
 * SB_NOSEC).  With it the kernel marks an inode S_NOSEC after one such
 * look, and leaves dropping set-id bits to us: fs/write-attrs.c clears
 * them on truncate and chown (FATTR_KILL_SUIDGID) and fs/write.c when a
 * writer other than root closes a file it changed.  ckptfs stores no security.* xattrs, so
 * there is never a capability to drop.  Measured on the bench save
 * (2 048 writes of 1 MiB): 235 ms of GETXATTR round trips per save.
 */
static void patch_init(fs_pt *pt, struct iovec *iov, int count)
{
	if (count < 2 || iov[1].iov_len < sizeof(struct pt_init_out))
		return;
	struct pt_init_out *out = iov[1].iov_base;
	if (pt->killpriv_offered)
		out->flags |= PT_HANDLE_KILLPRIV_V2;
	if (!pt->wanted || !pt->offered)
		return;
	out->flags |= PT_INIT_EXT;
	out->flags2 |= PT_FLAGS2_PASSTHROUGH;
	out->max_stack_depth = 1;
	pt->enabled = true;
	log_info("FUSE passthrough enabled: cached files are read at "
		 "local-disk speed");
}

static ssize_t pt_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	fs_pt *pt = hooked;
	if (count >= 1 && iov[0].iov_len == sizeof(struct fuse_out_header)) {
		const struct fuse_out_header *oh = iov[0].iov_base;
		if (!pt->init_done && oh->unique == pt->init_unique &&
		    oh->error == 0) {
			pt->init_done = true;
			patch_init(pt, iov, count);
		}
		/* an open reply, or a create reply (entry, then open) */
		size_t at = SIZE_MAX;
		if (count >= 2 && iov[1].iov_len == sizeof(struct pt_open_out))
			at = 0;
		else if (count >= 2 &&
			 iov[1].iov_len == sizeof(struct fuse_entry_out) +
						   sizeof(struct pt_open_out))
			at = sizeof(struct fuse_entry_out);
		if (tl_backing_id > 0 && oh->error == 0 && at != SIZE_MAX) {
			struct pt_open_out *oo =
				(void *)((char *)iov[1].iov_base + at);
			oo->open_flags |= PT_FOPEN_PASSTHROUGH;
			oo->backing_id = tl_backing_id;
		}
	}
	tl_backing_id = 0;
	return writev(fd, iov, count);
}

/* Replies carrying file data (cached reads) are spliced, as without the
 * hooks: libfuse only splices when the custom I/O offers splice_send, and
 * otherwise copies every reply through a freshly mapped buffer. */
static ssize_t pt_splice_send(int fdin, off_t *offin, int fdout, off_t *offout,
			      size_t len, unsigned int flags, void *userdata)
{
	return splice(fdin, offin, fdout, offout, len, flags);
}

int fs_pt_install(struct fuse_session *se, fs_pt *pt)
{
	static const struct fuse_custom_io io = {
		.read = pt_read,
		.writev = pt_writev,
		.splice_send = pt_splice_send,
	};
	pt->dev_fd = fuse_session_fd(se);
	hooked = pt;
	return fuse_session_custom_io(se, &io, pt->dev_fd);
}

int fs_pt_backing_open(fs_pt *pt, int fd)
{
	if (!pt->enabled)
		return -ENOTSUP;
	struct pt_backing_map m = {.fd = fd, .flags = 0, .padding = 0};
	int id = ioctl(pt->dev_fd, PT_IOC_BACKING_OPEN, &m);
	return id > 0 ? id : -errno;
}

void fs_pt_backing_close(fs_pt *pt, int id)
{
	uint32_t v = (uint32_t)id;
	if (id > 0 && ioctl(pt->dev_fd, PT_IOC_BACKING_CLOSE, &v) < 0)
		log_debug("closing passthrough backing %d: %s", id,
			  strerror(errno));
}
