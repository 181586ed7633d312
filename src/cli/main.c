/*
 * ckptfs: command dispatch.  `ckptfs SOURCE MOUNTPOINT -o opts` (the form
 * mount(8) uses for `mount -t fuse.ckptfs`) is treated as `ckptfs mount`.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "config.h"

static const cli_cmd *const commands[] = {
	&cli_cmd_mount,
	&cli_cmd_status,
	&cli_cmd_prefetch,
	&cli_cmd_commit,
	&cli_cmd_sync,
	&cli_cmd_retry,
	&cli_cmd_drop,
	&cli_cmd_gc,
	&cli_cmd_verify,
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
	fprintf(f, "usage: ckptfs COMMAND [ARGS]\n\n"
		   "ckptfs mounts an S3 bucket prefix of ML checkpoints.\n\n"
		   "commands:\n");
	for (size_t i = 0; i < N_COMMANDS; i++)
		fprintf(f, "  %-8s %s\n      ckptfs %s %s\n", commands[i]->name,
			commands[i]->summary, commands[i]->name,
			commands[i]->usage);
	fprintf(f, "\n  ckptfs COMMAND --help   details of one command\n"
		   "  ckptfs --version\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 1;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("ckptfs %s\n", PACKAGE_VERSION);
		return 0;
	}
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (!strcmp(argv[1], commands[i]->name))
			return commands[i]->exec(argc - 1, argv + 1);
	if (!strncmp(argv[1], "s3://", 5)) /* mount(8) helper form */
		return cli_cmd_mount.exec(argc, argv);
	fprintf(stderr, "ckptfs: unknown command '%s' (try ckptfs --help)\n",
		argv[1]);
	return 1;
}
