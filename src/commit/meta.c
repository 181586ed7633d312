/*
 * The engine's public attribute type (eng_meta, commit/engine.h) and the
 * format's (proto_meta, proto/meta.h): the engine takes eng_meta from the
 * FUSE layer and keeps proto_meta in its state and journal, and hands
 * eng_meta back when it reports pending state (eng_foreach_pending_*).
 * Declared in commit/internal.h.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "commit/internal.h"

void eng_meta_from(proto_meta *d, const eng_meta *m)
{
	memset(d, 0, sizeof *d);
	if (!m) {
		d->mode = 0644;
		return;
	}
	d->mode = m->mode & (S_IFMT | 07777);
	if (proto_mode_type(d->mode) == S_IFREG)
		d->mode &= 07777; /* a regular file records no type */
	d->rdev = m->rdev;
	d->uid = m->uid;
	d->gid = m->gid;
	d->mtime_ns = proto_time_ns(&m->mtime);
	if (m->xattrs && m->xattrs_len) {
		d->xattrs = malloc(m->xattrs_len);
		if (d->xattrs) {
			memcpy(d->xattrs, m->xattrs, m->xattrs_len);
			d->xattrs_len = m->xattrs_len;
		}
	}
	d->symlink = m->symlink ? strdup(m->symlink) : NULL;
}

void eng_meta_to(const proto_meta *s, eng_meta *m)
{
	memset(m, 0, sizeof *m);
	m->mode = s->mode;
	m->uid = s->uid;
	m->gid = s->gid;
	proto_ns_time(s->mtime_ns, &m->mtime);
	m->rdev = s->rdev;
	m->xattrs = s->xattrs;
	m->xattrs_len = s->xattrs_len;
	m->symlink = s->symlink;
}

void eng_meta_copy(proto_meta *d, const proto_meta *s)
{
	eng_meta em;
	eng_meta_to(s, &em);
	eng_meta_from(d, &em);
}
