/*
 * Shared between the files of the commit engine.  Not part of the
 * interface (commit/engine.h).  The bucket format itself is src/proto/.
 *
 * Who owns what, top to bottom; a file calls only files below it (no
 * cycle between files: tests/tools/layers.py):
 *   engine.c    eng_open/eng_close: the journal loaded into the model
 *               (resume), staging swept, threads started and stopped;
 *               waiting (eng_wait_file, eng_wait_txn, eng_sync)
 *   facts.c     the facts API (eng_txn_begin, eng_file_put, ..., remote
 *               deletes and renames): journal row, then model, then
 *               scheduling
 *   status.c    eng_status, eng_failed_text, eng_step_retry/drop,
 *               eng_foreach_pending_*
 *   stage.c     staging files, max_staged backpressure, the upload hold
 *   visible.c   the publish queue's thread: which step runs, its result,
 *               clean-up of aborted transactions, finished steps
 *   renames.c   the rename step of a committed directory or file
 *   steps.c     the remote steps (commit of a directory or a file, remote
 *               delete with its delete record) on snapshots, and the small
 *               S3 helpers renames.c shares
 *   hints.c     metadata hints (D/.ckptfs-meta/NAME) PUT and DELETEd by
 *               the steps, and the ones this engine knows it PUT
 *   transfer.c  the upload workers and the blocking upload helpers
 *   marker.c    pending markers: announce, hold, delete, renewal thread
 *   mindex.c    the manifest index of a directory many writers committed
 *   order.c     the queue rules: parked steps, failed steps and what they
 *               hold back, when an upload may start (eng_sched_file),
 *               settled, seal/requeue/drop of parked steps
 *   core.c      the model's primitives: clocks, transactions and files,
 *               key claims, the job FIFO, the error rule, garbage rows
 *   meta.c      eng_meta (the interface's) <-> proto_meta (the format's)
 *   journal.c   SQLite: every statement and row decoding (journal.h)
 * gc.c (commit/gc.h) is separate: `ckptfs gc`, on the bucket alone.
 *
 * Locking: one mutex (eng.mu) guards everything in memory and the journal
 * connection (journal writes happen under it; they are local fsyncs, never
 * network I/O).  One condition variable (eng.cv) is broadcast on every
 * change anybody could wait for.  Network calls run with mu released, on
 * snapshots of what they need; a file's `gen` tells a finishing job whether
 * the file changed meanwhile (re-put, moved, dropped), in which case its
 * result is thrown away (and the object it wrote becomes garbage).
 *
 * Invariants:
 *  - a file has at most one upload in flight at a time (its jobs, or the
 *    visibility thread), so two uploads to one key never race;
 *  - the journal row of a fact is written before the call returns;
 *  - staging files are unlinked only once their transaction is visible
 *    (or aborted) and its journal rows are gone.
 */
#ifndef CKPTFS_COMMIT_INTERNAL_H
#define CKPTFS_COMMIT_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "cache/cache.h"
#include "commit/engine.h"
#include "commit/journal.h"
#include "proto/crc.h"
#include "proto/keys.h"
#include "proto/manifest.h"
#include "proto/meta.h"
#include "s3/upload.h"
#include "util/assert.h"

/* T_RATTR: a committed directory's attributes changed (eng_dir_set): its
 * step PUTs an addendum recording them, nothing else */
enum tkind { T_DIR = 1, T_FILE = 2, T_RDEL = 3, T_RREN = 4, T_RATTR = 5 };
enum tstate { TS_OPEN = 0, TS_SEALED = 1, TS_ABORTED = 2 };
/* journal files.state */
enum fstate { F_STAGED = 0, F_PARTS = 1, F_STORED = 2 };
enum pstate { P_TODO = 0, P_BUSY, P_DONE };

typedef struct etxn etxn;

