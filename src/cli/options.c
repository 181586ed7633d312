/*
 * cli options: the one -o list parser of the subcommands (see options.h).
 */
#include "cli/options.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_parse_opts(const char *list, cli_opt_fn apply, void *arg)
{
	char *copy = strdup(list);
	int rc = copy ? 0 : -1;
	char *save = NULL;
	for (char *tok = copy ? strtok_r(copy, ",", &save) : NULL; tok && !rc;
	     tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		if (eq)
			*eq++ = '\0';
		rc = apply(arg, tok, eq);
	}
	free(copy);
	return rc;
}

int cli_set_str(char **dst, const char *v)
{
	free(*dst);
	*dst = strdup(v);
	return *dst ? 0 : -1;
}

int cli_parse_object_meta(const char *v, fs_object_meta *out)
{
	if (!v)
		return -1;
	if (!strcmp(v, "auto"))
		*out = FS_META_AUTO;
	else if (!strcmp(v, "on"))
		*out = FS_META_ON;
	else if (!strcmp(v, "off"))
		*out = FS_META_OFF;
	else
		return -1;
	return 0;
}

int cli_parse_addressing(const char *v, s3_addressing *out)
{
	if (!strcmp(v, "auto"))
		*out = S3_ADDR_AUTO;
	else if (!strcmp(v, "path"))
		*out = S3_ADDR_PATH;
	else if (!strcmp(v, "virtual"))
		*out = S3_ADDR_VIRTUAL;
	else
		return -1;
	return 0;
}

int cli_s3_opt(const char *cmd, s3_settings *s, bool *insecure,
	       const char *k, const char *v)
{
	if (!v && !strcmp(k, "insecure"))
		return *insecure = true, 0;
	if (v && !strcmp(k, "endpoint"))
		return cli_set_str(&s->endpoint, v);
	if (v && !strcmp(k, "region"))
		return cli_set_str(&s->region, v);
	if (v && !strcmp(k, "profile"))
		return cli_set_str(&s->profile, v);
	if (v && !strcmp(k, "ca_bundle"))
		return cli_set_str(&s->ca_bundle, v);
	if (v && !strcmp(k, "addressing") &&
	    cli_parse_addressing(v, &s->addressing) == 0)
		return 0;
	fprintf(stderr, "ckptfs: %s: unknown option '%s%s%s'\n", cmd, k,
		v ? "=" : "", v ? v : "");
	return -1;
}

struct s3_opt_ctx {
	const char *cmd;
	s3_settings *s;
	bool *insecure;
};

/* One -o item (cli_opt_fn over s3_opt_ctx). */
static int s3_opt_item(void *arg, const char *k, const char *v)
{
	struct s3_opt_ctx *x = arg;
	return cli_s3_opt(x->cmd, x->s, x->insecure, k, v);
}

int cli_s3_arg(const char *cmd, s3_settings *s, bool *insecure, int c,
	       const char *v, const char *word)
{
	if (c == 'o') {
		struct s3_opt_ctx x = {cmd, s, insecure};
		return cli_parse_opts(v, s3_opt_item, &x) < 0 ? -1 : 0;
	}
	if (cli_s3_long_opt(c, v, &s->endpoint, &s->region, &s->profile))
		return 0;
	fprintf(stderr, "ckptfs: %s: unknown or incomplete option '%s'\n", cmd,
		word);
	return -1;
}

bool cli_s3_long_opt(int c, const char *v, char **endpoint, char **region,
		     char **profile)
{
	char **dst = c == CLI_OPT_ENDPOINT ? endpoint
		     : c == CLI_OPT_REGION ? region
		     : c == CLI_OPT_PROFILE ? profile
					    : NULL;
	if (dst)
		cli_set_str(dst, v);
	return dst != NULL;
}

/*
 * Numbers of -o values.  strtod and strtoull alone accept far too much
 * ("nan", "inf", " 5", "-1" wrapped to 2^64-1, "1e400" as HUGE_VAL): each
 * parser below takes the whole string or nothing, so a typo is refused
 * instead of mounting with a value nobody meant.
 */
