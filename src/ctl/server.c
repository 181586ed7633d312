/*
 * ctl server: answers status, prefetch, commit, sync, retry and drop
 * requests on the mount's socket, and hands verify to ctl/verify.c.
 *
 * One accept thread; each connection is served by its own detached thread
 * (prefetch can run for minutes), at most CTL_MAX_CONNS at once, each from
 * this user or root only (ctl/sock.c).  A connection has
 * CTL_REQUEST_TIMEOUT_S to send its request, and a reply waits at most
 * CTL_SEND_TIMEOUT_S for a client that does not read.  ctl_server_stop
 * closes the listener, wakes the connections still waiting for their
 * request, flags the others to stop and waits until all have finished, so
 * nothing they use (the cache, the S3 client) is freed under them.
 *
 * Prefetch fetches what the mount shows: it reads directories through the
 * mount's listing path (fs_listing_fetch: the namespace rules, children of
 * live pending markers hidden, transaction roots' manifests) and filters
 * them by the manifests of the nearest transaction root, as the mount's
 * lookups do (fs/nodes.c),
 * so files of pending transactions are never downloaded.
 */
#include "ctl/ctl.h"
#include "ctl/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "commit/engine.h"
#include "fs/listing.h"
#include "fs/ops.h"
#include "proto/keys.h"
#include "proto/complete.h"
#include "proto/namespace.h"
#include "proto/visibility.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/log.h"

/* connections served at once; more are closed as they come */
#define CTL_MAX_CONNS 64
/* seconds a reply may wait for a client that does not read */
#define CTL_SEND_TIMEOUT_S 10

struct ctl_server {
	ctl_target t;
	ctl_claim claim;
	int lfd;
	int stop_pipe[2]; /* readable once stopping: wakes every poll */
	bool started;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned conns; /* [mu] */
	bool stopping;  /* [mu] */
};

/* ---- status ----------------------------------------------------------- */

/* The mount's fs_ctx, or NULL (not up yet). */
static fs_ctx *target_fs(ctl_server *s)
{
	return s->t.fs ? __atomic_load_n(s->t.fs, __ATOMIC_ACQUIRE) : NULL;
}

/* The mount's commit engine, or NULL (read-only, or not up yet). */
static eng *target_eng(ctl_server *s)
{
	fs_ctx *fs = target_fs(s);
	return fs ? fs_ctx_engine(fs) : NULL;
}

/* eng_status as JSON: [{"path","state","bytes_done","bytes_total",
 * "rate_bytes_per_s","error","retrying"}...], or JSON null without an
 * engine ("retrying": failed by transient errors, still tried again). */
static json_t *pending_json(eng *e, char *err, size_t errsz)
{
	if (!e)
		return json_null();
	eng_txn_status *v = NULL;
	size_t n = 0;
	int rc = eng_status(e, &v, &n);
	json_t *a = json_array();
	if (rc < 0) {
		snprintf(err, errsz, "%s", strerror(-rc));
		return a;
	}
	for (size_t i = 0; i < n; i++)
		json_array_append_new(
			a, json_pack("{s:I, s:s, s:s, s:I, s:I, s:f, s:s?, s:b}",
				     "id", (json_int_t)v[i].id, "path",
				     v[i].path ? v[i].path : "", "state",
				     v[i].state ? v[i].state : "",
				     "bytes_done", (json_int_t)v[i].bytes_done,
				     "bytes_total",
				     (json_int_t)v[i].bytes_total,
				     "rate_bytes_per_s", v[i].rate, "error",
				     v[i].error, "retrying", v[i].retrying));
	eng_status_free(v, n);
	return a;
}