typedef struct efile {
	int64_t id;
	etxn *t; /* NULL once dropped */
	char *path;
	uint64_t sid, size;
	proto_meta m;
	enum fstate state;
	unsigned gen;
	unsigned refs;   /* the transaction's list + queued/running jobs */
	unsigned jobs;   /* upload jobs queued or running */
	char *key;       /* key of the upload (multipart: fixed at create) */
	char *upload_id; /* multipart */
	bool lost_creates; /* its create needed retries (s3_mpu_abort_lost) */
	uint64_t part_size;
	unsigned n_parts, parts_done;
	uint8_t *pst;
	char (*petag)[S3_ETAG_MAX];
	uint32_t *pcrc;
	char **pseg; /* per part: its segments' CRCs (proto/crc.h), or NULL */
	char etag[S3_ETAG_MAX];
	uint32_t crc;
	char *blocks; /* stored: CRCs of its PROTO_BLOCK blocks, or NULL */
	uint64_t bytes_done; /* progress of the current upload */
	bool failed;
	/* fsync'd before its single-file transaction was sealed: upload it as
	 * a (one-part) multipart upload now, complete it at its turn */
	bool want_durable;
	/* someone waits for it to be stored (fsync): never held */
	bool urgent;
	double put_at; /* eng_now() of its last put (the upload hold) */
	/* dropped while an upload job still holds it (and its staging fd):
	 * counted in eng.releasing until the last job is done */
	bool releasing;
	struct efile *next;
} efile;

typedef struct edir {
	char *path;
	proto_meta m;
	struct edir *next;
} edir;

struct etxn {
	int64_t id;
	/* position in the visibility queue: the id, except for a root that
	 * was renamed from a temp name to a final one, which takes its place
	 * at that rename (doc/commit.md "Ordering") */
	int64_t seq;
	enum tkind kind;
	char *root; /* dir/file: the root; rdel/rren: the source */
	char *dest; /* rren; rdel: the directory it keeps, or NULL */
	bool is_dir;
	enum tstate state;
	char *mroot; /* manifest_root, or NULL */
	bool done;   /* visible (or aborted and cleaned): being freed */
	bool has_marker; /* a marker for root is held (renewed) */
	/* resumed with a final name: its step may have passed its commit
	 * point before the crash, so its marker and intent are PUT again only
	 * if its manifest is not committed yet (eng_resume_markers) */
	bool check_committed;
	/* resumed from the journal with files stored before the restart: a
	 * gc on another host may have rolled the transaction back while this
	 * writer was away (its lease expired), so its commit first checks
	 * that those objects are still there (steps.c, verify_stored) */
	bool check_stored;
	bool failed;
	int err;
	char *error;
	double err_logged;
	/* poisoned by failed writes (commit/poison.c): "<errno> <path>\n"
	 * lines, NULL when none; never sealed while set */
	char *poison;
	bool poison_unsaved; /* its journaling failed (a full disk): retried
			      * at the next eng_file_poison/_poisoned */
	/* eng_now() of the first transient failure of the current streak (of
	 * its step or an upload of its files; 0: none), reset by a success:
	 * past transient_limit it is set aside (eng_set_aside) */
	double err_since;
	/* transient failures of its step in a row (the backoff), and when a
	 * step set aside is tried again */
	unsigned attempt;
	double retry_at;
	efile *files;
	edir *dirs;
	/* eng_now() when it was created (or resumed from the journal) and
	 * sealed: the pending age and commit latency of util/metrics.h */
	double created_at, sealed_at;
	/* rate */
	double rate_t0, rate;
	uint64_t rate_b0;
	etxn *next;
};

typedef enum jkind { J_PUT, J_CREATE, J_PART, J_COMPLETE, J_ABORT } jkind;

typedef struct job {
	jkind k;
	efile *f;
	unsigned part; /* J_PART: 0-based */
	unsigned gen;
	unsigned attempt;
	double not_before;
	double began; /* eng_now() when its current attempt started */
	char *key, *upload_id; /* J_ABORT */
	struct job *next;
} job;

#define ENG_HINTS 1024 /* slots of eng.hints */

struct eng {
	s3_client *s3;
	cache *rc;
	char *dir, *staging, *bucket, *prefix;
	eng_opts o;
	proto_pats pats;
	char writer[PROTO_WRITER_MAX];
	jr *j;

