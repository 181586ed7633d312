/*
 * s3 requests: construction, signing, error mapping and the retry loop,
 * under every operation of the client (client.c, upload.c, multipart.c),
 * declared in request.h; the s3_client they run on is in client-state.h.
 * Calls nothing of client.c.
 *
 * The on-wire path is the canonical path: keys are percent-encoded once with
 * '/' kept (S3 does not normalise), so what we sign is byte for byte what we
 * send.  The Host header is set explicitly to the value we sign rather than
 * left to curl, which may drop or add default ports differently.
 *
 * Retry loop (do_request_n, s3_request_perform): per attempt, fresh
 * credentials and timestamp, reset of the response sink, the attempt's
 * deadlines (retry.h: first byte, low speed, both doubling per attempt and
 * clipped to the request's budget), a fresh connection after a transport
 * failure, perform, classify.  Retryable failures sleep retry_backoff_ms
 * and go again until retry_again says stop; the last failure is what the
 * caller sees.  The asynchronous form (s3_request_prepare/
 * s3_request_classify) applies the same rules, keeping the attempt number
 * and start time in the http_xfer.  First-byte times of successful
 * ordinary requests feed the adaptive part of the deadline (retry_lat).
 * Errors become s3_err: HTTP status to errno, the S3 error code and
 * message from the reply's XML, or a default code for bodiless replies.
 * The retry accessors at the end (backoff, delays, server-work allowance,
 * quirks) let the callers that drive their own loops follow the policy.
 */
#include "s3/request.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "s3/client-state.h"
#include "s3/sigv4.h"
#include "s3/uri.h"
#include "s3/xml.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/metrics.h"

#define EMPTY_SHA256 \
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* ---- errors ----------------------------------------------------------- */

static int status_errno(long st)
{
	switch (st) {
	case 403:
		return EACCES;
	case 404:
		return ENOENT;
	case 412:
		return ESTALE;
	case 416:
		return EINVAL;
	default:
		return EIO;
	}
}

static const char *status_default_code(long st)
{
	switch (st) {
	case 403:
		return "AccessDenied";
	case 404:
		return "NotFound";
	case 412:
		return "PreconditionFailed";
	case 503:
		return "ServiceUnavailable";
	default:
		return "";
	}
}

static void target_url(s3_client *c, const s3_request *r, char *what,
		       size_t sz)
{
	snprintf(what, sz, "s3://%s/%s", c->bucket,
		 r->key ? r->key : r->what ? r->what : "");
}

static void err_from_xfer(s3_client *c, const s3_request *r,
			  const http_xfer *x, s3_err *e)
{
	memset(e, 0, sizeof *e);
	e->curl_code = x->curl_code;
	e->http_status = x->curl_code ? 0 : x->status;
	char what[300];
	target_url(c, r, what, sizeof what);
	if (x->curl_code && x->upload_errno) {
		e->err = x->upload_errno == ENODATA ? EIO : x->upload_errno;
		snprintf(e->msg, sizeof e->msg, "%s %.250s: %.200s", r->op,
			 what, x->errbuf);
		return;
	}
	if (x->curl_code && (x->stalled || x->curl_code == CURLE_OPERATION_TIMEDOUT)) {
		e->err = EIO;
		snprintf(e->msg, sizeof e->msg, "%s %.200s: %.150s (from %.100s)",
			 r->op, what, x->errbuf, c->settings->endpoint);
		return;
	}
	if (x->curl_code) {
		e->err = EIO;
		snprintf(e->msg, sizeof e->msg, "%s %.200s: cannot reach %.100s: %.150s",
			 r->op, what, c->settings->endpoint, x->errbuf);
		return;
	}
	s3_error se = {0};
	if (x->resp_body.len &&
	    s3xml_parse_error(x->resp_body.data, x->resp_body.len, &se) == 0 &&
	    se.code)
		snprintf(e->code, sizeof e->code, "%s", se.code);
	else
		snprintf(e->code, sizeof e->code, "%s",
			 status_default_code(x->status));
	e->err = status_errno(x->status);
	if (r->status_errno) {
		int m = r->status_errno(x->status, e->code);
		if (m)
			e->err = m;
	}
	if (strcmp(e->code, "NoSuchBucket") == 0)
		e->err = ENOENT;
	snprintf(e->msg, sizeof e->msg, "%s %.250s: %s%s%.150s (HTTP %ld)", r->op,
		 what, e->code[0] ? e->code : "error",
		 se.message && se.message[0] ? ": " : "",
		 se.message ? se.message : "", x->status);
	s3_error_free(&se);
}

