/*
 * s3-tool: drives the S3 write primitives (s3/upload.h) from the command
 * line, for tests/integration/test_s3_client.py.
 *
 *   s3-tool [-b BUCKET] [-v] COMMAND ARGS...
 *
 * Endpoint, region and credentials come from the environment the way
 * ckptfs finds them (AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY, profiles); the bucket from -b or S3_BUCKET.
 * S3TOOL_MAX_ATTEMPTS and S3TOOL_TIMEOUT_MS override the retry policy's
 * attempts and the per-attempt data timeout.  Results are JSON objects on
 * stdout, one per line; a failure prints {"error": {...}} on stdout and
 * "s3-tool: message" on stderr and exits 1 (2 for usage errors).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "http/loop.h"
#include "s3/client.h"
#include "s3/config.h"
#include "s3/upload.h"
#include "util/log.h"

static s3_client *C;
static http_loop *L;

/* ---- output ------------------------------------------------------------- */

static json_t *jstr(const char *s)
{
	json_t *j = json_string(s ? s : "");
	if (!j) /* not UTF-8: show the bytes escaped */
		j = json_string("<non-UTF-8>");
	return j;
}

static void emit(json_t *o)
{
	char *s = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
	puts(s ? s : "{}");
	free(s);
	json_decref(o);
	fflush(stdout);
}

static const char *errno_name(int e)
{
	switch (e) {
	case 0: return "0";
	case ENOENT: return "ENOENT";
	case EACCES: return "EACCES";
	case EIO: return "EIO";
	case EEXIST: return "EEXIST";
	case ESTALE: return "ESTALE";
	case EINVAL: return "EINVAL";
	case ENOMEM: return "ENOMEM";
	case ENODATA: return "ENODATA";
	case EFBIG: return "EFBIG";
	default: return "other";
	}
}

static int fail(const s3_err *e)
{
	fprintf(stderr, "s3-tool: %s\n", e->msg);
	emit(json_pack("{s:{s:o,s:i,s:i,s:s,s:o}}", "error", "code",
		       jstr(e->code), "http_status", (int)e->http_status,
		       "curl_code", e->curl_code, "errno", errno_name(e->err),
		       "message", jstr(e->msg)));
	return 1;
}

static int fail_msg(const char *msg)
{
	s3_err e = {.err = EINVAL};
	snprintf(e.msg, sizeof e.msg, "%s", msg);
	return fail(&e);
}

static _Noreturn void usage(const char *why)
{
	if (why)
		fprintf(stderr, "s3-tool: %s\n", why);
	fputs("usage: s3-tool [-b BUCKET] [-v] COMMAND ...\n"
	      "  put KEY FILE [--offset N] [--length N] [--mem] [--md5] "
	      "[--async] [--content-md5 B64]\n"
	      "      [--content-type T] [--meta NAME=VALUE]... "
	      "[--if-none-match]\n"
	      "  mpu-upload KEY FILE --part-size N [--offset N] [--length N]\n"
	      "      [--parallel N] [--sync] [--content-type T] "
	      "[--meta NAME=VALUE]...\n"
	      "  mpu-create KEY | mpu-part KEY ID N FILE [--offset --length] "
	      "[--md5]\n"
	      "  mpu-complete KEY ID N:ETAG... | abort KEY ID\n"
	      "  list-uploads [PREFIX] [--page-size N]\n"
	      "  copy SRC DST [--replace] [--content-type T] [--meta N=V]... "
	      "[--if-match E]\n      [--length SOURCE_SIZE]\n"
	      "  part-copy SRC DST [--part-size N] [--parallel N] "
	      "[--if-match E]\n"
	      "  delete KEY | delete-many [--stdin [-0]] [KEY...]\n"
	      "  head-meta KEY | part-size SIZE [MIN]\n"
	      "  get KEY [--length MAX] [--if-match E]   (whole, at most MAX)\n",
	      stderr);
	exit(2);
}

