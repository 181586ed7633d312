/*
 * eng steps: the remote steps of the publish queue (visible.c runs them,
 * mu not held except where noted), each idempotent:
 *
 *  - commit of a directory transaction (the protocol of doc/commit.md):
 *    zero-byte "dir/" objects of its empty directories; the committed
 *    manifest (the commit point); the addendum in manifest_root; DELETE
 *    of the marker; deletion of garbage (objects of old names); resumed
 *    after a restart, its stored objects are checked first;
 *  - commit of a single file: outside manifests its metadata hint first
 *    (hints.c), then its PUT or CompleteMultipartUpload is the step
 *    (uploads through transfer.c), then its addendum and garbage;
 *  - remote delete of a file (one DELETE, then its hint's) or a directory
 *    (its delete record, the commit point; the tree data first, manifests
 *    and hints last; the record's DELETE);
 *  - the rename step is renames.c's.
 *
 * A step works on a snapshot (eng_snap) of its transaction taken under mu.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commit/internal.h"
#include "proto/visibility.h"
#include "util/log.h"
#include "util/vec.h"

/* ---- snapshots ---------------------------------------------------------- */

static int garbage_key(void *arg, const char *key)
{
	eng_snap *sn = arg;
	if (sn->ng == sn->gcap) {
		char **nv = vec_grow(sn->garbage, &sn->gcap, sizeof *nv, 8);
		if (!nv)
			return -ENOMEM;
		sn->garbage = nv;
	}
	sn->garbage[sn->ng++] = strdup(key);
	return 0;
}

/* mu */
void eng_snap_take(eng *e, etxn *t, eng_snap *sn)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	memset(sn, 0, sizeof *sn);
	sn->id = t->id;
	sn->kind = t->kind;
	sn->root = strdup(t->root);
	sn->dest = t->dest ? strdup(t->dest) : NULL;
	sn->mroot = t->mroot ? strdup(t->mroot) : NULL;
	sn->is_dir = t->is_dir;
	size_t n = 0, nd = 0;
	for (efile *f = t->files; f; f = f->next)
		n++;
	for (edir *d = t->dirs; d; d = d->next)
		nd++;
	sn->f = calloc(n + 1, sizeof *sn->f);
	sn->dm = calloc(nd + 1, sizeof *sn->dm);
	sn->dpath = calloc(nd + 1, sizeof *sn->dpath);
	sn->om = calloc(nd + 1, sizeof *sn->om);
	sn->opath = calloc(nd + 1, sizeof *sn->opath);
	for (efile *f = t->files; f && sn->f; f = f->next) {
		eng_snap_file *s = &sn->f[sn->nf++];
		s->path = strdup(f->path);
		s->key = f->key ? strdup(f->key) : NULL;
		s->etag = strdup(f->etag);
		s->sid = f->sid;
		s->size = f->size;
		s->crc = f->crc;
		s->blocks = f->blocks ? strdup(f->blocks) : NULL;
		eng_meta_copy(&s->m, &f->m);
	}
	for (edir *d = t->dirs; d && sn->dm && sn->dpath && sn->om && sn->opath;
	     d = d->next) {
		if (!proto_under(d->path, t->root, NULL)) { /* a parent */
			sn->opath[sn->no] = strdup(d->path);
			eng_meta_copy(&sn->om[sn->no++], &d->m);
			continue;
		}
		sn->dpath[sn->nd] = strdup(d->path);
		eng_meta_copy(&sn->dm[sn->nd++], &d->m);
	}
	jr_garbage_list(e->j, t->id, garbage_key, sn);
}

void eng_snap_free(eng_snap *sn)
{
	for (size_t i = 0; i < sn->nf; i++) {
		free(sn->f[i].path);
		free(sn->f[i].key);
		free(sn->f[i].etag);
		free(sn->f[i].blocks);
		proto_meta_free(&sn->f[i].m);
	}
	for (size_t i = 0; i < sn->nd; i++) {
		free(sn->dpath[i]);
		proto_meta_free(&sn->dm[i]);
	}
	for (size_t i = 0; i < sn->no; i++) {
		free(sn->opath[i]);
		proto_meta_free(&sn->om[i]);
	}
	for (size_t i = 0; i < sn->ng; i++)
		free(sn->garbage[i]);
	free(sn->f);
	free(sn->dm);
	free(sn->dpath);
	free(sn->om);
	free(sn->opath);
	free(sn->garbage);
	free(sn->mf);
	free(sn->md);
	free(sn->root);
	free(sn->dest);
	free(sn->mroot);
	memset(sn, 0, sizeof *sn);
}

