/*
 * eng: the commit engine of a mount (doc/commit.md).
 *
 * The FUSE layer (src/fs/write.c) keeps the local view of what was written
 * (the overlay); it hands the engine *facts* as the application produces
 * them, in the order the application issued them, and the engine makes
 * them true in the bucket, durably, atomically and in that order:
 *
 *   - eng_txn_begin        a directory created through the mount whose
 *                          parent exists remotely (the transaction root),
 *                          or a single file written outside any new
 *                          directory
 *   - eng_file_put         a file of a transaction was closed after writes
 *                          (its bytes are final until the next put)
 *   - eng_file_drop        a file of a transaction was removed
 *   - eng_dir_put          a directory inside a transaction (made, or its
 *                          attributes changed)
 *   - eng_file_move        a file or directory of a transaction, or its
 *                          root, was renamed
 *   - eng_txn_seal         a commit trigger fired: make it visible
 *   - eng_remote_delete    a remote (already committed) file or directory
 *                          was removed
 *   - eng_remote_rename    a remote file or directory was renamed
 *
 * Every call journals its fact (SQLite, synchronous=FULL in WAL mode) before
 * returning, so after a SIGKILL or a reboot eng_open of the same state
 * directory resumes every pending upload, commit, delete and rename.
 *
 * Paths are relative to the mount root ("a/b/c", no leading or trailing
 * slash); the engine prefixes them with the mount's key prefix.
 *
 * Uploads run in parallel (file after file as they are put, parts of one
 * file in parallel); what is ordered are the visibility steps: a
 * transaction's commit point, a single-file transaction's final PUT or
 * CompleteMultipartUpload, a remote delete or rename.  Each waits for every
 * visibility step issued before it.  Temp-pattern names (eng_is_temp_name)
 * are not uploaded until a move gives them a final name.
 *
 * Staging files: the FUSE layer creates them with eng_stage_create, writes
 * them, and hands them over with eng_file_put.  From then on the file is
 * the engine's and immutable: the engine reads it for the upload and
 * unlinks it when the transaction is visible (after linking it into the
 * read cache when one is attached, so reads stay local).  A caller that
 * wants to read it meanwhile keeps its own fd.  A file that must change
 * after a put gets a new staging file (a copy when the old bytes are
 * needed).
 *
 * Thread safety: every function may be called from any thread.
 */
#ifndef CKPTFS_COMMIT_ENGINE_H
#define CKPTFS_COMMIT_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "proto/keys.h"
#include "s3/client.h"

typedef struct eng eng;
typedef struct cache cache;

typedef struct eng_opts {
	unsigned lease_s;        /* pending-marker lease; 0 = 60 */
	uint64_t part_size;      /* minimum multipart part; 0 = 8 MiB */
	uint64_t multipart_min;  /* files from this size go multipart; 0 = 16 MiB */
	unsigned conns;          /* parallel transfers; 0 = 16 */
	uint64_t max_staged;     /* staged-not-uploaded bytes before writers
	                          * wait (eng_stage_reserve); 0 = unlimited */
	/* upload hold: while eng_hold_uploads says the application is
	 * writing, a file of an open directory transaction waits up to this
	 * many seconds after its put before its upload starts; 0 = never */
	double upload_hold_s;
	/* a step (or an upload of its files) failing with transient errors
	 * for this many seconds is set aside like one that failed for good,
	 * and still retried (doc/commit.md "Errors"); 0 = 180 */
	double transient_limit_s;
	const char *temp_patterns; /* comma-separated fnmatch patterns on the
	                            * last path component; NULL = default
	                            * (ENG_DEFAULT_TEMP_PATTERNS) */
} eng_opts;

/* the format's default (proto/keys.h) */
#define ENG_DEFAULT_TEMP_PATTERNS PROTO_DEFAULT_TEMP_PATTERNS
/* seconds of transient failures before a step is set aside (the mount
 * option transient_limit=) */
#define ENG_DEFAULT_TRANSIENT_LIMIT_S 180.0

