/*
 * eng hints: the metadata hints of the objects the steps write outside
 * manifests (doc/commit.md, "Metadata hints"): D/.ckptfs-meta/NAME, a
 * zero-byte object telling readers that D/NAME carries ckptfs metadata, so
 * they HEAD only such objects.  PUT before the object becomes visible,
 * DELETEd after it goes; both idempotent, so a step re-run after a crash
 * simply does them again.
 *
 * The hints this engine PUT are remembered for HINT_TTL seconds (a table
 * of key hashes, e.hints, under mu), so a file rewritten again and again
 * (`latest`) costs the PUT once; the engine's own directory deletes and
 * renames forget them all.  Called with mu not held.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commit/internal.h"

#define HINT_TTL 300.0 /* seconds a PUT hint is trusted to be there */

static uint64_t key_hash(const char *k)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (; *k; k++)
		h = (h ^ (unsigned char)*k) * 1099511628211ull;
	return h ? h : 1;
}

static struct eng_hint *slot(eng *e, uint64_t h)
{
	return &e->hints[h % ENG_HINTS];
}

bool eng_hint_known(eng *e, const char *key, double now)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	uint64_t h = key_hash(key);
	const struct eng_hint *s = slot(e, h);
	return s->h == h && now - s->at < HINT_TTL && now >= s->at;
}

void eng_hint_note(eng *e, const char *key, double now)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	uint64_t h = key_hash(key);
	struct eng_hint *s = slot(e, h);
	s->h = h;
	s->at = now;
}

void eng_hint_unnote(eng *e, const char *key)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	uint64_t h = key_hash(key);
	struct eng_hint *s = slot(e, h);
	if (s->h == h)
		s->h = 0;
}

int eng_hint_put(eng *e, const char *path, s3_err *x)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	char *key = proto_hint_key(e->prefix, path);
	if (!key) {
		memset(x, 0, sizeof *x);
		x->err = ENOMEM;
		x->http_status = 500; /* retry */
		snprintf(x->msg, sizeof x->msg, "hint of %s: out of memory",
			 path);
		return -1;
	}
	ckpt_lock(&e->mu);
	bool known = eng_hint_known(e, key, eng_now());
	ckpt_unlock(&e->mu);
	int rc = 0;
	if (!known) {
		s3_put_opts po = {0};
		http_upload b = http_upload_mem("", 0);
		rc = s3_put_object(e->s3, key, &b, &po, NULL, x);
	}
	if (rc == 0 && !known) {
		ckpt_lock(&e->mu);
		eng_hint_note(e, key, eng_now());
		ckpt_unlock(&e->mu);
	}
	free(key);
	return rc;
}

int eng_hint_delete(eng *e, const char *path, s3_err *x)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	char *key = proto_hint_key(e->prefix, path);
	if (!key)
		return 0; /* a stale hint costs a reader one HEAD at most */
	ckpt_lock(&e->mu);
	eng_hint_unnote(e, key);
	ckpt_unlock(&e->mu);
	int rc = s3_delete_object(e->s3, key, x);
	free(key);
	return rc;
}

void eng_hints_forget(eng *e)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	ckpt_lock(&e->mu);
	memset(e->hints, 0, sizeof e->hints);
	ckpt_unlock(&e->mu);
}
