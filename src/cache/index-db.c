/*
 * index-db: the database under the cache index (index.h): the schema and
 * its migration, every prepared statement (enum cidx_sid in
 * index-state.h), the plumbing that runs them (cidx_finish, cidx_run,
 * transactions, cidx_enter/leave), the small helpers of the module (name
 * check, paths, error messages), the private directories and cache files
 * (created sparse at full size, unlinked, dropped with their rows), and
 * opening the database (cidx_db_dirs, cidx_db_open: util/sqldb.h opens it
 * in WAL mode and migrates the schema kept in PRAGMA user_version; 0600
 * files, statements prepared; a damaged index.db's error says to remove
 * it).  SQLite errors map to -errno through util/sqlerr.h.
 *
 * The lowest file of the index: index.c (entries, chunks, pins, eviction,
 * stats, stamps, open and close) and owner.c (owner ids, liveness,
 * reaping) call into it; it calls neither.  Statements are prepared once
 * and reset after each use (cidx_finish), so no binding outlives its call.
 * Its functions are declared in index-db.h.
 */
#include "cache/index-db.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/index-state.h"
#include "util/buf.h"
#include "util/log.h"
#include "util/sqldb.h"
#include "util/sqlerr.h"
#include "util/vec.h"

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
    [S_PINS_OTHERS] = "SELECT COUNT(*) FROM pins WHERE owner != ?1",
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
    STAMPS_SQL;

/* Version 1 lacked the stamps table; nothing else changed. */
static const sqldb_step schema_up[CIDX_SCHEMA_VERSION - 1] = {
    {STAMPS_SQL, NULL},
};
static const sqldb_schema cidx_schema = {
    .what = "schema", .version = CIDX_SCHEMA_VERSION, .create = schema_sql,
    .up = schema_up, .meta_key = NULL};

/* ---- small helpers -------------------------------------------------- */