/* ---- options ------------------------------------------------------------ */

struct opts {
	uint64_t offset, length, part_size;
	bool have_length, mem, md5, async, sync, replace, if_none_match;
	bool from_stdin, nul;
	unsigned parallel;
	const char *content_type, *if_match, *content_md5;
	s3_meta meta[S3_META_MAX + 1];
	size_t n_meta;
	char **args;
	int n_args;
};

static uint64_t num(const char *s)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s)
		usage("bad number");
	switch (*end) {
	case 'K': v <<= 10; break;
	case 'M': v <<= 20; break;
	case 'G': v <<= 30; break;
	case 'T': v <<= 40; break;
	case '\0': break;
	default: usage("bad number");
	}
	return v;
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
	enum { O_OFF = 1000, O_LEN, O_PS, O_PAR, O_CT, O_META, O_IFM, O_MD5 };
	static const struct option lo[] = {
	    {"offset", 1, 0, O_OFF},      {"length", 1, 0, O_LEN},
	    {"part-size", 1, 0, O_PS},    {"parallel", 1, 0, O_PAR},
	    {"page-size", 1, 0, O_PS},    {"content-md5", 1, 0, O_MD5},
	    {"content-type", 1, 0, O_CT}, {"meta", 1, 0, O_META},
	    {"if-match", 1, 0, O_IFM},    {"mem", 0, 0, 'm'},
	    {"md5", 0, 0, '5'},           {"async", 0, 0, 'a'},
	    {"sync", 0, 0, 's'},          {"replace", 0, 0, 'r'},
	    {"if-none-match", 0, 0, 'n'}, {"stdin", 0, 0, 'i'},
	    {0, 0, 0, 0}};
	memset(o, 0, sizeof *o);
	o->parallel = 4;
	optind = 0; /* glibc: full reset, options may follow arguments */
	int ch;
	while ((ch = getopt_long(argc, argv, "0", lo, NULL)) != -1) {
		switch (ch) {
		case O_OFF: o->offset = num(optarg); break;
		case O_LEN: o->length = num(optarg); o->have_length = true; break;
		case O_PS: o->part_size = num(optarg); break;
		case O_PAR: o->parallel = (unsigned)num(optarg); break;
		case O_CT: o->content_type = optarg; break;
		case O_IFM: o->if_match = optarg; break;
		case O_MD5: o->content_md5 = optarg; break;
		case O_META: {
			char *eq = strchr(optarg, '=');
			if (!eq || o->n_meta > S3_META_MAX)
				usage("--meta NAME=VALUE");
			*eq = '\0';
			o->meta[o->n_meta++] = (s3_meta){optarg, eq + 1};
			break;
		}
		case 'm': o->mem = true; break;
		case '5': o->md5 = true; break;
		case 'a': o->async = true; break;
		case 's': o->sync = true; break;
		case 'r': o->replace = true; break;
		case 'n': o->if_none_match = true; break;
		case 'i': o->from_stdin = true; break;
		case '0': o->nul = true; break;
		default: usage(NULL);
		}
	}
	if (!o->parallel)
		o->parallel = 1;
	o->args = argv + optind;
	o->n_args = argc - optind;
}

static void need_args(const struct opts *o, int n)
{
	if (o->n_args != n)
		usage("wrong number of arguments");
}

/* Opens FILE and settles the byte range [offset, offset+length). */
static int open_range(const char *path, struct opts *o)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		perror(path);
		exit(1);
	}
	struct stat st;
	fstat(fd, &st);
	if (!o->have_length)
		o->length = (uint64_t)st.st_size > o->offset
				    ? (uint64_t)st.st_size - o->offset
				    : 0;
	return fd;
}

static char *read_range(int fd, uint64_t off, uint64_t len)
{
	char *p = malloc(len ? len : 1);
	uint64_t got = 0;
	while (p && got < len) {
		ssize_t n = pread(fd, p + got, len - got, (off_t)(off + got));
		if (n <= 0) {
			perror("read");
			exit(1);
		}
		got += (uint64_t)n;
	}
	return p;
}

