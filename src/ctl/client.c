/*
 * ctl client: one request, streamed JSON-line replies (see ctl.h).  The
 * reply is believed only from a socket in a directory that is this user's
 * alone, served by this user or root (ctl/sock.c).
 */
#include "ctl/ctl.h"
#include "ctl/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/buf.h"

static char *errf(const char *what, const char *arg)
{
	buf b = BUF_INIT;
	buf_printf(&b, "%s %s: %s", what, arg, strerror(errno));
	return buf_steal(&b);
}

static char *not_served(const char *mountpoint, const char *why)
{
	buf b = BUF_INIT;
	buf_printf(&b, "%s is not a ckptfs mount served by this user "
		       "(no control socket: %s)",
		   mountpoint, why);
	return buf_steal(&b);
}

static int connect_mount(const char *mountpoint, char **err)
{
	char *dir = ctl_sock_dir();
	char *why = NULL;
	int rc = dir ? ctl_sock_dir_check(dir, false, &why) : -ENOMEM;
	free(dir);
	if (rc == -ENOENT || rc == -ENOMEM) {
		*err = not_served(mountpoint, strerror(-rc));
		return -1;
	}
	if (rc < 0) {
		buf b = BUF_INIT;
		buf_printf(&b, "not asking the daemon of %s: %s", mountpoint,
			   why);
		*err = buf_steal(&b);
		free(why);
		return -1;
	}
	char *path = ctl_socket_path(mountpoint);
	if (!path) {
		*err = errf("cannot resolve", mountpoint);
		return -1;
	}
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	free(path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		*err = not_served(mountpoint, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	unsigned uid;
	if (!ctl_peer_trusted(fd, &uid)) {
		buf b = BUF_INIT;
		buf_printf(&b, "the control socket of %s is served by uid %u, "
			       "neither this user nor root: not trusting it "
			       "(someone else's process listens in the "
			       "daemon's place)",
			   mountpoint, uid);
		*err = buf_steal(&b);
		close(fd);
		return -1;
	}
	return fd;
}

json_t *ctl_request(const char *mountpoint, json_t *req,
		    void (*on_line)(json_t *line, void *arg), void *arg,
		    char **err)
{
	int fd = connect_mount(mountpoint, err);
	if (fd < 0)
		return NULL;
	char *s = json_dumps(req, JSON_COMPACT);
	buf out = BUF_INIT;
	buf_printf(&out, "%s\n", s ? s : "{}");
	free(s);
	if (send(fd, out.data, out.len, MSG_NOSIGNAL) != (ssize_t)out.len) {
		*err = errf("cannot send to", mountpoint);
		buf_free(&out);
		close(fd);
		return NULL;
	}
	buf_free(&out);
	buf in = BUF_INIT;
	json_t *last = NULL;
	char chunk[4096];
	for (;;) {
		char *nl;
		while ((nl = memchr(in.data ? in.data : "", '\n', in.len))) {
			*nl = '\0';
			json_t *j = json_loads(in.data, 0, NULL);
			size_t used = (size_t)(nl - in.data) + 1;
			memmove(in.data, nl + 1, in.len - used);
			in.len -= used;
			if (!j)
				continue;
			if (json_is_true(json_object_get(j, "done"))) {
				last = j;
				goto out;
			}
			if (on_line)
				on_line(j, arg);
			json_decref(j);
		}
		ssize_t r = recv(fd, chunk, sizeof chunk, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			buf b = BUF_INIT;
			buf_printf(&b, "the ckptfs daemon of %s closed the "
				       "connection",
				   mountpoint);
			*err = buf_steal(&b);
			break;
		}
		buf_append(&in, chunk, (size_t)r);
	}
out:
	buf_free(&in);
	close(fd);
	return last;
}
