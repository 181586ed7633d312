/*
 * Directory read-ahead: restoring a checkpoint reads a directory's files
 * one after another (torch.load of each shard, `cat` of every file, a loader
 * walking rank files), in name order, so the next files are known before
 * they are opened.  When a file of a directory is opened and the opens of
 * that directory go forward in name order (the first file, or a file after
 * the one opened before), the downloads of the files that follow it in
 * the directory's listing start at once, up to dir_readahead bytes past
 * the file opened (at least one file): the link never idles between
 * files, and many small files go out in parallel instead of paying one
 * round trip each.
 *
 * Read-ahead only opens and closes the files in the read cache (cache/
 * cache.h): downloads go on after the close, in the cache's scheduler,
 * which shares its connections (conns, conns_per_file) round-robin
 * between every file being filled, in the order they were opened, while
 * the chunks a reader waits for go first.  So read-ahead never exceeds
 * the connection budget, is checked against the manifests' block CRCs
 * like any download, and obeys the cache's room rules: room is made only
 * by evicting files no process holds open (never pinned ones), never past
 * cache_size; when the cache is full of pinned data the open fails and
 * read-ahead stops.  Its budget is capped to a quarter of cache_size (and
 * then no file over it is read ahead), so it cannot evict what it fetched
 * before it is read, nor take the room the reader's next open needs.
 */
#include "fs/readahead.h"

#include <stdlib.h>
#include <string.h>

#include "fs/ctx.h"
#include "fs/nodes.h"
#include "proto/keys.h"
#include "util/buf.h"
#include "util/log.h"

#define RA_FILES_MAX 512 /* files started per open at most */
/* Files cached whole up to this size are read from the cache's disk into
 * the page cache ahead of the reader (cache_file_willneed): the reader of
 * many small files then never waits for the disk at each open.  Larger
 * ones stream at disk speed with the kernel's own read-ahead, and reading
 * them ahead only took CPU from the reader (measured: bench/README.md) */
#define RA_WILLNEED_MAX (8ull << 20)

typedef struct ra_item {
	char *key, *etag;
	uint64_t size;
	cache_expect x;
	uint32_t *crc;
	bool check;
} ra_item;

/* Whether entry e is a file worth downloading ahead. */
static bool ra_file(const ns_entry *e)
{
	return !e->is_dir && e->size > 0 && e->etag && e->etag[0];
}

bool fs_ra_forward(const ns_dir *l, size_t at, const char *last)
{
	if (last)
		return strcmp(last, l->v[at].name) < 0;
	for (size_t i = 0; i < at; i++)
		if (ra_file(&l->v[i]))
			return false; /* not the first file */
	return true;
}

size_t fs_ra_window(const ns_dir *l, size_t at, const char *upto,
		    uint64_t budget, bool one, size_t max, size_t *idx)
{
	uint64_t ahead = 0;
	size_t n = 0;
	for (size_t i = at + 1; i < l->n && n < max; i++) {
		const ns_entry *e = &l->v[i];
		if (!ra_file(e))
			continue;
		if ((ahead || !one) && ahead + e->size > budget)
			break;
		ahead += e->size;
		if (upto && strcmp(e->name, upto) <= 0)
			continue; /* started by an earlier open */
		idx[n++] = i;
	}
	return n;
}

/* dir_readahead, at most a quarter of the cache's cap (*capped: then a
 * file larger than that is not read ahead at all: a small cache would
 * thrash). */
static uint64_t ra_budget(fs_ctx *fs, bool *capped)
{
	uint64_t b = fs->o.dir_readahead, cap = cache_cap(fs->cache);
	*capped = cap && b > cap / 4;
	return *capped ? cap / 4 : b;
}

/* The files after position at of d's listing to start, into v (*n).
 * Table locked. */
static void ra_collect(fs_ctx *fs, fs_inode *d, const ns_dir *l, size_t at,
		       ra_item *v, size_t *n)
{
	size_t idx[RA_FILES_MAX];
	bool capped;
	uint64_t budget = ra_budget(fs, &capped);
	size_t k = fs_ra_window(l, at, d->ra_upto, budget, !capped,
				RA_FILES_MAX, idx);
	buf path = BUF_INIT;
	for (size_t j = 0; j < k; j++) {
		const ns_entry *e = &l->v[idx[j]];
		buf_reset(&path);
		buf_printf(&path, "%s%s%s", d->path, d->path[0] ? "/" : "",
			   e->name);
		ra_item *it = &v[*n];
		memset(it, 0, sizeof *it);
		it->key = proto_key(fs->prefix, buf_cstr(&path));
		it->etag = strdup(e->etag);
		it->size = e->size;
		if (!it->key || !it->etag) {
			free(it->key);
			free(it->etag);
			break;
		}
		it->check = fs_manifest_blocks_at(d, buf_cstr(&path), e->etag,
						  e->size, &it->x, &it->crc);
		(*n)++;
		free(d->ra_upto);
		d->ra_upto = strdup(e->name);
	}
	buf_free(&path);
}

void fs_readahead_opened(fs_ctx *fs, fs_inode *n)
{
	if (!fs->cache || !fs->o.dir_readahead)
		return;
	ra_item *v = NULL;
	size_t nv = 0;
	fs_itable_lock(fs->it);
	fs_inode *d = n->parent;
	const ns_dir *l = d && !n->detached ? d->listing : NULL;
	const ns_entry *e = l ? ns_dir_find(l, n->name) : NULL;
	if (e) {
		size_t at = (size_t)(e - l->v);
		bool fwd = fs_ra_forward(l, at, d->ra_last);
		free(d->ra_last);
		d->ra_last = strdup(n->name);
		if (fwd && (v = calloc(RA_FILES_MAX, sizeof *v)))
			ra_collect(fs, d, l, at, v, &nv);
	}
	fs_itable_unlock(fs->it);
	size_t started = 0;
	for (size_t i = 0; i < nv; i++) {
		ra_item *it = &v[i];
		cache_file *cf;
		bool hit;
		int rc = started == i
				 ? cache_file_open_expect(fs->cache, it->key,
							  it->etag, it->size,
							  it->check ? &it->x : NULL,
							  &cf, &hit)
				 : -ECANCELED;
		if (rc == 0) {
			if (hit && it->size <= RA_WILLNEED_MAX)
				cache_file_willneed(cf); /* warm: disk */
			cache_file_close(cf); /* the download goes on */
			started++;
		} else if (rc != -ECANCELED) {
			log_debug("read-ahead of %s stopped: %s", it->key,
				  strerror(-rc));
		}
		free(it->key);
		free(it->etag);
		free(it->crc);
	}
	if (nv)
		log_debug("read-ahead: %zu of %zu files started", started, nv);
	free(v);
}