/* ---- put ---------------------------------------------------------------- */

static int cmd_put(struct opts *o)
{
	need_args(o, 2);
	int fd = open_range(o->args[1], o);
	char *mem = NULL;
	char md5[25];
	http_upload body = http_upload_fd(fd, o->offset, o->length);
	if (o->mem || o->md5)
		mem = read_range(fd, o->offset, o->length);
	if (o->mem)
		body = http_upload_mem(mem, o->length);
	if (o->md5)
		s3_content_md5(mem, o->length, md5);
	s3_put_opts po = {.content_type = o->content_type, .meta = o->meta,
			  .n_meta = o->n_meta,
			  .if_none_match = o->if_none_match,
			  .content_md5 = o->md5 ? md5 : o->content_md5};
	char etag[S3_ETAG_MAX];
	s3_err e;
	int rc;
	unsigned attempts = 0;
	if (!o->async) {
		rc = s3_put_object(C, o->args[0], &body, &po, etag, &e);
	} else {
		http_xfer x = {0};
		for (;;) {
			bool retry;
			unsigned delay;
			rc = s3_prepare_put_object(C, o->args[0], &body, &po,
						   &x, &e);
			if (rc < 0)
				break;
			http_perform(L, &x);
			rc = s3_classify_upload(C, S3_OP_PUT_OBJECT, o->args[0],
						&x, ++attempts, etag, &e,
						&retry, &delay);
			if (rc == 0 || !retry)
				break;
			usleep(delay * 1000);
		}
		http_xfer_free(&x);
	}
	free(mem);
	close(fd);
	if (rc < 0)
		return fail(&e);
	emit(json_pack("{s:o,s:I}", "etag", jstr(etag), "size",
		       (json_int_t)o->length));
	return 0;
}

/* ---- parallel parts (async API) ---------------------------------------- */

struct part_job {
	http_xfer x;
	unsigned number, attempt;
	uint64_t off, len;
	char etag[S3_ETAG_MAX];
	struct engine *eng;
};

struct engine {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned *finished; /* indices of jobs whose attempt ended */
	size_t n_finished;
};

static void job_done(http_xfer *x, void *arg)
{
	struct part_job *j = arg;
	struct engine *g = j->eng;
	(void)x;
	pthread_mutex_lock(&g->mu);
	g->finished[g->n_finished++] = j->number - 1;
	pthread_cond_signal(&g->cv);
	pthread_mutex_unlock(&g->mu);
}

/* Runs parts [0, n) with up to `parallel` in flight: copy from src_key when
 * it is set, else upload from fd.  Returns 0, or -1 with *e. */
