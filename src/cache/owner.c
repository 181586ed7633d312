/*
 * cidx owners: the processes sharing a cache directory (design:
 * doc/cache.md).  Each cidx is one owner, named by a random id of
 * CIDX_OWNER_HEX hex digits.  This file makes the id and its lock file,
 * tells live owners from dead ones, and cleans up after the dead: their
 * pins go, their unfinished fills become orphans (filler NULL, so another
 * process takes them over), their lock files are unlinked, and doomed
 * entries no live owner pins any more are removed.  Entries, chunks and
 * eviction are in index.c, which reaps here before any eviction decision
 * so that every pin left is live; this file calls only the plumbing of
 * index-db.c, never index.c.  Its functions are declared in owner.h.
 *
 * Liveness.  Each cidx holds flock(LOCK_EX) on owners/<id>.lock for its
 * lifetime.  The file is created as <id>.new, locked, and then renamed, so
 * a .lock file is locked from the moment it appears until its owner dies:
 * a reaper never mistakes a starting process for a dead one.  An unlocked
 * .new belongs to a process that crashed while starting, or one that has
 * not locked it yet; reapers unlink it, and the starter, whose rename then
 * fails with ENOENT, retries under a new id.  Doubtful cases (a lock file
 * we cannot open or flock for another reason) count as alive: wrongly
 * treating an owner as dead could evict a file under a reader; wrongly
 * treating it as alive only delays eviction.
 *
 * Invariants.  Reaping, sweeping and deregistering change rows and files
 * only inside a write transaction (BEGIN IMMEDIATE), like every other
 * change to the index, and under x->mu except in open and close, when no
 * other thread can see the cidx.  Lock file paths are built only from
 * ids that are exactly hex, whatever the database holds; an id that is
 * not is dead by definition.  The liveness of an owner rests on flock
 * alone, never on pids (which are stored for humans).  Open sweeps cache
 * files without an entry (left by a process killed between creating a
 * file and committing its row).
 */
#include "cache/owner.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/index-db.h"
#include "cache/index-state.h"
#include "util/buf.h"
#include "util/hex.h"
#include "util/log.h"

/* ---- owners and liveness --------------------------------------------- */

/* Whether some process holds a flock on path.  Doubt counts as held. */
static bool lock_held(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno != ENOENT;
	int r;
	while ((r = flock(fd, LOCK_SH | LOCK_NB)) < 0 && errno == EINTR)
		;
	if (r == 0)
		flock(fd, LOCK_UN);
	close(fd);
	return r < 0;
}

bool cidx_owner_alive(const cidx *x, const char *owner)
{
	if (!strcmp(owner, x->owner))
		return true;
	if (!cidx_is_hex(owner, CIDX_OWNER_HEX))
		return false; /* not an id we make: no process can hold it */
	char *p = cidx_pathf("%s/owners/%s.lock", x->dir, owner);
	bool alive = !p || lock_held(p);
	free(p);
	return alive;
}

static int new_owner_id(char id[CIDX_OWNER_HEX + 1])
{
	unsigned char r[CIDX_OWNER_HEX / 2];
	size_t got = 0;
	while (got < sizeof r) {
		ssize_t n = getrandom(r + got, sizeof r - got, 0);
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n > 0)
			got += (size_t)n;
	}
	hex_encode(r, sizeof r, id);
	return 0;
}

/* One attempt at owners/<id>.lock: create <id>.new, lock it, rename it.
 * -ENOENT means a reaper removed the .new before the rename: try again. */
static int owner_lock_try(cidx *x, const char *fresh, const char *lock)
{
	int fd = open(fresh, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
		      0600);
	if (fd < 0)
		return errno == EEXIST ? -ENOENT : -errno;
	int rc = fchmod(fd, 0600) < 0 ? -errno : 0;
	while (!rc && flock(fd, LOCK_EX) < 0)
		if (errno != EINTR)
			rc = -errno;
	if (!rc)
		dprintf(fd, "%ld\n", (long)getpid()); /* for humans */
	if (!rc && rename(fresh, lock) < 0)
		rc = -errno;
	if (rc) {
		if (rc != -ENOENT)
			unlink(fresh);
		close(fd);
		return rc;
	}
	x->lock_fd = fd;
	return 0;
}

