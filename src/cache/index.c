/*
 * cidx: the SQLite index of the read cache (design: doc/cache.md).
 * This file holds entries, chunks, pins, eviction, stats and stamps, and
 * opens and closes the index; owner ids, lock files, liveness and the
 * reaping of dead owners are in owner.c, which it calls; the schema, the
 * statements, the SQL plumbing and the cache files' creation are in
 * index-db.c, below both.  Each declares its functions in a header of its
 * own name (index.h: this file's, the index's interface; owner.h;
 * index-db.h); they share index-types.h (the value types) and
 * index-state.h (struct cidx, the statement ids, rows).
 *
 * One connection per cidx, guarded by x->mu; every statement is prepared
 * once at open.  Every change runs in BEGIN IMMEDIATE, and that write lock
 * is also the cache's cross-process lock: each decision that creates,
 * resets or removes a cache file is carried out on disk (file created with
 * O_EXCL after unlinking the old name, or unlinked) before COMMIT, while
 * the lock is held, so no two processes ever disagree about which inode
 * belongs to an entry.  If a COMMIT then fails (or the process dies before
 * it), rows may remain whose file is gone, which acquire detects (a
 * complete entry's file is checked, and reset when missing or of the wrong
 * size), or a file may remain without rows, which open sweeps away.
 *
 * Entries.  state 0 = filling (filler = the owner downloading it, or NULL
 * when orphaned), 1 = complete.  The filler's pin keeps the entry from
 * eviction; when the filler's last pin goes while still filling, filler
 * becomes NULL, so the entry is evictable and the next acquire takes it
 * over.  doomed = 1 marks an entry that can never complete (the object
 * changed remotely) but is still pinned; the release of its last pin (or
 * the reap of its last dead pinner) removes it, and acquire answers -EBUSY
 * for it meanwhile (the caller reads uncached); a row whose size disagrees
 * with the request is treated alike.  cidx_chunk_forget makes the caller
 * the filler (it fetches the chunk again) unless another live process is.
 * cidx_refresh never touches the file, since followers keep descriptors.
 *
 * Eviction reserves the full logical size of a new entry (the file is
 * sparse, so this is the conservative choice) against the cap and, for
 * min_free, against the free space minus what filling entries still have
 * to write.  It reaps dead owners first, in the same transaction, so every
 * pin left is live; victims are unpinned entries, complete or orphaned,
 * least recently used first.  When the cap cannot be met even by evicting
 * everything evictable, nothing is evicted; when min_free cannot be met,
 * what could be evicted is (the disk needs it) and -ENOSPC still follows.
 * last_use (stamped by acquire and release) is a wall-clock stamp forced
 * to grow strictly across all processes, so LRU order is exact.
 *
 * Lock file and cache file paths are built only from ids and names
 * that are exactly hex, whatever the database holds.  The liveness of the
 * processes rests on flock alone, never on pids (which are stored for
 * humans).  cidx_open must run after any daemonizing fork: a forked child
 * shares the lock's open file description, and SQLite connections must
 * not cross a fork.
 */
#include "cache/index.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "cache/index-db.h"
#include "cache/index-state.h"
#include "cache/owner.h"
#include "util/buf.h"
#include "util/hex.h"
#include "util/log.h"
#include "util/sqlerr.h"

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t n_chunks_of(uint64_t size, uint32_t chunk_size)
{
	return size ? (size - 1) / chunk_size + 1 : 0;
}

static int query_i64(cidx *x, enum cidx_sid id, const char *a, const char *b,
		     int64_t *v, bool *found)
{
	sqlite3_stmt *s = x->st[id];
	cidx_bind_str(s, 1, a);
	cidx_bind_str(s, 2, b);
	int src = sqlite3_step(s);
	*v = src == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
	if (found)
		*found = src == SQLITE_ROW;
	return cidx_finish(x, s, src);
}

