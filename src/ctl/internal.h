/*
 * ctl internal: the files of the control server, top to bottom:
 *   server.c   the socket and the connections: reads a request, hands it
 *              to ctl_request_run;
 *   requests.c the table of requests (name, handler, what it needs) and
 *              the checks the table asks for;
 *   req-*.c    one file per request or small family: req-status.c,
 *              req-prefetch.c, req-commit.c (commit, sync), req-steps.c
 *              (retry, drop);
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
#include <stdint.h>
#include <sys/types.h>

#include "ctl/ctl.h"
#include "fs/ops.h"

/* ---- requests (requests.c, req-*.c) --------------------------------------- */

/* One request being served: what its handler gets. */
typedef struct ctl_req {
	const ctl_target *t;
	int fd;           /* the client; the handler sends its lines there */
	json_t *msg;      /* the request object */
	const char *path; /* "path" (CTL_ARG_PATH), else NULL */
	uint64_t id;      /* "id" when a positive integer, else 0 */
	/* whether the server is stopping: long requests end early */
	bool (*stopping)(void *arg);
	void *arg;
} ctl_req;

/* What a request needs, checked before its handler runs (in this order). */
enum {
	/* "path" must be a string; without it: "unknown command" */
	CTL_ARG_PATH = 1 << 0,
	/* path without ".." and not absolute */
	CTL_PATH_INSIDE = 1 << 1,
	/* path of clean components: not absolute, no "", "." or ".." */
	CTL_PATH_CLEAN = 1 << 2,
	/* a writable mount (a commit engine); else the row's ro_error */
	CTL_WRITABLE = 1 << 3,
};

typedef struct ctl_request_def {
	const char *cmd;
	void (*run)(const ctl_req *r);
	unsigned needs;       /* CTL_* */
	const char *ro_error; /* with CTL_WRITABLE */
} ctl_request_def;

/* The table (requests.c) and its length. */
extern const ctl_request_def ctl_requests[];
extern const size_t ctl_requests_count;
/* The row of cmd, or NULL. */
const ctl_request_def *ctl_request_find(const char *cmd);
/* Serves msg (a parsed request line, or NULL when it did not parse) on
 * r->fd: checks what its row needs, then runs it. */
void ctl_request_run(ctl_req *r, json_t *msg);

/* The mount's fs_ctx, or NULL (not up yet). */
static inline fs_ctx *ctl_target_fs(const ctl_target *t)
{
	return t->fs ? __atomic_load_n(t->fs, __ATOMIC_ACQUIRE) : NULL;
}

/* The mount's commit engine, or NULL (read-only, or not up yet). */
static inline eng *ctl_target_eng(const ctl_target *t)
{
	fs_ctx *fs = ctl_target_fs(t);
	return fs ? fs_ctx_engine(fs) : NULL;
}

void ctl_req_status(const ctl_req *r);
void ctl_req_prefetch(const ctl_req *r);
void ctl_req_commit(const ctl_req *r);
void ctl_req_sync(const ctl_req *r);
void ctl_req_retry(const ctl_req *r);
void ctl_req_drop(const ctl_req *r);

/* ---- reply.c ------------------------------------------------------------- */

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
