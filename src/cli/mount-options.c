/*
 * cli mount options: the table (see mount-options.h) and the code that
 * reads it.  Rows are grouped as `ckptfs mount --help` shows them.
 */
#include "cli/mount-options.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/options.h"
#include "daemon/exporter.h"
#include "proto/complete.h"

#define OFF(f) offsetof(mount_args, f)
#define KiB 1024.0
#define MiB (1024.0 * KiB)
#define GiB (1024.0 * MiB)
#define EiB (GiB * GiB)
#define DAY 86400.0
/* sizes without a natural cap: far above any disk, far below 2^64 */
#define SIZE_MAX_OPT (4 * EiB)

#define FLAG(n, f, val, h)                                                  \
	{.name = n, .kind = MO_FLAG, .help = h, .type = MT_BOOL,            \
	 .off = OFF(f), .flag = val}
#define IGNORED(n)                                                          \
	{.name = n, .kind = MO_IGNORED,                                     \
	 .help = "accepted from mount(8) and fstab; no effect"}
#define STR(n, a, f, d, h)                                                  \
	{.name = n, .kind = MO_STRING, .arg = a, .def = d, .help = h,       \
	 .type = MT_STR, .off = OFF(f)}
#define SECS(n, t, f, lo, hi, fl, d, h)                                     \
	{.name = n, .kind = MO_SECONDS, .arg = "SECONDS", .min = lo,        \
	 .max = hi, .flags = fl, .def = d, .help = h, .type = t,            \
	 .off = OFF(f)}
#define INT(n, a, t, f, lo, hi, fl, d, h)                                   \
	{.name = n, .kind = MO_INTEGER, .arg = a, .min = lo, .max = hi,     \
	 .flags = fl, .def = d, .help = h, .type = t, .off = OFF(f)}
#define SIZE(n, t, f, lo, hi, d, h)                                         \
	{.name = n, .kind = MO_SIZE, .arg = "SIZE", .min = lo, .max = hi,   \
	 .def = d, .help = h, .type = t, .off = OFF(f)}
#define ENUM(n, a, t, f, c, d, h)                                           \
	{.name = n, .kind = MO_ENUM, .arg = a, .def = d, .help = h,         \
	 .type = t, .off = OFF(f), .choices = c}
#define CUSTOM(n, a, fn, c, d, h)                                           \
	{.name = n, .kind = MO_CUSTOM, .arg = a, .def = d, .help = h,       \
	 .choices = c, .set = fn}

/* MT_ENUM rows store an int: every enum they point at must be one. */
_Static_assert(sizeof(s3_addressing) == sizeof(int), "enum size");
_Static_assert(sizeof(s3_listing_mode) == sizeof(int), "enum size");
_Static_assert(sizeof(fs_object_meta) == sizeof(int), "enum size");

static const mopt_choice addressing_c[] = {
	{"auto", S3_ADDR_AUTO}, {"path", S3_ADDR_PATH},
	{"virtual", S3_ADDR_VIRTUAL}, {NULL, 0},
};
static const mopt_choice listing_c[] = {
	{"auto", S3_LISTING_AUTO}, {"delimiter", S3_LISTING_DELIMITER},
	{"flat", S3_LISTING_FLAT}, {NULL, 0},
};
static const mopt_choice object_meta_c[] = {
	{"auto", FS_META_AUTO}, {"on", FS_META_ON}, {"off", FS_META_OFF},
	{NULL, 0},
};
/* "1" and "0" as well: what cache_verify= took before it was checked */
static const mopt_choice on_off_c[] = {
	{"on", 1}, {"off", 0}, {"1", 1}, {"0", 0}, {NULL, 0},
};
static const mopt_choice log_c[] = {
	{"stderr", 0}, {"syslog", 1}, {NULL, 0},
};

static const mopt_choice *choice_of(const mopt_choice *c, const char *v)
{
	for (; c && c->name; c++)
		if (!strcmp(c->name, v))
			return c;
	return NULL;
}

/* log=: use_syslog, and log_set so the daemon knows it was asked for. */
static int set_log(mount_args *a, const char *v, char **why)
{
	(void)why;
	const mopt_choice *c = choice_of(log_c, v);
	if (!c)
		return -1;
	a->use_syslog = c->value;
	a->log_set = true;
	return 0;
}

/* Commas separate mount options, so the patterns are ':'-separated here
 * and turned into the engine's ','-separated list; "none": no pattern. */