static int set_state(cidx *x, const char *name, int state, const char *filler)
{
	sqlite3_stmt *s = x->st[S_ENTRY_SET];
	cidx_bind_str(s, 1, name);
	sqlite3_bind_int(s, 2, state);
	cidx_bind_str(s, 3, filler);
	return cidx_finish(x, s, sqlite3_step(s));
}

static int touch(cidx *x, const char *name)
{
	sqlite3_stmt *s = x->st[S_ENTRY_TOUCH];
	cidx_bind_str(s, 1, name);
	sqlite3_bind_int64(s, 2, cidx_now_ns());
	return cidx_finish(x, s, sqlite3_step(s));
}

static int pins_count(cidx *x, const char *name, int64_t *n)
{
	return query_i64(x, S_PINS_COUNT, name, NULL, n, NULL);
}

/* ---- eviction -------------------------------------------------------- */

static int free_bytes(const cidx *x, uint64_t *avail)
{
	struct statvfs sv;
	if (statvfs(x->dir, &sv) < 0)
		return -errno;
	*avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	return 0;
}

/* Whether size more bytes on the disk would leave less than min_free free
 * (counting what downloads in progress still have to write). */
static int over_disk(cidx *x, uint64_t size, bool *over)
{
	int64_t owed = 0;
	uint64_t avail = 0;
	int rc = free_bytes(x, &avail);
	if (!rc)
		rc = query_i64(x, S_OUTSTANDING, NULL, NULL, &owed, NULL);
	avail = avail > (uint64_t)owed ? avail - (uint64_t)owed : 0;
	*over = !rc && avail < sat_add(size, x->lim.min_free);
	return rc;
}

/* Whether a new entry of size would break the cap or min_free. */
static int over_limits(cidx *x, uint64_t size, bool *over)
{
	int64_t used = 0;
	int rc = 0;
	*over = false;
	if (x->lim.cap) {
		rc = query_i64(x, S_USED, NULL, NULL, &used, NULL);
		*over = !rc && sat_add((uint64_t)used, size) > x->lim.cap;
	}
	if (rc || *over || !x->lim.min_free)
		return rc;
	return over_disk(x, size, over);
}

/* -ENOSPC when evicting everything evictable could not make room under the
 * cap: then nothing is evicted for nothing. */
static int cap_reachable(cidx *x, uint64_t size)
{
	int64_t kept = 0;
	if (!x->lim.cap)
		return 0;
	int rc = query_i64(x, S_UNEVICTABLE, NULL, NULL, &kept, NULL);
	if (!rc && sat_add((uint64_t)kept, size) > x->lim.cap)
		rc = -ENOSPC;
	return rc;
}

static int evict_one(cidx *x)
{
	cidx_strs v = {0};
	int rc = cidx_query_strs(x, S_VICTIM, NULL, &v);
	if (!rc && v.n == 0)
		rc = -ENOSPC;
	if (!rc)
		rc = cidx_drop_entry(x, v.v[0]);
	if (!rc) {
		x->evictions++;
		log_debug("cache: evicted %s", v.v[0]);
	}
	cidx_strs_free(&v);
	return rc;
}

/* Makes room for size bytes, or -ENOSPC (evictions done stay done: they
 * were due anyway, and their files are already gone).  Write lock held. */
static int reserve(cidx *x, uint64_t size)
{
	CIDX_ASSERT_WRITING(x);
	bool over;
	int rc = over_limits(x, size, &over);
	if (rc || !over)
		return rc;
	rc = cidx_reap_locked(x);
	if (!rc)
		rc = cap_reachable(x, size);
	while (!rc && !(rc = over_limits(x, size, &over)) && over)
		rc = evict_one(x);
	return rc;
}

int cidx_free_disk(cidx *x, uint64_t size)
{
	int rc = cidx_enter(x, true);
	if (rc)
		return rc;
	bool over;
	rc = over_disk(x, size, &over);
	if (!rc && over)
		rc = cidx_reap_locked(x);
	while (!rc && !(rc = over_disk(x, size, &over)) && over)
		rc = evict_one(x);
	return cidx_leave(x, rc, true);
}

