/*
 * latency-proxy: a user-space TCP proxy that makes each connection to an S3
 * endpoint behave like one S3 connection over a WAN.
 *
 *   latency-proxy --listen [HOST:]PORT --target HOST:PORT
 *                 [--ttfb-ms MS] [--rate-mbps MBPS] [--connect-ms MS]
 *                 [--stats FILE] [--quiet]
 *
 * Per connection:
 *   - time to first byte: the first byte of each HTTP response is forwarded
 *     no earlier than TTFB ms after the first byte of its request was
 *     forwarded to the server (so a local server's own latency is absorbed
 *     into the TTFB, as it is in a real S3 TTFB).  Request boundaries are
 *     detected without parsing HTTP: bytes from the client that arrive after
 *     the previous response started are a new request.
 *   - rate cap: a token bucket per direction, RATE MB/s (10^6 bytes/s; the
 *     option name follows the "90 MB/s"), burst 256 KiB.
 *   - optional extra delay before the upstream connection is made
 *     (--connect-ms, default 0), for the handshake cost of a new connection.
 *
 * Two threads per connection (one per direction); data moves with splice()
 * through a pipe (no copy to user space), falling back to read()/write()
 * with a 256 KiB buffer where splice is not supported.
 *
 * On SIGINT/SIGTERM it prints totals (connections, requests, bytes) to
 * stderr and to --stats FILE if given, then exits.  SIGUSR1 rewrites
 * --stats FILE (atomically, with an increasing seq=) without exiting.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (256 * 1024)
#define BURST (256 * 1024)

static struct {
	char *listen_host, *listen_port;
	char *target_host, *target_port;
	double ttfb_s;
	double rate_bps; /* bytes per second, 0 = unlimited */
	double connect_s;
	const char *stats_path;
	bool quiet;
} opt;

static struct sockaddr_storage target_addr;
static socklen_t target_len;

static atomic_ulong n_conns, n_active, n_reqs, n_fail;
static atomic_ullong bytes_up, bytes_down;

enum { ST_IDLE = 0, ST_REQ, ST_RESP };

typedef struct conn {
	int cfd, sfd;
	atomic_int state;	      /* ST_* */
	_Atomic double req_time;      /* when the current request started */
	atomic_int refs;
	unsigned long id;
} conn;

typedef struct dir {
	conn *c;
	int src, dst;
	bool up; /* client -> server */
} dir;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_until(double t)
{
	struct timespec ts;
	ts.tv_sec = (time_t)t;
	ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	       EINTR)
		;
}

static void die(const char *fmt, const char *arg)
{
	fprintf(stderr, "latency-proxy: ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	exit(2);
}

static void conn_unref(conn *c)
{
	if (atomic_fetch_sub(&c->refs, 1) == 1) {
		close(c->cfd);
		close(c->sfd);
		free(c);
		atomic_fetch_sub(&n_active, 1);
	}
}

/* Token bucket as a virtual clock: *t_free is when the link is next free.
 * Sending n bytes waits until the bucket (BURST bytes deep) has them. */
static void pace(double *t_free, size_t n)
{
	if (opt.rate_bps <= 0)
		return;
	double now = now_s();
	double floor_t = now - (double)BURST / opt.rate_bps;
	if (*t_free < floor_t)
		*t_free = floor_t;
	*t_free += (double)n / opt.rate_bps;
	if (*t_free > now)
		sleep_until(*t_free);
}

/* Called with n > 0 bytes just read from d->src, before forwarding them. */
static void on_bytes(dir *d)
{
	conn *c = d->c;
	if (d->up) {
		int st = atomic_load(&c->state);
		if (st != ST_REQ) {
			/* a new request: its clock starts now */
			atomic_store(&c->req_time, now_s());
			atomic_store(&c->state, ST_REQ);
			atomic_fetch_add(&n_reqs, 1);
		}
	} else {
		int expect = ST_REQ;
		if (atomic_compare_exchange_strong(&c->state, &expect,
						   ST_RESP) &&
		    opt.ttfb_s > 0)
			sleep_until(atomic_load(&c->req_time) + opt.ttfb_s);
	}
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Copy loop with read/write; returns 0 on clean EOF, -1 on error. */
static int copy_rw(dir *d, double *t_free)
{
	char *buf = malloc(CHUNK);
	if (!buf)
		return -1;
	int rc = -1;
	for (;;) {
		ssize_t r = read(d->src, buf, CHUNK);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			rc = r == 0 ? 0 : -1;
			break;
		}
		on_bytes(d);
		size_t off = 0;
		while (off < (size_t)r) {
			size_t n = (size_t)r - off;
			if (opt.rate_bps > 0 && n > BURST)
				n = BURST;
			pace(t_free, n);
			if (write_all(d->dst, buf + off, n) < 0)
				goto out;
			off += n;
		}
		atomic_fetch_add(d->up ? &bytes_up : &bytes_down,
				 (unsigned long long)r);
	}
out:
	free(buf);
	return rc;
}

/* Copy loop with splice through a pipe; returns 0 on EOF, -1 on error,
 * 1 if splice is not supported here (nothing consumed yet). */
static int copy_splice(dir *d, double *t_free)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return 1;
	fcntl(p[1], F_SETPIPE_SZ, CHUNK); /* best effort */
	int cap = fcntl(p[1], F_GETPIPE_SZ);
	size_t chunk = cap > 0 ? (size_t)cap : 65536;
	if (chunk > CHUNK)
		chunk = CHUNK;
	bool first = true;
	int rc = -1;
	for (;;) {
		ssize_t r = splice(d->src, NULL, p[1], NULL, chunk,
				   SPLICE_F_MOVE);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && first && (errno == EINVAL || errno == ENOSYS)) {
			rc = 1;
			break;
		}
		first = false;
		if (r <= 0) {
			rc = r == 0 ? 0 : -1;
			break;
		}
		on_bytes(d);
		size_t left = (size_t)r;
		while (left > 0) {
			size_t n = left;
			if (opt.rate_bps > 0 && n > BURST)
				n = BURST;
			pace(t_free, n);
			while (n > 0) {
				ssize_t w = splice(p[0], NULL, d->dst, NULL, n,
						   SPLICE_F_MOVE);
				if (w < 0 && errno == EINTR)
					continue;
				if (w <= 0)
					goto out;
				n -= (size_t)w;
				left -= (size_t)w;
			}
		}
		atomic_fetch_add(d->up ? &bytes_up : &bytes_down,
				 (unsigned long long)r);
	}