	ckpt_mutex mu;
	pthread_cond_t cv;
	/* taken around every marker PUT of the renewal and every marker
	 * DELETE of a step (never while holding mu), so a renewal that
	 * started before a commit point cannot land after it */
	ckpt_mutex marker_mu;
	etxn *txns, *txns_tail; /* queue order */
	job *jobs, *jobs_tail;
	uint64_t next_sid;
	uint64_t staged; /* bytes staged, not yet stored, uploadable */
	bool staged_dirty; /* staged needs recomputing */
	unsigned releasing; /* dropped files whose space jobs still hold */
	bool stopping;
	bool writing; /* eng_hold_uploads: the application is writing */
	char *vis_marker; /* held by a running delete/rename step */
	bool vis_stopped; /* ... and no longer renewed (eng_stop_renewal) */
	/* keys with a request in flight that creates or deletes their object
	 * (PUT, CompleteMultipartUpload, DELETE of a stale object): nodes on
	 * the requesting thread's stack, see eng_key_claim */
	struct eng_busy *busy;
	double last_err_log;

	pthread_t *workers;
	unsigned n_workers;
	pthread_t vis_thr, renew_thr;
	bool vis_started, renew_started;
	/* the manifest index thread (mindex.c) and its queue of roots [mu] */
	pthread_t ix_thr;
	bool ix_started;
	char **ix_q;
	size_t ix_n, ix_cap;
	/* metadata hints this engine PUT, by key hash (hints.c) [mu] */
	struct eng_hint {
		uint64_t h; /* 0: empty */
		double at;
	} hints[ENG_HINTS];
};

/*
 * Requests that create or delete one key's object never overlap: the PUT of
 * a file removed and written again (two files, one key) could otherwise
 * land after the new one's, or the delete of a stale upload after the new
 * PUT.  eng_key_claim waits until no other claim holds key, then holds it
 * (b lives on the caller's stack until eng_key_release).  Both under mu;
 * core.c.
 */
struct eng_busy {
	const char *key;
	struct eng_busy *next;
};
void eng_key_claim(eng *e, struct eng_busy *b, const char *key); /* mu */
void eng_key_release(eng *e, struct eng_busy *b);                /* mu */

/* ---- core.c ------------------------------------------------------------- */
double eng_now(void);
/* The counters of e's http loop (util/metrics.h), or NULL. */
struct metrics *eng_metrics(eng *e);
int64_t eng_wall_ns(void);
char *eng_staging_path(const eng *e, uint64_t sid);
void eng_sleep(eng *e, double seconds);         /* mu; wakes on stop */
/* The live (not done) transaction id, or NULL.  mu */
etxn *eng_find_txn(eng *e, uint64_t id);
/* A new transaction at the tail of the queue (seq = id).  mu */
etxn *eng_txn_new(eng *e, int64_t id, enum tkind k, const char *root,
		  const char *dest, bool is_dir, enum tstate st,
		  const char *mroot);
efile *eng_find_file(etxn *t, const char *path);
void eng_link_file(etxn *t, efile *f);
void eng_unlink_file(etxn *t, efile *f);
void eng_file_unref(eng *e, efile *f);          /* mu */
void eng_free_txn(eng *e, etxn *t);             /* mu */

/* ---- facts.c: the checks of "the journal row of a fact is written
 * before the call returns" (debug and sanitizer builds only, inside
 * CKPTFS_ASSERT; mu held): no journal transaction is left open and the
 * committed row says what the model says. */
bool eng_journaled_txn(eng *e, int64_t id, enum tstate st);
bool eng_journaled_file(eng *e, const efile *f);
bool eng_journaled_dir(eng *e, int64_t txn, const char *path);
/* ... and no row of t's files at or under path is left. */
bool eng_journaled_none_under(eng *e, int64_t txn, const char *path);

/* ---- poison.c ----------------------------------------------------------- */
/* Reads t's poisoned paths from the journal (at load). */
int eng_poison_load(eng *e, etxn *t);
/* path was put again (under false) or dropped with what lies under it
 * (under true): it no longer poisons t.  mu */
void eng_poison_clear(eng *e, etxn *t, const char *path, bool under);
/* What status and sync say of a poisoned t (malloc'd), NULL if it is
 * not. */
char *eng_poison_text(const etxn *t);
/* Frees f's per-part arrays.  mu */
void eng_free_parts(efile *f);
bool eng_root_final(const eng *e, const etxn *t);
void eng_push_job(eng *e, jkind k, efile *f, unsigned part); /* mu */
void eng_push_abort(eng *e, const char *key, const char *upload_id); /* mu */
bool eng_err_transient(const s3_err *x);
/* Records t's error (t may be NULL): for good, or transient, when the
 * attempt that failed, begun at eng_now() `began`, starts t's failure
 * streak unless one is running.  mu */
