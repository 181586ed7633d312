/*
 * Tests for cidx: layout and permissions, schema versioning, entry names,
 * the roles given by acquire in every case, pins per handle, completion,
 * eviction (LRU, pins, cap, min_free), reset of damaged files, size-0
 * objects, binary keys, discard, liveness through flock (a SIGKILLed child
 * process), reaping, stats, and a concurrency smoke test.
 *
 * Two cidx on one directory in one process stand for two processes: flock
 * locks belong to open file descriptions, so each sees the other as a
 * separate, live owner.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache/index-db.h"
#include "cache/index.h"
#include "cache/owner.h"
#include "util/log.h"

#define CS 4096u /* chunk size used throughout */

static char base[64];

static void setup(void)
{
	log_init(LOG_LVL_WARN, false); /* reaping and take-overs are info */
	snprintf(base, sizeof base, "/tmp/cidx-test-XXXXXX");
	cr_assert_not_null(mkdtemp(base));
}

static int rm_one(const char *p, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	return remove(p);
}

static void teardown(void)
{
	nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(cidx, .init = setup, .fini = teardown);

/* ---- helpers ---------------------------------------------------------- */

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
	va_list ap;
	char *s;
	va_start(ap, f);
	cr_assert_geq(vasprintf(&s, f, ap), 0);
	va_end(ap);
	return s;
}

static char *cdir(void)
{
	return fmt("%s/cache", base);
}

static cidx *open_lim(const char *dir, uint64_t cap, uint64_t min_free)
{
	cidx_limits lim = {cap, min_free};
	cidx *x = NULL;
	char *err = NULL;
	int rc = cidx_open(dir, &lim, &x, &err);
	cr_assert_eq(rc, 0, "cidx_open: %s", err ? err : "?");
	cr_assert_null(err);
	return x;
}

static cidx *open_x(const char *dir)
{
	return open_lim(dir, 0, 0);
}

/* One integer from a query run on a separate connection. */
static int64_t q1(const char *dir, const char *f, ...)
    __attribute__((format(printf, 2, 3)));
static int64_t q1(const char *dir, const char *f, ...)
{
	va_list ap;
	char *sql, *p = fmt("%s/index.db", dir);
	va_start(ap, f);
	cr_assert_geq(vasprintf(&sql, f, ap), 0);
	va_end(ap);
	sqlite3 *db;
	sqlite3_stmt *s;
	cr_assert_eq(sqlite3_open_v2(p, &db, SQLITE_OPEN_READWRITE, NULL),
		     SQLITE_OK);
	sqlite3_busy_timeout(db, 10000);
	cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK, "%s",
		     sqlite3_errmsg(db));
	int64_t v =
	    sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
	sqlite3_finalize(s);
	sqlite3_close(db);
	free(sql);
	free(p);
	return v;
}

static int64_t pins_of(const char *dir, const char *name, const char *owner)
{
	return q1(dir,
		  "SELECT IFNULL(SUM(n), 0) FROM pins WHERE name = '%s' "
		  "AND owner = '%s'",
		  name, owner);
}

static int acq(cidx *x, const char *key, uint64_t size, cidx_entry *e,
	       enum cidx_role *role)
{
	return cidx_acquire(x, "bkt", key, strlen(key), "etag1", size, CS, e,
			    role);
}

/* Acquires key as filler and completes it; the pin is kept. */
static void fill(cidx *x, const char *key, uint64_t size, cidx_entry *e)
{
	enum cidx_role role;
	cr_assert_eq(acq(x, key, size, e, &role), 0);
	cr_assert_eq(role, CIDX_FILLER);
	bool completed = false;
	for (uint32_t i = 0; i < e->n_chunks; i++)
		cr_assert_eq(
		    cidx_chunk_done(x, e->name, i, 100 + i, &completed), 0);
	cr_assert(completed);
}

/* A complete, unpinned entry. */
static void put(cidx *x, const char *key, uint64_t size, char *name)
{
	cidx_entry e;
	fill(x, key, size, &e);
	cr_assert_eq(cidx_release(x, e.name), 0);
	if (name)
		memcpy(name, e.name, CIDX_NAME_LEN);
	cidx_entry_free(&e);
}

static mode_t mode_of(const char *p)
{
	struct stat st;
	cr_assert_eq(stat(p, &st), 0, "stat %s: %s", p, strerror(errno));
	return st.st_mode & 07777;
}

static bool exists(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0;
}

static off_t size_of(const char *p)
{
	struct stat st;
	cr_assert_eq(stat(p, &st), 0);
	return st.st_size;
}

static bool file_exists(cidx *x, const char *name)
{
	char *p = cidx_path(x, name);
	bool r = exists(p);
	free(p);
	return r;
}

/* ---- layout, schema, names ------------------------------------------- */

Test(cidx, layout_and_permissions_ignore_umask)
{
	umask(0);
	char *dir = fmt("%s/x/y/cache", base);
	cidx *x = open_x(dir);
	cidx_entry e;
	enum cidx_role role;
	cr_assert_eq(acq(x, "k", 10000, &e, &role), 0);
	cr_assert_eq(cidx_chunk_done(x, e.name, 0, 1, NULL), 0);

	const char *dirs[] = {"", "/objects", "/owners"};
	for (size_t i = 0; i < 3; i++) {
		char *p = fmt("%s%s", dir, dirs[i]);
		cr_assert_eq(mode_of(p), 0700, "%s: %o", p, mode_of(p));
		free(p);
	}
	const char *files[] = {"/index.db", "/index.db-wal", "/index.db-shm"};
	for (size_t i = 0; i < 3; i++) {
		char *p = fmt("%s%s", dir, files[i]);
		cr_assert_eq(mode_of(p), 0600, "%s: %o", p, mode_of(p));
		free(p);
	}
	char *lock = fmt("%s/owners/%s.lock", dir, cidx_owner_id(x));
	cr_assert_eq(mode_of(lock), 0600);
	char *obj = cidx_path(x, e.name);
	char *sub = fmt("%s/objects/%.2s", dir, e.name);
	cr_assert_eq(mode_of(obj), 0600);
	cr_assert_eq(mode_of(sub), 0700);
	cr_assert_eq(size_of(obj), 10000);

	cidx_release(x, e.name);
	cidx_entry_free(&e);
	cidx_close(x);
	cr_assert_not(exists(lock), "close removes the lock file");
	free(lock);
	free(obj);
	free(sub);
	free(dir);
}

