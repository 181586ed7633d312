/*
 * eng transfer: the upload workers.  `conns` threads take jobs from one
 * FIFO (filled by order.c's eng_sched_file through core.c's eng_push_job;
 * a file's parts are queued together, so files go out one after the other
 * with their parts in parallel) and run them as blocking S3 calls on the
 * shared http loop.  Each S3 call already retried within the client's
 * policy (s3/retry.h: stall deadlines, backoff, a time budget); a job whose
 * call still failed transiently (s3_err_transient) goes back to the queue
 * after the policy's backoff (full jitter, at most retry_max_delay, a
 * larger base after throttling), forever: the journal keeps everything
 * meanwhile, and a commit must eventually land (past transient_limit its
 * transaction is set aside, order.c, and its jobs go on being retried; a
 * job that succeeds ends the streak, eng_txn_progress).  A permanent
 * failure (403, invalid key, a staging file shorter than journaled) fails
 * the file and its transaction.
 *
 * Each part's Content-MD5 is computed from the staging file before the
 * request (Ceph enforces it), together with its CRC32C; the file's CRC is
 * combined from its parts' at completion.
 *
 * The blocking upload helpers (eng_put_file, eng_complete_mpu, and
 * eng_file_stored to record the result) are shared with the single-file
 * commit step (steps.c).  Calls core.c, order.c (a finished job schedules
 * its file's next one) and the journal.
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "commit/internal.h"
#include "util/log.h"
#include "util/metrics.h"

#define DIGEST_BLOCK (1u << 20)
#define ABORT_MAX_ATTEMPTS 5 /* aborts of uploads are best effort */

/* The first job whose time has come, unlinked; else NULL and *wait the
 * seconds until the next one. */
static job *pick(eng *e, double *wait)
{
	double now = eng_now();
	*wait = 5;
	job *prev = NULL;
	for (job *j = e->jobs; j; prev = j, j = j->next) {
		if (j->not_before > now) {
			if (j->not_before - now < *wait)
				*wait = j->not_before - now;
			continue;
		}
		if (prev)
			prev->next = j->next;
		else
			e->jobs = j->next;
		if (e->jobs_tail == j)
			e->jobs_tail = prev;
		j->next = NULL;
		return j;
	}
	return NULL;
}

static void requeue(eng *e, job *j)
{
	if (e->jobs_tail)
		e->jobs_tail->next = j;
	else
		e->jobs = j;
	e->jobs_tail = j;
}

/* The job is over: its file may need its next step.  mu */
static void job_done(eng *e, job *j)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	efile *f = j->f;
	if (f) {
		if (j->k == J_PART && j->gen == f->gen && f->pst &&
		    f->pst[j->part] == P_BUSY)
			f->pst[j->part] = P_TODO;
		f->jobs--;
		if (!f->jobs && f->t)
			eng_sched_file(e, f);
		if (!f->jobs && f->releasing) {
			f->releasing = false;
			e->releasing--;
		}
		eng_file_unref(e, f);
	}
	free(j->key);
	free(j->upload_id);
	free(j);
	pthread_cond_broadcast(&e->cv);
}

/* The job's request succeeded: the failure streak of its file's
 * transaction ends (transient_limit counts from a streak's start).  mu */
static void job_ok(eng *e, job *j)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	if (j->f)
		eng_txn_progress(e, j->f->t);
	job_done(e, j);
}

static bool stale(const job *j)
{
	return j->f && (!j->f->t || j->gen != j->f->gen ||
			j->f->t->state == TS_ABORTED);
}

/* A failed attempt: back to the queue after a delay, or (permanent) the
 * file fails.  mu */
static void job_failed(eng *e, job *j, const s3_err *x)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	bool transient = eng_err_transient(x);
	etxn *t = j->f ? j->f->t : NULL;
	if (!j->f) { /* an abort: best effort */
		if (transient && j->attempt < ABORT_MAX_ATTEMPTS) {
			j->attempt++;
			j->not_before = eng_now() +
					s3_client_retry_delay_ms(e->s3, j->attempt, x) /
					    1000.0;
			requeue(e, j);
		} else {
			log_debug("commit: abort of an upload: %s", x->msg);
			job_done(e, j);
		}
		return;
	}
	eng_txn_error(e, t, x, !transient, j->began);
	if (!transient) {
		j->f->failed = true;
		job_done(e, j);
		return;
	}
	j->attempt++;
	metrics_commit_retry(eng_metrics(e));
	j->not_before =
	    eng_now() + s3_client_retry_delay_ms(e->s3, j->attempt, x) / 1000.0;
	requeue(e, j);
}

