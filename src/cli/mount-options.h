/*
 * cli mount options: the one table of `ckptfs mount -o` options.  Each row
 * says what an option takes (its kind and accepted range), its default,
 * one line of help and where its value goes in mount_args; parsing
 * (mount_opt_apply), `ckptfs mount --help` (mount_opts_help), the hidden
 * `--list-options` the integration tests drive, and the unit test that
 * holds doc/ckptfs.1 to the table all read it, so they cannot drift.
 * Adding an option is one row (plus a setter for an odd one) and its
 * paragraph in the man page.
 */
#ifndef CKPTFS_CLI_MOUNT_OPTIONS_H
#define CKPTFS_CLI_MOUNT_OPTIONS_H

#include <stddef.h>
#include <stdio.h>

#include "daemon/mount.h"

typedef enum mopt_kind {
	MO_FLAG,    /* no value: stores .flag in a bool */
	MO_IGNORED, /* no value, no effect: what mount(8) and fstab pass */
	MO_STRING,  /* any non-empty text, copied into a char * */
	MO_SECONDS, /* a decimal number of seconds in [min, max] */
	MO_INTEGER, /* whole number in [min, max] */
	MO_SIZE,    /* bytes, K/M/G/T/P/E suffixes, in [min, max] */
	MO_ENUM,    /* one of .choices */
	MO_CUSTOM,  /* .set parses and stores it */
} mopt_kind;

/* The C type at .off in mount_args. */
typedef enum mopt_type {
	MT_NONE,
	MT_BOOL,
	MT_DOUBLE,   /* seconds */
	MT_MS,       /* unsigned milliseconds, given in seconds */
	MT_UNSIGNED,
	MT_U32,
	MT_U64,
	MT_UID,
	MT_GID,
	MT_MODE,
	MT_ENUM,     /* an enum of int size */
	MT_STR,      /* char *, owned */
} mopt_type;

enum {
	MOF_ABOVE_MIN = 1, /* min itself is refused ("above 0") */
	MOF_OCTAL = 2,     /* MO_INTEGER in base 8 (umask) */
	MOF_SECONDS = 4,   /* MO_INTEGER counts seconds (lease) */
};

typedef struct mopt_choice {
	const char *name;
	int value;
} mopt_choice;

typedef struct mount_opt mount_opt;
struct mount_opt {
	const char *name;
	mopt_kind kind;
	const char *arg;  /* --help's placeholder: "SECONDS", "auto|path" */
	double min, max;  /* MO_SECONDS, MO_INTEGER, MO_SIZE */
	unsigned flags;   /* MOF_* */
	const char *def;  /* the default as --help shows it; NULL: none */
	const char *help; /* one line */
	mopt_type type;
	size_t off;       /* offsetof(mount_args, ...) */
	bool flag;        /* MO_FLAG: the value it stores */
	const mopt_choice *choices; /* MO_ENUM, ends with a NULL name */
	/* MO_CUSTOM: 0, or -1 with *why (malloc'd, or NULL: out of memory) */
	int (*set)(mount_args *a, const char *v, char **why);
};

extern const mount_opt mount_opts[];
extern const size_t mount_opts_count;

/* The row named name, or NULL. */
const mount_opt *mount_opt_find(const char *name);

/*
 * One -o item (a cli_opt_fn over a mount_args): value NULL for "key"
 * alone.  0, or -1 after one line on stderr naming the option and what it
 * accepts: "ckptfs: invalid value for mount option lease=0: must be a
 * whole number of seconds from 1 to 86400".
 */
int mount_opt_apply(void *args, const char *key, const char *value);

/* What o accepts, as the refusal says it ("a size from 64K to 1G ..."),
 * into out (truncated to n). */
void mount_opt_describe(const mount_opt *o, char *out, size_t n);

/* The -o part of `ckptfs mount --help`: one line per option. */
void mount_opts_help(FILE *f);

/* `ckptfs mount --list-options`: "NAME KIND MIN MAX CHOICES FLAGS" per
 * line, tab-separated (MIN MAX "-" where there is no range, CHOICES
 * '|'-separated or "-", FLAGS "above_min" when MIN itself is refused, or
 * "-"), for the tests that drive every option. */
void mount_opts_list(FILE *f);

#endif
