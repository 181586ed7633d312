/* A scratch directory per test: made by the suite's init, removed with
 * everything in it by its fini. */
#ifndef CKPTFS_TEST_TMPDIR_H
#define CKPTFS_TEST_TMPDIR_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

static inline void tmpdir_make(char *dir, size_t size, const char *tag)
{
	snprintf(dir, size, "/tmp/ckptfs-%s-XXXXXX", tag);
	cr_assert_not_null(mkdtemp(dir));
}

static inline void tmpdir_remove(const char *dir)
{
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

#endif
