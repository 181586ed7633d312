/*
 * ctl verify: `ckptfs verify PATH` on a mount: the daemon verifies the
 * path's keys in the bucket with its own S3 client (its endpoint and
 * credentials), reading from the bucket, never from the read cache
 * (verify/verify.h), and streams what it finds to the client.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/internal.h"
#include "util/buf.h"
#include "verify/verify.h"

struct vctx {
	int fd;
	bool all;
	bool gone; /* the client went away */
	bool (*stopping)(void *arg);
	void *arg;
	pthread_mutex_t mu; /* one line at a time */
};

static void send_line(struct vctx *v, json_t *j)
{
	pthread_mutex_lock(&v->mu);
	if (!v->gone && ctl_send_json(v->fd, j) < 0)
		v->gone = true;
	else if (v->gone)
		json_decref(j);
	pthread_mutex_unlock(&v->mu);
}

static void on_file(void *arg, const verify_file *f)
{
	struct vctx *v = arg;
	if (f->ok && !v->all)
		return;
	send_line(v, json_pack("{s:b, s:o}", "done", 0, "file",
			       verify_file_json(f)));
}

static void on_progress(void *arg, uint64_t db, uint64_t tb, size_t df,
			size_t tf)
{
	send_line(arg, json_pack("{s:b, s:I, s:I, s:I, s:I}", "done", 0,
				 "done_bytes", (json_int_t)db, "total_bytes",
				 (json_int_t)tb, "done_files", (json_int_t)df,
				 "total_files", (json_int_t)tf));
}

static bool cancelled(void *arg)
{
	struct vctx *v = arg;
	pthread_mutex_lock(&v->mu);
	bool gone = v->gone;
	pthread_mutex_unlock(&v->mu);
	return gone || (v->stopping && v->stopping(v->arg));
}

void ctl_do_verify(const ctl_target *t, int fd, const char *rel,
		   unsigned threads, bool all, bool (*stopping)(void *arg),
		   void *arg)
{
	if (strstr(rel, "..") || rel[0] == '/') {
		ctl_send_error(fd, "path must be relative to the mount");
		return;
	}
	buf key = BUF_INIT;
	buf_printf(&key, "%s%s", t->prefix, rel);
	struct vctx v = {.fd = fd, .all = all, .stopping = stopping,
			 .arg = arg};
	pthread_mutex_init(&v.mu, NULL);
	verify_cb cb = {on_file, on_progress, cancelled, &v};
	verify_summary sum;
	char *err = NULL;
	int rc = verify_run(t->s3, buf_cstr(&key), threads, &cb, &sum, &err);
	buf target = BUF_INIT;
	buf_printf(&target, "s3://%s/%s", t->bucket, buf_cstr(&key));
	if (rc < 0) {
		buf m = BUF_INIT;
		buf_printf(&m, "verify %s: %s", buf_cstr(&target),
			   err ? err : "failed");
		ctl_send_error(fd, buf_cstr(&m));
		buf_free(&m);
	} else {
		json_t *s = verify_summary_json(&sum);
		send_line(&v, json_pack("{s:b, s:s, s:o}", "done", 1, "target",
					buf_cstr(&target), "summary", s));
	}
	free(err);
	buf_free(&key);
	buf_free(&target);
	pthread_mutex_destroy(&v.mu);
}
