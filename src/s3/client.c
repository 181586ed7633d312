/*
 * s3client: the client object and the S3 operations a reader needs
 * (declared in client.h; the object's fields are in client-state.h).
 *
 * s3_client_new derives from the resolved settings what every request
 * uses (base URL, the Host header we sign, path-style or virtual-host
 * prefix, the retry policy and timeouts with their defaults);
 * s3_connect makes the credential chain, the http loop and the client a
 * command needs and checks access.  The operations build an s3_request
 * and run it through the request loop (request.c, s3_request_perform or
 * the asynchronous s3_request_prepare/s3_request_classify): one listing
 * page (and s3_list_all, the one paging loop of the tree), HEAD with or
 * without user metadata, a ranged GET into a caller's buffer or prepared
 * for the http loop, and the access check (one LIST of a single key, with
 * a short budget so a silent endpoint fails a mount within 15 s).  The
 * server's Date header is kept with listings: lease expiry is judged by
 * the server's clock.  Writes are in upload.c and multipart.c.
 */
#include "s3/client.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "s3/client-state.h"
#include "s3/listfold.h"
#include "s3/sigv4.h"
#include "s3/uri.h"
#include "util/clock.h"
#include "util/log.h"


/* ---- construction ----------------------------------------------------- */

static int split_endpoint(const char *ep, const char **hostpart, char **scheme)
{
	const char *p = strstr(ep, "://");
	if (!p)
		return -1;
	*scheme = strndup(ep, (size_t)(p - ep));
	*hostpart = p + 3;
	return *scheme ? 0 : -1;
}

s3_client *s3_client_new(const s3_settings *s, creds_chain *creds,
			 http_loop *loop, const s3_client_opts *o)
{
	s3_client *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	const char *hostpart;
	char *scheme = NULL;
	if (split_endpoint(s->endpoint, &hostpart, &scheme) < 0) {
		free(c);
		return NULL;
	}
	buf b = BUF_INIT;
	if (s3_settings_virtual_host(s)) {
		buf_printf(&b, "%s.%s", s->bucket, hostpart);
		c->path_prefix = strdup("");
	} else {
		buf_puts(&b, hostpart);
		buf pp = BUF_INIT;
		buf_putc(&pp, '/');
		uri_encode(&pp, s->bucket, strlen(s->bucket), false);
		c->path_prefix = buf_steal(&pp);
	}
	c->host_header = buf_steal(&b);
	buf_printf(&b, "%s://%s", scheme, c->host_header);
	c->base_url = buf_steal(&b);
	free(scheme);
	c->bucket = strdup(s->bucket);
	c->region = strdup(s->region);
	c->settings = s;
	c->creds = creds;
	c->loop = loop;
	c->o = *o;
	if (!c->o.retry.max_attempts)
		c->o.retry = (retry_policy)RETRY_POLICY_DEFAULT;
	if (!c->o.timeout_ms)
		c->o.timeout_ms = 120000;
	if (!c->o.meta_timeout_ms)
		c->o.meta_timeout_ms = 30000;
	pthread_mutex_init(&c->rng_mu, NULL);
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	c->rng = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^
		 (uint64_t)(uintptr_t)c;
	if (!c->rng)
		c->rng = 88172645463325252ULL;
	return c;
}

void s3_client_free(s3_client *c)
{
	if (!c)
		return;
	free(c->bucket);
	free(c->region);
	free(c->base_url);
	free(c->host_header);
	free(c->path_prefix);
	pthread_mutex_destroy(&c->rng_mu);
	free(c);
}

const s3_settings *s3_client_settings(const s3_client *c)
{
	return c->settings;
}

http_loop *s3_client_loop(const s3_client *c)
{
	return c->loop;
}

creds_chain *s3_client_creds(const s3_client *c)
{
	return c->creds;
}

/* ---- operations ------------------------------------------------------- */

