/*
 * cli: the ckptfs command line.  One file per subcommand (cmd-NAME.c),
 * each exporting one cli_cmd entry listed in main.c's table, so adding a
 * command touches one new file and one table line.
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

#endif