/* ---- small S3 steps (mu not held) --------------------------------------- */

int eng_put_mem(eng *e, const char *key, const char *body,
		   const char *ctype, const s3_meta *meta, size_t nm,
		   s3_err *x)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	s3_put_opts po = {.content_type = ctype, .meta = meta, .n_meta = nm};
	http_upload b = http_upload_mem(body, strlen(body));
	return s3_put_object(e->s3, key, &b, &po, NULL, x);
}

/* Deletes keys in batches of S3_DELETE_MAX. */
int eng_delete_keys(eng *e, char **keys, size_t n, s3_err *x)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	for (size_t i = 0; i < n; i += S3_DELETE_MAX) {
		size_t k = n - i < S3_DELETE_MAX ? n - i : S3_DELETE_MAX;
		size_t failed = 0;
		s3_delete_status *st = calloc(k, sizeof *st);
		int rc = st ? s3_delete_objects(e->s3,
						(const char *const *)keys + i,
						k, st, &failed, x)
			    : -1;
		for (size_t j = 0; rc == 0 && j < k; j++) {
			if (st[j].err) {
				memset(x, 0, sizeof *x);
				x->err = st[j].err;
				x->http_status = 500; /* retry */
				snprintf(x->msg, sizeof x->msg,
					 "DeleteObjects %s: %s %s", keys[i + j],
					 st[j].code, st[j].msg);
				rc = -1;
			}
		}
		free(st);
		if (rc)
			return rc;
	}
	return 0;
}

void eng_keylist_free(keylist *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i]);
		free(l->o[i].etag);
	}
	free(l->v);
	free(l->o);
	memset(l, 0, sizeof *l);
}

int eng_list_under(eng *e, const char *prefix, keylist *out, s3_err *x)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	char *token = NULL;
	int rc = 0;
	do {
		s3_list_result r = {0};
		rc = s3_list_page(e->s3, prefix, NULL, token, 1000, &r, x);
		free(token);
		token = NULL;
		for (size_t i = 0; !rc && i < r.n_objects; i++) {
			if (r.objects[i].key_len != strlen(r.objects[i].key))
				continue; /* keys with NUL: cannot be ours */
			if (out->n == out->cap) {
				size_t cv = out->cap, nc = out->cap;
				char **nv = vec_grow(out->v, &cv, sizeof *nv, 64);
				s3_object *no =
				    nv ? vec_grow(out->o, &nc, sizeof *no, 64)
				       : NULL;
				if (nv)
					out->v = nv;
				if (!no) {
					rc = -1;
					x->err = ENOMEM;
					break;
				}
				out->o = no;
				out->cap = nc;
			}
			out->v[out->n] = strdup(r.objects[i].key);
			out->o[out->n] = r.objects[i];
			out->o[out->n].key = out->v[out->n];
			out->o[out->n].etag = r.objects[i].etag
						  ? strdup(r.objects[i].etag)
						  : NULL;
			out->n++;
		}
		if (!rc && r.truncated && r.next_token)
			token = strdup(r.next_token);
		s3_list_result_free(&r);
	} while (!rc && token);
	free(token);
	return rc;
}

/* Where key has the directory component comp (at its start or after a
 * '/', followed by a '/'), searching from p; NULL when nowhere. */
static const char *dir_comp(const char *key, const char *p, const char *comp)
{
	size_t n = strlen(comp);
	for (; (p = strstr(p, comp)); p++)
		if ((p == key || p[-1] == '/') && p[n] == '/')
			return p;
	return NULL;
}

/* Whether key (a full key) is a manifest or addendum: its last component
 * a manifest name (proto/keys.h) in a PROTO_META_DIR directory. */
static bool is_manifest_key(const char *key)
{
	for (const char *p = key; (p = dir_comp(key, p, PROTO_META_DIR)); p++)
		if (proto_is_manifest_name(p + sizeof PROTO_META_DIR))
			return true;
	return false;
}

/* Whether key (a full key) is a pending marker. */
static bool is_marker_key(const char *key)
{
	return dir_comp(key, key, PROTO_PENDING_DIR) != NULL;
}

