/*
 * eng renames: the remote rename step of a committed name (doc/commit.md,
 * "Commit points"), mu not held:
 *
 *  - a directory: a marker and an intent at the new name, a server-side
 *    copy per object, the new name's manifest with "renamed_from", the old
 *    name's delete record (the commit point), the marker's DELETE, the
 *    manifest again without "renamed_from", then the old name's delete
 *    (steps.c); resumed past its commit point it only finishes;
 *  - a file: outside manifests the new name's hint before the copy, the
 *    addendum inside a governed directory, then the old object and hint.
 *
 * Shares steps.c's small S3 helpers (internal.h, "steps.c").
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "commit/internal.h"
#include "proto/visibility.h"
#include "util/log.h"

/* Whether the new name holds this rename's own manifest (its transaction
 * id; "renamed_from" the old name, or no longer), committed: the rename
 * passed its commit point and someone (a gc) finished the old name and
 * its record. */
static bool rename_landed(eng *e, const eng_snap *sn)
{
	char *body, *from = NULL, *writer = NULL;
	size_t len;
	if (eng_get_manifest(e, sn->dest, &body, &len) < 0)
		return false;
	bool committed = false;
	uint64_t txn = 0;
	char *rel = proto_rel_path(sn->dest, sn->root);
	/* with "renamed_from" (written before the commit point) or without
	 * (the rewrite after it): either is this rename's, past its point */
	int has = proto_manifest_renamed_from(body, len, &from, &writer);
	bool yes = proto_manifest_state(body, len, &committed, &txn) == 0 &&
		   committed && txn == (uint64_t)sn->id &&
		   (has == 0 || (has == 1 && rel && !strcmp(from, rel)));
	free(rel);
	free(from);
	free(writer);
	free(body);
	return yes;
}

static int copy_one(eng *e, const char *src, const char *dst, uint64_t size,
		    const char *etag, char out[S3_ETAG_MAX], s3_err *x)
{
	s3_copy_opts co = {.directive = S3_METADATA_COPY, .size = size,
			   .src_if_match = etag};
	if (size <= S3_MAX_PUT_SIZE)
		return s3_copy_object(e->s3, src, dst, &co, out, x);
	s3_head_ext_result h = {0};
	int rc = s3_head_ext(e->s3, src, &h, x);
	s3_put_opts po = {.meta = h.meta, .n_meta = h.n_meta,
			  .content_type = h.content_type[0] ? h.content_type
							    : NULL};
	char *id = NULL;
	if (!rc)
		rc = s3_mpu_create(e->s3, dst, &po, &id, NULL, x);
	s3_head_ext_result_free(&h);
	uint64_t ps = s3_part_size(size, 512 * S3_MIB);
	size_t n = (size_t)s3_part_count(size, ps);
	s3_part *p = calloc(n, sizeof *p);
	for (size_t i = 0; !rc && i < n; i++) {
		uint64_t first = i * ps;
		uint64_t last = first + ps > size ? size - 1 : first + ps - 1;
		p[i].number = (unsigned)i + 1;
		rc = p ? s3_upload_part_copy(e->s3, src, first, last, etag, dst,
					     id, (unsigned)i + 1, p[i].etag, x)
		       : -1;
	}
	s3_head_result hh;
	if (!rc && etag && s3_head(e->s3, src, &hh, x) == 0 &&
	    strcmp(hh.etag, etag)) {
		x->err = ESTALE;
		snprintf(x->msg, sizeof x->msg, "copy of %s: source changed",
			 src);
		rc = -1;
	}
	if (!rc)
		rc = s3_mpu_complete(e->s3, dst, id, p, n, out, x);
	else if (id) {
		s3_err ax;
		s3_mpu_abort(e->s3, dst, id, &ax);
	}
	free(p);
	free(id);
	return rc;
}