int cidx_owner_lock(cidx *x, char **err)
{
	int rc = -ENOENT;
	for (int tries = 0; rc == -ENOENT && tries < 16; tries++) {
		rc = new_owner_id(x->owner);
		if (rc)
			break;
		char *fresh = cidx_pathf("%s/owners/%s.new", x->dir, x->owner);
		char *lock = cidx_pathf("%s/owners/%s.lock", x->dir, x->owner);
		rc = fresh && lock ? owner_lock_try(x, fresh, lock) : -ENOMEM;
		free(fresh);
		free(lock);
	}
	if (rc)
		buf_set_err(err, "%s/owners: cannot create a lock file: %s",
			     x->dir, strerror(-rc));
	return rc;
}

/* Forgets a dead owner: pins, fills (now orphaned), row, lock file. */
static int forget_owner(cidx *x, const char *id)
{
	int rc = cidx_run(x, S_OWNER_PINS_DEL, id, NULL);
	if (!rc)
		rc = cidx_run(x, S_OWNER_FILLS_DROP, id, NULL);
	if (!rc)
		rc = cidx_run(x, S_OWNER_DEL, id, NULL);
	if (!rc && cidx_is_hex(id, CIDX_OWNER_HEX)) {
		char *p = cidx_pathf("%s/owners/%s.lock", x->dir, id);
		if (p && unlink(p) < 0 && errno != ENOENT)
			log_warn("cache: unlink %s: %s", p, strerror(errno));
		free(p);
	}
	return rc;
}

/* 1 for "<32 hex>.lock" (id copied out), 2 for "<32 hex>.new", else 0. */
static int lock_name_kind(const char *n, char id[CIDX_OWNER_HEX + 1])
{
	size_t len = strlen(n);
	if (len < CIDX_OWNER_HEX)
		return 0;
	memcpy(id, n, CIDX_OWNER_HEX);
	id[CIDX_OWNER_HEX] = '\0';
	if (!cidx_is_hex(id, CIDX_OWNER_HEX))
		return 0;
	if (!strcmp(n + CIDX_OWNER_HEX, ".lock"))
		return 1;
	return !strcmp(n + CIDX_OWNER_HEX, ".new") ? 2 : 0;
}

/* Adds the ids of lock files without rows to ids; unlinks abandoned .new
 * files (see the top of the file for why that is safe). */
static int scan_lock_files(cidx *x, cidx_strs *ids)
{
	char *d = cidx_pathf("%s/owners", x->dir);
	DIR *dp = d ? opendir(d) : NULL;
	int rc = !d ? -ENOMEM : !dp && errno != ENOENT ? -errno : 0;
	struct dirent *de;
	char id[CIDX_OWNER_HEX + 1];
	while (dp && !rc && (de = readdir(dp))) {
		int kind = lock_name_kind(de->d_name, id);
		if (kind == 1 && !cidx_strs_has(ids, id))
			rc = cidx_strs_push(ids, id);
		if (kind != 2)
			continue;
		char *p = cidx_pathf("%s/%s", d, de->d_name);
		if (p && !lock_held(p))
			unlink(p);
		free(p);
	}
	if (dp)
		closedir(dp);
	free(d);
	return rc;
}

static int drop_doomed(cidx *x)
{
	cidx_strs names = {0};
	int rc = cidx_query_strs(x, S_DOOMED_FREE, NULL, &names);
	for (size_t i = 0; !rc && i < names.n; i++)
		rc = cidx_drop_entry(x, names.v[i]);
	cidx_strs_free(&names);
	return rc;
}

