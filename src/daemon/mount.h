/*
 * daemon: the ckptfs daemon's life: bring a mount up, serve it, take it
 * down.  It sits above fs and ctl and wires the layers together in order:
 * the mountpoint's checks and its claim (no ckptfs mount on it already,
 * the control socket's lock and directory: ctl_server_claim),
 * credentials and the http loop with the mount's retry policy
 * (s3_connect), the bucket check, the listing probe (s3/probe.h), the
 * read cache, the commit engine (not
 * for a read-only mount), the control server (ctl/), then the FUSE
 * session over the fs operations (fs/ops.h).  Teardown runs the other
 * way, after what is pending has committed.
 *
 * Order matters: threads (the http loop, libfuse workers) must not exist
 * across fork(), so in background mode the process forks first and the
 * child does everything (credentials, bucket check, FUSE mount); the parent
 * only waits on a pipe for "mounted" or "failed" and exits 0 or 1
 * accordingly.  Errors are printed by the child on the inherited stderr
 * before it reports failure, so the user sees them either way, and no
 * half-working mount is ever left: the FUSE mount happens only after the
 * bucket check succeeded.
 */
#ifndef CKPTFS_DAEMON_MOUNT_H
#define CKPTFS_DAEMON_MOUNT_H

#include <stdbool.h>

#include "commit/engine.h"
#include "fs/ops.h"
#include "s3/config.h"
#include "s3/probe.h"
#include "s3/retry.h"

typedef struct mount_args {
	char *url;
	char *mountpoint;
	bool foreground;
	bool debug;
	bool allow_other;
	bool nonempty;
	bool use_syslog;  /* default: stderr in foreground, syslog otherwise */
	bool log_set;     /* log= given explicitly */
	bool insecure;    /* skip TLS verification (testing only) */
	char *endpoint;
	char *region;
	char *profile;
	char *ca_bundle;
	s3_addressing addressing;
	s3_listing_mode listing; /* -o listing=, default auto (s3/probe.h) */
	/* the S3 client's retry policy (first_byte_timeout, low_speed_time,
	 * low_speed_limit, retry_max_delay, retry_timeout); default
	 * RETRY_POLICY_DEFAULT */
	retry_policy retry;
	fs_opts fs;
	cache_opts cache;
	char *cache_dir; /* owned; cache.dir points here */
	/* writes */
	bool read_only;
	double commit_delay; /* seconds; default 5 */
	eng_opts eng;
	char *temp_patterns; /* owned; eng.temp_patterns points here */
	/* the metrics endpoint, "HOST:PORT" (daemon/exporter.h); NULL: off */
	char *metrics;
	char *complete;      /* owned; fs.complete points here */
} mount_args;

void mount_args_init(mount_args *a);
void mount_args_free(mount_args *a);

/* Runs the mount; returns the process exit status. */
int daemon_mount_main(mount_args *a);

#endif