static int load_src_manifests(eng *e, keylist *l, size_t plen,
			      vis_manifest *vm, s3_err *x)
{
	int rc = 0;
	for (size_t i = 0; !rc && i < l->n; i++) {
		const char *rel = l->v[i] + plen;
		if (!proto_is_meta_key(rel) ||
		    !proto_is_manifest_name(rel + sizeof PROTO_META_DIR))
			continue;
		/* whole: one rewritten since it was listed is longer */
		char *body = NULL;
		size_t got = 0;
		rc = s3_get_object(e->s3, l->v[i], PROTO_MANIFEST_MAX, NULL,
				   &body, &got, NULL, x);
		if (!rc)
			vis_manifest_add_json(vm, body, got, NULL);
		free(body);
	}
	vis_manifest_finish(vm);
	return rc;
}

static void object_attrs(const s3_head_ext_result *h, proto_meta *m);

/* The manifests of transaction root mroot into *vm (a directory renamed
 * inside it has none of its own: these record its files and its
 * directories, paths relative to mroot). */
static int load_root_manifests(eng *e, const char *mroot, vis_manifest *vm,
			       s3_err *x)
{
	buf p = BUF_INIT;
	buf_printf(&p, "%s%s%s", e->prefix, mroot, mroot[0] ? "/" : "");
	size_t plen = p.len;
	buf_printf(&p, "%s/", PROTO_META_DIR);
	keylist l = {0};
	int rc = eng_list_under(e, buf_cstr(&p), &l, x);
	if (!rc)
		rc = load_src_manifests(e, &l, plen, vm, x);
	eng_keylist_free(&l);
	buf_free(&p);
	return rc;
}

/* The manifests that govern src, a directory with no committed ones of
 * its own, into *vm: its nearest ancestor's that has committed ones (the
 * transaction root it was made in, whose manifests readers take its
 * files and directories from, fs/nodes.c root_manifest), and src's path
 * below that root in *base.  The rename's manifest root (sn->mroot) is
 * the new name's, another one when src moves out of its root (model
 * seed 7100: it moved without its files' and directories' attributes).
 * *vm is left as it was when no ancestor has any.  0 or -1 (x). */
static int load_governing_root(eng *e, const char *src, vis_manifest *vm,
			       const char **base, s3_err *x)
{
	char *anc = strdup(src);
	if (!anc) {
		x->err = ENOMEM;
		snprintf(x->msg, sizeof x->msg, "rename of %s: out of memory",
			 src);
		return -1;
	}
	int rc = 0;
	for (bool top = false; !rc && !top;) {
		char *cut = strrchr(anc, '/');
		top = !cut; /* the bucket's top, last */
		*(cut ? cut : anc) = '\0';
		vis_manifest m;
		vis_manifest_init(&m);
		rc = load_root_manifests(e, anc, &m, x);
		if (!rc && m.committed > 0) {
			vis_manifest_free(vm);
			*vm = m;
			*base = src + strlen(anc) + (anc[0] ? 1 : 0);
			break;
		}
		vis_manifest_free(&m);
	}
	free(anc);
	return rc;
}

/* The entry of the source's file rel in vm, whose paths are relative to
 * base (the source's own manifests: ""). */
static const vis_file *src_file(const vis_manifest *vm, const char *base,
				const char *rel)
{
	if (!base[0])
		return vis_manifest_find(vm, rel);
	char *p = eng_join(base, rel);
	const vis_file *v = p ? vis_manifest_find(vm, p) : NULL;
	free(p);
	return v;
}

/* The directories of the source as vm (paths relative to base) recorded
 * them, relative to the source (its own: ""), with their attributes,
 * into md and dm (room for vm->n_dirs + 1); returns how many. */
static size_t src_dirs(const vis_manifest *vm, const char *base,
		       proto_mdir *md, proto_meta *dm)
{
	size_t n = 0, bl = strlen(base);
	for (size_t i = 0; i < vm->n_dirs; i++) {
		const char *d = vm->dirs[i];
		if (bl && (strncmp(d, base, bl) || d[bl] != '/'))
			continue; /* not under the source */
		const vis_file *v = vis_manifest_dir(vm, d);
		if (v)
			vis_file_meta(v, &dm[n]);
		md[n] = (proto_mdir){bl ? d + bl + 1 : d, v ? &dm[n] : NULL,
				     false};
		n++;
	}
	const vis_file *rv = vis_manifest_dir(vm, base);
	if (rv) { /* and the source's own (the new name's "dir") */
		vis_file_meta(rv, &dm[n]);
		md[n] = (proto_mdir){"", &dm[n], false};
		n++;
	}
	return n;
}

