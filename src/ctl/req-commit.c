/*
 * ctl requests commit and sync: make what is pending visible in the bucket
 * (fs_commit_path, fs_sync) and report the upload's progress meanwhile.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commit/engine.h"
#include "ctl/internal.h"

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
	const ctl_req *r;
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

/* {"cmd":"commit","path":REL} on a writable mount (requests.c checked
 * both): seals what is pending at or under REL and waits until it is
 * visible. */
void ctl_req_commit(const ctl_req *r)
{
	const char *rel = r->path;
	int fd = r->fd;
	fs_ctx *fs = ctl_target_fs(r->t);
	eng *e = ctl_target_eng(r->t);
	if (!e) { /* gone since the check: the mount is going down */
		ctl_send_error(fd, "the mount is read-only: nothing to commit");
		return;
	}
	uint64_t done, total;
	json_t *what = concerned(e, rel, &done, &total);
	struct commit_watch w = {.e = e, .fd = fd, .rel = rel};
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

/* {"cmd":"sync"}: waits until everything pending is visible. */
void ctl_req_sync(const ctl_req *r)
{
	int fd = r->fd;
	fs_ctx *fs = ctl_target_fs(r->t);
	if (!ctl_target_eng(r->t)) {
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
		char *why = eng_failed_text(ctl_target_eng(r->t));
		ctl_send_error(fd, why ? why : strerror(-rc));
		free(why);
	} else
		ctl_send_json(fd, json_pack("{s:I, s:I, s:b, s:b}", "bytes_done",
					(json_int_t)p.done, "bytes_total",
					(json_int_t)p.total, "writable", 1,
					"done", 1));
}