out:
	close(p[0]);
	close(p[1]);
	return rc;
}

static void *pump(void *arg)
{
	dir *d = arg;
	double t_free = 0;
	int rc = copy_splice(d, &t_free);
	if (rc == 1)
		rc = copy_rw(d, &t_free);
	if (rc == 0) {
		/* clean EOF: pass the half-close on */
		shutdown(d->dst, SHUT_WR);
	} else {
		/* error: tear down both sides so the other pump wakes up */
		shutdown(d->src, SHUT_RDWR);
		shutdown(d->dst, SHUT_RDWR);
	}
	conn *c = d->c;
	free(d);
	conn_unref(c);
	return NULL;
}

static void tune_sock(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static bool start_pump(conn *c, int src, int dst, bool up)
{
	dir *d = calloc(1, sizeof *d);
	if (!d)
		return false;
	d->c = c;
	d->src = src;
	d->dst = dst;
	d->up = up;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&a, 128 * 1024);
	pthread_t t;
	int e = pthread_create(&t, &a, pump, d);
	pthread_attr_destroy(&a);
	if (e) {
		free(d);
		return false;
	}
	return true;
}

/* Connects upstream and starts both pumps; runs in its own thread so a
 * --connect-ms delay does not hold up accept(). */
static void *setup(void *arg)
{
	int cfd = (int)(intptr_t)arg;
	if (opt.connect_s > 0)
		sleep_until(now_s() + opt.connect_s);
	int sfd = socket(target_addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sfd < 0 ||
	    connect(sfd, (struct sockaddr *)&target_addr, target_len) < 0) {
		if (!opt.quiet)
			fprintf(stderr, "latency-proxy: connect to %s:%s: %s\n",
				opt.target_host, opt.target_port,
				strerror(errno));
		atomic_fetch_add(&n_fail, 1);
		if (sfd >= 0)
			close(sfd);
		close(cfd);
		return NULL;
	}
	tune_sock(sfd);
	conn *c = calloc(1, sizeof *c);
	if (!c) {
		close(sfd);
		close(cfd);
		return NULL;
	}
	c->cfd = cfd;
	c->sfd = sfd;
	atomic_store(&c->refs, 2);
	atomic_store(&c->state, ST_IDLE);
	atomic_fetch_add(&n_conns, 1);
	atomic_fetch_add(&n_active, 1);
	bool ok_up = start_pump(c, cfd, sfd, true);
	bool ok_down = ok_up && start_pump(c, sfd, cfd, false);
	if (!ok_up || !ok_down) {
		shutdown(cfd, SHUT_RDWR);
		shutdown(sfd, SHUT_RDWR);
		if (!ok_up)
			conn_unref(c);
		conn_unref(c);
	}
	return NULL;
}

static void *accept_loop(void *arg)
{
	int lfd = (int)(intptr_t)arg;
	for (;;) {
		int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (cfd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				sleep_until(now_s() + 0.01);
				continue;
			}
			fprintf(stderr, "latency-proxy: accept: %s\n",
				strerror(errno));
			exit(1);
		}
		tune_sock(cfd);
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&a, 128 * 1024);
		pthread_t t;
		if (pthread_create(&t, &a, setup, (void *)(intptr_t)cfd))
			close(cfd);
		pthread_attr_destroy(&a);
	}
	return NULL;
}

static void split_hostport(const char *s, char **host, char **port,
			   const char *def_host)
{
	const char *colon = strrchr(s, ':');
	if (!colon) {
		*host = strdup(def_host);
		*port = strdup(s);
		return;
	}
	const char *h = s;
	size_t hl = (size_t)(colon - s);
	if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
		h++;
		hl -= 2;
	}
	*host = hl ? strndup(h, hl) : strdup(def_host);
	*port = strdup(colon + 1);
}

