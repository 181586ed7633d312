/*
 * cidx: the SQLite index of the read cache (design: doc/cache.md).
 * This file holds entries, chunks, pins, eviction, stats and stamps, and
 * opens and closes the index; owner ids, lock files, liveness and the
 * reaping of dead owners are in owner.c.  Both share index-internal.h
 * (struct cidx, the statements and the helpers that run them).
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

#include "cache/index-internal.h"
#include "util/log.h"

#define CIDX_SCHEMA_VERSION 2
#define CIDX_BUSY_MS 10000

#define EVICTABLE                                           \
	"(e.state = 1 OR e.filler IS NULL) AND NOT EXISTS " \
	"(SELECT 1 FROM pins p WHERE p.name = e.name)"

static const char *const stmt_sql[S_COUNT] = {
    [S_BEGIN] = "BEGIN IMMEDIATE",
    [S_BEGIN_READ] = "BEGIN",
    [S_COMMIT] = "COMMIT",
    [S_ROLLBACK] = "ROLLBACK",
    [S_ENTRY_GET] = "SELECT size, chunk_size, state, filler, doomed "
		    "FROM entries WHERE name = ?1",
    [S_ENTRY_INS] = "INSERT INTO entries(name, bucket, key, etag, size, "
		    "chunk_size, state, filler, last_use, doomed) "
		    "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 0, 0)",
    [S_ENTRY_DEL] = "DELETE FROM entries WHERE name = ?1",
    [S_ENTRY_SET] = "UPDATE entries SET state = ?2, filler = ?3 "
		    "WHERE name = ?1",
    [S_ENTRY_TOUCH] = "UPDATE entries SET last_use = MAX(?2, (SELECT "
		      "IFNULL(MAX(last_use), 0) + 1 FROM entries)) "
		      "WHERE name = ?1",
    [S_ENTRY_DOOM] = "UPDATE entries SET doomed = 1 WHERE name = ?1",
    [S_FILLER_DROP] = "UPDATE entries SET filler = NULL "
		      "WHERE name = ?1 AND filler = ?2 AND state = 0",
    [S_CHUNKS_GET] = "SELECT idx, crc FROM chunks WHERE name = ?1",
    [S_CHUNK_PUT] = "INSERT OR REPLACE INTO chunks(name, idx, crc) "
		    "VALUES(?1, ?2, ?3)",
    [S_CHUNK_DEL] = "DELETE FROM chunks WHERE name = ?1 AND idx = ?2",
    [S_CHUNKS_DEL] = "DELETE FROM chunks WHERE name = ?1",
    [S_CHUNKS_COUNT] = "SELECT COUNT(*) FROM chunks WHERE name = ?1",
    [S_PIN_ADD] = "INSERT INTO pins(name, owner, n) VALUES(?1, ?2, 1) "
		  "ON CONFLICT(name, owner) DO UPDATE SET n = n + 1",
    [S_PIN_GET] = "SELECT n FROM pins WHERE name = ?1 AND owner = ?2",
    [S_PIN_DEC] = "UPDATE pins SET n = n - 1 "
		  "WHERE name = ?1 AND owner = ?2",
    [S_PIN_DEL] = "DELETE FROM pins WHERE name = ?1 AND owner = ?2",
    [S_PINS_COUNT] = "SELECT COUNT(*) FROM pins WHERE name = ?1",
    [S_PINS_DEL_NAME] = "DELETE FROM pins WHERE name = ?1",
    [S_OWNER_INS] = "INSERT OR REPLACE INTO owners(owner, pid, since) "
		    "VALUES(?1, ?2, ?3)",
    [S_OWNER_DEL] = "DELETE FROM owners WHERE owner = ?1",
    [S_OWNER_PINS_DEL] = "DELETE FROM pins WHERE owner = ?1",
    [S_OWNER_FILLS_DROP] = "UPDATE entries SET filler = NULL "
			   "WHERE filler = ?1",
    [S_OWNERS_ALL] = "SELECT owner FROM owners UNION SELECT owner FROM "
		     "pins UNION SELECT filler FROM entries "
		     "WHERE filler IS NOT NULL",
    [S_USED] = "SELECT IFNULL(SUM(size), 0) FROM entries",
    [S_UNEVICTABLE] = "SELECT IFNULL(SUM(size), 0) FROM entries e "
		      "WHERE NOT (" EVICTABLE ")",
    [S_OUTSTANDING] = "SELECT IFNULL(SUM(MAX(0, size - chunk_size * "
		      "(SELECT COUNT(*) FROM chunks c "
		      "WHERE c.name = e.name))), 0) "
		      "FROM entries e WHERE state = 0",
    [S_VICTIM] = "SELECT name FROM entries e WHERE " EVICTABLE
		 " ORDER BY last_use, rowid LIMIT 1",
    [S_DOOMED_FREE] = "SELECT name FROM entries e WHERE doomed = 1 AND "
		      "NOT EXISTS (SELECT 1 FROM pins p "
		      "WHERE p.name = e.name)",
    [S_STATS] = "SELECT COUNT(*), IFNULL(SUM(size), 0), "
		"IFNULL(SUM(state = 1), 0) FROM entries",
    [S_STATS_PINS] = "SELECT e.name, e.size, p.owner FROM entries e "
		     "JOIN pins p ON p.name = e.name ORDER BY e.name",
    [S_STAMP_SET] = "INSERT OR REPLACE INTO stamps(name, dev, ino, "
		    "mtime_ns, ctime_ns, size) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [S_STAMP_GET] = "SELECT dev, ino, mtime_ns, ctime_ns, size FROM stamps "
		    "WHERE name = ?1",
    [S_STAMP_DEL] = "DELETE FROM stamps WHERE name = ?1",
};

/* The identity of a complete cache file when it was last known good
 * (fsynced after download, or fully CRC-checked): an unchanged file needs
 * no re-check when a process opens it. */
