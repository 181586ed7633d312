/*
 * ctl reply: one JSON object per line to a control client (ctl.h's
 * protocol).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "ctl/internal.h"

int ctl_send_json(int fd, json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	if (!s)
		return -1;
	size_t n = strlen(s);
	s[n] = '\n'; /* json_dumps leaves room: it is NUL-terminated */
	int rc = 0;
	for (size_t w = 0; w <= n && rc == 0;) {
		ssize_t r = send(fd, s + w, n + 1 - w, MSG_NOSIGNAL);
		if (r < 0 && errno != EINTR)
			rc = -1;
		else if (r > 0)
			w += (size_t)r;
	}
	free(s);
	return rc;
}

void ctl_send_error(int fd, const char *msg)
{
	ctl_send_json(fd, json_pack("{s:s, s:b}", "error", msg, "done", 1));
}

