/*
 * Tests for the table of control requests (ctl/requests.c): every row is
 * found by its name, and what a client sees for requests the table's
 * checks answer (malformed, unknown, a missing or escaping path, a
 * read-only mount) and for those a mount without its FUSE session yet
 * (no engine) answers: the wire protocol of ctl.h, line for line.
 */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ctl/internal.h"

/* The lines a request (JSON text, or NULL: one that did not parse) gets,
 * as one string. */
static char *ask(const char *text)
{
	int sv[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	ctl_target t = {.mountpoint = "/mnt", .bucket = "bk", .prefix = "p/"};
	json_t *msg = text ? json_loads(text, 0, NULL) : NULL;
	cr_assert(!text || msg, "bad test JSON %s", text);
	ctl_req r = {.t = &t, .fd = sv[0]};
	ctl_request_run(&r, msg);
	json_decref(msg);
	close(sv[0]);
	static char out[65536];
	size_t n = 0;
	ssize_t got;
	while ((got = read(sv[1], out + n, sizeof out - 1 - n)) > 0)
		n += (size_t)got;
	out[n] = '\0';
	close(sv[1]);
	return out;
}

Test(requests, table)
{
	static const char *const wire[] = {"status", "prefetch", "commit",
					   "sync", "retry", "drop", "verify"};
	cr_expect_eq(ctl_requests_count, sizeof wire / sizeof wire[0]);
	for (size_t i = 0; i < sizeof wire / sizeof wire[0]; i++) {
		const ctl_request_def *d = ctl_request_find(wire[i]);
		cr_assert(d, "%s is not in the table", wire[i]);
		cr_expect(d->run);
		cr_expect(!(d->needs & CTL_WRITABLE) || d->ro_error);
		cr_expect(!(d->needs & (CTL_PATH_INSIDE | CTL_PATH_CLEAN)) ||
			  (d->needs & CTL_ARG_PATH));
	}
	for (size_t i = 0; i < ctl_requests_count; i++)
		cr_expect_eq(ctl_request_find(ctl_requests[i].cmd),
			     &ctl_requests[i], "%s twice", ctl_requests[i].cmd);
	cr_expect_null(ctl_request_find("Status"));
	cr_expect_null(ctl_request_find(""));
}

#define ERR(m) "{\"error\":\"" m "\",\"done\":true}\n"

Test(requests, checks)
{
	cr_expect_str_eq(ask(NULL), ERR("malformed request"));
	cr_expect_str_eq(ask("{\"cmd\":5}"), ERR("malformed request"));
	cr_expect_str_eq(ask("{\"cmd\":\"nope\"}"), ERR("unknown command"));
	/* a request that needs a path and has none is not known */
	cr_expect_str_eq(ask("{\"cmd\":\"commit\"}"), ERR("unknown command"));
	cr_expect_str_eq(ask("{\"cmd\":\"prefetch\",\"path\":3}"),
			 ERR("unknown command"));
	cr_expect_str_eq(ask("{\"cmd\":\"verify\"}"), ERR("unknown command"));
	static const char *const out[] = {"../x", "/etc", "a/../b", NULL};
	for (int i = 0; out[i]; i++) {
		char q[128];
		snprintf(q, sizeof q, "{\"cmd\":\"prefetch\",\"path\":\"%s\"}",
			 out[i]);
		cr_expect_str_eq(ask(q), ERR("path must be relative to the mount"),
				 "%s", q);
		snprintf(q, sizeof q, "{\"cmd\":\"verify\",\"path\":\"%s\"}",
			 out[i]);
		cr_expect_str_eq(ask(q), ERR("path must be relative to the mount"),
				 "%s", q);
		snprintf(q, sizeof q, "{\"cmd\":\"commit\",\"path\":\"%s\"}",
			 out[i]);
		cr_expect_str_eq(ask(q), ERR("path must be relative to the mount"),
				 "%s", q);
	}
	/* commit's paths are stricter: clean components */
	cr_expect_str_eq(ask("{\"cmd\":\"commit\",\"path\":\"a/./b\"}"),
			 ERR("path must be relative to the mount"));
	cr_expect_str_eq(ask("{\"cmd\":\"commit\",\"path\":\"a//b\"}"),
			 ERR("path must be relative to the mount"));
	cr_expect_str_eq(ask("{\"cmd\":\"commit\",\"path\":\"a\"}"),
			 ERR("the mount is read-only: nothing to commit"));
	cr_expect_str_eq(ask("{\"cmd\":\"commit\",\"path\":\"\"}"),
			 ERR("the mount is read-only: nothing to commit"));
}

Test(requests, without_an_engine)
{
	cr_expect_str_eq(ask("{\"cmd\":\"sync\"}"),
			 "{\"bytes_done\":0,\"bytes_total\":0,\"writable\":false,"
			 "\"done\":true}\n");
	cr_expect_str_eq(ask("{\"cmd\":\"retry\"}"), ERR("no step has failed"));
	cr_expect_str_eq(ask("{\"cmd\":\"retry\",\"id\":3}"),
			 ERR("no failed step with that id"));
	cr_expect_str_eq(ask("{\"cmd\":\"retry\",\"id\":-3}"),
			 ERR("no step has failed"));
	cr_expect_str_eq(ask("{\"cmd\":\"drop\"}"),
			 ERR("which step? (the id `ckptfs status` shows)"));
	cr_expect_str_eq(ask("{\"cmd\":\"drop\",\"id\":2}"),
			 ERR("no pending step with that id"));
}

Test(requests, status)
{
	json_t *j = json_loads(ask("{\"cmd\":\"status\"}"), 0, NULL);
	cr_assert(j);
	cr_expect_str_eq(json_string_value(json_object_get(j, "mountpoint")),
			 "/mnt");
	cr_expect(json_is_false(json_object_get(j, "writable")));
	cr_expect(json_is_null(json_object_get(j, "pending")));
	cr_expect(json_is_true(json_object_get(j, "done")));
	json_t *c = json_object_get(j, "cache");
	cr_expect(json_is_integer(json_object_get(c, "hits")));
	cr_expect(json_is_integer(json_object_get(c, "min_free")));
	json_t *d = json_object_get(j, "downloads");
	cr_expect(json_is_real(json_object_get(d, "rate_bytes_per_s")));
	json_t *m = json_object_get(j, "metrics");
	cr_expect(json_is_object(json_object_get(m, "s3")));
	cr_expect_eq(json_object_size(json_object_get(m, "s3")), 0);
	cr_expect(json_is_null(json_object_get(m, "credentials")));
	cr_expect(json_is_integer(json_object_get(json_object_get(m, "commit"),
						  "pending_transactions")));
	/* the keys in the order clients have always seen */
	static const char *const keys[] = {"mountpoint", "bucket", "prefix",
					   "pid", "writable", "cache",
					   "downloads", "pending", "done",
					   "metrics"};
	size_t i = 0;
	const char *k;
	json_t *v;
	json_object_foreach(j, k, v)
	{
		cr_assert_lt(i, sizeof keys / sizeof keys[0], "extra key %s", k);
		cr_expect_str_eq(k, keys[i++]);
	}
	json_decref(j);
}