/* The source's own attributes as the writer showed them (eng_remote_rename_in
 * records them as a row at the source's path): its record may be in the
 * root above it (a chmod stored there, eng_dir_set), which the source's
 * manifests do not hold.  They become the new name's "dir" in md and dm
 * (room for one more than n); returns how many entries there are. */
static size_t own_attrs(const eng_snap *sn, proto_mdir *md, proto_meta *dm,
			size_t n)
{
	for (size_t i = 0; i < sn->nd; i++) {
		if (strcmp(sn->dpath[i], sn->root))
			continue;
		size_t k = 0;
		while (k < n && md[k].path[0])
			k++;
		if (k < n)
			proto_meta_free(&dm[k]);
		eng_meta_copy(&dm[k], &sn->dm[i]);
		md[k] = (proto_mdir){"", &dm[k], false};
		return k < n ? n : n + 1;
	}
	return n;
}

/* Whether the sorted listing l holds key. */
static bool listed(const keylist *l, const char *key)
{
	size_t lo = 0, hi = l->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(key, l->v[mid]);
		if (c == 0)
			return true;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return false;
}

/* Whether the file rel of listing l (the keys under prefix p) has a
 * metadata hint there. */
static bool hinted_in(const keylist *l, const char *p, const char *rel)
{
	char *k = proto_hint_key(p, rel);
	bool yes = k && listed(l, k);
	free(k);
	return yes;
}

/* eng_rename_dir's copies: every object under the old name (l, keys
 * plen bytes into the prefix p) but the root's own manifests and hints
 * goes to the new name; the files among them are recorded in nf (*n of
 * them), with the attributes the source's manifests vm (governed: any
 * committed, files under base) or metadata give them.  0 or -1 (x). */
static int copy_objects(eng *e, const eng_snap *sn, const keylist *l,
			size_t plen, buf *p, const vis_manifest *vm,
			const char *base, bool governed, eng_snap_file *nf,
			size_t *n_out, s3_err *x)
{
	int rc = 0;
	size_t n = 0;
	for (size_t i = 0; !rc && nf && i < l->n; i++) {
		const char *rel = l->v[i] + plen;
		/* hints are not copied: the new name's manifest governs
		 * everything under it and carries the attributes */
		if (proto_is_meta_key(rel) || proto_in_hint_dir(rel))
			continue;
		buf d = BUF_INIT;
		buf_printf(&d, "%s%s/%s", e->prefix, sn->dest, rel);
		char etag[S3_ETAG_MAX] = "";
		rc = copy_one(e, l->v[i], buf_cstr(&d), l->o[i].size,
			      l->o[i].etag, etag, x);
		buf_free(&d);
		size_t rl = strlen(rel);
		if (rc || !rl || rel[rl - 1] == '/')
			continue; /* directory objects are not files */
		const vis_file *v = governed ? src_file(vm, base, rel) : NULL;
		if (governed && !v)
			continue; /* invisible in the source: not listed */
		eng_snap_file *s = &nf[n++];
		s->path = strdup(rel);
		s->etag = strdup(etag);
		s->size = l->o[i].size;
		s->crc = v && v->has_crc ? v->crc32c : 0;
		/* a copy has the same bytes: the same block checksums */
		s->blocks = v && v->blocks && v->size == s->size &&
				    v->block == PROTO_BLOCK
				? strdup(v->blocks)
				: NULL;
		if (v) {
			vis_file_meta(v, &s->m);
		} else if (hinted_in(l, buf_cstr(p), rel)) {
			/* outside manifests with ckptfs metadata: the
			 * manifest keeps what the object recorded */
			s3_head_ext_result h = {0};
			rc = s3_head_ext(e->s3, l->v[i], &h, x);
			if (!rc)
				object_attrs(&h, &s->m);
			s3_head_ext_result_free(&h);
		} else {
			s->m.mode = 0644;
		}
	}
	*n_out = n;
	return rc;
}