/* ---- acquire and friends --------------------------------------------- */

/* Loads e->done/e->crc from the chunks rows, (re)allocating them. */
static int load_chunks(cidx *x, cidx_entry *e)
{
	uint32_t n = (uint32_t)n_chunks_of(e->size, e->chunk_size);
	if (!e->done || !e->crc || e->n_chunks != n) {
		cidx_entry_free(e);
		e->done = calloc(n ? n : 1, sizeof *e->done);
		e->crc = calloc(n ? n : 1, sizeof *e->crc);
		if (!e->done || !e->crc)
			return -ENOMEM;
	}
	memset(e->done, 0, n * sizeof *e->done);
	memset(e->crc, 0, n * sizeof *e->crc);
	e->n_chunks = n;
	sqlite3_stmt *s = x->st[S_CHUNKS_GET];
	cidx_bind_str(s, 1, e->name);
	int src;
	while ((src = sqlite3_step(s)) == SQLITE_ROW) {
		int64_t i = sqlite3_column_int64(s, 0);
		if (i < 0 || i >= n)
			continue;
		e->done[i] = 1;
		e->crc[i] = (uint32_t)sqlite3_column_int64(s, 1);
	}
	return cidx_finish(x, s, src);
}

typedef struct cidx_req {
	const char *bucket, *key, *etag;
	size_t key_len;
} cidx_req;

static int insert_entry(cidx *x, const cidx_req *q, const cidx_entry *e)
{
	bool empty = e->size == 0;
	sqlite3_stmt *s = x->st[S_ENTRY_INS];
	cidx_bind_str(s, 1, e->name);
	cidx_bind_str(s, 2, q->bucket);
	sqlite3_bind_blob(s, 3, q->key_len ? q->key : "", (int)q->key_len,
			  SQLITE_STATIC);
	cidx_bind_str(s, 4, q->etag);
	sqlite3_bind_int64(s, 5, (int64_t)e->size);
	sqlite3_bind_int64(s, 6, e->chunk_size);
	sqlite3_bind_int(s, 7, empty);
	cidx_bind_str(s, 8, empty ? NULL : x->owner);
	return cidx_finish(x, s, sqlite3_step(s));
}

/* *keep: the transaction is to be committed even though rc is -ENOSPC. */
static int create_entry(cidx *x, const cidx_req *q, cidx_entry *e,
			enum cidx_role *role, bool *keep)
{
	int rc = reserve(x, e->size);
	*keep = rc == -ENOSPC;
	if (!rc)
		rc = insert_entry(x, q, e);
	if (!rc)
		rc = cidx_file_create(x, e->name, e->size);
	*role = e->size ? CIDX_FILLER : CIDX_COMPLETE;
	return rc;
}

/* Drops every chunk and recreates the file, this process filling.  The
 * size was reserved when the entry was created. */
static int reset_entry(cidx *x, cidx_entry *e, enum cidx_role *role)
{
	bool empty = e->size == 0;
	log_info("cache file of %s is missing or truncated: fetching again",
		 e->name);
	int rc = cidx_run(x, S_CHUNKS_DEL, e->name, NULL);
	if (!rc)
		rc = set_state(x, e->name, empty, empty ? NULL : x->owner);
	if (!rc)
		rc = cidx_file_create(x, e->name, e->size);
	*role = empty ? CIDX_COMPLETE : CIDX_FILLER;
	return rc;
}

static int join_entry(cidx *x, const cidx_row *r, cidx_entry *e,
		      enum cidx_role *role)
{
	bool file_ok = cidx_file_matches(x, e->name, e->size);
	if (r->state == 1) {
		*role = CIDX_COMPLETE;
		return file_ok ? 0 : reset_entry(x, e, role);
	}
	*role = CIDX_FILLER;
	if (!strcmp(r->filler, x->owner))
		return 0;
	if (r->filler[0] && cidx_owner_alive(x, r->filler)) {
		*role = CIDX_FOLLOWER;
		return 0;
	}
	if (!file_ok)
		return reset_entry(x, e, role);
	log_info("cache: taking over the download of %s", e->name);
	return set_state(x, e->name, 0, x->owner);
}

