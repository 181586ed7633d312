/*
 * cli bucket: the S3 session of a subcommand that works on a bucket by
 * itself, without a mount (gc, verify s3://...): the URL and settings
 * resolved, credentials, the http loop and a client whose access to the
 * bucket was checked, and the messages when any of it fails (cli/cli.h).
 */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "http/loop.h"
#include "s3/client.h"

int cli_bucket_open(const char *cmd, const char *url, s3_settings *s,
		    bool insecure, cli_bucket *out)
{
	char *err = NULL;
	*out = (cli_bucket){0};
	if (s3_parse_url(url, &s->bucket, &s->prefix, &err) < 0 ||
	    s3_settings_resolve(s, &err) < 0) {
		fprintf(stderr, "ckptfs: %s: %s\n", cmd,
			err ? err : "out of memory");
		free(err);
		return -1;
	}
	s3_err e;
	int rc = s3_connect(s, insecure, NULL, &out->creds, &out->loop,
			    &out->c, &err, &e);
	if (rc == -2) {
		const char *hint = s3_access_hint(&e);
		fprintf(stderr, "ckptfs: %s: cannot reach s3://%s/%s at %s: "
				"%s%s%s\n",
			cmd, s->bucket, s->prefix, s->endpoint, hint,
			hint[0] ? ": " : "", e.msg);
		return -2;
	}
	if (rc < 0) {
		fprintf(stderr, "ckptfs: %s: %s\n", cmd,
			err ? err : "out of memory");
		free(err);
		return -2;
	}
	return 0;
}

void cli_bucket_close(cli_bucket *b)
{
	s3_client_free(b->c);
	http_loop_free(b->loop);
	creds_chain_free(b->creds);
	*b = (cli_bucket){0};
}
