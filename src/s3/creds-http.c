/*
 * creds-http: one blocking HTTP request for a credential provider (IMDS,
 * container endpoint, STS) with a connect deadline and a total deadline.
 *
 * Providers run on the chain's refresh thread or, once, on the thread that
 * mounts; they need a plain request-reply, not the S3 client's curl multi
 * loop with its retries, so this is curl's easy interface.  No proxy is
 * used for link-local and loopback endpoints (curl honours NO_PROXY; we
 * set CURLOPT_NOPROXY "*" for http:// since metadata services are never
 * reached through a proxy).  Reply bodies are capped at CREDHTTP_MAX:
 * credential documents are small, and a server that sends more is
 * broken.  Messages name the URL and what went wrong, never a header.
 */
#include "s3/creds-http.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "s3/aws-files.h"

#define CREDHTTP_MAX (64 * 1024)

typedef struct sink {
	buf *b;
	bool too_big;
} sink;

static size_t on_body(char *p, size_t size, size_t n, void *u)
{
	sink *s = u;
	size_t len = size * n;
	if (s->b->len + len > CREDHTTP_MAX) {
		s->too_big = true;
		return 0;
	}
	return buf_append(s->b, p, len) == 0 ? len : 0;
}

static struct curl_slist *headers_of(const credhttp_req *r, bool *oom)
{
	struct curl_slist *l = NULL;
	for (const char *const *h = r->headers; h && *h; h++) {
		struct curl_slist *n = curl_slist_append(l, *h);
		if (!n) {
			*oom = true;
			break;
		}
		l = n;
	}
	/* curl would add "Expect: 100-continue" and a form Content-Type */
	struct curl_slist *n = curl_slist_append(l, "Expect:");
	if (n)
		l = n;
	return l;
}

static void setup(CURL *c, const credhttp_req *r, struct curl_slist *hl,
		  sink *s, char *errbuf)
{
	curl_easy_setopt(c, CURLOPT_URL, r->url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, r->connect_ms);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, r->total_ms);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, s);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
	if (strncasecmp(r->url, "http://", 7) == 0)
		curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	if (r->ca_bundle)
		curl_easy_setopt(c, CURLOPT_CAINFO, r->ca_bundle);
	if (strcmp(r->method, "GET") == 0)
		return;
	if (strcmp(r->method, "POST") == 0)
		curl_easy_setopt(c, CURLOPT_POST, 1L);
	else
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r->method);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, r->body ? r->body : "");
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
			 (curl_off_t)(r->body ? r->body_len : 0));
}

int credhttp_perform(const credhttp_req *r, credhttp_resp *resp, char **err)
{
	memset(resp, 0, sizeof(*resp));
	CURL *c = curl_easy_init();
	if (!c)
		return s3cfg_fail_oom(err);
	bool oom = false;
	struct curl_slist *hl = headers_of(r, &oom);
	sink s = {&resp->body, false};
	char errbuf[CURL_ERROR_SIZE] = "";
	setup(c, r, hl, &s, errbuf);
	CURLcode cc = oom ? CURLE_OUT_OF_MEMORY : curl_easy_perform(c);
	double ct = 0;
	curl_easy_getinfo(c, CURLINFO_CONNECT_TIME, &ct);
	resp->connected = ct > 0;
	int rc = 0;
	const char *what = r->label ? r->label : r->url;
	if (s.too_big) {
		rc = s3cfg_fail(err, "%s %s: the reply is larger than %d bytes",
				r->method, what, CREDHTTP_MAX);
	} else if (cc == CURLE_OPERATION_TIMEDOUT) {
		resp->timed_out = true;
		rc = s3cfg_fail(err, "%s %s: no reply within %ld ms", r->method,
				what, r->total_ms);
	} else if (cc != CURLE_OK) {
		rc = s3cfg_fail(err, "%s %s: %s", r->method, what,
				errbuf[0] ? errbuf : curl_easy_strerror(cc));
	} else {
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
	}
	if (rc < 0) {
		if (resp->body.data)
			explicit_bzero(resp->body.data, resp->body.len);
		buf_free(&resp->body);
	}
	curl_slist_free_all(hl);
	curl_easy_cleanup(c);
	return rc;
}