static int run_parts(struct part_job *jobs, unsigned n, unsigned parallel,
		     const char *key, const char *upload_id, int fd,
		     const char *src_key, const char *if_match, s3_err *e)
{
	struct engine g = {.finished = calloc(n, sizeof(unsigned))};
	pthread_mutex_init(&g.mu, NULL);
	pthread_cond_init(&g.cv, NULL);
	unsigned next = 0, inflight = 0, done = 0;
	int rc = 0;
	s3_upload_op op = src_key ? S3_OP_PART_COPY : S3_OP_PUT_PART;
	for (;;) {
		while (rc == 0 && inflight < parallel && next < n) {
			struct part_job *j = &jobs[next++];
			j->eng = &g;
			j->attempt = 0;
			int pr;
			if (src_key) {
				pr = s3_prepare_part_copy(
				    C, src_key, j->off, j->off + j->len - 1,
				    if_match, key, upload_id, j->number, &j->x,
				    e);
			} else {
				http_upload b = http_upload_fd(fd, j->off, j->len);
				pr = s3_prepare_put_part(C, key, upload_id,
							 j->number, &b, NULL,
							 &j->x, e);
			}
			if (pr < 0) {
				rc = -1;
				break;
			}
			j->x.done = job_done;
			j->x.done_arg = j;
			inflight++;
			http_submit(L, &j->x);
		}
		if (inflight == 0)
			break;
		pthread_mutex_lock(&g.mu);
		while (g.n_finished == 0)
			pthread_cond_wait(&g.cv, &g.mu);
		unsigned idx = g.finished[--g.n_finished];
		pthread_mutex_unlock(&g.mu);
		struct part_job *j = &jobs[idx];
		inflight--;
		bool retry;
		unsigned delay;
		s3_err pe;
		if (s3_classify_upload(C, op, key, &j->x, ++j->attempt, j->etag,
				       &pe, &retry, &delay) == 0) {
			done++;
			continue;
		}
		if (rc == 0 && !retry && src_key &&
		    strcmp(pe.code, "NoSuchKey") == 0) {
			/* the blocking call learns servers that decode the
			 * copy source twice (upload.h); later prepares use it */
			if (s3_upload_part_copy(C, src_key, j->off,
						j->off + j->len - 1, if_match,
						key, upload_id, j->number,
						j->etag, &pe) == 0) {
				done++;
				continue;
			}
		}
		if (rc == 0 && retry) {
			usleep(delay * 1000);
			int pr;
			if (src_key) {
				pr = s3_prepare_part_copy(
				    C, src_key, j->off, j->off + j->len - 1,
				    if_match, key, upload_id, j->number, &j->x,
				    &pe);
			} else {
				http_upload b = http_upload_fd(fd, j->off, j->len);
				pr = s3_prepare_put_part(C, key, upload_id,
							 j->number, &b, NULL,
							 &j->x, &pe);
			}
			if (pr == 0) {
				inflight++;
				http_submit(L, &j->x);
				continue;
			}
		}
		if (rc == 0)
			*e = pe;
		rc = -1;
	}
	for (unsigned i = 0; i < n; i++)
		http_xfer_free(&jobs[i].x);
	free(g.finished);
	pthread_cond_destroy(&g.cv);
	pthread_mutex_destroy(&g.mu);
	return rc;
}

static struct part_job *plan_parts(uint64_t base, uint64_t size,
				   uint64_t part_size, unsigned *n)
{
	*n = (unsigned)s3_part_count(size, part_size);
	struct part_job *jobs = calloc(*n, sizeof *jobs);
	for (unsigned i = 0; jobs && i < *n; i++) {
		jobs[i].number = i + 1;
		jobs[i].off = base + (uint64_t)i * part_size;
		uint64_t left = size - (uint64_t)i * part_size;
		jobs[i].len = left < part_size ? left : part_size;
	}
	return jobs;
}

static int finish_mpu(const char *key, const char *id, struct part_job *jobs,
		      unsigned n, const char *extra_name, json_t *extra)
{
	s3_part *parts = calloc(n, sizeof *parts);
	for (unsigned i = 0; i < n; i++) {
		parts[i].number = jobs[i].number;
		memcpy(parts[i].etag, jobs[i].etag, S3_ETAG_MAX);
	}
	char etag[S3_ETAG_MAX], want[S3_ETAG_MAX] = "";
	s3_multipart_etag(parts, n, want);
	s3_err e;
	int rc = s3_mpu_complete(C, key, id, parts, n, etag, &e);
	free(parts);
	if (rc < 0) {
		s3_err ae;
		s3_mpu_abort(C, key, id, &ae);
		json_decref(extra);
		return fail(&e);
	}
	json_t *o = json_pack("{s:o,s:o,s:i,s:o}", "etag", jstr(etag),
			      "expected_etag", jstr(want), "parts", (int)n,
			      "upload_id", jstr(id));
	if (extra)
		json_object_set_new(o, extra_name, extra);
	emit(o);
	return 0;
}

