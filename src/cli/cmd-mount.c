/*
 * ckptfs mount s3://bucket[/prefix] MOUNTPOINT [options]
 *
 * Parses the command line and -o options (cli/options.h) into mount_args;
 * daemon/mount.c does the work.  Options that mount(8) passes through (rw,
 * dev, _netdev, ...) are accepted and ignored; anything unknown is an
 * error, so a typo never silently changes behaviour.  The request options
 * (first_byte_timeout, low_speed_time, low_speed_limit, retry_max_delay,
 * retry_timeout) tune the retry policy (s3/retry.h) in mount_args.retry,
 * which the daemon gives the S3 client (s3_connect).
 */
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "daemon/exporter.h"
#include "daemon/mount.h"
#include "proto/complete.h"
#include "s3/retry.h"

static const char *const ignored_opts[] = {
	"rw", "dev", "nodev", "suid", "nosuid", "exec", "noexec", "auto",
	"noauto", "user", "nouser", "users", "_netdev", "defaults", "async",
	"atime", "noatime", "relatime", NULL,
};

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
		"  -o OPT[,OPT...]       mount options:\n"
		"      endpoint=URL region=R profile=P ca_bundle=PATH\n"
		"      addressing=auto|path|virtual\n"
		"      listing=auto|delimiter|flat (flat: list directories\n"
		"      without a delimiter, for servers whose delimiter\n"
		"      listings miss deep directories; auto probes at mount)\n"
		"      allow_other uid=N gid=N umask=OCTAL nonempty\n"
		"      entry_timeout=S attr_timeout=S dir_timeout=S (default 1)\n"
		"      log=stderr|syslog debug insecure\n"
		"      metrics=HOST:PORT (Prometheus endpoint at /metrics, off;\n"
		"      e.g. 127.0.0.1:9464)\n"
		"      cache_dir=DIR (default /var/cache/ckptfs for root)\n"
		"      cache_size=SIZE (0 = no cap) cache_min_free=SIZE (1G)\n"
		"      part_size=SIZE (8M) conns_per_file=N (8) conns=N (16)\n"
		"      cache_verify=on|off (CRC-check cached chunks, on)\n"
		"      dir_readahead=SIZE (download the next files of a directory\n"
		"      read in name order this far ahead, 256M; 0 = off)\n"
		"      object_meta=auto|on|off (read the mode, owner and mtime of\n"
		"      files outside manifests from their objects: auto, those\n"
		"      with a metadata hint; on: every one (buckets written by\n"
		"      ckptfs before hints); off: none, defaults)\n"
		"      no_passthrough (read cached files and write staged ones\n"
		"      through FUSE, not the kernel's passthrough to the file)\n"
		"      ro (no writes: EROFS) commit_delay=S (idle seconds before a\n"
		"      directory commits, 5) lease=S (pending-marker lease, 60)\n"
		"      temp_patterns=P:P... (names uploaded only once renamed,\n"
		"      default *tmp*:*.tempstate*:*_temp:_checkpoint:*.__lock)\n"
		"      upload_part_size=SIZE (multipart part, 8M; files from\n"
		"      16M go multipart) upload_conns=N (parallel uploads, 16)\n"
		"      complete=TRIGGER/REQUIRED:... (a directory holding a file\n"
		"      matching TRIGGER shows empty until one matching REQUIRED\n"
		"      is there, default *.distcp/.metadata; none = no rule)\n"
		"      max_staged=SIZE (staged bytes not yet uploaded before\n"
		"      writers wait; 0 = no limit) upload_hold=S (longest a\n"
		"      closed file waits to upload while the application still\n"
		"      writes, 10; 0 = upload at once)\n"
		"      transient_limit=S (a step failing with transient errors\n"
		"      this long is reported failed and holds back only what\n"
		"      depends on it, still retried; 180)\n"
		"      first_byte_timeout=S (longest wait for a reply once a\n"
		"      request is sent, 2) low_speed_time=S low_speed_limit=B\n"
		"      (a transfer under B bytes/s for S seconds is abandoned, 5\n"
		"      and 1) retry_max_delay=S (longest pause between retries,\n"
		"      5) retry_timeout=S (a request is not retried after this\n"
		"      long, 60: reads fail with EIO; commits keep retrying)\n"
		"\n"
		"Unmount with: fusermount3 -u MOUNTPOINT\n");
}

