/* The fake FUSE requests (fake-fuse.h). */
#include "fake-fuse.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

unsigned fake_invals;

void fake_req_init(struct fuse_req *r, fs_ctx *fs)
{
	memset(r, 0, sizeof *r);
	r->fs = fs;
	r->ctx.pid = getpid();
	r->err = -1;
}

void *fuse_req_userdata(fuse_req_t req)
{
	return req->fs;
}

const struct fuse_ctx *fuse_req_ctx(fuse_req_t req)
{
	return &req->ctx;
}

int fuse_req_getgroups(fuse_req_t req, int size, gid_t list[])
{
	(void)req, (void)size, (void)list;
	return -ENOSYS;
}

int fuse_reply_err(fuse_req_t req, int err)
{
	req->replies++;
	req->err = err;
	return 0;
}

void fuse_reply_none(fuse_req_t req)
{
	req->replies++;
}

int fuse_reply_entry(fuse_req_t req, const struct fuse_entry_param *e)
{
	req->replies++;
	req->err = 0;
	req->ep = *e;
	return 0;
}

int fuse_reply_create(fuse_req_t req, const struct fuse_entry_param *e,
		      const struct fuse_file_info *fi)
{
	req->replies++;
	req->err = 0;
	req->ep = *e;
	req->fi = *fi;
	return 0;
}

int fuse_reply_open(fuse_req_t req, const struct fuse_file_info *fi)
{
	req->replies++;
	req->err = 0;
	req->fi = *fi;
	return 0;
}

int fuse_reply_buf(fuse_req_t req, const char *data, size_t size)
{
	req->replies++;
	req->err = 0;
	req->buf_len = size;
	if (data)
		memcpy(req->buf, data,
		       size < sizeof req->buf ? size : sizeof req->buf);
	return 0;
}

int fuse_lowlevel_notify_inval_inode(struct fuse_session *se,
				     fuse_ino_t ino, off_t off, off_t len)
{
	(void)se, (void)ino, (void)off, (void)len;
	fake_invals++;
	return 0;
}

int fuse_reply_write(fuse_req_t req, size_t count)
{
	req->replies++;
	req->err = 0;
	req->written = count;
	return 0;
}

int fuse_reply_attr(fuse_req_t req, const struct stat *attr,
		    double attr_timeout)
{
	(void)attr_timeout;
	req->replies++;
	req->err = 0;
	req->attr = *attr;
	return 0;
}
