/*
 * ctl requests: the table of control requests (ctl.h lists their wire
 * format) and the checks a row asks for before its handler runs.  A new
 * request is one row here plus its handler in a req-*.c file.
 */
#include <stdbool.h>
#include <string.h>

#include "ctl/internal.h"

/* verify's own arguments; ctl/verify.c does the work */
static void req_verify(const ctl_req *r)
{
	ctl_do_verify(r->t, r->fd, r->path,
		      (unsigned)json_integer_value(
			  json_object_get(r->msg, "threads")),
		      json_is_true(json_object_get(r->msg, "all")),
		      r->stopping, r->arg);
}

const ctl_request_def ctl_requests[] = {
	{"status", ctl_req_status, 0, NULL},
	{"prefetch", ctl_req_prefetch, CTL_ARG_PATH | CTL_PATH_INSIDE, NULL},
	{"commit", ctl_req_commit, CTL_ARG_PATH | CTL_PATH_CLEAN | CTL_WRITABLE,
	 "the mount is read-only: nothing to commit"},
	{"sync", ctl_req_sync, 0, NULL},
	{"retry", ctl_req_retry, 0, NULL},
	{"drop", ctl_req_drop, 0, NULL},
	{"verify", req_verify, CTL_ARG_PATH | CTL_PATH_INSIDE, NULL},
};
const size_t ctl_requests_count = sizeof ctl_requests / sizeof ctl_requests[0];

const ctl_request_def *ctl_request_find(const char *cmd)
{
	for (size_t i = 0; cmd && i < ctl_requests_count; i++)
		if (!strcmp(ctl_requests[i].cmd, cmd))
			return &ctl_requests[i];
	return NULL;
}

static bool path_inside(const char *rel)
{
	return !strstr(rel, "..") && rel[0] != '/';
}

static bool path_clean(const char *rel)
{
	if (rel[0] == '/')
		return false;
	for (const char *p = rel; *p;) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		if (len == 0 || (len == 1 && p[0] == '.') ||
		    (len == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		if (!slash)
			break;
		p = slash + 1;
	}
	return true;
}

void ctl_request_run(ctl_req *r, json_t *msg)
{
	const char *cmd = msg ? json_string_value(json_object_get(msg, "cmd"))
			      : NULL;
	if (!cmd) {
		ctl_send_error(r->fd, "malformed request");
		return;
	}
	const ctl_request_def *d = ctl_request_find(cmd);
	json_t *path = json_object_get(msg, "path");
	if (!d || ((d->needs & CTL_ARG_PATH) && !json_is_string(path))) {
		ctl_send_error(r->fd, "unknown command");
		return;
	}
	r->msg = msg;
	r->path = json_string_value(path);
	json_t *id = json_object_get(msg, "id");
	r->id = json_is_integer(id) && json_integer_value(id) > 0
			? (uint64_t)json_integer_value(id)
			: 0;
	if (((d->needs & CTL_PATH_INSIDE) && !path_inside(r->path)) ||
	    ((d->needs & CTL_PATH_CLEAN) && !path_clean(r->path))) {
		ctl_send_error(r->fd, "path must be relative to the mount");
		return;
	}
	if ((d->needs & CTL_WRITABLE) && !ctl_target_eng(r->t)) {
		ctl_send_error(r->fd, d->ro_error);
		return;
	}
	d->run(r);
}