/* ---- blocking helpers (mu not held) -------------------------------------- */

int eng_digest(int fd, uint64_t off, uint64_t len, char md5[25],
	       uint32_t *crc, buf *segs)
{
	unsigned char *b = malloc(DIGEST_BLOCK);
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	int rc = b && c && EVP_DigestInit_ex(c, EVP_md5(), NULL) ? 0 : -ENOMEM;
	uint32_t cr = 0, seg = 0; /* whole range; current segment */
	while (!rc && len > 0) {
		size_t want = len < DIGEST_BLOCK ? (size_t)len : DIGEST_BLOCK;
		/* reads never cross a block boundary: segments end there */
		uint64_t to_edge = PROTO_BLOCK - off % PROTO_BLOCK;
		if (want > to_edge)
			want = (size_t)to_edge;
		ssize_t n = pread(fd, b, want, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : -ENODATA;
			break;
		}
		EVP_DigestUpdate(c, b, (size_t)n);
		cr = proto_crc32c(cr, b, (size_t)n);
		if (segs)
			seg = proto_crc32c(seg, b, (size_t)n);
		off += (uint64_t)n;
		len -= (uint64_t)n;
		if (segs && (off % PROTO_BLOCK == 0 || len == 0)) {
			if (proto_blocks_append(segs, seg) < 0)
				rc = -ENOMEM;
			seg = 0;
		}
	}
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned dl = 0;
	if (!rc && EVP_DigestFinal_ex(c, d, &dl) && dl == 16) {
		EVP_EncodeBlock((unsigned char *)md5, d, 16);
		*crc = cr;
	} else if (!rc) {
		rc = -EIO;
	}
	EVP_MD_CTX_free(c);
	free(b);
	return rc;
}

static void local_err(s3_err *x, int err, const char *what, const char *path)
{
	memset(x, 0, sizeof *x);
	x->err = err;
	snprintf(x->msg, sizeof x->msg, "%s %s: %s", what, path,
		 err == ENODATA ? "shorter than journaled" : strerror(err));
}

/* Opens a staging file expecting at least size bytes. */
static int open_staging(eng *e, uint64_t sid, uint64_t size, s3_err *x)
{
	char *p = eng_staging_path(e, sid);
	int fd = p ? open(p, O_RDONLY | O_CLOEXEC) : -1;
	struct stat st;
	if (fd >= 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_size < size) {
		close(fd);
		fd = -1;
		errno = ENODATA;
	}
	if (fd < 0)
		local_err(x, p ? errno : ENOMEM, "staging file", p ? p : "?");
	free(p);
	return fd;
}

void eng_changed_during_upload(int fd, uint64_t off, uint64_t len,
			       const char *md5, const char *key, s3_err *x)
{
	char now[25];
	uint32_t crc;
	if (strcmp(x->code, "BadDigest") ||
	    eng_digest(fd, off, len, now, &crc, NULL) || !strcmp(now, md5))
		return;
	local_err(x, EAGAIN, "bytes changed during the upload of", key);
}

int eng_put_file(eng *e, const char *key, uint64_t sid, uint64_t size,
		 const proto_meta *m, char etag[S3_ETAG_MAX], uint32_t *crc,
		 char **blocks, s3_err *x)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	*blocks = NULL;
	int fd = open_staging(e, sid, size, x);
	if (fd < 0)
		return -1;
	char md5[25];
	buf segs = BUF_INIT; /* one part from offset 0: its segments are the
				blocks */
	int rc = eng_digest(fd, 0, size, md5, crc, &segs);
	if (rc) {
		local_err(x, -rc, "reading staging file of", key);
		buf_free(&segs);
		close(fd);
		return -1;
	}
	*blocks = buf_steal(&segs);
	s3_meta meta[PROTO_META_N];
	buf store = BUF_INIT;
	size_t nm = proto_object_meta(m, meta, &store);
	s3_put_opts po = {.meta = meta, .n_meta = nm, .content_md5 = md5};
	http_upload body = http_upload_fd(fd, 0, size);
	rc = s3_put_object(e->s3, key, &body, &po, etag, x);
	if (rc < 0)
		eng_changed_during_upload(fd, 0, size, md5, key, x);
	buf_free(&store);
	close(fd);
	return rc;
}

