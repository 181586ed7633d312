/*
 * Tests for sqlerr: every mapped SQLite result code, extended codes folded
 * into their primary one, anything else -EIO.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <sqlite3.h>

#include "util/sqlerr.h"

Test(sqlerr, success_codes_are_zero)
{
	cr_assert_eq(sqlerr_errno(SQLITE_OK), 0);
	cr_assert_eq(sqlerr_errno(SQLITE_ROW), 0);
	cr_assert_eq(sqlerr_errno(SQLITE_DONE), 0);
}

Test(sqlerr, mapped_codes)
{
	cr_assert_eq(sqlerr_errno(SQLITE_BUSY), -EBUSY);
	cr_assert_eq(sqlerr_errno(SQLITE_LOCKED), -EBUSY);
	cr_assert_eq(sqlerr_errno(SQLITE_NOMEM), -ENOMEM);
	cr_assert_eq(sqlerr_errno(SQLITE_FULL), -ENOSPC);
	cr_assert_eq(sqlerr_errno(SQLITE_READONLY), -EROFS);
	cr_assert_eq(sqlerr_errno(SQLITE_PERM), -EACCES);
	cr_assert_eq(sqlerr_errno(SQLITE_CANTOPEN), -EACCES);
}

Test(sqlerr, extended_codes_fold)
{
	cr_assert_eq(sqlerr_errno(SQLITE_BUSY_SNAPSHOT), -EBUSY);
	cr_assert_eq(sqlerr_errno(SQLITE_READONLY_DBMOVED), -EROFS);
	cr_assert_eq(sqlerr_errno(SQLITE_IOERR_WRITE), -EIO);
}

Test(sqlerr, others_are_eio)
{
	cr_assert_eq(sqlerr_errno(SQLITE_ERROR), -EIO);
	cr_assert_eq(sqlerr_errno(SQLITE_CORRUPT), -EIO);
	cr_assert_eq(sqlerr_errno(SQLITE_CONSTRAINT), -EIO);
}
