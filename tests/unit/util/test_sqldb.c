/*
 * Tests for sqldb: opening (0600, WAL, a file that is not a database
 * refused with a message), and migrating (a new database at once, an old
 * one step by step with its rows kept, columns added only where missing,
 * a newer version refused), with the version in user_version or in meta.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/sqldb.h"

static char dir[] = "/tmp/ckptfs-sqldb-XXXXXX";
static char path[256];

static void setup(void)
{
	cr_assert(mkdtemp(strcpy(dir, "/tmp/ckptfs-sqldb-XXXXXX")));
	snprintf(path, sizeof path, "%s/t.db", dir);
}

static void teardown(void)
{
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

static const sqldb_opts opts = {.busy_ms = 1000, .synchronous = "NORMAL"};

static long long one(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *s;
	cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK,
		     "%s: %s", sql, sqlite3_errmsg(db));
	cr_assert_eq(sqlite3_step(s), SQLITE_ROW, "%s", sql);
	long long v = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return v;
}

static sqlite3 *open_ok(void)
{
	sqlite3 *db;
	char *err = NULL;
	cr_assert_eq(sqldb_open(path, &opts, &db, &err), 0, "%s", err);
	return db;
}

TestSuite(sqldb, .init = setup, .fini = teardown);

Test(sqldb, open_makes_a_private_wal_database)
{
	mode_t old = umask(0);
	sqlite3 *db = open_ok();
	umask(old);
	struct stat st;
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0600);
	sqlite3_stmt *s;
	sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, NULL);
	cr_assert_eq(sqlite3_step(s), SQLITE_ROW);
	cr_assert_str_eq((const char *)sqlite3_column_text(s, 0), "wal");
	sqlite3_finalize(s);
	cr_assert_eq(one(db, "PRAGMA synchronous"), 1); /* NORMAL */
	sqlite3_close(db);
}