static int cmd_mpu_upload(struct opts *o)
{
	need_args(o, 2);
	const char *key = o->args[0];
	int fd = open_range(o->args[1], o);
	uint64_t ps = s3_part_size(o->length, o->part_size);
	s3_put_opts po = {.content_type = o->content_type, .meta = o->meta,
			  .n_meta = o->n_meta};
	char *id = NULL;
	s3_err e;
	if (s3_mpu_create(C, key, &po, &id, NULL, &e) < 0)
		return fail(&e);
	unsigned n;
	struct part_job *jobs = plan_parts(o->offset, o->length, ps, &n);
	int rc = 0;
	if (o->sync) {
		for (unsigned i = 0; i < n && rc == 0; i++) {
			http_upload b = http_upload_fd(fd, jobs[i].off,
						       jobs[i].len);
			rc = s3_mpu_put_part(C, key, id, jobs[i].number, &b,
					     NULL, jobs[i].etag, &e);
		}
	} else {
		rc = run_parts(jobs, n, o->parallel, key, id, fd, NULL, NULL,
			       &e);
	}
	close(fd);
	if (rc < 0) {
		s3_err ae;
		s3_mpu_abort(C, key, id, &ae);
		free(jobs);
		free(id);
		return fail(&e);
	}
	rc = finish_mpu(key, id, jobs, n, "part_size",
			json_integer((json_int_t)ps));
	free(jobs);
	free(id);
	return rc;
}

static int cmd_part_copy(struct opts *o)
{
	need_args(o, 2);
	const char *src = o->args[0], *dst = o->args[1];
	s3_head_ext_result h;
	s3_err e;
	if (s3_head_ext(C, src, &h, &e) < 0)
		return fail(&e);
	/* the copy keeps the source's content type and metadata */
	s3_put_opts po = {.content_type = h.content_type[0] ? h.content_type
							    : NULL,
			  .meta = h.meta, .n_meta = h.n_meta};
	uint64_t ps = s3_part_size(h.size, o->part_size);
	char *id = NULL;
	if (s3_mpu_create(C, dst, &po, &id, NULL, &e) < 0) {
		s3_head_ext_result_free(&h);
		return fail(&e);
	}
	unsigned n;
	struct part_job *jobs = plan_parts(0, h.size, ps, &n);
	const char *pin = o->if_match ? o->if_match : h.etag;
	int rc = run_parts(jobs, n, o->parallel, dst, id, -1, src, pin, &e);
	/* Ceph 16 ignores the pin on part copies: check the source is still
	 * the version we meant before the copy becomes visible */
	s3_head_result now;
	if (rc == 0 && s3_head(C, src, &now, &e) < 0) {
		rc = -1;
	} else if (rc == 0 && strcmp(now.etag, pin) != 0) {
		memset(&e, 0, sizeof e);
		e.err = ESTALE;
		snprintf(e.code, sizeof e.code, "PreconditionFailed");
		snprintf(e.msg, sizeof e.msg,
			 "UPLOAD PART COPY s3://%s/%.200s: the source is not "
			 "the version %.100s",
			 s3_client_settings(C)->bucket, src, pin);
		rc = -1;
	}
	s3_head_ext_result_free(&h);
	if (rc < 0) {
		s3_err ae;
		s3_mpu_abort(C, dst, id, &ae);
		free(jobs);
		free(id);
		return fail(&e);
	}
	rc = finish_mpu(dst, id, jobs, n, "part_size",
			json_integer((json_int_t)ps));
	free(jobs);
	free(id);
	return rc;
}

static int cmd_mpu_create(struct opts *o)
{
	need_args(o, 1);
	s3_put_opts po = {.content_type = o->content_type, .meta = o->meta,
			  .n_meta = o->n_meta};
	char *id = NULL;
	s3_err e;
	if (s3_mpu_create(C, o->args[0], &po, &id, NULL, &e) < 0)
		return fail(&e);
	emit(json_pack("{s:o}", "upload_id", jstr(id)));
	free(id);
	return 0;
}