/* Deletes everything under prefix+dir/, manifests last. */
static int delete_tree(eng *e, const char *dir, s3_err *x)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	buf p = BUF_INIT;
	buf_printf(&p, "%s%s/", e->prefix, dir);
	keylist l = {0};
	int rc = eng_list_under(e, buf_cstr(&p), &l, x);
	buf_free(&p);
	if (rc) {
		eng_keylist_free(&l);
		return rc;
	}
	/* data first, then manifests: a reader never sees a manifest naming
	 * files of which some are gone while others are left... the marker
	 * hides the whole directory meanwhile anyway */
	char **data = calloc(l.n + 1, sizeof *data);
	char **man = calloc(l.n + 1, sizeof *man);
	size_t nd = 0, nm = 0;
	for (size_t i = 0; data && man && i < l.n; i++) {
		/* metadata hints go with the manifests, after the objects
		 * they speak for, and leave no .ckptfs-meta/ behind to keep
		 * the directory's prefix alive */
		if (is_manifest_key(l.v[i]) || proto_in_hint_dir(l.v[i]))
			man[nm++] = l.v[i];
		else
			data[nd++] = l.v[i];
	}
	rc = data && man ? 0 : -1;
	if (!rc && nd)
		rc = eng_delete_keys(e, data, nd, x);
	if (!rc && nm)
		rc = eng_delete_keys(e, man, nm, x);
	free(data);
	free(man);
	eng_keylist_free(&l);
	eng_hints_forget(e);
	return rc;
}

/* Relative path of sub under mroot ("" when equal), or NULL. */
static const char *rel_to(const char *sub, const char *mroot)
{
	const char *rest;
	return proto_under(sub, mroot, &rest) ? rest : NULL;
}

char *eng_join(const char *a, const char *b)
{
	buf j = BUF_INIT;
	if (a[0] && b[0])
		buf_printf(&j, "%s/%s", a, b);
	else
		buf_puts(&j, a[0] ? a : b);
	return buf_steal(&j);
}

/*
 * The addendum for files of this step in mroot: paths relative to mroot;
 * base is the root of the step relative to mroot (a dir: its own entry
 * too, so an empty one shows).
 */
int eng_put_addendum(eng *e, eng_snap *sn, const char *root, s3_err *x)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	if (!sn->mroot)
		return 0;
	const char *base = rel_to(root, sn->mroot);
	/* mroot's own attributes changed (eng_dir_set): its "dir" */
	if (!base || (!base[0] && sn->kind != T_RATTR)) {
		log_warn("commit: %s is not under its manifest root %s", root,
			 sn->mroot);
		return 0;
	}
	proto_mfile *mf = calloc(sn->nf + 1, sizeof *mf);
	proto_mdir *md = calloc(sn->nd + sn->no + 2, sizeof *md);
	char **paths = calloc(sn->nf + sn->nd + 2, sizeof *paths);
	size_t np = 0, nd = 0;
	int rc = mf && md && paths ? 0 : -1;
	for (size_t i = 0; !rc && i < sn->nf; i++) {
		const char *r = rel_to(sn->f[i].path, root);
		mf[i] = (proto_mfile){paths[np++] = eng_join(base, r ? r : ""),
				      sn->f[i].size,
				      sn->f[i].etag,
				      sn->f[i].crc,
				      true,
				      &sn->f[i].m,
				      PROTO_BLOCK,
				      sn->f[i].blocks};
	}
	if (!rc && sn->is_dir)
		md[nd++] = (proto_mdir){paths[np++] = strdup(base), NULL,
					false};
	for (size_t i = 0; !rc && i < sn->nd; i++) {
		const char *r = rel_to(sn->dpath[i], root);
		md[nd++] = (proto_mdir){paths[np++] = eng_join(base, r ? r : ""),
					&sn->dm[i], false};
	}
	/* the committed directories it was made in, or whose file it
	 * stores again, as they are now: readers take their mtime from
	 * here rather than from the newest LastModified (doc/posix.md,
	 * "Directory attributes"); mroot's own becomes "dir" */
	for (size_t i = 0; !rc && i < sn->no; i++) {
		const char *r = rel_to(sn->opath[i], sn->mroot);
		if (r)
			md[nd++] = (proto_mdir){r, &sn->om[i], true};
	}
	char *json = rc ? NULL
			: proto_manifest_json(e->writer, (uint64_t)sn->id,
					      eng_wall_ns(), mf, sn->nf, md, nd);
	char *key = proto_addendum_key(e->prefix, sn->mroot, e->writer,
				       (uint64_t)sn->id);
	if (!json) {
		memset(x, 0, sizeof *x);
		x->err = EINVAL;
		snprintf(x->msg, sizeof x->msg,
			 "cannot write the addendum manifest of %s", root);
		rc = -1;
	} else {
		rc = eng_put_mem(e, key, json, "application/json", NULL, 0, x);
	}
	for (size_t i = 0; i < np; i++)
		free(paths[i]);
	free(paths);
	free(mf);
	free(md);
	free(json);
	free(key);
	return rc;
}

