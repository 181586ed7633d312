/*
 * Unit tests for the stall deadlines (http/loop.c) and the client's retries
 * on them (s3/client.c, s3/retry.c), against a tiny TCP server thread that
 * accepts connections and then misbehaves: never answers, answers a few
 * bytes and goes quiet, swallows a body and goes quiet, never reads, or is
 * silent on its first connection only.  A silent server must be abandoned
 * within the deadline (not the 30 s or 120 s per-attempt limits) and the
 * request retried on a fresh connection.
 */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/loop.h"
#include "s3/client.h"
#include "util/clock.h"

/* ---- the server ---------------------------------------------------------- */

enum mode {
	SILENT,         /* reads everything, never answers */
	TRICKLE,        /* answers a head and 10 of 1000 bytes, then nothing */
	SWALLOW,        /* reads the request and its body, never answers */
	DEAF,           /* never reads at all */
	SILENT_FIRST,   /* its first connection SILENT, later ones answer */
};

#define MAX_CONNS 32

struct conn {
	int fd;
	char head[8192];
	size_t hlen;
	long long body_left; /* -1: head not complete */
	bool answered;
};

struct srv {
	int lfd, port;
	enum mode mode;
	atomic_int conns;
	atomic_int answers;
	atomic_bool stop;
	pthread_t th;
	struct conn c[MAX_CONNS];
	int n;
};

static const char REPLY[] = "HTTP/1.1 200 OK\r\n"
			    "Content-Length: 5\r\n"
			    "ETag: \"0123\"\r\n"
			    "Last-Modified: Wed, 25 Nov 2026 10:00:00 GMT\r\n"
			    "\r\n";

static void answer(struct srv *s, struct conn *k)
{
	/* a HEAD reply (no body follows a HEAD); counted first, so a client
	 * that got it always sees the count */
	atomic_fetch_add(&s->answers, 1);
	if (write(k->fd, REPLY, sizeof REPLY - 1) < 0)
		return;
	k->hlen = 0;
	k->body_left = -1;
}

/* Bytes arrived on connection k (index i of the server). */
static void on_data(struct srv *s, struct conn *k, int i, const char *p,
		    size_t n)
{
	bool quiet = s->mode == SILENT || (s->mode == SILENT_FIRST && i == 0);
	if (quiet)
		return;
	if (k->body_left > 0) {
		k->body_left -= (long long)n;
		return;
	}
	if (k->hlen + n >= sizeof k->head)
		n = sizeof k->head - 1 - k->hlen;
	memcpy(k->head + k->hlen, p, n);
	k->hlen += n;
	k->head[k->hlen] = '\0';
	char *end = strstr(k->head, "\r\n\r\n");
	if (!end)
		return;
	size_t used = (size_t)(end + 4 - k->head);
	const char *cl = strcasestr(k->head, "\r\ncontent-length:");
	long long len = cl ? atoll(cl + 17) : 0;
	k->body_left = len - (long long)(k->hlen - used);
	if (s->mode == TRICKLE && !k->answered) {
		static const char h[] = "HTTP/1.1 200 OK\r\n"
					"Content-Length: 1000\r\n\r\n"
					"0123456789";
		k->answered = write(k->fd, h, sizeof h - 1) > 0;
	} else if (s->mode == SILENT_FIRST) {
		answer(s, k);
	}
}

static void *srv_main(void *arg)
{
	struct srv *s = arg;
	while (!atomic_load(&s->stop)) {
		struct pollfd p[MAX_CONNS + 1];
		p[0] = (struct pollfd){s->lfd, POLLIN, 0};
		for (int i = 0; i < s->n; i++)
			p[i + 1] = (struct pollfd){
			    s->c[i].fd, s->mode == DEAF ? 0 : POLLIN, 0};
		if (poll(p, (nfds_t)s->n + 1, 20) <= 0)
			continue;
		if ((p[0].revents & POLLIN) && s->n < MAX_CONNS) {
			int fd = accept(s->lfd, NULL, NULL);
			if (fd >= 0) {
				s->c[s->n++] = (struct conn){.fd = fd,
							     .body_left = -1};
				atomic_fetch_add(&s->conns, 1);
			}
		}
		for (int i = 0; i < s->n; i++) {
			if (!(p[i + 1].revents & (POLLIN | POLLHUP)))
				continue;
			char b[65536];
			ssize_t r = read(s->c[i].fd, b, sizeof b);
			if (r > 0)
				on_data(s, &s->c[i], i, b, (size_t)r);
		}
	}
	for (int i = 0; i < s->n; i++)
		close(s->c[i].fd);
	return NULL;
}