void eng_txn_error(eng *e, etxn *t, const s3_err *x, bool permanent,
		   double began);
/* Something of t succeeded (an upload request), or t starts anew (its
 * clean-up after an abort): its failure streak and backoff, if any, end.
 * mu */
void eng_txn_progress(eng *e, etxn *t);
/* Whether t is set aside: failed for good, or failing with transient
 * errors since more than transient_limit ago at now (then still retried).
 * The ordering and the reports treat both alike (doc/commit.md "Errors"). */
bool eng_set_aside(const eng *e, const etxn *t, double now);
/* Set aside by transient errors only (not failed for good). */
bool eng_retrying(const eng *e, const etxn *t, double now);
void eng_garbage(eng *e, etxn *t, const char *key); /* mu */

/* ---- order.c ------------------------------------------------------------ */
/* One entry of the visibility queue as the ordering rule sees it. */
typedef struct eng_order_step {
	const char *a, *b; /* paths it touches (b: a rename's target, or NULL) */
	bool done;         /* finished, aborted or parked: constrains nothing */
} eng_order_step;
/* Whether an upload of path must wait for the earlier step s: s is not
 * done and touches an overlapping path (a delete, rename or commit there
 * must land first, or its objects would be overwritten or deleted under
 * it).  eng_upload_blocked applies it to the live queue. */
bool eng_order_waits(const eng_order_step *s, const char *path);
/* Whether the upload of path, for the step at index self of q[0..n) (in
 * queue order), must wait for some earlier step (eng_order_waits). */
bool eng_order_blocked(const eng_order_step *q, size_t n, size_t self,
		       const char *path);
/* A transaction whose root has a temp name: not in the visibility order
 * until a move gives it a final name (it blocks nothing). */
bool eng_parked(const eng *e, const etxn *t);
/* The set-aside step (eng_set_aside: failed for good, or failing
 * transiently past transient_limit) that keeps t from running (t itself
 * when it is set aside), or NULL.  A set-aside step holds back the later
 * steps that depend on it (touching its paths, or a delete/rename/file
 * beside it), and transitively what depends on those.  mu */
etxn *eng_blocker(eng *e, const etxn *t);
/* eng_blocker of every step at once, in queue order (one scan instead of
 * one per step): a malloc'd array with a slot per transaction of
 * e->txns, NULL where nothing holds it back; NULL when out of memory.  mu */
etxn **eng_blockers(eng *e);
/* The first step of the queue that may run (its turn has come), or NULL:
 * not done, not aborted, not parked, not held back by a set-aside step,
 * and not set aside itself unless it is set aside by transient errors,
 * its retry time has come and it is ready (eng_step_ready).  mu */
etxn *eng_next_step(eng *e);
/* The error that keeps t from becoming visible (for good, or while a step
 * set aside by transient errors is not through), or 0.  mu */
int eng_blocked_err(eng *e, const etxn *t);
/* Whether no upload job of t's files is queued or running.  mu */
bool eng_files_idle(const etxn *t);
/* Whether t's step can run: a delete or rename always, a commit once
 * sealed, final-named and every upload it needs is stored.  mu */
bool eng_step_ready(eng *e, const etxn *t);
bool eng_upload_blocked(eng *e, const etxn *t, const char *path); /* mu */
bool eng_file_uploadable(eng *e, const efile *f); /* mu */
void eng_sched_file(eng *e, efile *f);          /* mu */
void eng_sched_all(eng *e);                     /* mu */
/* Whether nothing up to queue position upto (0: everything) can make
 * more progress; done and total: its bytes.  mu */
bool eng_settled(eng *e, int64_t upto, uint64_t *done, uint64_t *total);
/* Seals every open transaction up to queue position upto (0: all).  mu */
void eng_seal_all(eng *e, int64_t upto);
/* Moves t to the tail of the queue with a fresh position.  mu, inside a
 * journal transaction. */
int eng_requeue(eng *e, etxn *t);
/* Drops the transactions still waiting for a final name (unmount).  mu */
void eng_drop_parked(eng *e);