static int set_temp_patterns(mount_args *a, const char *v, char **why)
{
	(void)why;
	if (!*v)
		return -1;
	if (cli_set_str(&a->temp_patterns, strcmp(v, "none") ? v : "") < 0)
		return -2;
	for (char *c = a->temp_patterns; *c; c++)
		if (*c == ':')
			*c = ',';
	a->eng.temp_patterns = a->temp_patterns;
	return 0;
}

/* Rules TRIGGER/REQUIRED separated by ':' (proto/complete.h), checked
 * here so a bad rule fails the mount, kept as text for fs. */
static int set_complete(mount_args *a, const char *v, char **why)
{
	vis_rules r = {0};
	if (!*v)
		return -1; /* "none" says it; an empty value is a slip */
	int rc = vis_rules_parse(&r, v, why);
	vis_rules_free(&r);
	if (rc < 0)
		return *why ? -1 : -2;
	if (cli_set_str(&a->complete, v) < 0)
		return -2;
	a->fs.complete = a->complete;
	return 0;
}

static int set_metrics(mount_args *a, const char *v, char **why)
{
	struct sockaddr_storage ss;
	socklen_t len;
	if (exporter_parse_addr(v, &ss, &len, why) < 0)
		return *why ? -1 : -2;
	return cli_set_str(&a->metrics, v) < 0 ? -2 : 0;
}