/* Issue 23: a directory ckptfs did not create keeps its mode; read bits
 * are harmless (every file inside is 0600), so it is used as it is. */
Test(cidx, existing_readable_dir_is_used_as_it_is)
{
	char *dir = cdir();
	cr_assert_eq(mkdir(dir, 0700), 0);
	cr_assert_eq(chmod(dir, 0755), 0);
	cidx *x = open_x(dir);
	cr_assert_eq(mode_of(dir), 0755);
	char *objects = fmt("%s/objects", dir);
	cr_assert_eq(mode_of(objects), 0700, "created by us: private");
	free(objects);
	cidx_close(x);
	free(dir);
}

/* A directory others can write (cache_dir=/tmp) is refused, untouched. */
Test(cidx, existing_dir_writable_by_others_is_refused_untouched)
{
	static const mode_t modes[] = {01777, 0777, 0770, 0720};
	for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
		char *dir = fmt("%s/shared%zu", base, i);
		cr_assert_eq(mkdir(dir, 0700), 0);
		cr_assert_eq(chmod(dir, modes[i]), 0);
		cidx *x = (cidx *)1;
		char *err = NULL;
		cr_assert_eq(cidx_open(dir, NULL, &x, &err), -1);
		cr_assert_null(x);
		cr_assert_eq(mode_of(dir), modes[i], "%o became %o", modes[i],
			     mode_of(dir));
		cr_assert(strstr(err, dir) && strstr(err, "writable by other"),
			  "%s", err);
		char *objects = fmt("%s/objects", dir);
		cr_assert_not(exists(objects), "nothing made inside");
		free(objects);
		free(err);
		free(dir);
	}
}

Test(cidx, open_errors_name_the_path)
{
	char *file = fmt("%s/plain", base);
	int fd = open(file, O_CREAT | O_WRONLY, 0600);
	cr_assert_geq(fd, 0);
	close(fd);
	cidx *x = (cidx *)1;
	char *err = NULL;
	cr_assert_eq(cidx_open(file, NULL, &x, &err), -1);
	cr_assert_null(x);
	cr_assert_not_null(err);
	cr_assert_not_null(strstr(err, file), "%s", err);
	free(err);
	free(file);
}

Test(cidx, newer_schema_is_refused)
{
	char *dir = cdir();
	cidx_close(open_x(dir));
	q1(dir, "PRAGMA user_version = 99");
	cr_assert_eq(q1(dir, "PRAGMA user_version"), 99);
	cidx *x = NULL;
	char *err = NULL;
	cr_assert_eq(cidx_open(dir, NULL, &x, &err), -1);
	cr_assert_not_null(strstr(err, "index.db"), "%s", err);
	free(err);
	q1(dir, "PRAGMA user_version = 2");
	cidx_close(open_x(dir)); /* and reopening a good one works */
	free(dir);
}

/* A damaged index.db (here: not a database at all) fails the open with
 * a message that names it and says what to do. */
