/*
 * daemon notify: readiness and status for a service manager (see notify.h
 * for what is sent when).
 */
#include "config.h"

#include "daemon/notify.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#ifdef HAVE_LIBSYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "util/clock.h"
#include "util/log.h"

#define FUSE_SUPER_MAGIC 0x65735546

struct notifier {
	char *mountpoint;
	eng *e;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;     /* [mu] notify_free */
	bool stopping; /* [mu] notify_stopping */
	bool ready;    /* READY=1 sent (thread only) */
	char last[256];
};

static int send_notify(const char *msg)
{
#ifdef HAVE_LIBSYSTEMD
	int rc = sd_notify(0, msg);
	if (rc < 0)
		log_debug("sd_notify: %s", strerror(-rc));
	return rc;
#else
	(void)msg;
	return 0;
#endif
}

static void fmt_bytes(uint64_t v, char *out, size_t sz)
{
	static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double d = (double)v;
	int i = 0;
	while (d >= 1024 && i < 4) {
		d /= 1024;
		i++;
	}
	if (i == 0)
		snprintf(out, sz, "%llu B", (unsigned long long)v);
	else
		snprintf(out, sz, "%.1f %s", d, u[i]);
}

void notify_status_text(const eng_txn_status *v, size_t n, bool writable,
			bool stopping, char *out, size_t outsz)
{
	const char *pre = stopping ? "unmounting: " : "serving; ";
	if (!writable) {
		snprintf(out, outsz, "%sread-only", pre);
		return;
	}
	uint64_t left = 0;
	size_t failed = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i].bytes_total > v[i].bytes_done)
			left += v[i].bytes_total - v[i].bytes_done;
		if (v[i].state && !strcmp(v[i].state, "failed"))
			failed++;
	}
	char b[32];
	fmt_bytes(left, b, sizeof b);
	int w = snprintf(out, outsz, "%s%zu pending transaction%s, %s to upload",
			 pre, n, n == 1 ? "" : "s", b);
	if (failed && w > 0 && (size_t)w < outsz)
		snprintf(out + w, outsz - (size_t)w, ", %zu failed", failed);
}

/* The mount answers: stat reached this process's FUSE session. */
static bool mount_answers(const char *mp)
{
	struct stat st;
	struct statfs fs;
	if (stat(mp, &st) < 0) {
		log_debug("readiness: stat %s: %s", mp, strerror(errno));
		return false;
	}
	return statfs(mp, &fs) == 0 && fs.f_type == FUSE_SUPER_MAGIC;
}

/* The STATUS= text of the engine's pending transactions now. */
static void status_now(eng *e, bool stopping, char *text, size_t sz)
{
	eng_txn_status *v = NULL;
	size_t cnt = 0;
	if (e && eng_status(e, &v, &cnt) < 0) {
		v = NULL;
		cnt = 0;
	}
	notify_status_text(v, cnt, e != NULL, stopping, text, sz);
	if (v)
		eng_status_free(v, cnt);
}

static void send_status(notifier *n, bool stopping)
{
	char text[256];
	status_now(n->e, stopping, text, sizeof text);
	if (!strcmp(text, n->last))
		return;
	snprintf(n->last, sizeof n->last, "%s", text);
	char msg[300];
	snprintf(msg, sizeof msg, "STATUS=%s", text);
	send_notify(msg);
}

/* Waits up to s seconds or until stop; returns the stop flag. */
static bool pause_s(notifier *n, double s, bool *stopping)
{
	pthread_mutex_lock(&n->mu);
	struct timespec ts;
	clock_realtime_in(&ts, (long)(s * 1000));
	bool was = n->stopping;
	while (!n->stop && n->stopping == was &&
	       pthread_cond_timedwait(&n->cv, &n->mu, &ts) != ETIMEDOUT)
		;
	bool stop = n->stop;
	*stopping = n->stopping;
	pthread_mutex_unlock(&n->mu);
	return stop;
}

static void *notify_main(void *arg)
{
	notifier *n = arg;
	bool stopping = false;
	/* blocks in the kernel until the session's loop serves INIT and the
	 * root's GETATTR; retried while the first listing fails */
	while (!mount_answers(n->mountpoint))
		if (pause_s(n, 0.2, &stopping) || stopping)
			return NULL;
	char msg[320];
	status_now(n->e, false, n->last, sizeof n->last);
	snprintf(msg, sizeof msg, "READY=1\nSTATUS=%s", n->last);
	send_notify(msg);
	log_info("readiness: the mount answers (READY=1 sent)");
	for (;;) {
		if (pause_s(n, NOTIFY_STATUS_INTERVAL, &stopping))
			break;
		send_status(n, stopping);
	}
	return NULL;
}

notifier *notify_start(const char *mountpoint, eng *e)
{
	const char *sock = getenv("NOTIFY_SOCKET");
	if (!sock || !sock[0])
		return NULL;
#ifndef HAVE_LIBSYSTEMD
	log_warn("NOTIFY_SOCKET is set, but this ckptfs was built without "
		 "libsystemd: no readiness notification is sent");
	return NULL;
#endif
	notifier *n = calloc(1, sizeof *n);
	if (!n)
		return NULL;
	/* absolute without realpath, which would stat the mount point: its
	 * FUSE session is not served yet (and the daemon may chdir away) */
	char cwd[4096];
	if (mountpoint[0] == '/' || !getcwd(cwd, sizeof cwd))
		n->mountpoint = strdup(mountpoint);
	else if (asprintf(&n->mountpoint, "%s/%s", cwd, mountpoint) < 0)
		n->mountpoint = NULL;
	if (!n->mountpoint) {
		free(n);
		return NULL;
	}
	n->e = e;
	pthread_mutex_init(&n->mu, NULL);
	pthread_cond_init(&n->cv, NULL);
	if (pthread_create(&n->thread, NULL, notify_main, n) != 0) {
		log_warn("readiness: cannot start its thread; no READY=1 is sent");
		pthread_mutex_destroy(&n->mu);
		pthread_cond_destroy(&n->cv);
		free(n->mountpoint);
		free(n);
		return NULL;
	}
	return n;
}

void notify_stopping(notifier *n)
{
	if (!n)
		return;
	char text[256];
	status_now(n->e, true, text, sizeof text);
	char msg[320];
	snprintf(msg, sizeof msg, "STOPPING=1\nSTATUS=%s", text);
	send_notify(msg);
	pthread_mutex_lock(&n->mu);
	n->stopping = true;
	pthread_cond_broadcast(&n->cv);
	pthread_mutex_unlock(&n->mu);
}

void notify_free(notifier *n)
{
	if (!n)
		return;
	pthread_mutex_lock(&n->mu);
	n->stop = true;
	pthread_cond_broadcast(&n->cv);
	pthread_mutex_unlock(&n->mu);
	pthread_join(n->thread, NULL);
	pthread_mutex_destroy(&n->mu);
	pthread_cond_destroy(&n->cv);
	free(n->mountpoint);
	free(n);
}