const mount_opt mount_opts[] = {
	/* where and how to connect */
	STR("endpoint", "URL", endpoint, "AWS config, else AWS",
	    "S3 endpoint"),
	STR("region", "REGION", region, "AWS config, else us-east-1",
	    "signing region"),
	STR("profile", "NAME", profile, "AWS_PROFILE, else default",
	    "AWS profile for credentials and config"),
	STR("ca_bundle", "PATH", ca_bundle, "AWS config, else the system's",
	    "CA certificates for https"),
	ENUM("addressing", "auto|path|virtual", MT_ENUM, addressing,
	     addressing_c, "auto", "URL style (auto: virtual on AWS)"),
	ENUM("listing", "auto|delimiter|flat", MT_ENUM, listing, listing_c,
	     "auto", "directory listings (flat: without a delimiter)"),
	FLAG("insecure", insecure, true, "skip TLS verification (tests only)"),
	/* what files look like */
	FLAG("allow_other", allow_other, true, "let every user of the host in"),
	INT("uid", "N", MT_UID, fs.uid, 0, 4294967294.0, 0, "the mounting user",
	    "owner shown for every file"),
	INT("gid", "N", MT_GID, fs.gid, 0, 4294967294.0, 0,
	    "the mounting group", "group shown for every file"),
	INT("umask", "OCTAL", MT_MODE, fs.umask, 0, 0777, MOF_OCTAL, "022",
	    "permission bits taken from every file"),
	FLAG("nonempty", nonempty, true, "mount over a non-empty directory"),
	SECS("entry_timeout", MT_DOUBLE, fs.entry_timeout, 0, DAY, 0, "1",
	     "seconds the kernel keeps names"),
	SECS("attr_timeout", MT_DOUBLE, fs.attr_timeout, 0, DAY, 0, "1",
	     "seconds the kernel keeps attributes"),
	SECS("dir_timeout", MT_DOUBLE, fs.dir_timeout, 0, DAY, 0, "1",
	     "seconds a directory listing is reused"),
	ENUM("object_meta", "auto|on|off", MT_ENUM, fs.object_meta,
	     object_meta_c, "auto",
	     "read mode/owner/mtime of files outside manifests"),
	/* logs and metrics */
	CUSTOM("log", "stderr|syslog", set_log, log_c,
	       "stderr in the foreground, else syslog", "where logs go"),
	FLAG("debug", debug, true, "debug logging"),
	CUSTOM("metrics", "HOST:PORT", set_metrics, NULL, "off",
	       "Prometheus endpoint at /metrics (e.g. 127.0.0.1:9464)"),
	/* the read cache */
	STR("cache_dir", "DIR", cache_dir,
	    "/var/cache/ckptfs for root, else ~/.cache/ckptfs",
	    "cache directory (yours, not writable by others)"),
	SIZE("cache_size", MT_U64, cache.cap, 0, SIZE_MAX_OPT, "0",
	     "cap on cached bytes (0: no cap)"),
	SIZE("cache_min_free", MT_U64, cache.min_free, 0, SIZE_MAX_OPT, "1G",
	     "free disk the cache keeps"),
	SIZE("part_size", MT_U32, cache.chunk_size, 64 * KiB, GiB, "8M",
	     "download part size"),
	INT("conns_per_file", "N", MT_UNSIGNED, cache.per_file_conns, 1, 256,
	    0, "8", "parallel GETs per file"),
	INT("conns", "N", MT_UNSIGNED, cache.global_conns, 1, 1024, 0, "16",
	    "parallel GETs in all"),
	ENUM("cache_verify", "on|off", MT_BOOL, cache.verify, on_off_c, "on",
	     "CRC-check cached chunks"),
	SIZE("dir_readahead", MT_U64, fs.dir_readahead, 0, SIZE_MAX_OPT,
	     "256M", "read the next files of a directory this far (0: off)"),
	FLAG("no_passthrough", fs.passthrough, false,
	     "no kernel passthrough: reads and writes through FUSE"),
	/* writes */
	FLAG("ro", read_only, true, "no writes: EROFS"),
	FLAG("rw", read_only, false, "writes (the default)"),
	SECS("commit_delay", MT_DOUBLE, commit_delay, 0, DAY, 0, "5",
	     "idle seconds before a directory commits"),
	INT("lease", "SECONDS", MT_UNSIGNED, eng.lease_s, 1, DAY, MOF_SECONDS,
	    "60", "lease of pending markers"),
	CUSTOM("temp_patterns", "P:P...", set_temp_patterns, NULL,
	       "*tmp*:*.tempstate*:*_temp:_checkpoint:*.__lock",
	       "names uploaded only once renamed (none: no pattern)"),
	CUSTOM("complete", "TRIGGER/REQUIRED:...", set_complete, NULL,
	       "*.distcp/.metadata",
	       "a dir with TRIGGER shows empty until REQUIRED (none: no rule)"),
	SIZE("upload_part_size", MT_U64, eng.part_size, 5 * MiB, 5 * GiB, "8M",
	     "multipart part size (files from 16M go multipart)"),
	INT("upload_conns", "N", MT_UNSIGNED, eng.conns, 1, 1024, 0, "16",
	    "parallel uploads"),
	SECS("upload_hold", MT_DOUBLE, eng.upload_hold_s, 0, DAY, 0, "10",
	     "longest a closed file waits while the application writes"),
	SIZE("max_staged", MT_U64, eng.max_staged, 0, SIZE_MAX_OPT, "0",
	     "staged bytes not yet uploaded before writers wait (0: none)"),
	SECS("transient_limit", MT_DOUBLE, eng.transient_limit_s, 0, 7 * DAY,
	     MOF_ABOVE_MIN, "180",
	     "seconds of transient errors before a step is reported failed"),
	/* requests (s3/retry.h) */
	SECS("first_byte_timeout", MT_MS, retry.first_byte_ms, 0, DAY, 0, "2",
	     "longest wait for a reply once a request is sent (0: none)"),
	SECS("low_speed_time", MT_MS, retry.low_speed_ms, 0, DAY, 0, "5",
	     "a transfer under low_speed_limit this long is abandoned"),
	SIZE("low_speed_limit", MT_UNSIGNED, retry.low_speed_bytes, 0,
	     4294967295.0, "1", "bytes per second under which it is slow"),
	SECS("retry_max_delay", MT_MS, retry.max_ms, 0, DAY, 0, "5",
	     "longest pause between retries"),
	SECS("retry_timeout", MT_MS, retry.budget_ms, 0, DAY, 0, "60",
	     "no retry of a request after this long (reads fail: EIO)"),
	/* what mount(8) and fstab pass along */
	IGNORED("default_permissions"), /* always on */
	IGNORED("dev"), IGNORED("nodev"), IGNORED("suid"), IGNORED("nosuid"),
	IGNORED("exec"), IGNORED("noexec"), IGNORED("auto"),
	IGNORED("noauto"), IGNORED("user"), IGNORED("nouser"),
	IGNORED("users"), IGNORED("_netdev"), IGNORED("defaults"),
	IGNORED("async"), IGNORED("atime"), IGNORED("noatime"),
	IGNORED("relatime"),
};
const size_t mount_opts_count = sizeof mount_opts / sizeof mount_opts[0];

const mount_opt *mount_opt_find(const char *name)
{
	for (size_t i = 0; i < mount_opts_count; i++)
		if (!strcmp(mount_opts[i].name, name))
			return &mount_opts[i];
	return NULL;
}

/* ---- describing ------------------------------------------------------ */

/* 65536 as "64K", 2^30 as "1G": the largest unit that divides it. */
static void fmt_size(double v, char *out, size_t n)
{
	static const char units[] = "KMGTPE";
	uint64_t b = (uint64_t)v;
	int u = -1;
	while (u < 5 && b && b % 1024 == 0) {
		b /= 1024;
		u++;
	}
	snprintf(out, n, "%llu%.*s", (unsigned long long)b, u >= 0 ? 1 : 0,
		 u >= 0 ? &units[u] : "");
}

