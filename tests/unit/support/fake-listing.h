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

typedef struct fake_listing {
	/* the entries the next LIST returns ("name" or "name/" for a
	 * directory), their sizes and LastModified */
	struct {
		const char *name;
		uint64_t size;
		struct timespec mtime;
	} v[FAKE_LIST_MAX];
	size_t n;
	bool vanished;        /* nothing under the prefix */
	const char *manifest; /* a manifest JSON the directory holds, or NULL */
	long http_status;     /* nonzero: the LIST fails with this status */
	unsigned calls;       /* LISTs so far */
	char last_prefix[256];
} fake_listing;

extern fake_listing fake_list;

void fake_list_reset(void);
/* Adds an entry to the next LISTs' answer. */
void fake_list_add(const char *name, uint64_t size, time_t mtime_s);

#endif
