/*
 * Test support: a criterion suite "vis" around one reader-side manifest
 * (vis_manifest), fresh for each test, and add() feeding it a JSON
 * document (a rejection must explain itself).  Included by unit tests
 * only, once per test program.
 */
#ifndef CKPTFS_TESTS_SUPPORT_MANIFEST_FIXTURE_H
#define CKPTFS_TESTS_SUPPORT_MANIFEST_FIXTURE_H

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "proto/manifest.h"

static vis_manifest m;

static void setup(void)
{
	vis_manifest_init(&m);
}

static void teardown(void)
{
	vis_manifest_free(&m);
}

TestSuite(vis, .init = setup, .fini = teardown);

static int add(const char *json)
{
	char *err = NULL;
	int rc = vis_manifest_add_json(&m, json, strlen(json), &err);
	if (rc < 0)
		cr_assert_not_null(err, "a rejection explains itself");
	free(err);
	return rc;
}

#endif