int eng_complete_mpu(eng *e, const char *key, const char *upload_id,
		     const s3_part *parts, size_t n, char etag[S3_ETAG_MAX],
		     s3_err *x)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	return s3_mpu_complete(e->s3, key, upload_id, parts, n, etag, x);
}

void eng_file_stored(eng *e, efile *f, const char *key, const char *etag,
		     uint32_t crc, const char *blocks)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	if (key != f->key) {
		free(f->key);
		f->key = strdup(key);
	}
	snprintf(f->etag, sizeof f->etag, "%s", etag);
	f->crc = crc;
	if (blocks != f->blocks) {
		free(f->blocks);
		f->blocks = blocks ? strdup(blocks) : NULL;
	}
	f->state = F_STORED;
	f->bytes_done = f->size;
	free(f->upload_id);
	f->upload_id = NULL;
	e->staged_dirty = true;
	jr_file_stored(e->j, f->id, f->key, f->etag, crc, f->blocks);
	pthread_cond_broadcast(&e->cv);
}

/* An object written by a job whose file changed meanwhile.  mu */
static void stale_object(eng *e, job *j, const char *key)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	efile *f = j->f;
	if (f->t && f->key && !strcmp(f->key, key))
		return; /* the next upload overwrites it */
	if (f->t) {
		char *now = proto_key(e->prefix, f->path);
		if (strcmp(now, key))
			eng_garbage(e, f->t, key);
		free(now);
		return;
	}
	/* dropped: nobody will list it; delete it once, unless a live file
	 * was stored there meanwhile or will be (its upload may be in flight
	 * right now: a delete racing it could land after it) */
	size_t plen = strlen(e->prefix);
	const char *path = strncmp(key, e->prefix, plen) ? NULL : key + plen;
	for (etxn *t = e->txns; t; t = t->next) {
		if (t->done)
			continue;
		for (efile *g = t->files; g; g = g->next) {
			if ((g->key && !strcmp(g->key, key)) ||
			    (path && !strcmp(g->path, path))) {
				/* gone with t's garbage, unless t commits
				 * an object there */
				eng_garbage(e, t, key);
				return;
			}
		}
	}
	struct eng_busy b;
	eng_key_claim(e, &b, key);
	ckpt_unlock(&e->mu);
	s3_err x;
	s3_delete_object(e->s3, key, &x);
	ckpt_lock(&e->mu);
	eng_key_release(e, &b);
}

/* ---- jobs (called with mu, return with mu) -------------------------------- */

/*
 * The end of a job that stored f's object at key (rc 0) or failed (x):
 * releases the key, records the object (or drops it when the file
 * changed meanwhile), frees key and blocks and finishes the job.  mu held.
 */
static void object_stored(eng *e, job *j, struct eng_busy *b, char *key,
			  int rc, const char *etag, uint32_t crc, char *blocks,
			  const s3_err *x)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	eng_key_release(e, b);
	if (rc == 0 && stale(j))
		stale_object(e, j, key);
	else if (rc == 0)
		eng_file_stored(e, j->f, key, etag, crc, blocks);
	free(blocks);
	free(key);
	if (rc == 0)
		job_ok(e, j);
	else if (stale(j))
		job_done(e, j);
	else
		job_failed(e, j, x);
}

static void run_put(eng *e, job *j)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	efile *f = j->f;
	char *key = proto_key(e->prefix, f->path);
	uint64_t sid = f->sid, size = f->size;
	proto_meta m;
	eng_meta_copy(&m, &f->m);
	struct eng_busy b;
	eng_key_claim(e, &b, key);
	if (stale(j)) { /* removed or rewritten while waiting: not sent */
		eng_key_release(e, &b);
		proto_meta_free(&m);
		free(key);
		job_done(e, j);
		return;
	}
	ckpt_unlock(&e->mu);
	char etag[S3_ETAG_MAX] = "";
	uint32_t crc = 0;
	char *blocks = NULL;
	s3_err x = {0};
	int rc = eng_put_file(e, key, sid, size, &m, etag, &crc, &blocks, &x);
	proto_meta_free(&m);
	ckpt_lock(&e->mu);
	object_stored(e, j, &b, key, rc, etag, crc, blocks, &x);
}