Test(cidx, garbage_index_says_what_to_remove)
{
	char *dir = cdir();
	cidx_close(open_x(dir));
	char *db = fmt("%s/index.db", dir);
	char *wal = fmt("%s/index.db-wal", dir);
	char *shm = fmt("%s/index.db-shm", dir);
	unlink(wal);
	unlink(shm);
	int fd = open(db, O_WRONLY | O_TRUNC);
	cr_assert_geq(fd, 0);
	char junk[8192];
	memset(junk, 0x5a, sizeof junk);
	cr_assert_eq(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
	close(fd);
	cidx *x = NULL;
	char *err = NULL;
	cr_assert_eq(cidx_open(dir, NULL, &x, &err), -1);
	cr_assert_null(x);
	cr_assert_not_null(err);
	cr_assert_not_null(strstr(err, "remove"), "%s", err);
	cr_assert_not_null(strstr(err, db), "%s", err);
	/* doing what it says works */
	cr_assert_eq(unlink(db), 0);
	free(err);
	cidx_close(open_x(dir));
	free(db);
	free(wal);
	free(shm);
	free(dir);
}

Test(cidx, version_1_gains_stamps)
{
	char *dir = cdir();
	cidx_close(open_x(dir));
	q1(dir, "DROP TABLE stamps");
	q1(dir, "PRAGMA user_version = 1");
	cidx *x = open_x(dir);
	cr_assert_eq(q1(dir, "PRAGMA user_version"), 2);
	struct stat st = {.st_dev = 1, .st_ino = 2, .st_size = 3};
	cr_assert_eq(cidx_stamp_set(x, "ab", &st), 0);
	cidx_close(x);
	free(dir);
}

Test(cidx, stamps_match_only_the_same_file)
{
	char *dir = cdir();
	cidx *x = open_x(dir);
	char name[CIDX_NAME_LEN];
	cidx_name("b", "k", 1, "\"e\"", name);
	struct stat st = {.st_dev = 7, .st_ino = 9, .st_size = 100};
	st.st_mtim.tv_sec = 5;
	st.st_ctim.tv_sec = 6;
	bool match = true;
	cr_assert_eq(cidx_stamp_matches(x, name, &st, &match), 0);
	cr_assert_not(match, "no stamp yet");
	cr_assert_eq(cidx_stamp_set(x, name, &st), 0);
	cr_assert_eq(cidx_stamp_matches(x, name, &st, &match), 0);
	cr_assert(match);
	struct stat changed = st;
	changed.st_mtim.tv_nsec = 1;
	cr_assert_eq(cidx_stamp_matches(x, name, &changed, &match), 0);
	cr_assert_not(match, "a rewritten file must not match");
	changed = st;
	changed.st_ino = 10;
	cr_assert_eq(cidx_stamp_matches(x, name, &changed, &match), 0);
	cr_assert_not(match, "a replaced file must not match");
	cidx_close(x);
	free(dir);
}

Test(cidx, names_hash_bucket_key_etag)
{
	char a[CIDX_NAME_LEN], b[CIDX_NAME_LEN], c[CIDX_NAME_LEN];
	cidx_name("bkt", "a\0b", 3, "e", a);
	cidx_name("bkt", "a\0c", 3, "e", b);
	cidx_name("bkt", "a", 1, "e", c);
	cr_assert_eq(strlen(a), 64);
	cr_assert_str_neq(a, b);
	cr_assert_str_neq(a, c);

	unsigned char md[32];
	unsigned int len;
	const char msg[] = "bkt\0a\0b\0e";
	EVP_Digest(msg, sizeof msg - 1, md, &len, EVP_sha256(), NULL);
	char want[65];
	for (int i = 0; i < 32; i++)
		snprintf(want + 2 * i, 3, "%02x", md[i]);
	cr_assert_str_eq(a, want);

	char *dir = cdir();
	cidx *x = open_x(dir);
	char *p = cidx_path(x, a), *w = fmt("%s/objects/%.2s/%s", dir, a, a);
	cr_assert_str_eq(p, w);
	cr_assert_null(cidx_path(x, "../../etc/passwd"));
	cr_assert_eq(strlen(cidx_owner_id(x)), 32);
	cr_assert_str_eq(cidx_dir(x), dir);
	cidx_close(x);
	free(p);
	free(w);
	free(dir);
}

/* ---- roles and pins ---------------------------------------------------- */

Test(cidx, new_entry_is_filler_and_pinned_per_handle)
{
	char *dir = cdir();
	cidx *x = open_x(dir);
	cidx_entry e, e2;
	enum cidx_role role;
	cr_assert_eq(acq(x, "k", 3 * CS + 1, &e, &role), 0);
	cr_assert_eq(role, CIDX_FILLER);
	cr_assert_eq(e.n_chunks, 4);
	cr_assert_eq(e.chunk_size, CS);
	cr_assert_eq(e.size, 3 * CS + 1);
	for (uint32_t i = 0; i < 4; i++)
		cr_assert_eq(e.done[i], 0);
	cr_assert_eq(pins_of(dir, e.name, cidx_owner_id(x)), 1);

	/* another handle in this process: filler too, second pin */
	cr_assert_eq(acq(x, "k", 3 * CS + 1, &e2, &role), 0);
	cr_assert_eq(role, CIDX_FILLER);
	cr_assert_eq(pins_of(dir, e.name, cidx_owner_id(x)), 2);

	cr_assert_eq(cidx_release(x, e.name), 0);
	cr_assert_eq(pins_of(dir, e.name, cidx_owner_id(x)), 1);
	cr_assert_eq(q1(dir, "SELECT filler IS NOT NULL FROM entries"), 1);
	cr_assert_eq(cidx_release(x, e.name), 0);
	cr_assert_eq(q1(dir, "SELECT COUNT(*) FROM pins"), 0);
	/* the last release of an unfinished fill orphans it */
	cr_assert_eq(q1(dir, "SELECT filler IS NULL FROM entries"), 1);
	cr_assert_eq(cidx_release(x, e.name), -ENOENT);
	cidx_entry_free(&e);
	cidx_entry_free(&e2);
	cidx_close(x);
	free(dir);
}

Test(cidx, completion_and_complete_role)
{
	char *dir = cdir();
	cidx *x = open_x(dir);
	cidx_entry e;
	enum cidx_role role;
	cr_assert_eq(acq(x, "k", 3 * CS, &e, &role), 0);
	bool done = true;
	cr_assert_eq(cidx_chunk_done(x, e.name, 1, 11, &done), 0);
	cr_assert_not(done);
	cr_assert_eq(cidx_chunk_done(x, e.name, 3, 0, &done), -EINVAL);
	uint32_t idx[] = {0, 2}, crc[] = {10, 12};
	cr_assert_eq(cidx_chunks_done(x, e.name, idx, crc, 2, &done), 0);
	cr_assert(done);
	cr_assert_eq(q1(dir, "SELECT state FROM entries"), 1);
	cr_assert_eq(q1(dir, "SELECT filler IS NULL FROM entries"), 1);

	cidx_entry e2;
	cr_assert_eq(acq(x, "k", 3 * CS, &e2, &role), 0);
	cr_assert_eq(role, CIDX_COMPLETE);
	for (uint32_t i = 0; i < 3; i++) {
		cr_assert_eq(e2.done[i], 1);
		cr_assert_eq(e2.crc[i], 10 + i);
	}
	cidx_release(x, e.name);
	cidx_release(x, e.name);
	cidx_entry_free(&e);
	cidx_entry_free(&e2);
	cidx_close(x);
	free(dir);
}

Test(cidx, stored_chunk_size_wins)
{
	char *dir = cdir();
	cidx *x = open_x(dir);
	cidx_entry e, e2;
	enum cidx_role role;
	cr_assert_eq(acq(x, "k", 4 * CS, &e, &role), 0);
	cr_assert_eq(
	    cidx_acquire(x, "bkt", "k", 1, "etag1", 4 * CS, 2 * CS, &e2, &role),
	    0);
	cr_assert_eq(e2.chunk_size, CS);
	cr_assert_eq(e2.n_chunks, 4);
	cidx_release(x, e.name);
	cidx_release(x, e.name);
	cidx_entry_free(&e);
	cidx_entry_free(&e2);
	cidx_close(x);
	free(dir);
}

Test(cidx, follower_then_refresh_to_complete)
{
	char *dir = cdir();
	cidx *a = open_x(dir), *b = open_x(dir);
	cidx_entry ea, eb;
	enum cidx_role ra, rb;
	cr_assert_eq(acq(a, "k", 2 * CS, &ea, &ra), 0);
	cr_assert_eq(ra, CIDX_FILLER);
	cr_assert_eq(acq(b, "k", 2 * CS, &eb, &rb), 0);
	cr_assert_eq(rb, CIDX_FOLLOWER);
	cr_assert(cidx_owner_alive(b, cidx_owner_id(a)));

	cr_assert_eq(cidx_chunk_done(a, ea.name, 1, 77, NULL), 0);
	cr_assert_eq(cidx_refresh(b, &eb, &rb), 0);
	cr_assert_eq(rb, CIDX_FOLLOWER);
	cr_assert_eq(eb.done[0], 0);
	cr_assert_eq(eb.done[1], 1);
	cr_assert_eq(eb.crc[1], 77);

	cr_assert_eq(cidx_chunk_done(a, ea.name, 0, 66, NULL), 0);
	cr_assert_eq(cidx_refresh(b, &eb, &rb), 0);
	cr_assert_eq(rb, CIDX_COMPLETE);
	cr_assert_eq(eb.done[0], 1);

	/* a refresh on an entry given by name only allocates the arrays */
	cidx_entry bare;
	memset(&bare, 0, sizeof bare);
	memcpy(bare.name, ea.name, CIDX_NAME_LEN);
	cr_assert_eq(cidx_refresh(b, &bare, &rb), 0);
	cr_assert_eq(bare.n_chunks, 2);
	cr_assert_eq(bare.crc[0], 66);
	cidx_entry_free(&bare);

	cidx_release(a, ea.name);
	cidx_release(b, eb.name);
	cidx_entry_free(&ea);
	cidx_entry_free(&eb);
	cidx_close(a);
	cidx_close(b);
	free(dir);
}

Test(cidx, orphaned_fill_is_taken_over_with_its_chunks)
{
	char *dir = cdir();
	cidx *a = open_x(dir), *b = open_x(dir);
	cidx_entry ea, eb;
	enum cidx_role role;
	cr_assert_eq(acq(a, "k", 3 * CS, &ea, &role), 0);
	cr_assert_eq(cidx_chunk_done(a, ea.name, 1, 5, NULL), 0);
	cr_assert_eq(cidx_release(a, ea.name), 0); /* filler gives up */
	cr_assert_eq(acq(b, "k", 3 * CS, &eb, &role), 0);
	cr_assert_eq(role, CIDX_FILLER);
	cr_assert_eq(eb.done[1], 1);
	cr_assert_eq(eb.crc[1], 5);
	cr_assert_eq(eb.done[0] + eb.done[2], 0);
	cidx_release(b, eb.name);
	cidx_entry_free(&ea);
	cidx_entry_free(&eb);
	cidx_close(a);
	cidx_close(b);
	free(dir);
}

Test(cidx, closed_filler_is_dead_and_taken_over)
{
	char *dir = cdir();
	cidx *a = open_x(dir), *b = open_x(dir);
	cidx_entry ea, eb;
	enum cidx_role role;
	cr_assert_eq(acq(a, "k", 2 * CS, &ea, &role), 0);
	cr_assert_eq(cidx_chunk_done(a, ea.name, 0, 9, NULL), 0);
	cr_assert_eq(acq(b, "k", 2 * CS, &eb, &role), 0);
	cr_assert_eq(role, CIDX_FOLLOWER);
	char aid[40];
	snprintf(aid, sizeof aid, "%s", cidx_owner_id(a));
	cidx_close(a); /* without releasing */
	cr_assert_not(cidx_owner_alive(b, aid));
	cr_assert_eq(cidx_refresh(b, &eb, &role), 0);
	cr_assert_eq(role, CIDX_FILLER);
	cr_assert_eq(eb.done[0], 1);
	cr_assert_eq(
	    q1(dir, "SELECT COUNT(*) FROM pins WHERE owner = '%s'", aid), 0);
	cidx_release(b, eb.name);
	cidx_entry_free(&ea);
	cidx_entry_free(&eb);
	cidx_close(b);
	free(dir);
}

Test(cidx, chunk_forget_reopens_the_fill)
{
	char *dir = cdir();
	cidx *x = open_x(dir);
	cidx_entry e;
	enum cidx_role role;
	fill(x, "k", 3 * CS, &e);
	cr_assert_eq(cidx_chunk_forget(x, e.name, 1), 0);
	cr_assert_eq(q1(dir, "SELECT state FROM entries"), 0);
	cr_assert_eq(cidx_refresh(x, &e, &role), 0);
	cr_assert_eq(role, CIDX_FILLER);
	cr_assert_eq(e.done[1], 0);
	cr_assert_eq(e.done[0] + e.done[2], 2);
	bool done;
	cr_assert_eq(cidx_chunk_done(x, e.name, 1, 1, &done), 0);
	cr_assert(done);
	cidx_release(x, e.name);
	cidx_entry_free(&e);
	cidx_close(x);
	free(dir);
}

/* ---- damaged files, size 0, binary keys ------------------------------ */

Test(cidx, missing_or_truncated_file_resets_the_entry)
{
	char *dir = cdir();
	cidx *x = open_x(dir);
	char name[CIDX_NAME_LEN];
	put(x, "k", 2 * CS, name);
	char *p = cidx_path(x, name);

	for (int round = 0; round < 2; round++) {
		if (round == 0)
			cr_assert_eq(unlink(p), 0);
		else
			cr_assert_eq(truncate(p, CS), 0);
		cidx_entry e;
		enum cidx_role role;
		cr_assert_eq(acq(x, "k", 2 * CS, &e, &role), 0);
		cr_assert_eq(role, CIDX_FILLER, "round %d", round);
		cr_assert_eq(e.done[0] + e.done[1], 0);
		cr_assert_eq(size_of(p), 2 * CS);
		cr_assert_eq(q1(dir, "SELECT COUNT(*) FROM chunks"), 0);
		bool done;
		uint32_t idx[] = {0, 1}, crc[] = {1, 2};
		cr_assert_eq(cidx_chunks_done(x, e.name, idx, crc, 2, &done),
			     0);
		cr_assert(done);
		cidx_release(x, e.name);
		cidx_entry_free(&e);
	}
	free(p);
	cidx_close(x);
	free(dir);
}

Test(cidx, empty_object_is_complete_at_once)
{
	char *dir = cdir();
	cidx *x = open_x(dir);
	for (int i = 0; i < 2; i++) {
		cidx_entry e;
		enum cidx_role role;
		cr_assert_eq(acq(x, "empty", 0, &e, &role), 0);
		cr_assert_eq(role, CIDX_COMPLETE);
		cr_assert_eq(e.n_chunks, 0);
		char *p = cidx_path(x, e.name);
		cr_assert_eq(size_of(p), 0);
		cr_assert_eq(cidx_chunk_done(x, e.name, 0, 0, NULL), -EINVAL);
		cr_assert_eq(cidx_release(x, e.name), 0);
		free(p);
		cidx_entry_free(&e);
	}
	cidx_stats st;
	cr_assert_eq(cidx_get_stats(x, &st), 0);
	cr_assert_eq(st.entries, 1);
	cr_assert_eq(st.complete_entries, 1);
	cr_assert_eq(st.bytes, 0);
	cidx_close(x);
	free(dir);
}

Test(cidx, binary_and_unicode_keys)
{
	char *dir = cdir();
	cidx *x = open_x(dir);
	const char k1[] = "a\0b", k2[] = "a\0c",
		   k3[] = "ckpt/\xc3\xa9t\xc3\xa9.bin";
	const char *keys[] = {k1, k2, k3};
	size_t lens[] = {3, 3, sizeof k3 - 1};
	char names[3][CIDX_NAME_LEN];
	for (int i = 0; i < 3; i++) {
		cidx_entry e;
		enum cidx_role role;
		cr_assert_eq(cidx_acquire(x, "bkt", keys[i], lens[i], "e", 1,
					  CS, &e, &role),
			     0);
		cr_assert_eq(role, CIDX_FILLER);
		memcpy(names[i], e.name, CIDX_NAME_LEN);
		cidx_release(x, e.name);
		cidx_entry_free(&e);
	}
	cr_assert_str_neq(names[0], names[1]);
	cr_assert_eq(q1(dir, "SELECT COUNT(*) FROM entries"), 3);
	cr_assert_eq(q1(dir,
			"SELECT COUNT(*) FROM entries WHERE name = '%s' AND "
			"key = X'610062' AND typeof(key) = 'blob'",
			names[0]),
		     1);
	cr_assert_eq(q1(dir,
			"SELECT length(key) FROM entries WHERE name = '%s'",
			names[2]),
		     (int64_t)lens[2]);
	cidx_close(x);
	free(dir);
}

Test(cidx, open_sweeps_files_without_entries)
{
	char *dir = cdir();
	cidx *x = open_x(dir);
	char kept[CIDX_NAME_LEN], orphan[CIDX_NAME_LEN];
	put(x, "kept", CS, kept);
	cidx_name("bkt", "orphan", 6, "etag1", orphan);
	char *sub = fmt("%s/objects/%.2s", dir, orphan);
	char *po = fmt("%s/%s", sub, orphan), *pf = fmt("%s/foreign", sub);
	mkdir(sub, 0700);
	for (int i = 0; i < 2; i++) {
		int fd = open(i ? pf : po, O_CREAT | O_WRONLY, 0600);
		cr_assert_geq(fd, 0);
		close(fd);
	}
	cidx_close(x);
	x = open_x(dir);
	cr_assert_not(exists(po));
	cr_assert(exists(pf), "names we never make are left alone");
	cr_assert(file_exists(x, kept));
	cidx_close(x);
	free(sub);
	free(po);
	free(pf);
	free(dir);
}

/* ---- eviction ---------------------------------------------------------- */

Test(cidx, eviction_is_lru_and_unlinks)
{
	char *dir = cdir();
	cidx *x = open_lim(dir, 3 * CS, 0);
	char a[CIDX_NAME_LEN], b[CIDX_NAME_LEN], c[CIDX_NAME_LEN];
	put(x, "a", CS, a);
	put(x, "b", CS, b);
	put(x, "c", CS, c);
	cidx_entry e;
	enum cidx_role role;
	cr_assert_eq(acq(x, "a", CS, &e, &role), 0); /* a is used again */
	cr_assert_eq(role, CIDX_COMPLETE);
	cidx_release(x, e.name);
	cidx_entry_free(&e);

	cr_assert_eq(acq(x, "d", CS, &e, &role), 0);
	cr_assert_eq(role, CIDX_FILLER);
	cr_assert_not(file_exists(x, b), "b was least recently used");
	cr_assert(file_exists(x, a));
	cr_assert(file_exists(x, c));
	cr_assert_eq(
	    q1(dir, "SELECT COUNT(*) FROM entries WHERE name = '%s'", b), 0);
	cidx_stats st;
	cr_assert_eq(cidx_get_stats(x, &st), 0);
	cr_assert_eq(st.evictions, 1);
	cr_assert_eq(st.entries, 3);
	cr_assert_eq(st.bytes, 3 * CS);
	cr_assert_eq(st.pinned_bytes, CS);
	cr_assert_eq(st.complete_entries, 2);
	cidx_release(x, e.name);
	cidx_entry_free(&e);
	cidx_close(x);
	free(dir);
}

Test(cidx, pinned_entries_are_never_evicted)
{
	char *dir = cdir();
	cidx *x = open_lim(dir, 2 * CS, 0);
	cidx_entry ea, eb, ec;
	enum cidx_role role;
	fill(x, "a", CS, &ea);			      /* complete but pinned */
	cr_assert_eq(acq(x, "b", CS, &eb, &role), 0); /* filling, pinned */
	cr_assert_eq(acq(x, "c", CS, &ec, &role), -ENOSPC);
	char name[CIDX_NAME_LEN];
	cidx_name("bkt", "c", 1, "etag1", name);
	cr_assert_not(file_exists(x, name), "nothing created");
	cr_assert_eq(q1(dir, "SELECT COUNT(*) FROM entries"), 2);
	cr_assert(file_exists(x, ea.name));
	cr_assert(file_exists(x, eb.name));

	/* once b is unpinned (and orphaned) it can go */
	cr_assert_eq(cidx_release(x, eb.name), 0);
	cr_assert_eq(acq(x, "c", CS, &ec, &role), 0);
	cr_assert_not(file_exists(x, eb.name));
	cr_assert(file_exists(x, ea.name));
	cidx_release(x, ea.name);
	cidx_release(x, ec.name);
	cidx_entry_free(&ea);
	cidx_entry_free(&eb);
	cidx_entry_free(&ec);
	cidx_close(x);
	free(dir);
}

Test(cidx, too_big_for_the_cap_evicts_nothing)
{
	char *dir = cdir();
	cidx *x = open_lim(dir, 2 * CS, 0);
	put(x, "a", CS, NULL);
	cidx_entry e;
	enum cidx_role role;
	cr_assert_eq(acq(x, "big", 3 * CS, &e, &role), -ENOSPC);
	cidx_stats st;
	cr_assert_eq(cidx_get_stats(x, &st), 0);
	cr_assert_eq(st.entries, 1);
	cr_assert_eq(st.evictions, 0);
	cidx_close(x);
	free(dir);
}

Test(cidx, live_pin_of_another_owner_prevents_eviction)
{
	char *dir = cdir();
	cidx *a = open_x(dir), *b = open_lim(dir, CS, 0);
	cidx_entry ea, eb;
	enum cidx_role role;
	fill(a, "x", CS, &ea);
	cr_assert_eq(acq(b, "y", CS, &eb, &role), -ENOSPC);
	cr_assert(file_exists(a, ea.name));
	cr_assert_eq(cidx_release(a, ea.name), 0);
	cr_assert_eq(acq(b, "y", CS, &eb, &role), 0);
	cr_assert_not(file_exists(a, ea.name));
	cidx_release(b, eb.name);
	cidx_entry_free(&ea);
	cidx_entry_free(&eb);
	cidx_close(a);
	cidx_close(b);
	free(dir);
}

Test(cidx, min_free_evicts_unpinned_then_gives_up)
{
	char *dir = cdir();
	cidx *a = open_x(dir), *b = open_lim(dir, 0, UINT64_MAX / 2);
	cidx_entry ep, e;
	enum cidx_role role;
	char loose[CIDX_NAME_LEN];
	put(a, "loose", CS, loose);
	fill(a, "pinned", CS, &ep);
	cr_assert_eq(acq(b, "new", CS, &e, &role), -ENOSPC);
	cr_assert_not(file_exists(a, loose));
	cr_assert(file_exists(a, ep.name));
	cidx_stats st;
	cr_assert_eq(cidx_get_stats(b, &st), 0);
	cr_assert_eq(st.evictions, 1);
	cr_assert_eq(st.entries, 1);
	cidx_release(a, ep.name);
	cidx_entry_free(&ep);
	cidx_close(a);
	cidx_close(b);
	free(dir);
}

/* ---- discard ----------------------------------------------------------- */

Test(cidx, discard_unpinned_removes_at_once)
{
	char *dir = cdir();
	cidx *x = open_x(dir);
	char name[CIDX_NAME_LEN];
	put(x, "k", CS, name);
	cr_assert_eq(cidx_discard(x, name), 0);
	cr_assert_not(file_exists(x, name));
	cr_assert_eq(q1(dir, "SELECT COUNT(*) FROM entries"), 0);
	cr_assert_eq(cidx_discard(x, name), 0); /* absent: nothing to do */
	cidx_close(x);
	free(dir);
}

Test(cidx, discard_pinned_waits_for_the_last_release)
{
	char *dir = cdir();
	cidx *a = open_x(dir), *b = open_x(dir);
	cidx_entry ea, eb, e;
	enum cidx_role role;
	fill(a, "k", CS, &ea);
	cr_assert_eq(acq(b, "k", CS, &eb, &role), 0);
	cr_assert_eq(cidx_discard(b, ea.name), 0);
	cr_assert_eq(q1(dir, "SELECT doomed FROM entries"), 1);
	cr_assert_eq(acq(a, "k", CS, &e, &role), -EBUSY);
	cr_assert_eq(cidx_release(a, ea.name), 0);
	cr_assert(file_exists(a, ea.name), "b still pins it");
	cr_assert_eq(cidx_release(b, eb.name), 0);
	cr_assert_not(file_exists(a, ea.name));
	cr_assert_eq(q1(dir, "SELECT COUNT(*) FROM entries"), 0);
	cr_assert_eq(acq(a, "k", CS, &e, &role), 0);
	cr_assert_eq(role, CIDX_FILLER);
	cidx_release(a, e.name);
	cidx_entry_free(&ea);
	cidx_entry_free(&eb);
	cidx_entry_free(&e);
	cidx_close(a);
	cidx_close(b);
	free(dir);
}

Test(cidx, doomed_entry_goes_with_its_last_owner)
{
	char *dir = cdir();
	cidx *a = open_x(dir), *b = open_x(dir);
	cidx_entry e;
	fill(a, "k", CS, &e);
	cr_assert_eq(cidx_discard(b, e.name), 0);
	cr_assert(file_exists(b, e.name));
	cidx_close(a); /* dies holding the only pin */
	cr_assert_not(file_exists(b, e.name));
	cr_assert_eq(q1(dir, "SELECT COUNT(*) FROM entries"), 0);
	cidx_entry_free(&e);
	cidx_close(b);
	free(dir);
}

/* ---- liveness and reaping ---------------------------------------------- */

/* Child: opens the cache, becomes filler of "k" with chunks 0 and 2
 * recorded, reports its owner id and waits to be killed.  It runs before
 * the parent opens anything, so it shares no SQLite state with it. */
static pid_t spawn_filler(const char *dir, char owner[33])
{
	int p[2];
	cr_assert_eq(pipe(p), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		close(p[0]);
		cidx *c;
		cidx_entry e;
		enum cidx_role role;
		if (cidx_open(dir, NULL, &c, NULL) < 0 ||
		    acq(c, "k", 3 * CS, &e, &role) < 0 || role != CIDX_FILLER ||
		    cidx_chunk_done(c, e.name, 0, 100, NULL) < 0 ||
		    cidx_chunk_done(c, e.name, 2, 102, NULL) < 0)
			_exit(1);
		if (write(p[1], cidx_owner_id(c), 32) != 32)
			_exit(1);
		for (;;)
			pause();
	}
	close(p[1]);
	cr_assert_eq(read(p[0], owner, 32), 32);
	owner[32] = '\0';
	close(p[0]);
	return pid;
}

static void kill_child(pid_t pid)
{
	int st;
	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFSIGNALED(st));
}