static void query_param(buf *q, const char *name, const char *value)
{
	if (q->len)
		buf_putc(q, '&');
	buf_puts(q, name);
	buf_putc(q, '=');
	uri_encode(q, value, strlen(value), false);
}

static void parse_http_date(const char *s, struct timespec *ts);

/* The server's clock at the reply (its Date header), 0 when absent: lease
 * expiry is judged by it, so host clocks do not matter. */
static time_t reply_date(const http_xfer *x)
{
	char d[64];
	struct timespec ts = {0, 0};
	if (http_xfer_header(x, "date", d, sizeof d))
		parse_http_date(d, &ts);
	return ts.tv_sec;
}

/* The query of one ListObjectsV2 page, its parameters in sorted order so
 * the wire query is canonical (the one LIST query builder of the tree):
 * token and delimiter NULL for none, prefix NULL for "". */
static void list_query(buf *q, const char *prefix, const char *delimiter,
		       const char *token, const char *max_keys)
{
	if (token)
		query_param(q, "continuation-token", token);
	if (delimiter)
		query_param(q, "delimiter", delimiter);
	query_param(q, "encoding-type", "url");
	query_param(q, "list-type", "2");
	query_param(q, "max-keys", max_keys);
	query_param(q, "prefix", prefix ? prefix : "");
}

int s3_list_page_bounded(s3_client *c, const s3_request *lim,
			 const char *prefix, const char *delimiter,
			 const char *token, unsigned max_keys,
			 s3_list_result *out, s3_err *e)
{
	buf q = BUF_INIT;
	char mk[16];
	snprintf(mk, sizeof mk, "%u", max_keys ? max_keys : 1000);
	list_query(&q, prefix, delimiter, token, mk);
	s3_request r = {.op = "LIST", .method = "GET", .key = NULL,
			   .what = prefix, .query = buf_cstr(&q),
			   .timeout_ms = c->o.meta_timeout_ms};
	if (lim) {
		r.timeout_ms = lim->timeout_ms;
		r.max_attempts = lim->max_attempts;
		r.budget_ms = lim->budget_ms;
	}
	http_xfer x = {0};
	int rc = s3_request_perform(c, &r, &x, NULL, e);
	if (rc == 0) {
		char *perr = NULL;
		/* decoded only when the reply says <EncodingType>url: a
		 * server that ignores encoding-type (s3rver) sends keys as
		 * they are, and decoding them would turn '+' into ' ' */
		if (s3xml_parse_list(x.resp_body.data, x.resp_body.len, false,
				     out, &perr) < 0) {
			memset(e, 0, sizeof *e);
			e->err = EIO;
			e->http_status = x.status;
			snprintf(e->code, sizeof e->code, "MalformedReply");
			snprintf(e->msg, sizeof e->msg,
				 "LIST %s: malformed reply from server: %s",
				 prefix ? prefix : "", perr ? perr : "?");
			free(perr);
			rc = -1;
		} else {
			out->server_time = reply_date(&x);
		}
	}
	http_xfer_free(&x);
	buf_free(&q);
	return rc;
}

int s3_list_page(s3_client *c, const char *prefix, const char *delimiter,
		 const char *token, unsigned max_keys, s3_list_result *out,
		 s3_err *e)
{
	return s3_list_page_bounded(c, NULL, prefix, delimiter, token,
				    max_keys, out, e);
}

void s3_client_listing(s3_client *c, bool defect)
{
	if (defect) {
		if (!(s3_client_add_quirks(c, S3_QUIRK_FLAT_LISTING) &
		      S3_QUIRK_FLAT_LISTING))
			log_warn("the server's delimiter listings leave out "
				 "directories two or more levels down (a known "
				 "s3rver defect): listing without a delimiter "
				 "instead, which costs more requests on large "
				 "trees (doc/portability.md)");
	} else if (s3_client_quirks(c) & S3_QUIRK_LISTING_UNSURE) {
		log_debug("the server's delimiter listings are complete");
	}
	s3_client_drop_quirks(c, S3_QUIRK_LISTING_UNSURE);
}

