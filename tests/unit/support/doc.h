/*
 * Test support: the text of a file of the repository's doc/ (found from
 * $CKPTFS_TESTDATA, default tests/data), for the tests that check a table
 * of the code against its documentation.  Included by unit tests only.
 */
#ifndef CKPTFS_TESTS_SUPPORT_DOC_H
#define CKPTFS_TESTS_SUPPORT_DOC_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

/* doc/NAME's text (malloc'd); fails the test when it cannot be read. */
static inline char *read_doc(const char *name)
{
	const char *data = getenv("CKPTFS_TESTDATA");
	char path[4096];
	snprintf(path, sizeof path, "%s/../../doc/%s",
		 data ? data : "tests/data", name);
	FILE *f = fopen(path, "r");
	cr_assert(f, "cannot open %s", path);
	char *text = calloc(1, 1 << 20);
	size_t n = fread(text, 1, (1 << 20) - 1, f);
	fclose(f);
	text[n] = '\0';
	return text;
}

#endif
