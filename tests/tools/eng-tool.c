/*
 * eng-tool: drives the commit engine (commit/engine.h) against a real S3
 * server, for tests/integration/test_engine.py.
 *
 *   eng-tool [-v] [-c CACHE_DIR] [-o KEY=N,...] STATE_DIR s3://BUCKET/PREFIX
 *
 * Options (-o): conns, part (part_size), mpmin (multipart_min), lease,
 * maxstaged.  Endpoint and credentials come from the environment as for
 * ckptfs.  Commands are read from stdin, one per line; each prints one JSON
 * line {"op":..., "t": seconds since start, ...}:
 *
 *   begin-dir ROOT [MROOT] | begin-file PATH [MROOT]
 *                                       start a transaction (named by ROOT;
 *                                       MROOT: its manifest_root)
 *   put PATH LOCAL_FILE [MODE]          copy LOCAL_FILE into staging, put it
 *                                       (transaction: the longest root that
 *                                       is PATH or a parent of it)
 *   dir PATH | drop PATH | move FROM TO [MROOT]
 *   seal ROOT | abort ROOT | wait ROOT | wait-file PATH
 *   rdel PATH dir|file | rren FROM TO dir|file [MANIFEST_ROOT]
 *   sync | status | sleep SECONDS | cache-stats
 *
 * At end of input the engine is closed, waiting for everything unless the
 * last command was "exit-now" (leaves the journal to resume).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "commit/engine.h"
#include "http/loop.h"
#include "s3/client.h"
#include "s3/config.h"
#include "util/clock.h"
#include "util/log.h"

static double T0;

static void emit(json_t *o)
{
	json_object_set_new(o, "t", json_real(clock_mono() - T0));
	char *s = json_dumps(o, JSON_COMPACT);
	puts(s ? s : "{}");
	free(s);
	json_decref(o);
	fflush(stdout);
}

static void result(const char *op, int rc)
{
	emit(json_pack("{s:s,s:i}", "op", op, "rc", rc));
}

struct alias {
	char *root;
	uint64_t id;
};
static struct alias A[4096];
static size_t NA;

static uint64_t txn_of(const char *path)
{
	size_t best = 0;
	uint64_t id = 0;
	for (size_t i = 0; i < NA; i++) {
		size_t n = strlen(A[i].root);
		if (!strncmp(path, A[i].root, n) &&
		    (path[n] == '\0' || path[n] == '/') && n >= best) {
			best = n;
			id = A[i].id;
		}
	}
	return id;
}

static int put_file(eng *e, const char *path, const char *local,
		    unsigned mode)
{
	int in = open(local, O_RDONLY);
	if (in < 0)
		return -errno;
	uint64_t sid;
	int fd = eng_stage_create(e, &sid);
	if (fd < 0) {
		close(in);
		return fd;
	}
	static char b[1 << 20];
	ssize_t n;
	uint64_t size = 0;
	int rc = 0;
	while ((n = read(in, b, sizeof b)) > 0) {
		if ((rc = eng_stage_reserve(e, (uint64_t)n)) < 0)
			break;
		if (write(fd, b, (size_t)n) != n) {
			rc = -EIO;
			break;
		}
		size += (uint64_t)n;
	}
	close(in);
	close(fd);
	struct stat st;
	stat(local, &st);
	eng_meta m = {.mode = mode ? mode : (st.st_mode & 07777),
		      .uid = st.st_uid,
		      .gid = st.st_gid,
		      .mtime = st.st_mtim};
	if (!rc)
		rc = eng_file_put(e, txn_of(path), path, sid, size, &m);
	return rc;
}

static void progress(void *arg, uint64_t done, uint64_t total)
{
	(void)arg;
	emit(json_pack("{s:s,s:I,s:I}", "op", "progress", "done",
		       (json_int_t)done, "total", (json_int_t)total));
}

static void status(eng *e)
{
	eng_txn_status *v;
	size_t n;
	if (eng_status(e, &v, &n) < 0)
		return;
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(
		    a, json_pack("{s:I,s:s,s:s,s:I,s:I,s:f,s:s?}", "id",
				 (json_int_t)v[i].id, "path", v[i].path, "state",
				 v[i].state, "done", (json_int_t)v[i].bytes_done,
				 "total", (json_int_t)v[i].bytes_total, "rate",
				 v[i].rate, "error", v[i].error));
	eng_status_free(v, n);
	emit(json_pack("{s:s,s:o}", "op", "status", "txns", a));
}

static int command(eng *e, cache *rc_, char *line, bool *exit_now)
{
	char *argv[8] = {0};
	int argc = 0;
	for (char *s = NULL, *t = strtok_r(line, " \t\n", &s); t && argc < 8;
	     t = strtok_r(NULL, " \t\n", &s))
		argv[argc++] = t;
	if (!argc)
		return 0;
	const char *op = argv[0];
	int rc = -EINVAL;
	uint64_t id = 0;
	if ((!strcmp(op, "begin-dir") || !strcmp(op, "begin-file")) &&
	    argc >= 2) {
		rc = eng_txn_begin(e, argv[1], op[6] == 'd',
				   argc > 2 ? argv[2] : NULL, &id);
		if (!rc && NA < 4096)
			A[NA++] = (struct alias){strdup(argv[1]), id};
		emit(json_pack("{s:s,s:i,s:I}", "op", op, "rc", rc, "txn",
			       (json_int_t)id));
		return 0;
	} else if (!strcmp(op, "put") && argc >= 3) {
		rc = put_file(e, argv[1], argv[2],
			      argc > 3 ? (unsigned)strtoul(argv[3], NULL, 8) : 0);
	} else if (!strcmp(op, "dir") && argc == 2) {
		eng_meta m = {.mode = 0755};
		rc = eng_dir_put(e, txn_of(argv[1]), argv[1], &m);
	} else if (!strcmp(op, "drop") && argc == 2) {
		rc = eng_file_drop(e, txn_of(argv[1]), argv[1]);
	} else if (!strcmp(op, "move") && (argc == 3 || argc == 4)) {
		uint64_t from = txn_of(argv[1]);
		bool root = false;
		for (size_t i = 0; i < NA; i++)
			if (A[i].id == from && !strcmp(A[i].root, argv[1])) {
				root = true;
				free(A[i].root);
				A[i].root = strdup(argv[2]);
			}
		uint64_t to = root ? from : txn_of(argv[2]);
		rc = eng_file_move(e, from, argv[1], to ? to : from, argv[2],
				   argc > 3 ? argv[3] : NULL);
	} else if (!strcmp(op, "seal") && argc == 2) {
		rc = eng_txn_seal(e, txn_of(argv[1]));
	} else if (!strcmp(op, "abort") && argc == 2) {
		rc = eng_txn_abort(e, txn_of(argv[1]));
	} else if (!strcmp(op, "wait") && argc == 2) {
		rc = eng_wait_txn(e, txn_of(argv[1]));
	} else if (!strcmp(op, "wait-file") && argc == 2) {
		rc = eng_wait_file(e, argv[1]);
	} else if (!strcmp(op, "rdel") && argc == 3) {
		rc = eng_remote_delete(e, argv[1], !strcmp(argv[2], "dir"));
	} else if (!strcmp(op, "rren") && argc >= 4) {
		rc = eng_remote_rename(e, argv[1], argv[2],
				       !strcmp(argv[3], "dir"),
				       argc > 4 ? argv[4] : NULL);
	} else if (!strcmp(op, "sync")) {
		rc = eng_sync(e, progress, NULL);
	} else if (!strcmp(op, "status")) {
		status(e);
		return 0;
	} else if (!strcmp(op, "sleep") && argc == 2) {
		usleep((useconds_t)(atof(argv[1]) * 1e6));
		rc = 0;
	} else if (!strcmp(op, "cache-stats") && rc_) {
		cache_stats st;
		cache_get_stats(rc_, &st);
		emit(json_pack("{s:s,s:I,s:I}", "op", op, "entries",
			       (json_int_t)st.entries, "bytes",
			       (json_int_t)st.bytes));
		return 0;
	} else if (!strcmp(op, "exit-now")) {
		*exit_now = true;
		rc = 0;
	}
	result(op, rc);
	return rc;
}

static unsigned long long opt_num(const char *opts, const char *name)
{
	const char *p = opts ? strstr(opts, name) : NULL;
	if (!p || p[strlen(name)] != '=')
		return 0;
	return strtoull(p + strlen(name) + 1, NULL, 0);
}

int main(int argc, char **argv)
{
	bool verbose = false;
	const char *cache_dir = NULL, *opts = NULL;
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "-v"))
			verbose = true;
		else if (!strcmp(argv[i], "-c") && i + 1 < argc)
			cache_dir = argv[++i];
		else if (!strcmp(argv[i], "-o") && i + 1 < argc)
			opts = argv[++i];
	}
	if (argc - i != 2) {
		fprintf(stderr, "usage: eng-tool [-v] [-c CACHE] [-o K=N,...] "
				"STATE_DIR s3://BUCKET/PREFIX < commands\n");
		return 2;
	}
	T0 = clock_mono();
	log_init(verbose ? LOG_LVL_DEBUG : LOG_LVL_INFO, false);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	s3_settings s = {0};
	char *err = NULL;
	if (s3_parse_url(argv[i + 1], &s.bucket, &s.prefix, &err) < 0 ||
	    s3_settings_resolve(&s, &err) < 0) {
		fprintf(stderr, "eng-tool: %s\n", err);
		return 1;
	}
	creds_chain *creds = creds_chain_new(s.profile, s.region);
	http_loop_opts lo = {.ca_bundle = s.ca_bundle,
			     .max_host_connections = 64};
	http_loop *L = http_loop_new(&lo);
	s3_client_opts co = {.retry = RETRY_POLICY_DEFAULT};
	s3_client *C = creds && L ? s3_client_new(&s, creds, L, &co) : NULL;
	if (!C) {
		fprintf(stderr, "eng-tool: cannot start the S3 client\n");
		return 1;
	}
	cache *rc = NULL;
	if (cache_dir) {
		cache_opts cop = {.dir = cache_dir};
		if (cache_open(&cop, C, s.bucket, &rc, &err) < 0) {
			fprintf(stderr, "eng-tool: %s\n", err);
			return 1;
		}
	}
	eng_opts eo = {.conns = (unsigned)opt_num(opts, "conns"),
		       .part_size = opt_num(opts, "part"),
		       .multipart_min = opt_num(opts, "mpmin"),
		       .lease_s = (unsigned)opt_num(opts, "lease"),
		       .max_staged = opt_num(opts, "maxstaged")};
	eng *e;
	int r = eng_open(C, rc, argv[i], s.bucket, s.prefix, &eo, &e, &err);
	emit(json_pack("{s:s,s:i,s:s}", "op", "open", "rc", r, "writer",
		       r ? "" : eng_writer(e)));
	if (r) {
		fprintf(stderr, "eng-tool: %s\n", err ? err : strerror(-r));
		free(err); /* everything freed: LeakSanitizer runs at exit */
		cache_shutdown(rc);
		s3_client_free(C);
		http_loop_free(L);
		cache_free(rc);
		creds_chain_free(creds);
		s3_settings_free(&s);
		curl_global_cleanup();
		return 1;
	}
	char line[4096];
	bool exit_now = false;
	int failures = 0;
	while (!exit_now && fgets(line, sizeof line, stdin))
		if (command(e, rc, line, &exit_now) < 0)
			failures++;
	if (exit_now) {
		fflush(stdout);
		_exit(3); /* like a crash: nothing closed */
	}
	eng_close(e, true);
	emit(json_pack("{s:s}", "op", "closed"));
	cache_shutdown(rc);
	s3_client_free(C);
	http_loop_free(L);
	cache_free(rc);
	creds_chain_free(creds);
	s3_settings_free(&s);
	for (size_t k = 0; k < NA; k++)
		free(A[k].root);
	curl_global_cleanup();
	return failures ? 1 : 0;
}