static int cmd_mpu_part(struct opts *o)
{
	need_args(o, 4);
	int fd = open_range(o->args[3], o);
	http_upload b = http_upload_fd(fd, o->offset, o->length);
	char etag[S3_ETAG_MAX];
	s3_err e;
	char md5[25];
	const char *m = o->content_md5;
	if (o->md5) {
		char *mem = read_range(fd, o->offset, o->length);
		s3_content_md5(mem, o->length, md5);
		free(mem);
		m = md5;
	}
	int rc = s3_mpu_put_part(C, o->args[0], o->args[1],
				 (unsigned)num(o->args[2]), &b, m, etag, &e);
	close(fd);
	if (rc < 0)
		return fail(&e);
	emit(json_pack("{s:o}", "etag", jstr(etag)));
	return 0;
}

static int cmd_mpu_complete(struct opts *o)
{
	if (o->n_args < 3)
		usage("mpu-complete KEY ID N:ETAG...");
	size_t n = (size_t)o->n_args - 2;
	s3_part *parts = calloc(n, sizeof *parts);
	for (size_t i = 0; i < n; i++) {
		char *a = o->args[2 + i], *colon = strchr(a, ':');
		if (!colon)
			usage("N:ETAG");
		*colon = '\0';
		parts[i].number = (unsigned)num(a);
		snprintf(parts[i].etag, sizeof parts[i].etag, "%s", colon + 1);
	}
	char etag[S3_ETAG_MAX];
	s3_err e;
	int rc = s3_mpu_complete(C, o->args[0], o->args[1], parts, n, etag, &e);
	free(parts);
	if (rc < 0)
		return fail(&e);
	emit(json_pack("{s:o}", "etag", jstr(etag)));
	return 0;
}

static int cmd_abort(struct opts *o)
{
	need_args(o, 2);
	s3_err e;
	if (s3_mpu_abort(C, o->args[0], o->args[1], &e) < 0)
		return fail(&e);
	emit(json_pack("{s:b}", "aborted", 1));
	return 0;
}

static int cmd_list_uploads(struct opts *o)
{
	if (o->n_args > 1)
		usage("list-uploads [PREFIX]");
	const char *prefix = o->n_args ? o->args[0] : "";
	char *km = NULL, *um = NULL;
	unsigned pages = 0, count = 0;
	for (;;) {
		s3_uploads_result r;
		s3_err e;
		int rc = s3_list_multipart_uploads(C, prefix, km, um,
						   (unsigned)o->part_size, &r,
						   &e);
		free(km);
		free(um);
		km = um = NULL;
		if (rc < 0)
			return fail(&e);
		pages++;
		for (size_t i = 0; i < r.n_uploads; i++) {
			count++;
			emit(json_pack("{s:o,s:o,s:I}", "key",
				       jstr(r.uploads[i].key), "upload_id",
				       jstr(r.uploads[i].upload_id),
				       "initiated",
				       (json_int_t)r.uploads[i].initiated.tv_sec));
		}
		bool more = r.truncated;
		if (more) {
			km = r.next_key_marker ? strdup(r.next_key_marker) : NULL;
			um = r.next_upload_id_marker
				     ? strdup(r.next_upload_id_marker)
				     : NULL;
		}
		s3_uploads_result_free(&r);
		if (!more)
			break;
	}
	emit(json_pack("{s:i,s:i}", "count", (int)count, "pages", (int)pages));
	return 0;
}

static int cmd_copy(struct opts *o)
{
	need_args(o, 2);
	s3_copy_opts co = {
	    .directive = o->replace ? S3_METADATA_REPLACE : S3_METADATA_COPY,
	    .content_type = o->content_type, .meta = o->meta,
	    .n_meta = o->n_meta, .src_if_match = o->if_match,
	    .size = o->have_length ? o->length : 0};
	char etag[S3_ETAG_MAX];
	s3_err e;
	if (s3_copy_object(C, o->args[0], o->args[1], &co, etag, &e) < 0)
		return fail(&e);
	emit(json_pack("{s:o}", "etag", jstr(etag)));
	return 0;
}

