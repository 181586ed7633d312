/*
 * verify: re-read a stored checkpoint and check it against its manifests
 * or ETags (see verify.h for the rules).
 *
 * Three phases: list every object under the prefix (and the manifests of
 * the directories above it, which may govern it); load the manifests of
 * each root and turn every object into a job (or a "missing" result for a
 * file a manifest lists without its object); then `threads` workers read
 * the jobs' objects in ranges while the calling thread reports progress.
 */
#include "verify/verify.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "proto/crc.h"
#include "proto/keys.h"
#include "proto/manifest.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/hex.h"
#include "util/vec.h"

#define META_DIR ".ckptfs/"
#define GROW(v, n, cap)                                                        \
	((n) < (cap) ? 0 : grow((void **)&(v), &(cap), sizeof *(v)))

static int grow(void **v, size_t *cap, size_t elem)
{
	void *nv = vec_grow(*v, cap, elem, 16);
	if (!nv)
		return -1;
	*v = nv;
	return 0;
}
#define READ_CHUNK (8u << 20)

const char *verify_how_name(verify_how h)
{
	switch (h) {
	case VERIFY_MANIFEST:
		return "manifest";
	case VERIFY_MD5:
		return "md5";
	default:
		return "size";
	}
}

json_t *verify_file_json(const verify_file *f)
{
	json_t *j = json_pack("{s:s, s:s, s:I, s:s, s:b}", "path", f->rel,
			      "key", f->key, "size", (json_int_t)f->size,
			      "check", verify_how_name(f->how), "ok", f->ok);
	if (j && f->problem)
		json_object_set_new(j, "problem", json_string(f->problem));
	return j;
}

json_t *verify_summary_json(const verify_summary *s)
{
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "files",
			 (json_int_t)s->files, "ok", (json_int_t)s->ok, "bad",
			 (json_int_t)s->bad, "by_manifest",
			 (json_int_t)s->by[VERIFY_MANIFEST], "by_md5",
			 (json_int_t)s->by[VERIFY_MD5], "by_size",
			 (json_int_t)s->by[VERIFY_SIZE], "skipped",
			 (json_int_t)s->skipped, "bytes", (json_int_t)s->bytes);
}

bool verify_etag_is_md5(const char *etag)
{
	if (!etag)
		return false;
	size_t n = strlen(etag);
	if (n >= 2 && etag[0] == '"' && etag[n - 1] == '"') {
		etag++;
		n -= 2;
	}
	if (n != 32)
		return false;
	for (size_t i = 0; i < n; i++)
		if (hex_val(etag[i]) < 0)
			return false;
	return true;
}

/* etag without its quotes, into out. */
static void etag_bare(const char *etag, char *out, size_t sz)
{
	size_t n = etag ? strlen(etag) : 0;
	if (n >= 2 && etag[0] == '"' && etag[n - 1] == '"')
		snprintf(out, sz, "%.*s", (int)(n - 2), etag + 1);
	else
		snprintf(out, sz, "%s", etag ? etag : "");
}

/* ---- phase 1: listing ------------------------------------------------------ */

typedef struct obj {
	char *key;
	uint64_t size;
	char *etag;
} obj;

typedef struct objs {
	obj *v;
	size_t n, cap;
	const char *want; /* key: keep key == want or under want/ */
	size_t want_len;
} objs;

static bool wanted(const char *want, size_t wl, const char *key)
{
	if (wl == 0)
		return true;
	return !strncmp(key, want, wl) && (key[wl] == '\0' || key[wl] == '/');
}

static int list_page(void *arg, const char *prefix, const s3_list_result *p)
{
	objs *o = arg;
	(void)prefix;
	for (size_t i = 0; i < p->n_objects; i++) {
		const s3_object *so = &p->objects[i];
		if (strlen(so->key) != so->key_len ||
		    !wanted(o->want, o->want_len, so->key))
			continue;
		if (GROW(o->v, o->n, o->cap) < 0)
			return -ENOMEM;
		obj *x = &o->v[o->n];
		x->key = strdup(so->key);
		x->etag = strdup(so->etag ? so->etag : "");
		x->size = so->size;
		if (!x->key || !x->etag) {
			free(x->key);
			free(x->etag);
			return -ENOMEM;
		}
		o->n++;
	}
	return 0;
}