Test(cidx, sigkilled_filler_is_reaped_and_taken_over)
{
	char *dir = cdir(), child[33];
	pid_t pid = spawn_filler(dir, child);
	cidx *x = open_x(dir);
	cr_assert(cidx_owner_alive(x, child));
	cidx_entry e;
	enum cidx_role role;
	cr_assert_eq(acq(x, "k", 3 * CS, &e, &role), 0);
	cr_assert_eq(role, CIDX_FOLLOWER);
	cr_assert_eq(e.done[0] + e.done[1] + e.done[2], 2);

	kill_child(pid);
	cr_assert_not(cidx_owner_alive(x, child));
	cr_assert_eq(pins_of(dir, e.name, child), 1, "not reaped yet");
	cr_assert_eq(cidx_reap(x), 0);
	cr_assert_eq(pins_of(dir, e.name, child), 0);
	cr_assert_eq(
	    q1(dir, "SELECT COUNT(*) FROM owners WHERE owner = '%s'", child),
	    0);
	cr_assert_eq(q1(dir, "SELECT filler IS NULL FROM entries"), 1);
	char *lock = fmt("%s/owners/%s.lock", dir, child);
	cr_assert_not(exists(lock));
	free(lock);

	cr_assert_eq(cidx_refresh(x, &e, &role), 0);
	cr_assert_eq(role, CIDX_FILLER);
	cr_assert_eq(e.done[0], 1);
	cr_assert_eq(e.done[1], 0);
	cr_assert_eq(e.done[2], 1);
	cr_assert_eq(e.crc[2], 102);
	cidx_release(x, e.name);
	cidx_entry_free(&e);
	cidx_close(x);
	free(dir);
}

