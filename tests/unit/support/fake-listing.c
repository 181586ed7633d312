/* The fake listings (fake-listing.h). */
#include "fake-listing.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

fake_listing fake_list;

void fake_list_reset(void)
{
	memset(&fake_list, 0, sizeof fake_list);
}

void fake_dir_add(fake_dir *d, const char *name, uint64_t size,
		  time_t mtime_s)
{
	if (d->n >= FAKE_LIST_MAX)
		return;
	d->v[d->n].name = name;
	d->v[d->n].size = size;
	d->v[d->n].mtime = (struct timespec){mtime_s, 0};
	d->n++;
}

void fake_list_add(const char *name, uint64_t size, time_t mtime_s)
{
	fake_dir_add(&fake_list.any, name, size, mtime_s);
}

fake_dir *fake_list_in(const char *prefix)
{
	for (size_t i = 0; i < fake_list.ndirs; i++)
		if (!strcmp(fake_list.dirs[i].prefix, prefix))
			return &fake_list.dirs[i].d;
	if (fake_list.ndirs == sizeof fake_list.dirs / sizeof *fake_list.dirs)
		return NULL;
	size_t i = fake_list.ndirs++;
	snprintf(fake_list.dirs[i].prefix, sizeof fake_list.dirs[i].prefix,
		 "%s", prefix);
	return &fake_list.dirs[i].d;
}

/* The answer for dir_prefix. */
static const fake_dir *answer(const char *dir_prefix)
{
	for (size_t i = 0; i < fake_list.ndirs; i++)
		if (!strcmp(fake_list.dirs[i].prefix, dir_prefix))
			return &fake_list.dirs[i].d;
	return &fake_list.any;
}

int fs_listing_fetch(s3_client *s3, fs_mcache *mc, const char *dir_prefix,
		     bool hints, ns_report_fn report, void *arg, ns_dir *out,
		     vis_manifest **manifest, s3_err *e)
{
	(void)s3, (void)mc, (void)hints;
	fake_list.calls++;
	snprintf(fake_list.last_prefix, sizeof fake_list.last_prefix, "%s",
		 dir_prefix);
	*manifest = NULL;
	if (fake_list.http_status) {
		memset(e, 0, sizeof *e);
		e->http_status = fake_list.http_status;
		e->err = fake_list.http_status == 403 ? EACCES : EIO;
		snprintf(e->msg, sizeof e->msg, "LIST %s: HTTP %ld", dir_prefix,
			 fake_list.http_status);
		return -1;
	}
	const fake_dir *a = answer(dir_prefix);
	ns_dir_init(out, report, arg);
	ns_dir_finish(out);
	for (size_t i = 0; i < a->n; i++) {
		char name[256];
		snprintf(name, sizeof name, "%s", a->v[i].name);
		size_t len = strlen(name);
		bool dir = len && name[len - 1] == '/';
		if (dir)
			name[len - 1] = '\0';
		if (ns_dir_put(out, name, dir, a->v[i].size,
			       a->v[i].mtime) < 0)
			return -1;
		if (!dir) { /* a listed file has an ETag */
			char etag[300];
			snprintf(etag, sizeof etag, "\"%s-%llu-%lld\"", name,
				 (unsigned long long)a->v[i].size,
				 (long long)a->v[i].mtime.tv_sec);
			ns_entry *en = (ns_entry *)ns_dir_find(out, name);
			en->etag = strdup(etag);
		}
		struct timespec t = a->v[i].mtime;
		if (t.tv_sec > out->newest.tv_sec)
			out->newest = t;
	}
	out->vanished = a->vanished;
	if (a->manifest) {
		vis_manifest *m = calloc(1, sizeof *m);
		char *err = NULL;
		vis_manifest_init(m);
		if (vis_manifest_add_json(m, a->manifest,
					  strlen(a->manifest), &err) < 0) {
			fprintf(stderr, "fake manifest: %s\n", err ? err : "?");
			free(err);
		}
		vis_manifest_finish(m);
		*manifest = m;
	}
	return 0;
}