static void objs_free(objs *o)
{
	for (size_t i = 0; i < o->n; i++) {
		free(o->v[i].key);
		free(o->v[i].etag);
	}
	free(o->v);
}

static int obj_cmp(const void *a, const void *b)
{
	return strcmp(((const obj *)a)->key, ((const obj *)b)->key);
}

static obj *obj_find(objs *o, const char *key)
{
	obj k = {.key = (char *)key};
	if (!o->n)
		return NULL;
	return bsearch(&k, o->v, o->n, sizeof *o->v, obj_cmp);
}

long verify_manifest_root_len(const char *key)
{
	const char *p = key;
	for (;;) {
		const char *m = strstr(p, META_DIR);
		if (!m)
			return -1;
		if ((m == key || m[-1] == '/') &&
		    proto_is_manifest_name(m + strlen(META_DIR)))
			return (long)(m - key);
		p = m + 1;
	}
}

bool verify_is_own_key(const char *key)
{
	for (const char *p = key; p;) {
		if (!strncmp(p, ".ckptfs", 7))
			return true;
		p = strchr(p, '/');
		if (p)
			p++;
	}
	return false;
}

/* ---- phase 2: manifests and jobs ------------------------------------------- */

typedef struct root {
	char *r; /* "" or ending in '/' */
	vis_manifest m;
	bool loaded;
} root;

typedef struct job {
	obj *o;
	const vis_file *vf; /* VERIFY_MANIFEST */
	verify_file out;
	/* read block by block (a manifest with a block list): the recorded
	 * CRCs, the ones read, and how many items are still to finish */
	uint32_t block;
	uint32_t *want, *got;
	size_t nb;
	size_t left; /* [mu] */
} job;

/* A piece of work: block bi of a job, or (bi == WHOLE) all of it. */
#define WHOLE ((size_t)-1)
typedef struct item {
	job *j;
	size_t bi;
} item;

typedef struct run {
	s3_client *c;
	const verify_cb *cb;
	root *roots;
	size_t n_roots, cap_roots;
	job *jobs;
	size_t n_jobs, cap_jobs;
	item *items;
	size_t n_items, cap_items;
	uint64_t total_bytes;
	/* workers */
	pthread_mutex_t mu;
	size_t next;          /* [mu] next item */
	size_t done_files;    /* [mu] */
	uint64_t done_bytes;  /* atomic */
	bool cancel;          /* atomic */
	verify_summary *sum;  /* [mu] */
	size_t keylen;        /* the verified prefix's length, for rel */
	const char *key;
} run;

static int add_root(run *r, const char *key, size_t len)
{
	for (size_t i = 0; i < r->n_roots; i++)
		if (strlen(r->roots[i].r) == len &&
		    !strncmp(r->roots[i].r, key, len))
			return 0;
	if (GROW(r->roots, r->n_roots, r->cap_roots) < 0)
		return -1;
	root *x = &r->roots[r->n_roots];
	memset(x, 0, sizeof *x);
	x->r = strndup(key, len);
	if (!x->r)
		return -1;
	vis_manifest_init(&x->m);
	r->n_roots++;
	return 0;
}

static int load_manifest(run *r, root *rt, const obj *o, char **err)
{
	char *body = NULL;
	size_t got = 0;
	s3_err e;
	/* whole: one rewritten since the listing is longer than listed */
	if (s3_get_object(r->c, o->key, PROTO_MANIFEST_MAX, NULL, &body, &got,
			  NULL, &e) < 0) {
		if (e.err == ENOENT)
			return 0; /* deleted since listed */
		buf m = BUF_INIT;
		buf_printf(&m, "cannot read the manifest %s: %s", o->key, e.msg);
		*err = buf_steal(&m);
		return -1;
	}
	char *perr = NULL;
	if (vis_manifest_add_json(&rt->m, body, got, &perr) < 0) {
		buf m = BUF_INIT;
		buf_printf(&m, "the manifest %s is not valid: %s", o->key,
			   perr ? perr : "?");
		free(perr);
		free(body);
		*err = buf_steal(&m);
		return -1;
	}
	free(body);
	return 0;
}

/* The manifests of the directories above key (which the listing of key
 * does not show): one delimiter LIST of each A/.ckptfs/. */