/* An entry that cannot be used as is (doomed, or whose row disagrees with
 * the request) is dropped when no live owner pins it; else -EBUSY. */
static int drop_stale(cidx *x, const char *name)
{
	int64_t n = 0;
	int rc = pins_count(x, name, &n);
	if (!rc && n > 0)
		rc = cidx_reap_locked(x);
	if (!rc && n > 0)
		rc = pins_count(x, name, &n);
	if (!rc)
		rc = n ? -EBUSY : cidx_drop_entry(x, name);
	return rc;
}

static int acquire_locked(cidx *x, const cidx_req *q, cidx_entry *e,
			  enum cidx_role *role, bool *keep)
{
	cidx_row r;
	bool found;
	int rc = cidx_row_get(x, e->name, &r, &found);
	if (!rc && found &&
	    (r.doomed || r.size != e->size || !r.chunk_size ||
	     n_chunks_of(r.size, r.chunk_size) > UINT32_MAX)) {
		rc = drop_stale(x, e->name);
		found = false;
	}
	if (!rc && found) {
		e->chunk_size = r.chunk_size; /* the entry's own wins */
		rc = join_entry(x, &r, e, role);
	} else if (!rc) {
		rc = create_entry(x, q, e, role, keep);
	}
	if (!rc)
		rc = cidx_run(x, S_PIN_ADD, e->name, x->owner);
	if (!rc)
		rc = touch(x, e->name);
	if (!rc)
		rc = load_chunks(x, e);
	return rc;
}

int cidx_acquire(cidx *x, const char *bucket, const char *key, size_t key_len,
		 const char *etag, uint64_t size, uint32_t chunk_size,
		 cidx_entry *out, enum cidx_role *role)
{
	memset(out, 0, sizeof *out);
	if (!bucket || !etag || (!key && key_len) || !chunk_size ||
	    size > INT64_MAX || key_len > INT32_MAX)
		return -EINVAL;
	if (n_chunks_of(size, chunk_size) > UINT32_MAX)
		return -EFBIG;
	cidx_req q = {bucket, key, etag, key_len};
	cidx_name(bucket, key, key_len, etag, out->name);
	if (!cidx_is_hex(out->name, CIDX_NAME_LEN - 1))
		return -ENOMEM;
	out->size = size;
	out->chunk_size = chunk_size;
	bool keep = false; /* the reaping and evictions of a failed reserve */
	int rc = cidx_enter(x, true);
	if (!rc) {
		rc = acquire_locked(x, &q, out, role, &keep);
		rc = cidx_leave(x, rc, !rc || keep);
	}
	if (rc)
		cidx_entry_free(out);
	return rc;
}

static int chunk_put(cidx *x, const char *name, uint32_t idx, uint32_t crc);

static int adopt_file(cidx *x, const char *name, const char *src)
{
	char *sub = cidx_pathf("%s/objects/%.2s", x->dir, name);
	char *p = cidx_path(x, name);
	int rc = sub && p ? cidx_private_dir(sub) : -ENOMEM;
	if (!rc && rename(src, p) < 0)
		rc = -errno;
	free(sub);
	free(p);
	return rc;
}