static int parse_num(const char *k, const char *v, int base, double *dbl,
		     unsigned long *ul)
{
	char *end;
	if (dbl) {
		*dbl = strtod(v, &end);
		if (*v && !*end && *dbl >= 0)
			return 0;
	} else {
		*ul = strtoul(v, &end, base);
		if (*v && !*end)
			return 0;
	}
	fprintf(stderr, "ckptfs: invalid value '%s' for mount option %s\n", v,
		k);
	return -1;
}

/* "10G", "512M", "4096", "1.5T": binary units. */
static int parse_size(const char *k, const char *v, uint64_t *out)
{
	char *end;
	double d = strtod(v, &end);
	double mul = 1;
	switch (*end) {
	case 'k': case 'K': mul = 1024.0; end++; break;
	case 'm': case 'M': mul = 1048576.0; end++; break;
	case 'g': case 'G': mul = 1073741824.0; end++; break;
	case 't': case 'T': mul = 1099511627776.0; end++; break;
	default: break;
	}
	if (*end == 'i' || *end == 'B')
		end++;
	if (*end == 'B')
		end++;
	if (end == v || *end || d < 0) {
		fprintf(stderr, "ckptfs: invalid size '%s' for mount option %s\n",
			v, k);
		return -1;
	}
	*out = (uint64_t)(d * mul);
	return 0;
}

static int apply_cache_opt(mount_args *a, const char *k, const char *v)
{
	uint64_t n;
	if (!strcmp(k, "cache_dir"))
		return cli_set_str(&a->cache_dir, v);
	if (!strcmp(k, "cache_verify"))
		return a->cache.verify = strcmp(v, "0") && strcmp(v, "off"), 0;
	if (parse_size(k, v, &n) < 0)
		return -1;
	if (!strcmp(k, "cache_size"))
		a->cache.cap = n;
	else if (!strcmp(k, "cache_min_free"))
		a->cache.min_free = n;
	else if (!strcmp(k, "part_size") && n >= 65536 && n <= (1u << 30))
		a->cache.chunk_size = (uint32_t)n;
	else if (!strcmp(k, "conns_per_file") && n >= 1 && n <= 256)
		a->cache.per_file_conns = (unsigned)n;
	else if (!strcmp(k, "conns") && n >= 1 && n <= 1024)
		a->cache.global_conns = (unsigned)n;
	else if (!strcmp(k, "dir_readahead"))
		a->fs.dir_readahead = n;
	else {
		fprintf(stderr, "ckptfs: invalid value '%s' for mount option %s\n",
			v, k);
		return -1;
	}
	return 0;
}

/* Seconds into milliseconds of the policy: 0 .. 1 day. */
static int set_ms(const char *k, const char *v, unsigned *ms)
{
	double d;
	if (parse_num(k, v, 0, &d, NULL) < 0)
		return -1;
	if (d > 86400) {
		fprintf(stderr, "ckptfs: mount option %s: at most 86400 "
				"seconds\n", k);
		return -1;
	}
	*ms = (unsigned)(d * 1000 + 0.5);
	return 0;
}

/* Seconds of transient failures before a step is set aside: above 0 (0
 * would set every step aside at its first failure) and finite. */
static int set_transient_limit(const char *k, const char *v, double *out)
{
	double d;
	if (parse_num(k, v, 0, &d, NULL) < 0)
		return -1;
	if (!(d > 0) || !isfinite(d)) {
		fprintf(stderr, "ckptfs: mount option %s: a number of seconds "
				"above 0 (default %.0f)\n",
			k, ENG_DEFAULT_TRANSIENT_LIMIT_S);
		return -1;
	}
	*out = d;
	return 0;
}

static int apply_net_opt(retry_policy *net, const char *k, const char *v)
{
	if (!strcmp(k, "first_byte_timeout"))
		return set_ms(k, v, &net->first_byte_ms);
	if (!strcmp(k, "low_speed_time"))
		return set_ms(k, v, &net->low_speed_ms);
	if (!strcmp(k, "retry_max_delay"))
		return set_ms(k, v, &net->max_ms);
	if (!strcmp(k, "retry_timeout"))
		return set_ms(k, v, &net->budget_ms);
	uint64_t n; /* low_speed_limit: bytes/s, "64K" allowed */
	if (parse_size(k, v, &n) < 0)
		return -1;
	if (n > UINT32_MAX) {
		fprintf(stderr, "ckptfs: invalid value '%s' for mount option "
				"%s\n", v, k);
		return -1;
	}
	net->low_speed_bytes = (unsigned)n;
	return 0;
}