int eng_garbage_plan(eng_snap *sn, size_t n[3])
{
	/* never a key this step just committed */
	size_t w = 0;
	for (size_t i = 0; i < sn->ng; i++) {
		bool live = false;
		for (size_t k = 0; k < sn->nf && !live; k++)
			live = sn->f[k].key && !strcmp(sn->f[k].key, sn->garbage[i]);
		if (live)
			free(sn->garbage[i]);
		else
			sn->garbage[w++] = sn->garbage[i];
	}
	sn->ng = w;
	/* objects, then manifests, then markers: an old name must never be
	 * left with its objects but without the pending manifest and marker
	 * that hide them */
	char **v = calloc(sn->ng + 1, sizeof *v);
	if (!v)
		return -1;
	size_t at = 0;
	for (int rank = 0; rank < 3; rank++) {
		n[rank] = 0;
		for (size_t i = 0; i < sn->ng; i++) {
			const char *k = sn->garbage[i];
			int r = is_marker_key(k)     ? 2
				: is_manifest_key(k) ? 1
						     : 0;
			if (r == rank) {
				v[at++] = sn->garbage[i];
				n[rank]++;
			}
		}
	}
	if (sn->ng) /* else garbage may be NULL */
		memcpy(sn->garbage, v, sn->ng * sizeof *v);
	free(v);
	return 0;
}

static int delete_garbage(eng *e, eng_snap *sn, s3_err *x)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	size_t n[3];
	int rc = eng_garbage_plan(sn, n);
	/* batch after batch: each rank only once the one before is gone */
	for (size_t rank = 0, at = 0; rank < 3 && !rc; at += n[rank++])
		rc = n[rank] ? eng_delete_keys(e, sn->garbage + at, n[rank], x)
			     : 0;
	return rc;
}

/* ---- steps -------------------------------------------------------------- */

bool eng_dir_needs_object(const eng_snap *sn, size_t i)
{
	/* only empty directories need an object of their own: the keys
	 * under the others make them exist, the root's own manifest makes
	 * it exist */
	if (!strcmp(sn->dpath[i], sn->root))
		return false;
	for (size_t j = 0; j < sn->nf; j++)
		if (proto_under(sn->f[j].path, sn->dpath[i], NULL) &&
		    strcmp(sn->f[j].path, sn->dpath[i]))
			return false;
	for (size_t j = 0; j < sn->nd; j++)
		if (j != i && proto_under(sn->dpath[j], sn->dpath[i], NULL) &&
		    strcmp(sn->dpath[j], sn->dpath[i]))
			return false;
	return true;
}