/* LISTING_UNSURE and a folded listing met a key two levels down: one
 * delimiter page of the same prefix says whether the server shows its
 * common prefix.  Its failures leave the question open. */
static void settle_listing(s3_client *c, const char *prefix,
			   const char *delimiter, const s3_fold *st)
{
	s3_list_result page = {0};
	s3_err e;
	if (s3_list_page(c, prefix, delimiter, NULL, 1000, &page, &e) < 0) {
		log_debug("listing check: %s", e.msg);
		return;
	}
	int v = s3_fold_verdict(st->deep, st->deep_len, &page);
	s3_list_result_free(&page);
	if (v >= 0)
		s3_client_listing(c, v == 1);
}

int s3_list_all(s3_client *c, const char *prefix, const char *delimiter,
		s3_page_fn fn, void *arg, s3_err *e)
{
	char *token = NULL;
	int rc = 0;
	unsigned q = s3_client_quirks(c);
	bool fold = delimiter && delimiter[0] &&
		    (q & (S3_QUIRK_FLAT_LISTING | S3_QUIRK_LISTING_UNSURE));
	s3_fold st = {0};
	do {
		s3_list_result page = {0};
		rc = s3_list_page(c, prefix, fold ? NULL : delimiter, token,
				  1000, &page, e);
		free(token);
		token = NULL;
		if (rc < 0)
			break;
		if (fold && s3_fold_page(&st, prefix ? prefix : "", delimiter,
					 &page) < 0)
			rc = -ENOMEM;
		else
			rc = fn(arg, prefix, &page);
		if (rc == 0 && fold && !(page.truncated && page.next_token))
			s3_fold_finish(&st); /* the whole listing was seen */
		if (rc == 0 && page.truncated && page.next_token) {
			token = strdup(page.next_token);
			if (!token)
				rc = -ENOMEM;
		}
		s3_list_result_free(&page);
		if (rc < 0) {
			memset(e, 0, sizeof *e);
			e->err = -rc;
			snprintf(e->msg, sizeof e->msg, "LIST %s: %s", prefix ? prefix : "",
				 rc == -ENOMEM ? "out of memory" : strerror(-rc));
			rc = -1;
		}
	} while (token);
	if (rc >= 0 && fold && st.deep && !(q & S3_QUIRK_FLAT_LISTING))
		settle_listing(c, prefix ? prefix : "", delimiter, &st);
	s3_fold_free(&st);
	return rc < 0 ? -1 : 0;
}

static void parse_http_date(const char *s, struct timespec *ts)
{
	struct tm tm;
	memset(&tm, 0, sizeof tm);
	ts->tv_sec = 0;
	ts->tv_nsec = 0;
	if (strptime(s, "%a, %d %b %Y %H:%M:%S", &tm))
		ts->tv_sec = timegm(&tm);
}

static void head_fill(const http_xfer *x, s3_head_result *out)
{
	char v[128];
	memset(out, 0, sizeof *out);
	if (http_xfer_header(x, "content-length", v, sizeof v))
		out->size = strtoull(v, NULL, 10);
	http_xfer_header(x, "etag", out->etag, sizeof out->etag);
	if (http_xfer_header(x, "last-modified", v, sizeof v))
		parse_http_date(v, &out->mtime);
}

int s3_head(s3_client *c, const char *key, s3_head_result *out, s3_err *e)
{
	s3_request r = {.op = "HEAD", .method = "HEAD", .key = key,
			   .timeout_ms = c->o.meta_timeout_ms};
	http_xfer x = {0};
	int rc = s3_request_perform(c, &r, &x, NULL, e);
	if (rc == 0)
		head_fill(&x, out);
	http_xfer_free(&x);
	return rc;
}

#define META_PREFIX "x-amz-meta-"