static int list_ancestors(run *r, const char *key, objs *above, char **err)
{
	const char *slash = strrchr(key, '/');
	size_t end = slash ? (size_t)(slash - key) + 1 : 0;
	for (size_t len = 0;;) {
		buf p = BUF_INIT;
		buf_printf(&p, "%.*s%s", (int)len, key, META_DIR);
		objs o = {0};
		s3_err e;
		int rc = s3_list_all(r->c, buf_cstr(&p), "/", list_page, &o, &e);
		buf_free(&p);
		if (rc < 0) {
			objs_free(&o);
			*err = strdup(e.msg);
			return -1;
		}
		for (size_t i = 0; i < o.n; i++) {
			if (verify_manifest_root_len(o.v[i].key) != (long)len ||
			    GROW(above->v, above->n, above->cap) < 0)
				continue;
			above->v[above->n++] = o.v[i];
			o.v[i].key = o.v[i].etag = NULL;
		}
		objs_free(&o);
		if (len >= end)
			break;
		const char *n = strchr(key + len, '/');
		len = (size_t)(n - key) + 1;
	}
	return 0;
}

static root *nearest_root(run *r, const char *key)
{
	root *best = NULL;
	for (size_t i = 0; i < r->n_roots; i++) {
		size_t l = strlen(r->roots[i].r);
		if (!strncmp(key, r->roots[i].r, l) &&
		    (!best || l > strlen(best->r)))
			best = &r->roots[i];
	}
	return best;
}

static job *new_job(run *r, obj *o, verify_how how)
{
	if (GROW(r->jobs, r->n_jobs, r->cap_jobs) < 0)
		return NULL;
	job *j = &r->jobs[r->n_jobs++];
	memset(j, 0, sizeof *j);
	j->o = o;
	j->out.how = how;
	j->out.size = o ? o->size : 0;
	return j;
}

static const char *rel_of(const run *r, const char *key)
{
	const char *s = key + r->keylen;
	return *s == '/' ? s + 1 : s;
}

/* ---- phase 3: reading ------------------------------------------------------- */

/* Sets j's problem unless it has one (the first found is reported). */
__attribute__((format(printf, 3, 4))) static void bad(run *r, job *j,
						      const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	buf m = BUF_INIT;
	buf_vprintf(&m, fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&r->mu);
	if (!j->out.problem)
		j->out.problem = buf_steal(&m);
	pthread_mutex_unlock(&r->mu);
	buf_free(&m);
}

/* Reads [off, off+len) of j's object into chunk-sized pieces, folding
 * them into *crc (and md5).  0, or -1 with j's problem set. */
static int read_range(run *r, job *j, uint64_t off, uint64_t len, char *chunk,
		      uint32_t *crc, EVP_MD_CTX *md5)
{
	obj *o = j->o;
	for (uint64_t end = off + len; off < end;) {
		if (__atomic_load_n(&r->cancel, __ATOMIC_RELAXED))
			return -1;
		size_t n = end - off < READ_CHUNK ? (size_t)(end - off) : READ_CHUNK;
		size_t got = 0;
		s3_err e;
		if (s3_get_range(r->c, o->key, off, n, o->etag, chunk, &got, &e) < 0) {
			if (e.err == ESTALE)
				bad(r, j, "changed while being verified (ETag no "
					  "longer %s)", o->etag);
			else if (e.err == ENOENT)
				bad(r, j, "deleted while being verified");
			else
				bad(r, j, "cannot read: %s", e.msg);
			return -1;
		}
		if (got < n) {
			bad(r, j, "truncated: the object ended after %llu of %llu "
				  "bytes",
			    (unsigned long long)(off + got),
			    (unsigned long long)o->size);
			return -1;
		}
		*crc = proto_crc32c(*crc, chunk, got);
		if (md5)
			EVP_DigestUpdate(md5, chunk, got);
		__atomic_fetch_add(&r->done_bytes, got, __ATOMIC_RELAXED);
		off += got;
	}
	return 0;
}

