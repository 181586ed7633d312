/*
 * cli options: the one -o list parser of the subcommands (see options.h).
 */
#include "cli/options.h"

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