static int adopt_locked(cidx *x, const cidx_req *q, cidx_entry *e,
			const uint32_t *crc, const char *src, bool *keep)
{
	cidx_row r;
	bool found;
	int rc = cidx_row_get(x, e->name, &r, &found);
	if (!rc && found && r.state == 1 && !r.doomed && r.size == e->size &&
	    cidx_file_matches(x, e->name, e->size))
		return -EEXIST;
	if (!rc && found)
		rc = drop_stale(x, e->name);
	if (!rc) {
		rc = reserve(x, e->size);
		*keep = rc == -ENOSPC;
	}
	if (!rc)
		rc = insert_entry(x, q, e);
	if (!rc)
		rc = set_state(x, e->name, 1, NULL);
	uint32_t n = (uint32_t)n_chunks_of(e->size, e->chunk_size);
	for (uint32_t i = 0; !rc && i < n; i++)
		rc = chunk_put(x, e->name, i, crc[i]);
	if (!rc)
		rc = touch(x, e->name);
	if (!rc)
		rc = adopt_file(x, e->name, src);
	return rc;
}

int cidx_adopt(cidx *x, const char *bucket, const char *key, size_t key_len,
	       const char *etag, uint64_t size, uint32_t chunk_size,
	       const uint32_t *crc, const char *src)
{
	cidx_entry e = {0};
	if (!bucket || !etag || !key || !chunk_size || size > INT64_MAX ||
	    key_len > INT32_MAX || n_chunks_of(size, chunk_size) > UINT32_MAX)
		return -EINVAL;
	cidx_req q = {bucket, key, etag, key_len};
	cidx_name(bucket, key, key_len, etag, e.name);
	if (!cidx_is_hex(e.name, CIDX_NAME_LEN - 1))
		return -ENOMEM;
	e.size = size;
	e.chunk_size = chunk_size;
	bool keep = false;
	int rc = cidx_enter(x, true);
	if (!rc) {
		rc = adopt_locked(x, &q, &e, crc, src, &keep);
		rc = cidx_leave(x, rc, !rc || keep);
	}
	return rc;
}

static int release_locked(cidx *x, const char *name)
{
	int64_t n = 0;
	bool found;
	cidx_row r;
	int rc = query_i64(x, S_PIN_GET, name, x->owner, &n, &found);
	if (!rc && !found)
		rc = -ENOENT;
	if (!rc)
		rc = cidx_run(x, n > 1 ? S_PIN_DEC : S_PIN_DEL, name, x->owner);
	if (!rc && n <= 1) /* our last handle: an unfinished fill is orphaned */
		rc = cidx_run(x, S_FILLER_DROP, name, x->owner);
	if (!rc)
		rc = touch(x, name);
	if (!rc)
		rc = cidx_row_get(x, name, &r, &found);
	if (!rc && found && r.doomed && !(rc = pins_count(x, name, &n)) && !n)
		rc = cidx_drop_entry(x, name);
	return rc;
}

/* Runs fn(x, name) in one write transaction under the mutex. */
static int with_tx(cidx *x, const char *name, int (*fn)(cidx *, const char *))
{
	if (!name || !cidx_is_hex(name, CIDX_NAME_LEN - 1))
		return -EINVAL;
	int rc = cidx_enter(x, true);
	if (rc)
		return rc;
	rc = fn(x, name);
	return cidx_leave(x, rc, !rc);
}

int cidx_release(cidx *x, const char *name)
{
	return with_tx(x, name, release_locked);
}

static int discard_locked(cidx *x, const char *name)
{
	cidx_row r;
	bool found;
	int rc = cidx_row_get(x, name, &r, &found);
	if (rc || !found)
		return rc;
	rc = drop_stale(x, name);
	return rc == -EBUSY ? cidx_run(x, S_ENTRY_DOOM, name, NULL) : rc;
}

int cidx_discard(cidx *x, const char *name)
{
	return with_tx(x, name, discard_locked);
}

static int chunk_put(cidx *x, const char *name, uint32_t idx, uint32_t crc)
{
	sqlite3_stmt *s = x->st[S_CHUNK_PUT];
	cidx_bind_str(s, 1, name);
	sqlite3_bind_int64(s, 2, idx);
	sqlite3_bind_int64(s, 3, crc);
	return cidx_finish(x, s, sqlite3_step(s));
}

