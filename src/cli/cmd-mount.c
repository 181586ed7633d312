/*
 * ckptfs mount s3://bucket[/prefix] MOUNTPOINT [options]
 *
 * Parses the command line into mount_args, the -o items through the
 * option table (cli/mount-options.h: every option, its range and where it
 * goes); daemon/mount.c does the work.  Anything unknown or out of range
 * is an error, so a typo never silently changes behaviour.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/mount-options.h"
#include "cli/options.h"
#include "daemon/mount.h"

static void mount_usage(FILE *f)
{
	fprintf(f,
		"usage: ckptfs mount s3://BUCKET[/PREFIX] MOUNTPOINT [options]\n"
		"\n"
		"  -f, --foreground      stay in the foreground (log to stderr)\n"
		"  -d, --debug           debug logging (implies -f)\n"
		"  --endpoint URL        S3 endpoint (default from AWS config, else AWS)\n"
		"  --region REGION       signing region (default from AWS config, else us-east-1)\n"
		"  --profile NAME        AWS profile for credentials and config\n"
		"  -o OPT[,OPT...]       mount options (details: man ckptfs):\n");
	mount_opts_help(f);
	fprintf(f, "\nUnmount with: fusermount3 -u MOUNTPOINT\n");
}

static int parse_args(mount_args *a, int argc, char **argv)
{
	static const struct option lo[] = {
		{"foreground", no_argument, NULL, 'f'},
		{"debug", no_argument, NULL, 'd'},
		{"help", no_argument, NULL, 'h'},
		/* hidden: the option table for tests and scripts */
		{"list-options", no_argument, NULL, CLI_OPT_OWN},
		CLI_S3_LONG_OPTS,
	};
	int c;
	const char *operand;
	char **const slots[] = {&a->url, &a->mountpoint};
	optind = 1;
	while ((c = cli_getopt(argc, argv, "+fdho:", lo, &operand)) != -1) {
		switch (c) {
		case CLI_OPERAND: /* options may follow */
			if (cli_take_operand(NULL, slots, 2, operand) < 0)
				return -1;
			break;
		case 'f':
			a->foreground = true;
			break;
		case 'd':
			a->debug = a->foreground = true;
			break;
		case 'h':
			mount_usage(stdout);
			exit(0);
		case CLI_OPT_OWN:
			mount_opts_list(stdout);
			exit(0);
		case 'o':
			if (cli_parse_opts(optarg, mount_opt_apply, a) < 0)
				return -1;
			break;
		default:
			if (cli_s3_long_opt(c, optarg, &a->endpoint, &a->region,
					    &a->profile))
				break;
			mount_usage(stderr);
			return -1;
		}
	}
	if (!a->url || !a->mountpoint) {
		fprintf(stderr, "ckptfs: mount needs s3://BUCKET[/PREFIX] and "
				"MOUNTPOINT\n");
		mount_usage(stderr);
		return -1;
	}
	return 0;
}

static int cmd_mount(int argc, char **argv)
{
	mount_args a;
	mount_args_init(&a);
	int rc = 1;
	if (parse_args(&a, argc, argv) == 0)
		rc = daemon_mount_main(&a);
	mount_args_free(&a);
	return rc;
}

const cli_cmd cli_cmd_mount = {
	.name = "mount",
	.usage = "s3://BUCKET[/PREFIX] MOUNTPOINT [-f] [-d] [-o OPT,...]",
	.summary = "mount a bucket prefix",
	.exec = cmd_mount,
};