Test(cidx, acquire_after_filler_death_takes_over)
{
	char *dir = cdir(), child[33];
	pid_t pid = spawn_filler(dir, child);
	kill_child(pid);
	cidx *x = open_x(dir); /* reaps at open */
	cr_assert_eq(q1(dir, "SELECT COUNT(*) FROM pins"), 0);
	cidx_entry e;
	enum cidx_role role;
	cr_assert_eq(acq(x, "k", 3 * CS, &e, &role), 0);
	cr_assert_eq(role, CIDX_FILLER);
	cr_assert_eq(e.done[0] + e.done[2], 2);
	cr_assert_eq(e.crc[0], 100);
	cr_assert_eq(e.done[1], 0);
	cidx_release(x, e.name);
	cidx_entry_free(&e);
	cidx_close(x);
	free(dir);
}

Test(cidx, liveness_and_stale_lock_files)
{
	char *dir = cdir();
	cidx *a = open_x(dir), *b = open_x(dir);
	cr_assert(cidx_owner_alive(a, cidx_owner_id(a)));
	cr_assert(cidx_owner_alive(a, cidx_owner_id(b)));
	cr_assert_not(cidx_owner_alive(a, "../../../../etc/passwd"));
	cr_assert_not(cidx_owner_alive(a, "0123456789abcdef0123456789abcdef"));

	const char *stale = "00000000000000000000000000000001";
	const char *held = "00000000000000000000000000000002";
	char *ps = fmt("%s/owners/%s.lock", dir, stale);
	char *pn = fmt("%s/owners/%s.new", dir, stale);
	char *ph = fmt("%s/owners/%s.lock", dir, held);
	int fs = open(ps, O_CREAT | O_WRONLY, 0600);
	int fn = open(pn, O_CREAT | O_WRONLY, 0600);
	int fh = open(ph, O_CREAT | O_WRONLY, 0600);
	cr_assert(fs >= 0 && fn >= 0 && fh >= 0);
	close(fs);
	close(fn);
	cr_assert_eq(flock(fh, LOCK_EX), 0);
	q1(dir, "INSERT INTO pins(name, owner, n) VALUES('x', '%s', 1)", stale);

	cr_assert_not(cidx_owner_alive(a, stale));
	cr_assert(cidx_owner_alive(a, held));
	cr_assert_eq(cidx_reap(a), 0);
	cr_assert_not(exists(ps));
	cr_assert_not(exists(pn));
	cr_assert(exists(ph));
	cr_assert_eq(q1(dir, "SELECT COUNT(*) FROM pins"), 0);
	close(fh); /* the holder dies */
	cr_assert_not(cidx_owner_alive(a, held));
	cr_assert_eq(cidx_reap(a), 0);
	cr_assert_not(exists(ph));

	char bid[33];
	snprintf(bid, sizeof bid, "%s", cidx_owner_id(b));
	cidx_close(b);
	cr_assert_not(cidx_owner_alive(a, bid));
	cidx_close(a);
	free(ps);
	free(pn);
	free(ph);
	free(dir);
}