static int chunks_done_locked(cidx *x, const char *name, const uint32_t *idx,
			      const uint32_t *crc, size_t n, bool *completed)
{
	cidx_row r;
	bool found;
	int64_t have = 0;
	int rc = cidx_row_get(x, name, &r, &found);
	if (!rc && !found)
		rc = -ENOENT;
	if (rc)
		return rc;
	if (!r.chunk_size)
		return -EIO;
	uint64_t total = n_chunks_of(r.size, r.chunk_size);
	for (size_t i = 0; !rc && i < n; i++)
		rc = idx[i] < total ? chunk_put(x, name, idx[i], crc[i])
				    : -EINVAL;
	if (!rc && r.state != 1)
		rc = query_i64(x, S_CHUNKS_COUNT, name, NULL, &have, NULL);
	if (!rc && r.state != 1 && (uint64_t)have >= total) {
		rc = set_state(x, name, 1, NULL);
		r.state = 1;
	}
	if (!rc && completed)
		*completed = r.state == 1;
	return rc;
}

int cidx_chunks_done(cidx *x, const char *name, const uint32_t *idx,
		     const uint32_t *crc, size_t n, bool *completed)
{
	if (completed)
		*completed = false;
	if (!name || !cidx_is_hex(name, CIDX_NAME_LEN - 1) ||
	    (n && (!idx || !crc)))
		return -EINVAL;
	int rc = cidx_enter(x, true);
	if (!rc) {
		rc = chunks_done_locked(x, name, idx, crc, n, completed);
		rc = cidx_leave(x, rc, !rc);
	}
	if (rc && completed)
		*completed = false;
	return rc;
}

int cidx_chunk_done(cidx *x, const char *name, uint32_t idx, uint32_t crc,
		    bool *completed)
{
	return cidx_chunks_done(x, name, &idx, &crc, 1, completed);
}

/* The caller fetches the chunk again itself, so it becomes the filler
 * unless another live process already is one. */
static int forget_locked(cidx *x, const char *name, uint32_t idx)
{
	cidx_row r;
	bool found;
	int rc = cidx_row_get(x, name, &r, &found);
	if (!rc && !found)
		rc = -ENOENT;
	if (rc)
		return rc;
	sqlite3_stmt *s = x->st[S_CHUNK_DEL];
	cidx_bind_str(s, 1, name);
	sqlite3_bind_int64(s, 2, idx);
	rc = cidx_finish(x, s, sqlite3_step(s));
	bool keep =
	    r.state == 0 && r.filler[0] && cidx_owner_alive(x, r.filler);
	if (!rc && !keep)
		rc = set_state(x, name, 0, x->owner);
	return rc;
}

int cidx_chunk_forget(cidx *x, const char *name, uint32_t idx)
{
	if (!name || !cidx_is_hex(name, CIDX_NAME_LEN - 1))
		return -EINVAL;
	int rc = cidx_enter(x, true);
	if (rc)
		return rc;
	rc = forget_locked(x, name, idx);
	return cidx_leave(x, rc, !rc);
}

/* Never touches the file: the caller keeps the descriptor it has. */
static int refresh_locked(cidx *x, cidx_entry *e, enum cidx_role *role)
{
	cidx_row r;
	bool found;
	int rc = cidx_row_get(x, e->name, &r, &found);
	if (!rc && !found)
		rc = -ENOENT;
	if (!rc && !r.chunk_size)
		rc = -EIO;
	if (rc)
		return rc;
	e->size = r.size;
	e->chunk_size = r.chunk_size;
	if (r.state == 1)
		*role = CIDX_COMPLETE;
	else if (!strcmp(r.filler, x->owner))
		*role = CIDX_FILLER;
	else if (r.filler[0] && cidx_owner_alive(x, r.filler))
		*role = CIDX_FOLLOWER;
	else {
		log_info("cache: taking over the download of %s", e->name);
		rc = set_state(x, e->name, 0, x->owner);
		*role = CIDX_FILLER;
	}
	return rc ? rc : load_chunks(x, e);
}