/* ---- request ---------------------------------------------------------- */

static char *build_path(s3_client *c, const char *key)
{
	buf b = BUF_INIT;
	buf_puts(&b, c->path_prefix);
	if (key) {
		buf_putc(&b, '/');
		uri_encode(&b, key, strlen(key), true);
	} else if (!c->path_prefix[0]) {
		buf_putc(&b, '/');
	}
	return buf_steal(&b);
}

static struct curl_slist *add_hdr(struct curl_slist *l, const char *n,
				  const char *v)
{
	buf b = BUF_INIT;
	buf_printf(&b, "%s: %s", n, v);
	struct curl_slist *r = curl_slist_append(l, buf_cstr(&b));
	buf_free(&b);
	return r ? r : l;
}

static bool has_hdr(const s3_request *r, const char *name)
{
	for (size_t i = 0; i < r->n_hdrs; i++)
		if (strcasecmp(r->hdr_names[i], name) == 0)
			return true;
	return false;
}

/* Signs and fills x->url and x->headers for one attempt. */
static int prepare_attempt(s3_client *c, const s3_request *r,
			   const char *path, http_xfer *x, s3_err *e)
{
	s3_creds cr = {0};
	char *cerr = NULL;
	x->metric_op = (int)metric_op_from_name(r->op);
	int got = creds_chain_get(c->creds, &cr, &cerr);
	if (got < 0) {
		memset(e, 0, sizeof *e);
		e->err = EACCES;
		/* busy: retried like throttling (retry.c), within the budget */
		snprintf(e->code, sizeof e->code, "%s",
			 got == CREDS_BUSY ? "CredentialsRefreshing"
					   : "NoCredentials");
		snprintf(e->msg, sizeof e->msg, "%s", cerr ? cerr : "no credentials");
		free(cerr);
		return -1;
	}
	char amz_date[17];
	sigv4_amz_date(time(NULL), amz_date);
	const char *payload = r->payload_hash;
	if (!payload)
		payload = r->upload.kind == HTTP_UPLOAD_NONE ? EMPTY_SHA256
							     : "UNSIGNED-PAYLOAD";
	sigv4_header h[S3_REQ_MAX_HEADERS + 4];
	size_t n = 0;
	h[n++] = (sigv4_header){"host", c->host_header};
	h[n++] = (sigv4_header){"x-amz-content-sha256", payload};
	h[n++] = (sigv4_header){"x-amz-date", amz_date};
	if (cr.session_token && cr.session_token[0])
		h[n++] = (sigv4_header){"x-amz-security-token", cr.session_token};
	for (size_t i = 0; i < r->n_hdrs; i++)
		h[n++] = (sigv4_header){r->hdr_names[i], r->hdr_values[i]};
	sigv4_input in = {
		.method = r->method, .path = path, .query = r->query,
		.headers = h, .n_headers = n, .payload_hash = payload,
		.normalize_path = false, .region = c->region,
		.service = "s3", .amz_date = amz_date,
	};
	sigv4_creds sc = {cr.access_key, cr.secret_key, cr.session_token};
	sigv4_result sr = {0};
	int rc = sigv4_sign_header(&in, &sc, &sr);
	if (rc == 0) {
		buf u = BUF_INIT;
		buf_printf(&u, "%s%s%s%s", c->base_url, path,
			   r->query && r->query[0] ? "?" : "",
			   r->query ? r->query : "");
		free(x->url);
		x->url = buf_steal(&u);
		curl_slist_free_all(x->headers);
		x->headers = NULL;
		for (size_t i = 0; i < n; i++)
			x->headers = add_hdr(x->headers, h[i].name, h[i].value);
		/* curl adds a form Content-Type to bodies unless told one */
		if (r->upload.kind != HTTP_UPLOAD_NONE && !has_hdr(r, "content-type"))
			x->headers = curl_slist_append(x->headers, "Content-Type:");
		x->headers = add_hdr(x->headers, "Authorization", sr.output);
		/* no "Expect: 100-continue" round trip on uploads */
		x->headers = curl_slist_append(x->headers, "Expect:");
		sigv4_result_free(&sr);
	} else {
		memset(e, 0, sizeof *e);
		e->err = EIO;
		snprintf(e->msg, sizeof e->msg, "%s: cannot sign request", r->op);
	}
	s3_creds_free(&cr);
	return rc;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static unsigned class_backoff(s3_client *c, const retry_policy *p,
			      unsigned attempt, retry_class cls)
{
	pthread_mutex_lock(&c->rng_mu);
	unsigned ms = retry_backoff_ms(p, attempt, cls, &c->rng);
	pthread_mutex_unlock(&c->rng_mu);
	return ms;
}

/* The policy of r: the client's, with r's attempt limit. */
static retry_policy req_policy(const s3_client *c, const s3_request *r)
{
	retry_policy pol = c->o.retry;
	if (r->max_attempts)
		pol.max_attempts = r->max_attempts;
	return pol;
}

static uint64_t req_budget(const retry_policy *pol, const s3_request *r)
{
	return r->budget_ms ? r->budget_ms
			    : retry_request_budget_ms(pol, r->wait_ms);
}

static uint64_t elapsed_ms(const http_xfer *x)
{
	double d = x->first_t > 0 ? clock_mono() - x->first_t : 0;
	return d > 0 ? (uint64_t)(d * 1000) : 0;
}

/* A successful ordinary request's first-byte time feeds the adaptive
 * deadline; requests that make the server work first would skew it. */
static void note_ttfb(s3_client *c, const s3_request *r, const http_xfer *x)
{
	if (r->wait_ms || x->ttfb_us < 0)
		return;
	pthread_mutex_lock(&c->rng_mu);
	retry_lat_add(&c->lat, (unsigned)((x->ttfb_us + 999) / 1000));
	pthread_mutex_unlock(&c->rng_mu);
}

static unsigned typical_ms(s3_client *c)
{
	pthread_mutex_lock(&c->rng_mu);
	unsigned ms = retry_lat_p99(&c->lat);
	pthread_mutex_unlock(&c->rng_mu);
	return ms;
}

/* An ETag without quotes or weak mark, as *len bytes from the result. */
static const char *bare_etag(const char *s, size_t *len)
{
	if (strncmp(s, "W/", 2) == 0)
		s += 2;
	size_t n = strlen(s);
	if (n >= 2 && s[0] == '"' && s[n - 1] == '"') {
		s++;
		n -= 2;
	}
	*len = n;
	return s;
}

bool s3_reply_etag_differs(const http_xfer *x, char *got, size_t got_sz,
			   const char **want)
{
	static const char h[] = "if-match: ";
	const char *w = NULL;
	for (const struct curl_slist *l = x->headers; l && !w; l = l->next)
		if (strncasecmp(l->data, h, sizeof h - 1) == 0)
			w = l->data + sizeof h - 1;
	if (!w || !http_xfer_header(x, "etag", got, got_sz))
		return false;
	if (want)
		*want = w;
	size_t wl, gl;
	const char *wb = bare_etag(w, &wl), *gb = bare_etag(got, &gl);
	return wl != gl || memcmp(wb, gb, wl) != 0;
}

/*
 * A 2xx reply to a request sent with If-Match whose ETag differs: the
 * server ignored the condition (s3rver 3 does), so the bytes are of
 * another version of the object.  Judged as the 412 a server honouring
 * it would have sent.
 */
static bool if_match_ignored(s3_client *c, const s3_request *r,
			     const http_xfer *x, s3_err *e)
{
	char got[256];
	const char *want = NULL;
	if (!s3_reply_etag_differs(x, got, sizeof got, &want))
		return false;
	char what[300];
	target_url(c, r, what, sizeof what);
	memset(e, 0, sizeof *e);
	e->err = ESTALE;
	e->http_status = 412;
	snprintf(e->code, sizeof e->code, "PreconditionFailed");
	snprintf(e->msg, sizeof e->msg,
		 "%s %.250s: the object changed (ETag %.70s, expected %.70s; "
		 "the server ignored If-Match)",
		 r->op, what, got, want);
	return true;
}

/* Result of one finished attempt: 0 accepted, -1 with *e. */
static int judge(s3_client *c, const s3_request *r, const http_xfer *x,
		 s3_err *e)
{
	if (x->curl_code == CURLE_OK && x->status >= 200 && x->status < 300) {
		if (if_match_ignored(c, r, x, e))
			return -1;
		if (!r->check || r->check(r->check_arg, x, e) == 0)
			return 0;
		return -1;
	}
	err_from_xfer(c, r, x, e);
	return -1;
}

/* Method, body and the deadlines of attempt x->attempt of r. */
static void xfer_setup(s3_client *c, const s3_request *r, http_xfer *x,
		       const retry_policy *pol)
{
	x->method = r->method;
	x->upload = r->upload;
	uint64_t budget = req_budget(pol, r), left = 0;
	if (budget) {
		uint64_t el = elapsed_ms(x);
		left = el + RETRY_MIN_ATTEMPT_MS < budget ? budget - el
							  : RETRY_MIN_ATTEMPT_MS;
	}
	retry_deadlines d = retry_attempt_deadlines(
	    pol, x->attempt ? x->attempt : 1, r->wait_ms,
	    r->wait_ms ? 0 : typical_ms(c), left);
	x->connect_timeout_ms = d.connect_ms;
	x->first_byte_ms = d.first_byte_ms;
	x->low_speed_ms = d.low_speed_ms;
	x->low_speed_bytes = d.low_speed_bytes;
	/* the whole attempt: the request's limit, but never shorter than
	 * twice its stall deadlines */
	long total = r->timeout_ms ? r->timeout_ms : c->o.timeout_ms;
	long stall = d.first_byte_ms > d.low_speed_ms ? (long)d.first_byte_ms
						       : (long)d.low_speed_ms;
	x->timeout_ms = total > 2 * stall ? total : 2 * stall;
}

static retry_class err_class(const http_xfer *x, const s3_err *e)
{
	return retry_classify(x->curl_code, e->http_status,
			      e->code[0] ? e->code : NULL);
}

/*
 * The one retry decision of every request path (the loop below, the
 * multi-transfer classify and the cache's own chunk retries): whether the
 * failed attempt x of class cls goes again, and after how long (*delay).
 * A final failure (a 404 HEAD) draws no backoff.
 */
static bool next_attempt(s3_client *c, const retry_policy *pol,
			 unsigned attempt, const http_xfer *x, int curl_code,
			 retry_class cls, uint64_t budget, unsigned *delay)
{
	*delay = 0;
	if (cls == RETRY_FINAL)
		return false;
	*delay = class_backoff(c, pol, attempt, cls);
	return retry_again(pol, attempt, elapsed_ms(x), budget, cls,
			   curl_code, *delay);
}

static int do_request_n(s3_client *c, const s3_request *r, http_xfer *x,
			unsigned *attempts, s3_err *e)
{
	retry_policy pol = req_policy(c, r);
	uint64_t budget = req_budget(&pol, r);
	char *path = build_path(c, r->key);
	int rc = -1;
	unsigned attempt;
	bool fresh = false;
	x->first_t = clock_mono();
	for (attempt = 1;; attempt++) {
		http_xfer_reset_result(x);
		if (r->sink_reset)
			r->sink_reset(r->sink_arg);
		x->attempt = attempt;
		/* after a broken or silent connection, do not trust the pool:
		 * its other connections to the server may be dead as well */
		x->fresh_connect = fresh || r->fresh_connect;
		xfer_setup(c, r, x, &pol);
		x->sink = r->sink;
		x->sink_arg = r->sink_arg;
		unsigned delay;
		if (prepare_attempt(c, r, path, x, e) < 0) {
			/* no credentials this moment: a refresh still running
			 * is waited for (err_class), a failed one is final */
			if (!next_attempt(c, &pol, attempt, x, 0, err_class(x, e),
					  budget, &delay))
				break;
			log_debug("waiting %u ms: %s", delay, e->msg);
			sleep_ms(delay);
			continue;
		}
		log_debug("%s %s%s%s (attempt %u)", r->method, path,
			  r->query && r->query[0] ? "?" : "",
			  r->query ? r->query : "", attempt);
		http_perform(c->loop, x);
		if (judge(c, r, x, e) == 0) {
			note_ttfb(c, r, x);
			rc = 0;
			break;
		}
		if (!next_attempt(c, &pol, attempt, x, x->curl_code,
				  err_class(x, e), budget, &delay))
			break;
		fresh = x->curl_code != CURLE_OK;
		log_debug("retrying in %u ms after: %s", delay, e->msg);
		sleep_ms(delay);
	}
	if (attempts)
		*attempts = attempt;
	free(path);
	return rc;
}

/* ---- generic requests --------------------------------------------------- */

int s3_request_header(s3_request *r, const char *name, const char *value)
{
	if (r->n_hdrs >= S3_REQ_MAX_HEADERS)
		return -1;
	r->hdr_names[r->n_hdrs] = name;
	r->hdr_values[r->n_hdrs++] = value;
	return 0;
}

int s3_request_perform(s3_client *c, const s3_request *r, http_xfer *x,
		       unsigned *attempts, s3_err *e)
{
	return do_request_n(c, r, x, attempts, e);
}

int s3_request_prepare(s3_client *c, const s3_request *r, http_xfer *x,
		       s3_err *e)
{
	char *path = build_path(c, r->key);
	/* a transfer prepared before: this is its next attempt */
	if (x->url) {
		x->attempt = (x->attempt ? x->attempt : 1) + 1;
		if (x->curl_code != CURLE_OK)
			x->fresh_connect = true;
	} else if (!x->attempt) {
		x->attempt = 1;
	}
	if (x->first_t <= 0)
		x->first_t = clock_mono();
	http_xfer_reset_result(x);
	retry_policy pol = req_policy(c, r);
	xfer_setup(c, r, x, &pol);
	int rc = prepare_attempt(c, r, path, x, e);
	free(path);
	return rc;
}

int s3_request_classify(s3_client *c, const s3_request *r, const http_xfer *x,
			unsigned attempt, s3_err *e, bool *retry,
			unsigned *retry_after_ms)
{
	*retry = false;
	*retry_after_ms = 0;
	if (judge(c, r, x, e) == 0) {
		note_ttfb(c, r, x);
		return 0;
	}
	retry_policy pol = req_policy(c, r);
	unsigned delay;
	*retry = next_attempt(c, &pol, attempt, x, x->curl_code,
			      err_class(x, e), req_budget(&pol, r), &delay);
	if (*retry)
		*retry_after_ms = delay;
	return -1;
}

void s3_request_error_from(s3_client *c, const s3_request *r, int err,
			   const char *code, long status, const char *detail,
			   s3_err *e)
{
	char what[300];
	target_url(c, r, what, sizeof what);
	memset(e, 0, sizeof *e);
	e->err = err;
	e->http_status = status;
	snprintf(e->code, sizeof e->code, "%s", code ? code : "");
	snprintf(e->msg, sizeof e->msg, "%s %.250s: %.200s", r->op, what,
		 detail ? detail : code ? code : "error");
}

long s3_client_data_timeout(const s3_client *c, uint64_t bytes)
{
	uint64_t extra = bytes / (1024 * 1024) * 1000;
	if (extra > 24ull * 3600 * 1000)
		extra = 24ull * 3600 * 1000;
	return c->o.timeout_ms + (long)extra;
}

unsigned s3_client_backoff_ms(s3_client *c, unsigned attempt)
{
	return class_backoff(c, &c->o.retry, attempt, RETRY_TRANSIENT);
}

static retry_class s3_err_class(const s3_err *e)
{
	return retry_classify_err(e->err, e->curl_code, e->http_status,
				  e->code[0] ? e->code : NULL);
}

bool s3_etag_equal(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la >= 2 && a[0] == '"' && a[la - 1] == '"')
		a++, la -= 2;
	if (lb >= 2 && b[0] == '"' && b[lb - 1] == '"')
		b++, lb -= 2;
	return la == lb && !strncmp(a, b, la);
}