static bool is_net_opt(const char *k)
{
	static const char *const names[] = {
		"first_byte_timeout", "low_speed_time", "low_speed_limit",
		"retry_max_delay", "retry_timeout", NULL,
	};
	for (int i = 0; names[i]; i++)
		if (!strcmp(k, names[i]))
			return true;
	return false;
}

static bool is_cache_opt(const char *k)
{
	static const char *const names[] = {
		"cache_dir", "cache_size", "cache_min_free", "part_size",
		"conns_per_file", "conns", "cache_verify", "dir_readahead", NULL,
	};
	for (int i = 0; names[i]; i++)
		if (!strcmp(k, names[i]))
			return true;
	return false;
}

/* One -o item (cli_opt_fn over mount_args). */
static int apply_opt(void *arg, const char *k, const char *v)
{
	mount_args *a = arg;
	if (v && is_cache_opt(k))
		return apply_cache_opt(a, k, v);
	if (v && is_net_opt(k))
		return apply_net_opt(&a->retry, k, v);
	unsigned long ul;
	if (!v) {
		if (!strcmp(k, "allow_other"))
			return a->allow_other = true, 0;
		if (!strcmp(k, "nonempty"))
			return a->nonempty = true, 0;
		if (!strcmp(k, "debug"))
			return a->debug = true, 0;
		if (!strcmp(k, "insecure"))
			return a->insecure = true, 0;
		if (!strcmp(k, "no_passthrough"))
			return a->fs.passthrough = false, 0;
		if (!strcmp(k, "ro"))
			return a->read_only = true, 0;
		if (!strcmp(k, "rw"))
			return a->read_only = false, 0;
		for (int i = 0; ignored_opts[i]; i++)
			if (!strcmp(k, ignored_opts[i]))
				return 0;
	} else if (!strcmp(k, "endpoint")) {
		return cli_set_str(&a->endpoint, v);
	} else if (!strcmp(k, "region")) {
		return cli_set_str(&a->region, v);
	} else if (!strcmp(k, "profile")) {
		return cli_set_str(&a->profile, v);
	} else if (!strcmp(k, "ca_bundle")) {
		return cli_set_str(&a->ca_bundle, v);
	} else if (!strcmp(k, "addressing")) {
		if (cli_parse_addressing(v, &a->addressing) == 0)
			return 0;
	} else if (!strcmp(k, "listing")) {
		if (s3_parse_listing_mode(v, &a->listing) == 0)
			return 0;
	} else if (!strcmp(k, "uid")) {
		if (parse_num(k, v, 10, NULL, &ul) < 0)
			return -1;
		return a->fs.uid = (uid_t)ul, 0;
	} else if (!strcmp(k, "gid")) {
		if (parse_num(k, v, 10, NULL, &ul) < 0)
			return -1;
		return a->fs.gid = (gid_t)ul, 0;
	} else if (!strcmp(k, "umask")) {
		if (parse_num(k, v, 8, NULL, &ul) < 0 || ul > 0777)
			return -1;
		return a->fs.umask = (mode_t)ul, 0;
	} else if (!strcmp(k, "entry_timeout")) {
		return parse_num(k, v, 0, &a->fs.entry_timeout, NULL);
	} else if (!strcmp(k, "attr_timeout")) {
		return parse_num(k, v, 0, &a->fs.attr_timeout, NULL);
	} else if (!strcmp(k, "dir_timeout")) {
		return parse_num(k, v, 0, &a->fs.dir_timeout, NULL);
	} else if (!strcmp(k, "object_meta")) {
		if (cli_parse_object_meta(v, &a->fs.object_meta) == 0)
			return 0;
	} else if (!strcmp(k, "commit_delay")) {
		return parse_num(k, v, 0, &a->commit_delay, NULL);
	} else if (!strcmp(k, "lease")) {
		if (parse_num(k, v, 10, NULL, &ul) < 0 || ul < 1)
			return -1;
		return a->eng.lease_s = (unsigned)ul, 0;
	} else if (!strcmp(k, "temp_patterns")) {
		/* commas separate mount options: patterns use ':' */
		if (cli_set_str(&a->temp_patterns, v) < 0)
			return -1;
		for (char *c = a->temp_patterns; *c; c++)
			if (*c == ':')
				*c = ',';
		a->eng.temp_patterns = a->temp_patterns;
		return 0;
	} else if (!strcmp(k, "complete")) {
		/* rules TRIGGER/REQUIRED separated by ':' (proto/complete.h) */
		vis_rules r = {0};
		char *err = NULL;
		int rc = vis_rules_parse(&r, v, &err);
		vis_rules_free(&r);
		if (rc < 0) {
			fprintf(stderr, "ckptfs: complete=%s: %s\n", v,
				err ? err : "out of memory");
			free(err);
			return -1;
		}
		if (cli_set_str(&a->complete, v) < 0)
			return -1;
		a->fs.complete = a->complete;
		return 0;
	} else if (!strcmp(k, "upload_part_size")) {
		/* S3: parts of 5 MiB to 5 GiB (doc/scale.md: the per-prefix
		 * request rate caps a save at rate x part size) */
		uint64_t n;
		if (parse_size(k, v, &n) == 0 && n >= (5u << 20) &&
		    n <= (5ull << 30))
			return a->eng.part_size = n, 0;
		fprintf(stderr, "ckptfs: upload_part_size must be 5M to 5G\n");
		return -1;
	} else if (!strcmp(k, "upload_conns")) {
		if (parse_num(k, v, 10, NULL, &ul) == 0 && ul >= 1 && ul <= 1024)
			return a->eng.conns = (unsigned)ul, 0;
		fprintf(stderr, "ckptfs: upload_conns must be 1 to 1024\n");
		return -1;
	} else if (!strcmp(k, "upload_hold")) {
		return parse_num(k, v, 0, &a->eng.upload_hold_s, NULL);
	} else if (!strcmp(k, "transient_limit")) {
		return set_transient_limit(k, v, &a->eng.transient_limit_s);
	} else if (!strcmp(k, "max_staged")) {
		return parse_size(k, v, &a->eng.max_staged);
	} else if (!strcmp(k, "metrics")) {
		struct sockaddr_storage ss;
		socklen_t len;
		char *err = NULL;
		if (exporter_parse_addr(v, &ss, &len, &err) == 0)
			return cli_set_str(&a->metrics, v);
		fprintf(stderr, "ckptfs: invalid value for mount option "
				"metrics: %s\n",
			err ? err : "out of memory");
		free(err);
		return -1;
	} else if (!strcmp(k, "log")) {
		a->log_set = true;
		if (!strcmp(v, "syslog"))
			return a->use_syslog = true, 0;
		if (!strcmp(v, "stderr"))
			return a->use_syslog = false, 0;
	}
	fprintf(stderr, "ckptfs: unknown mount option '%s%s%s'\n", k,
		v ? "=" : "", v ? v : "");
	return -1;
}

static int parse_args(mount_args *a, int argc, char **argv)
{
	static const struct option lo[] = {
		{"foreground", no_argument, NULL, 'f'},
		{"debug", no_argument, NULL, 'd'},
		{"help", no_argument, NULL, 'h'},
		CLI_S3_LONG_OPTS,
	};
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+fdho:", lo, NULL)) != -1 ||
	       optind < argc) {
		if (c == -1) { /* positional argument; options may follow */
			char **slot = !a->url ? &a->url
				      : !a->mountpoint ? &a->mountpoint
						       : NULL;
			if (!slot) {
				fprintf(stderr,
					"ckptfs: unexpected argument '%s'\n",
					argv[optind]);
				return -1;
			}
			*slot = strdup(argv[optind++]);
			continue;
		}
		switch (c) {
		case 'f':
			a->foreground = true;
			break;
		case 'd':
			a->debug = a->foreground = true;
			break;
		case 'h':
			mount_usage(stdout);
			exit(0);
		case 'o':
			if (cli_parse_opts(optarg, apply_opt, a) < 0)
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
