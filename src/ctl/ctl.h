/*
 * ctl: the control channel between `ckptfs COMMAND MOUNT` and the daemon
 * serving MOUNT.
 *
 * The daemon listens on a Unix socket whose path is derived from the
 * mountpoint's real path (ctl_socket_path), in a directory only its owner
 * can enter (/run/ckptfs for root, $XDG_RUNTIME_DIR/ckptfs otherwise,
 * /tmp/ckptfs-UID without XDG_RUNTIME_DIR).  Both sides refuse a directory
 * that is not theirs alone (ctl/sock.c), and each checks the other's uid
 * (SO_PEERCRED: the same user, or root).  One daemon serves a mountpoint:
 * it holds a lock beside its socket for its whole life, so a second daemon
 * is refused and never removes the first one's socket.  A client has
 * CTL_REQUEST_TIMEOUT_S seconds to send its request line; a silent one is
 * closed, and an unmount closes those still silent at once.
 * Protocol: the client sends one JSON object on one line; the daemon
 * answers with one or more JSON lines, the last of which has "done": true
 * (progress lines come before it).  A reply with "error" carries a message.
 * Requests:
 *   {"cmd":"status"}                  one reply: mount, cache, downloads,
 *                                     "pending" (eng_status) when writable,
 *                                     "metrics" (ctl_metrics_json) and
 *                                     "metrics_endpoint" when serving one
 *   {"cmd":"prefetch","path":"rel"}   progress lines, then the totals
 *   {"cmd":"commit","path":"rel"}     fs_commit_path; progress lines
 *                                     {"done":false,"bytes_done","bytes_total"}
 *                                     of the transactions concerned, then
 *                                     {"done":true,"committed":[{"path",
 *                                     "bytes"}...]} once they are visible
 *   {"cmd":"sync"}                    fs_sync; its progress callback's
 *                                     {"done":false,"bytes_done","bytes_total"}
 *                                     lines, then {"done":true,...} once
 *                                     everything pending is visible; an error
 *                                     names every step that failed for good
 *   {"cmd":"retry"[,"id":N]}          eng_step_retry: failed steps (or step
 *                                     N) try again now; {"retried":n}
 *   {"cmd":"drop","id":N}             eng_step_drop: gives step N up;
 *                                     {"dropped":"commit of PATH"}
 *   {"cmd":"verify","path":"rel"...}  `ckptfs verify`: bad files and
 *                                     progress lines, then a summary
 *                                     (ctl/internal.h, ctl_do_verify)
 * ("" is the mount root.)
 */
#ifndef CKPTFS_CTL_CTL_H
#define CKPTFS_CTL_CTL_H

#include <jansson.h>

#include "cache/cache.h"
#include "s3/client.h"

typedef struct ctl_server ctl_server;
typedef struct fs_ctx fs_ctx;

typedef struct ctl_target {
	const char *mountpoint;
	const char *bucket;
	const char *prefix;
	s3_client *s3;
	cache *cache;
	/* Where the mount keeps its fs_ctx: the server starts before the FUSE
	 * session (and its fs_ctx) exists, so it reads *fs per request; NULL
	 * (or *fs NULL) answers commit and sync with an error.  The fs_ctx
	 * must outlive ctl_server_stop. */
	fs_ctx *const *fs;
	/* the metrics endpoint's URL (daemon/exporter.h), or NULL */
	const char *metrics_url;
	/* the mount's counters (its http loop's, http_loop_metrics), or
	 * NULL: all 0 */
	struct metrics *metrics;
} ctl_target;

/*
 * The mount's numbers (ctl/metrics.c; doc/metrics.md): t->metrics'
 * counters (util/metrics.h), the cache's and the commit engine's state,
 * the credentials'.  One table, ctl_metrics[], names each number once and
 * drives every output: the Prometheus text exposition (ctl_metrics_text,
 * malloc'd), the status reply (ctl_metrics_fill: "cache", "downloads" and
 * "metrics" of `ckptfs status --json`; ctl_metrics_json: its "metrics"
 * object alone) and the rows of `ckptfs status` (cli/cmd-status.c).
 */
typedef enum ctl_metric_type {
	CTL_COUNTER,
	CTL_GAUGE,
	CTL_HISTOGRAM,
	CTL_INFO, /* always 1; the value is a label */
} ctl_metric_type;

typedef enum ctl_metric_unit {
	CTL_COUNT,
	CTL_BYTES,
	CTL_SECONDS,
	CTL_BYTES_PER_S,
	CTL_TEXT, /* a string (CTL_INFO's label) */
} ctl_metric_unit;

/* ctl_metric.flags */
enum {
	CTL_M_NONE_IF_0 = 1, /* `ckptfs status` prints "none" for 0 */
};

typedef struct ctl_metric {
	/* the Prometheus family; NULL: not exported */
	const char *name;
	ctl_metric_type type;
	const char *help;
	ctl_metric_unit unit;
	/* where `status --json` shows it: a path of keys in the reply, OP
	 * standing for each S3 operation used; NULL: not there */
	const char *json;
	/* its row in `ckptfs status`, in the section named by json's first
	 * key; NULL: not printed */
	const char *text;
	unsigned flags;
	/* how to read it: a kind and an offset into the numbers
	 * ctl/metrics.c gathers (private to it) */
	unsigned char val;
	unsigned char when;
	size_t off;
} ctl_metric;

extern const ctl_metric ctl_metrics[];
extern const size_t ctl_metrics_count;

char *ctl_metrics_text(const ctl_target *t);
json_t *ctl_metrics_json(const ctl_target *t);
/* Puts the numbers into a status reply at their json paths: objects on
 * the way are made when missing, and kept where they are when present
 * (the caller orders the reply's keys). */
void ctl_metrics_fill(const ctl_target *t, json_t *reply);

/* Seconds a client has to send its request; then it is closed. */
#define CTL_REQUEST_TIMEOUT_S 5

/* malloc'd socket path for a mountpoint (which must exist). NULL on error. */
char *ctl_socket_path(const char *mountpoint);

/*
 * Claims mountpoint for this process, before anything else of the mount
 * is set up: checks (or creates) the socket directory and takes the
 * mountpoint's lock.  NULL with *err when the directory is not safe or
 * another daemon serves the mountpoint.  ctl_server_start then listens;
 * ctl_server_stop (started or not) lets go.
 */
ctl_server *ctl_server_claim(const char *mountpoint, char **err);
/* Listens and serves t (t->mountpoint as claimed).  0, or -1 with *err
 * (s stays claimed). */
int ctl_server_start(ctl_server *s, const ctl_target *t, char **err);
void ctl_server_stop(ctl_server *s);

/* Sends req and calls on_line for every reply line until the final one,
 * which is returned (caller json_decref's).  NULL with *err on failure. */
json_t *ctl_request(const char *mountpoint, json_t *req,
		    void (*on_line)(json_t *line, void *arg), void *arg,
		    char **err);

#endif