/* File attributes kept remotely (object metadata and the manifest). */
typedef struct eng_meta {
	/* permission bits, 07777; a special file's also carry its type
	 * (S_IFIFO, S_IFSOCK, S_IFCHR, S_IFBLK: proto/meta.h) */
	uint32_t mode;
	uint32_t uid, gid;
	struct timespec mtime;
	uint64_t rdev; /* device nodes */
	/* user.* extended attributes, may be NULL: records of the name, a
	 * NUL, the value's length as 4 bytes little-endian, then the value's
	 * bytes (values may hold NULs); proto_xattr_append in
	 * proto/meta.h builds them */
	const char *xattrs;
	size_t xattrs_len;
	/* symlink target: the object is a symlink of that target */
	const char *symlink;
} eng_meta;

/*
 * Opens (or creates) the engine state under state_dir for s3://bucket/
 * prefix: the journal (state_dir/journal.db) and staging files
 * (state_dir/staging/).  state_dir is exclusive to one mount (flock); a
 * second opener gets -EBUSY.  Journaled work left by a dead mount resumes
 * at once.  writer is this mount's writer id (unique per mount incarnation
 * that owns the journal: stored in the journal on first open and reused on
 * resume, so the markers and manifests of resumed transactions keep their
 * names).  rc may be NULL; when set, committed files are linked into it.
 * Returns 0 or -errno with *err (malloc'd) saying why.
 */
int eng_open(s3_client *s3, cache *rc, const char *state_dir,
	     const char *bucket, const char *prefix, const eng_opts *o,
	     eng **out, char **err);

/*
 * Stops the engine.  wait: first waits until everything journaled is
 * visible, logging progress (log_info) every few seconds; otherwise stops
 * transfers at once and leaves the journal to resume at the next open.
 */
void eng_close(eng *e, bool wait);

/* This mount's writer id (for markers and manifests). */
const char *eng_writer(const eng *e);

/* Whether the last component of path matches a temp pattern. */
bool eng_is_temp_name(const eng *e, const char *path);
/* Whether some component of path does (a file under a temp directory). */
bool eng_path_has_temp(const eng *e, const char *path);

/* ---- staging ----------------------------------------------------------- */

/*
 * Creates an empty staging file (0600) and returns an O_RDWR fd, and its
 * id in *sid.  -ENOSPC/-EDQUOT when the cache disk is full.
 */
int eng_stage_create(eng *e, uint64_t *sid);

/*
 * Backpressure: a writer about to add n bytes of staged data waits while
 * staged-but-not-uploaded bytes exceed max_staged.  Returns 0, or -EINTR
 * when the engine is closing.
 */
int eng_stage_reserve(eng *e, uint64_t n);

/* Abandons a staging file never handed over (unlinks it). */
void eng_stage_discard(eng *e, uint64_t sid);

/* The max_staged option (0: no limit). */
uint64_t eng_max_staged(const eng *e);

/* Whether staging files already dropped are still held open by uploads
 * being cancelled: their disk space is about to come back. */
bool eng_space_pending(eng *e);

/* ---- transactions ------------------------------------------------------ */

/*
 * The upload hold (doc/commit.md, "Upload hold"): writing says whether the
 * application is writing through the mount right now (a writable handle
 * is open, or one closed moments ago).  While it is, files put into open
 * directory transactions do not start uploading, for at most
 * upload_hold_s after their put: the application's writes get the CPU,
 * memory bandwidth and disk alone and its close returns at local-disk
 * speed; the uploads follow at once when it stops.  A sealed transaction,
 * a file someone waits for (fsync, eng_wait_file), and staged bytes at
 * half of max_staged are never held.  Call it again periodically while
 * writing: held files whose time is up are released then.
 */
void eng_hold_uploads(eng *e, bool writing);

/*
 * Starts a transaction rooted at path (a directory when is_dir, else a
 * single file).  For a directory whose name is final (not a temp name) the
 * pending marker and the intent manifest are PUT before this returns, so
 * that several mounts creating one directory all hold markers before any
 * can commit; a failure to PUT them fails the call (-errno, the mkdir
 * fails).  Returns the transaction id (> 0) in *txn.
 *
 * manifest_root: the nearest existing ancestor directory of path that
 * readers filter by manifests (it holds .ckptfs/ manifests: a directory
 * committed by ckptfs, or a transaction root of this mount that is
 * committing), or NULL.  Readers show there only the union of its
 * committed manifests, so the commit also PUTs an addendum manifest
 * <manifest_root>/.ckptfs/manifest.<writer>.<txn>.json (committed) naming
 * this transaction's files relative to manifest_root.  Manifests carry a
 * "time" (commit time, ns); when two name one path the newest wins.  A
 * second transaction of this writer on the same root (written again after
 * a commit) must not overwrite the first one's manifest: name it
 * manifest.<writer>.<txn>.json too.
 */