/* Write lock held. */
int cidx_reap_locked(cidx *x)
{
	CIDX_ASSERT_WRITING(x);
	cidx_strs ids = {0};
	int rc = cidx_query_strs(x, S_OWNERS_ALL, NULL, &ids);
	if (!rc)
		rc = scan_lock_files(x, &ids);
	for (size_t i = 0; !rc && i < ids.n; i++) {
		if (cidx_owner_alive(x, ids.v[i]))
			continue;
		log_info("cache: reaping dead owner %s", ids.v[i]);
		rc = forget_owner(x, ids.v[i]);
	}
	if (!rc)
		rc = drop_doomed(x);
	cidx_strs_free(&ids);
	return rc;
}

/* Unlinks the cache files in objects/sub that have no entry. */
static int sweep_dir(cidx *x, const char *objs, const char *sub)
{
	char *d = cidx_pathf("%s/%s", objs, sub);
	DIR *dp = d ? opendir(d) : NULL;
	int rc = !d ? -ENOMEM : 0;
	struct dirent *de;
	while (dp && !rc && (de = readdir(dp))) {
		cidx_row r;
		bool found = true;
		if (!cidx_is_hex(de->d_name, CIDX_NAME_LEN - 1) ||
		    strncmp(de->d_name, sub, 2))
			continue; /* not a name of ours */
		rc = cidx_row_get(x, de->d_name, &r, &found);
		if (!rc && !found) {
			log_info("cache: removing orphaned file %s",
				 de->d_name);
			cidx_file_unlink(x, de->d_name);
		}
	}
	if (dp)
		closedir(dp);
	free(d);
	return rc;
}

/*
 * Files without an entry are left by a process killed between creating a
 * file and committing its row (or by a failed COMMIT).  They would escape
 * the cap, so open removes them; it holds the write lock, under which
 * files and rows are only ever changed together.
 */
static int sweep_orphans(cidx *x)
{
	char *objs = cidx_pathf("%s/objects", x->dir);
	DIR *dp = objs ? opendir(objs) : NULL;
	int rc = !objs ? -ENOMEM : !dp ? -errno : 0;
	struct dirent *de;
	while (dp && !rc && (de = readdir(dp)))
		if (cidx_is_hex(de->d_name, 2))
			rc = sweep_dir(x, objs, de->d_name);
	if (dp)
		closedir(dp);
	free(objs);
	return rc;
}

/* ---- registering, reaping, deregistering ---------------------------- */

/* Records this owner, reaps the dead ones and sweeps orphaned files, in
 * one transaction. */
int cidx_register_owner(cidx *x, char **err)
{
	int rc = cidx_enter(x, true); /* alone at open, but the rule is one */
	if (!rc) {
		sqlite3_stmt *s = x->st[S_OWNER_INS];
		cidx_bind_str(s, 1, x->owner);
		sqlite3_bind_int64(s, 2, getpid());
		sqlite3_bind_int64(s, 3, cidx_now_ns() / 1000000000);
		rc = cidx_finish(x, s, sqlite3_step(s));
		if (!rc)
			rc = cidx_reap_locked(x);
		if (!rc)
			rc = sweep_orphans(x);
		rc = cidx_leave(x, rc, !rc);
	}
	if (rc)
		buf_set_err(err, "%s/index.db: %s", x->dir, strerror(-rc));
	return rc;
}

int cidx_reap(cidx *x)
{
	int rc = cidx_enter(x, true);
	if (rc)
		return rc;
	rc = cidx_reap_locked(x);
	return cidx_leave(x, rc, !rc);
}

/* An orderly exit is a death without the wait: our pins go, our fills
 * become orphans, and doomed entries only we pinned are removed. */
void cidx_deregister(cidx *x)
{
	if (cidx_enter(x, true)) /* alone at close, but the rule is one */
		return;
	int rc = forget_owner(x, x->owner);
	if (!rc)
		rc = drop_doomed(x);
	cidx_leave(x, rc, !rc);
}
