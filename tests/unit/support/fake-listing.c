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

void fake_list_add(const char *name, uint64_t size, time_t mtime_s)
{
	if (fake_list.n >= FAKE_LIST_MAX)
		return;
	fake_list.v[fake_list.n].name = name;
	fake_list.v[fake_list.n].size = size;
	fake_list.v[fake_list.n].mtime = (struct timespec){mtime_s, 0};
	fake_list.n++;
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
	ns_dir_init(out, report, arg);
	ns_dir_finish(out);
	for (size_t i = 0; i < fake_list.n; i++) {
		char name[256];
		snprintf(name, sizeof name, "%s", fake_list.v[i].name);
		size_t len = strlen(name);
		bool dir = len && name[len - 1] == '/';
		if (dir)
			name[len - 1] = '\0';
		if (ns_dir_put(out, name, dir, fake_list.v[i].size,
			       fake_list.v[i].mtime) < 0)
			return -1;
		if (!dir) { /* a listed file has an ETag */
			char etag[300];
			snprintf(etag, sizeof etag, "\"%s-%llu-%lld\"", name,
				 (unsigned long long)fake_list.v[i].size,
				 (long long)fake_list.v[i].mtime.tv_sec);
			ns_entry *en = (ns_entry *)ns_dir_find(out, name);
			en->etag = strdup(etag);
		}
		struct timespec t = fake_list.v[i].mtime;
		if (t.tv_sec > out->newest.tv_sec)
			out->newest = t;
	}
	out->vanished = fake_list.vanished;
	if (fake_list.manifest) {
		vis_manifest *m = calloc(1, sizeof *m);
		char *err = NULL;
		vis_manifest_init(m);
		if (vis_manifest_add_json(m, fake_list.manifest,
					  strlen(fake_list.manifest), &err) < 0) {
			fprintf(stderr, "fake manifest: %s\n", err ? err : "?");
			free(err);
		}
		vis_manifest_finish(m);
		*manifest = m;
	}
	return 0;
}