/* eng_rename_dir's manifest at the new name, for the files nf (n) and
 * directories md (nd) copied; committed only once the old name's delete
 * record exists (proto/manifest.h, "renamed_from").  *final_json: the
 * manifest without that condition, to store after the commit point.
 * 0 or -1 (x). */
static int put_new_manifest(eng *e, const eng_snap *sn,
			    const vis_manifest *vm, const char *base,
			    bool governed, eng_snap_file *nf, size_t n,
			    proto_mdir *md, const proto_meta *dm, size_t nd,
			    char **final_json, s3_err *x)
{
	int rc;
	proto_mfile *mf = calloc(n + 1, sizeof *mf);
	for (size_t i = 0; mf && i < n; i++) {
		const vis_file *v = governed ? src_file(vm, base,
							nf[i].path)
					     : NULL;
		mf[i] = (proto_mfile){nf[i].path, nf[i].size,
				      nf[i].etag, nf[i].crc,
				      v && v->has_crc, &nf[i].m,
				      PROTO_BLOCK, nf[i].blocks};
	}
	char *json = mf && md && dm ? proto_manifest_json(
					e->writer, (uint64_t)sn->id,
					eng_wall_ns(), mf, n, md, nd)
			      : NULL;
	char *key = proto_manifest_key(e->prefix, sn->dest, e->writer);
	/* committed only once the old name's delete record exists
	 * (proto/manifest.h, "renamed_from") */
	char *rel = proto_rel_path(sn->dest, sn->root);
	char *cond = json && rel ? proto_manifest_with_from(json, rel)
				 : NULL;
	/* no renewal of the new name's marker may land after its
	 * manifest: it would hide it past the commit point */
	eng_stop_renewal(e, sn->dest, 0);
	rc = cond ? eng_put_mem(e, key, cond, "application/json", NULL, 0, x)
		  : -1;
	if (rc)
		eng_resume_renewal(e, sn->dest, 0);
	*final_json = json;
	free(cond);
	free(rel);
	free(key);
	free(mf);
	return rc;
}

/* eng_rename_dir's addendum at the new name: it lists the new name's
 * files (nf, n: their paths made full here) and the moved directories'
 * attributes (md, nd), the new name's own included, which the root's
 * readers find there: they take a directory's attributes from the root
 * above it before its own "dir", and that root may record the directory
 * the rename replaced (model seed 9002).  0 or -1 (x). */
static int put_moved_addendum(eng *e, const eng_snap *sn, eng_snap_file *nf,
			      size_t n, proto_mdir *md, size_t nd, s3_err *x)
{
	int rc;
	/* the addendum lists the new name's files */
	eng_snap tmp = *sn;
	tmp.f = nf;
	tmp.nf = n;
	tmp.nd = 0;
	tmp.is_dir = true;
	char **dpath = calloc(nd + 1, sizeof *dpath);
	proto_meta *adm = dpath ? calloc(nd + 1, sizeof *adm) : NULL;
	size_t k = 0;
	bool ok = adm != NULL;
	for (size_t i = 0; ok && i < nd; i++) {
		if (!md[i].m)
			continue; /* recorded no attributes */
		dpath[k] = eng_join(sn->dest, md[i].path);
		ok = dpath[k] != NULL;
		if (ok)
			adm[k++] = *md[i].m; /* borrowed from dm */
	}
	if (ok) {
		tmp.nd = k;
		tmp.dpath = dpath;
		tmp.dm = adm;
	}
	for (size_t i = 0; i < n; i++) {
		char *full = eng_join(sn->dest, nf[i].path);
		free(nf[i].path);
		nf[i].path = full;
	}
	rc = eng_put_addendum(e, &tmp, sn->dest, x);
	for (size_t i = 0; dpath && i < k; i++)
		free(dpath[i]);
	free(dpath);
	free(adm);
	return rc;
}