int cidx_refresh(cidx *x, cidx_entry *e, enum cidx_role *role)
{
	if (!cidx_is_hex(e->name, CIDX_NAME_LEN - 1))
		return -EINVAL;
	int rc = cidx_enter(x, true);
	if (rc)
		return rc;
	rc = refresh_locked(x, e, role);
	return cidx_leave(x, rc, !rc);
}

/* ---- stats ------------------------------------------------------------ */

/* Sum of the sizes of entries with at least one pin of a live owner. */
static int pinned_bytes(cidx *x, uint64_t *out)
{
	sqlite3_stmt *s = x->st[S_STATS_PINS];
	cidx_strs alive = {0}, dead = {0};
	char last[CIDX_NAME_LEN + 1] = "";
	int src = SQLITE_DONE, rc = 0;
	while (!rc && (src = sqlite3_step(s)) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(s, 0);
		const char *owner = (const char *)sqlite3_column_text(s, 2);
		if (!name || !owner || !strcmp(name, last))
			continue;
		bool live = cidx_strs_has(&alive, owner);
		if (!live && !cidx_strs_has(&dead, owner)) {
			live = cidx_owner_alive(x, owner);
			rc = cidx_strs_push(live ? &alive : &dead, owner);
		}
		if (!live)
			continue;
		*out += (uint64_t)sqlite3_column_int64(s, 1);
		snprintf(last, sizeof last, "%s", name);
	}
	int rc2 = cidx_finish(x, s, rc ? SQLITE_DONE : src);
	cidx_strs_free(&alive);
	cidx_strs_free(&dead);
	return rc ? rc : rc2;
}

static int stats_locked(cidx *x, cidx_stats *st)
{
	sqlite3_stmt *s = x->st[S_STATS];
	int src = sqlite3_step(s);
	if (src == SQLITE_ROW) {
		st->entries = (uint64_t)sqlite3_column_int64(s, 0);
		st->bytes = (uint64_t)sqlite3_column_int64(s, 1);
		st->complete_entries = (uint64_t)sqlite3_column_int64(s, 2);
	}
	int rc = cidx_finish(x, s, src);
	return rc ? rc : pinned_bytes(x, &st->pinned_bytes);
}

int cidx_others_pin(cidx *x, bool *any)
{
	int64_t n = 0;
	int rc = cidx_enter(x, false);
	if (rc)
		return rc;
	rc = query_i64(x, S_PINS_OTHERS, x->owner, NULL, &n, NULL);
	*any = n > 0;
	return cidx_leave(x, rc, !rc);
}

int cidx_get_stats(cidx *x, cidx_stats *st)
{
	memset(st, 0, sizeof *st);
	int rc = cidx_enter(x, false); /* one snapshot for every number */
	if (rc)
		return rc;
	st->evictions = x->evictions;
	rc = stats_locked(x, st);
	return cidx_leave(x, rc, !rc);
}

/* ---- open and close --------------------------------------------------- */

int cidx_open(const char *dir, const cidx_limits *lim, cidx **out, char **err)
{
	*out = NULL;
	if (err)
		*err = NULL;
	cidx *x = calloc(1, sizeof *x);
	if (!x || !dir || !*dir || !(x->dir = strdup(dir))) {
		buf_set_err(err, "%s: %s", dir ? dir : "(null)",
			     x ? "invalid cache directory" : strerror(ENOMEM));
		free(x);
		return -1;
	}
	ckpt_mutex_init(&x->mu);
	x->lock_fd = -1;
	if (lim)
		x->lim = *lim;
	int rc = cidx_db_dirs(x, err);
	if (!rc)
		rc = cidx_owner_lock(x, err);
	if (!rc)
		rc = cidx_db_open(x, err);
	if (!rc)
		rc = cidx_register_owner(x, err);
	if (rc) {
		buf_set_err(err, "%s: %s", dir, strerror(-rc));
		cidx_close(x);
		return -1;
	}
	*out = x;
	return 0;
}