#define STAMPS_SQL                                                      \
	"CREATE TABLE stamps(name TEXT PRIMARY KEY NOT NULL, dev INTEGER, " \
	"ino INTEGER, mtime_ns INTEGER, ctime_ns INTEGER, size INTEGER) "   \
	"WITHOUT ROWID;"

static const char schema_sql[] =
    "CREATE TABLE entries(name TEXT PRIMARY KEY NOT NULL, "
    "bucket TEXT NOT NULL, key BLOB NOT NULL, etag TEXT NOT NULL, "
    "size INTEGER NOT NULL, chunk_size INTEGER NOT NULL, "
    "state INTEGER NOT NULL, filler TEXT, last_use INTEGER NOT NULL, "
    "doomed INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX entries_lru ON entries(last_use);"
    "CREATE INDEX entries_filler ON entries(filler) "
    "WHERE filler IS NOT NULL;"
    "CREATE TABLE chunks(name TEXT NOT NULL, idx INTEGER NOT NULL, "
    "crc INTEGER NOT NULL, PRIMARY KEY(name, idx)) WITHOUT ROWID;"
    "CREATE TABLE pins(name TEXT NOT NULL, owner TEXT NOT NULL, "
    "n INTEGER NOT NULL, PRIMARY KEY(name, owner)) WITHOUT ROWID;"
    "CREATE INDEX pins_owner ON pins(owner);"
    "CREATE TABLE owners(owner TEXT PRIMARY KEY NOT NULL, pid INTEGER, "
    "since INTEGER);"
    STAMPS_SQL
    "PRAGMA user_version = 2;";

/* Version 1 lacked the stamps table; nothing else changed. */
static const char migrate_v1_sql[] = STAMPS_SQL "PRAGMA user_version = 2;";

/* ---- small helpers -------------------------------------------------- */

int cidx_strs_push(cidx_strs *l, const char *s)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 8;
		char **v = realloc(l->v, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	if (!(l->v[l->n] = strdup(s)))
		return -ENOMEM;
	l->n++;
	return 0;
}

bool cidx_strs_has(const cidx_strs *l, const char *s)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->v[i], s))
			return true;
	return false;
}

void cidx_strs_free(cidx_strs *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof *l);
}

