/*
 * ctl internal: the files of the control server, top to bottom:
 *   server.c   the socket, the connections, the requests' dispatch and the
 *              status, prefetch, commit, sync, retry and drop requests;
 *   verify.c   the verify request (verify/verify.h over the mount's
 *              S3 client);
 *   metrics.c  the mount's numbers (ctl.h);
 *   reply.c    one JSON line to the client.
 */
#ifndef CKPTFS_CTL_INTERNAL_H
#define CKPTFS_CTL_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>

#include "ctl/ctl.h"

/* Sends j (taken) as one line.  0, or -1 when the client is gone. */
int ctl_send_json(int fd, json_t *j);
/* {"error": msg, "done": true} */
void ctl_send_error(int fd, const char *msg);

/*
 * {"cmd":"verify","path":REL[,"threads":N][,"all":true]}: verifies
 * prefix+REL in the bucket (verify_run).  Lines: {"done":false,
 * "file":{...}} for each bad file (every file with "all"), progress
 * {"done":false,"done_bytes","total_bytes","done_files","total_files"},
 * then {"done":true,"target":"s3://...","summary":{...}} or an error.
 * Stops early when stopping(arg) says so or the client goes away.
 */
void ctl_do_verify(const ctl_target *t, int fd, const char *rel,
		   unsigned threads, bool all, bool (*stopping)(void *arg),
		   void *arg);

#endif