static void fmt_num(const mount_opt *o, double v, char *out, size_t n)
{
	if (o->kind == MO_SIZE)
		fmt_size(v, out, n);
	else if (o->flags & MOF_OCTAL)
		snprintf(out, n, "%o", (unsigned)v);
	else
		snprintf(out, n, "%.15g", v);
}

static void fmt_choices(const mopt_choice *c, char *out, size_t n)
{
	size_t len = 0;
	out[0] = '\0';
	for (; c->name && len < n; c++) {
		int w = snprintf(out + len, n - len, "%s%s", len ? ", " : "",
				 c->name);
		len += w > 0 ? (size_t)w : 0;
	}
}

void mount_opt_describe(const mount_opt *o, char *out, size_t n)
{
	char lo[32], hi[32];
	fmt_num(o, o->min, lo, sizeof lo);
	fmt_num(o, o->max, hi, sizeof hi);
	const char *what = o->kind == MO_SECONDS ? "a number of seconds"
			   : o->flags & MOF_SECONDS ? "a whole number of seconds"
			   : o->flags & MOF_OCTAL   ? "an octal number"
						    : "a whole number";
	if (o->choices) {
		char c[128];
		fmt_choices(o->choices, c, sizeof c);
		snprintf(out, n, "one of %s", c);
	} else if (o->kind == MO_FLAG || o->kind == MO_IGNORED)
		snprintf(out, n, "given without a value");
	else if (o->kind == MO_STRING || o->kind == MO_CUSTOM)
		snprintf(out, n, "a non-empty %s", o->arg);
	else if (o->kind == MO_SIZE)
		snprintf(out, n, "a size from %s to %s (bytes, or a number "
				 "with K, M, G, T, P or E: powers of 1024)",
			 lo, hi);
	else if (o->flags & MOF_ABOVE_MIN)
		snprintf(out, n, "%s above %s, at most %s", what, lo, hi);
	else
		snprintf(out, n, "%s from %s to %s", what, lo, hi);
}

/* ---- parsing --------------------------------------------------------- */

static void *field(mount_args *a, const mount_opt *o)
{
	return (char *)a + o->off;
}

/* A number (seconds as d, whole numbers and sizes as n) into its field. */
static void store_number(mount_args *a, const mount_opt *o, double d,
			 uint64_t n)
{
	void *p = field(a, o);
	switch (o->type) {
	case MT_DOUBLE: *(double *)p = d; break;
	case MT_MS: *(unsigned *)p = (unsigned)(d * 1000 + 0.5); break;
	case MT_UNSIGNED: *(unsigned *)p = (unsigned)n; break;
	case MT_U32: *(uint32_t *)p = (uint32_t)n; break;
	case MT_U64: *(uint64_t *)p = n; break;
	case MT_UID: *(uid_t *)p = (uid_t)n; break;
	case MT_GID: *(gid_t *)p = (gid_t)n; break;
	case MT_MODE: *(mode_t *)p = (mode_t)n; break;
	default: break;
	}
}

static bool in_range(const mount_opt *o, double d, uint64_t n)
{
	if (o->kind == MO_SECONDS)
		return (o->flags & MOF_ABOVE_MIN ? d > o->min : d >= o->min) &&
		       d <= o->max;
	return n >= (uint64_t)o->min && n <= (uint64_t)o->max;
}

/* 0, -1 for a value o does not accept, -2 out of memory. */
static int parse_store(mount_args *a, const mount_opt *o, const char *v)
{
	double d = 0;
	uint64_t n = 0;
	int rc = 0;
	switch (o->kind) {
	case MO_STRING:
		if (!*v)
			return -1;
		return cli_set_str((char **)field(a, o), v) < 0 ? -2 : 0;
	case MO_ENUM: {
		const mopt_choice *c = choice_of(o->choices, v);
		if (!c)
			return -1;
		if (o->type == MT_BOOL)
			*(bool *)field(a, o) = c->value != 0;
		else
			*(int *)field(a, o) = c->value;
		return 0;
	}
	case MO_SECONDS: rc = cli_parse_double(v, &d); break;
	case MO_INTEGER:
		rc = cli_parse_uint(v, o->flags & MOF_OCTAL ? 8 : 10, &n);
		break;
	case MO_SIZE: rc = cli_parse_size(v, &n); break;
	default: return -1;
	}
	if (rc < 0 || !in_range(o, d, n))
		return -1;
	store_number(a, o, d, n);
	return 0;
}

