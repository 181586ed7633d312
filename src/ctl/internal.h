/*
 * ctl internal: the files of the control server, top to bottom:
 *   server.c   the socket, the connections, the requests' dispatch and the
 *              status, prefetch, commit, sync, retry and drop requests;
 *   verify.c   the verify request (verify/verify.h over the mount's
 *              S3 client);
 *   metrics.c  the mount's numbers (ctl.h);
 *   reply.c    one JSON line to the client;
 *   sock.c     where the socket lives, whether its directory and its peer
 *              can be trusted, and the daemon's claim on a mountpoint
 *              (used by server.c and client.c).
 */
#ifndef CKPTFS_CTL_INTERNAL_H
#define CKPTFS_CTL_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

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

/* ---- sock.c ------------------------------------------------------------ */

/* The control sockets' directory (malloc'd): /run/ckptfs for root,
 * $XDG_RUNTIME_DIR/ckptfs, else /tmp/ckptfs-UID. */
char *ctl_sock_dir(void);

/*
 * Whether dir can be trusted with control sockets: a directory, not a
 * symbolic link, owned by this user, mode 0700 (no access for group or
 * others), in a parent owned by this user or root that nobody else can
 * write to unless it is sticky.  With create, a missing dir is made (0700)
 * first.  0; -ENOENT when it is missing (only without create); -1 with
 * *err (malloc'd) naming the directory, what is wrong and what to do.
 */
int ctl_sock_dir_check(const char *dir, bool create, char **err);

/* Whether the peer of connected socket fd (SO_PEERCRED) is this user or
 * root; *uid its uid. */
bool ctl_peer_trusted(int fd, unsigned *uid);

/*
 * A daemon's claim on its mountpoint's socket: an exclusive lock on
 * HASH.lock beside HASH.sock, held from ctl_sock_claim to ctl_sock_release,
 * so one daemon at a time serves a mountpoint and only it ever binds or
 * removes the socket.
 */
typedef struct ctl_claim {
	char *path; /* HASH.sock */
	char *lock; /* HASH.lock */
	int lock_fd;
	int lfd; /* the listening socket, or -1 */
	dev_t dev; /* the socket file's, once bound */
	ino_t ino;
} ctl_claim;

/* Checks (creating) the socket directory and takes the lock.  0, or -1
 * with *err: an unsafe directory, or the mountpoint already served ("pid
 * N"); nothing is left claimed then. */
int ctl_sock_claim(const char *mountpoint, ctl_claim *c, char **err);
/* Binds and listens (no access for group or others), replacing a dead daemon's socket.  The
 * listening fd (owned by c), or -1 with *err. */
int ctl_sock_listen(ctl_claim *c, char **err);
/* Removes the socket (when it is still the one bound) and the lock file,
 * closes both; c may be half set up. */
void ctl_sock_release(ctl_claim *c);

#endif
