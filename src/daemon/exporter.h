/*
 * daemon exporter: the Prometheus endpoint of a mount (-o
 * metrics=HOST:PORT, off by default).  GET /metrics answers the text
 * exposition of ctl_metrics_text (doc/metrics.md); anything else is a
 * 404, other methods a 405.  libmicrohttpd serves it from one thread of
 * its own with a 10 s idle timeout per connection, so a slow scraper
 * never holds up the mount.
 */
#ifndef CKPTFS_DAEMON_EXPORTER_H
#define CKPTFS_DAEMON_EXPORTER_H

#include <sys/socket.h>

#include "ctl/ctl.h"

typedef struct exporter exporter;

/*
 * Parses "HOST:PORT" ("127.0.0.1:9464", "[::1]:9464", "localhost:9464";
 * port 0: any free port) into *ss.  Returns 0, or -1 with *err (malloc'd)
 * saying what is wrong.
 */
int exporter_parse_addr(const char *addr, struct sockaddr_storage *ss,
			socklen_t *len, char **err);

/* Binds addr and serves t's numbers.  NULL with *err (malloc'd) when the
 * address is bad or cannot be bound.  t and what it points to must
 * outlive exporter_stop. */
exporter *exporter_start(const char *addr, const ctl_target *t, char **err);
/* "http://127.0.0.1:9464/metrics", with the port actually bound. */
const char *exporter_url(const exporter *x);
void exporter_stop(exporter *x);

#endif
