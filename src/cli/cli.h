/*
 * cli: the ckptfs command line.  One file per subcommand (cmd-NAME.c),
 * each exporting one cli_cmd entry listed in main.c's table, so adding a
 * command touches one new file and one table line.  Below: the output
 * helpers of format.c; the -o list parser is cli/options.h.
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

/* The mountpoint holding path (malloc'd): the last ancestor whose device
 * differs from its parent's; *rel (malloc'd) gets path relative to it
 * ("" for the mountpoint itself).  NULL when path cannot be resolved. */
char *cli_find_mount(const char *path, char **rel);

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
void cli_upload_progress_end(const cli_upload_progress *p);

#endif