static struct srv *srv_start(enum mode m)
{
	struct srv *s = calloc(1, sizeof *s);
	cr_assert(s);
	s->mode = m;
	s->lfd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert(s->lfd >= 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	cr_assert(bind(s->lfd, (struct sockaddr *)&a, sizeof a) == 0);
	cr_assert(listen(s->lfd, 16) == 0);
	socklen_t al = sizeof a;
	getsockname(s->lfd, (struct sockaddr *)&a, &al);
	s->port = ntohs(a.sin_port);
	cr_assert(pthread_create(&s->th, NULL, srv_main, s) == 0);
	return s;
}

static void srv_stop(struct srv *s)
{
	atomic_store(&s->stop, true);
	pthread_join(s->th, NULL);
	close(s->lfd);
	free(s);
}

/* ---- http loop level ----------------------------------------------------- */

static http_loop *L;

static void loop_up(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	http_loop_opts o = {0};
	L = http_loop_new(&o);
	cr_assert(L);
}

static void loop_down(void)
{
	http_loop_free(L);
	curl_global_cleanup();
}

TestSuite(stall, .init = loop_up, .fini = loop_down, .timeout = 60);

static char *url_of(const struct srv *s, const char *path)
{
	char *u = NULL;
	cr_assert(asprintf(&u, "http://127.0.0.1:%d%s", s->port, path) > 0);
	return u;
}

/* Runs x; returns the seconds it took. */
static double run(http_xfer *x)
{
	double t0 = clock_mono();
	http_perform(L, x);
	return clock_mono() - t0;
}

Test(stall, silent_server_no_reply_within_the_first_byte_deadline)
{
	struct srv *s = srv_start(SILENT);
	http_xfer x = {.method = "GET", .url = url_of(s, "/k"),
		       .timeout_ms = 30000, .first_byte_ms = 300,
		       .low_speed_ms = 300};
	double t = run(&x);
	cr_expect_eq(x.curl_code, CURLE_OPERATION_TIMEDOUT, "%d %s",
		     x.curl_code, x.errbuf);
	cr_expect(x.stalled);
	cr_expect_str_eq(x.errbuf, "no reply for 0.3 s");
	cr_expect(t >= 0.28 && t < 1.5, "took %.2f s", t);
	cr_expect_eq(x.status, 0);
	http_xfer_free(&x);
	srv_stop(s);
}

Test(stall, reply_that_stops_midway_hits_the_low_speed_rule)
{
	struct srv *s = srv_start(TRICKLE);
	http_xfer x = {.method = "GET", .url = url_of(s, "/k"),
		       .timeout_ms = 30000, .first_byte_ms = 300,
		       .low_speed_ms = 400};
	double t = run(&x);
	cr_expect_eq(x.curl_code, CURLE_OPERATION_TIMEDOUT, "%d %s",
		     x.curl_code, x.errbuf);
	cr_expect(x.stalled);
	cr_expect_str_eq(x.errbuf, "no data moved for 0.4 s");
	cr_expect(t >= 0.38 && t < 1.5, "took %.2f s", t);
	cr_expect_eq(x.resp_body.len, 10);
	http_xfer_free(&x);
	srv_stop(s);
}

Test(stall, low_speed_limit_in_bytes_per_second)
{
	struct srv *s = srv_start(TRICKLE);
	/* 10 bytes in 0.5 s is below 100 bytes/s */
	http_xfer x = {.method = "GET", .url = url_of(s, "/k"),
		       .timeout_ms = 30000, .first_byte_ms = 300,
		       .low_speed_ms = 500, .low_speed_bytes = 100};
	double t = run(&x);
	cr_expect(x.stalled);
	cr_expect_str_eq(x.errbuf, "less than 100 bytes/s for 0.5 s");
	cr_expect(t < 1.5, "took %.2f s", t);
	http_xfer_free(&x);
	srv_stop(s);
}

Test(stall, uploaded_body_then_no_reply)
{
	struct srv *s = srv_start(SWALLOW);
	size_t n = 1 << 20;
	char *body = calloc(1, n);
	http_xfer x = {.method = "PUT", .url = url_of(s, "/k"),
		       .timeout_ms = 30000, .first_byte_ms = 300,
		       .low_speed_ms = 300,
		       .upload = http_upload_mem(body, n),
		       /* as the S3 client: no 100-continue round trip */
		       .headers = curl_slist_append(NULL, "Expect:")};
	double t = run(&x);
	cr_expect(x.stalled);
	cr_expect_str_eq(x.errbuf, "no reply for 0.3 s");
	cr_expect(t >= 0.28 && t < 2, "took %.2f s", t);
	http_xfer_free(&x);
	free(body);
	srv_stop(s);
}

Test(stall, server_that_stops_reading_an_upload)
{
	struct srv *s = srv_start(DEAF);
	size_t n = 64u << 20; /* more than the socket buffers take */
	char *body = calloc(1, n);
	http_xfer x = {.method = "PUT", .url = url_of(s, "/k"),
		       .timeout_ms = 30000, .first_byte_ms = 300,
		       .low_speed_ms = 300,
		       .upload = http_upload_mem(body, n),
		       /* as the S3 client: no 100-continue round trip */
		       .headers = curl_slist_append(NULL, "Expect:")};
	double t = run(&x);
	cr_expect(x.stalled);
	cr_expect_str_eq(x.errbuf, "no data moved for 0.3 s");
	cr_expect(t < 3, "took %.2f s", t);
	http_xfer_free(&x);
	free(body);
	srv_stop(s);
}

Test(stall, no_deadlines_no_stall)
{
	struct srv *s = srv_start(SILENT);
	http_xfer x = {.method = "GET", .url = url_of(s, "/k"),
		       .timeout_ms = 700};
	double t = run(&x);
	cr_expect_eq(x.curl_code, CURLE_OPERATION_TIMEDOUT);
	cr_expect_not(x.stalled, "%s", x.errbuf);
	cr_expect(t >= 0.6, "took %.2f s", t);
	http_xfer_free(&x);
	srv_stop(s);
}

/* A reply within the deadline is not cut off, and its first-byte time is
 * reported for the adaptive deadline. */
Test(stall, answered_request_reports_its_first_byte_time)
{
	struct srv *s = srv_start(SILENT_FIRST);
	http_xfer x = {.method = "HEAD", .url = url_of(s, "/a"),
		       .timeout_ms = 5000, .first_byte_ms = 2000,
		       .low_speed_ms = 2000};
	run(&x); /* the first connection is the silent one */
	cr_expect(x.stalled);
	http_xfer_reset_result(&x);
	x.fresh_connect = true;
	run(&x);
	cr_expect_eq(x.curl_code, CURLE_OK, "%s", x.errbuf);
	cr_expect_eq(x.status, 200);
	cr_expect_not(x.stalled);
	cr_expect(x.ttfb_us >= 0 && x.ttfb_us < 1000000, "%ld", x.ttfb_us);
	cr_expect_eq(atomic_load(&s->conns), 2);
	http_xfer_free(&x);
	srv_stop(s);
}

/* ---- the S3 client: retries on a fresh connection, bounded ---------------- */

static int fixed_creds(const creds_provider *self, const creds_ctx *cx,
		       s3_creds *out, buf *tried, char **err)
{
	(void)self, (void)cx, (void)tried, (void)err;
	out->access_key = strdup("AKIDEXAMPLE");
	out->secret_key = strdup("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY");
	out->session_token = NULL;
	out->expires = 0;
	return 1;
}

struct s3env {
	s3_settings set;
	creds_chain *creds;
	s3_client *c;
};

static void s3_up(struct s3env *v, const struct srv *s, retry_policy pol)
{
	char ep[64];
	snprintf(ep, sizeof ep, "http://127.0.0.1:%d", s->port);
	v->set = (s3_settings){.bucket = strdup("bkt"), .prefix = strdup(""),
			       .endpoint = strdup(ep),
			       .region = strdup("us-east-1"),
			       .addressing = S3_ADDR_PATH};
	creds_provider p = {.name = "test", .fetch = fixed_creds};
	v->creds = creds_chain_new_with(NULL, NULL, &p, 1);
	s3_client_opts o = {.retry = pol};
	v->c = s3_client_new(&v->set, v->creds, L, &o);
	cr_assert(v->c);
}

static void s3_down(struct s3env *v)
{
	s3_client_free(v->c);
	creds_chain_free(v->creds);
	free(v->set.bucket);
	free(v->set.prefix);
	free(v->set.endpoint);
	free(v->set.region);
}

Test(stall, client_gives_up_on_a_silent_server_within_its_budget)
{
	struct srv *s = srv_start(SILENT);
	retry_policy pol = RETRY_POLICY_DEFAULT;
	pol.first_byte_ms = 300;
	pol.low_speed_ms = 300;
	pol.budget_ms = 2500;
	struct s3env v;
	s3_up(&v, s, pol);
	s3_head_result h;
	s3_err e;
	double t0 = clock_mono();
	int rc = s3_head(v.c, "k", &h, &e);
	double t = clock_mono() - t0;
	cr_expect_eq(rc, -1);
	cr_expect_eq(e.err, EIO);
	cr_expect_eq(e.curl_code, CURLE_OPERATION_TIMEDOUT);
	cr_expect(strstr(e.msg, "HEAD s3://bkt/k: no reply for"), "%s", e.msg);
	cr_expect(t >= 2.0 && t < 3.0, "took %.2f s", t);
	/* 0.3 + 0.6 + 1.2 s (clipped to what is left): every attempt on a
	 * connection of its own */
	int n = atomic_load(&s->conns);
	cr_expect(n >= 3 && n <= 4, "%d connections", n);
	s3_down(&v);
	srv_stop(s);
}

Test(stall, client_retries_a_silent_connection_on_a_fresh_one)
{
	struct srv *s = srv_start(SILENT_FIRST);
	retry_policy pol = RETRY_POLICY_DEFAULT;
	pol.first_byte_ms = 400;
	struct s3env v;
	s3_up(&v, s, pol);
	s3_head_result h;
	s3_err e;
	double t0 = clock_mono();
	int rc = s3_head(v.c, "k", &h, &e);
	double t = clock_mono() - t0;
	cr_expect_eq(rc, 0, "%s", e.msg);
	cr_expect_eq(h.size, 5);
	cr_expect(t >= 0.38 && t < 1.5, "took %.2f s", t);
	cr_expect_eq(atomic_load(&s->conns), 2);
	cr_expect_eq(atomic_load(&s->answers), 1);
	s3_down(&v);
	srv_stop(s);
}

/* With the mount's defaults, one attempt on a silent server ends after the
 * 2 s first-byte deadline, not the 30 s metadata limit. */
Test(stall, default_deadline_is_two_seconds)
{
	struct srv *s = srv_start(SILENT);
	retry_policy pol = RETRY_POLICY_DEFAULT;
	pol.max_attempts = 1;
	struct s3env v;
	s3_up(&v, s, pol);
	s3_head_result h;
	s3_err e;
	double t0 = clock_mono();
	int rc = s3_head(v.c, "k", &h, &e);
	double t = clock_mono() - t0;
	cr_expect_eq(rc, -1);
	cr_expect(strstr(e.msg, "no reply for 2 s"), "%s", e.msg);
	cr_expect(t >= 1.9 && t < 3.0, "took %.2f s", t);
	s3_down(&v);
	srv_stop(s);
}