/* The whole object in one go: CRC-32C and, where wanted, MD5. */
static void read_whole(run *r, job *j, char *chunk)
{
	obj *o = j->o;
	const vis_file *vf = j->vf;
	/* a manifest entry without checksums (an old writer): the MD5 of a
	 * plain ETag is the best evidence left */
	bool want_md5 = j->out.how == VERIFY_MD5 ||
			(vf && !vf->has_crc && !vf->blocks &&
			 verify_etag_is_md5(o->etag));
	EVP_MD_CTX *md5 = want_md5 ? EVP_MD_CTX_new() : NULL;
	if (md5)
		EVP_DigestInit_ex(md5, EVP_md5(), NULL);
	uint32_t crc = 0;
	if (read_range(r, j, 0, o->size, chunk, &crc, md5) < 0) {
		if (md5)
			EVP_MD_CTX_free(md5);
		return;
	}
	if (vf && vf->has_crc && crc != vf->crc32c)
		bad(r, j, "CRC-32C %08x, the manifest says %08x", crc,
		    vf->crc32c);
	if (md5) {
		unsigned char d[EVP_MAX_MD_SIZE];
		unsigned dl = 0;
		EVP_DigestFinal_ex(md5, d, &dl);
		EVP_MD_CTX_free(md5);
		char hex[2 * EVP_MAX_MD_SIZE + 1], et[128];
		hex_encode(d, dl, hex);
		etag_bare(o->etag, et, sizeof et);
		if (strcasecmp(hex, et))
			bad(r, j, "MD5 %s differs from the ETag %s", hex, et);
	}
}

static uint64_t block_len(const job *j, size_t bi)
{
	uint64_t off = (uint64_t)bi * j->block;
	return j->o->size - off < j->block ? j->o->size - off : j->block;
}

/* A block job whose every block was read: the first block that differs
 * from the manifest, else the whole CRC-32C (combined).  mu */
static void finish_blocks(job *j)
{
	if (j->out.problem)
		return;
	uint32_t crc = 0;
	for (size_t bi = 0; bi < j->nb; bi++) {
		uint64_t off = (uint64_t)bi * j->block, len = block_len(j, bi);
		if (j->got[bi] != j->want[bi]) {
			buf m = BUF_INIT;
			buf_printf(&m, "block %zu (bytes %llu-%llu) has CRC-32C "
				       "%08x, the manifest says %08x",
				   bi, (unsigned long long)off,
				   (unsigned long long)(off + len - 1), j->got[bi],
				   j->want[bi]);
			j->out.problem = buf_steal(&m);
			return;
		}
		crc = bi ? proto_crc32c_combine(crc, j->got[bi], len) : j->got[bi];
	}
	if (j->vf->has_crc && crc != j->vf->crc32c) {
		buf m = BUF_INIT;
		buf_printf(&m, "CRC-32C %08x, the manifest says %08x", crc,
			   j->vf->crc32c);
		j->out.problem = buf_steal(&m);
	}
}

static void run_item(run *r, const item *it, char *chunk)
{
	job *j = it->j;
	if (!chunk) {
		bad(r, j, "out of memory");
		return;
	}
	pthread_mutex_lock(&r->mu);
	bool decided = j->out.problem != NULL; /* missing, size, ETag */
	pthread_mutex_unlock(&r->mu);
	if (decided || !j->o)
		return;
	if (it->bi == WHOLE) {
		read_whole(r, j, chunk);
		return;
	}
	uint32_t crc = 0;
	if (read_range(r, j, (uint64_t)it->bi * j->block, block_len(j, it->bi),
		       chunk, &crc, NULL) == 0)
		j->got[it->bi] = crc; /* only this item writes it */
}

static void *worker(void *arg)
{
	run *r = arg;
	char *chunk = malloc(READ_CHUNK);
	for (;;) {
		pthread_mutex_lock(&r->mu);
		size_t i = r->next < r->n_items ? r->next++ : r->n_items;
		pthread_mutex_unlock(&r->mu);
		if (i >= r->n_items || __atomic_load_n(&r->cancel, __ATOMIC_RELAXED))
			break;
		item *it = &r->items[i];
		run_item(r, it, chunk);
		job *j = it->j;
		pthread_mutex_lock(&r->mu);
		if (--j->left == 0) {
			if (j->nb && j->o)
				finish_blocks(j);
			j->out.ok = !j->out.problem;
			verify_summary *s = r->sum;
			s->files++;
			s->by[j->out.how]++;
			if (j->out.ok)
				s->ok++;
			else
				s->bad++;
			r->done_files++;
			if (r->cb && r->cb->file)
				r->cb->file(r->cb->arg, &j->out);
		}
		pthread_mutex_unlock(&r->mu);
	}
	free(chunk);
	return NULL;
}