static void run_create(eng *e, job *j)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	efile *f = j->f;
	char *key = proto_key(e->prefix, f->path);
	uint64_t ps = s3_part_size(f->size, e->o.part_size);
	buf store = BUF_INIT;
	s3_meta meta[PROTO_META_N];
	size_t nm = proto_object_meta(&f->m, meta, &store);
	s3_put_opts po = {.meta = meta, .n_meta = nm};
	ckpt_unlock(&e->mu);
	char *id = NULL;
	s3_err x = {0};
	int rc = -1;
	unsigned tries = 0;
	if (!ps)
		local_err(&x, EFBIG, "file over 5 TiB:", key);
	else
		rc = s3_mpu_create(e->s3, key, &po, &id, &tries, &x);
	buf_free(&store);
	ckpt_lock(&e->mu);
	if (rc == 0)
		/* an earlier attempt may have started an upload we will
		 * never hear of: look again before completing */
		f->lost_creates = tries > 1 || j->attempt > 0;
	if (rc == 0 && stale(j)) {
		eng_push_abort(e, key, id);
	} else if (rc == 0) {
		free(f->key);
		f->key = key;
		key = NULL;
		f->upload_id = id;
		id = NULL;
		f->part_size = ps;
		f->parts_done = 0;
		f->bytes_done = 0;
		eng_free_parts(f); /* frees as many as it had */
		f->n_parts = (unsigned)s3_part_count(f->size, ps);
		f->pst = calloc(f->n_parts, 1);
		f->petag = calloc(f->n_parts, sizeof *f->petag);
		f->pcrc = calloc(f->n_parts, sizeof *f->pcrc);
		f->pseg = calloc(f->n_parts, sizeof *f->pseg);
		jr_file_set_upload(e->j, f->id, f->key, f->upload_id, ps);
	}
	free(key);
	free(id);
	if (rc == 0)
		job_ok(e, j); /* schedules the parts */
	else if (stale(j))
		job_done(e, j);
	else
		job_failed(e, j, &x);
}

/* The upload id is gone (aborted by gc, or expired): start over.  mu */
static void restart_upload(eng *e, efile *f)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	log_warn("commit: multipart upload of %s is gone on the server: "
		 "starting it again",
		 f->path);
	free(f->upload_id);
	f->upload_id = NULL;
	f->parts_done = 0;
	f->bytes_done = 0;
	f->gen++;
	jr_file_upload_gone(e->j, f->id);
	f->state = F_STAGED;
}

static void part_done(eng *e, efile *f, unsigned n, const char *etag,
		      uint32_t crc, uint64_t len, char *segs)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	f->pst[n] = P_DONE;
	snprintf(f->petag[n], S3_ETAG_MAX, "%s", etag);
	f->pcrc[n] = crc;
	if (f->pseg) {
		free(f->pseg[n]);
		f->pseg[n] = segs; /* taken */
	} else {
		free(segs);
	}
	f->parts_done++;
	f->bytes_done += len;
	e->staged_dirty = true;
	jr_part_row r = {.n = n, .etag = etag, .crc = crc, .len = len,
			 .segs = f->pseg ? f->pseg[n] : NULL};
	jr_part_done(e->j, f->id, &r);
	if (f->parts_done == f->n_parts && f->t && f->t->kind == T_FILE) {
		f->state = F_PARTS;
		jr_file_set_state(e->j, f->id, F_PARTS);
	}
}

static void run_part(eng *e, job *j)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	efile *f = j->f;
	char *key = strdup(f->key), *id = strdup(f->upload_id);
	uint64_t off = (uint64_t)j->part * f->part_size;
	uint64_t len = f->size - off < f->part_size ? f->size - off
						    : f->part_size;
	uint64_t sid = f->sid, size = f->size;
	ckpt_unlock(&e->mu);
	s3_err x = {0};
	char etag[S3_ETAG_MAX] = "", md5[25];
	uint32_t crc = 0;
	int rc = -1;
	buf segs = BUF_INIT;
	int fd = open_staging(e, sid, size, &x);
	if (fd >= 0) {
		int d = eng_digest(fd, off, len, md5, &crc, &segs);
		if (d)
			local_err(&x, -d, "reading staging file of", key);
		http_upload body = http_upload_fd(fd, off, len);
		rc = d ? -1
		       : s3_mpu_put_part(e->s3, key, id, j->part + 1, &body,
					 md5, etag, &x);
		if (rc < 0 && !d)
			eng_changed_during_upload(fd, off, len, md5, key,
						  &x);
		close(fd);
	}
	ckpt_lock(&e->mu);
	bool gone = rc < 0 && (!strcmp(x.code, "NoSuchUpload") ||
			       x.http_status == 404);
	if (!stale(j) && rc == 0)
		part_done(e, f, j->part, etag, crc, len, buf_steal(&segs));
	else if (!stale(j) && gone && f->upload_id &&
		 !strcmp(f->upload_id, id))
		restart_upload(e, f);
	buf_free(&segs);
	free(key);
	free(id);
	if (rc == 0)
		job_ok(e, j);
	else if (stale(j))
		job_done(e, j);
	else
		job_failed(e, j, &x);
}