static void do_status(ctl_server *s, int fd)
{
	cache_stats st;
	cache_get_stats(s->t.cache, &st);
	json_t *c = json_pack(
		"{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
		"dir", cache_dir(s->t.cache), "entries", (json_int_t)st.entries,
		"bytes", (json_int_t)st.bytes, "pinned_bytes",
		(json_int_t)st.pinned_bytes, "cap", (json_int_t)st.cap,
		"min_free", (json_int_t)st.min_free, "hits",
		(json_int_t)st.hits, "misses", (json_int_t)st.misses,
		"uncached_opens", (json_int_t)st.uncached_opens, "evictions",
		(json_int_t)st.evictions, "verify_failures",
		(json_int_t)st.verify_failures);
	json_t *d = json_pack("{s:I, s:I, s:f}", "active",
			      (json_int_t)st.active_downloads,
			      "downloaded_bytes",
			      (json_int_t)st.downloaded_bytes, "rate_bytes_per_s",
			      st.download_rate);
	eng *e = target_eng(s);
	char perr[256] = "";
	json_t *p = pending_json(e, perr, sizeof perr);
	json_t *r = json_pack("{s:s, s:s, s:s, s:i, s:b, s:o, s:o, s:o, s:b}",
			      "mountpoint", s->t.mountpoint, "bucket",
			      s->t.bucket, "prefix", s->t.prefix, "pid",
			      (int)getpid(), "writable", e != NULL, "cache", c,
			      "downloads", d, "pending", p, "done", 1);
	if (r && perr[0])
		json_object_set_new(r, "pending_error", json_string(perr));
	if (r)
		json_object_set_new(r, "metrics", ctl_metrics_json(&s->t));
	if (r && s->t.metrics_url)
		json_object_set_new(r, "metrics_endpoint",
				    json_string(s->t.metrics_url));
	ctl_send_json(fd, r);
}

/* ---- prefetch --------------------------------------------------------- */

typedef struct pf_file {
	cache_file *cf;
	uint64_t size;
} pf_file;

typedef struct pf_set {
	pf_file *v;
	size_t n, cap;
	uint64_t total;
} pf_set;

static int pf_add(ctl_server *s, pf_set *set, const char *key,
		  const char *etag, uint64_t size)
{
	if (size == 0)
		return 0;
	if (set->n == set->cap) {
		size_t nc = set->cap ? set->cap * 2 : 64;
		pf_file *nv = realloc(set->v, nc * sizeof *nv);
		if (!nv)
			return -ENOMEM;
		set->v = nv;
		set->cap = nc;
	}
	bool hit;
	cache_file *cf;
	int rc = cache_file_open(s->t.cache, key, etag, size, &cf, &hit);
	if (rc < 0)
		return rc;
	set->v[set->n++] = (pf_file){cf, size};
	set->total += size;
	return 0;
}

/* The manifests in force for a directory: those of the nearest transaction
 * root at or above it within the mount (m NULL: none), and the length of
 * that root's path relative to the mount (a leading part of the
 * directory's). */
typedef struct pf_scope {
	const vis_manifest *m;
	size_t root_len;
} pf_scope;

static void manifest_free(vis_manifest *m)
{
	if (m) {
		vis_manifest_free(m);
		free(m);
	}
}

/*
 * Directory rel of the mount ("" or without trailing '/') as the mount
 * shows it: *out (finished and filtered; the caller frees it), *own its
 * manifests when it is a transaction root (the caller frees them; *sc then
 * points at them), *sc the scope for rel.  Returns 0, or a negative errno
 * with e filled.
 */
static int pf_list(ctl_server *s, const char *rel, pf_scope *sc, ns_dir *out,
		   vis_manifest **own, s3_err *e)
{
	buf p = BUF_INIT;
	buf_printf(&p, "%s%s%s", s->t.prefix, rel, rel[0] ? "/" : "");
	int rc = fs_listing_fetch(s->t.s3, NULL, buf_cstr(&p), false, NULL,
				  NULL, out, own, e);
	buf_free(&p);
	if (rc < 0)
		return -(e->err ? e->err : EIO);
	if (*own)
		*sc = (pf_scope){*own, strlen(rel)};
	if (sc->m) {
		const char *in_root = rel + sc->root_len;
		if (*in_root == '/')
			in_root++;
		vis_filter_listing(out, sc->m, in_root);
	}
	/* a checkpoint without its last file is empty here too */
	fs_ctx *fs = s->t.fs ? *s->t.fs : NULL;
	if (fs)
		vis_rules_apply(out, fs_ctx_complete(fs));
	return 0;
}