static int cmd_delete(struct opts *o)
{
	need_args(o, 1);
	s3_err e;
	if (s3_delete_object(C, o->args[0], &e) < 0)
		return fail(&e);
	emit(json_pack("{s:b}", "deleted", 1));
	return 0;
}

static int cmd_delete_many(struct opts *o)
{
	char **keys = NULL;
	size_t n = 0, cap = 0;
	if (o->from_stdin) {
		char *line = NULL;
		size_t lcap = 0;
		ssize_t len;
		while ((len = getdelim(&line, &lcap, o->nul ? '\0' : '\n',
				       stdin)) >= 0) {
			if (len > 0 && line[len - 1] == (o->nul ? '\0' : '\n'))
				line[--len] = '\0';
			if (!len)
				continue;
			if (n == cap) {
				cap = cap ? 2 * cap : 1024;
				keys = realloc(keys, cap * sizeof *keys);
			}
			keys[n++] = strdup(line);
		}
		free(line);
	} else {
		keys = calloc((size_t)o->n_args + 1, sizeof *keys);
		for (int i = 0; i < o->n_args; i++)
			keys[n++] = strdup(o->args[i]);
	}
	size_t deleted = 0, failed = 0, batches = 0;
	int rc = 0;
	for (size_t at = 0; at < n && rc == 0; at += S3_DELETE_MAX) {
		size_t m = n - at < S3_DELETE_MAX ? n - at : S3_DELETE_MAX;
		s3_delete_status *st = calloc(m, sizeof *st);
		size_t nf = 0;
		s3_err e;
		batches++;
		if (s3_delete_objects(C, (const char *const *)keys + at, m, st,
				      &nf, &e) < 0) {
			rc = fail(&e);
		} else {
			for (size_t i = 0; i < m; i++) {
				if (!st[i].err) {
					deleted++;
					continue;
				}
				failed++;
				emit(json_pack("{s:o,s:o,s:s,s:o}", "key",
					       jstr(keys[at + i]), "code",
					       jstr(st[i].code), "errno",
					       errno_name(st[i].err), "message",
					       jstr(st[i].msg)));
			}
		}
		free(st);
	}
	if (rc == 0)
		emit(json_pack("{s:I,s:I,s:I}", "deleted", (json_int_t)deleted,
			       "failed", (json_int_t)failed, "batches",
			       (json_int_t)batches));
	for (size_t i = 0; i < n; i++)
		free(keys[i]);
	free(keys);
	return rc ? rc : failed ? 1 : 0;
}

static int cmd_head_meta(struct opts *o)
{
	need_args(o, 1);
	s3_head_ext_result h;
	s3_err e;
	if (s3_head_ext(C, o->args[0], &h, &e) < 0)
		return fail(&e);
	json_t *m = json_object();
	for (size_t i = 0; i < h.n_meta; i++)
		json_object_set_new(m, h.meta[i].name, jstr(h.meta[i].value));
	emit(json_pack("{s:I,s:o,s:o,s:I,s:o}", "size", (json_int_t)h.size,
		       "etag", jstr(h.etag), "content_type",
		       jstr(h.content_type), "mtime",
		       (json_int_t)h.mtime.tv_sec, "meta", m));
	s3_head_ext_result_free(&h);
	return 0;
}

/* s3_get_object: the whole object (at most --length bytes, default 64
 * MiB), printed as its size, SHA-256 and the version's ETag. */
