/*
 * ns: the rules that turn S3 keys under a directory prefix into directory
 * entries (doc/architecture.md, "Namespace": the rules and the choices
 * made where S3 leaves them open).  Part of the bucket format: what a
 * key means as a path, and which names are ckptfs' own (proto/keys.h).
 *
 * A listing of prefix P with delimiter '/' yields objects P+name and common
 * prefixes P+name+'/'.  Rules, applied in ns_dir_finish:
 *  - the marker object P itself (key == P, "dir/") is not an entry;
 *  - a name that is empty, ".", "..", longer than 255 bytes, or contains a
 *    NUL byte cannot be a path component: skipped and reported;
 *  - a name beginning with ".ckptfs" belongs to ckptfs: hidden silently
 *    (its ".ckptfs-pending/" and ".ckptfs/" prefixes are noted, for
 *    proto/visibility.h, and ".ckptfs-meta/", the metadata hints);
 *  - a name that is both an object and a common prefix is shown as the
 *    directory; the object is shadowed and reported (mountpoint-s3 does the
 *    same);
 *  - an object "name/" (marker) under P shows as directory "name".
 * Entries are sorted by name (bytewise) so lookups can bisect.
 * Reports go through a callback so the caller can log each key once.
 */
#ifndef CKPTFS_PROTO_NAMESPACE_H
#define CKPTFS_PROTO_NAMESPACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "s3/xml.h"

typedef struct ns_entry {
	char *name;
	bool is_dir;
	uint64_t size;  /* files */
	char *etag;     /* files; NULL for directories */
	struct timespec mtime; /* files: LastModified; dirs: marker's or 0 */
	/* files: D/.ckptfs-meta/<name> exists (a metadata hint, proto/keys.h):
	 * the object carries ckptfs metadata worth a HEAD (ns_dir_hint) */
	bool hinted;
} ns_entry;

typedef enum ns_reason {
	NS_SKIP_INVALID_NAME,
	NS_SKIP_SHADOWED_BY_DIR,
} ns_reason;

typedef void (*ns_report_fn)(void *arg, const char *key, size_t key_len,
			     ns_reason why);

typedef struct ns_dir {
	ns_entry *v;
	size_t n, cap;
	struct timespec newest; /* newest mtime among objects seen (incl. marker) */
	bool saw_pending; /* a ".ckptfs-pending/" prefix: markers to check */
	bool saw_meta;    /* a ".ckptfs/" prefix: manifests to read */
	bool saw_hints;   /* a ".ckptfs-meta/" prefix: metadata hints */
	size_t seen;      /* keys and prefixes on the pages, hidden ones too */
	/* the directory is gone: nothing at all under its prefix, or it was
	 * being deleted while listed (fs_listing_fetch).  A reader gets
	 * ENOENT for it, as for a removed local directory, not an empty
	 * listing. */
	bool vanished;
	ns_report_fn report;
	void *report_arg;
} ns_dir;

void ns_dir_init(ns_dir *d, ns_report_fn report, void *arg);
void ns_dir_free(ns_dir *d);
/* Feed one page of a delimiter listing of dir_prefix.  Returns -1 on ENOMEM. */
int ns_dir_add_page(ns_dir *d, const char *dir_prefix, const s3_list_result *page);
/* Sort, drop invalid and shadowed names.  Call once after the last page. */
void ns_dir_finish(ns_dir *d);
/* Bisects the finished listing.  NULL when absent. */
const ns_entry *ns_dir_find(const ns_dir *d, const char *name);

/* Puts an entry into the finished listing, in name order, replacing one
 * of that name (a file's etag may be NULL: version not known); clears
 * `vanished`.  For names a mount knows are in the bucket although the
 * listing it holds predates them (fs/write-idle.c).  -1 on ENOMEM. */
int ns_dir_put(ns_dir *d, const char *name, bool is_dir, uint64_t size,
	       struct timespec mtime);
/* Removes name from the finished listing, if there. */
void ns_dir_drop(ns_dir *d, const char *name);

/* Marks file entry name of the finished listing as hinted (its object
 * carries ckptfs metadata: doc/commit.md, "Metadata hints").  Returns
 * whether such a file entry was there (a hint of a name the listing lacks,
 * or of a directory, marks nothing). */
bool ns_dir_hint(ns_dir *d, const char *name);
/* Whether the listing saw nothing but ".ckptfs-meta/": hints left behind
 * by objects another tool deleted (the directory is gone). */
bool ns_dir_only_hints(const ns_dir *d);

/* Whether one path component is acceptable as a name (not hidden). */
bool ns_name_valid(const char *name, size_t len);
/* Whether a name is reserved for ckptfs (".ckptfs" prefix). */
bool ns_name_hidden(const char *name, size_t len);

#endif