int eng_txn_begin(eng *e, const char *path, bool is_dir,
		  const char *manifest_root, uint64_t *txn);

/*
 * A file of transaction txn, at path (the root itself for a single-file
 * transaction), now holds the bytes of staging file sid (size bytes,
 * handed over: see above).  Replaces an earlier put of the same path.
 * The upload starts now unless the path has a temp component.
 */
int eng_file_put(eng *e, uint64_t txn, const char *path, uint64_t sid,
		 uint64_t size, const eng_meta *m);

/* Attributes changed without new bytes (chmod, utimens, setxattr). */
int eng_file_set_meta(eng *e, uint64_t txn, const char *path,
		      const eng_meta *m);

/* Removes path (a file, or a directory with everything under it) from
 * transaction txn; uploaded objects of it are deleted after the commit. */
int eng_file_drop(eng *e, uint64_t txn, const char *path);

/*
 * Moves a file or directory (with everything under it) from transaction
 * txn_from to path `to` in transaction txn_to (the same one, or another:
 * TensorFlow renames files out of a temp directory into a single-file
 * transaction begun for the new name).  When from is txn_from's root and
 * txn_to == txn_from, the whole transaction moves: its marker and intent
 * manifest are PUT under the new name before this returns (if final), and
 * anything already uploaded under the old name is re-uploaded or copied
 * to the new keys and the old keys deleted after the commit.  A moved
 * file that was already uploaded is likewise moved remotely.
 * manifest_root: as for eng_txn_begin, for `to`: a whole transaction
 * takes it (moved into a governed directory, its commit records it in
 * that root's addendum: a directory, whose record of a directory it
 * replaced readers would take otherwise, or a single file, which readers
 * of that directory take from its manifest only); ignored otherwise.
 */
int eng_file_move(eng *e, uint64_t txn_from, const char *from,
		  uint64_t txn_to, const char *to, const char *manifest_root);

/* A directory inside transaction txn (not its root) with its attributes,
 * recorded in the manifest's "dirs"; a later put of the same path replaces
 * them (chmod, chown, utimensat).  A path outside txn's root (the
 * committed directory it is made in, or a file of it stored again) is
 * recorded only in the addendum of a transaction inside a governed
 * directory, its mtime as given (doc/posix.md, "Directory attributes"). */
int eng_dir_put(eng *e, uint64_t txn, const char *path, const eng_meta *m);

/*
 * Commit trigger: uploads what is left and makes the transaction visible
 * after every visibility step issued before it.  A transaction whose root
 * has a temp name is sealed only locally (it waits for a move).
 */
int eng_txn_seal(eng *e, uint64_t txn);

/*
 * A write to path, a file of open transaction txn, failed with err (EIO,
 * ENOSPC, EDQUOT): the transaction is poisoned, journaled.  It is not
 * sealed (eng_txn_seal returns -EIO, eng_sync leaves it open) until path
 * is put again (eng_file_put: rewritten) or dropped (eng_file_drop:
 * removed), or the operator drops the step; meanwhile it counts as a
 * failed step (status "poisoned" with the cause, sync returns an error,
 * the steps that depend on it wait).  A negative err (-ENOSPC): the
 * failure was not seen but inferred — the staging disk filled while the
 * file was written through passthrough, so it may be short (status says
 * so).  -ENOENT when txn is not open.
 */
int eng_file_poison(eng *e, uint64_t txn, const char *path, int err);
/* eng_file_put of the bytes a failed write left (after eng_file_poison):
 * journaled and shown again after a restart, the poison stays. */
int eng_file_put_short(eng *e, uint64_t txn, const char *path, uint64_t sid,
		       uint64_t size, const eng_meta *m);
