/*
 * daemon exporter: the metrics endpoint over libmicrohttpd (see
 * exporter.h).  The socket is bound here, not by libmicrohttpd, so a busy
 * port is reported as such ("Address already in use") and port 0 can be
 * read back.
 */
#include "daemon/exporter.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/log.h"

#if MHD_VERSION < 0x00097002
typedef int mhd_result;
#else
typedef enum MHD_Result mhd_result;
#endif

struct exporter {
	ctl_target t;
	struct MHD_Daemon *d;
	int fd;
	char url[128];
};

__attribute__((format(printf, 1, 2))) static char *errf(const char *fmt, ...)
{
	buf m = BUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	buf_vprintf(&m, fmt, ap);
	va_end(ap);
	return buf_steal(&m);
}

int exporter_parse_addr(const char *addr, struct sockaddr_storage *ss,
			socklen_t *len, char **err)
{
	const char *colon = strrchr(addr, ':');
	if (!colon || colon == addr || !colon[1]) {
		*err = errf("'%s': expected HOST:PORT, e.g. 127.0.0.1:9464",
			    addr);
		return -1;
	}
	char host[256];
	size_t hl = (size_t)(colon - addr);
	if (addr[0] == '[' && hl >= 2 && addr[hl - 1] == ']') {
		addr++;
		hl -= 2;
	}
	if (hl == 0 || hl >= sizeof host) {
		*err = errf("'%s': expected HOST:PORT, e.g. 127.0.0.1:9464",
			    addr);
		return -1;
	}
	memcpy(host, addr, hl);
	host[hl] = '\0';
	char *end;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (*end || port > 65535 || colon[1] < '0' || colon[1] > '9') {
		*err = errf("'%s': the port must be a number from 0 to 65535",
			    colon + 1);
		return -1;
	}
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	int rc = getaddrinfo(host, colon + 1, &hints, &res);
	if (rc != 0 || !res) {
		*err = errf("cannot resolve the host '%s': %s", host,
			    gai_strerror(rc));
		return -1;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

static mhd_result reply(struct MHD_Connection *c, unsigned status,
			const char *type, char *body)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
	    strlen(body), body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	mhd_result rc = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return rc;
}

static mhd_result handle(void *cls, struct MHD_Connection *c, const char *url,
			 const char *method, const char *version,
			 const char *upload, size_t *upload_size, void **state)
{
	exporter *x = cls;
	(void)version;
	(void)upload;
	if (!*state) { /* the headers: answer once the request is complete */
		*state = x;
		return MHD_YES;
	}
	if (*upload_size) { /* a body: ignored */
		*upload_size = 0;
		return MHD_YES;
	}
	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain",
			     strdup("only GET /metrics\n"));
	if (strcmp(url, "/metrics"))
		return reply(c, MHD_HTTP_NOT_FOUND, "text/plain",
			     strdup("ckptfs: the metrics are at /metrics\n"));
	char *text = ctl_metrics_text(&x->t);
	if (!text)
		return MHD_NO;
	return reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8",
		     text);
}

exporter *exporter_start(const char *addr, const ctl_target *t, char **err)
{
	struct sockaddr_storage ss;
	socklen_t len;
	if (exporter_parse_addr(addr, &ss, &len, err) < 0)
		return NULL;
	exporter *x = calloc(1, sizeof *x);
	if (!x) {
		*err = NULL;
		return NULL;
	}
	x->t = *t;
	x->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (x->fd < 0 ||
	    setsockopt(x->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
	    bind(x->fd, (struct sockaddr *)&ss, len) < 0 ||
	    listen(x->fd, 64) < 0) {
		*err = errf("metrics endpoint %s: %s", addr, strerror(errno));
		goto fail;
	}
	len = sizeof ss;
	getsockname(x->fd, (struct sockaddr *)&ss, &len);
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;
	if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof host);
		port = ntohs(s6->sin6_port);
		snprintf(x->url, sizeof x->url, "http://[%s]:%u/metrics", host,
			 port);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		inet_ntop(AF_INET, &s4->sin_addr, host, sizeof host);
		port = ntohs(s4->sin_port);
		snprintf(x->url, sizeof x->url, "http://%s:%u/metrics", host,
			 port);
	}
	x->d = MHD_start_daemon(
	    MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, 0, NULL, NULL,
	    handle, x, MHD_OPTION_LISTEN_SOCKET, x->fd,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)32,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10, MHD_OPTION_END);
	if (!x->d) {
		*err = errf("metrics endpoint %s: cannot start the HTTP server",
			    addr);
		goto fail;
	}
	log_info("metrics: serving %s", x->url);
	return x;
fail:
	if (x->fd >= 0)
		close(x->fd);
	free(x);
	return NULL;
}

const char *exporter_url(const exporter *x)
{
	return x ? x->url : NULL;
}

void exporter_stop(exporter *x)
{
	if (!x)
		return;
	MHD_stop_daemon(x->d); /* closes the listening socket */
	free(x);
}
