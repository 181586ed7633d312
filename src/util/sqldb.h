/*
 * sqldb: the one way the tree opens and migrates its SQLite databases
 * (the read cache's index, cache/index-db.c; the commit journal,
 * commit/journal.c).
 *
 * sqldb_open makes the database file 0600 before SQLite opens it (SQLite
 * gives its -wal and -shm files the database file's mode), opens it read-
 * write (created when missing) with a busy timeout, and enters WAL mode
 * (checked: a file that is not a database fails here) with the given
 * synchronous level.
 *
 * sqldb_migrate brings the schema to this code's version, one step a
 * transaction (BEGIN IMMEDIATE, so two processes opening one database at
 * once do each step once).  The version is kept in PRAGMA user_version,
 * or, for a database that has always kept it there, in a row of a table
 * meta(k TEXT PRIMARY KEY, v TEXT).  A new database (version 0) gets the
 * whole schema at once; an older one each step in turn, a step's columns
 * added only where missing; a newer one is refused (-EPROTO).
 */
#ifndef CKPTFS_UTIL_SQLDB_H
#define CKPTFS_UTIL_SQLDB_H

#include <sqlite3.h>

/* How SQLite result codes become negative errno values (NULL:
 * sqlerr_errno, util/sqlerr.h). */
typedef int (*sqldb_errno_fn)(int src);

typedef struct sqldb_opts {
	int flags;               /* besides READWRITE, CREATE and NOMUTEX */
	int busy_ms;
	const char *synchronous; /* "FULL", "NORMAL" */
	sqldb_errno_fn map;
} sqldb_opts;

/*
 * Opens the database at path.  0 with *db; -errno with *err (malloc'd,
 * "PATH: why"; "PATH: cannot enter WAL mode: why" when the file is not a
 * usable database).  *db may be set even on failure: the caller closes it
 * (and may ask it sqlite3_errcode for the reason).
 */
int sqldb_open(const char *path, const sqldb_opts *o, sqlite3 **db,
	       char **err);

/* A column a step adds (where the table does not have it already). */
typedef struct sqldb_column {
	const char *table, *column, *decl;
} sqldb_column;

/* One step up: sql run as is (NULL: none), then the columns of add (NULL
 * or ended by a {NULL} row: none). */
typedef struct sqldb_step {
	const char *sql;
	const sqldb_column *add;
} sqldb_step;

typedef struct sqldb_schema {
	const char *what;     /* names the schema in messages: "journal" */
	int version;          /* this code's */
	const char *create;   /* version 0 to version at once (NULL: nothing) */
	const sqldb_step *up; /* up[v - 1]: version v to v + 1 */
	const char *meta_key; /* NULL: PRAGMA user_version; else meta's row */
} sqldb_schema;

/*
 * Brings db (at path, for messages) to s->version.  0; -errno (map) with
 * *err "PATH: upgrading the WHAT: why"; -EPROTO with *err "PATH: WHAT
 * version V, expected N" for a version this code does not know.  Each
 * step taken is logged ("WHAT PATH upgraded to version N").
 */
int sqldb_migrate(sqlite3 *db, const char *path, const sqldb_schema *s,
		  sqldb_errno_fn map, char **err);

/* Whether table has column (a missing table has none). */
int sqldb_has_column(sqlite3 *db, const char *table, const char *column);

#endif