/* Opens every visible file under directory rel, recursively. */
static int pf_add_dir(ctl_server *s, pf_set *set, const char *rel,
		      pf_scope sc, s3_err *e)
{
	ns_dir d;
	vis_manifest *own = NULL;
	int rc = pf_list(s, rel, &sc, &d, &own, e);
	if (rc < 0)
		return rc;
	buf child = BUF_INIT;
	for (size_t i = 0; i < d.n && rc == 0; i++) {
		const ns_entry *en = &d.v[i];
		buf_reset(&child);
		buf_printf(&child, "%s%s%s", rel, rel[0] ? "/" : "", en->name);
		if (en->is_dir) {
			rc = pf_add_dir(s, set, buf_cstr(&child), sc, e);
		} else {
			char *key = proto_key(s->t.prefix, buf_cstr(&child));
			rc = key ? pf_add(s, set, key, en->etag, en->size)
				 : -ENOMEM;
			free(key);
		}
	}
	buf_free(&child);
	ns_dir_free(&d);
	manifest_free(own);
	return rc;
}

/*
 * Opens rel: a file, or every file under a directory.  Walks down from the
 * mount root one listing per component, so the manifests of a transaction
 * root above rel apply and a name hidden anywhere on the way is ENOENT.
 */
static int pf_add_path(ctl_server *s, pf_set *set, const char *rel, s3_err *e)
{
	pf_scope sc = {NULL, 0};
	vis_manifest *held = NULL; /* sc.m, once a directory had manifests */
	buf dir = BUF_INIT;        /* the path walked so far */
	int rc = 0;
	const char *p = rel;
	while (*p == '/')
		p++;
	if (!*p)
		rc = 1; /* the mount root */
	while (rc == 0) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		const char *next = p + len;
		while (*next == '/')
			next++;
		ns_dir d;
		vis_manifest *own = NULL;
		rc = pf_list(s, buf_cstr(&dir), &sc, &d, &own, e);
		if (rc < 0)
			break;
		if (own) {
			manifest_free(held);
			held = own;
		}
		char *name = strndup(p, len);
		const ns_entry *en = name ? ns_dir_find(&d, name) : NULL;
		if (dir.len)
			buf_putc(&dir, '/');
		buf_printf(&dir, "%s", name ? name : "");
		free(name);
		if (!en || (!en->is_dir && *next)) {
			rc = -ENOENT;
		} else if (!en->is_dir) {
			char *key = proto_key(s->t.prefix, buf_cstr(&dir));
			rc = key ? pf_add(s, set, key, en->etag, en->size)
				 : -ENOMEM;
			free(key);
			rc = rc < 0 ? rc : 2; /* done */
		} else if (!*next) {
			rc = 1; /* the directory to fetch */
		}
		ns_dir_free(&d);
		p = next;
	}
	if (rc == 1) {
		rc = pf_add_dir(s, set, buf_cstr(&dir), sc, e);
		if (rc == 0 && set->n == 0 && dir.len)
			rc = -ENOENT;
	}
	manifest_free(held);
	buf_free(&dir);
	return rc < 0 ? rc : 0;
}

static bool pf_progress(pf_set *set, uint64_t *done, int *err)
{
	*done = 0;
	*err = 0;
	for (size_t i = 0; i < set->n; i++) {
		uint64_t d, t;
		cache_file_progress(set->v[i].cf, &d, &t);
		*done += d;
		int e = cache_file_error(set->v[i].cf);
		if (e == ESTALE) /* replaced while prefetched */
			e = EIO;
		if (e)
			*err = e;
	}
	return *done == set->total;
}

static bool stopping(ctl_server *s)
{
	pthread_mutex_lock(&s->mu);
	bool st = s->stopping;
	pthread_mutex_unlock(&s->mu);
	return st;
}

