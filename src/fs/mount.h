/*
 * fs_mount: bring a mount up, serve it, take it down.
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
#ifndef CKPTFS_FS_MOUNT_H
#define CKPTFS_FS_MOUNT_H

#include <stdbool.h>

#include "commit/engine.h"
#include "fs/ops.h"
#include "s3/config.h"

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
	fs_opts fs;
	cache_opts cache;
	char *cache_dir; /* owned; cache.dir points here */
	/* writes */
	bool read_only;
	double commit_delay; /* seconds; default 5 */
	eng_opts eng;
	char *temp_patterns; /* owned; eng.temp_patterns points here */
} mount_args;

void mount_args_init(mount_args *a);
void mount_args_free(mount_args *a);

/* Runs the mount; returns the process exit status. */
int fs_mount_main(mount_args *a);

#endif