static int commit_dir(eng *e, eng_snap *sn, s3_err *x)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	int rc = 0;
	buf store = BUF_INIT;
	for (size_t i = 0; !rc && i < sn->nd; i++) {
		if (!eng_dir_needs_object(sn, i))
			continue;
		buf k = BUF_INIT;
		buf_printf(&k, "%s%s/", e->prefix, sn->dpath[i]);
		s3_meta meta[PROTO_META_N];
		size_t nm = proto_object_meta(&sn->dm[i], meta, &store);
		rc = eng_put_mem(e, buf_cstr(&k), "", NULL, meta, nm, x);
		buf_free(&k);
	}
	buf_free(&store);
	proto_mfile *mf = calloc(sn->nf + 1, sizeof *mf);
	proto_mdir *md = calloc(sn->nd + 1, sizeof *md);
	if (!rc && (!mf || !md))
		rc = -1;
	for (size_t i = 0; !rc && i < sn->nf; i++) {
		const char *r = rel_to(sn->f[i].path, sn->root);
		mf[i] = (proto_mfile){r ? r : sn->f[i].path, sn->f[i].size,
				      sn->f[i].etag, sn->f[i].crc, true,
				      &sn->f[i].m, PROTO_BLOCK,
				      sn->f[i].blocks};
	}
	for (size_t i = 0; !rc && i < sn->nd; i++) {
		const char *r = rel_to(sn->dpath[i], sn->root);
		md[i] = (proto_mdir){r ? r : sn->dpath[i], &sn->dm[i], false};
	}
	size_t nd = sn->nd; /* the root's own entry becomes "dir" */
	char *json = rc ? NULL
			: proto_manifest_json(e->writer, (uint64_t)sn->id,
					      eng_wall_ns(), mf, sn->nf, md, nd);
	free(mf);
	free(md);
	if (!rc && !json) {
		memset(x, 0, sizeof *x);
		x->err = EINVAL;
		snprintf(x->msg, sizeof x->msg,
			 "cannot write the manifest of %s (a path is not UTF-8)",
			 sn->root);
		rc = -1;
	}
	char *key = proto_manifest_key(e->prefix, sn->root, e->writer);
	if (!rc) { /* the commit point: no marker renewal may land after it */
		eng_stop_renewal(e, sn->root, sn->id);
		rc = eng_put_mem(e, key, json, "application/json", NULL, 0, x);
		if (rc)
			eng_resume_renewal(e, sn->root, sn->id);
	}
	free(key);
	free(json);
	if (!rc)
		rc = eng_put_addendum(e, sn, sn->root, x);
	if (!rc)
		rc = eng_delete_marker(e, sn->root, sn->id, x); /* commit point */
	if (!rc)
		rc = delete_garbage(e, sn, x);
	if (!rc)
		eng_index_later(e, sn->root);
	return rc;
}

/* Single-file transaction: its PUT or completion is the visibility step.
 * Outside manifests its metadata hint goes first (doc/commit.md, "Metadata
 * hints"): a listing that shows the object shows the hint. */
static int commit_file(eng *e, etxn *t, eng_snap *sn, s3_err *x)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	int rc = 0;
	efile *f = t->files; /* at most one; mu held here */
	if (f && !sn->mroot) {
		char *path = strdup(f->path);
		if (!path) {
			memset(x, 0, sizeof *x);
			x->err = ENOMEM;
			x->http_status = 500; /* retry */
			snprintf(x->msg, sizeof x->msg, "commit: out of memory");
			return -1;
		}
		ckpt_unlock(&e->mu);
		rc = eng_hint_put(e, path, x);
		free(path);
		ckpt_lock(&e->mu);
		if (rc)
			return rc;
		/* renamed meanwhile: it commits in its new place in the
		 * queue (its PUT here went ahead of the commit of the file
		 * it replaced, which then won) */
		if (strcmp(t->root, sn->root))
			return -2;
		f = t->files;
		/* an fsync meanwhile may have started a multipart upload of
		 * it (want_durable): the step waits for it (eng_step_ready)
		 * and runs again, never a second upload beside it */
		if (f && f->jobs)
			return -2;
	}
	if (f && f->state != F_STORED) {
		char *key = f->key && f->upload_id
				? strdup(f->key)
				: proto_key(e->prefix, f->path);
		char etag[S3_ETAG_MAX] = "";
		uint32_t crc = 0;
		char *blocks = NULL;
		unsigned gen = f->gen;
		/* the file's one upload in flight (commit/internal.h) */
		CKPTFS_ASSERT(f->jobs == 0);
		f->jobs++; /* keeps workers off it */
		f->refs++;
		struct eng_busy b;
		eng_key_claim(e, &b, key);
		if (f->state == F_PARTS) {
			s3_part *p = calloc(f->n_parts, sizeof *p);
			size_t n = f->n_parts;
			char *id = strdup(f->upload_id);
			for (unsigned i = 0; p && i < n; i++) {
				p[i].number = i + 1;
				snprintf(p[i].etag, sizeof p[i].etag, "%s",
					 f->petag[i]);
				crc = i ? proto_crc32c_combine(
					      crc, f->pcrc[i],
					      i + 1 == n ? f->size - (uint64_t)i *
								      f->part_size
							 : f->part_size)
					: f->pcrc[i];
			}
			blocks = eng_parts_blocks(f);
			ckpt_unlock(&e->mu);
			rc = p && id ? eng_complete_mpu(e, key, id, p, n, etag, x)
				     : -1;
			free(p);
			free(id);
		} else {
			uint64_t sid = f->sid, size = f->size;
			proto_meta m;
			eng_meta_copy(&m, &f->m);
			ckpt_unlock(&e->mu);
			rc = eng_put_file(e, key, sid, size, &m, etag, &crc,
					  &blocks, x);
			proto_meta_free(&m);
		}
		ckpt_lock(&e->mu);
		eng_key_release(e, &b);
		f->jobs--;
		if (rc == 0 && f->gen == gen && f->t)
			eng_file_stored(e, f, key, etag, crc, blocks);
		else if (rc == 0)
			rc = -2; /* changed meanwhile: run the step again */
		free(blocks);
		eng_file_unref(e, f);
		free(key);
		if (rc)
			return rc;
		eng_snap_free(sn);
		eng_snap_take(e, t, sn);
	}
	ckpt_unlock(&e->mu);
	rc = eng_put_addendum(e, sn, sn->root, x);
	if (!rc)
		rc = delete_garbage(e, sn, x);
	ckpt_lock(&e->mu);
	return rc;
}