char *cidx_pathf(const char *fmt, ...)
{
	va_list ap;
	char *p;
	va_start(ap, fmt);
	int n = vasprintf(&p, fmt, ap);
	va_end(ap);
	return n < 0 ? NULL : p;
}

void cidx_set_err(char **err, const char *fmt, ...)
{
	va_list ap;
	if (!err || *err)
		return;
	va_start(ap, fmt);
	if (vasprintf(err, fmt, ap) < 0)
		*err = NULL;
	va_end(ap);
}

/* Exactly n lowercase hex digits: the only names we ever build paths from,
 * whatever the database holds. */
bool cidx_is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return s[n] == '\0';
}

void cidx_to_hex(const unsigned char *p, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 15];
	}
	out[2 * n] = '\0';
}

int64_t cidx_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t n_chunks_of(uint64_t size, uint32_t chunk_size)
{
	return size ? (size - 1) / chunk_size + 1 : 0;
}

/* ---- SQL plumbing ---------------------------------------------------- */

static int sql_errno(int src)
{
	switch (src & 0xff) {
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_READONLY:
		return -EROFS;
	case SQLITE_PERM:
	case SQLITE_CANTOPEN:
		return -EACCES;
	default:
		return -EIO;
	}
}

/* Maps the result of the last step, then makes s reusable. */
int cidx_finish(cidx *x, sqlite3_stmt *s, int src)
{
	int rc = 0;
	if (src != SQLITE_ROW && src != SQLITE_DONE) {
		log_error("cache index %s: %s", x->dir, sqlite3_errmsg(x->db));
		rc = sql_errno(src);
	}
	sqlite3_reset(s);
	sqlite3_clear_bindings(s); /* no STATIC binding outlives its call */
	return rc;
}

void cidx_bind_str(sqlite3_stmt *s, int i, const char *v)
{
	if (v)
		sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC);
}

