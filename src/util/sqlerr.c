/*
 * sqlerr: SQLite result code -> -errno (sqlerr.h).  A switch on the
 * primary code; extended codes (SQLITE_BUSY_SNAPSHOT, ...) fall in with
 * their primary one.
 */
#include "util/sqlerr.h"

#include <errno.h>
#include <sqlite3.h>

int sqlerr_errno(int src)
{
	switch (src & 0xff) {
	case SQLITE_OK:
	case SQLITE_ROW:
	case SQLITE_DONE:
		return 0;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_READONLY:
		return -EROFS;
	case SQLITE_PERM:
	case SQLITE_CANTOPEN:
		return -EACCES;
	default:
		return -EIO;
	}
}