/* Collects the x-amz-meta-* lines of the reply into out->meta. */
static int head_meta(const http_xfer *x, s3_head_ext_result *out)
{
	const size_t pl = sizeof META_PREFIX - 1;
	buf store = BUF_INIT;
	size_t n = 0;
	const char *p = buf_cstr(&x->resp_headers);
	/* pass 1: "name\0value\0" pairs into store */
	while (*p) {
		const char *eol = strchr(p, '\n');
		size_t ll = eol ? (size_t)(eol - p) : strlen(p);
		const char *colon = memchr(p, ':', ll);
		if (colon && (size_t)(colon - p) > pl &&
		    strncasecmp(p, META_PREFIX, pl) == 0) {
			const char *v = colon + 1, *end = p + ll;
			while (v < end && (*v == ' ' || *v == '\t'))
				v++;
			while (end > v && (end[-1] == '\r' || end[-1] == ' '))
				end--;
			size_t start = store.len;
			for (const char *q = p + pl; q < colon; q++)
				buf_putc(&store, (char)((*q >= 'A' && *q <= 'Z')
								? *q + 32
								: *q));
			buf_putc(&store, '\0');
			buf_append(&store, v, (size_t)(end - v));
			if (buf_putc(&store, '\0') < 0) {
				store.len = start;
				break;
			}
			n++;
		}
		if (!eol)
			break;
		p = eol + 1;
	}
	if (n == 0) {
		buf_free(&store);
		return 0;
	}
	out->meta = calloc(n, sizeof *out->meta);
	if (!out->meta) {
		buf_free(&store);
		return -1;
	}
	out->meta_store = buf_steal(&store);
	const char *q = out->meta_store;
	for (size_t i = 0; i < n; i++) {
		out->meta[i].name = q;
		q += strlen(q) + 1;
		out->meta[i].value = q;
		q += strlen(q) + 1;
	}
	out->n_meta = n;
	return 0;
}

int s3_head_ext(s3_client *c, const char *key, s3_head_ext_result *out,
		s3_err *e)
{
	memset(out, 0, sizeof *out);
	s3_request r = {.op = "HEAD", .method = "HEAD", .key = key,
			.timeout_ms = c->o.meta_timeout_ms};
	http_xfer x = {0};
	int rc = s3_request_perform(c, &r, &x, NULL, e);
	if (rc == 0) {
		s3_head_result h;
		head_fill(&x, &h);
		out->size = h.size;
		memcpy(out->etag, h.etag, sizeof out->etag);
		out->mtime = h.mtime;
		http_xfer_header(&x, "content-type", out->content_type,
				 sizeof out->content_type);
		if (head_meta(&x, out) < 0) {
			s3_request_error_from(c, &r, ENOMEM, NULL, x.status,
					      "out of memory", e);
			rc = -1;
		}
	}
	http_xfer_free(&x);
	return rc;
}

void s3_head_ext_result_free(s3_head_ext_result *r)
{
	if (!r)
		return;
	free(r->meta);
	free(r->meta_store);
	memset(r, 0, sizeof *r);
}

const char *s3_head_ext_meta(const s3_head_ext_result *r, const char *name)
{
	for (size_t i = 0; i < r->n_meta; i++)
		if (strcmp(r->meta[i].name, name) == 0)
			return r->meta[i].value;
	return NULL;
}

struct range_sink {
	char *dst;
	size_t cap, got;
};

static size_t range_write(void *arg, const char *data, size_t n)
{
	struct range_sink *s = arg;
	if (n > s->cap - s->got)
		return 0; /* more than asked for: abort rather than overflow */
	memcpy(s->dst + s->got, data, n);
	s->got += n;
	return n;
}

static void range_reset(void *arg)
{
	((struct range_sink *)arg)->got = 0;
}