/*
 * The delete of a directory (doc/commit.md, "Deletes and renames"): the
 * PUT of its delete record is the commit point (every reader shows the
 * directory gone from then on, whatever happens to this writer), then its
 * keys go, data first, then the record.  Everything after the record is
 * finished by whoever gets there: this step run again after a crash, or
 * `ckptfs gc` on any host.
 */
int eng_put_gone(eng *e, const char *path, s3_err *x)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	char *k = proto_gone_key(e->prefix, path, e->writer);
	s3_meta meta[1] = {{"writer", e->writer}};
	int rc = k ? eng_put_mem(e, k, "", NULL, meta, 1, x) : -1;
	free(k);
	return rc;
}

int eng_finish_delete(eng *e, const char *path, s3_err *x)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	int rc = delete_tree(e, path, x);
	char *k = rc ? NULL : proto_gone_key(e->prefix, path, e->writer);
	if (k)
		rc = s3_delete_object(e->s3, k, x);
	free(k);
	return rc;
}

static int delete_one(eng *e, const char *path, bool is_dir, s3_err *x)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	if (!is_dir) {
		char *k = proto_key(e->prefix, path);
		int rc = s3_delete_object(e->s3, k, x);
		free(k);
		/* then its metadata hint, if it had one (204 if not) */
		if (!rc)
			rc = eng_hint_delete(e, path, x);
		return rc;
	}
	int rc = eng_put_gone(e, path, x); /* commit point */
	return rc ? rc : eng_finish_delete(e, path, x);
}

/* A remote delete; keep (the parent it would leave with nothing under
 * its prefix) first gets its empty directory object, as a committed
 * empty directory has, so it stays, with no moment between the delete
 * and that PUT where a listing finds no parent (a PUT of a fixed key:
 * idempotent; in a directory with other names it changes nothing), when
 * path is there to delete (remote_exists). */
/* Whether path (a file's object, or anything under a directory) is in
 * the bucket: one HEAD, or a LIST of one key.  0 or -1 (x). */
static int remote_exists(eng *e, const char *path, bool is_dir, bool *yes,
			 s3_err *x)
{
	buf k = BUF_INIT;
	buf_printf(&k, "%s%s%s", e->prefix, path, is_dir ? "/" : "");
	int rc;
	if (is_dir) {
		s3_list_result r = {0};
		rc = s3_list_page(e->s3, buf_cstr(&k), NULL, NULL, 1, &r, x);
		*yes = !rc && (r.n_objects > 0 || r.n_prefixes > 0);
		s3_list_result_free(&r);
	} else {
		s3_head_result h;
		rc = s3_head(e->s3, buf_cstr(&k), &h, x);
		*yes = rc == 0;
		if (rc && x->err == ENOENT)
			rc = 0;
	}
	buf_free(&k);
	return rc;
}

