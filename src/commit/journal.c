/*
 * jr: the engine journal (journal.h).  One connection, one exclusive flock
 * on the state directory, every change durable before it returns.
 *
 * Open, schema and upgrades, the statement runner (jr_exec) and every
 * statement of the engine's tables with the decoding of their rows (the
 * engine turns the decoded rows into its model: commit/engine.c).
 */
#include "commit/journal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/sqldb.h"
#include "util/sqlerr.h"

/* 2: files.blocks and parts.segs (block checksums of manifests); a
 * version 1 journal is upgraded in place (its rows get NULL: no block
 * checksums for the files it had already uploaded).
 * 3: txns.seq, the queue position when it is not the id (a temp-named
 * root takes its place at its rename, doc/commit.md "Ordering"); NULL in
 * older rows, which keep their id as position.
 * 4: files.rdev, the device number of a device node (doc/posix.md); NULL
 * (0) in older rows.
 * 5: dirs.xattrs, a directory's extended attributes; NULL in older rows. */
#define JR_VERSION 5

/*
 * The reserve (doc/commit.md "Failed writes"): STATE_DIR/reserve, a file
 * of JR_RESERVE bytes allocated while the disk has room.  On a full disk
 * a fact that cannot be journaled is lost at a SIGKILL (a poison, the
 * short file's put): a write that fails with SQLITE_FULL frees the
 * reserve and is tried once more (jr_exec for one statement, the caller
 * for a transaction: jr_free_reserve), so it reaches the journal.  The
 * reserve is made again once the disk has room for it twice over
 * (looked at after a successful write, at most once a second).  A few
 * MiB: a fact is a few pages of the WAL.
 */
#define JR_RESERVE (4ull << 20)

struct jr {
	sqlite3 *db;
	int lock_fd;
	char *path;
	char *reserve;    /* its path */
	bool has_reserve; /* allocated */
	double reserve_at; /* next look at whether it can be made again */
	int lost;         /* a statement failed and SQLite rolled the open
			   * transaction back: what every statement up to
			   * jr_commit or jr_rollback returns (they would
			   * otherwise commit one by one) */
};

static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v TEXT);"
    "CREATE TABLE IF NOT EXISTS txns(id INTEGER PRIMARY KEY AUTOINCREMENT, "
    " kind INTEGER NOT NULL, root TEXT NOT NULL, dest TEXT, "
    " is_dir INTEGER NOT NULL, state INTEGER NOT NULL, manifest_root TEXT, "
    " error TEXT, seq INTEGER);"
    "CREATE TABLE IF NOT EXISTS files(id INTEGER PRIMARY KEY AUTOINCREMENT, "
    " txn INTEGER NOT NULL, path TEXT NOT NULL, sid INTEGER NOT NULL, "
    " size INTEGER NOT NULL, mode INTEGER, uid INTEGER, gid INTEGER, "
    " mtime_ns INTEGER, xattrs BLOB, symlink TEXT, state INTEGER NOT NULL, "
    " key TEXT, upload_id TEXT, part_size INTEGER, etag TEXT, "
    " crc32c INTEGER, blocks TEXT, rdev INTEGER);"
    "CREATE INDEX IF NOT EXISTS files_txn ON files(txn);"
    "CREATE TABLE IF NOT EXISTS parts(file INTEGER NOT NULL, "
    " n INTEGER NOT NULL, etag TEXT NOT NULL, crc32c INTEGER NOT NULL, "
    " len INTEGER NOT NULL, segs TEXT, PRIMARY KEY(file, n)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS dirs(txn INTEGER NOT NULL, "
    " path TEXT NOT NULL, mode INTEGER, uid INTEGER, gid INTEGER, "
    " mtime_ns INTEGER, xattrs BLOB, PRIMARY KEY(txn, path)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS garbage(txn INTEGER NOT NULL, "
    " key TEXT NOT NULL, PRIMARY KEY(txn, key)) WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS garbage_key ON garbage(key);"
    /* no AUTOINCREMENT: a new row's id is above every row's left (its
     * order), and one page written instead of two took a hold from
     * about 220 to 50 us (rm -r of 1000 files) */
    "CREATE TABLE IF NOT EXISTS held(id INTEGER PRIMARY KEY, "
    " path TEXT NOT NULL, is_dir INTEGER NOT NULL, keep TEXT);";