Test(cidx, stats_count_live_pins_only)
{
	char *dir = cdir(), child[33];
	pid_t pid = spawn_filler(dir, child); /* pins "k", 3 chunks */
	cidx *a = open_x(dir), *b = open_x(dir);
	cidx_entry ea, eb;
	enum cidx_role role;
	fill(a, "x", 2 * CS, &ea);
	cr_assert_eq(acq(b, "x", 2 * CS, &eb, &role), 0);
	put(b, "y", 5, NULL);
	cidx_stats st;
	cr_assert_eq(cidx_get_stats(a, &st), 0);
	cr_assert_eq(st.entries, 3);
	cr_assert_eq(st.bytes, 5 * CS + 5);
	cr_assert_eq(st.pinned_bytes, 5 * CS); /* x once, k */
	cr_assert_eq(st.complete_entries, 2);
	kill_child(pid);
	cr_assert_eq(cidx_get_stats(a, &st), 0);
	cr_assert_eq(st.pinned_bytes, 2 * CS);
	cidx_release(a, ea.name);
	cidx_release(b, eb.name);
	cidx_entry_free(&ea);
	cidx_entry_free(&eb);
	cidx_close(a);
	cidx_close(b);
	free(dir);
}

Test(cidx, bad_arguments)
{
	char *dir = cdir();
	cidx *x = open_x(dir);
	cidx_entry e;
	enum cidx_role role;
	cr_assert_eq(cidx_acquire(x, "b", "k", 1, "e", 10, 0, &e, &role),
		     -EINVAL);
	cr_assert_eq(
	    cidx_acquire(x, "b", "k", 1, "e", UINT64_MAX, CS, &e, &role),
	    -EINVAL);
	cr_assert_eq(
	    cidx_acquire(x, "b", "k", 1, "e", (uint64_t)1 << 50, 1, &e, &role),
	    -EFBIG);
	cr_assert_eq(cidx_release(x, "nope"), -EINVAL);
	char name[CIDX_NAME_LEN];
	cidx_name("b", "k", 1, "e", name);
	cr_assert_eq(cidx_chunk_done(x, name, 0, 0, NULL), -ENOENT);
	cr_assert_eq(cidx_release(x, name), -ENOENT);
	cidx_close(x);
	free(dir);
}