static int remote_delete(eng *e, const char *path, bool is_dir,
			 const char *keep, s3_err *x)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	int rc = 0;
	bool there = true;
	/* nothing there (its transaction committed at another name, or
	 * another host removed it): the delete removes nothing, and keeping
	 * the parent would make a directory at a name nobody has (a
	 * removal in a checkpoint then renamed, model regression
	 * rmdir_in_a_committing_root_then_the_root_renamed) */
	if (keep && keep[0])
		rc = remote_exists(e, path, is_dir, &there, x);
	if (!rc && there && keep && keep[0]) {
		buf k = BUF_INIT;
		buf_printf(&k, "%s%s/", e->prefix, keep);
		rc = eng_put_mem(e, buf_cstr(&k), "", NULL, NULL, 0, x);
		buf_free(&k);
	}
	return rc ? rc : delete_one(e, path, is_dir, x);
}

/* Whether this writer's delete record of path exists: a rename resumed
 * after its commit point only finishes. */
int eng_gone_exists(eng *e, const char *path, bool *yes, s3_err *x)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	char *k = proto_gone_key(e->prefix, path, e->writer);
	s3_head_result h;
	int rc = k ? s3_head(e->s3, k, &h, x) : -1;
	free(k);
	*yes = rc == 0;
	if (rc && x->err == ENOENT)
		rc = 0;
	return rc;
}

/* Whether sn's file path of key is listed in l with its ETag. */
static bool stored_as_listed(const keylist *l, const eng_snap_file *f)
{
	size_t lo = 0, hi = l->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(f->key, l->v[mid]);
		if (c == 0)
			return l->o[mid].etag && f->etag &&
			       s3_etag_equal(l->o[mid].etag, f->etag);
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return false;
}

/*
 * A directory transaction resumed after a restart, with files stored
 * before it: its writer may have been away longer than its lease, and a
 * gc on another host then rolled it back (deleted its objects, its intent
 * and its marker).  Before its commit point the objects are checked with
 * one LIST of the root; files whose object is gone or different go back
 * to staged (the staging files are kept until the commit) and the step
 * fails transiently, to run again once they are uploaded.  Called with
 * mu; drops it around the LIST.
 */
static int verify_stored(eng *e, etxn *t, eng_snap *sn, s3_err *x)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	t->check_stored = false;
	ckpt_unlock(&e->mu);
	buf p = BUF_INIT;
	buf_printf(&p, "%s%s/", e->prefix, sn->root);
	keylist l = {0};
	int rc = eng_list_under(e, buf_cstr(&p), &l, x);
	buf_free(&p);
	ckpt_lock(&e->mu);
	if (rc) {
		t->check_stored = true;
		eng_keylist_free(&l);
		return rc;
	}
	size_t gone = 0;
	for (size_t i = 0; i < sn->nf; i++) {
		if (!sn->f[i].key || stored_as_listed(&l, &sn->f[i]))
			continue;
		for (efile *f = t->files; f; f = f->next) {
			if (f->state != F_STORED || strcmp(f->path, sn->f[i].path))
				continue;
			f->state = F_STAGED;
			f->etag[0] = 0;
			f->bytes_done = 0;
			jr_file_set_state(e->j, f->id, F_STAGED);
			eng_sched_file(e, f);
			gone++;
		}
	}
	eng_keylist_free(&l);
	if (!gone)
		return 0;
	memset(x, 0, sizeof *x);
	x->err = EAGAIN;
	x->http_status = 503; /* transient: the step runs again */
	snprintf(x->msg, sizeof x->msg,
		 "%zu object(s) of %s were removed while this writer was away "
		 "(a gc rolled the transaction back): uploading them again",
		 gone, sn->root);
	log_warn("commit: %s", x->msg);
	pthread_cond_broadcast(&e->cv);
	return -1;
}

int eng_run_step(eng *e, etxn *t, eng_snap *sn, s3_err *x)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	int rc;
	if (t->kind == T_FILE)
		return commit_file(e, t, sn, x);
	if (t->kind == T_DIR && t->check_stored &&
	    verify_stored(e, t, sn, x) < 0)
		return -1;
	ckpt_unlock(&e->mu);
	switch (t->kind) {
	case T_DIR:
		rc = commit_dir(e, sn, x);
		break;
	case T_RATTR: /* one PUT: its record (eng_dir_set) */
		rc = eng_put_addendum(e, sn, sn->root, x);
		break;
	default: /* T_RDEL; renames are renames.c's (eng_run_rename) */
		rc = remote_delete(e, sn->root, sn->is_dir, sn->dest, x);
		break;
	}
	ckpt_lock(&e->mu);
	return rc;
}