/* What needs no reading (size, ETag against the manifest), and the items
 * of every job: one per block of a manifest file with a block list (so
 * the workers share a large file), one for anything else. */
static int make_items(run *r)
{
	for (size_t k = 0; k < r->n_jobs; k++) {
		job *j = &r->jobs[k];
		const vis_file *vf = j->vf;
		if (j->o && vf) {
			char a[128], b[128];
			etag_bare(j->o->etag, a, sizeof a);
			etag_bare(vf->etag, b, sizeof b);
			if (j->o->size != vf->size)
				bad(r, j, "size %llu, the manifest says %llu",
				    (unsigned long long)j->o->size,
				    (unsigned long long)vf->size);
			else if (b[0] && strcmp(a, b))
				bad(r, j, "ETag %s, the manifest says %s "
					  "(replaced since it was committed)",
				    a, b);
		}
		if (j->o && vf && vf->blocks && !j->out.problem &&
		    j->o->size > 0 && vis_file_blocks(vf, &j->want, &j->nb) == 0) {
			j->block = vf->block;
			j->got = calloc(j->nb, sizeof *j->got);
			if (!j->got)
				return -1;
		} else {
			j->nb = 0;
		}
		size_t n = j->nb ? j->nb : 1;
		for (size_t bi = 0; bi < n; bi++) {
			if (GROW(r->items, r->n_items, r->cap_items) < 0)
				return -1;
			r->items[r->n_items++] = (item){j, j->nb ? bi : WHOLE};
		}
		j->left = n;
	}
	return 0;
}

/* ---- the run ---------------------------------------------------------------- */

static int plan(run *r, objs *o, objs *above, char **err)
{
	/* roots: from the manifests listed under key and above it */
	objs *lists[2] = {o, above};
	for (int l = 0; l < 2; l++)
		for (size_t i = 0; i < lists[l]->n; i++) {
			long rl = verify_manifest_root_len(lists[l]->v[i].key);
			if (rl >= 0 && add_root(r, lists[l]->v[i].key,
						(size_t)rl) < 0)
				return -1;
		}
	for (int l = 0; l < 2; l++)
		for (size_t i = 0; i < lists[l]->n; i++) {
			obj *x = &lists[l]->v[i];
			long rl = verify_manifest_root_len(x->key);
			if (rl < 0)
				continue;
			for (size_t k = 0; k < r->n_roots; k++)
				if (strlen(r->roots[k].r) == (size_t)rl &&
				    !strncmp(r->roots[k].r, x->key, (size_t)rl) &&
				    load_manifest(r, &r->roots[k], x, err) < 0)
					return -1;
		}
	for (size_t k = 0; k < r->n_roots; k++)
		vis_manifest_finish(&r->roots[k].m);
	/* a job per object of the checkpoint */
	for (size_t i = 0; i < o->n; i++) {
		obj *x = &o->v[i];
		size_t kl = strlen(x->key);
		if (verify_is_own_key(x->key) || (kl && x->key[kl - 1] == '/'))
			continue; /* ckptfs' keys, directory markers */
		root *rt = nearest_root(r, x->key);
		const vis_file *vf = NULL;
		if (rt) {
			vf = rt->m.committed
				 ? vis_manifest_find(&rt->m,
						     x->key + strlen(rt->r))
				 : NULL;
			if (!vf) {
				r->sum->skipped++;
				continue;
			}
		}
		job *j = new_job(r, x, vf ? VERIFY_MANIFEST
				     : verify_etag_is_md5(x->etag) ? VERIFY_MD5
								   : VERIFY_SIZE);
		if (!j)
			return -1;
		j->vf = vf;
		j->out.key = x->key;
		j->out.rel = rel_of(r, x->key);
		r->total_bytes += x->size;
	}
	/* files the manifests list whose objects are gone */
	for (size_t k = 0; k < r->n_roots; k++) {
		root *rt = &r->roots[k];
		for (size_t f = 0; rt->m.committed && f < rt->m.n; f++) {
			const vis_file *vf = &rt->m.files[f];
			char *key = NULL;
			if (asprintf(&key, "%s%s", rt->r, vf->path) < 0)
				return -1;
			root *gov = nearest_root(r, key);
			if (!wanted(r->key, r->keylen, key) || gov != rt ||
			    obj_find(o, key)) {
				free(key);
				continue;
			}
			job *j = new_job(r, NULL, VERIFY_MANIFEST);
			if (!j) {
				free(key);
				return -1;
			}
			j->out.key = key; /* owned: freed with the run */
			j->out.rel = rel_of(r, key);
			j->out.size = vf->size;
			j->vf = vf;
			bad(r, j, "missing: the manifest lists it (%llu bytes), "
				  "the bucket has no such object",
			    (unsigned long long)vf->size);
		}
	}
	return make_items(r);
}

