/*
 * ctl server: the mount's control socket.  Reads one request per
 * connection and hands it to the table of requests (requests.c).
 *
 * One accept thread; each connection is served by its own detached thread
 * (prefetch can run for minutes), at most CTL_MAX_CONNS at once, each from
 * this user or root only (ctl/sock.c).  A connection has
 * CTL_REQUEST_TIMEOUT_S to send its request, and a reply waits at most
 * CTL_SEND_TIMEOUT_S for a client that does not read.  ctl_server_stop
 * closes the listener, wakes the connections still waiting for their
 * request, flags the others to stop and waits until all have finished, so
 * nothing they use (the cache, the S3 client) is freed under them.
 */
#include "ctl/ctl.h"
#include "ctl/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/log.h"

/* connections served at once; more are closed as they come */
#define CTL_MAX_CONNS 64
/* seconds a reply may wait for a client that does not read */
#define CTL_SEND_TIMEOUT_S 10

struct ctl_server {
	ctl_target t;
	ctl_claim claim;
	int lfd;
	int stop_pipe[2]; /* readable once stopping: wakes every poll */
	bool started;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned conns; /* [mu] */
	bool stopping;  /* [mu] */
};

static bool stopping_cb(void *arg)
{
	ctl_server *s = arg;
	pthread_mutex_lock(&s->mu);
	bool st = s->stopping;
	pthread_mutex_unlock(&s->mu);
	return st;
}

/* ---- connections ------------------------------------------------------ */

struct conn {
	ctl_server *s;
	int fd;
};

/*
 * Reads the request line into line (at most cap - 1 bytes).  Its length;
 * 0 when the client went away, -ETIMEDOUT after CTL_REQUEST_TIMEOUT_S
 * without a whole line, -ESHUTDOWN when the server stops first: a client
 * that says nothing holds neither the unmount nor the daemon's exit.
 */
static ssize_t read_request(ctl_server *s, int fd, char *line, size_t cap)
{
	double deadline = clock_mono() + CTL_REQUEST_TIMEOUT_S;
	size_t n = 0;
	while (n < cap - 1) {
		int left = (int)((deadline - clock_mono()) * 1000);
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p[2] = {{fd, POLLIN, 0},
				      {s->stop_pipe[0], POLLIN, 0}};
		int r = poll(p, 2, left);
		if (r < 0 && errno != EINTR)
			return 0;
		if (r <= 0)
			continue;
		if (p[1].revents)
			return -ESHUTDOWN;
		ssize_t got = recv(fd, line + n, cap - 1 - n, MSG_DONTWAIT);
		if (got < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (got <= 0)
			return 0;
		n += (size_t)got;
		if (memchr(line, '\n', n))
			break;
	}
	return (ssize_t)n;
}

static void handle(ctl_server *s, int fd)
{
	char line[8192];
	ssize_t got = read_request(s, fd, line, sizeof line);
	if (got == -ETIMEDOUT) {
		char msg[64];
		snprintf(msg, sizeof msg, "no request within %d s",
			 CTL_REQUEST_TIMEOUT_S);
		ctl_send_error(fd, msg);
		return;
	}
	if (got == -ESHUTDOWN)
		ctl_send_error(fd, "the filesystem is being unmounted");
	if (got <= 0)
		return;
	size_t n = (size_t)got;
	line[n] = '\0';
	json_error_t je;
	json_t *msg = json_loads(line, JSON_DISABLE_EOF_CHECK, &je);
	ctl_req r = {.t = &s->t, .fd = fd, .stopping = stopping_cb, .arg = s};
	ctl_request_run(&r, msg);
	json_decref(msg);
}

static void *conn_main(void *arg)
{
	struct conn *c = arg;
	ctl_server *s = c->s;
	handle(s, c->fd);
	close(c->fd);
	free(c);
	pthread_mutex_lock(&s->mu);
	s->conns--;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

static void *accept_main(void *arg)
{
	ctl_server *s = arg;
	for (;;) {
		struct pollfd p[2] = {{s->lfd, POLLIN, 0},
				      {s->stop_pipe[0], POLLIN, 0}};
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		unsigned uid;
		if (!ctl_peer_trusted(fd, &uid)) {
			/* the directory keeps others out; this is the
			 * second lock */
			log_warn("control socket: refused a client of uid %u",
				 uid);
			close(fd);
			continue;
		}
		pthread_mutex_lock(&s->mu);
		bool full = s->conns >= CTL_MAX_CONNS;
		if (!full)
			s->conns++;
		pthread_mutex_unlock(&s->mu);
		if (full) {
			ctl_send_error(fd, "too many control connections");
			close(fd);
			continue;
		}
		struct timeval tv = {CTL_SEND_TIMEOUT_S, 0};
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
		struct conn *c = malloc(sizeof *c);
		pthread_t t;
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		if (c)
			*c = (struct conn){s, fd};
		if (!c || pthread_create(&t, &at, conn_main, c) != 0) {
			close(fd);
			free(c);
			pthread_mutex_lock(&s->mu);
			s->conns--;
			pthread_mutex_unlock(&s->mu);
		}
		pthread_attr_destroy(&at);
	}
	return NULL;
}

ctl_server *ctl_server_claim(const char *mountpoint, char **err)
{
	ctl_server *s = calloc(1, sizeof *s);
	if (!s) {
		*err = strdup("out of memory");
		return NULL;
	}
	s->lfd = s->stop_pipe[0] = s->stop_pipe[1] = -1;
	if (ctl_sock_claim(mountpoint, &s->claim, err) < 0) {
		free(s);
		return NULL;
	}
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	return s;
}

int ctl_server_start(ctl_server *s, const ctl_target *t, char **err)
{
	s->t = *t;
	s->lfd = ctl_sock_listen(&s->claim, err);
	if (s->lfd < 0)
		return -1;
	if (pipe2(s->stop_pipe, O_CLOEXEC) < 0) {
		s->stop_pipe[0] = s->stop_pipe[1] = -1;
		*err = strdup("cannot start the control server: no pipe");
		return -1;
	}
	if (pthread_create(&s->thread, NULL, accept_main, s) != 0) {
		*err = strdup("cannot start the control server's thread");
		return -1;
	}
	s->started = true;
	return 0;
}

void ctl_server_stop(ctl_server *s)
{
	if (!s)
		return;
	if (s->started) {
		/* wakes the accept thread and every connection still
		 * waiting for its request */
		ssize_t w = write(s->stop_pipe[1], "x", 1);
		(void)w;
		pthread_join(s->thread, NULL);
	}
	pthread_mutex_lock(&s->mu);
	s->stopping = true;
	while (s->conns > 0)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
	if (s->stop_pipe[0] >= 0) {
		close(s->stop_pipe[0]);
		close(s->stop_pipe[1]);
	}
	ctl_sock_release(&s->claim); /* closes lfd */
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s);
}
