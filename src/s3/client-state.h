/*
 * The s3_client object, shared by client.c (construction and the
 * operations) and request.c (the request loop and the retry accessors).
 * Types only: the functions are declared by client.h and request.h.  Not
 * part of the module's interface: include it from those two files only.
 */
#ifndef CKPTFS_S3_CLIENT_STATE_H
#define CKPTFS_S3_CLIENT_STATE_H

#include <pthread.h>
#include <stdint.h>

#include "http/loop.h"
#include "s3/config.h"
#include "s3/request.h"
#include "s3/retry.h"

struct s3_client {
	char *bucket;
	char *region;
	char *base_url;    /* scheme://host[:port] as used in URLs */
	char *host_header; /* what goes into Host: and is signed */
	char *path_prefix; /* "/bucket" (path-style) or "" (virtual-host) */
	const s3_settings *settings;
	creds_chain *creds;
	http_loop *loop;
	s3_client_opts o;
	pthread_mutex_t rng_mu; /* rng and lat */
	uint64_t rng;
	retry_lat lat; /* first-byte times of ordinary requests */
	_Atomic unsigned quirks;
};

#endif
