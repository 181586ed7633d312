/*
 * proto/visibility: marker parsing and liveness, and the listing filters
 * (visibility.h).  Pure functions; fs/listing.c lists the bucket, fetches
 * the manifests and applies the results.
 */
#include "proto/visibility.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "proto/keys.h"
#include "util/buf.h"
#include "util/vec.h"

int vis_parse_marker(const char *rel, char **child, unsigned *lease)
{
	const char *slash = strchr(rel, '/');
	if (!slash || slash == rel)
		return -1;
	const char *writer = slash + 1;
	const char *at = strrchr(writer, '@');
	if (!at || at == writer || strchr(writer, '/'))
		return -1;
	char *end;
	unsigned long l = strtoul(at + 1, &end, 10);
	if (!at[1] || *end || l == 0 || l > 86400)
		return -1;
	*child = strndup(rel, (size_t)(slash - rel));
	*lease = (unsigned)l;
	return *child ? 0 : -1;
}

bool vis_marker_is_gone(const char *rel)
{
	const char *slash = strchr(rel, '/');
	const char *at = slash ? strrchr(slash, '@') : NULL;
	size_t sl = strlen(PROTO_GONE_SUFFIX);
	return at && at - slash - 1 > (ptrdiff_t)sl &&
	       !strncmp(at - sl, PROTO_GONE_SUFFIX, sl);
}

bool vis_marker_live(time_t last_modified, unsigned lease, time_t now)
{
	return last_modified + (time_t)lease > now;
}

static void remove_at(ns_dir *d, size_t i)
{
	free(d->v[i].name);
	free(d->v[i].etag);
	memmove(&d->v[i], &d->v[i + 1], (d->n - i - 1) * sizeof *d->v);
	d->n--;
}

void vis_filter_listing(ns_dir *d, const vis_manifest *m, const char *rel)
{
	if (!m)
		return;
	buf p = BUF_INIT;
	for (size_t i = 0; i < d->n;) {
		buf_reset(&p);
		if (rel[0])
			buf_printf(&p, "%s/", rel);
		buf_puts(&p, d->v[i].name);
		bool keep = d->v[i].is_dir ? vis_manifest_has_dir(m, p.data)
					   : vis_manifest_find(m, p.data) != NULL;
		if (keep)
			i++;
		else
			remove_at(d, i);
	}
	buf_free(&p);
}

void vis_hide_names(ns_dir *d, char *const *hidden, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		for (size_t i = 0; i < d->n; i++) {
			if (!strcmp(d->v[i].name, hidden[k])) {
				remove_at(d, i);
				break;
			}
		}
	}
}

void vis_keep_listed(ns_dir *d, const ns_dir *again)
{
	for (size_t i = 0; i < d->n;) {
		if (ns_dir_find(again, d->v[i].name))
			i++;
		else
			remove_at(d, i);
	}
}

char *vis_own_markers_prefix(const char *dir_prefix)
{
	size_t n = strlen(dir_prefix);
	if (n < 2 || dir_prefix[n - 1] != '/')
		return NULL;
	size_t start = n - 1; /* the name: dir_prefix[start, n - 1) */
	while (start > 0 && dir_prefix[start - 1] != '/')
		start--;
	buf b = BUF_INIT;
	buf_printf(&b, "%.*s" PROTO_PENDING_DIR "/%.*s/", (int)start, dir_prefix,
		   (int)(n - 1 - start), dir_prefix + start);
	return buf_steal(&b);
}

void vis_hide_all(ns_dir *d)
{
	while (d->n)
		remove_at(d, d->n - 1);
}

/* Counts the top-level names the files of m need (each once) and how many
 * of them d lacks; stops at the first missing one when first_miss. */
static void count_needed(const ns_dir *d, const vis_manifest *m,
			 bool first_miss, size_t *names, size_t *missing)
{
	char *name = NULL;
	size_t cap = 0;
	const char *prev = NULL;
	size_t prev_len = 0;
	*names = *missing = 0;
	for (size_t i = 0; i < m->n && !(first_miss && *missing); i++) {
		const char *p = m->files[i].path;
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		/* sorted: the files of one subdirectory come together */
		if (prev && len == prev_len && !strncmp(p, prev, len))
			continue;
		prev = p;
		prev_len = len;
		char *nn = vec_reserve(name, &cap, 1, len + 1, 64);
		if (!nn)
			break;
		name = nn;
		memcpy(name, p, len);
		name[len] = 0;
		(*names)++;
		if (!ns_dir_find(d, name))
			(*missing)++;
	}
	free(name);
}

bool vis_listing_misses(const ns_dir *d, const vis_manifest *m)
{
	size_t names, missing;
	count_needed(d, m, true, &names, &missing);
	return missing > 0;
}