static bool starts_like_a_number(const char *v, bool sign_ok)
{
	return (*v >= '0' && *v <= '9') || (*v == '.' && v[1] >= '0' &&
					    v[1] <= '9') ||
	       (sign_ok && *v == '+' && starts_like_a_number(v + 1, false));
}

int cli_parse_double(const char *v, double *out)
{
	char *end;
	if (!v || !starts_like_a_number(v, true))
		return -1; /* "", "-1", "nan", "inf", " 5" */
	errno = 0;
	double d = strtod(v, &end);
	if (*end || errno == ERANGE || !isfinite(d))
		return -1;
	*out = d;
	return 0;
}

int cli_parse_uint(const char *v, int base, uint64_t *out)
{
	char *end;
	if (!v || !(*v >= '0' && *v <= '9'))
		return -1; /* strtoull would wrap "-1" to 2^64-1 */
	errno = 0;
	unsigned long long n = strtoull(v, &end, base);
	if (*end || errno == ERANGE)
		return -1;
	*out = n;
	return 0;
}

/* Powers of 1024 of the size suffixes, K to E. */
static double unit_of(char c)
{
	static const char units[] = "KMGTPE";
	char up = (char)(c & ~0x20); /* 'k' as 'K'; strchr would find '\0' */
	const char *u = up ? strchr(units, up) : NULL;
	double mul = 1;
	for (const char *p = units; u && p <= u; p++)
		mul *= 1024.0;
	return mul;
}

/* The unit after a number: K to E, then an optional "iB" or "B". */
static const char *skip_unit(const char *end, double *mul)
{
	*mul = unit_of(*end);
	if (*mul > 1) /* 10G, 10GB, 10GiB */
		end += 1 + (end[1] == 'i' && end[2] == 'B');
	return end + (*end == 'B');
}

/* "1.5G", "1e3": a fraction or an exponent goes through a double. */
static bool needs_double(const char *end)
{
	return *end == '.' || ((*end == 'e' || *end == 'E') &&
			       (isdigit((unsigned char)end[1]) ||
				((end[1] == '-' || end[1] == '+') &&
				 isdigit((unsigned char)end[2]))));
}

int cli_parse_size(const char *v, uint64_t *out)
{
	char *end;
	double mul;
	if (!v || !starts_like_a_number(v, true))
		return -1;
	errno = 0;
	unsigned long long n = strtoull(v, &end, 10);
	if (!needs_double(end)) { /* whole bytes stay exact up to 2^64-1 */
		const char *rest = skip_unit(end, &mul);
		if (*rest || errno == ERANGE || end == v ||
		    (double)n * mul >= 18446744073709551616.0)
			return -1;
		*out = n * (uint64_t)mul;
		return 0;
	}
	double d = strtod(v, &end);
	const char *rest = skip_unit(end, &mul);
	d *= mul;
	/* 2^64 is the first double above every uint64_t */
	if (*rest || errno == ERANGE || !isfinite(d) ||
	    d >= 18446744073709551616.0)
		return -1;
	*out = (uint64_t)d;
	return 0;
}

int cli_getopt(int argc, char **argv, const char *shortopts,
	       const struct option *lo, const char **operand)
{
	int c = getopt_long(argc, argv, shortopts, lo, NULL);
	if (c != -1)
		return c;
	if (optind >= argc)
		return -1;
	*operand = argv[optind++];
	return CLI_OPERAND;
}

int cli_take_operand(const char *cmd, char **const *slots, size_t n,
		     const char *operand)
{
	for (size_t i = 0; i < n; i++) {
		if (*slots[i])
			continue;
		*slots[i] = strdup(operand);
		return 0;
	}
	fprintf(stderr, "ckptfs: %s%sunexpected argument '%s'\n",
		cmd ? cmd : "", cmd ? ": " : "", operand);
	return -1;
}