static void run_free(run *r)
{
	for (size_t i = 0; i < r->n_jobs; i++) {
		if (!r->jobs[i].o)
			free(r->jobs[i].out.key);
		free(r->jobs[i].out.problem);
		free(r->jobs[i].want);
		free(r->jobs[i].got);
	}
	free(r->jobs);
	free(r->items);
	for (size_t k = 0; k < r->n_roots; k++) {
		free(r->roots[k].r);
		vis_manifest_free(&r->roots[k].m);
	}
	free(r->roots);
	pthread_mutex_destroy(&r->mu);
}

static void report_progress(run *r)
{
	if (!r->cb || !r->cb->progress)
		return;
	pthread_mutex_lock(&r->mu);
	size_t files = r->done_files;
	pthread_mutex_unlock(&r->mu);
	r->cb->progress(r->cb->arg,
			__atomic_load_n(&r->done_bytes, __ATOMIC_RELAXED),
			r->total_bytes, files, r->n_jobs);
}

int verify_run(s3_client *c, const char *key, unsigned threads,
	       const verify_cb *cb, verify_summary *sum, char **err)
{
	memset(sum, 0, sizeof *sum);
	*err = NULL;
	size_t kl = strlen(key);
	while (kl && key[kl - 1] == '/')
		kl--;
	char *k = strndup(key, kl);
	if (!k)
		return -1;
	run r = {.c = c, .cb = cb, .sum = sum, .key = k, .keylen = kl};
	pthread_mutex_init(&r.mu, NULL);
	objs o = {.want = k, .want_len = kl}, above = {0};
	s3_err e;
	int rc = -1;
	if (s3_list_all(c, k, NULL, list_page, &o, &e) < 0) {
		*err = strdup(e.msg);
		goto out;
	}
	if (o.n)
		qsort(o.v, o.n, sizeof *o.v, obj_cmp);
	/* the bucket's root has nothing above it that its listing missed */
	if ((kl && list_ancestors(&r, k, &above, err) < 0) ||
	    plan(&r, &o, &above, err) < 0)
		goto out;
	if (threads < 1)
		threads = 1;
	if (threads > 64)
		threads = 64;
	pthread_t th[64];
	unsigned started = 0;
	for (; started < threads && started < (r.n_items ? r.n_items : 1);
	     started++)
		if (pthread_create(&th[started], NULL, worker, &r) != 0)
			break;
	if (!started) {
		*err = strdup("cannot start the verifying threads");
		goto out;
	}
	for (;;) {
		pthread_mutex_lock(&r.mu);
		bool all = r.done_files >= r.n_jobs;
		pthread_mutex_unlock(&r.mu);
		if (cb && cb->cancelled && cb->cancelled(cb->arg))
			__atomic_store_n(&r.cancel, true, __ATOMIC_RELAXED);
		report_progress(&r);
		if (all || __atomic_load_n(&r.cancel, __ATOMIC_RELAXED))
			break;
		struct timespec ts = {0, 200 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	sum->bytes = __atomic_load_n(&r.done_bytes, __ATOMIC_RELAXED);
	if (__atomic_load_n(&r.cancel, __ATOMIC_RELAXED) && sum->files < r.n_jobs) {
		*err = strdup("cancelled");
		goto out;
	}
	rc = 0;
out:
	if (rc < 0 && !*err)
		*err = strdup("out of memory");
	run_free(&r);
	objs_free(&o);
	objs_free(&above);
	free(k);
	return rc;
}
