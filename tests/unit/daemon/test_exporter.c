/*
 * Tests for the metrics endpoint's address (daemon/exporter.c): what
 * -o metrics= accepts, and the message for what it does not.
 */
#include <criterion/criterion.h>

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/exporter.h"

static int parse(const char *a, char **err)
{
	struct sockaddr_storage ss;
	socklen_t len;
	*err = NULL;
	int rc = exporter_parse_addr(a, &ss, &len, err);
	if (rc == 0 && !strcmp(a, "127.0.0.1:9464")) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		cr_expect_eq(ss.ss_family, AF_INET);
		cr_expect_eq(ntohs(s4->sin_port), 9464);
	}
	return rc;
}

Test(exporter, accepted)
{
	char *err;
	cr_expect_eq(parse("127.0.0.1:9464", &err), 0);
	cr_expect_eq(parse("[::1]:9464", &err), 0);
	cr_expect_eq(parse("0.0.0.0:0", &err), 0);
	cr_expect_eq(parse("localhost:9464", &err), 0);
}

Test(exporter, refused_with_reason)
{
	static const struct {
		const char *in, *msg;
	} bad[] = {
	    {"9464", "expected HOST:PORT"},
	    {":9464", "expected HOST:PORT"},
	    {"127.0.0.1:", "expected HOST:PORT"},
	    {"127.0.0.1:x", "the port must be a number"},
	    {"127.0.0.1:65536", "the port must be a number"},
	    {"127.0.0.1:-1", "the port must be a number"},
	    {"[]:80", "expected HOST:PORT"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char *err;
		cr_expect_eq(parse(bad[i].in, &err), -1, "%s", bad[i].in);
		cr_expect(err && strstr(err, bad[i].msg), "%s: %s", bad[i].in,
			  err ? err : "(null)");
		free(err);
	}
}