/* ---- concurrency -------------------------------------------------------- */

struct worker {
	cidx *x;
	unsigned seed;
	int errors;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	for (int i = 0; i < 150; i++) {
		char key[16];
		snprintf(key, sizeof key, "k%u",
			 (unsigned)rand_r(&w->seed) % 12);
		cidx_entry e;
		enum cidx_role role;
		int rc = acq(w->x, key, 2 * CS, &e, &role);
		if (rc == -ENOSPC)
			continue;
		if (rc) {
			w->errors++;
			continue;
		}
		if (role == CIDX_FILLER) {
			uint32_t idx[] = {0, 1}, crc[] = {1, 2};
			if (cidx_chunks_done(w->x, e.name, idx, crc, 2, NULL))
				w->errors++;
		} else if (role == CIDX_FOLLOWER &&
			   cidx_refresh(w->x, &e, &role)) {
			w->errors++;
		}
		if (cidx_release(w->x, e.name))
			w->errors++;
		cidx_entry_free(&e);
	}
	return NULL;
}

Test(cidx, threads_share_two_indexes, .timeout = 120)
{
	char *dir = cdir();
	cidx *xs[2] = {open_lim(dir, 8 * CS, 0), open_lim(dir, 8 * CS, 0)};
	pthread_t t[8];
	struct worker w[8];
	for (int i = 0; i < 8; i++) {
		w[i] = (struct worker){xs[i % 2], (unsigned)i + 1, 0};
		cr_assert_eq(pthread_create(&t[i], NULL, work, &w[i]), 0);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		cr_assert_eq(w[i].errors, 0, "worker %d", i);
	}
	cidx_stats st, st1;
	cr_assert_eq(cidx_get_stats(xs[1], &st1), 0);
	cr_assert_eq(cidx_get_stats(xs[0], &st), 0);
	cr_assert_gt(st.evictions + st1.evictions, 0);
	cr_assert_eq(st.pinned_bytes, 0);
	cr_assert_leq(st.bytes, 8 * CS);
	cr_assert_eq(q1(dir, "SELECT COUNT(*) FROM pins"), 0);
	cr_assert_eq(q1(dir, "SELECT COUNT(*) FROM entries WHERE state = 0 "
			     "AND filler IS NOT NULL"),
		     0);
	/* every entry has its file, and no file lacks an entry */
	cr_assert_eq(q1(dir, "SELECT COUNT(*) FROM entries"),
		     (int64_t)st.entries);
	uint64_t files = 0;
	for (int k = 0; k < 12; k++) {
		char key[16], name[CIDX_NAME_LEN];
		snprintf(key, sizeof key, "k%d", k);
		cidx_name("bkt", key, strlen(key), "etag1", name);
		bool in =
		    q1(dir, "SELECT COUNT(*) FROM entries WHERE name = '%s'",
		       name) == 1;
		cr_assert_eq(file_exists(xs[0], name), in, "%s", key);
		files += in;
	}
	cr_assert_eq(files, st.entries);
	cidx_close(xs[0]);
	cidx_close(xs[1]);
	free(dir);
}
