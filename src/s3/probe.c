/*
 * s3/probe: the mount-time checks of the server (probe.h).
 */
#include "s3/probe.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3/listfold.h"
#include "s3/xml.h"
#include "util/buf.h"
#include "util/log.h"

int s3_parse_listing_mode(const char *v, s3_listing_mode *out)
{
	if (!strcmp(v, "auto"))
		*out = S3_LISTING_AUTO;
	else if (!strcmp(v, "delimiter"))
		*out = S3_LISTING_DELIMITER;
	else if (!strcmp(v, "flat"))
		*out = S3_LISTING_FLAT;
	else
		return -1;
	return 0;
}

/* The probe's requests are bounded like the bucket check's: a slow or
 * failing server delays the mount by at most PROBE_BUDGET_MS per request,
 * and then the mount goes on without a verdict. */
#define PROBE_ATTEMPTS 3
#define PROBE_TIMEOUT_MS 10000
#define PROBE_BUDGET_MS 15000

static int probe_request(s3_client *c, s3_request *r, http_xfer *x, s3_err *e)
{
	r->timeout_ms = PROBE_TIMEOUT_MS;
	r->max_attempts = PROBE_ATTEMPTS;
	r->budget_ms = PROBE_BUDGET_MS;
	return s3_request_perform(c, r, x, NULL, e);
}

/* One page of ListObjectsV2 of prefix (delim NULL: none), bounded. */
static int probe_list(s3_client *c, const char *prefix, const char *delim,
		      unsigned max_keys, s3_list_result *out, s3_err *e)
{
	const s3_request lim = {.timeout_ms = PROBE_TIMEOUT_MS,
				.max_attempts = PROBE_ATTEMPTS,
				.budget_ms = PROBE_BUDGET_MS};
	return s3_list_page_bounded(c, &lim, prefix, delim, NULL, max_keys,
				    out, e);
}

static int probe_object(s3_client *c, const char *method, const char *key,
			s3_err *e)
{
	s3_request r = {.op = method, .method = method, .key = key};
	if (!strcmp(method, "PUT")) {
		r.upload = http_upload_mem("", 0);
		s3_request_header(&r, "content-type",
				  "application/octet-stream");
	}
	http_xfer x = {0};
	int rc = probe_request(c, &r, &x, e);
	http_xfer_free(&x);
	return rc;
}

/* 1: the server drops deep common prefixes, 0: it does not, -1: unknown. */
static int probe_by_write(s3_client *c, const char *probe_dir)
{
	buf k = BUF_INIT;
	buf want = BUF_INIT;
	buf_printf(&k, "%sd/e/f", probe_dir);
	buf_printf(&want, "%sd/", probe_dir);
	s3_err e;
	int verdict = -1;
	if (probe_object(c, "PUT", buf_cstr(&k), &e) < 0) {
		log_debug("listing probe: %s", e.msg);
		goto out;
	}
	s3_list_result r = {0};
	if (probe_list(c, probe_dir, "/", 10, &r, &e) < 0) {
		log_debug("listing probe: %s", e.msg);
	} else {
		verdict = 1;
		for (size_t i = 0; i < r.n_prefixes; i++)
			if (!strcmp(r.prefixes[i], buf_cstr(&want)))
				verdict = 0;
		s3_list_result_free(&r);
	}
	if (probe_object(c, "DELETE", buf_cstr(&k), &e) < 0)
		log_warn("listing probe: cannot delete %s: %s (a hidden name; "
			 "remove it by hand)",
			 buf_cstr(&k), e.msg);
out:
	buf_free(&k);
	buf_free(&want);
	return verdict;
}

static int probe_by_reading(s3_client *c, const char *prefix)
{
	s3_list_result flat = {0}, delim = {0};
	s3_err e;
	int verdict = -1;
	if (probe_list(c, prefix, NULL, 1000, &flat, &e) < 0 ||
	    probe_list(c, prefix, "/", 1000, &delim, &e) < 0) {
		log_debug("listing probe: %s", e.msg);
	} else {
		char *ex = NULL;
		verdict = s3_fold_check(prefix, "/", &flat, &delim, &ex);
		if (verdict == 1)
			log_debug("listing probe: %s missing from the "
				  "delimiter listing of '%s'",
				  ex ? ex : "a prefix", prefix);
		free(ex);
	}
	s3_list_result_free(&flat);
	s3_list_result_free(&delim);
	return verdict;
}

bool s3_probe_listing(s3_client *c, s3_listing_mode mode, const char *prefix,
		      const char *probe_dir)
{
	if (mode == S3_LISTING_DELIMITER) {
		log_debug("listing=delimiter: no listing probe");
		return false;
	}
	if (mode == S3_LISTING_FLAT) {
		s3_client_add_quirks(c, S3_QUIRK_FLAT_LISTING);
		log_info("listing=flat: directories are listed without a "
			 "delimiter and folded here");
		return true;
	}
	int v = probe_dir ? probe_by_write(c, probe_dir) : -1;
	if (v < 0)
		v = probe_by_reading(c, prefix);
	if (v < 0) {
		/* no evidence yet: flat until a listing shows some */
		s3_client_add_quirks(c, S3_QUIRK_LISTING_UNSURE);
		log_debug("listing probe: no verdict yet; listing without a "
			  "delimiter until a listing can tell");
		return true;
	}
	s3_client_listing(c, v == 1);
	return v == 1;
}