static bool stopping_cb(void *arg)
{
	return stopping(arg);
}

static void pf_wait(ctl_server *s, int fd, pf_set *set)
{
	uint64_t done;
	int err;
	while (!pf_progress(set, &done, &err) && !err && !stopping(s)) {
		if (ctl_send_json(fd, json_pack("{s:I, s:I, s:I}", "done_bytes",
					    (json_int_t)done, "total_bytes",
					    (json_int_t)set->total, "files",
					    (json_int_t)set->n)) < 0)
			return; /* client went away; downloads go on */
		usleep(200 * 1000);
	}
	if (err)
		ctl_send_error(fd, strerror(err));
	else if (stopping(s))
		ctl_send_error(fd, "the filesystem is being unmounted");
	else
		ctl_send_json(fd, json_pack("{s:I, s:I, s:I, s:b}", "done_bytes",
					(json_int_t)done, "total_bytes",
					(json_int_t)set->total, "files",
					(json_int_t)set->n, "done", 1));
}

static void do_prefetch(ctl_server *s, int fd, const char *rel)
{
	if (strstr(rel, "..") || rel[0] == '/') {
		ctl_send_error(fd, "path must be relative to the mount");
		return;
	}
	pf_set set = {0};
	s3_err e = {0};
	int rc = pf_add_path(s, &set, rel, &e);
	if (rc < 0)
		ctl_send_error(fd, e.msg[0] ? e.msg : strerror(-rc));
	else
		pf_wait(s, fd, &set);
	for (size_t i = 0; i < set.n; i++)
		cache_file_close(set.v[i].cf);
	free(set.v);
}

/* ---- commit and sync ---------------------------------------------------- */

