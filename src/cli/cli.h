/*
 * cli: the ckptfs command line.  One file per subcommand (cmd-NAME.c;
 * cmd-steps.c holds retry and drop), each exporting a cli_cmd entry
 * listed in main.c's table, so adding a command touches one new file and
 * one table line.  Below: the output helpers of format.c (sizes, progress
 * bars, upload progress lines), bucket.c (the S3 session of a subcommand
 * that works on a bucket by itself: gc, verify s3://) and target.c (the
 * mount a subcommand talks to, and the request to it).  The option
 * parsers are cli/options.h and cli/mount-options.h.
 */
#ifndef CKPTFS_CLI_CLI_H
#define CKPTFS_CLI_CLI_H

typedef struct cli_cmd {
	const char *name;
	const char *usage;   /* one line, after "ckptfs NAME " */
	const char *summary; /* one line */
	int (*exec)(int argc, char **argv); /* argv[0] is the command name */
} cli_cmd;

extern const cli_cmd cli_cmd_mount;
extern const cli_cmd cli_cmd_status;
extern const cli_cmd cli_cmd_prefetch;
extern const cli_cmd cli_cmd_commit;
extern const cli_cmd cli_cmd_sync;
extern const cli_cmd cli_cmd_retry;
extern const cli_cmd cli_cmd_drop;
extern const cli_cmd cli_cmd_gc;
extern const cli_cmd cli_cmd_verify;

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* "1.5 GiB" style; out must hold 32 bytes. */
void cli_fmt_bytes(uint64_t n, char out[32]);
/* Redraws a one-line progress bar on stderr (only when it is a tty). */
void cli_progress(const char *label, uint64_t done, uint64_t total,
		  double rate);
void cli_progress_end(void);


/* Client-side rate of a stream of progress reports (bytes/s). */
typedef struct cli_rate {
	uint64_t last_done;
	double last_t;
	double rate;
} cli_rate;
double cli_rate_update(cli_rate *r, uint64_t done);

/* The progress of an upload (commit, sync) from the mount's
 * {"bytes_done","bytes_total"} lines: pass cli_upload_progress_line to
 * ctl_request as on_line and the struct as its arg.  On a terminal, a bar
 * named `label` (with bar_needs_total: only once bytes_total is known);
 * otherwise, when plain_every > 0, a line "LABEL: D / T uploaded (R/s)" on
 * stderr at most every plain_every seconds.  cli_upload_progress_end ends
 * the bar if one was drawn. */
typedef struct cli_upload_progress {
	const char *label;
	bool bar_needs_total;
	double plain_every;
	/* state */
	cli_rate rate;
	bool drawn;
	double last_line;
} cli_upload_progress;
void cli_upload_progress_line(json_t *line, void *arg);
void cli_upload_progress_end(void *p); /* a cli_upload_progress */

/* ---- cli/bucket.c: the bucket a subcommand works on by itself ------ */

/* What cli_bucket_open connects (free with cli_bucket_close). */
typedef struct cli_bucket {
	struct creds_chain *creds;
	struct http_loop *loop;
	struct s3_client *c;
} cli_bucket;
/* Parses url (s3://BUCKET[/PREFIX]) into s, resolves s's settings and
 * connects (s3_connect: credentials, the loop, a client whose access to
 * the bucket was checked).  0 with *out; -1 after "ckptfs: CMD: why" on
 * stderr for a bad URL or setting; -2 after "ckptfs: CMD: cannot reach
 * s3://B/P at ENDPOINT: why" (or another reason) when it cannot connect. */
struct s3_settings;
int cli_bucket_open(const char *cmd, const char *url, struct s3_settings *s,
		    bool insecure, cli_bucket *out);
void cli_bucket_close(cli_bucket *b);

/* ---- cli/target.c: the mount a subcommand talks to ---------------- */

/* The mountpoint holding path (malloc'd): the last ancestor whose device
 * differs from its parent's; *rel (malloc'd) gets path relative to it
 * ("" for the mountpoint itself).  NULL when path cannot be resolved. */
char *cli_find_mount(const char *path, char **rel);
/* cli_find_mount for subcommand cmd: false, after printing "ckptfs: CMD
 * PATH: why" on stderr, when path does not exist or is on no mount. */
bool cli_target(const char *cmd, const char *path, char **mnt, char **rel);
/* Sends req (consumed) to the mount at mnt (ctl_request; on_line and arg
 * as there), calls done(arg) when given once the final reply is in (to
 * end a progress bar before anything else is printed), and returns the
 * reply (caller json_decref's).  NULL, after printing "ckptfs: CMD WHAT:
 * why" on stderr (what NULL: "ckptfs: why", for a mount whose errors name
 * the command and its target), when the mount could not be asked or
 * replied an error. */
json_t *cli_call(const char *cmd, const char *what, const char *mnt,
		 json_t *req, void (*on_line)(json_t *line, void *arg),
		 void *arg, void (*done)(void *arg));

#endif
