/* A commit engine for unit tests of src/fs (tests/unit/support/fake-eng.c):
 * every eng_* function the FUSE layer calls, linked in place of
 * src/commit's (a test program that links it pulls no commit object from
 * libckptfs.a).  It records the facts it is handed, one line each, so a
 * test can assert what would reach the bucket and in which order, and
 * lets a test make a call fail. */
#ifndef CKPTFS_TEST_FAKE_ENG_H
#define CKPTFS_TEST_FAKE_ENG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "commit/engine.h"

#define FAKE_ENG_MAX 64

typedef struct fake_eng {
	/* the facts, in order: "begin dir a/b mroot=-" (id in txn[]),
	 * "seal 1", "put 2 a/b/f 5", "drop 1 a/x", "dirput 1 a/b",
	 * "move 1 a/x 1 a/y", "abort 1", "delete a/x file",
	 * "rename a b dir mroot=-", "sync",
	 * "dirset 3 a/b mode=750 uid=7 gid=8 mtime=1600000000.5
	 * xattrs=user.k=v,user.l= in a" (id in txn[]: is_dir_set, root the
	 * directory, the attributes in dir_set) */
	char log[FAKE_ENG_MAX][160];
	size_t n;
	/* transactions begun and eng_dir_set steps, by id (1 ...): root,
	 * is_dir, sealed, ended (aborted, or marked done by the test),
	 * poisoned; a dir set's attributes (its xattrs copied to xattrs) */
	struct {
		char root[128];
		bool is_dir, sealed, ended, poisoned;
		bool is_dir_set;
		eng_meta dir_set;
		char xattrs[256];
	} txn[FAKE_ENG_MAX];
	uint64_t next_id;
	int seal_rc;  /* what eng_txn_seal returns (0) */
	int begin_rc; /* what eng_txn_begin returns (0) */
	int dir_set_rc; /* what eng_dir_set returns (0) */
	const char *temp_suffix; /* eng_path_has_temp: a component ending so */
	/* the held rows a killed mount left (eng_held_foreach): file paths,
	 * ids 100, 101, ... */
	const char *held[4];
} fake_eng;

/* The engine the fake functions use; reset by fake_eng_reset. */
extern fake_eng fake;
/* The pointer to give fs_ctx.eng. */
#define FAKE_ENG ((eng *)&fake)

void fake_eng_reset(void);
/* Index of the first log line equal to line, or -1. */
int fake_eng_find(const char *line);
/* Whether the log holds a line starting with prefix. */
bool fake_eng_has(const char *prefix);

#endif