static bool rel_ok(const char *rel)
{
	if (rel[0] == '/')
		return false;
	for (const char *p = rel; *p;) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		if (len == 0 || (len == 1 && p[0] == '.') ||
		    (len == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		if (!slash)
			break;
		p = slash + 1;
	}
	return true;
}

/* Whether transaction path t concerns a commit of rel: t is rel, lies
 * under it, or holds it. */
static bool txn_concerns(const char *t, const char *rel)
{
	if (!rel[0])
		return true;
	size_t tl = strlen(t), rl = strlen(rel);
	size_t m = tl < rl ? tl : rl;
	return !strncmp(t, rel, m) &&
	       (tl == rl || (tl > rl ? t[rl] == '/' : rel[tl] == '/'));
}

/* The transactions a commit of rel concerns (a snapshot of eng_status). */
static json_t *concerned(eng *e, const char *rel, uint64_t *done,
			 uint64_t *total)
{
	eng_txn_status *v = NULL;
	size_t n = 0;
	json_t *a = json_array();
	*done = *total = 0;
	if (eng_status(e, &v, &n) < 0)
		return a;
	for (size_t i = 0; i < n; i++) {
		if (!v[i].path || !txn_concerns(v[i].path, rel))
			continue;
		json_array_append_new(a, json_pack("{s:s, s:I}", "path",
						   v[i].path, "bytes",
						   (json_int_t)v[i].bytes_total));
		*done += v[i].bytes_done;
		*total += v[i].bytes_total;
	}
	eng_status_free(v, n);
	return a;
}

struct commit_watch {
	ctl_server *s;
	eng *e;
	int fd;
	const char *rel;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool finished; /* [mu] */
};

/* Sends progress of the concerned transactions about twice a second
 * while fs_commit_path waits. */
static void *commit_watch_main(void *arg)
{
	struct commit_watch *w = arg;
	pthread_mutex_lock(&w->mu);
	while (!w->finished) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 500 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&w->cv, &w->mu, &ts);
		if (w->finished)
			break;
		pthread_mutex_unlock(&w->mu);
		uint64_t done, total;
		json_decref(concerned(w->e, w->rel, &done, &total));
		int rc = ctl_send_json(w->fd,
				   json_pack("{s:b, s:I, s:I}", "done", 0,
					     "bytes_done", (json_int_t)done,
					     "bytes_total", (json_int_t)total));
		pthread_mutex_lock(&w->mu);
		if (rc < 0)
			break; /* the client went away; the commit goes on */
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

static void do_commit(ctl_server *s, int fd, const char *rel)
{
	if (!rel_ok(rel)) {
		ctl_send_error(fd, "path must be relative to the mount");
		return;
	}
	fs_ctx *fs = target_fs(s);
	eng *e = target_eng(s);
	if (!e) {
		ctl_send_error(fd, "the mount is read-only: nothing to commit");
		return;
	}
	uint64_t done, total;
	json_t *what = concerned(e, rel, &done, &total);
	struct commit_watch w = {.s = s, .e = e, .fd = fd, .rel = rel};
	pthread_mutex_init(&w.mu, NULL);
	pthread_cond_init(&w.cv, NULL);
	pthread_t t;
	bool watching = pthread_create(&t, NULL, commit_watch_main, &w) == 0;
	char err[512] = "";
	int rc = fs_commit_path(fs, rel, err, sizeof err);
	pthread_mutex_lock(&w.mu);
	w.finished = true;
	pthread_cond_signal(&w.cv);
	pthread_mutex_unlock(&w.mu);
	if (watching)
		pthread_join(t, NULL);
	pthread_cond_destroy(&w.cv);
	pthread_mutex_destroy(&w.mu);
	if (rc == -ENOENT && json_array_size(what) == 0) {
		/* nothing pending at or under rel: it is visible already (the
		 * client checked that the path exists).  With transactions
		 * there that fs_commit_path would not seal (temp names), its
		 * message is an error below. */
		json_decref(what);
		ctl_send_json(fd, json_pack("{s:[], s:s, s:b}", "committed",
					"note", err[0] ? err : "nothing pending",
					"done", 1));
	} else if (rc < 0) {
		json_decref(what);
		ctl_send_error(fd, err[0] ? err : strerror(-rc));
	} else {
		ctl_send_json(fd, json_pack("{s:o, s:I, s:b}", "committed", what,
					"bytes", (json_int_t)total, "done", 1));
	}
}

struct sync_progress {
	int fd;
	bool gone; /* the client closed the connection */
	uint64_t done, total;
};

static void sync_progress(void *arg, uint64_t done, uint64_t total)
{
	struct sync_progress *p = arg;
	p->done = done;
	p->total = total;
	if (!p->gone &&
	    ctl_send_json(p->fd, json_pack("{s:b, s:I, s:I}", "done", 0,
				       "bytes_done", (json_int_t)done,
				       "bytes_total", (json_int_t)total)) < 0)
		p->gone = true; /* the sync goes on; nobody to tell */
}

static void do_sync(ctl_server *s, int fd)
{
	fs_ctx *fs = target_fs(s);
	if (!target_eng(s)) {
		/* a read-only mount has nothing pending */
		ctl_send_json(fd, json_pack("{s:I, s:I, s:b, s:b}", "bytes_done",
					(json_int_t)0, "bytes_total",
					(json_int_t)0, "writable", 0, "done",
					1));
		return;
	}
	struct sync_progress p = {.fd = fd};
	int rc = fs_sync(fs, sync_progress, &p);
	if (rc < 0) {
		/* name the step that failed, its path and the server's
		 * error, not just an errno */
		char *why = eng_failed_text(target_eng(s));
		ctl_send_error(fd, why ? why : strerror(-rc));
		free(why);
	} else
		ctl_send_json(fd, json_pack("{s:I, s:I, s:b, s:b}", "bytes_done",
					(json_int_t)p.done, "bytes_total",
					(json_int_t)p.total, "writable", 1,
					"done", 1));
}

/* ---- operator: failed steps ---------------------------------------------- */

static uint64_t req_id(json_t *req)
{
	json_t *v = json_object_get(req, "id");
	return json_is_integer(v) && json_integer_value(v) > 0
		       ? (uint64_t)json_integer_value(v)
		       : 0;
}

static void do_retry(ctl_server *s, int fd, uint64_t id)
{
	eng *e = target_eng(s);
	int n = e ? eng_step_retry(e, id) : -ENOENT;
	if (n == -EBUSY)
		ctl_send_error(fd, "poisoned by a failed write (`ckptfs "
				   "status` names the file): a retry cannot "
				   "lift that; write the file again or remove "
				   "it, or `ckptfs drop MOUNT STEP` gives the "
				   "step up");
	else if (n < 0)
		ctl_send_error(fd, id ? "no failed step with that id"
				  : "no step has failed");
	else
		ctl_send_json(fd, json_pack("{s:i, s:b}", "retried", n, "done", 1));
}

static void do_drop(ctl_server *s, int fd, uint64_t id)
{
	eng *e = target_eng(s);
	char *what = NULL;
	if (!id) {
		ctl_send_error(fd, "which step? (the id `ckptfs status` shows)");
		return;
	}
	int rc = e ? eng_step_drop(e, id, &what) : -ENOENT;
	if (rc < 0)
		ctl_send_error(fd, "no pending step with that id");
	else
		ctl_send_json(fd, json_pack("{s:s, s:b}", "dropped", what ? what : "",
					"done", 1));
	free(what);
}

/* ---- connections ------------------------------------------------------ */

struct conn {
	ctl_server *s;
	int fd;
};

/*
 * Reads the request line into line (at most cap - 1 bytes).  Its length;
 * 0 when the client went away, -ETIMEDOUT after CTL_REQUEST_TIMEOUT_S
 * without a whole line, -ESHUTDOWN when the server stops first: a client
 * that says nothing holds neither the unmount nor the daemon's exit.
 */
static ssize_t read_request(ctl_server *s, int fd, char *line, size_t cap)
{
	double deadline = clock_mono() + CTL_REQUEST_TIMEOUT_S;
	size_t n = 0;
	while (n < cap - 1) {
		int left = (int)((deadline - clock_mono()) * 1000);
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p[2] = {{fd, POLLIN, 0},
				      {s->stop_pipe[0], POLLIN, 0}};
		int r = poll(p, 2, left);
		if (r < 0 && errno != EINTR)
			return 0;
		if (r <= 0)
			continue;
		if (p[1].revents)
			return -ESHUTDOWN;
		ssize_t got = recv(fd, line + n, cap - 1 - n, MSG_DONTWAIT);
		if (got < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (got <= 0)
			return 0;
		n += (size_t)got;
		if (memchr(line, '\n', n))
			break;
	}
	return (ssize_t)n;
}

static void handle(ctl_server *s, int fd)
{
	char line[8192];
	ssize_t got = read_request(s, fd, line, sizeof line);
	if (got == -ETIMEDOUT) {
		char msg[64];
		snprintf(msg, sizeof msg, "no request within %d s",
			 CTL_REQUEST_TIMEOUT_S);
		ctl_send_error(fd, msg);
		return;
	}
	if (got == -ESHUTDOWN)
		ctl_send_error(fd, "the filesystem is being unmounted");
	if (got <= 0)
		return;
	size_t n = (size_t)got;
	line[n] = '\0';
	json_error_t je;
	json_t *req = json_loads(line, JSON_DISABLE_EOF_CHECK, &je);
	const char *cmd = req ? json_string_value(json_object_get(req, "cmd"))
			      : NULL;
	if (!cmd)
		ctl_send_error(fd, "malformed request");
	else if (!strcmp(cmd, "status"))
		do_status(s, fd);
	else if (!strcmp(cmd, "prefetch") &&
		 json_is_string(json_object_get(req, "path")))
		do_prefetch(s, fd,
			    json_string_value(json_object_get(req, "path")));
	else if (!strcmp(cmd, "commit") &&
		 json_is_string(json_object_get(req, "path")))
		do_commit(s, fd,
			  json_string_value(json_object_get(req, "path")));
	else if (!strcmp(cmd, "sync"))
		do_sync(s, fd);
	else if (!strcmp(cmd, "retry"))
		do_retry(s, fd, req_id(req));
	else if (!strcmp(cmd, "drop"))
		do_drop(s, fd, req_id(req));
	else if (!strcmp(cmd, "verify") &&
		 json_is_string(json_object_get(req, "path")))
		ctl_do_verify(&s->t, fd,
			      json_string_value(json_object_get(req, "path")),
			      (unsigned)json_integer_value(
				  json_object_get(req, "threads")),
			      json_is_true(json_object_get(req, "all")),
			      stopping_cb, s);
	else
		ctl_send_error(fd, "unknown command");
	json_decref(req);
}

static void *conn_main(void *arg)
{
	struct conn *c = arg;
	ctl_server *s = c->s;
	handle(s, c->fd);
	close(c->fd);
	free(c);
	pthread_mutex_lock(&s->mu);
	s->conns--;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

static void *accept_main(void *arg)
{
	ctl_server *s = arg;
	for (;;) {
		struct pollfd p[2] = {{s->lfd, POLLIN, 0},
				      {s->stop_pipe[0], POLLIN, 0}};
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		unsigned uid;
		if (!ctl_peer_trusted(fd, &uid)) {
			/* the directory keeps others out; this is the
			 * second lock */
			log_warn("control socket: refused a client of uid %u",
				 uid);
			close(fd);
			continue;
		}
		pthread_mutex_lock(&s->mu);
		bool full = s->conns >= CTL_MAX_CONNS;
		if (!full)
			s->conns++;
		pthread_mutex_unlock(&s->mu);
		if (full) {
			ctl_send_error(fd, "too many control connections");
			close(fd);
			continue;
		}
		struct timeval tv = {CTL_SEND_TIMEOUT_S, 0};
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
		struct conn *c = malloc(sizeof *c);
		pthread_t t;
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		if (c)
			*c = (struct conn){s, fd};
		if (!c || pthread_create(&t, &at, conn_main, c) != 0) {
			close(fd);
			free(c);
			pthread_mutex_lock(&s->mu);
			s->conns--;
			pthread_mutex_unlock(&s->mu);
		}
		pthread_attr_destroy(&at);
	}
	return NULL;
}

ctl_server *ctl_server_claim(const char *mountpoint, char **err)
{
	ctl_server *s = calloc(1, sizeof *s);
	if (!s) {
		*err = strdup("out of memory");
		return NULL;
	}
	s->lfd = s->stop_pipe[0] = s->stop_pipe[1] = -1;
	if (ctl_sock_claim(mountpoint, &s->claim, err) < 0) {
		free(s);
		return NULL;
	}
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	return s;
}

int ctl_server_start(ctl_server *s, const ctl_target *t, char **err)
{
	s->t = *t;
	s->lfd = ctl_sock_listen(&s->claim, err);
	if (s->lfd < 0)
		return -1;
	if (pipe2(s->stop_pipe, O_CLOEXEC) < 0) {
		s->stop_pipe[0] = s->stop_pipe[1] = -1;
		*err = strdup("cannot start the control server: no pipe");
		return -1;
	}
	if (pthread_create(&s->thread, NULL, accept_main, s) != 0) {
		*err = strdup("cannot start the control server's thread");
		return -1;
	}
	s->started = true;
	return 0;
}

void ctl_server_stop(ctl_server *s)
{
	if (!s)
		return;
	if (s->started) {
		/* wakes the accept thread and every connection still
		 * waiting for its request */
		ssize_t w = write(s->stop_pipe[1], "x", 1);
		(void)w;
		pthread_join(s->thread, NULL);
	}
	pthread_mutex_lock(&s->mu);
	s->stopping = true;
	while (s->conns > 0)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
	if (s->stop_pipe[0] >= 0) {
		close(s->stop_pipe[0]);
		close(s->stop_pipe[1]);
	}
	ctl_sock_release(&s->claim); /* closes lfd */
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s);
}