/* CRC of the whole object from its parts'. */
static uint32_t parts_crc(const efile *f)
{
	uint32_t crc = 0;
	for (unsigned i = 0; i < f->n_parts; i++) {
		uint64_t off = (uint64_t)i * f->part_size;
		uint64_t len = f->size - off < f->part_size ? f->size - off
							    : f->part_size;
		crc = i ? proto_crc32c_combine(crc, f->pcrc[i], len)
			: f->pcrc[i];
	}
	return crc;
}

char *eng_parts_blocks(const efile *f)
{
	return proto_blocks_from_parts(f->size, f->part_size, f->n_parts,
				       f->pseg, PROTO_BLOCK);
}

static s3_part *parts_list(const efile *f)
{
	s3_part *p = calloc(f->n_parts ? f->n_parts : 1, sizeof *p);
	for (unsigned i = 0; p && i < f->n_parts; i++) {
		p[i].number = i + 1;
		snprintf(p[i].etag, sizeof p[i].etag, "%s", f->petag[i]);
	}
	return p;
}

static void run_complete(eng *e, job *j)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	efile *f = j->f;
	char *key = strdup(f->key), *id = strdup(f->upload_id);
	s3_part *parts = parts_list(f);
	size_t n = f->n_parts;
	uint32_t crc = parts_crc(f);
	char *blocks = eng_parts_blocks(f);
	struct eng_busy b;
	eng_key_claim(e, &b, key);
	bool lost = f->lost_creates;
	ckpt_unlock(&e->mu);
	char etag[S3_ETAG_MAX] = "";
	s3_err x = {0};
	if (lost && id) /* create attempts the server carried out late */
		s3_mpu_abort_lost(e->s3, key, id);
	int rc = parts ? eng_complete_mpu(e, key, id, parts, n, etag, &x) : -1;
	free(parts);
	free(id);
	ckpt_lock(&e->mu);
	object_stored(e, j, &b, key, rc, etag, crc, blocks, &x);
}

static void run_abort(eng *e, job *j)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	ckpt_unlock(&e->mu);
	s3_err x = {0};
	int rc = s3_mpu_abort(e->s3, j->key, j->upload_id, &x);
	ckpt_lock(&e->mu);
	if (rc == 0 || x.err == ENOENT || x.err == EOPNOTSUPP)
		job_done(e, j); /* gone, or the server cannot (said once) */
	else
		job_failed(e, j, &x);
}

void *eng_worker_main(void *arg)
{
	eng *e = arg;
	/* below the application: checksumming uploads must not slow the
	 * writes a checkpoint's close() waits for (nice is per thread) */
	if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10) < 0)
		log_debug("commit: cannot lower upload priority: %s",
			  strerror(errno));
	ckpt_lock(&e->mu);
	while (!e->stopping) {
		double wait;
		job *j = pick(e, &wait);
		if (!j) {
			eng_sleep(e, wait);
			continue;
		}
		if (stale(j)) {
			job_done(e, j);
			continue;
		}
		j->began = eng_now();
		/* the file's one upload in flight: its parts run side by side,
		 * anything else alone */
		CKPTFS_ASSERT(j->k == J_PART || j->k == J_ABORT ||
			      j->f->jobs == 1);
		switch (j->k) {
		case J_PUT:
			run_put(e, j);
			break;
		case J_CREATE:
			run_create(e, j);
			break;
		case J_PART:
			run_part(e, j);
			break;
		case J_COMPLETE:
			run_complete(e, j);
			break;
		case J_ABORT:
			run_abort(e, j);
			break;
		}
	}
	ckpt_unlock(&e->mu);
	return NULL;
}