static int cmd_get(struct opts *o)
{
	need_args(o, 1);
	char *body = NULL;
	size_t len = 0;
	s3_head_result h;
	s3_err e;
	size_t max = o->have_length ? (size_t)o->length : (64u << 20);
	if (s3_get_object(C, o->args[0], max, o->if_match, &body, &len, &h,
			  &e) < 0)
		return fail(&e);
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	char hex[2 * EVP_MAX_MD_SIZE + 1] = "";
	EVP_Digest(body, len, md, &mdlen, EVP_sha256(), NULL);
	for (unsigned i = 0; i < mdlen; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	emit(json_pack("{s:I,s:s,s:o,s:b}", "size", (json_int_t)len, "sha256",
		       hex, "etag", jstr(h.etag), "terminated",
		       body[len] == '\0'));
	free(body);
	return 0;
}

static int cmd_part_size(struct opts *o)
{
	if (o->n_args < 1 || o->n_args > 2)
		usage("part-size SIZE [MIN]");
	uint64_t size = num(o->args[0]);
	uint64_t ps = s3_part_size(size, o->n_args > 1 ? num(o->args[1]) : 0);
	emit(json_pack("{s:I,s:I}", "part_size", (json_int_t)ps, "parts",
		       (json_int_t)(ps ? s3_part_count(size, ps) : 0)));
	return 0;
}

/* ---- main --------------------------------------------------------------- */

static const struct {
	const char *name;
	int (*fn)(struct opts *o);
	bool network;
} cmds[] = {
    {"put", cmd_put, true},
    {"mpu-upload", cmd_mpu_upload, true},
    {"mpu-create", cmd_mpu_create, true},
    {"mpu-part", cmd_mpu_part, true},
    {"mpu-complete", cmd_mpu_complete, true},
    {"abort", cmd_abort, true},
    {"list-uploads", cmd_list_uploads, true},
    {"copy", cmd_copy, true},
    {"part-copy", cmd_part_copy, true},
    {"delete", cmd_delete, true},
    {"delete-many", cmd_delete_many, true},
    {"head-meta", cmd_head_meta, true},
    {"get", cmd_get, true},
    {"part-size", cmd_part_size, false},
};

int main(int argc, char **argv)
{
	const char *bucket = getenv("S3_BUCKET");
	bool verbose = false;
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "-v") == 0)
			verbose = true;
		else if (strcmp(argv[i], "-b") == 0 && i + 1 < argc)
			bucket = argv[++i];
		else
			usage("unknown option");
	}
	if (i >= argc)
		usage(NULL);
	const char *name = argv[i];
	int (*fn)(struct opts *) = NULL;
	bool network = false;
	for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++) {
		if (strcmp(cmds[k].name, name) == 0) {
			fn = cmds[k].fn;
			network = cmds[k].network;
		}
	}
	if (!fn)
		usage("unknown command");
	struct opts o;
	parse_opts(argc - i, argv + i, &o);
	log_init(verbose ? LOG_LVL_DEBUG : LOG_LVL_WARN, false);
	if (!network)
		return fn(&o);
	if (!bucket || !bucket[0])
		usage("no bucket: -b BUCKET or S3_BUCKET");
	curl_global_init(CURL_GLOBAL_DEFAULT);
	s3_settings s = {.bucket = strdup(bucket), .prefix = strdup("")};
	char *err = NULL;
	if (s3_settings_resolve(&s, &err) < 0)
		return fail_msg(err);
	creds_chain *creds = creds_chain_new(s.profile, s.region);
	http_loop_opts lo = {.ca_bundle = s.ca_bundle};
	L = http_loop_new(&lo);
	s3_client_opts co = {.retry = RETRY_POLICY_DEFAULT};
	const char *v = getenv("S3TOOL_MAX_ATTEMPTS");
	if (v && *v)
		co.retry.max_attempts = (unsigned)num(v);
	v = getenv("S3TOOL_TIMEOUT_MS");
	if (v && *v)
		co.timeout_ms = co.meta_timeout_ms = (long)num(v);
	C = creds && L ? s3_client_new(&s, creds, L, &co) : NULL;
	if (!C)
		return fail_msg("cannot start the S3 client");
	int rc = fn(&o);
	s3_client_free(C);
	http_loop_free(L);
	creds_chain_free(creds);
	s3_settings_free(&s);
	curl_global_cleanup();
	return rc;
}
