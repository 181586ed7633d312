/*
 * s3/probe: the mount-time checks of the server (probe.h).
 */
#include "s3/probe.h"

#include <stdlib.h>
#include <string.h>

#include "s3/listfold.h"
#include "s3/upload.h"
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

/* 1: the server drops deep common prefixes, 0: it does not, -1: unknown. */
static int probe_by_write(s3_client *c, const char *probe_dir)
{
	buf k = BUF_INIT;
	buf want = BUF_INIT;
	buf_printf(&k, "%sd/e/f", probe_dir);
	buf_printf(&want, "%sd/", probe_dir);
	s3_err e;
	char etag[S3_ETAG_MAX];
	http_upload body = http_upload_mem("", 0);
	int verdict = -1;
	if (s3_put_object(c, buf_cstr(&k), &body, NULL, etag, &e) < 0) {
		log_debug("listing probe: PUT %s: %s", buf_cstr(&k), e.msg);
		goto out;
	}
	s3_list_result r = {0};
	if (s3_list_page(c, probe_dir, "/", NULL, 10, &r, &e) < 0) {
		log_debug("listing probe: LIST %s: %s", probe_dir, e.msg);
	} else {
		verdict = 1;
		for (size_t i = 0; i < r.n_prefixes; i++)
			if (!strcmp(r.prefixes[i], buf_cstr(&want)))
				verdict = 0;
		s3_list_result_free(&r);
	}
	if (s3_delete_object(c, buf_cstr(&k), &e) < 0)
		log_warn("listing probe: cannot delete %s: %s", buf_cstr(&k),
			 e.msg);
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
	if (s3_list_page(c, prefix, NULL, NULL, 1000, &flat, &e) < 0 ||
	    s3_list_page(c, prefix, "/", NULL, 1000, &delim, &e) < 0) {
		log_debug("listing probe: LIST %s: %s", prefix, e.msg);
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
