/* Unit tests for the engine journal: schema, exclusive open (-EBUSY),
 * durability across close and reopen, and what eng_open resumes from it
 * (without a server: only facts that need no network are used, i.e.
 * unsealed single-file transactions and temp-named directories). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commit/engine.h"
#include "commit/journal.h"
#include "util/log.h"

static char dir[256];

static void setup(void)
{
	log_init(LOG_LVL_ERROR, false);
	snprintf(dir, sizeof dir, "/tmp/ckptfs-jr-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(journal, .init = setup, .fini = teardown);

static int count_row(void *arg, sqlite3_stmt *s)
{
	*(int64_t *)arg = sqlite3_column_int64(s, 0);
	return 0;
}

static int64_t count(jr *j, const char *sql)
{
	int64_t n = -1;
	cr_assert_eq(jr_exec(j, count_row, &n, sql, ""), 0);
	return n;
}

Test(journal, second_opener_gets_ebusy)
{
	jr *a = NULL, *b = NULL;
	char *err = NULL;
	cr_assert_eq(jr_open(dir, &a, &err), 0);
	cr_assert_eq(jr_open(dir, &b, &err), -EBUSY);
	cr_assert_not_null(err);
	cr_assert(strstr(err, "in use"), "%s", err);
	free(err);
	jr_close(a);
	err = NULL;
	cr_assert_eq(jr_open(dir, &b, &err), 0, "free again after close");
	jr_close(b);
}

Test(journal, wal_full_and_rows_survive_reopen)
{
	jr *j;
	char *err = NULL;
	cr_assert_eq(jr_open(dir, &j, &err), 0);
	int64_t n = 0;
	cr_assert_eq(jr_exec(j, count_row, &n, "PRAGMA synchronous", ""), 0);
	cr_assert_eq(n, 2, "synchronous=FULL");
	/* a lazy commit (a closed file's put), then durable again */
	cr_assert_eq(jr_set_durable(j, false), 0);
	cr_assert_eq(jr_exec(j, count_row, &n, "PRAGMA synchronous", ""), 0);
	cr_assert_eq(n, 1, "synchronous=NORMAL");
	cr_assert_eq(jr_set_durable(j, true), 0);
	cr_assert_eq(jr_exec(j, count_row, &n, "PRAGMA synchronous", ""), 0);
	cr_assert_eq(n, 2, "synchronous=FULL again");
	cr_assert_eq(jr_meta_set(j, "writer", "w-1"), 0);
	cr_assert_eq(jr_exec(j, NULL, NULL,
			     "INSERT INTO txns(kind, root, is_dir, state) "
			     "VALUES(1, ?, 1, 0)",
			     "t", "ckpt"),
		     0);
	int64_t id = jr_last_id(j);
	cr_assert_eq(jr_exec(j, NULL, NULL,
			     "INSERT INTO files(txn, path, sid, size, state, "
			     "xattrs) VALUES(?, 'ckpt/a', 1, 5, 0, ?)",
			     "ib", id, "x\0y", (size_t)3),
		     0);
	cr_assert_eq(jr_exec(j, NULL, NULL,
			     "INSERT INTO garbage(txn, key) VALUES(?, 'k')", "i",
			     id),
		     0);
	jr_close(j);
	cr_assert_eq(jr_open(dir, &j, &err), 0);
	char *w = jr_meta_get(j, "writer");
	cr_assert_str_eq(w, "w-1");
	free(w);
	cr_assert_eq(count(j, "SELECT COUNT(*) FROM files"), 1);
	cr_assert_eq(count(j, "SELECT length(xattrs) FROM files"), 3);
	cr_assert_eq(jr_txn_delete(j, id), 0);
	cr_assert_eq(count(j, "SELECT COUNT(*) FROM files"), 0);
	cr_assert_eq(count(j, "SELECT COUNT(*) FROM garbage"), 0);
	cr_assert_eq(count(j, "SELECT COUNT(*) FROM txns"), 0);
	jr_close(j);
}

static int staged_file(eng *e, const char *data, uint64_t *sid)
{
	int fd = eng_stage_create(e, sid);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, data, strlen(data)), (ssize_t)strlen(data));
	close(fd);
	return 0;
}

struct seen {
	int n;
	char path[8][64];
	char staging[8][300];
	uint64_t size[8];
	uint32_t mode[8];
};

