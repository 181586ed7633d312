/*
 * cli options: the command-line pieces the subcommands share.  The -o
 * OPT[,OPT...] parser (mount, gc, verify): a list is split at commas into
 * "key" or "key=value" items (the value runs to the next comma, '='
 * included) and each item goes to the subcommand's own apply function,
 * which knows its keys and prints its own error for one it does not; the
 * first failure ends the list.  Below it: the value parsers the apply
 * functions use (numbers, sizes, addressing, object_meta), the -o items
 * and --endpoint/--region/--profile long options of every subcommand that
 * reaches a bucket by itself (cli_s3_opt, CLI_S3_LONG_OPTS), and the
 * getopt loop with operands anywhere (cli_getopt, cli_take_operand).
 * Mount's own option table is cli/mount-options.h.
 */
#ifndef CKPTFS_CLI_OPTIONS_H
#define CKPTFS_CLI_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "fs/ops.h"
#include "s3/config.h"

/* Applies one item: value NULL for "key" without '='.  0 or -1. */
typedef int (*cli_opt_fn)(void *arg, const char *key, const char *value);

/* Runs apply over every item of list in order; stops at the first that
 * fails.  Returns 0, or -1 (an item failed, or no memory). */
int cli_parse_opts(const char *list, cli_opt_fn apply, void *arg);

/* Replaces *dst (freed) with a copy of v.  0, or -1 when out of memory. */
int cli_set_str(char **dst, const char *v);

/*
 * The long options of every subcommand that reaches a bucket (--endpoint,
 * --region, --profile): CLI_S3_LONG_OPTS ends a struct option table (the
 * zero row included); a subcommand numbers its own long-only options from
 * CLI_OPT_OWN.  (Needs <getopt.h>.)
 */
enum { CLI_OPT_ENDPOINT = 256, CLI_OPT_REGION, CLI_OPT_PROFILE, CLI_OPT_OWN };
#define CLI_S3_LONG_OPTS                                                 \
	{"endpoint", required_argument, NULL, CLI_OPT_ENDPOINT},         \
	{"region", required_argument, NULL, CLI_OPT_REGION},             \
	{"profile", required_argument, NULL, CLI_OPT_PROFILE},           \
	{NULL, 0, NULL, 0}

/*
 * The next item of a subcommand's command line, options and operands in
 * any order: shortopts starts with '+', so getopt_long stops at an
 * operand; this takes it and goes on.  getopt_long's answer for an
 * option, CLI_OPERAND with *operand for an operand, -1 at the end.  Set
 * optind = 1 (and opterr) before the first call.
 */
enum { CLI_OPERAND = 1 };
struct option;
int cli_getopt(int argc, char **argv, const char *shortopts,
	       const struct option *lo, const char **operand);

/*
 * Stores a copy of operand in the first NULL one of the n slots; -1 after
 * "ckptfs: CMD: unexpected argument 'X'" on stderr ("ckptfs: unexpected
 * argument 'X'" when cmd is NULL) when every slot is taken.
 */
int cli_take_operand(const char *cmd, char **const *slots, size_t n,
		     const char *operand);

/* When getopt_long's c is one of those, stores its argument v in
 * *endpoint, *region or *profile (cli_set_str) and returns true. */
bool cli_s3_long_opt(int c, const char *v, char **endpoint, char **region,
		     char **profile);

/*
 * Values of -o items, whole or not at all: no sign, no leading blank, no
 * trailing garbage, no overflow, nothing that is not a finite number.
 * cli_parse_double: a decimal number ("0.5", "2", "1e3"); cli_parse_uint:
 * digits in base (10, or 8 for a umask); cli_parse_size: a number of
 * bytes with an optional K, M, G, T, P or E (powers of 1024; "10G",
 * "1.5T", "512MiB", "64KB").  0, or -1 with *out unchanged.  Ranges are
 * the caller's (cli/mount-options.h).
 */
int cli_parse_double(const char *v, double *out);
int cli_parse_uint(const char *v, int base, uint64_t *out);
int cli_parse_size(const char *v, uint64_t *out);

/* "auto", "path" or "virtual" into *out: 0; -1 for anything else (*out
 * unchanged). */
int cli_parse_addressing(const char *v, s3_addressing *out);

/* object_meta=: "auto", "on" or "off" into *out: 0; -1 for anything else
 * (*out unchanged). */
int cli_parse_object_meta(const char *v, fs_object_meta *out);

/*
 * One -o item of a subcommand that reaches a bucket by itself (gc, verify):
 * endpoint= region= profile= ca_bundle= addressing= into s, insecure into
 * *insecure.  0; -1 after telling stderr "ckptfs: CMD: unknown option".
 */
int cli_s3_opt(const char *cmd, s3_settings *s, bool *insecure,
	       const char *k, const char *v);

/*
 * The rest of such a subcommand's getopt_long answers c (argument v; word
 * the argument it came from): -o's items (cli_s3_opt) and the
 * CLI_S3_LONG_OPTS.  0 when taken; -1 after a message for a bad -o item,
 * or "ckptfs: CMD: unknown or incomplete option 'WORD'" for anything else.
 */
int cli_s3_arg(const char *cmd, s3_settings *s, bool *insecure, int c,
	       const char *v, const char *word);

#endif
