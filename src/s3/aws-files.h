/*
 * s3/aws-files.c: the AWS config and credentials files, and the small
 * helpers of the module's files (messages, environment), for config.c
 * (bucket URL, settings) and the credential files (creds-local.c reads
 * profiles).  Not part of the module's interface: include it from
 * src/s3/aws-files.c, src/s3/config.c and src/s3/creds*.c only.
 *
 * An aws_profile holds what one profile's section of an AWS file says,
 * each value with the line it came from (for messages that name file and
 * line without quoting it).  Secret values in it are wiped when freed.
 */
#ifndef CKPTFS_S3_AWS_FILES_H
#define CKPTFS_S3_AWS_FILES_H

#include <stdbool.h>
#include <stddef.h>

typedef struct cfg_val {
	char *v; /* NULL: not set */
	int line;
} cfg_val;

/* What one profile says, from either file. */
typedef struct aws_profile {
	bool found; /* a section for the profile exists */
	cfg_val region, endpoint_url, ca_bundle;
	cfg_val s3_endpoint_url, s3_addressing;
	cfg_val access_key, secret_key, session_token;
	/* assume-role, web identity and credential_process (creds-*.c) */
	cfg_val role_arn, source_profile, credential_source;
	cfg_val role_session_name, external_id, duration_seconds, mfa_serial;
	cfg_val web_identity_token_file, credential_process;
	cfg_val sts_endpoint_url; /* "sts =" subsection's endpoint_url */
	cfg_val imds_v1_disabled; /* ec2_metadata_v1_disabled */
} aws_profile;

typedef struct key_slot {
	const char *name;
	size_t off; /* of a cfg_val in aws_profile */
} key_slot;

/* Which profile section a file uses: "[profile NAME]" or "[NAME]". */
typedef struct file_kind {
	bool (*match)(const char *section, const char *profile);
	const key_slot *keys;
	bool nested; /* "s3 =" subsections are understood */
} file_kind;

/* Sets *err to a malloc'd message (NULL if even that fails); returns -1. */
int s3cfg_fail(char **err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

int s3cfg_fail_oom(char **err);

/* An unset and an empty variable mean the same, as for the AWS CLI. */
const char *s3cfg_env_get(const char *name);

/* inih's notion of white space (isspace in the C locale). */
bool s3cfg_is_space(char c);

/* "~/x" -> "$HOME/x"; without a home the path is kept (and not found).
 * NULL only when out of memory. */
char *s3cfg_expand_home(const char *p);

/* Wipes and frees a secret string (NULL is fine). */
void s3cfg_secret_free(char *s);

void aws_profile_free(aws_profile *p);

/* ~/.aws/config ("[profile NAME]", "s3 =" subsections) and
 * ~/.aws/credentials ("[NAME]"). */
extern const file_kind aws_config_kind;
extern const file_kind aws_creds_kind;

/*
 * Collects what profile's section(s) of the file at path say into *out
 * (zeroed first).  A missing file is an empty one.  Returns 0, or -1 with
 * *err naming the file and line.
 */
int aws_file_parse(const char *path, const file_kind *kind, const char *profile,
		   aws_profile *out, char **err);

/* The file named by $env, else ~/.aws/leaf.  NULL only when out of memory. */
char *aws_file_path(const char *env, const char *leaf);

#endif