static void on_file(void *arg, uint64_t txn, const char *path,
		    const char *staging_path, uint64_t size, const eng_meta *m)
{
	(void)txn;
	struct seen *s = arg;
	if (s->n >= 8)
		return;
	snprintf(s->path[s->n], 64, "%s", path);
	snprintf(s->staging[s->n], 300, "%s", staging_path);
	s->size[s->n] = size;
	s->mode[s->n] = m->mode;
	s->n++;
}

Test(journal, engine_resumes_files_and_writer)
{
	eng *e;
	char *err = NULL;
	eng_opts o = {0};
	cr_assert_eq(eng_open(NULL, NULL, dir, "b", "p", &o, &e, &err), 0,
		     "%s", err ? err : "");
	char writer[128];
	snprintf(writer, sizeof writer, "%s", eng_writer(e));
	eng *e2;
	cr_assert_eq(eng_open(NULL, NULL, dir, "b", "p", &o, &e2, &err), -EBUSY);
	free(err);
	err = NULL;

	/* a temp-named directory transaction: nothing goes to the network */
	uint64_t t1, t2, sid, sid2, sid3;
	cr_assert_eq(eng_txn_begin(e, "step.tmp", true, NULL, &t1), 0);
	staged_file(e, "hello", &sid);
	eng_meta m = {.mode = 0640, .uid = 1, .gid = 2};
	cr_assert_eq(eng_file_put(e, t1, "step.tmp/a.pt", sid, 5, &m), 0);
	cr_assert_eq(eng_dir_put(e, t1, "step.tmp/empty", &m), 0);
	/* an unsealed single-file transaction waits for its turn */
	cr_assert_eq(eng_txn_begin(e, "latest", false, "", &t2), 0);
	cr_assert_gt(t2, t1, "queue order");
	staged_file(e, "step", &sid2);
	cr_assert_eq(eng_file_put(e, t2, "latest", sid2, 4, NULL), 0);
	/* a staging file never handed over */
	staged_file(e, "orphan", &sid3);
	cr_assert(eng_is_temp_name(e, "x/step.tmp"));
	cr_assert(eng_path_has_temp(e, "step.tmp/a.pt"));
	cr_assert_eq(eng_wait_file(e, "step.tmp/a.pt"), 0, "temp: at once");
	eng_close(e, false);

	cr_assert_eq(eng_open(NULL, NULL, dir, "b", "p", &o, &e, &err), 0);
	cr_assert_str_eq(eng_writer(e), writer, "writer id reused");
	struct seen s = {0};
	eng_foreach_pending_file(e, on_file, &s);
	cr_assert_eq(s.n, 2);
	cr_assert_str_eq(s.path[0], "step.tmp/a.pt");
	cr_assert_eq(s.size[0], 5);
	cr_assert_eq(s.mode[0], 0640);
	cr_assert_str_eq(s.path[1], "latest");
	struct stat st;
	cr_assert_eq(stat(s.staging[0], &st), 0, "staging file kept");
	char orphan[300];
	snprintf(orphan, sizeof orphan, "%s/staging/%llu", dir,
		 (unsigned long long)sid3);
	cr_assert_neq(stat(orphan, &st), 0, "unreferenced staging removed");
	uint64_t sid4;
	int fd = eng_stage_create(e, &sid4);
	cr_assert_geq(fd, 0);
	close(fd);
	cr_assert_gt(sid4, sid2, "staging ids never reused");

	eng_txn_status *v;
	size_t n;
	cr_assert_eq(eng_status(e, &v, &n), 0);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(v[0].path, "step.tmp");
	cr_assert_str_eq(v[0].state, "waiting-for-rename");
	cr_assert_eq(v[0].bytes_total, 5);
	cr_assert_str_eq(v[1].state, "open");
	eng_status_free(v, n);

	/* drop and abort are journaled too */
	cr_assert_eq(eng_file_drop(e, t1, "step.tmp/a.pt"), 0);
	cr_assert_neq(stat(s.staging[0], &st), 0, "dropped staging unlinked");
	eng_close(e, false);
	cr_assert_eq(eng_open(NULL, NULL, dir, "b", "p", &o, &e, &err), 0);
	memset(&s, 0, sizeof s);
	eng_foreach_pending_file(e, on_file, &s);
	cr_assert_eq(s.n, 1);
	cr_assert_str_eq(s.path[0], "latest");
	eng_close(e, false);
}

