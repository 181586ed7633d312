/* The fake commit engine (fake-eng.h). */
#include "fake-eng.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/meta.h"

fake_eng fake;

void fake_eng_reset(void)
{
	memset(&fake, 0, sizeof fake);
	fake.next_id = 1;
	fake.temp_suffix = ".tmp";
}

static void note(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

static void note(const char *fmt, ...)
{
	if (fake.n >= FAKE_ENG_MAX)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(fake.log[fake.n++], sizeof fake.log[0], fmt, ap);
	va_end(ap);
}

int fake_eng_find(const char *line)
{
	for (size_t i = 0; i < fake.n; i++)
		if (!strcmp(fake.log[i], line))
			return (int)i;
	return -1;
}

bool fake_eng_has(const char *prefix)
{
	for (size_t i = 0; i < fake.n; i++)
		if (!strncmp(fake.log[i], prefix, strlen(prefix)))
			return true;
	return false;
}

static bool has_suffix(const char *s, size_t len, const char *suf)
{
	size_t k = strlen(suf);
	return len >= k && !strncmp(s + len - k, suf, k);
}

bool eng_is_temp_name(const eng *e, const char *path)
{
	(void)e;
	const char *s = strrchr(path, '/');
	s = s ? s + 1 : path;
	return has_suffix(s, strlen(s), fake.temp_suffix);
}

bool eng_path_has_temp(const eng *e, const char *path)
{
	(void)e;
	for (const char *c = path;;) {
		const char *end = strchr(c, '/');
		size_t len = end ? (size_t)(end - c) : strlen(c);
		if (has_suffix(c, len, fake.temp_suffix))
			return true;
		if (!end)
			return false;
		c = end + 1;
	}
}

int eng_stage_create(eng *e, uint64_t *sid)
{
	(void)e;
	char t[] = "/tmp/ckptfs-fake-stage-XXXXXX";
	int fd = mkstemp(t);
	if (fd < 0)
		return -errno;
	unlink(t);
	*sid = (uint64_t)fd + 1000;
	return fd;
}

int eng_stage_reserve(eng *e, uint64_t n)
{
	(void)e, (void)n;
	return 0;
}

void eng_stage_discard(eng *e, uint64_t sid)
{
	(void)e, (void)sid;
}

uint64_t eng_max_staged(const eng *e)
{
	(void)e;
	return 0;
}

bool eng_space_pending(eng *e)
{
	(void)e;
	return false;
}

void eng_hold_uploads(eng *e, bool writing)
{
	(void)e, (void)writing;
}

int eng_txn_begin(eng *e, const char *path, bool is_dir,
		  const char *manifest_root, uint64_t *txn)
{
	(void)e;
	if (fake.begin_rc)
		return fake.begin_rc;
	uint64_t id = fake.next_id++;
	if (id < FAKE_ENG_MAX) {
		snprintf(fake.txn[id].root, sizeof fake.txn[id].root, "%s",
			 path);
		fake.txn[id].is_dir = is_dir;
	}
	note("begin %s %s mroot=%s", is_dir ? "dir" : "file", path,
	     manifest_root ? manifest_root : "-");
	*txn = id;
	return 0;
}

static int put(const char *fact, uint64_t txn, const char *path,
	       uint64_t size)
{
	note("%s %llu %s %llu", fact, (unsigned long long)txn, path,
	     (unsigned long long)size);
	return 0;
}

int eng_file_put(eng *e, uint64_t txn, const char *path, uint64_t sid,
		 uint64_t size, const eng_meta *m)
{
	(void)e, (void)sid, (void)m;
	return put("put", txn, path, size);
}

int eng_file_put_short(eng *e, uint64_t txn, const char *path, uint64_t sid,
		       uint64_t size, const eng_meta *m)
{
	(void)e, (void)sid, (void)m;
	return put("putshort", txn, path, size);
}

int eng_file_set_meta(eng *e, uint64_t txn, const char *path,
		      const eng_meta *m)
{
	(void)e, (void)m;
	note("meta %llu %s", (unsigned long long)txn, path);
	return 0;
}

int eng_file_drop(eng *e, uint64_t txn, const char *path)
{
	(void)e;
	note("drop %llu %s", (unsigned long long)txn, path);
	return 0;
}

int eng_file_move(eng *e, uint64_t txn_from, const char *from,
		  uint64_t txn_to, const char *to, const char *manifest_root)
{
	(void)e;
	(void)manifest_root;
	note("move %llu %s %llu %s", (unsigned long long)txn_from, from,
	     (unsigned long long)txn_to, to);
	return 0;
}

int eng_dir_put(eng *e, uint64_t txn, const char *path, const eng_meta *m)
{
	(void)e;
	note("dirput %llu %s %o", (unsigned long long)txn, path,
	     (unsigned)m->mode);
	return 0;
}

int eng_txn_seal(eng *e, uint64_t txn)
{
	(void)e;
	if (fake.seal_rc)
		return fake.seal_rc;
	if (txn < FAKE_ENG_MAX)
		fake.txn[txn].sealed = true;
	note("seal %llu", (unsigned long long)txn);
	return 0;
}

int eng_file_poison(eng *e, uint64_t txn, const char *path, int err)
{
	(void)e;
	if (txn < FAKE_ENG_MAX)
		fake.txn[txn].poisoned = true;
	note("poison %llu %s %d", (unsigned long long)txn, path, err);
	return 0;
}

bool eng_txn_poisoned(eng *e, uint64_t txn)
{
	(void)e;
	return txn < FAKE_ENG_MAX && fake.txn[txn].poisoned;
}

int eng_txn_abort(eng *e, uint64_t txn)
{
	(void)e;
	if (txn < FAKE_ENG_MAX)
		fake.txn[txn].ended = true;
	note("abort %llu", (unsigned long long)txn);
	return 0;
}

int eng_remote_delete(eng *e, const char *path, bool is_dir)
{
	(void)e;
	note("delete %s %s", path, is_dir ? "dir" : "file");
	return 0;
}

int eng_remote_delete_keep(eng *e, const char *path, bool is_dir,
			   const char *keep)
{
	(void)e;
	note("delete %s %s keep=%s", path, is_dir ? "dir" : "file",
	     keep ? keep : "-");
	return 0;
}

int eng_hold_delete(eng *e, const char *path, bool is_dir, const char *keep,
		    const uint64_t *replaced, size_t n, uint64_t *id)
{
	(void)e;
	*id = fake.next_id++;
	note("hold %llu %s %s keep=%s", (unsigned long long)*id, path,
	     is_dir ? "dir" : "file", keep ? keep : "-");
	for (size_t i = 0; i < n; i++)
		note("unhold %llu", (unsigned long long)replaced[i]);
	return 0;
}

int eng_held_foreach(eng *e,
		     void (*fn)(void *arg, uint64_t id, const char *path,
				bool is_dir, const char *keep),
		     void *arg)
{
	(void)e;
	for (size_t i = 0; i < 4 && fake.held[i]; i++)
		fn(arg, 100 + i, fake.held[i], false, NULL);
	return 0;
}

int eng_release_delete(eng *e, uint64_t id, const char *path, bool is_dir,
		       const char *keep)
{
	note("release %llu", (unsigned long long)id);
	return keep ? eng_remote_delete_keep(e, path, is_dir, keep)
		    : eng_remote_delete(e, path, is_dir);
}

int eng_remote_rename(eng *e, const char *from, const char *to, bool is_dir,
		      const char *manifest_root)
{
	(void)e;
	note("rename %s %s %s mroot=%s", from, to, is_dir ? "dir" : "file",
	     manifest_root ? manifest_root : "-");
	return 0;
}

int eng_remote_rename_in(eng *e, const char *from, const char *to,
			 bool is_dir, const char *manifest_root,
			 const eng_dir_attrs *parents, size_t n)
{
	int rc = eng_remote_rename(e, from, to, is_dir, manifest_root);
	for (size_t i = 0; i < n; i++)
		note("rename records %s mode=%o", parents[i].path,
		     (unsigned)parents[i].m.mode);
	return rc;
}

int eng_dir_set(eng *e, const char *path, const eng_meta *m,
		const char *record_root, uint64_t *id)
{
	(void)e;
	if (fake.dir_set_rc)
		return fake.dir_set_rc;
	*id = fake.next_id++;
	if (*id < FAKE_ENG_MAX) {
		snprintf(fake.txn[*id].root, sizeof fake.txn[*id].root, "%s",
			 path);
		fake.txn[*id].is_dir_set = true;
		fake.txn[*id].dir_set = *m;
		size_t len = m->xattrs_len < sizeof fake.txn[0].xattrs
				 ? m->xattrs_len
				 : 0;
		if (len)
			memcpy(fake.txn[*id].xattrs, m->xattrs, len);
		fake.txn[*id].dir_set.xattrs = fake.txn[*id].xattrs;
		fake.txn[*id].dir_set.xattrs_len = len;
	}
	/* the blob's records as name=value,... */
	char xa[96] = "";
	size_t pos = 0, used = 0;
	const char *name, *val;
	uint32_t vlen;
	while (m->xattrs && used < sizeof xa &&
	       proto_xattr_next(m->xattrs, m->xattrs_len, &pos, &name, &val,
				&vlen))
		used += (size_t)snprintf(xa + used, sizeof xa - used,
					 "%s%s=%.*s", used ? "," : "", name,
					 (int)vlen, val);
	note("dirset %llu %s mode=%o uid=%u gid=%u mtime=%lld.%09ld "
	     "xattrs=%s in %s",
	     (unsigned long long)*id, path, (unsigned)m->mode,
	     (unsigned)m->uid, (unsigned)m->gid, (long long)m->mtime.tv_sec,
	     m->mtime.tv_nsec, xa, record_root);
	return 0;
}

int eng_wait_file(eng *e, const char *path)
{
	(void)e, (void)path;
	return 0;
}

int eng_wait_txn(eng *e, uint64_t txn)
{
	(void)e, (void)txn;
	return 0;
}

bool eng_txn_pending(eng *e, uint64_t txn)
{
	(void)e;
	return txn < FAKE_ENG_MAX && !fake.txn[txn].ended;
}

int eng_sync(eng *e, void (*progress)(void *arg, uint64_t done,
				      uint64_t total),
	     void *arg)
{
	(void)e, (void)progress, (void)arg;
	note("sync");
	return 0;
}

int eng_status(eng *e, eng_txn_status **v, size_t *n)
{
	(void)e;
	*v = NULL;
	*n = 0;
	return 0;
}

void eng_status_free(eng_txn_status *v, size_t n)
{
	(void)n;
	free(v);
}

/* the transactions begun and not ended, in order */
void eng_foreach_pending_txn(eng *e, eng_pending_txn_fn txn_fn,
			     eng_pending_dir_fn dir_fn, void *arg)
{
	(void)e, (void)dir_fn;
	for (uint64_t id = 1; id < fake.next_id && id < FAKE_ENG_MAX; id++)
		if (!fake.txn[id].ended && !fake.txn[id].is_dir_set && txn_fn)
			txn_fn(arg, id, fake.txn[id].root, fake.txn[id].is_dir,
			       fake.txn[id].sealed);
}

void eng_foreach_pending_removal(eng *e,
				 void (*fn)(void *arg, uint64_t id,
					    const char *path, bool is_dir),
				 void *arg)
{
	(void)e, (void)fn, (void)arg;
}

/* the eng_dir_set steps not ended, in order */
void eng_foreach_pending_dir_set(eng *e, eng_pending_dir_fn fn, void *arg)
{
	(void)e;
	for (uint64_t id = 1; id < fake.next_id && id < FAKE_ENG_MAX; id++)
		if (!fake.txn[id].ended && fake.txn[id].is_dir_set)
			fn(arg, id, fake.txn[id].root, &fake.txn[id].dir_set);
}

void eng_foreach_pending_file(eng *e,
			      void (*fn)(void *arg, uint64_t txn,
					 const char *path,
					 const char *staging_path,
					 uint64_t size, const eng_meta *m),
			      void *arg)
{
	(void)e, (void)fn, (void)arg;
}