int eng_rename_dir(eng *e, eng_snap *sn, s3_err *x)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	buf p = BUF_INIT;
	buf_printf(&p, "%s%s/", e->prefix, sn->root);
	size_t plen = p.len;
	keylist l = {0};
	vis_manifest vm;
	vis_manifest_init(&vm);
	bool decided = false;
	int rc = eng_gone_exists(e, sn->root, &decided, x);
	if (!rc && (decided || rename_landed(e, sn))) {
		/* resumed past the commit point: finish, never copy again
		 * (the old name may be gone already: a gc finished it) */
		vis_manifest_free(&vm);
		buf_free(&p);
		rc = eng_delete_marker(e, sn->dest, 0, x);
		return rc || !decided ? rc : eng_finish_delete(e, sn->root, x);
	}
	eng_hold_marker(e, sn->dest);
	if (!rc)
		rc = eng_put_marker(e, sn->dest, x);
	/* an intent at the new name: a writer that dies while copying
	 * leaves an abandoned transaction (hidden once its marker expires,
	 * removed by gc), never a directory of other tools' objects */
	if (!rc)
		rc = eng_put_intent(e, sn->dest, (uint64_t)sn->id, x);
	if (!rc)
		rc = eng_list_under(e, buf_cstr(&p), &l, x);
	if (!rc && l.n == 0) {
		/* nothing to copy: the source went away (another host deleted
		 * it); never a new name made of nothing */
		memset(x, 0, sizeof *x);
		x->err = ENOENT;
		x->http_status = 404;
		snprintf(x->msg, sizeof x->msg,
			 "rename of %s: it is gone from the bucket", sn->root);
		rc = -1;
	}
	if (!rc)
		rc = load_src_manifests(e, &l, plen, &vm, x);
	/* a directory inside its transaction root (not a root itself): the
	 * root's manifests record its files and directories, under base */
	const char *base = "";
	if (!rc && vm.committed == 0)
		rc = load_governing_root(e, sn->root, &vm, &base, x);
	bool governed = vm.committed > 0;
	char *final_json = NULL; /* the new name's manifest, unconditional */
	/* copy every object but the root's own manifests */
	eng_snap_file *nf = calloc(l.n + 1, sizeof *nf);
	size_t n = 0;
	if (!rc)
		rc = copy_objects(e, sn, &l, plen, &p, &vm, base, governed, nf,
				  &n, x);
	/* the directories keep the attributes they recorded, in the new
	 * name's manifest and, inside a root, in the root's addendum */
	proto_mdir *md = calloc(vm.n_dirs + 2, sizeof *md);
	proto_meta *dm = calloc(vm.n_dirs + 2, sizeof *dm);
	size_t nd = md && dm ? src_dirs(&vm, base, md, dm) : 0;
	if (md && dm)
		nd = own_attrs(sn, md, dm, nd);
	if (!rc)
		rc = put_new_manifest(e, sn, &vm, base, governed, nf, n, md, dm,
				      nd, &final_json, x);
	if (!rc)
		rc = put_moved_addendum(e, sn, nf, n, md, nd, x);
	/* the old name's delete record is the commit point: from here on
	 * the rename is finished, not undone (gone_exists above) */
	if (!rc)
		rc = eng_put_gone(e, sn->root, x);
	if (!rc)
		rc = eng_delete_marker(e, sn->dest, 0, x); /* new name visible */
	if (!rc) { /* readers of the new name stop checking the old one */
		char *key = proto_manifest_key(e->prefix, sn->dest, e->writer);
		rc = eng_put_mem(e, key, final_json, "application/json", NULL, 0, x);
		free(key);
	}
	if (!rc)
		rc = eng_finish_delete(e, sn->root, x); /* hints included */
	free(final_json);
	free(md);
	for (size_t i = 0; dm && i < vm.n_dirs + 1; i++)
		proto_meta_free(&dm[i]);
	free(dm);
	for (size_t i = 0; nf && i < n; i++) {
		free(nf[i].path);
		free(nf[i].etag);
		free(nf[i].blocks);
		proto_meta_free(&nf[i].m);
	}
	free(nf);
	vis_manifest_free(&vm);
	eng_keylist_free(&l);
	buf_free(&p);
	return rc;
}

/* The attributes an object's metadata records (its writer's, which the
 * copy keeps), into *m: mode 0644 and no owner when it has none. */
static void object_attrs(const s3_head_ext_result *h, proto_meta *m)
{
	char *xj = NULL;
	unsigned has = proto_object_meta_parse(h->meta, h->n_meta, m, &xj);
	if (!(has & PROTO_HAS_MODE))
		m->mode = 0644;
	buf b = BUF_INIT;
	proto_xattrs_decode(xj, &b);
	m->xattrs_len = b.len;
	m->xattrs = buf_steal(&b);
	free(xj);
}

