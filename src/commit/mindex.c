/*
 * The manifest index writer (proto/mindex.h, doc/scale.md): after a
 * directory transaction's commit point, the writer that finds no other
 * writer's marker of the directory live reads its manifests once and PUTs
 * their bodies as one index, so each reader's first look costs one GET
 * instead of one per host.  Best effort: any failure is logged at debug
 * level and leaves readers GETting the manifests as before.  Runs on its
 * own thread (eng_index_main), fed by the visibility thread after a
 * directory's commit point, so its H GETs never hold back the next step;
 * calls s3 only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commit/internal.h"
#include "proto/mindex.h"
#include "proto/visibility.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/vec.h"

#define INDEX_MAX (64u << 20)

typedef struct live_ctx {
	size_t base;  /* where "C/W@lease" starts in a key */
	bool live;
} live_ctx;

static int page_live(void *arg, const char *prefix, const s3_list_result *p)
{
	live_ctx *c = arg;
	(void)prefix;
	time_t now = p->server_time ? p->server_time : time(NULL);
	for (size_t i = 0; i < p->n_objects && !c->live; i++) {
		const s3_object *o = &p->objects[i];
		char *child;
		unsigned lease;
		if (o->key_len <= c->base ||
		    vis_parse_marker(o->key + c->base, &child, &lease) < 0)
			continue;
		free(child);
		c->live = vis_marker_live(o->mtime.tv_sec, lease, now);
	}
	return c->live ? 1 : 0;
}

typedef struct mlist {
	char **key, **etag;
	size_t *size;
	size_t n, cap;
	bool indexed; /* an index is there already */
	char *first_claim; /* the claim name that sorts first */
} mlist;

static int page_manifests(void *arg, const char *prefix,
			  const s3_list_result *p)
{
	mlist *l = arg;
	size_t plen = strlen(prefix);
	for (size_t i = 0; i < p->n_objects; i++) {
		const s3_object *o = &p->objects[i];
		if (o->key_len <= plen || o->key_len != strlen(o->key))
			continue;
		const char *name = o->key + plen;
		if (proto_is_index_name(name))
			l->indexed = true;
		if (proto_is_claim_name(name) &&
		    (!l->first_claim || strcmp(name, l->first_claim) < 0)) {
			free(l->first_claim);
			l->first_claim = strdup(name);
		}
		if (!proto_is_manifest_name(name) || !o->etag)
			continue;
		if (l->n == l->cap) {
			/* three arrays, one cap: it advances once all grew */
			size_t ck = l->cap, ce = l->cap, cs = l->cap;
			char **k = vec_grow(l->key, &ck, sizeof *k, 16);
			if (k)
				l->key = k;
			char **e = vec_grow(l->etag, &ce, sizeof *e, 16);
			if (e)
				l->etag = e;
			size_t *s = vec_grow(l->size, &cs, sizeof *s, 16);
			if (s)
				l->size = s;
			if (!k || !e || !s)
				return -1;
			l->cap = ck;
		}
		l->key[l->n] = strdup(o->key);
		l->etag[l->n] = strdup(o->etag);
		l->size[l->n] = (size_t)o->size;
		if (!l->key[l->n] || !l->etag[l->n]) {
			free(l->key[l->n]);
			free(l->etag[l->n]);
			return -1;
		}
		l->n++;
	}
	return 0;
}

static void mlist_free(mlist *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->key[i]);
		free(l->etag[i]);
	}
	free(l->key);
	free(l->etag);
	free(l->size);
	free(l->first_claim);
}

/* Whether a marker of root other than this writer's is live. */
static int others_live(eng *e, const char *root, bool *live, s3_err *x)
{
	buf d = BUF_INIT;
	buf_printf(&d, "%s%s/", e->prefix, root);
	char *mp = vis_own_markers_prefix(buf_cstr(&d));
	buf_free(&d);
	*live = false;
	if (!mp)
		return 0;
	size_t base = strlen(mp) - 1;
	while (base > 0 && mp[base - 1] != '/')
		base--;
	live_ctx c = {base, false};
	int rc = s3_list_all(e->s3, mp, NULL, page_live, &c, x);
	free(mp);
	*live = c.live;
	return rc;
}

static bool stopping(eng *e)
{
	ckpt_lock(&e->mu);
	bool s = e->stopping;
	ckpt_unlock(&e->mu);
	return s;
}

/* Waits until every writer that found no marker live at about the same
 * time has PUT its claim: they all PUT it before listing, and a second is
 * far longer than a LIST. */
#define CLAIM_SETTLE_S 1.0

static void settle(eng *e)
{
	double end = clock_mono() + CLAIM_SETTLE_S;
	ckpt_lock(&e->mu);
	for (double now; !e->stopping && (now = clock_mono()) < end;)
		eng_sleep(e, end - now);
	ckpt_unlock(&e->mu);
}