/* The shared mapping (util/sqlerr.h), but for the two codes the journal
 * has always reported its own way: a read-only database as -EACCES, one
 * that cannot be opened as -EIO. */
static int sql_errno(int src)
{
	switch (src & 0xff) {
	case SQLITE_READONLY:
		return -EACCES;
	case SQLITE_CANTOPEN:
		return -EIO;
	default:
		return sqlerr_errno(src);
	}
}

static const sqldb_column jr_v2_columns[] = {
    {"files", "blocks", "TEXT"}, {"parts", "segs", "TEXT"}, {NULL, NULL, NULL}};
static const sqldb_column jr_v3_columns[] = {
    {"txns", "seq", "INTEGER"}, {NULL, NULL, NULL}};
static const sqldb_column jr_v4_columns[] = {
    {"files", "rdev", "INTEGER"}, {NULL, NULL, NULL}};
static const sqldb_column jr_v5_columns[] = {
    {"dirs", "xattrs", "BLOB"}, {NULL, NULL, NULL}};

/* In-place upgrades, one version at a time: up[v - 1] takes v to v + 1.
 * The journal keeps its version in meta's row 'version' (as it always
 * has; a new journal gets JR_VERSION). */
static const sqldb_step jr_up[JR_VERSION - 1] = {
    {NULL, jr_v2_columns},
    {NULL, jr_v3_columns},
    {NULL, jr_v4_columns},
    {NULL, jr_v5_columns},
};
static const sqldb_schema jr_schema = {
    .what = "journal", .version = JR_VERSION, .create = NULL, .up = jr_up,
    .meta_key = "version"};


static const sqldb_opts jr_db_opts = {.flags = 0, .busy_ms = 5000,
				      .synchronous = "FULL",
				      .map = sql_errno};