static unsigned long stats_seq;

static void write_stats(FILE *f)
{
	fprintf(f,
		"seq=%lu connections=%lu requests=%lu bytes_up=%llu "
		"bytes_down=%llu connect_failures=%lu active=%lu\n",
		stats_seq, atomic_load(&n_conns), atomic_load(&n_reqs),
		atomic_load(&bytes_up), atomic_load(&bytes_down),
		atomic_load(&n_fail), atomic_load(&n_active));
}

/* Totals to stderr and, atomically (write + rename), to --stats FILE. */
static void dump_stats(bool to_stderr)
{
	stats_seq++;
	if (to_stderr && !opt.quiet) {
		fprintf(stderr, "latency-proxy: ");
		write_stats(stderr);
	}
	if (opt.stats_path) {
		char tmp[4096];
		snprintf(tmp, sizeof tmp, "%s.tmp", opt.stats_path);
		FILE *f = fopen(tmp, "w");
		if (f) {
			write_stats(f);
			if (fclose(f) == 0)
				rename(tmp, opt.stats_path);
		}
	}
}

static void usage(void)
{
	fprintf(stderr,
		"usage: latency-proxy --listen [HOST:]PORT --target HOST:PORT\n"
		"                     [--ttfb-ms MS (30)] [--rate-mbps MB/s "
		"(90, 0 = no cap)]\n"
		"                     [--connect-ms MS (0)] [--stats FILE] "
		"[--quiet]\n");
	exit(2);
}

static double parse_num(const char *s, const char *what)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || v < 0)
		die("bad value for %s", what);
	return v;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{"listen", required_argument, 0, 'l'},
		{"target", required_argument, 0, 't'},
		{"ttfb-ms", required_argument, 0, 'd'},
		{"rate-mbps", required_argument, 0, 'r'},
		{"connect-ms", required_argument, 0, 'c'},
		{"stats", required_argument, 0, 's'},
		{"quiet", no_argument, 0, 'q'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	const char *listen_s = NULL, *target_s = NULL;
	opt.ttfb_s = 0.030;
	opt.rate_bps = 90e6;
	int ch;
	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (ch) {
		case 'l': listen_s = optarg; break;
		case 't': target_s = optarg; break;
		case 'd': opt.ttfb_s = parse_num(optarg, "--ttfb-ms") / 1e3; break;
		case 'r': opt.rate_bps = parse_num(optarg, "--rate-mbps") * 1e6; break;
		case 'c': opt.connect_s = parse_num(optarg, "--connect-ms") / 1e3; break;
		case 's': opt.stats_path = optarg; break;
		case 'q': opt.quiet = true; break;
		default: usage();
		}
	}
	if (!listen_s || !target_s || optind != argc)
		usage();
	split_hostport(listen_s, &opt.listen_host, &opt.listen_port,
		       "127.0.0.1");
	split_hostport(target_s, &opt.target_host, &opt.target_port,
		       "127.0.0.1");

	struct addrinfo hints = {0}, *ai;
	hints.ai_socktype = SOCK_STREAM;
	int e = getaddrinfo(opt.target_host, opt.target_port, &hints, &ai);
	if (e)
		die("cannot resolve target: %s", gai_strerror(e));
	memcpy(&target_addr, ai->ai_addr, ai->ai_addrlen);
	target_len = ai->ai_addrlen;
	freeaddrinfo(ai);

	hints.ai_flags = AI_PASSIVE;
	e = getaddrinfo(opt.listen_host, opt.listen_port, &hints, &ai);
	if (e)
		die("cannot resolve listen address: %s", gai_strerror(e));
	int lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (lfd < 0)
		die("socket: %s", strerror(errno));
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(lfd, ai->ai_addr, ai->ai_addrlen) < 0)
		die("bind: %s", strerror(errno));
	freeaddrinfo(ai);
	if (listen(lfd, 256) < 0)
		die("listen: %s", strerror(errno));

	/* Signals: handled synchronously by a dedicated thread. */
	sigset_t ss;
	sigemptyset(&ss);
	sigaddset(&ss, SIGINT);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGUSR1);
	sigaddset(&ss, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &ss, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (!opt.quiet)
		fprintf(stderr,
			"latency-proxy: %s:%s -> %s:%s ttfb %.1f ms, rate %.1f "
			"MB/s per connection and direction\n",
			opt.listen_host, opt.listen_port, opt.target_host,
			opt.target_port, opt.ttfb_s * 1e3, opt.rate_bps / 1e6);

	dump_stats(false); /* the stats file exists once we listen */
	pthread_t acc;
	if (pthread_create(&acc, NULL, accept_loop, (void *)(intptr_t)lfd))
		die("pthread_create: %s", strerror(errno));
	for (;;) {
		int sig;
		if (sigwait(&ss, &sig))
			continue;
		dump_stats(sig != SIGUSR1);
		if (sig != SIGUSR1)
			break;
	}
	return 0;
}