/* Whether a failed write poisons transaction txn. */
bool eng_txn_poisoned(eng *e, uint64_t txn);

/* Drops a transaction entirely (rm -r of its root before it committed):
 * its marker, intent manifest and uploaded objects are deleted. */
int eng_txn_abort(eng *e, uint64_t txn);

/* ---- remote namespace -------------------------------------------------- */

/* Deletes a committed remote file, or a directory with everything under
 * it (atomically for readers: marker first), after earlier steps. */
int eng_remote_delete(eng *e, const char *path, bool is_dir);
/* eng_remote_delete that keeps directory keep (non-NULL: the parent of
 * path, written through ckptfs, which the delete leaves with nothing
 * under its prefix): its step PUTs the empty object keep/ after the
 * delete, so keep stays as an empty directory does on a local disk
 * (doc/posix.md, "Removing the last name of a directory").  The journal
 * keeps it as the step's dest. */
int eng_remote_delete_keep(eng *e, const char *path, bool is_dir,
			   const char *keep);

/*
 * A remote delete the FUSE layer holds back (an `rm -r` in progress: its
 * unlinks become one directory delete, fs/write-deletes.c) is journaled
 * at once, not as a step: eng_hold_delete gives its id (replaced: held
 * deletes it makes needless, a directory's over its files, forgotten with
 * it), eng_release_delete makes it a step (as eng_remote_delete_keep,
 * keep may be NULL) and forgets it in one journal transaction.  The held
 * ones a killed mount leaves stay held: eng_held_foreach hands them (in
 * the order they were held) to the next mount's FUSE layer, which holds
 * them again (an unlink that returned is never undone by a SIGKILL, and
 * a killed `rm -r` does not show other hosts a checkpoint cut short).
 * Held rows are written without an fsync (a first put's rule,
 * doc/commit.md "Journal").
 */
int eng_hold_delete(eng *e, const char *path, bool is_dir, const char *keep,
		    const uint64_t *replaced, size_t n, uint64_t *id);
int eng_held_foreach(eng *e,
		     void (*fn)(void *arg, uint64_t id, const char *path,
				bool is_dir, const char *keep),
		     void *arg);
int eng_release_delete(eng *e, uint64_t id, const char *path, bool is_dir,
		       const char *keep);

/* Renames a committed remote file or directory (server-side copies, then
 * the old name is deleted as above), after earlier steps.  Replaces what
 * the target held.  manifest_root: as for eng_txn_begin, for `to`. */
int eng_remote_rename(eng *e, const char *from, const char *to, bool is_dir,
		      const char *manifest_root);

/* A directory outside a transaction's root (a parent of it) and the
 * attributes its manifest root's addendum records for it. */
typedef struct eng_dir_attrs {
	const char *path;
	eng_meta m;
} eng_dir_attrs;

/* eng_remote_rename whose addendum (inside a governed directory) also
 * records the n directories of parents, written through ckptfs, whose
 * mtime the rename moved (doc/posix.md, "Directory attributes"). */
int eng_remote_rename_in(eng *e, const char *from, const char *to,
			 bool is_dir, const char *manifest_root,
			 const eng_dir_attrs *parents, size_t n);

/* chmod, chown, utimensat, setxattr or removexattr of committed directory
 * path (written through ckptfs): a step of its own, ordered after every
 * step before it, PUTs an addendum in record_root (the transaction root
 * whose manifests readers take path's attributes from; path itself for
 * its own "dir") that records path with m, all of its attributes as they
 * are now (doc/posix.md, "Changing a committed directory").  *id: the
 * step, for eng_txn_pending. */
int eng_dir_set(eng *e, const char *path, const eng_meta *m,
		const char *record_root, uint64_t *id);

/* ---- waiting and status ------------------------------------------------ */

/* fsync of a file: returns when the bytes of path's latest put are stored
 * remotely (0 at once for a temp name: they are journaled locally).  For a
 * single-file transaction not yet at its turn, "stored" means uploaded as
 * the parts of a multipart upload (a small file too, as one part) that its
 * ordered visibility step completes later: durable, not yet visible. */
int eng_wait_file(eng *e, const char *path);

