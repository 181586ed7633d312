/*
 * sqldb: opening and migrating the tree's SQLite databases (sqldb.h).
 */
#include "util/sqldb.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/log.h"
#include "util/sqlerr.h"

static int map_src(sqldb_errno_fn map, int src)
{
	return map ? map(src) : sqlerr_errno(src);
}

/* Column 0 of the one-row statement sql, as text, into out ("" for no
 * row or NULL).  A SQLite result code. */
static int text_row(sqlite3 *db, const char *sql, const char *bind,
		    char *out, size_t len)
{
	sqlite3_stmt *s;
	out[0] = '\0';
	int src = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
	if (src != SQLITE_OK)
		return src;
	if (bind)
		sqlite3_bind_text(s, 1, bind, -1, SQLITE_STATIC);
	src = sqlite3_step(s);
	const char *v = (const char *)sqlite3_column_text(s, 0);
	if (src == SQLITE_ROW && v)
		snprintf(out, len, "%s", v);
	sqlite3_finalize(s);
	return src == SQLITE_ROW || src == SQLITE_DONE ? SQLITE_OK : src;
}

int sqldb_open(const char *path, const sqldb_opts *o, sqlite3 **db,
	       char **err)
{
	*db = NULL;
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC |
				(o->flags & SQLITE_OPEN_NOFOLLOW ? O_NOFOLLOW
								 : 0),
		      0600);
	if (fd >= 0) {
		fchmod(fd, 0600);
		close(fd);
	}
	int src = sqlite3_open_v2(path, db,
				  SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
				      SQLITE_OPEN_NOMUTEX | o->flags,
				  NULL);
	if (src == SQLITE_OK)
		src = sqlite3_busy_timeout(*db, o->busy_ms);
	if (src != SQLITE_OK) {
		buf_set_err(err, "%s: %s", path,
			*db ? sqlite3_errmsg(*db) : sqlite3_errstr(src));
		return map_src(o->map, src);
	}
	char mode[16];
	src = text_row(*db, "PRAGMA journal_mode = WAL", NULL, mode,
		       sizeof mode);
	if (src != SQLITE_OK || strcmp(mode, "wal")) {
		buf_set_err(err, "%s: cannot enter WAL mode%s%s", path,
			src != SQLITE_OK ? ": " : "",
			src != SQLITE_OK ? sqlite3_errmsg(*db) : "");
		return src != SQLITE_OK ? map_src(o->map, src) : -EIO;
	}
	buf q = BUF_INIT;
	buf_printf(&q, "PRAGMA synchronous = %s", o->synchronous);
	src = sqlite3_exec(*db, buf_cstr(&q), NULL, NULL, NULL);
	buf_free(&q);
	if (src != SQLITE_OK) {
		buf_set_err(err, "%s: %s", path, sqlite3_errmsg(*db));
		return map_src(o->map, src);
	}
	return 0;
}

int sqldb_has_column(sqlite3 *db, const char *table, const char *column)
{
	char v[8];
	buf q = BUF_INIT;
	buf_printf(&q, "SELECT 1 FROM pragma_table_info('%s') WHERE name = ?1",
		   table);
	int src = text_row(db, buf_cstr(&q), column, v, sizeof v);
	buf_free(&q);
	return src == SQLITE_OK && v[0] == '1';
}

/* The stored version as text into v ("" when none yet). */
static int version_get(sqlite3 *db, const sqldb_schema *s, char *v,
		       size_t len)
{
	if (!s->meta_key)
		return text_row(db, "PRAGMA user_version", NULL, v, len);
	return text_row(db, "SELECT v FROM meta WHERE k = ?1", s->meta_key,
			v, len);
}

static int version_set(sqlite3 *db, const sqldb_schema *s, int v)
{
	buf q = BUF_INIT;
	if (s->meta_key)
		buf_printf(&q,
			   "INSERT OR REPLACE INTO meta(k, v) VALUES('%s', "
			   "'%d')",
			   s->meta_key, v);
	else
		buf_printf(&q, "PRAGMA user_version = %d", v);
	int src = sqlite3_exec(db, buf_cstr(&q), NULL, NULL, NULL);
	buf_free(&q);
	return src;
}

/* The step from version v (0: the whole schema), without its
 * transaction. */
static int step(sqlite3 *db, const sqldb_schema *s, int v)
{
	const sqldb_step *st = v ? &s->up[v - 1] : NULL;
	const char *sql = v ? st->sql : s->create;
	int src = sql ? sqlite3_exec(db, sql, NULL, NULL, NULL) : SQLITE_OK;
	for (const sqldb_column *c = st ? st->add : NULL;
	     c && c->table && src == SQLITE_OK; c++) {
		if (sqldb_has_column(db, c->table, c->column))
			continue;
		buf q = BUF_INIT;
		buf_printf(&q, "ALTER TABLE %s ADD COLUMN %s %s", c->table,
			   c->column, c->decl);
		src = sqlite3_exec(db, buf_cstr(&q), NULL, NULL, NULL);
		buf_free(&q);
	}
	if (src == SQLITE_OK)
		src = version_set(db, s, v ? v + 1 : s->version);
	return src;
}

/* Parses a stored version: its value, or -1 when it is not a number. */
static int version_num(const char *v)
{
	if (!v[0])
		return 0;
	char *end;
	long n = strtol(v, &end, 10);
	return *end || n < 0 || n > 1000000 ? -1 : (int)n;
}

int sqldb_migrate(sqlite3 *db, const char *path, const sqldb_schema *s,
		  sqldb_errno_fn map, char **err)
{
	for (;;) {
		char v[32];
		int src = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
		if (src == SQLITE_OK)
			src = version_get(db, s, v, sizeof v);
		int from = src == SQLITE_OK ? version_num(v) : 0;
		if (src == SQLITE_OK &&
		    (from < 0 || from > s->version ||
		     (from > 0 && from < s->version && !s->up))) {
			sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
			buf_set_err(err, "%s: %s version %s, expected %d", path,
				s->what, v, s->version);
			return -EPROTO;
		}
		bool done = src == SQLITE_OK && from == s->version;
		if (src == SQLITE_OK && !done)
			src = step(db, s, from);
		if (src == SQLITE_OK)
			src = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
		if (src != SQLITE_OK) {
			buf_set_err(err, "%s: upgrading the %s: %s", path, s->what,
				sqlite3_errmsg(db));
			if (!sqlite3_get_autocommit(db))
				sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
			return map_src(map, src);
		}
		if (done)
			return 0;
		if (from)
			log_info("%s %s upgraded to version %d", s->what, path,
				 from + 1);
	}
}