/* ---- marker.c ----------------------------------------------------------- */
int eng_put_marker(eng *e, const char *root, s3_err *x);
int eng_put_intent(eng *e, const char *root, uint64_t txn, s3_err *x);
/* Marker and intent manifest of a new final-named directory root (mu not
 * held); logs and returns -errno on failure. */
int eng_announce(eng *e, const char *root, uint64_t txn);
/* Whether another live transaction than except holds root's marker.  mu */
bool eng_marker_wanted(eng *e, const char *root, const etxn *except);
/* root's marker is held (renewed) by the running step (mu not held). */
void eng_hold_marker(eng *e, const char *root);
/* Stops renewing root's marker (of transaction id, or the running step's)
 * and deletes it (mu not held). */
int eng_delete_marker(eng *e, const char *root, int64_t id, s3_err *x);
/* No more renewals of root's marker (transaction id or the held one) from
 * now on, none in flight; undone by eng_resume_renewal.  mu not held. */
void eng_stop_renewal(eng *e, const char *root, int64_t id);
void eng_resume_renewal(eng *e, const char *root, int64_t id);
void *eng_renew_main(void *arg);

/* ---- mindex.c ----------------------------------------------------------- */
/* After root's commit point: queues root for the index thread, which
 * writes the manifest index (proto/mindex.h) when no other writer's marker
 * of root is live and it has enough manifests.  Best effort, off the
 * visibility thread: its GETs never delay the next step (mu not held). */
void eng_index_later(eng *e, const char *root);
void *eng_index_main(void *arg);

/* ---- transfer.c --------------------------------------------------------- */
void *eng_worker_main(void *arg);
/* Reads [off, off+len) of fd computing Content-MD5 and CRC32C, and when
 * segs is not NULL appends the CRC of each piece of the range within one
 * PROTO_BLOCK block (proto_segment_count of them) as hex. */
int eng_digest(int fd, uint64_t off, uint64_t len, char md5[25],
	       uint32_t *crc, buf *segs);
/* A BadDigest reply (x) to a body read from [off, off+len) of staging
 * file fd, whose Content-MD5 was md5: when the bytes there no longer give
 * md5 (a shared mapping writes on after close), x becomes a local,
 * transient error, so the next attempt digests them again. */
void eng_changed_during_upload(int fd, uint64_t off, uint64_t len,
			       const char *md5, const char *key, s3_err *x);
/* The block list of f's multipart upload from its parts (malloc'd), or
 * NULL when a part's segments are not known (journaled by an older
 * version).  mu */
char *eng_parts_blocks(const efile *f);
/* Completes f's multipart upload (blocking; mu not held). */
int eng_complete_mpu(eng *e, const char *key, const char *upload_id,
		     const s3_part *parts, size_t n, char etag[S3_ETAG_MAX],
		     s3_err *x);
/* Single PUT of f from its staging file (blocking; mu not held); *blocks
 * gets its block list (malloc'd, NULL when out of memory). */
int eng_put_file(eng *e, const char *key, uint64_t sid, uint64_t size,
		 const proto_meta *m, char etag[S3_ETAG_MAX], uint32_t *crc,
		 char **blocks, s3_err *x);
/* Marks f stored with etag/crc/blocks (journal too; blocks may be NULL).
 * mu */
void eng_file_stored(eng *e, efile *f, const char *key, const char *etag,
		     uint32_t crc, const char *blocks);

/* ---- hints.c ------------------------------------------------------------ */
/* PUTs the metadata hint of the object at path (mount-relative), unless
 * this engine PUT it within the last 5 minutes.  mu not held; 0 or -1. */
int eng_hint_put(eng *e, const char *path, s3_err *x);
/* DELETEs the hint of path (204 when there was none).  mu not held. */
int eng_hint_delete(eng *e, const char *path, s3_err *x);
/* Forgets every hint PUT (after a directory delete or rename).  mu not
 * held. */
void eng_hints_forget(eng *e);
/* The table of hints PUT (pure, mu held): whether key was noted within
 * the last 5 minutes before now; note it at now; forget it. */
bool eng_hint_known(eng *e, const char *key, double now);
void eng_hint_note(eng *e, const char *key, double now);
void eng_hint_unnote(eng *e, const char *key);

/* ---- steps.c ------------------------------------------------------------ */
/* A transaction as a step sees it, copied under mu. */
typedef struct eng_snap_file {
	char *path, *key, *etag;
	uint64_t sid, size;
	uint32_t crc;
	char *blocks; /* block checksums (proto/crc.h), or NULL */
	proto_meta m;
} eng_snap_file;