void cidx_close(cidx *x)
{
	if (!x)
		return;
	if (x->db && x->st[S_COUNT - 1])
		cidx_deregister(x);
	for (int i = 0; i < S_COUNT; i++)
		sqlite3_finalize(x->st[i]);
	if (x->db && sqlite3_close(x->db) != SQLITE_OK)
		log_warn("cache index %s: close: %s", x->dir,
			 sqlite3_errmsg(x->db));
	if (x->lock_fd >= 0) {
		char *p = cidx_pathf("%s/owners/%s.lock", x->dir, x->owner);
		if (p)
			unlink(p);
		free(p);
		close(x->lock_fd);
	}
	ckpt_mutex_destroy(&x->mu);
	free(x->dir);
	free(x);
}

const char *cidx_owner_id(const cidx *x)
{
	return x->owner;
}

const char *cidx_dir(const cidx *x)
{
	return x->dir;
}

void cidx_entry_free(cidx_entry *e)
{
	free(e->done);
	free(e->crc);
	e->done = NULL;
	e->crc = NULL;
}

void cidx_name(const char *bucket, const char *key, size_t key_len,
	       const char *etag, char name[CIDX_NAME_LEN])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	bool ok = c && EVP_DigestInit_ex(c, EVP_sha256(), NULL) &&
		  EVP_DigestUpdate(c, bucket, strlen(bucket) + 1) &&
		  EVP_DigestUpdate(c, key_len ? key : "", key_len) &&
		  EVP_DigestUpdate(c, "", 1) &&
		  EVP_DigestUpdate(c, etag, strlen(etag)) &&
		  EVP_DigestFinal_ex(c, md, &len) && len == 32;
	EVP_MD_CTX_free(c);
	if (ok)
		hex_encode(md, 32, name);
	else
		name[0] = '\0'; /* out of memory: no valid name */
}

/* ---- stamps ------------------------------------------------------------ */

static int64_t ts_ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000LL + t->tv_nsec;
}

int cidx_stamp_set(cidx *x, const char *name, const struct stat *st)
{
	ckpt_lock(&x->mu);
	sqlite3_stmt *s = x->st[S_STAMP_SET];
	sqlite3_bind_text(s, 1, name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(s, 2, (sqlite3_int64)st->st_dev);
	sqlite3_bind_int64(s, 3, (sqlite3_int64)st->st_ino);
	sqlite3_bind_int64(s, 4, ts_ns(&st->st_mtim));
	sqlite3_bind_int64(s, 5, ts_ns(&st->st_ctim));
	sqlite3_bind_int64(s, 6, (sqlite3_int64)st->st_size);
	int src = sqlite3_step(s);
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	ckpt_unlock(&x->mu);
	return src == SQLITE_DONE ? 0 : sqlerr_errno(src);
}

int cidx_stamp_matches(cidx *x, const char *name, const struct stat *st,
		       bool *match)
{
	*match = false;
	ckpt_lock(&x->mu);
	sqlite3_stmt *s = x->st[S_STAMP_GET];
	sqlite3_bind_text(s, 1, name, -1, SQLITE_TRANSIENT);
	int src = sqlite3_step(s);
	if (src == SQLITE_ROW)
		*match = sqlite3_column_int64(s, 0) == (sqlite3_int64)st->st_dev &&
			 sqlite3_column_int64(s, 1) == (sqlite3_int64)st->st_ino &&
			 sqlite3_column_int64(s, 2) == ts_ns(&st->st_mtim) &&
			 sqlite3_column_int64(s, 3) == ts_ns(&st->st_ctim) &&
			 sqlite3_column_int64(s, 4) == (sqlite3_int64)st->st_size;
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	ckpt_unlock(&x->mu);
	return src == SQLITE_ROW || src == SQLITE_DONE ? 0 : sqlerr_errno(src);
}