/* Runs statement id with text parameters ?1 = a, ?2 = b (NULL: unbound). */
int cidx_run(cidx *x, enum cidx_sid id, const char *a, const char *b)
{
	sqlite3_stmt *s = x->st[id];
	cidx_bind_str(s, 1, a);
	cidx_bind_str(s, 2, b);
	return cidx_finish(x, s, sqlite3_step(s));
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

/* Appends column 0 of every row of id (parameter ?1 = a) to out. */
int cidx_query_strs(cidx *x, enum cidx_sid id, const char *a, cidx_strs *out)
{
	sqlite3_stmt *s = x->st[id];
	int src = SQLITE_DONE, rc = 0;
	cidx_bind_str(s, 1, a);
	while (!rc && (src = sqlite3_step(s)) == SQLITE_ROW) {
		const char *v = (const char *)sqlite3_column_text(s, 0);
		if (v && cidx_strs_push(out, v) < 0)
			rc = -ENOMEM;
	}
	int rc2 = cidx_finish(x, s, src);
	return rc ? rc : rc2;
}

int cidx_tx_begin(cidx *x, bool write)
{
	return cidx_run(x, write ? S_BEGIN : S_BEGIN_READ, NULL, NULL);
}

/* Commits (when commit) or rolls back; a failed COMMIT is rolled back. */
int cidx_tx_end(cidx *x, bool commit)
{
	int rc = commit ? cidx_run(x, S_COMMIT, NULL, NULL) : 0;
	if ((!commit || rc) && !sqlite3_get_autocommit(x->db))
		(void)cidx_run(x, S_ROLLBACK, NULL, NULL);
	return rc;
}

/* Takes the mutex and begins a transaction; on error holds nothing. */
int cidx_enter(cidx *x, bool write)
{
	pthread_mutex_lock(&x->mu);
	int rc = cidx_tx_begin(x, write);
	if (rc)
		pthread_mutex_unlock(&x->mu);
	return rc;
}

/* Ends what cidx_enter began; returns rc, or the COMMIT's error. */
int cidx_leave(cidx *x, int rc, bool commit)
{
	int rc2 = cidx_tx_end(x, commit);
	pthread_mutex_unlock(&x->mu);
	return rc ? rc : rc2;
}

int cidx_row_get(cidx *x, const char *name, cidx_row *r, bool *found)
{
	sqlite3_stmt *s = x->st[S_ENTRY_GET];
	cidx_bind_str(s, 1, name);
	int src = sqlite3_step(s);
	memset(r, 0, sizeof *r);
	*found = src == SQLITE_ROW;
	if (*found) {
		int64_t size = sqlite3_column_int64(s, 0);
		int64_t cs = sqlite3_column_int64(s, 1);
		const char *f = (const char *)sqlite3_column_text(s, 3);
		r->size = size > 0 ? (uint64_t)size : 0;
		r->chunk_size = cs > 0 && cs <= UINT32_MAX ? (uint32_t)cs : 0;
		r->state = sqlite3_column_int(s, 2);
		r->doomed = sqlite3_column_int(s, 4) != 0;
		if (f)
			snprintf(r->filler, sizeof r->filler, "%s", f);
	}
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

/* ---- files ----------------------------------------------------------- */

/*
 * Makes path a directory private to us: created 0700, or, when it exists
 * with another mode (group/other bits from an older version or a manual
 * mkdir, or a umask that stripped our own bits), tightened back to 0700 —
 * its contents are ours, so fixing the mode is better than refusing.  A
 * directory owned by another user is refused.
 */
static int private_dir(const char *path)
{
	struct stat st;
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return -errno;
	if (stat(path, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (st.st_uid != geteuid())
		return -EPERM;
	if ((st.st_mode & 07777) != 0700 && chmod(path, 0700) < 0)
		return -errno;
	return 0;
}

/* mkdir -p; missing parents are created 0700 as well (existing ones are
 * left alone). */
static int mkdir_parents(const char *path)
{
	char *p = strdup(path);
	if (!p)
		return -ENOMEM;
	int rc = 0;
	for (char *s = p + 1; *s && !rc; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0700) < 0 && errno != EEXIST)
			rc = -errno;
		*s = '/';
	}
	free(p);
	return rc;
}

static bool file_matches(const cidx *x, const char *name, uint64_t size)
{
	struct stat st;
	char *p = cidx_path(x, name);
	bool ok = p && lstat(p, &st) == 0 && S_ISREG(st.st_mode) &&
		  (uint64_t)st.st_size == size;
	free(p);
	return ok;
}

/* A fresh inode of the full size, sparse.  The old name is unlinked first
 * so that a stray descriptor on a previous file never shares the new one. */
static int file_create(cidx *x, const char *name, uint64_t size)
{
	char *sub = cidx_pathf("%s/objects/%.2s", x->dir, name);
	char *p = cidx_path(x, name);
	int rc = sub && p ? private_dir(sub) : -ENOMEM;
	if (!rc && unlink(p) < 0 && errno != ENOENT)
		rc = -errno;
	if (!rc) {
		int fd = open(
		    p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
		    0600);
		if (fd < 0 || fchmod(fd, 0600) < 0 ||
		    ftruncate(fd, (off_t)size) < 0)
			rc = -errno;
		if (fd >= 0 && close(fd) < 0 && !rc)
			rc = -errno;
		if (rc && fd >= 0)
			unlink(p);
	}
	if (rc)
		log_error("cache file %s: %s", p ? p : name, strerror(-rc));
	free(sub);
	free(p);
	return rc;
}

void cidx_file_unlink(const cidx *x, const char *name)
{
	char *p = cidx_path(x, name); /* NULL for names we never create */
	if (p && unlink(p) < 0 && errno != ENOENT)
		log_warn("cache file %s: unlink: %s", p, strerror(errno));
	free(p);
}

/* Deletes every row of name, then its file.  Write lock held. */
int cidx_drop_entry(cidx *x, const char *name)
{
	int rc = cidx_run(x, S_CHUNKS_DEL, name, NULL);
	if (!rc)
		rc = cidx_run(x, S_PINS_DEL_NAME, name, NULL);
	if (!rc)
		rc = cidx_run(x, S_ENTRY_DEL, name, NULL);
	if (!rc)
		rc = cidx_run(x, S_STAMP_DEL, name, NULL);
	if (!rc)
		cidx_file_unlink(x, name);
	return rc;
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
		rc = file_create(x, e->name, e->size);
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
		rc = file_create(x, e->name, e->size);
	*role = empty ? CIDX_COMPLETE : CIDX_FILLER;
	return rc;
}

static int join_entry(cidx *x, const cidx_row *r, cidx_entry *e,
		      enum cidx_role *role)
{
	bool file_ok = file_matches(x, e->name, e->size);
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
	int rc = sub && p ? private_dir(sub) : -ENOMEM;
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
	    file_matches(x, e->name, e->size))
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

static int open_dirs(cidx *x, char **err)
{
	const char *subs[] = {"", "/objects", "/owners"};
	int rc = mkdir_parents(x->dir);
	if (rc)
		cidx_set_err(err, "%s: cannot create: %s", x->dir,
			     strerror(-rc));
	for (size_t i = 0; !rc && i < sizeof subs / sizeof *subs; i++) {
		char *p = cidx_pathf("%s%s", x->dir, subs[i]);
		rc = p ? private_dir(p) : -ENOMEM;
		if (rc)
			cidx_set_err(err, "%s: %s", p ? p : x->dir,
				     rc == -EPERM ? "owned by another user"
						  : strerror(-rc));
		free(p);
	}
	return rc;
}

static int exec_sql(cidx *x, const char *sql, char **err)
{
	char *msg = NULL;
	int src = sqlite3_exec(x->db, sql, NULL, NULL, &msg);
	if (src != SQLITE_OK)
		cidx_set_err(err, "%s/index.db: %s", x->dir,
			     msg ? msg : sqlite3_errstr(src));
	sqlite3_free(msg);
	return src == SQLITE_OK ? 0 : sql_errno(src);
}

/* Reads column 0 of a one-row statement as text into buf. */
static int pragma_text(cidx *x, const char *sql, char *buf, size_t len)
{
	sqlite3_stmt *s;
	int src = sqlite3_prepare_v2(x->db, sql, -1, &s, NULL);
	if (src != SQLITE_OK)
		return sql_errno(src);
	src = sqlite3_step(s);
	const char *v = (const char *)sqlite3_column_text(s, 0);
	snprintf(buf, len, "%s", src == SQLITE_ROW && v ? v : "");
	sqlite3_finalize(s);
	return src == SQLITE_ROW || src == SQLITE_DONE ? 0 : sql_errno(src);
}

/* Creates the schema (version 0 = empty file), or checks its version. */
static int schema(cidx *x, char **err)
{
	char v[32];
	int rc = exec_sql(x, "BEGIN IMMEDIATE", err);
	if (!rc)
		rc = pragma_text(x, "PRAGMA user_version", v, sizeof v);
	if (!rc && atoi(v) == 0)
		rc = exec_sql(x, schema_sql, err);
	else if (!rc && atoi(v) == 1)
		rc = exec_sql(x, migrate_v1_sql, err);
	else if (!rc && atoi(v) != CIDX_SCHEMA_VERSION) {
		cidx_set_err(err, "%s/index.db: schema version %s, expected %d",
			     x->dir, v, CIDX_SCHEMA_VERSION);
		rc = -EPROTO;
	}
	if (!rc)
		rc = exec_sql(x, "COMMIT", err);
	if (rc && !sqlite3_get_autocommit(x->db))
		sqlite3_exec(x->db, "ROLLBACK", NULL, NULL, NULL);
	if (rc)
		cidx_set_err(err, "%s/index.db: %s", x->dir, strerror(-rc));
	return rc;
}

/* index.db and its -wal/-shm are 0600 whatever the umask or an older
 * version left: SQLite creates the latter with the mode of the former. */
static int private_files(cidx *x, char **err)
{
	const char *sfx[] = {"", "-wal", "-shm"};
	int rc = 0;
	for (size_t i = 0; !rc && i < sizeof sfx / sizeof *sfx; i++) {
		char *p = cidx_pathf("%s/index.db%s", x->dir, sfx[i]);
		if (!p)
			rc = -ENOMEM;
		else if (chmod(p, 0600) < 0 && (errno != ENOENT || !i))
			rc = -errno;
		if (rc)
			cidx_set_err(err, "%s: chmod: %s", p ? p : x->dir,
				     strerror(-rc));
		free(p);
	}
	return rc;
}

static int prepare_all(cidx *x, char **err)
{
	for (int i = 0; i < S_COUNT; i++) {
		int src = sqlite3_prepare_v3(x->db, stmt_sql[i], -1,
					     SQLITE_PREPARE_PERSISTENT,
					     &x->st[i], NULL);
		if (src != SQLITE_OK) {
			cidx_set_err(err, "%s/index.db: %s", x->dir,
				     sqlite3_errmsg(x->db));
			return sql_errno(src);
		}
	}
	return 0;
}

static int open_db(cidx *x, char **err)
{
	char *p = cidx_pathf("%s/index.db", x->dir);
	char mode[16] = "";
	if (!p)
		return -ENOMEM;
	int src =
	    sqlite3_open_v2(p, &x->db,
			    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
				SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW,
			    NULL);
	if (src == SQLITE_OK)
		src = sqlite3_busy_timeout(x->db, CIDX_BUSY_MS);
	int rc = src == SQLITE_OK ? 0 : sql_errno(src);
	if (rc)
		cidx_set_err(err, "%s: %s", p,
			     x->db ? sqlite3_errmsg(x->db)
				   : sqlite3_errstr(src));
	free(p);
	if (!rc)
		rc = private_files(x, err);
	if (!rc) {
		rc = pragma_text(x, "PRAGMA journal_mode = WAL", mode,
				 sizeof mode);
		if (!rc && strcmp(mode, "wal"))
			rc = -EIO;
		if (rc)
			cidx_set_err(err, "%s/index.db: cannot enter WAL mode",
				     x->dir);
	}
	if (!rc)
		rc = exec_sql(x, "PRAGMA synchronous = NORMAL", err);
	if (!rc)
		rc = schema(x, err);
	if (!rc)
		rc = private_files(x, err);
	return rc ? rc : prepare_all(x, err);
}

int cidx_open(const char *dir, const cidx_limits *lim, cidx **out, char **err)
{
	*out = NULL;
	if (err)
		*err = NULL;
	cidx *x = calloc(1, sizeof *x);
	if (!x || !dir || !*dir || !(x->dir = strdup(dir))) {
		cidx_set_err(err, "%s: %s", dir ? dir : "(null)",
			     x ? "invalid cache directory" : strerror(ENOMEM));
		free(x);
		return -1;
	}
	pthread_mutex_init(&x->mu, NULL);
	x->lock_fd = -1;
	if (lim)
		x->lim = *lim;
	int rc = open_dirs(x, err);
	if (!rc)
		rc = cidx_owner_lock(x, err);
	if (!rc)
		rc = open_db(x, err);
	if (!rc)
		rc = cidx_register_owner(x, err);
	if (rc) {
		cidx_set_err(err, "%s: %s", dir, strerror(-rc));
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
	pthread_mutex_destroy(&x->mu);
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
		cidx_to_hex(md, 32, name);
	else
		name[0] = '\0'; /* out of memory: no valid name */
}

char *cidx_path(const cidx *x, const char *name)
{
	if (!name || !cidx_is_hex(name, CIDX_NAME_LEN - 1))
		return NULL;
	return cidx_pathf("%s/objects/%.2s/%s", x->dir, name, name);
}

/* ---- stamps ------------------------------------------------------------ */

static int64_t ts_ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000LL + t->tv_nsec;
}

int cidx_stamp_set(cidx *x, const char *name, const struct stat *st)
{
	pthread_mutex_lock(&x->mu);
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
	pthread_mutex_unlock(&x->mu);
	return src == SQLITE_DONE ? 0 : sql_errno(src);
}

int cidx_stamp_matches(cidx *x, const char *name, const struct stat *st,
		       bool *match)
{
	*match = false;
	pthread_mutex_lock(&x->mu);
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
	pthread_mutex_unlock(&x->mu);
	return src == SQLITE_ROW || src == SQLITE_DONE ? 0 : sql_errno(src);
}