Test(sqldb, garbage_file_is_refused_naming_it)
{
	int fd = open(path, O_WRONLY | O_CREAT, 0600);
	char junk[4096];
	memset(junk, 'x', sizeof junk);
	cr_assert_eq(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
	close(fd);
	sqlite3 *db = NULL;
	char *err = NULL;
	int rc = sqldb_open(path, &opts, &db, &err);
	cr_assert_lt(rc, 0);
	cr_assert(err && strstr(err, path) &&
		      strstr(err, "cannot enter WAL mode"),
		  "%s", err ? err : "(none)");
	cr_assert(db);
	cr_assert_eq(sqlite3_errcode(db), SQLITE_NOTADB);
	sqlite3_close(db);
	free(err);
}

static const char create[] =
    "CREATE TABLE t(a INTEGER, b TEXT, c BLOB);";
static const sqldb_column v2_cols[] = {{"t", "b", "TEXT"},
				       {NULL, NULL, NULL}};
static const sqldb_column v3_cols[] = {{"t", "c", "BLOB"},
				       {NULL, NULL, NULL}};
static const sqldb_step up[] = {
    {NULL, v2_cols},
    {"CREATE TABLE u(x INTEGER);", v3_cols},
};
static const sqldb_schema pragma_schema = {
    .what = "test", .version = 3, .create = create, .up = up};
static const sqldb_schema meta_schema = {
    .what = "test", .version = 3, .create = NULL, .up = up,
    .meta_key = "version"};

Test(sqldb, new_database_gets_the_whole_schema)
{
	sqlite3 *db = open_ok();
	char *err = NULL;
	cr_assert_eq(sqldb_migrate(db, path, &pragma_schema, NULL, &err), 0,
		     "%s", err);
	cr_assert_eq(one(db, "PRAGMA user_version"), 3);
	cr_assert(sqldb_has_column(db, "t", "c"));
	cr_assert_not(sqldb_has_column(db, "u", "x")); /* no step ran */
	/* again: nothing to do */
	cr_assert_eq(sqldb_migrate(db, path, &pragma_schema, NULL, &err), 0);
	sqlite3_close(db);
}

Test(sqldb, old_database_steps_up_keeping_rows)
{
	sqlite3 *db = open_ok();
	cr_assert_eq(sqlite3_exec(db,
				  "CREATE TABLE t(a INTEGER);"
				  "INSERT INTO t VALUES(7);"
				  "PRAGMA user_version = 1;",
				  NULL, NULL, NULL),
		     SQLITE_OK);
	char *err = NULL;
	cr_assert_eq(sqldb_migrate(db, path, &pragma_schema, NULL, &err), 0,
		     "%s", err);
	cr_assert_eq(one(db, "PRAGMA user_version"), 3);
	cr_assert_eq(one(db, "SELECT a FROM t"), 7);
	cr_assert(sqldb_has_column(db, "t", "b"));
	cr_assert(sqldb_has_column(db, "t", "c"));
	cr_assert(sqldb_has_column(db, "u", "x"));
	sqlite3_close(db);
}

Test(sqldb, columns_already_there_are_not_added_again)
{
	sqlite3 *db = open_ok();
	/* version 1 by its number, but t already has every column */
	cr_assert_eq(sqlite3_exec(db,
				  "CREATE TABLE t(a INTEGER, b TEXT, c BLOB);"
				  "CREATE TABLE meta(k TEXT PRIMARY KEY, v TEXT);"
				  "INSERT INTO meta VALUES('version', '1');",
				  NULL, NULL, NULL),
		     SQLITE_OK);
	char *err = NULL;
	cr_assert_eq(sqldb_migrate(db, path, &meta_schema, NULL, &err), 0,
		     "%s", err);
	cr_assert_eq(one(db, "SELECT v FROM meta WHERE k = 'version'"), 3);
	cr_assert_eq(one(db, "PRAGMA user_version"), 0);
	sqlite3_close(db);
}

Test(sqldb, meta_version_of_a_new_database)
{
	sqlite3 *db = open_ok();
	cr_assert_eq(sqlite3_exec(db,
				  "CREATE TABLE meta(k TEXT PRIMARY KEY, v TEXT);",
				  NULL, NULL, NULL),
		     SQLITE_OK);
	char *err = NULL;
	cr_assert_eq(sqldb_migrate(db, path, &meta_schema, NULL, &err), 0,
		     "%s", err);
	cr_assert_eq(one(db, "SELECT v FROM meta WHERE k = 'version'"), 3);
	sqlite3_close(db);
}

Test(sqldb, newer_version_is_refused)
{
	sqlite3 *db = open_ok();
	cr_assert_eq(sqlite3_exec(db, "PRAGMA user_version = 9;", NULL, NULL,
				  NULL),
		     SQLITE_OK);
	char *err = NULL;
	cr_assert_eq(sqldb_migrate(db, path, &pragma_schema, NULL, &err),
		     -EPROTO);
	cr_assert(err && strstr(err, "test version 9, expected 3"), "%s",
		  err ? err : "(none)");
	cr_assert_eq(one(db, "PRAGMA user_version"), 9);
	free(err);
	sqlite3_close(db);
}

Test(sqldb, failed_step_rolls_back_and_names_the_file)
{
	static const sqldb_step bad[] = {{"CREATE TABLE t(z);", NULL}};
	static const sqldb_schema s = {.what = "test", .version = 2,
				       .up = bad};
	sqlite3 *db = open_ok();
	cr_assert_eq(sqlite3_exec(db,
				  "CREATE TABLE t(a);PRAGMA user_version = 1;",
				  NULL, NULL, NULL),
		     SQLITE_OK);
	char *err = NULL;
	cr_assert_lt(sqldb_migrate(db, path, &s, NULL, &err), 0);
	cr_assert(err && strstr(err, path) &&
		      strstr(err, "upgrading the test"),
		  "%s", err ? err : "(none)");
	cr_assert_eq(one(db, "PRAGMA user_version"), 1);
	free(err);
	sqlite3_close(db);
}