static int lock_dir(jr *j, const char *dir, char **err)
{
	buf p = BUF_INIT;
	buf_printf(&p, "%s/lock", dir);
	j->lock_fd = open(buf_cstr(&p), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	int rc = 0;
	if (j->lock_fd < 0) {
		rc = -errno;
		buf_set_err(err, "%s: %s", buf_cstr(&p), strerror(errno));
	} else if (flock(j->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
		buf_set_err(err, "%s: in use by another mount (%s)", dir,
			strerror(-rc));
	}
	buf_free(&p);
	return rc;
}

/* Makes the reserve when the disk has room for it twice over. */
static void reserve_make(jr *j)
{
	j->reserve_at = clock_mono() + 1;
	struct stat st;
	if (stat(j->reserve, &st) == 0 &&
	    (uint64_t)st.st_blocks * 512 >= JR_RESERVE) {
		j->has_reserve = true; /* a previous mount's */
		return;
	}
	struct statvfs sv;
	if (statvfs(j->path, &sv) < 0 ||
	    (uint64_t)sv.f_bavail * sv.f_frsize < 2 * JR_RESERVE)
		return;
	int fd = open(j->reserve, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	int r = posix_fallocate(fd, 0, (off_t)JR_RESERVE);
	close(fd);
	if (r) {
		unlink(j->reserve);
		return;
	}
	j->has_reserve = true;
}

bool jr_free_reserve(jr *j)
{
	if (!j->has_reserve)
		return false;
	j->has_reserve = false;
	j->reserve_at = clock_mono() + 1;
	if (unlink(j->reserve) < 0)
		return false;
	log_warn("journal: the disk is full: its reserve (%llu MiB) is freed "
		 "so that what ckptfs must remember reaches the journal",
		 (unsigned long long)(JR_RESERVE >> 20));
	return true;
}

int jr_open(const char *dir, jr **out, char **err)
{
	*out = NULL;
	jr *j = calloc(1, sizeof *j);
	if (!j)
		return -ENOMEM;
	j->lock_fd = -1;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		int rc = -errno;
		buf_set_err(err, "%s: %s", dir, strerror(errno));
		free(j);
		return rc;
	}
	int rc = lock_dir(j, dir, err);
	buf p = BUF_INIT;
	buf_printf(&p, "%s/journal.db", dir);
	j->path = buf_steal(&p);
	buf_printf(&p, "%s/reserve", dir);
	j->reserve = buf_steal(&p);
	if (!rc)
		rc = sqldb_open(j->path, &jr_db_opts, &j->db, err);
	if (!rc) {
		/* tables an older journal lacks come whole, new columns
		 * included (the steps add only the columns missing) */
		int src = sqlite3_exec(j->db, schema_sql, NULL, NULL, NULL);
		if (src != SQLITE_OK) {
			rc = sql_errno(src);
			buf_set_err(err, "%s: %s", j->path, sqlite3_errmsg(j->db));
		}
	}
	if (!rc)
		rc = sqldb_migrate(j->db, j->path, &jr_schema, sql_errno, err);
	chmod(j->path, 0600);
	if (rc) {
		jr_close(j);
		return rc;
	}
	reserve_make(j);
	*out = j;
	return 0;
}

void jr_close(jr *j)
{
	if (!j)
		return;
	if (j->db && sqlite3_close(j->db) != SQLITE_OK)
		log_warn("journal %s: close: %s", j->path,
			 sqlite3_errmsg(j->db));
	if (j->lock_fd >= 0)
		close(j->lock_fd);
	free(j->path);
	free(j->reserve);
	free(j);
}

static int bind_all(sqlite3_stmt *s, const char *fmt, va_list ap)
{
	int i = 1;
	for (const char *f = fmt; f && *f; f++, i++) {
		int src;
		if (*f == 'i') {
			src = sqlite3_bind_int64(s, i, va_arg(ap, int64_t));
		} else if (*f == 't') {
			const char *v = va_arg(ap, const char *);
			src = v ? sqlite3_bind_text(s, i, v, -1, SQLITE_TRANSIENT)
				: sqlite3_bind_null(s, i);
		} else if (*f == 'b') {
			const void *v = va_arg(ap, const void *);
			size_t n = va_arg(ap, size_t);
			src = v ? sqlite3_bind_blob(s, i, v, (int)n,
						    SQLITE_TRANSIENT)
				: sqlite3_bind_null(s, i);
		} else {
			return SQLITE_MISUSE;
		}
		if (src != SQLITE_OK)
			return src;
	}
	return SQLITE_OK;
}

/* One run of sql; msg gets SQLite's message when the statement failed
 * (empty when it did not, or when row stopped it). */
static int exec_v(jr *j, int (*row)(void *arg, sqlite3_stmt *s), void *arg,
		  const char *sql, const char *fmt, va_list ap, bool *wrote,
		  char msg[static 256])
{
	msg[0] = '\0';
	sqlite3_stmt *s = NULL;
	int src = sqlite3_prepare_v2(j->db, sql, -1, &s, NULL);
	if (src == SQLITE_OK) {
		*wrote = !sqlite3_stmt_readonly(s);
		src = bind_all(s, fmt, ap);
	}
	int rc = 0;
	while (src == SQLITE_OK || src == SQLITE_ROW) {
		src = sqlite3_step(s);
		if (src == SQLITE_ROW && row && (rc = row(arg, s)) != 0)
			break;
	}
	if (!rc && src != SQLITE_DONE) {
		rc = sql_errno(src);
		if (!rc)
			rc = -EIO;
		snprintf(msg, 256, "%s", sqlite3_errmsg(j->db));
	}
	sqlite3_finalize(s);
	return rc;
}

int jr_exec(jr *j, int (*row)(void *arg, sqlite3_stmt *s), void *arg,
	    const char *sql, const char *fmt, ...)
{
	if (j->lost)
		return j->lost;
	bool in_txn = !sqlite3_get_autocommit(j->db), wrote = false;
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	int rc = exec_v(j, row, arg, sql, fmt, ap, &wrote, msg);
	va_end(ap);
	/* one statement on its own, undone whole: once more in the room
	 * the reserve leaves */
	if (rc == -ENOSPC && wrote && !in_txn && jr_free_reserve(j)) {
		va_start(ap, fmt);
		rc = exec_v(j, row, arg, sql, fmt, ap, &wrote, msg);
		va_end(ap);
	}
	if (msg[0])
		log_error("journal: %s: %s", sql, msg);
	/* SQLite rolls a transaction back by itself after some errors
	 * (SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM: "Response To Errors
	 * Within A Transaction"); the statements after it would run on
	 * their own, each committed */
	if (rc && in_txn && sqlite3_get_autocommit(j->db))
		j->lost = rc;
	if (!rc && wrote && !j->has_reserve &&
	    sqlite3_get_autocommit(j->db) && clock_mono() >= j->reserve_at)
		reserve_make(j);
	return rc;
}

int64_t jr_last_id(jr *j)
{
	return sqlite3_last_insert_rowid(j->db);
}

int jr_begin(jr *j)
{
	j->lost = 0;
	return jr_exec(j, NULL, NULL, "BEGIN IMMEDIATE", "");
}

/* A failed COMMIT (SQLITE_FULL) has rolled the transaction back by
 * itself; jr_rollback ends it in any case, so that the caller's model and
 * the journal agree: nothing of it was written. */
int jr_commit(jr *j)
{
	int rc = jr_exec(j, NULL, NULL, "COMMIT", "");
	if (rc)
		jr_rollback(j);
	return rc;
}

int jr_set_durable(jr *j, bool durable)
{
	return jr_exec(j, NULL, NULL,
		       durable ? "PRAGMA synchronous=FULL"
			       : "PRAGMA synchronous=NORMAL",
		       "");
}

bool jr_in_txn(jr *j)
{
	return !sqlite3_get_autocommit(j->db);
}

void jr_rollback(jr *j)
{
	j->lost = 0;
	if (!sqlite3_get_autocommit(j->db))
		sqlite3_exec(j->db, "ROLLBACK", NULL, NULL, NULL);
}

static int text_row(void *arg, sqlite3_stmt *s)
{
	const char *v = (const char *)sqlite3_column_text(s, 0);
	char **out = arg;
	free(*out);
	*out = v ? strdup(v) : NULL;
	return 0;
}

char *jr_meta_get(jr *j, const char *k)
{
	char *v = NULL;
	jr_exec(j, text_row, &v, "SELECT v FROM meta WHERE k = ?", "t", k);
	return v;
}

int jr_meta_set(jr *j, const char *k, const char *v)
{
	return jr_exec(j, NULL, NULL,
		       "INSERT OR REPLACE INTO meta(k, v) VALUES(?, ?)", "tt",
		       k, v);
}

int jr_txn_delete(jr *j, int64_t id)
{
	int rc = jr_begin(j);
	if (!rc)
		rc = jr_exec(j, NULL, NULL,
			     "DELETE FROM parts WHERE file IN "
			     "(SELECT id FROM files WHERE txn = ?)",
			     "i", id);
	if (!rc)
		rc = jr_exec(j, NULL, NULL, "DELETE FROM files WHERE txn = ?",
			     "i", id);
	if (!rc)
		rc = jr_exec(j, NULL, NULL, "DELETE FROM dirs WHERE txn = ?",
			     "i", id);
	if (!rc)
		rc = jr_exec(j, NULL, NULL, "DELETE FROM garbage WHERE txn = ?",
			     "i", id);
	if (!rc)
		rc = jr_exec(j, NULL, NULL, "DELETE FROM txns WHERE id = ?",
			     "i", id);
	if (!rc) /* its poisoned paths (commit/poison.c) */
		rc = jr_exec(j, NULL, NULL,
			     "DELETE FROM meta WHERE k = 'poison.' || ?", "i",
			     id);
	if (!rc)
		rc = jr_commit(j);
	else
		jr_rollback(j);
	return rc;
}

/* ---- loading ------------------------------------------------------------- */

static const char *col_text(sqlite3_stmt *s, int i)
{
	return (const char *)sqlite3_column_text(s, i);
}

static int txn_row(void *arg, sqlite3_stmt *s)
{
	const jr_loader *l = arg;
	jr_txn_row r = {
	    .id = sqlite3_column_int64(s, 0),
	    .kind = sqlite3_column_int(s, 1),
	    .root = col_text(s, 2),
	    .dest = col_text(s, 3),
	    .is_dir = sqlite3_column_int(s, 4),
	    .state = sqlite3_column_int(s, 5),
	    .mroot = col_text(s, 6),
	    .seq = sqlite3_column_int64(s, 7),
	};
	return l->txn(l->arg, &r);
}

/*
 * The attribute columns (mode, uid, gid, mtime_ns, xattrs) of a files or
 * dirs row, in that order, one way both ways: ATTRS_FROM decodes them
 * from column i on into r (a jr_file_row or a jr_dir_row: the fields have
 * the same names; an empty xattrs blob reads as none), ATTRS_FMT and
 * ATTRS_ARGS(r) bind them (jr_exec).
 */
#define ATTRS_FROM(r, s, i)                                                  \
	do {                                                                 \
		(r).mode = (uint32_t)sqlite3_column_int64(s, (i));           \
		(r).uid = (uint32_t)sqlite3_column_int64(s, (i) + 1);        \
		(r).gid = (uint32_t)sqlite3_column_int64(s, (i) + 2);        \
		(r).mtime_ns = sqlite3_column_int64(s, (i) + 3);             \
		(r).xattrs = sqlite3_column_blob(s, (i) + 4);                \
		int xl_ = sqlite3_column_bytes(s, (i) + 4);                  \
		(r).xattrs_len = xl_ > 0 ? (size_t)xl_ : 0;                  \
		if (!(r).xattrs_len)                                         \
			(r).xattrs = NULL;                                   \
	} while (0)
#define ATTRS_FMT "iiiib"
#define ATTRS_ARGS(r)                                                        \
	(int64_t)(r)->mode, (int64_t)(r)->uid, (int64_t)(r)->gid,             \
	    (r)->mtime_ns, (r)->xattrs, (r)->xattrs_len

static int file_row(void *arg, sqlite3_stmt *s)
{
	const jr_loader *l = arg;
	jr_file_row r = {
	    .id = sqlite3_column_int64(s, 0),
	    .txn = sqlite3_column_int64(s, 1),
	    .path = col_text(s, 2),
	    .sid = (uint64_t)sqlite3_column_int64(s, 3),
	    .size = (uint64_t)sqlite3_column_int64(s, 4),
	    .symlink = col_text(s, 10),
	    .state = sqlite3_column_int(s, 11),
	    .key = col_text(s, 12),
	    .upload_id = col_text(s, 13),
	    .part_size = (uint64_t)sqlite3_column_int64(s, 14),
	    .etag = col_text(s, 15),
	    .crc = (uint32_t)sqlite3_column_int64(s, 16),
	    .blocks = col_text(s, 17),
	    .rdev = (uint64_t)sqlite3_column_int64(s, 18),
	};
	ATTRS_FROM(r, s, 5);
	return l->file(l->arg, &r);
}

static int dir_row(void *arg, sqlite3_stmt *s)
{
	const jr_loader *l = arg;
	jr_dir_row r = {
	    .txn = sqlite3_column_int64(s, 0),
	    .path = col_text(s, 1),
	};
	ATTRS_FROM(r, s, 2);
	return l->dir(l->arg, &r);
}

int jr_load(jr *j, const jr_loader *l)
{
	int rc = jr_exec(j, txn_row, (void *)l,
			 "SELECT id, kind, root, dest, is_dir, state, "
			 "manifest_root, COALESCE(seq, id) FROM txns "
			 "ORDER BY COALESCE(seq, id)",
			 "");
	if (!rc)
		rc = jr_exec(j, file_row, (void *)l,
			     "SELECT id, txn, path, sid, size, mode, uid, gid, "
			     "mtime_ns, xattrs, symlink, state, key, upload_id, "
			     "part_size, etag, crc32c, blocks, rdev FROM files "
			     "ORDER BY id",
			     "");
	if (!rc)
		rc = jr_exec(j, dir_row, (void *)l,
			     "SELECT txn, path, mode, uid, gid, mtime_ns, "
			     "xattrs FROM dirs",
			     "");
	return rc;
}

struct part_loader {
	int (*fn)(void *arg, const jr_part_row *r);
	void *arg;
};

static int part_row(void *arg, sqlite3_stmt *s)
{
	struct part_loader *pl = arg;
	jr_part_row r = {
	    .n = sqlite3_column_int64(s, 0),
	    .etag = col_text(s, 1),
	    .crc = (uint32_t)sqlite3_column_int64(s, 2),
	    .len = (uint64_t)sqlite3_column_int64(s, 3),
	    .segs = col_text(s, 4),
	};
	return pl->fn(pl->arg, &r);
}

int jr_load_parts(jr *j, int64_t file,
		  int (*part)(void *arg, const jr_part_row *r), void *arg)
{
	struct part_loader pl = {part, arg};
	return jr_exec(j, part_row, &pl,
		       "SELECT n, etag, crc32c, len, segs FROM parts "
		       "WHERE file = ?",
		       "i", file);
}

/* ---- txns ---------------------------------------------------------------- */

int jr_txn_insert(jr *j, int kind, const char *root, const char *dest,
		  bool is_dir, int state, const char *mroot, int64_t *id)
{
	int rc = jr_exec(j, NULL, NULL,
			 "INSERT INTO txns(kind, root, dest, is_dir, state, "
			 "manifest_root) VALUES(?, ?, ?, ?, ?, ?)",
			 "ittiit", (int64_t)kind, root, dest, (int64_t)is_dir,
			 (int64_t)state, mroot);
	if (!rc)
		*id = jr_last_id(j);
	return rc;
}

int jr_txn_set_state(jr *j, int64_t id, int state)
{
	return jr_exec(j, NULL, NULL, "UPDATE txns SET state = ? WHERE id = ?",
		       "ii", (int64_t)state, id);
}

int jr_txn_set_error(jr *j, int64_t id, const char *error)
{
	return jr_exec(j, NULL, NULL, "UPDATE txns SET error = ? WHERE id = ?",
		       "ti", error, id);
}

int jr_txn_set_root(jr *j, int64_t id, const char *root, const char *mroot)
{
	return jr_exec(j, NULL, NULL,
		       "UPDATE txns SET root = ?, manifest_root = ? WHERE id = ?",
		       "tti", root, mroot, id);
}

static int int64_row(void *arg, sqlite3_stmt *s)
{
	*(int64_t *)arg = sqlite3_column_int64(s, 0);
	return 0;
}

int jr_txn_requeue(jr *j, int64_t id, int64_t *seq)
{
	*seq = 0;
	int rc = jr_exec(j, NULL, NULL,
			 "UPDATE sqlite_sequence SET seq = seq + 1 "
			 "WHERE name = 'txns'",
			 "");
	if (!rc)
		rc = jr_exec(j, int64_row, seq,
			     "SELECT seq FROM sqlite_sequence WHERE name = "
			     "'txns'",
			     "");
	if (!rc && *seq <= 0)
		rc = -EIO;
	if (!rc)
		rc = jr_exec(j, NULL, NULL,
			     "UPDATE txns SET seq = ? WHERE id = ?", "ii", *seq,
			     id);
	return rc;
}

/* ---- files and parts ----------------------------------------------------- */

int jr_file_insert(jr *j, int64_t txn, const char *path, uint64_t sid,
		   uint64_t size, int64_t *id)
{
	int rc = jr_exec(j, NULL, NULL,
			 "INSERT INTO files(txn, path, sid, size, state) "
			 "VALUES(?, ?, ?, ?, 0)",
			 "itii", txn, path, (int64_t)sid, (int64_t)size);
	if (!rc)
		*id = jr_last_id(j);
	return rc;
}

int jr_file_update(jr *j, const jr_file_row *r)
{
	return jr_exec(j, NULL, NULL,
		       "UPDATE files SET txn = ?, path = ?, sid = ?, size = ?, "
		       "mode = ?, uid = ?, gid = ?, mtime_ns = ?, xattrs = ?, "
		       "symlink = ?, state = ?, key = ?, upload_id = ?, "
		       "part_size = ?, etag = ?, crc32c = ?, blocks = ?, "
		       "rdev = ? WHERE id = ?",
		       "itii" ATTRS_FMT "tittititii", r->txn, r->path,
		       (int64_t)r->sid, (int64_t)r->size, ATTRS_ARGS(r),
		       r->symlink, (int64_t)r->state, r->key, r->upload_id,
		       (int64_t)r->part_size, r->etag, (int64_t)r->crc,
		       r->blocks, (int64_t)r->rdev, r->id);
}

int jr_file_delete(jr *j, int64_t id)
{
	return jr_exec(j, NULL, NULL, "DELETE FROM files WHERE id = ?", "i",
		       id);
}

int jr_file_set_state(jr *j, int64_t id, int state)
{
	return jr_exec(j, NULL, NULL, "UPDATE files SET state = ? WHERE id = ?",
		       "ii", (int64_t)state, id);
}

int jr_file_set_upload(jr *j, int64_t id, const char *key,
		       const char *upload_id, uint64_t part_size)
{
	return jr_exec(j, NULL, NULL,
		       "UPDATE files SET key = ?, upload_id = ?, part_size = ? "
		       "WHERE id = ?",
		       "ttii", key, upload_id, (int64_t)part_size, id);
}

int jr_file_upload_gone(jr *j, int64_t id)
{
	int rc = jr_exec(j, NULL, NULL,
			 "UPDATE files SET upload_id = NULL, part_size = NULL, "
			 "state = 0 WHERE id = ?",
			 "i", id);
	int rc2 = jr_parts_clear(j, id);
	return rc ? rc : rc2;
}

int jr_file_stored(jr *j, int64_t id, const char *key, const char *etag,
		   uint32_t crc, const char *blocks)
{
	int rc = jr_exec(j, NULL, NULL,
			 "UPDATE files SET state = 2, key = ?, etag = ?, "
			 "crc32c = ?, blocks = ?, upload_id = NULL WHERE id = ?",
			 "ttiti", key, etag, (int64_t)crc, blocks, id);
	int rc2 = jr_parts_clear(j, id);
	return rc ? rc : rc2;
}

int jr_part_done(jr *j, int64_t file, const jr_part_row *r)
{
	return jr_exec(j, NULL, NULL,
		       "INSERT OR REPLACE INTO parts(file, n, etag, crc32c, "
		       "len, segs) VALUES(?, ?, ?, ?, ?, ?)",
		       "iitiit", file, r->n, r->etag, (int64_t)r->crc,
		       (int64_t)r->len, r->segs);
}

int jr_parts_clear(jr *j, int64_t file)
{
	return jr_exec(j, NULL, NULL, "DELETE FROM parts WHERE file = ?", "i",
		       file);
}

/* ---- dirs and garbage ---------------------------------------------------- */

int jr_dir_put(jr *j, const jr_dir_row *r)
{
	return jr_exec(j, NULL, NULL,
		       "INSERT OR REPLACE INTO dirs(txn, path, mode, uid, gid, "
		       "mtime_ns, xattrs) VALUES(?, ?, ?, ?, ?, ?, ?)",
		       "it" ATTRS_FMT, r->txn, r->path, ATTRS_ARGS(r));
}

int jr_dir_set_meta(jr *j, const jr_dir_row *r)
{
	return jr_exec(j, NULL, NULL,
		       "UPDATE dirs SET mode = ?, uid = ?, gid = ?, "
		       "mtime_ns = ?, xattrs = ? WHERE txn = ? AND path = ?",
		       ATTRS_FMT "it", ATTRS_ARGS(r), r->txn, r->path);
}

int jr_dir_delete(jr *j, int64_t txn, const char *path)
{
	return jr_exec(j, NULL, NULL,
		       "DELETE FROM dirs WHERE txn = ? AND path = ?", "it", txn,
		       path);
}

int jr_garbage_add(jr *j, int64_t txn, const char *key)
{
	return jr_exec(j, NULL, NULL,
		       "INSERT OR IGNORE INTO garbage(txn, key) VALUES(?, ?)",
		       "it", txn, key);
}

int jr_garbage_take(jr *j, int64_t txn, const char *key)
{
	int rc = jr_exec(j, NULL, NULL,
			 "INSERT OR IGNORE INTO garbage(txn, key) SELECT ?, "
			 "key FROM garbage WHERE key = ? AND txn <> ? LIMIT 1",
			 "iti", txn, key, txn);
	if (!rc)
		rc = jr_exec(j, NULL, NULL,
			     "DELETE FROM garbage WHERE key = ? AND txn <> ?",
			     "ti", key, txn);
	return rc;
}

struct garbage_lister {
	int (*fn)(void *arg, const char *key);
	void *arg;
};

static int garbage_row(void *arg, sqlite3_stmt *s)
{
	struct garbage_lister *gl = arg;
	return gl->fn(gl->arg, col_text(s, 0));
}

int jr_garbage_list(jr *j, int64_t txn,
		    int (*fn)(void *arg, const char *key), void *arg)
{
	struct garbage_lister gl = {fn, arg};
	return jr_exec(j, garbage_row, &gl,
		       "SELECT key FROM garbage WHERE txn = ?", "i", txn);
}

/* ---- held: remote deletes the FUSE layer holds back ------------------- */

int jr_held_insert(jr *j, const char *path, bool is_dir, const char *keep,
		   int64_t *id)
{
	int rc = jr_exec(j, NULL, NULL,
			 "INSERT INTO held(path, is_dir, keep) VALUES(?, ?, ?)",
			 "tit", path, (int64_t)is_dir, keep);
	if (!rc)
		*id = jr_last_id(j);
	return rc;
}

int jr_held_delete(jr *j, int64_t id)
{
	return jr_exec(j, NULL, NULL, "DELETE FROM held WHERE id = ?", "i", id);
}

struct held_load {
	int (*fn)(void *arg, int64_t id, const char *path, bool is_dir,
		  const char *keep);
	void *arg;
};

static int held_row(void *arg, sqlite3_stmt *s)
{
	struct held_load *l = arg;
	return l->fn(l->arg, sqlite3_column_int64(s, 0),
		     (const char *)sqlite3_column_text(s, 1),
		     sqlite3_column_int64(s, 2) != 0,
		     (const char *)sqlite3_column_text(s, 3));
}

int jr_held_list(jr *j,
		 int (*fn)(void *arg, int64_t id, const char *path,
			   bool is_dir, const char *keep),
		 void *arg)
{
	struct held_load l = {fn, arg};
	return jr_exec(j, held_row, &l,
		       "SELECT id, path, is_dir, keep FROM held ORDER BY id", "");
}