Test(journal, backpressure_ignores_temp_names)
{
	eng *e;
	char *err = NULL;
	eng_opts o = {.max_staged = 3};
	cr_assert_eq(eng_open(NULL, NULL, dir, "b", "", &o, &e, &err), 0);
	uint64_t t, sid;
	cr_assert_eq(eng_txn_begin(e, "x.tmp", true, NULL, &t), 0);
	staged_file(e, "0123456789", &sid);
	cr_assert_eq(eng_file_put(e, t, "x.tmp/f", sid, 10, NULL), 0);
	/* 10 bytes staged, but they wait for a rename: must not block */
	cr_assert_eq(eng_stage_reserve(e, 1), 0);
	eng_close(e, false);
}

/* A journal written by version 1 (no block checksums) is upgraded in
 * place: its rows stay, with no lists (NULL), and new rows keep theirs. */
Test(journal, version_1_upgraded_with_rows_kept)
{
	char path[300];
	snprintf(path, sizeof path, "%s/journal.db", dir);
	sqlite3 *db;
	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	const char *v1 =
	    "CREATE TABLE meta(k TEXT PRIMARY KEY, v TEXT);"
	    "INSERT INTO meta VALUES('version', '1');"
	    "CREATE TABLE files(id INTEGER PRIMARY KEY AUTOINCREMENT, "
	    " txn INTEGER NOT NULL, path TEXT NOT NULL, sid INTEGER NOT NULL, "
	    " size INTEGER NOT NULL, mode INTEGER, uid INTEGER, gid INTEGER, "
	    " mtime_ns INTEGER, xattrs BLOB, symlink TEXT, state INTEGER NOT "
	    " NULL, key TEXT, upload_id TEXT, part_size INTEGER, etag TEXT, "
	    " crc32c INTEGER);"
	    "CREATE TABLE parts(file INTEGER NOT NULL, n INTEGER NOT NULL, "
	    " etag TEXT NOT NULL, crc32c INTEGER NOT NULL, len INTEGER NOT "
	    " NULL, PRIMARY KEY(file, n)) WITHOUT ROWID;"
	    "INSERT INTO files(txn, path, sid, size, state) "
	    " VALUES(1, 'a', 1, 10, 2);"
	    "INSERT INTO parts VALUES(1, 0, 'e', 5, 10);";
	cr_assert_eq(sqlite3_exec(db, v1, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	jr *j;
	char *err = NULL;
	cr_assert_eq(jr_open(dir, &j, &err), 0, "%s", err ? err : "");
	char *v = jr_meta_get(j, "version");
	cr_assert_str_eq(v, "5");
	free(v);
	cr_assert_eq(count(j, "SELECT count(*) FROM files WHERE blocks IS NULL"),
		     1);
	cr_assert_eq(count(j, "SELECT count(*) FROM parts WHERE segs IS NULL"),
		     1);
	cr_assert_eq(jr_exec(j, NULL, NULL,
			     "UPDATE files SET blocks = ? WHERE path = 'a'", "t",
			     "0000abcd"),
		     0);
	jr_close(j);
	cr_assert_eq(jr_open(dir, &j, &err), 0, "reopened as version 3");
	cr_assert_eq(
	    count(j, "SELECT count(*) FROM files WHERE blocks = '0000abcd'"), 1);
	jr_close(j);
}

/* A version 2 journal (no queue positions) is upgraded in place: its
 * transactions keep their rows, with a NULL seq (their id is their
 * position). */
Test(journal, version_2_upgraded_to_3)
{
	char path[300];
	snprintf(path, sizeof path, "%s/journal.db", dir);
	sqlite3 *db;
	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	const char *v2 =
	    "CREATE TABLE meta(k TEXT PRIMARY KEY, v TEXT);"
	    "INSERT INTO meta VALUES('version', '2');"
	    "CREATE TABLE txns(id INTEGER PRIMARY KEY AUTOINCREMENT, "
	    " kind INTEGER NOT NULL, root TEXT NOT NULL, dest TEXT, "
	    " is_dir INTEGER NOT NULL, state INTEGER NOT NULL, manifest_root "
	    " TEXT, error TEXT);"
	    "INSERT INTO txns(kind, root, is_dir, state) VALUES(1, 'c', 1, 0);";
	cr_assert_eq(sqlite3_exec(db, v2, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	jr *j;
	char *err = NULL;
	cr_assert_eq(jr_open(dir, &j, &err), 0, "%s", err ? err : "");
	char *v = jr_meta_get(j, "version");
	cr_assert_str_eq(v, "5");
	free(v);
	cr_assert_eq(count(j, "SELECT count(*) FROM txns WHERE seq IS NULL "
			      "AND root = 'c'"),
		     1);
	jr_close(j);
}

/* Version 3 (no files.rdev) gets the column; its rows read rdev 0. */
Test(journal, version_3_upgraded_to_4)
{
	char path[300];
	snprintf(path, sizeof path, "%s/journal.db", dir);
	sqlite3 *db;
	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	const char *v3 =
	    "CREATE TABLE meta(k TEXT PRIMARY KEY, v TEXT);"
	    "INSERT INTO meta VALUES('version', '3');"
	    "CREATE TABLE files(id INTEGER PRIMARY KEY AUTOINCREMENT, "
	    " txn INTEGER NOT NULL, path TEXT NOT NULL, sid INTEGER NOT NULL, "
	    " size INTEGER NOT NULL, mode INTEGER, uid INTEGER, gid INTEGER, "
	    " mtime_ns INTEGER, xattrs BLOB, symlink TEXT, state INTEGER NOT "
	    " NULL, key TEXT, upload_id TEXT, part_size INTEGER, etag TEXT, "
	    " crc32c INTEGER, blocks TEXT);"
	    "INSERT INTO files(txn, path, sid, size, mode, state) "
	    " VALUES(1, 'c/x', 3, 0, 420, 0);";
	cr_assert_eq(sqlite3_exec(db, v3, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	jr *j;
	char *err = NULL;
	cr_assert_eq(jr_open(dir, &j, &err), 0, "%s", err ? err : "");
	char *v = jr_meta_get(j, "version");
	cr_assert_str_eq(v, "5");
	free(v);
	cr_assert_eq(count(j, "SELECT count(*) FROM files WHERE rdev IS NULL "
			      "AND path = 'c/x'"),
		     1);
	jr_close(j);
}

/* Version 4 (no dirs.xattrs) gets the column; its rows read none. */
Test(journal, version_4_upgraded_to_5)
{
	char path[300];
	snprintf(path, sizeof path, "%s/journal.db", dir);
	sqlite3 *db;
	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	const char *v4 =
	    "CREATE TABLE meta(k TEXT PRIMARY KEY, v TEXT);"
	    "INSERT INTO meta VALUES('version', '4');"
	    "CREATE TABLE dirs(txn INTEGER NOT NULL, path TEXT NOT NULL, "
	    " mode INTEGER, uid INTEGER, gid INTEGER, mtime_ns INTEGER, "
	    " PRIMARY KEY(txn, path)) WITHOUT ROWID;"
	    "INSERT INTO dirs VALUES(1, 'd', 493, 0, 0, 5);";
	cr_assert_eq(sqlite3_exec(db, v4, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	jr *j;
	char *err = NULL;
	cr_assert_eq(jr_open(dir, &j, &err), 0, "%s", err ? err : "");
	char *v = jr_meta_get(j, "version");
	cr_assert_str_eq(v, "5");
	free(v);
	cr_assert_eq(count(j, "SELECT count(*) FROM dirs WHERE xattrs IS NULL "
			      "AND path = 'd' AND mode = 493"),
		     1);
	jr_close(j);
}

/* The version stays where every journal has kept it (meta's row, not
 * user_version), so a journal this code writes opens with the code
 * before it; a version this code does not know is refused by name. */
Test(journal, version_kept_in_meta_and_newer_refused)
{
	jr *j;
	char *err = NULL;
	cr_assert_eq(jr_open(dir, &j, &err), 0, "%s", err ? err : "");
	cr_assert_eq(count(j, "SELECT count(*) FROM meta WHERE k = 'version' "
			      "AND v = '5'"),
		     1);
	cr_assert_eq(count(j, "SELECT user_version FROM pragma_user_version"),
		     0);
	cr_assert_eq(jr_exec(j, NULL, NULL,
			     "UPDATE meta SET v = '6' WHERE k = 'version'", ""),
		     0);
	jr_close(j);
	j = (jr *)1;
	cr_assert_eq(jr_open(dir, &j, &err), -EPROTO);
	cr_assert_null(j);
	cr_assert(err && strstr(err, "journal.db: journal version 6, "
				     "expected 5"),
		  "%s", err ? err : "(none)");
	free(err);
}

/* A journal as the code before this one wrote it (version 5, every
 * table) opens with its rows. */
Test(journal, current_journal_of_the_previous_code_opens)
{
	char path[300];
	snprintf(path, sizeof path, "%s/journal.db", dir);
	sqlite3 *db;
	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	const char *v5 =
	    "PRAGMA journal_mode=WAL;"
	    "CREATE TABLE meta(k TEXT PRIMARY KEY, v TEXT);"
	    "INSERT INTO meta VALUES('version', '5');"
	    "CREATE TABLE txns(id INTEGER PRIMARY KEY AUTOINCREMENT, "
	    " kind INTEGER NOT NULL, root TEXT NOT NULL, dest TEXT, "
	    " is_dir INTEGER NOT NULL, state INTEGER NOT NULL, manifest_root "
	    " TEXT, error TEXT, seq INTEGER);"
	    "CREATE TABLE dirs(txn INTEGER NOT NULL, path TEXT NOT NULL, "
	    " mode INTEGER, uid INTEGER, gid INTEGER, mtime_ns INTEGER, "
	    " xattrs BLOB, PRIMARY KEY(txn, path)) WITHOUT ROWID;"
	    "INSERT INTO txns(kind, root, is_dir, state, seq) "
	    " VALUES(1, 'r', 1, 0, 9);";
	cr_assert_eq(sqlite3_exec(db, v5, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	jr *j;
	char *err = NULL;
	cr_assert_eq(jr_open(dir, &j, &err), 0, "%s", err ? err : "");
	cr_assert_eq(count(j, "SELECT seq FROM txns WHERE root = 'r'"), 9);
	cr_assert_eq(count(j, "SELECT count(*) FROM files"), 0);
	jr_close(j);
}

struct txn_seen {
	size_t n, nd;
	uint64_t id[8];
	char root[8][64];
	bool is_dir[8], sealed[8];
	char dir[8][64];
	uint32_t dir_mode[8];
};

static void on_txn(void *arg, uint64_t txn, const char *root, bool is_dir,
		   bool sealed)
{
	struct txn_seen *s = arg;
	if (s->n < 8) {
		s->id[s->n] = txn;
		snprintf(s->root[s->n], sizeof s->root[0], "%s", root);
		s->is_dir[s->n] = is_dir;
		s->sealed[s->n++] = sealed;
	}
}

static void on_dir(void *arg, uint64_t txn, const char *path,
		   const eng_meta *m)
{
	struct txn_seen *s = arg;
	(void)txn;
	if (s->nd < 8) {
		snprintf(s->dir[s->nd], sizeof s->dir[0], "%s", path);
		s->dir_mode[s->nd++] = m->mode;
	}
}

/*
 * A temp-named root is not in the visibility order until its rename, and
 * then takes its place behind everything issued before the rename; the
 * position survives a restart (journal seq).  After a restart the overlay
 * learns each transaction's root, kind and sealed state, and its empty
 * directories (no network: single-file transactions and temp names).
 */
Test(journal, temp_root_takes_its_place_at_its_rename)
{
	eng *e;
	char *err = NULL;
	eng_opts o = {0};
	cr_assert_eq(eng_open(NULL, NULL, dir, "b", "", &o, &e, &err), 0);
	uint64_t t1, t2, t3, sid;
	cr_assert_eq(eng_txn_begin(e, "model.tmp", false, NULL, &t1), 0);
	staged_file(e, "weights", &sid);
	cr_assert_eq(eng_file_put(e, t1, "model.tmp", sid, 7, NULL), 0);
	cr_assert_eq(eng_txn_begin(e, "latest", false, NULL, &t2), 0);
	cr_assert_eq(eng_txn_begin(e, "run.tmp", true, NULL, &t3), 0);
	eng_meta m = {.mode = 0750};
	cr_assert_eq(eng_dir_put(e, t3, "run.tmp/logs", &m), 0);
	/* (`latest` stays unsealed: sealed, it would go to the network) */
	staged_file(e, "model", &sid);
	cr_assert_eq(eng_file_put(e, t2, "latest", sid, 5, NULL), 0);
	/* sealed locally: a temp-named root still waits for its rename */
	cr_assert_eq(eng_txn_seal(e, t3), 0);

	eng_txn_status *v;
	size_t n;
	cr_assert_eq(eng_status(e, &v, &n), 0);
	cr_assert_eq(n, 3);
	cr_assert_str_eq(v[0].path, "model.tmp");
	cr_assert_str_eq(v[0].state, "waiting-for-rename");
	eng_status_free(v, n);

	/* the rename is when the application means it: behind `latest` */
	cr_assert_eq(eng_file_move(e, t1, "model.tmp", t1, "model", NULL), 0);
	cr_assert_eq(eng_status(e, &v, &n), 0);
	cr_assert_eq(n, 3);
	cr_assert_str_eq(v[0].path, "latest");
	cr_assert_str_eq(v[1].path, "run.tmp");
	cr_assert_str_eq(v[2].path, "model");
	eng_status_free(v, n);
	eng_close(e, false);

	cr_assert_eq(eng_open(NULL, NULL, dir, "b", "", &o, &e, &err), 0);
	cr_assert_eq(eng_status(e, &v, &n), 0);
	cr_assert_eq(n, 3);
	cr_assert_str_eq(v[0].path, "latest", "order kept across a restart");
	cr_assert_str_eq(v[2].path, "model");
	eng_status_free(v, n);
	struct txn_seen s = {0};
	eng_foreach_pending_txn(e, on_txn, on_dir, &s);
	cr_assert_eq(s.n, 3);
	cr_assert_str_eq(s.root[0], "latest");
	cr_assert_not(s.sealed[0]);
	cr_assert_not(s.is_dir[0]);
	cr_assert_str_eq(s.root[1], "run.tmp");
	cr_assert(s.is_dir[1]);
	cr_assert(s.sealed[1]);
	cr_assert_eq(s.nd, 1);
	cr_assert_str_eq(s.dir[0], "run.tmp/logs");
	cr_assert_eq(s.dir_mode[0], 0750);
	cr_assert_str_eq(s.root[2], "model");
	cr_assert_eq(s.id[2], t1, "the id stays: only the position moved");
	uint64_t t4;
	cr_assert_eq(eng_txn_begin(e, "later", false, NULL, &t4), 0);
	cr_assert_eq(eng_status(e, &v, &n), 0);
	cr_assert_eq(n, 4);
	cr_assert_str_eq(v[3].path, "later", "new steps queue behind it");
	eng_status_free(v, n);
	eng_close(e, false);
}

/* A clean close (unmount) drops what never got a final name: it was never
 * visible, and no rename can come any more. */
Test(journal, unmount_drops_temp_named_transactions)
{
	eng *e;
	char *err = NULL;
	eng_opts o = {0};
	cr_assert_eq(eng_open(NULL, NULL, dir, "b", "", &o, &e, &err), 0);
	uint64_t t1, sid;
	cr_assert_eq(eng_txn_begin(e, "tmp-checkpoint-3", true, NULL, &t1), 0);
	staged_file(e, "shard", &sid);
	cr_assert_eq(eng_file_put(e, t1, "tmp-checkpoint-3/a", sid, 5, NULL),
		     0);
	char staging[300];
	snprintf(staging, sizeof staging, "%s/staging/%llu", dir,
		 (unsigned long long)sid);
	eng_close(e, true);
	struct stat st;
	cr_assert_neq(stat(staging, &st), 0, "staging reclaimed");
	cr_assert_eq(eng_open(NULL, NULL, dir, "b", "", &o, &e, &err), 0);
	struct seen s = {0};
	eng_foreach_pending_file(e, on_file, &s);
	cr_assert_eq(s.n, 0);
	eng_close(e, false);
}

/* The engine's row functions (jr_txn_*, jr_file_*, jr_part_*, jr_dir_*,
 * jr_garbage_*) write what jr_load and jr_load_parts decode. */
struct rows {
	jr *j;
	int txns, files, dirs, parts;
	int64_t seq;
	char root[32], dest[32], mroot[32], path[32], key[32], etag[32], blocks[32];
	char symlink[32], dpath[32], pseg[32];
	uint32_t mode, dmode, crc;
	uint64_t rdev;
	size_t xattrs_len;
	int state, fstate;
	uint64_t size, part_size, plen;
};

static int row_part(void *arg, const jr_part_row *r)
{
	struct rows *s = arg;
	s->parts++;
	s->plen = r->len;
	snprintf(s->pseg, sizeof s->pseg, "%s", r->segs ? r->segs : "-");
	return 0;
}

static int row_txn(void *arg, const jr_txn_row *r)
{
	struct rows *s = arg;
	s->txns++;
	s->seq = r->seq;
	s->state = r->state;
	snprintf(s->root, sizeof s->root, "%s", r->root);
	snprintf(s->dest, sizeof s->dest, "%s", r->dest ? r->dest : "-");
	snprintf(s->mroot, sizeof s->mroot, "%s", r->mroot ? r->mroot : "-");
	return 0;
}

static int row_file(void *arg, const jr_file_row *r)
{
	struct rows *s = arg;
	s->files++;
	s->fstate = r->state;
	s->size = r->size;
	s->mode = r->mode;
	s->rdev = r->rdev;
	s->crc = r->crc;
	s->part_size = r->part_size;
	s->xattrs_len = r->xattrs_len;
	snprintf(s->path, sizeof s->path, "%s", r->path);
	snprintf(s->key, sizeof s->key, "%s", r->key ? r->key : "-");
	snprintf(s->etag, sizeof s->etag, "%s", r->etag ? r->etag : "-");
	snprintf(s->blocks, sizeof s->blocks, "%s", r->blocks ? r->blocks : "-");
	snprintf(s->symlink, sizeof s->symlink, "%s",
		 r->symlink ? r->symlink : "-");
	return jr_load_parts(s->j, r->id, row_part, s);
}

static int row_dir(void *arg, const jr_dir_row *r)
{
	struct rows *s = arg;
	s->dirs++;
	s->dmode = r->mode;
	snprintf(s->dpath, sizeof s->dpath, "%s", r->path);
	return 0;
}

static int row_garbage(void *arg, const char *key)
{
	(*(int *)arg)++;
	cr_assert_str_eq(key, "old/a");
	return 0;
}

static void load_rows(jr *j, struct rows *s)
{
	memset(s, 0, sizeof *s);
	s->j = j;
	jr_loader l = {row_txn, row_file, row_dir, s};
	cr_assert_eq(jr_load(j, &l), 0);
}

Test(journal, row_functions_round_trip)
{
	jr *j;
	char *err = NULL;
	cr_assert_eq(jr_open(dir, &j, &err), 0);
	int64_t t = 0, t2 = 0, f = 0, seq = 0;
	cr_assert_eq(jr_txn_insert(j, 1, "ckpt", NULL, true, 0, NULL, &t), 0);
	cr_assert_eq(jr_txn_insert(j, 4, "a", "b", false, 1, "m", &t2), 0);
	cr_assert_gt(t2, t);
	cr_assert_eq(jr_file_insert(j, t, "ckpt/x", 7, 100, &f), 0);
	jr_file_row fr = {.id = f, .txn = t, .path = "ckpt/y", .sid = 7,
			  .size = 100, .mode = 020600, .rdev = 0x10304,
			  .xattrs = "a\0b",
			  .xattrs_len = 3, .symlink = "tgt", .state = 0};
	cr_assert_eq(jr_file_update(j, &fr), 0);
	cr_assert_eq(jr_file_set_upload(j, f, "k", "up-1", 64), 0);
	jr_part_row pr = {.n = 0, .etag = "e0", .crc = 5, .len = 64,
			  .segs = "0000abcd"};
	cr_assert_eq(jr_part_done(j, f, &pr), 0);
	jr_dir_row dr = {.txn = t, .path = "ckpt/d", .mode = 0755};
	cr_assert_eq(jr_dir_put(j, &dr), 0);
	dr.mode = 0700;
	cr_assert_eq(jr_dir_set_meta(j, &dr), 0);
	cr_assert_eq(jr_garbage_add(j, t, "old/a"), 0);
	cr_assert_eq(jr_garbage_add(j, t, "old/a"), 0, "ignored twice");
	cr_assert_eq(jr_txn_set_state(j, t, 1), 0);
	cr_assert_eq(jr_txn_set_error(j, t, "boom"), 0);
	cr_assert_eq(count(j, "SELECT COUNT(*) FROM txns WHERE error = 'boom'"),
		     1);
	cr_assert_eq(jr_txn_set_error(j, t, NULL), 0);
	cr_assert_eq(count(j, "SELECT COUNT(*) FROM txns WHERE error IS NULL"),
		     2);

	struct rows s;
	load_rows(j, &s);
	cr_assert_eq(s.txns, 2);
	cr_assert_eq(s.files, 1);
	cr_assert_eq(s.dirs, 1);
	cr_assert_eq(s.parts, 1);
	cr_assert_eq(s.plen, 64);
	cr_assert_str_eq(s.pseg, "0000abcd");
	cr_assert_str_eq(s.path, "ckpt/y");
	cr_assert_str_eq(s.key, "k");
	cr_assert_str_eq(s.symlink, "tgt");
	cr_assert_eq(s.xattrs_len, 3);
	cr_assert_eq(s.mode, 020600, "a device node's type is kept");
	cr_assert_eq(s.rdev, 0x10304);
	cr_assert_eq(s.part_size, 64);
	cr_assert_eq(s.dmode, 0700);
	cr_assert_str_eq(s.dpath, "ckpt/d");
	cr_assert_str_eq(s.root, "a", "the last txn in queue order");
	cr_assert_str_eq(s.dest, "b");
	int g = 0;
	cr_assert_eq(jr_garbage_list(j, t, row_garbage, &g), 0);
	cr_assert_eq(g, 1);

	/* the temp-named root renamed: a fresh position after t2 */
	cr_assert_eq(jr_txn_set_root(j, t, "ckpt-1", "runs"), 0);
	cr_assert_eq(jr_txn_requeue(j, t, &seq), 0);
	cr_assert_gt(seq, t2);
	load_rows(j, &s);
	cr_assert_str_eq(s.root, "ckpt-1", "now last in queue order");
	cr_assert_str_eq(s.mroot, "runs", "the new root's manifest root");
	cr_assert_eq(s.seq, seq);
	cr_assert_eq(s.state, 1);

	cr_assert_eq(jr_file_upload_gone(j, f), 0);
	load_rows(j, &s);
	cr_assert_eq(s.parts, 0);
	cr_assert_eq(s.part_size, 0);
	cr_assert_eq(jr_file_set_state(j, f, 1), 0);
	cr_assert_eq(jr_file_stored(j, f, "k2", "etag", 9, "blk"), 0);
	load_rows(j, &s);
	cr_assert_eq(s.fstate, 2);
	cr_assert_str_eq(s.key, "k2");
	cr_assert_str_eq(s.etag, "etag");
	cr_assert_str_eq(s.blocks, "blk");
	cr_assert_eq(s.crc, 9);

	cr_assert_eq(jr_dir_delete(j, t, "ckpt/d"), 0);
	cr_assert_eq(jr_file_delete(j, f), 0);
	cr_assert_eq(jr_parts_clear(j, f), 0);
	load_rows(j, &s);
	cr_assert_eq(s.files, 0);
	cr_assert_eq(s.dirs, 0);
	cr_assert_eq(jr_txn_delete(j, t), 0);
	cr_assert_eq(jr_txn_delete(j, t2), 0);
	load_rows(j, &s);
	cr_assert_eq(s.txns, 0);
	jr_close(j);
}

struct held_seen {
	int n;
	int64_t id[4];
	char path[4][32], keep[4][32];
	bool is_dir[4];
};

static int held_cb(void *arg, int64_t id, const char *path, bool is_dir,
		   const char *keep)
{
	struct held_seen *h = arg;
	cr_assert_lt(h->n, 4);
	h->id[h->n] = id;
	snprintf(h->path[h->n], 32, "%s", path);
	snprintf(h->keep[h->n], 32, "%s", keep ? keep : "-");
	h->is_dir[h->n++] = is_dir;
	return 0;
}

/* Held remote deletes (eng_hold_delete) survive a reopen in the order
 * they were held, and one forgotten is gone; a journal made before the
 * table existed gets it at open. */
Test(journal, held_deletes_survive_reopen_in_order)
{
	jr *j = NULL;
	char *err = NULL;
	cr_assert_eq(jr_open(dir, &j, &err), 0);
	cr_assert_eq(jr_exec(j, NULL, NULL, "DROP TABLE held", ""), 0);
	jr_close(j);
	cr_assert_eq(jr_open(dir, &j, &err), 0);
	int64_t a, b, c;
	cr_assert_eq(jr_held_insert(j, "ck/g/a", false, "ck/g", &a), 0);
	cr_assert_eq(jr_held_insert(j, "ck/x", false, NULL, &b), 0);
	cr_assert_eq(jr_held_insert(j, "ck/g", true, "ck", &c), 0);
	cr_assert(a < b && b < c);
	cr_assert_eq(jr_held_delete(j, a), 0);
	jr_close(j);
	cr_assert_eq(jr_open(dir, &j, &err), 0);
	struct held_seen h = {0};
	cr_assert_eq(jr_held_list(j, held_cb, &h), 0);
	cr_assert_eq(h.n, 2);
	cr_assert_eq(h.id[0], b);
	cr_assert_str_eq(h.path[0], "ck/x");
	cr_assert_str_eq(h.keep[0], "-");
	cr_assert(!h.is_dir[0]);
	cr_assert_str_eq(h.path[1], "ck/g");
	cr_assert_str_eq(h.keep[1], "ck");
	cr_assert(h.is_dir[1]);
	jr_close(j);
}