int s3_get_range(s3_client *c, const char *key, uint64_t off, size_t len,
		 const char *if_match, void *dst, size_t *got, s3_err *e)
{
	*got = 0;
	if (len == 0)
		return 0;
	char range[64];
	snprintf(range, sizeof range, "bytes=%llu-%llu",
		 (unsigned long long)off, (unsigned long long)(off + len - 1));
	struct range_sink s = {dst, len, 0};
	s3_request r = {.op = "GET", .method = "GET", .key = key,
			   .timeout_ms = c->o.timeout_ms, .sink = range_write,
			   .sink_arg = &s, .sink_reset = range_reset};
	r.hdr_names[r.n_hdrs] = "range";
	r.hdr_values[r.n_hdrs++] = range;
	if (if_match && if_match[0]) {
		r.hdr_names[r.n_hdrs] = "if-match";
		r.hdr_values[r.n_hdrs++] = if_match;
	}
	http_xfer x = {0};
	int rc = s3_request_perform(c, &r, &x, NULL, e);
	if (rc == 0)
		*got = s.got;
	http_xfer_free(&x);
	return rc;
}

struct whole_sink {
	char *data;
	size_t len, cap, max;
	bool over;
};

static size_t whole_write(void *arg, const char *data, size_t n)
{
	struct whole_sink *s = arg;
	if (n > s->max - s->len) {
		s->over = true;
		return 0;
	}
	if (s->len + n + 1 > s->cap) {
		size_t cap = s->cap ? s->cap : 4096;
		while (cap < s->len + n + 1)
			cap *= 2;
		char *d = realloc(s->data, cap);
		if (!d)
			return 0;
		s->data = d;
		s->cap = cap;
	}
	memcpy(s->data + s->len, data, n);
	s->len += n;
	s->data[s->len] = '\0';
	return n;
}

static void whole_reset(void *arg)
{
	((struct whole_sink *)arg)->len = 0;
}

int s3_get_object(s3_client *c, const char *key, size_t max,
		  const char *if_match, char **body, size_t *len,
		  s3_head_result *h, s3_err *e)
{
	*body = NULL;
	*len = 0;
	struct whole_sink s = {NULL, 0, 0, max, false};
	s3_request r = {.op = "GET", .method = "GET", .key = key,
			   .timeout_ms = c->o.timeout_ms, .sink = whole_write,
			   .sink_arg = &s, .sink_reset = whole_reset};
	if (if_match && if_match[0]) {
		r.hdr_names[r.n_hdrs] = "if-match";
		r.hdr_values[r.n_hdrs++] = if_match;
	}
	http_xfer x = {0};
	int rc = s3_request_perform(c, &r, &x, NULL, e);
	if (rc == 0 && h)
		head_fill(&x, h);
	http_xfer_free(&x);
	if (s.over) {
		memset(e, 0, sizeof *e);
		e->err = EFBIG;
		snprintf(e->msg, sizeof e->msg, "%s: larger than %zu bytes",
			 key, max);
		rc = -1;
	}
	if (rc == 0 && !s.data)
		s.data = calloc(1, 1); /* empty object */
	if (rc == 0 && !s.data) {
		memset(e, 0, sizeof *e);
		e->err = ENOMEM;
		snprintf(e->msg, sizeof e->msg, "out of memory reading %s", key);
		rc = -1;
	}
	if (rc < 0) {
		free(s.data);
		return -1;
	}
	*body = s.data;
	*len = s.len;
	return 0;
}

