/*
 * cli options: the -o OPT[,OPT...] parser the subcommands share (mount,
 * gc).  A list is split at commas into "key" or "key=value" items (the
 * value runs to the next comma, '=' included) and each item goes to the
 * subcommand's own apply function, which knows its keys and prints its
 * own error for one it does not; the first failure ends the list.  The
 * helpers below are the small pieces both subcommands' apply functions
 * use.
 */
#ifndef CKPTFS_CLI_OPTIONS_H
#define CKPTFS_CLI_OPTIONS_H

#include "s3/config.h"

/* Applies one item: value NULL for "key" without '='.  0 or -1. */
typedef int (*cli_opt_fn)(void *arg, const char *key, const char *value);

/* Runs apply over every item of list in order; stops at the first that
 * fails.  Returns 0, or -1 (an item failed, or no memory). */
int cli_parse_opts(const char *list, cli_opt_fn apply, void *arg);

/* Replaces *dst (freed) with a copy of v.  0, or -1 when out of memory. */
int cli_set_str(char **dst, const char *v);

/* "auto", "path" or "virtual" into *out: 0; -1 for anything else (*out
 * unchanged). */
int cli_parse_addressing(const char *v, s3_addressing *out);

#endif