static int refuse(const mount_opt *o, const char *v, const char *why)
{
	char d[256];
	mount_opt_describe(o, d, sizeof d);
	if (!v)
		fprintf(stderr, "ckptfs: mount option %s needs a value: %s\n",
			o->name, d);
	else if (o->kind == MO_FLAG || o->kind == MO_IGNORED)
		fprintf(stderr, "ckptfs: mount option %s takes no value (got "
				"%s=%s)\n",
			o->name, o->name, v);
	else if (why)
		fprintf(stderr, "ckptfs: invalid value for mount option %s=%s: "
				"%s\n",
			o->name, v, why);
	else
		fprintf(stderr, "ckptfs: invalid value for mount option %s=%s: "
				"must be %s\n",
			o->name, v, d);
	return -1;
}

int mount_opt_apply(void *args, const char *k, const char *v)
{
	mount_args *a = args;
	const mount_opt *o = mount_opt_find(k);
	if (!o) {
		fprintf(stderr, "ckptfs: unknown mount option '%s%s%s' (ckptfs "
				"mount --help lists them)\n",
			k, v ? "=" : "", v ? v : "");
		return -1;
	}
	if (o->kind == MO_FLAG || o->kind == MO_IGNORED) {
		if (v)
			return refuse(o, v, NULL);
		if (o->kind == MO_FLAG)
			*(bool *)field(a, o) = o->flag;
		return 0;
	}
	if (!v)
		return refuse(o, v, NULL);
	char *why = NULL;
	int rc = o->set ? o->set(a, v, &why) : parse_store(a, o, v);
	if (rc == -2)
		fprintf(stderr, "ckptfs: mount option %s: out of memory\n", k);
	else if (rc < 0)
		refuse(o, v, why);
	free(why);
	return rc < 0 ? -1 : 0;
}

/* ---- listing --------------------------------------------------------- */

static void help_line(FILE *f, const mount_opt *o)
{
	char left[64], range[96] = "";
	snprintf(left, sizeof left, "%s%s%s", o->name, o->arg ? "=" : "",
		 o->arg ? o->arg : "");
	if (o->kind == MO_SECONDS || o->kind == MO_INTEGER ||
	    o->kind == MO_SIZE) {
		char lo[32], hi[32];
		fmt_num(o, o->min, lo, sizeof lo);
		fmt_num(o, o->max, hi, sizeof hi);
		snprintf(range, sizeof range,
			 o->flags & MOF_ABOVE_MIN ? "; above %s, at most %s"
						  : "; %s to %s",
			 lo, hi);
	}
	fprintf(f, "      %-24s %s", left, o->help);
	if (o->def || range[0])
		fprintf(f, " (%s%s%s)", o->def ? "default " : "",
			o->def ? o->def : "", o->def ? range : range + 2);
	fputc('\n', f);
}

void mount_opts_help(FILE *f)
{
	int col = 0;
	for (size_t i = 0; i < mount_opts_count; i++)
		if (mount_opts[i].kind != MO_IGNORED)
			help_line(f, &mount_opts[i]);
	fprintf(f, "      accepted from mount(8) and fstab, no effect:\n       ");
	for (size_t i = 0; i < mount_opts_count; i++) {
		if (mount_opts[i].kind != MO_IGNORED)
			continue;
		if (col > 60) {
			fprintf(f, "\n       ");
			col = 0;
		}
		col += fprintf(f, " %s", mount_opts[i].name);
	}
	fputc('\n', f);
}

static const char *kind_name(const mount_opt *o)
{
	static const char *const names[] = {
		[MO_FLAG] = "flag",       [MO_IGNORED] = "ignored",
		[MO_STRING] = "string",   [MO_SECONDS] = "seconds",
		[MO_INTEGER] = "integer", [MO_SIZE] = "size",
		[MO_ENUM] = "enum",       [MO_CUSTOM] = "custom",
	};
	return o->flags & MOF_OCTAL ? "octal" : names[o->kind];
}

void mount_opts_list(FILE *f)
{
	for (size_t i = 0; i < mount_opts_count; i++) {
		const mount_opt *o = &mount_opts[i];
		bool ranged = o->kind == MO_SECONDS || o->kind == MO_INTEGER ||
			      o->kind == MO_SIZE;
		fprintf(f, "%s\t%s\t", o->name, kind_name(o));
		if (ranged)
			fprintf(f, "%.17g\t%.17g\t", o->min, o->max);
		else
			fputs("-\t-\t", f);
		for (const mopt_choice *c = o->choices; c && c->name; c++)
			fprintf(f, "%s%s", c == o->choices ? "" : "|", c->name);
		fprintf(f, "%s\t%s\n", o->choices ? "" : "-",
			o->flags & MOF_ABOVE_MIN ? "above_min" : "-");
	}
}