static void write_index(eng *e, const char *root)
{
	s3_err x = {0};
	bool live = false;
	buf p = BUF_INIT;
	buf_printf(&p, "%s%s%s" PROTO_META_DIR "/", e->prefix, root,
		   root[0] ? "/" : "");
	mlist l = {0};
	int rc = s3_list_all(e->s3, buf_cstr(&p), NULL, page_manifests, &l, &x);
	size_t plen = p.len;
	buf idx = BUF_INIT;
	char *body = NULL, *claim = NULL;
	/* one LIST for a directory of few writers (the common case); the
	 * markers only when an index would pay */
	if (rc < 0 || l.indexed || l.n < PROTO_INDEX_MIN)
		goto out;
	if (others_live(e, root, &live, &x) < 0 || live)
		goto out;
	/* others may have found no marker live either: claim, and go on
	 * only if ours is the first claim (proto/mindex.h) */
	claim = proto_claim_key(e->prefix, root, e->writer);
	if (!claim)
		goto out;
	s3_put_opts cpo = {0};
	http_upload cb = http_upload_mem("", 0);
	if (s3_put_object(e->s3, claim, &cb, &cpo, NULL, &x) < 0) {
		free(claim);
		claim = NULL;
		goto out;
	}
	settle(e);
	/* listed again now that no marker is live: every writer PUT its
	 * committed manifest before deleting its marker, so these are the
	 * final versions (the first listing may hold an intent); every
	 * racer's claim is there too, and all agree on the first */
	mlist_free(&l);
	memset(&l, 0, sizeof l);
	if (s3_list_all(e->s3, buf_cstr(&p), NULL, page_manifests, &l, &x) < 0 ||
	    l.indexed || !l.first_claim ||
	    strcmp(l.first_claim, claim + plen))
		goto out;
	for (size_t i = 0; i < l.n; i++) {
		size_t got = 0;
		if (l.size[i] > INDEX_MAX || idx.len > INDEX_MAX || stopping(e))
			goto out;
		char *nb = realloc(body, l.size[i] ? l.size[i] : 1);
		if (!nb)
			goto out;
		body = nb;
		/* exactly the listed version: its ETag is its MD5 */
		if (s3_get_range(e->s3, l.key[i], 0, l.size[i], l.etag[i], body,
				 &got, &x) < 0) {
			if (x.err == ENOENT || x.err == ESTALE)
				continue; /* deleted or rewritten since */
			goto out;
		}
		if (!s3_etag_matches(l.etag[i], body, got))
			continue;
		if (proto_index_add(&idx, l.key[i] + plen, l.etag[i], body,
				    got) < 0)
			goto out;
	}
	if (idx.len) {
		char *key = proto_index_key(e->prefix, root, e->writer);
		s3_put_opts po = {.content_type = "text/plain"};
		http_upload b = http_upload_mem(idx.data, idx.len);
		rc = key ? s3_put_object(e->s3, key, &b, &po, NULL, &x) : -1;
		if (rc == 0)
			log_debug("commit: manifest index of %s: %zu manifests",
				  root, l.n);
		free(key);
	}
out:
	if (x.msg[0])
		log_debug("commit: no manifest index for %s: %s", root, x.msg);
	if (claim) {
		s3_err dx;
		if (s3_delete_object(e->s3, claim, &dx) < 0)
			log_debug("commit: %s: %s", claim, dx.msg);
		free(claim);
	}
	free(body);
	buf_free(&idx);
	mlist_free(&l);
	buf_free(&p);
}

void eng_index_later(eng *e, const char *root)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	char *r = strdup(root);
	ckpt_lock(&e->mu);
	char **q = !r ? NULL
		  : e->ix_n < e->ix_cap
		      ? e->ix_q
		      : vec_grow(e->ix_q, &e->ix_cap, sizeof *q, 8);
	if (q) {
		e->ix_q = q;
		e->ix_q[e->ix_n++] = r;
		r = NULL;
		pthread_cond_broadcast(&e->cv);
	}
	ckpt_unlock(&e->mu);
	free(r);
}

void *eng_index_main(void *arg)
{
	eng *e = arg;
	ckpt_lock(&e->mu);
	while (!e->stopping) {
		if (!e->ix_n) {
			ckpt_cond_wait(&e->cv, &e->mu);
			continue;
		}
		char *root = e->ix_q[0];
		memmove(e->ix_q, e->ix_q + 1, --e->ix_n * sizeof *e->ix_q);
		ckpt_unlock(&e->mu);
		write_index(e, root);
		free(root);
		ckpt_lock(&e->mu);
	}
	/* what is left is only an accelerator: dropped */
	for (size_t i = 0; i < e->ix_n; i++)
		free(e->ix_q[i]);
	free(e->ix_q);
	e->ix_q = NULL;
	e->ix_n = 0;
	ckpt_unlock(&e->mu);
	return NULL;
}