int s3_check_access(s3_client *c, const char *prefix, s3_err *e)
{
	s3_list_result res = {0};
	buf q = BUF_INIT;
	list_query(&q, prefix, NULL, NULL, "1");
	/* a silent endpoint fails the mount within 15 s */
	s3_request r = {.op = "LIST", .method = "GET", .key = NULL,
			   .what = prefix, .query = buf_cstr(&q),
			   .timeout_ms = 10000,
			   .max_attempts = 3, .budget_ms = 15000};
	http_xfer x = {0};
	int rc = s3_request_perform(c, &r, &x, NULL, e);
	if (rc == 0) {
		char *perr = NULL;
		if (s3xml_parse_list(x.resp_body.data, x.resp_body.len, false,
				     &res, &perr) < 0) {
			memset(e, 0, sizeof *e);
			e->err = EIO;
			snprintf(e->code, sizeof e->code, "MalformedReply");
			snprintf(e->msg, sizeof e->msg,
				 "the endpoint %s did not answer like S3: %s",
				 c->settings->endpoint, perr ? perr : "?");
			free(perr);
			rc = -1;
		}
		s3_list_result_free(&res);
	}
	http_xfer_free(&x);
	buf_free(&q);
	return rc;
}

int s3_connect(const s3_settings *s, bool insecure, const retry_policy *retry,
	       creds_chain **creds, http_loop **loop, s3_client **client,
	       char **err, s3_err *e)
{
	int rc = -1;
	*loop = NULL;
	*client = NULL;
	*err = NULL;
	*creds = s->profile_explicit ? creds_chain_new_profile(s->profile, s->region)
				     : creds_chain_new(s->profile, s->region);
	s3_creds cr = {0};
	if (*creds && creds_chain_set_ca_bundle(*creds, s->ca_bundle) < 0) {
		creds_chain_free(*creds);
		*creds = NULL;
	}
	if (!*creds || creds_chain_get(*creds, &cr, err) < 0)
		goto fail;
	s3_creds_free(&cr);
	http_loop_opts lo = {.ca_bundle = s->ca_bundle, .insecure = insecure};
	*loop = http_loop_new(&lo);
	s3_client_opts co = {.retry = RETRY_POLICY_DEFAULT};
	if (retry)
		co.retry = *retry;
	*client = *loop ? s3_client_new(s, *creds, *loop, &co) : NULL;
	if (!*client) {
		*err = strdup("cannot start the S3 client");
		goto fail;
	}
	memset(e, 0, sizeof *e);
	if (s3_check_access(*client, s->prefix, e) == 0)
		return 0;
	rc = -2;
fail:
	s3_client_free(*client);
	http_loop_free(*loop);
	creds_chain_free(*creds);
	*client = NULL;
	*loop = NULL;
	*creds = NULL;
	return rc;
}

int s3_prepare_get(s3_client *c, const char *key, uint64_t off, size_t len,
		   const char *if_match, http_xfer *x, s3_err *e)
{
	char range[64];
	snprintf(range, sizeof range, "bytes=%llu-%llu",
		 (unsigned long long)off, (unsigned long long)(off + len - 1));
	s3_request r = {.op = "GET", .method = "GET", .key = key,
			.timeout_ms = c->o.timeout_ms};
	r.hdr_names[r.n_hdrs] = "range";
	r.hdr_values[r.n_hdrs++] = range;
	if (if_match && if_match[0]) {
		r.hdr_names[r.n_hdrs] = "if-match";
		r.hdr_values[r.n_hdrs++] = if_match;
	}
	return s3_request_prepare(c, &r, x, e);
}

int s3_classify(s3_client *c, const char *key, const http_xfer *x,
		unsigned attempt, s3_err *e, bool *retry,
		unsigned *retry_after_ms)
{
	s3_request r = {.op = "GET", .method = "GET", .key = key};
	return s3_request_classify(c, &r, x, attempt, e, retry,
				   retry_after_ms);
}

const char *s3_access_hint(const s3_err *e)
{
	if (strcmp(e->code, "NoSuchBucket") == 0)
		return "the bucket does not exist";
	if (strcmp(e->code, "InvalidAccessKeyId") == 0 ||
	    strcmp(e->code, "SignatureDoesNotMatch") == 0 ||
	    e->http_status == 403)
		return "the credentials were refused; check the access key, "
		       "secret and profile";
	if (e->curl_code)
		return "the endpoint cannot be reached";
	return "";
}