/* Whether an object's metadata is ckptfs' (it records a mode). */
static bool has_ckptfs_meta(const s3_head_ext_result *h)
{
	proto_meta m;
	char *xj = NULL;
	unsigned has = proto_object_meta_parse(h->meta, h->n_meta, &m, &xj);
	free(xj);
	proto_meta_free(&m);
	return (has & PROTO_HAS_MODE) != 0;
}

int eng_rename_file(eng *e, eng_snap *sn, s3_err *x)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	char *src = proto_key(e->prefix, sn->root);
	char *dst = proto_key(e->prefix, sn->dest);
	s3_head_ext_result h;
	char etag[S3_ETAG_MAX] = "";
	int rc = s3_head_ext(e->s3, src, &h, x);
	bool copied = false;
	if (rc && x->err == ENOENT) {
		/* a resumed rename whose copy already happened */
		s3_head_ext_result_free(&h);
		rc = s3_head_ext(e->s3, dst, &h, x);
		copied = true;
		if (!rc)
			snprintf(etag, sizeof etag, "%s", h.etag);
	}
	/* outside manifests, an object with ckptfs metadata: the new name's
	 * hint before the copy makes it visible */
	if (!rc && !sn->mroot && has_ckptfs_meta(&h))
		rc = eng_hint_put(e, sn->dest, x);
	if (!rc && !copied)
		rc = copy_one(e, src, dst, h.size, h.etag, etag, x);
	if (!rc && sn->mroot) {
		eng_snap tmp = *sn;
		/* the new name keeps the type, mode, owner, times, device
		 * number, symlink target and xattrs the object recorded */
		eng_snap_file f = {.path = sn->dest, .etag = etag, .size = h.size};
		object_attrs(&h, &f.m);
		tmp.f = &f;
		tmp.nf = 1;
		tmp.nd = 0;
		tmp.is_dir = false;
		rc = eng_put_addendum(e, &tmp, sn->dest, x);
		proto_meta_free(&f.m);
	}
	s3_head_ext_result_free(&h);
	if (!rc)
		rc = s3_delete_object(e->s3, src, x);
	if (!rc) /* the old name's hint, after its object */
		rc = eng_hint_delete(e, sn->root, x);
	free(src);
	free(dst);
	return rc;
}


/*
 * The old name's parent, when the step records its attributes (a
 * directory written through ckptfs, not the mount root:
 * wr_rename_records), gets its empty directory object before anything
 * moves, so a rename of its last name leaves it, as on a local disk and
 * as an unlink does (remote_delete, steps.c; doc/posix.md "Removing the
 * last name of a directory").  A PUT of a fixed key: a step resumed
 * after a crash sends it again; in a directory with other names it
 * changes nothing.  0 or -1 (x).
 */
static int keep_old_parent(eng *e, const eng_snap *sn, s3_err *x)
{
	const char *slash = strrchr(sn->root, '/');
	if (!slash)
		return 0; /* the mount root stays anyway */
	size_t plen = (size_t)(slash - sn->root);
	for (size_t i = 0; i < sn->no; i++) {
		if (strlen(sn->opath[i]) != plen ||
		    strncmp(sn->opath[i], sn->root, plen) != 0)
			continue;
		buf k = BUF_INIT;
		buf_printf(&k, "%s%s/", e->prefix, sn->opath[i]);
		int rc = eng_put_mem(e, buf_cstr(&k), "", NULL, NULL, 0, x);
		buf_free(&k);
		return rc;
	}
	return 0;
}

/* The rename step of t: called and returns with mu (as eng_run_step). */
int eng_run_rename(eng *e, etxn *t, eng_snap *sn, s3_err *x)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	(void)t;
	ckpt_unlock(&e->mu);
	int rc = keep_old_parent(e, sn, x);
	if (!rc)
		rc = sn->is_dir ? eng_rename_dir(e, sn, x)
				: eng_rename_file(e, sn, x);
	ckpt_lock(&e->mu);
	return rc;
}