/* fsync of a transaction root, `ckptfs commit`: returns when txn is
 * visible (or failed: -errno). */
int eng_wait_txn(eng *e, uint64_t txn);

/* Whether transaction txn is still in the queue (not yet visible, nor
 * aborted and cleaned up). */
bool eng_txn_pending(eng *e, uint64_t txn);

/* `ckptfs sync`: waits until everything issued so far is visible.
 * progress (may be NULL) is called about once a second. */
int eng_sync(eng *e, void (*progress)(void *arg, uint64_t done,
				      uint64_t total),
	     void *arg);

typedef struct eng_txn_status {
	uint64_t id;
	char *path;
	const char *state;  /* "open", "uploading", "committing", "deleting",
	                     * "waiting-for-rename", "failed", "blocked"
	                     * (held back by a failed step)... */
	uint64_t bytes_done, bytes_total;
	double rate;        /* bytes/s over the last seconds */
	double age;         /* seconds since it began (or since this mount
	                     * resumed it from the journal) */
	char *error;        /* last error, NULL when none */
	/* "failed" by transient errors for longer than transient_limit:
	 * still tried again in the background */
	bool retrying;
} eng_txn_status;

/*
 * Steps that failed for good (doc/commit.md "Errors"), or that kept
 * failing with transient errors for longer than transient_limit (those are
 * still retried): a failed step holds back only the later steps that
 * depend on it (a delete or rename of it or of a sibling, a single file
 * beside it, anything inside it); the others go on.  eng_failed_text
 * describes each failed step (id, kind, path, the server's error, how many
 * steps wait for it) in one malloc'd line, or returns NULL when none
 * failed.
 */
char *eng_failed_text(eng *e);

/* Operator: tries failed step id (0: every failed step) again now (a step
 * set aside for transient errors: its next retry is now).  A poisoned step
 * (a failed write: eng_file_poison) is not lifted by a retry.  Returns how
 * many, -EBUSY when the only ones are poisoned, or -ENOENT. */
int eng_step_retry(eng *e, uint64_t id);

/* Operator: gives up step id (a commit is aborted: it never becomes
 * visible, its uploads are deleted; a delete or rename is forgotten).
 * *what (may be NULL) gets a malloc'd description.  0 or -ENOENT. */
int eng_step_drop(eng *e, uint64_t id, char **what);

/* Snapshot of pending work; free with eng_status_free. */
int eng_status(eng *e, eng_txn_status **v, size_t *n);
void eng_status_free(eng_txn_status *v, size_t n);

/* Journaled files not yet visible remotely, for the overlay after a
 * restart: fn is called for each with its staging file path, in queue
 * order (a path in two transactions: the later one is what stays), but
 * not for a file a later delete or rename step takes away. */
void eng_foreach_pending_file(eng *e,
			      void (*fn)(void *arg, uint64_t txn,
					 const char *path,
					 const char *staging_path,
					 uint64_t size, const eng_meta *m),
			      void *arg);

/* The directory and single-file transactions not yet visible, in queue
 * order, for the overlay after a restart: txn_fn for each (sealed: a
 * commit trigger fired before the restart), then dir_fn for each of its
 * empty directories (eng_dir_put).  Either may be NULL. */
typedef void (*eng_pending_txn_fn)(void *arg, uint64_t txn, const char *root,
				   bool is_dir, bool sealed);
typedef void (*eng_pending_dir_fn)(void *arg, uint64_t txn, const char *path,
				   const eng_meta *m);
void eng_foreach_pending_txn(eng *e, eng_pending_txn_fn txn_fn,
			     eng_pending_dir_fn dir_fn, void *arg);

/* The names that pending remote deletes and renames take away (the
 * source of a rename), with their step's id (transactions and steps are
 * numbered in the order they were made), for the overlay after a
 * restart: they must not show again before their step runs. */
void eng_foreach_pending_removal(eng *e,
				 void (*fn)(void *arg, uint64_t id,
					    const char *path, bool is_dir),
				 void *arg);

/* The pending eng_dir_set steps, in queue order, for the overlay after a
 * restart: what they store shows before they run. */
void eng_foreach_pending_dir_set(eng *e, eng_pending_dir_fn fn, void *arg);

#endif