bool s3_err_transient(const s3_err *e)
{
	return s3_err_class(e) != RETRY_FINAL;
}

unsigned s3_client_retry_delay_ms(s3_client *c, unsigned attempt,
				  const s3_err *e)
{
	retry_class cls = e ? s3_err_class(e) : RETRY_TRANSIENT;
	return class_backoff(c, &c->o.retry,
			     attempt, cls == RETRY_FINAL ? RETRY_TRANSIENT : cls);
}

bool s3_client_retry_next(s3_client *c, const http_xfer *x, unsigned attempt,
			  int curl_code, long status, const char *code,
			  unsigned *delay_ms)
{
	return next_attempt(c, &c->o.retry, attempt, x, curl_code,
			    retry_classify(curl_code, status, code),
			    retry_request_budget_ms(&c->o.retry, 0), delay_ms);
}

unsigned s3_client_server_wait_ms(const s3_client *c, uint64_t items,
				  uint64_t bytes)
{
	return retry_server_wait_ms(&c->o.retry, items, bytes);
}

retry_policy s3_client_retry_policy(const s3_client *c)
{
	return c->o.retry;
}

unsigned s3_client_quirks(const s3_client *c)
{
	return atomic_load(&c->quirks);
}

unsigned s3_client_add_quirks(s3_client *c, unsigned quirks)
{
	return atomic_fetch_or(&c->quirks, quirks);
}

unsigned s3_client_drop_quirks(s3_client *c, unsigned quirks)
{
	return atomic_fetch_and(&c->quirks, ~quirks);
}