typedef struct eng_snap {
	int64_t id;
	enum tkind kind;
	char *root, *dest, *mroot;
	bool is_dir;
	eng_snap_file *f;
	size_t nf;
	proto_mfile *mf; /* built for manifests */
	proto_mdir *md;
	proto_meta *dm;
	char **dpath;
	size_t nd;
	/* directories outside the root (its parents: eng_dir_put), which
	 * only the addendum records */
	proto_meta *om;
	char **opath;
	size_t no;
	char **garbage;
	size_t ng, gcap;
} eng_snap;
void eng_snap_take(eng *e, etxn *t, eng_snap *sn); /* mu */
void eng_snap_free(eng_snap *sn);
/* Runs t's step (commit, remote delete or rename).  Called and returns
 * with mu; 0, -2 when t changed meanwhile (run it again), else -1 with
 * *x. */
int eng_run_step(eng *e, etxn *t, eng_snap *sn, s3_err *x);
/* The garbage of sn in the order a step deletes it (pure): the keys the
 * step itself commits dropped, then objects first, manifests (and
 * addenda) next, pending markers last, n[0..2] of each; -1 when out of
 * memory.  Deleted in that order, an old name is never left with objects
 * but without the manifest and marker that hide them from readers. */
int eng_garbage_plan(eng_snap *sn, size_t n[3]);
/* Whether directory i of sn needs an object of its own ("dir/") for a
 * reader to see it: only an empty one does (pure). */
bool eng_dir_needs_object(const eng_snap *sn, size_t i);
/* Deletes keys in batches of S3_DELETE_MAX (mu not held). */
int eng_delete_keys(eng *e, char **keys, size_t n, s3_err *x);

/* steps.c's small S3 helpers, shared with renames.c (mu not held). */
typedef struct keylist {
	char **v;
	size_t n, cap;
	s3_object *o; /* sizes and etags, parallel to v */
} keylist;
void eng_keylist_free(keylist *l);
/* Every key under prefix (sorted, as S3 lists), appended to *out. */
int eng_list_under(eng *e, const char *prefix, keylist *out, s3_err *x);
int eng_put_mem(eng *e, const char *key, const char *body, const char *ctype,
		const s3_meta *meta, size_t nm, s3_err *x);
/* "a/b" from "a" and "b" ("" parts dropped); malloc'd. */
char *eng_join(const char *a, const char *b);
/* The addendum of sn's files in sn->mroot, root relative to it. */
int eng_put_addendum(eng *e, eng_snap *sn, const char *root, s3_err *x);
/* A directory's delete: its record (the commit point), then the rest,
 * and whether this writer's record of path exists. */
int eng_put_gone(eng *e, const char *path, s3_err *x);
int eng_finish_delete(eng *e, const char *path, s3_err *x);
int eng_gone_exists(eng *e, const char *path, bool *yes, s3_err *x);

/* ---- renames.c: the rename step of a directory or a file; mu held
 * around eng_run_rename as around eng_run_step, not around the others */
int eng_run_rename(eng *e, etxn *t, eng_snap *sn, s3_err *x);
int eng_rename_dir(eng *e, eng_snap *sn, s3_err *x);
int eng_rename_file(eng *e, eng_snap *sn, s3_err *x);

/* marker.c: markers and intents of resumed directory transactions, before
 * any thread starts */
void eng_resume_markers(eng *e);
/* marker.c: this writer's own manifest of root as stored (0 with *body,
 * malloc'd, or -1) */
int eng_get_manifest(eng *e, const char *root, char **body, size_t *len);

/* ---- visible.c ---------------------------------------------------------- */
void *eng_vis_main(void *arg);

/* ---- meta.c: the engine's public eng_meta and the format's proto_meta.
 * eng_meta_from copies m (NULL: mode 0644, nothing else); eng_meta_to
 * points m at s's strings (valid while s is); eng_meta_copy is a deep
 * copy. */
void eng_meta_from(proto_meta *d, const eng_meta *m);
void eng_meta_to(const proto_meta *s, eng_meta *m);
void eng_meta_copy(proto_meta *d, const proto_meta *s);

#endif
