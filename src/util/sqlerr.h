/*
 * sqlerr: the one mapping of SQLite result codes to negative errno values,
 * used by the read cache's index (cache/index-db.c) and the commit journal
 * (commit/journal.c).
 */
#ifndef CKPTFS_UTIL_SQLERR_H
#define CKPTFS_UTIL_SQLERR_H

/*
 * src, a SQLite result code (primary or extended; only the primary part
 * counts), as a negative errno: 0 for SQLITE_OK, SQLITE_ROW and
 * SQLITE_DONE; -EBUSY for BUSY and LOCKED; -ENOMEM for NOMEM; -ENOSPC for
 * FULL; -EROFS for READONLY; -EACCES for PERM and CANTOPEN; -EIO for
 * anything else.
 */
int sqlerr_errno(int src);

#endif