int cidx_strs_push(cidx_strs *l, const char *s)
{
	if (l->n == l->cap) {
		char **v = vec_grow(l->v, &l->cap, sizeof *v, 8);
		if (!v)
			return -ENOMEM;
		l->v = v;
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

int64_t cidx_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- SQL plumbing ---------------------------------------------------- */

/* Maps the result of the last step, then makes s reusable. */
int cidx_finish(cidx *x, sqlite3_stmt *s, int src)
{
	int rc = 0;
	if (src != SQLITE_ROW && src != SQLITE_DONE) {
		log_error("cache index %s: %s", x->dir, sqlite3_errmsg(x->db));
		rc = sqlerr_errno(src);
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
	ckpt_lock(&x->mu);
	int rc = cidx_tx_begin(x, write);
	if (rc)
		ckpt_unlock(&x->mu);
	return rc;
}

/* Ends what cidx_enter began; returns rc, or the COMMIT's error. */
int cidx_leave(cidx *x, int rc, bool commit)
{
	int rc2 = cidx_tx_end(x, commit);
	ckpt_unlock(&x->mu);
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

/* ---- files ----------------------------------------------------------- */

/*
 * Makes path a directory private to us without ever changing the mode or
 * owner of one we did not create: a cache_dir may be a directory shared
 * with others (/tmp), and a chmod would take it from them.  A directory
 * mkdir creates here is ours, so it is set to 0700 whatever the umask
 * left.  One that exists is used as it is only when it is safe: ours
 * (-EPERM otherwise) and writable by nobody else (-EACCES otherwise:
 * others could swap the index or the object files under us).  Read bits
 * left by an older version or a manual mkdir are harmless (every file
 * inside is 0600) and left alone.
 */
int cidx_private_dir(const char *path)
{
	struct stat st;
	bool created = mkdir(path, 0700) == 0;
	if (!created && errno != EEXIST)
		return -errno;
	if (stat(path, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (st.st_uid != geteuid())
		return -EPERM;
	if (created)
		return (st.st_mode & 07777) != 0700 && chmod(path, 0700) < 0
			       ? -errno
			       : 0;
	return st.st_mode & (S_IWGRP | S_IWOTH) ? -EACCES : 0;
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

bool cidx_file_matches(const cidx *x, const char *name, uint64_t size)
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
int cidx_file_create(cidx *x, const char *name, uint64_t size)
{
	char *sub = cidx_pathf("%s/objects/%.2s", x->dir, name);
	char *p = cidx_path(x, name);
	int rc = sub && p ? cidx_private_dir(sub) : -ENOMEM;
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
	CIDX_ASSERT_WRITING(x);
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

/* ---- open and close --------------------------------------------------- */

/* Why cidx_private_dir refused path, and what to do instead. */
static void unsafe_dir_err(const char *path, int rc, char **err)
{
	struct stat st;
	bool known = stat(path, &st) == 0;
	if (rc == -EPERM && known)
		buf_set_err(err, "cache directory %s is owned by uid %u, not "
				  "by this user (uid %u); ckptfs never changes "
				  "the owner of a directory: give cache_dir= a "
				  "directory of your own (a missing one is "
				  "created, mode 0700)",
			     path, (unsigned)st.st_uid, (unsigned)geteuid());
	else if (rc == -EACCES && known)
		buf_set_err(err, "cache directory %s is writable by other "
				  "users (mode %04o); ckptfs never changes the "
				  "mode of a directory it did not create: give "
				  "cache_dir= a directory of your own, e.g. "
				  "%s/ckptfs-%u (a missing one is created, mode "
				  "0700)",
			     path, (unsigned)(st.st_mode & 07777), path,
			     (unsigned)geteuid());
	else
		buf_set_err(err, "%s: %s", path, strerror(-rc));
}

int cidx_db_dirs(cidx *x, char **err)
{
	const char *subs[] = {"", "/objects", "/owners"};
	int rc = mkdir_parents(x->dir);
	if (rc)
		buf_set_err(err, "%s: cannot create: %s", x->dir,
			     strerror(-rc));
	for (size_t i = 0; !rc && i < sizeof subs / sizeof *subs; i++) {
		char *p = cidx_pathf("%s%s", x->dir, subs[i]);
		rc = p ? cidx_private_dir(p) : -ENOMEM;
		if (rc)
			unsafe_dir_err(p ? p : x->dir, rc, err);
		free(p);
	}
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
			buf_set_err(err, "%s: chmod: %s", p ? p : x->dir,
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
			buf_set_err(err, "%s/index.db: %s", x->dir,
				     sqlite3_errmsg(x->db));
			return sqlerr_errno(src);
		}
	}
	return 0;
}

/* What to do about an index.db that is not a database, or a damaged
 * one: appended to the error. */
static void damaged_hint(cidx *x, char **err)
{
	int ec = x->db ? sqlite3_errcode(x->db) & 0xff : SQLITE_OK;
	if (ec != SQLITE_NOTADB && ec != SQLITE_CORRUPT)
		return;
	char *why = *err;
	*err = NULL;
	buf_set_err(err,
		     "%s (the cache index is damaged: with no mount using "
		     "the cache directory %s, remove %s/index.db, or the "
		     "whole directory, and mount again: the cache starts "
		     "empty)",
		     why ? why : "damaged", x->dir, x->dir);
	free(why);
}

int cidx_db_open(cidx *x, char **err)
{
	static const sqldb_opts o = {.flags = SQLITE_OPEN_NOFOLLOW,
				     .busy_ms = CIDX_BUSY_MS,
				     .synchronous = "NORMAL",
				     .map = NULL};
	char *p = cidx_pathf("%s/index.db", x->dir);
	if (!p)
		return -ENOMEM;
	int rc = sqldb_open(p, &o, &x->db, err);
	if (!rc)
		rc = private_files(x, err);
	if (!rc)
		rc = sqldb_migrate(x->db, p, &cidx_schema, NULL, err);
	free(p);
	if (rc)
		damaged_hint(x, err);
	if (!rc)
		rc = private_files(x, err);
	return rc ? rc : prepare_all(x, err);
}

char *cidx_path(const cidx *x, const char *name)
{
	if (!name || !cidx_is_hex(name, CIDX_NAME_LEN - 1))
		return NULL;
	return cidx_pathf("%s/objects/%.2s/%s", x->dir, name, name);
}
