/* Directory listings for unit tests of src/fs
 * (tests/unit/support/fake-listing.c): fs_listing_fetch linked in place of
 * fs/listing.c's, answering every LIST with what the test put in
 * fake_list, so fs_dir_load's rules run without a server. */
#ifndef CKPTFS_TEST_FAKE_LISTING_H
#define CKPTFS_TEST_FAKE_LISTING_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "fs/listing.h"

#define FAKE_LIST_MAX 16

typedef struct fake_dir {
	/* the entries a LIST returns ("name" or "name/" for a directory),
	 * their sizes and LastModified */
	struct {
		const char *name;
		uint64_t size;
		struct timespec mtime;
	} v[FAKE_LIST_MAX];
	size_t n;
	bool vanished;        /* nothing under the prefix */
	const char *manifest; /* a manifest JSON the directory holds, or NULL */
} fake_dir;

typedef struct fake_listing {
	/* what LISTs of the prefixes in dirs[] return (fake_list_in) ... */
	struct {
		char prefix[128];
		fake_dir d;
	} dirs[8];
	size_t ndirs;
	/* ... and those of any other prefix */
	fake_dir any;
	long http_status;     /* nonzero: the LIST fails with this status */
	unsigned calls;       /* LISTs so far */
	char last_prefix[256];
} fake_listing;

extern fake_listing fake_list;

void fake_list_reset(void);
/* Adds an entry to the answer of LISTs of other prefixes than those of
 * fake_list_in. */
void fake_list_add(const char *name, uint64_t size, time_t mtime_s);
/* The answer of LISTs of prefix ("pre/" + a directory's path + "/"). */
fake_dir *fake_list_in(const char *prefix);
/* Adds an entry to d. */
void fake_dir_add(fake_dir *d, const char *name, uint64_t size,
		  time_t mtime_s);

#endif
