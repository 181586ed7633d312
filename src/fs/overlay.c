/*
 * ov: the local overlay (fs/overlay.h).  A chained hash table by path;
 * directory walks scan it, which is cheap for what one mount has pending
 * (checkpoints are hundreds of files, not millions).
 */
#include "fs/overlay.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "util/hex.h"
#include "util/vec.h"

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

int ov_init(ov_table *t)
{
	memset(t, 0, sizeof *t);
	t->nb = 256;
	t->b = calloc(t->nb, sizeof *t->b);
	return t->b ? 0 : -1;
}

static void node_free(ov_node *n)
{
	if (n->st)
		ov_stage_unref(n->st);
	buf_free(&n->xattrs);
	free(n->target);
	free(n->path);
	free(n);
}

void ov_destroy(ov_table *t)
{
	for (size_t i = 0; t->b && i < t->nb; i++) {
		for (ov_node *n = t->b[i], *nx; n; n = nx) {
			nx = n->hnext;
			n->linked = false;
			if (n->refs == 0)
				node_free(n);
		}
	}
	free(t->b);
	while (t->txns) {
		ov_txn *x = t->txns;
		t->txns = x->next;
		free(x->root);
		free(x);
	}
	memset(t, 0, sizeof *t);
}

ov_node *ov_get(ov_table *t, const char *path)
{
	for (ov_node *n = t->b[hash_str(path) % t->nb]; n; n = n->hnext)
		if (!strcmp(n->path, path))
			return n;
	return NULL;
}

static void insert(ov_table *t, ov_node *n)
{
	size_t s = hash_str(n->path) % t->nb;
	n->hnext = t->b[s];
	t->b[s] = n;
}

static void unhash(ov_table *t, ov_node *n)
{
	ov_node **pp = &t->b[hash_str(n->path) % t->nb];
	for (; *pp; pp = &(*pp)->hnext) {
		if (*pp == n) {
			*pp = n->hnext;
			break;
		}
	}
}

static void grow(ov_table *t)
{
	size_t nb = t->nb * 2;
	ov_node **b = calloc(nb, sizeof *b);
	if (!b)
		return;
	for (size_t i = 0; i < t->nb; i++) {
		for (ov_node *n = t->b[i], *nx; n; n = nx) {
			nx = n->hnext;
			size_t s = hash_str(n->path) % nb;
			n->hnext = b[s];
			b[s] = n;
		}
	}
	free(t->b);
	t->b = b;
	t->nb = nb;
}

void ov_node_set_txn(ov_node *n, ov_txn *x)
{
	if (n->txn) {
		n->txn->nodes--;
		n->txn->open -= n->opens;
	}
	n->txn = x;
	if (x) {
		x->nodes++;
		x->open += n->opens;
	}
}

ov_node *ov_add(ov_table *t, const char *path, ov_kind kind, ov_txn *txn)
{
	ov_node *n = calloc(1, sizeof *n);
	if (!n || !(n->path = strdup(path))) {
		free(n);
		return NULL;
	}
	n->kind = kind;
	n->txn = txn;
	if (txn)
		txn->nodes++;
	clock_gettime(CLOCK_REALTIME, &n->mtime);
	n->ctime = n->mtime;
	n->linked = true;
	if (t->n + 1 > t->nb)
		grow(t);
	insert(t, n);
	t->n++;
	return n;
}

void ov_remove(ov_table *t, ov_node *n)
{
	if (!n->linked)
		return;
	unhash(t, n);
	t->n--;
	n->linked = false;
	if (n->txn)
		n->txn->nodes--;
	if (n->refs == 0)
		node_free(n);
}

void ov_node_ref(ov_node *n)
{
	n->refs++;
}

void ov_node_unref(ov_node *n)
{
	if (--n->refs == 0 && !n->linked)
		node_free(n);
}

static bool under(const char *path, const char *dir, size_t dl)
{
	if (dl == 0)
		return path[0] != 0;
	return !strncmp(path, dir, dl) && path[dl] == '/';
}

int ov_move(ov_table *t, const char *from, const char *to)
{
	size_t fl = strlen(from);
	/* collect first: rehashing while walking would revisit nodes */
	size_t cap = 16, k = 0;
	ov_node **v = malloc(cap * sizeof *v);
	if (!v)
		return -1;
	for (size_t i = 0; i < t->nb; i++) {
		for (ov_node *n = t->b[i]; n; n = n->hnext) {
			if (strcmp(n->path, from) && !under(n->path, from, fl))
				continue;
			if (k == cap) {
				ov_node **nv = vec_grow(v, &cap, sizeof *v, 16);
				if (!nv) {
					free(v);
					return -1;
				}
				v = nv;
			}
			v[k++] = n;
		}
	}
	for (size_t i = 0; i < k; i++) {
		ov_node *n = v[i];
		size_t tl = strlen(to), rest = strlen(n->path + fl);
		char *np = malloc(tl + rest + 1);
		if (!np) {
			free(v);
			return -1;
		}
		memcpy(np, to, tl);
		memcpy(np + tl, n->path + fl, rest + 1);
		unhash(t, n);
		free(n->path);
		n->path = np;
		insert(t, n);
	}
	free(v);
	return 0;
}

void ov_children(ov_table *t, const char *dir,
		 void (*fn)(void *arg, ov_node *n), void *arg)
{
	size_t dl = strlen(dir);
	for (size_t i = 0; i < t->nb; i++) {
		for (ov_node *n = t->b[i]; n; n = n->hnext) {
			if (!under(n->path, dir, dl))
				continue;
			const char *rest = n->path + (dl ? dl + 1 : 0);
			if (!strchr(rest, '/'))
				fn(arg, n);
		}
	}
}

bool ov_has_children(ov_table *t, const char *dir)
{
	size_t dl = strlen(dir);
	for (size_t i = 0; i < t->nb; i++)
		for (ov_node *n = t->b[i]; n; n = n->hnext)
			if (n->kind != OV_WHITEOUT && under(n->path, dir, dl))
				return true;
	return false;
}

static void discard_one(void *arg, ov_node *n)
{
	(void)arg;
	ov_stage *s = n->st;
	if (s && !s->handed && s->discard) {
		s->discard(s->discard_arg, s->sid);
		s->discard = NULL;
	}
}

void ov_discard_unhanded(ov_table *t)
{
	ov_each(t, discard_one, NULL);
}

void ov_each(ov_table *t, void (*fn)(void *arg, ov_node *n), void *arg)
{
	for (size_t i = 0; i < t->nb; i++)
		for (ov_node *n = t->b[i]; n; n = n->hnext)
			fn(arg, n);
}

ov_stage *ov_stage_new(int fd, uint64_t sid)
{
	ov_stage *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->fd = fd;
	s->sid = sid;
	s->refs = 1;
	return s;
}

void ov_stage_ref(ov_stage *s)
{
	s->refs++;
}

void ov_stage_unref(ov_stage *s)
{
	if (--s->refs == 0) {
		if (s->fd >= 0)
			close(s->fd);
		if (!s->handed && s->discard)
			s->discard(s->discard_arg, s->sid);
		free(s);
	}
}

void ov_set_stage(ov_node *n, ov_stage *s)
{
	if (n->st)
		ov_stage_unref(n->st);
	n->st = s;
}

ov_txn *ov_txn_add(ov_table *t, uint64_t id, const char *root, bool is_dir)
{
	ov_txn *x = calloc(1, sizeof *x);
	if (!x || !(x->root = strdup(root))) {
		free(x);
		return NULL;
	}
	x->id = id;
	x->is_dir = is_dir;
	x->next = t->txns;
	t->txns = x;
	return x;
}

ov_txn *ov_txn_find(ov_table *t, uint64_t id)
{
	for (ov_txn *x = t->txns; x; x = x->next)
		if (x->id == id)
			return x;
	return NULL;
}

void ov_txn_free_done(ov_table *t)
{
	for (ov_txn **pp = &t->txns; *pp;) {
		ov_txn *x = *pp;
		if (x->done && x->nodes == 0 && x->open == 0) {
			*pp = x->next;
			free(x->root);
			free(x);
		} else {
			pp = &x->next;
		}
	}
}

/* ---- xattrs: records "name\0" + 4-byte length + value ------------------- */

static const char *xa_find(const ov_node *n, const char *name, size_t *off,
			   uint32_t *len)
{
	const char *p = n->xattrs.data, *end = p + n->xattrs.len;
	while (p && p < end) {
		size_t nl = strlen(p);
		uint32_t vl;
		memcpy(&vl, p + nl + 1, 4);
		if (!strcmp(p, name)) {
			*off = (size_t)(p - n->xattrs.data);
			*len = vl;
			return p + nl + 5;
		}
		p += nl + 5 + vl;
	}
	return NULL;
}

static void xa_cut(ov_node *n, size_t off, size_t len)
{
	memmove(n->xattrs.data + off, n->xattrs.data + off + len,
		n->xattrs.len - off - len);
	n->xattrs.len -= len;
}

int ov_xattr_set(ov_node *n, const char *name, const void *v, size_t len,
		 int flags)
{
	size_t off;
	uint32_t vl;
	const char *old = xa_find(n, name, &off, &vl);
	if (old && (flags & XATTR_CREATE))
		return -EEXIST;
	if (!old && (flags & XATTR_REPLACE))
		return -ENODATA;
	if (len > 65536)
		return -E2BIG;
	if (old)
		xa_cut(n, off, strlen(name) + 5 + vl);
	uint32_t l32 = (uint32_t)len;
	if (buf_append(&n->xattrs, name, strlen(name) + 1) < 0 ||
	    buf_append(&n->xattrs, &l32, 4) < 0 ||
	    buf_append(&n->xattrs, v, len) < 0)
		return -ENOMEM;
	return 0;
}

int ov_xattr_get(const ov_node *n, const char *name, void *out, size_t size)
{
	size_t off;
	uint32_t vl;
	const char *v = xa_find(n, name, &off, &vl);
	if (!v)
		return -ENODATA;
	if (size == 0)
		return (int)vl;
	if (size < vl)
		return -ERANGE;
	memcpy(out, v, vl);
	return (int)vl;
}

int ov_xattr_remove(ov_node *n, const char *name)
{
	size_t off;
	uint32_t vl;
	if (!xa_find(n, name, &off, &vl))
		return -ENODATA;
	xa_cut(n, off, strlen(name) + 5 + vl);
	return 0;
}

int ov_xattr_list(const ov_node *n, char *out, size_t size)
{
	size_t need = 0;
	const char *p = n->xattrs.data, *end = p + n->xattrs.len;
	for (const char *q = p; q && q < end;) {
		size_t nl = strlen(q);
		uint32_t vl;
		memcpy(&vl, q + nl + 1, 4);
		if (size && need + nl + 1 <= size)
			memcpy(out + need, q, nl + 1);
		need += nl + 1;
		q += nl + 5 + vl;
	}
	if (size && need > size)
		return -ERANGE;
	return (int)need;
}

int ov_xattr_encode(const ov_node *n, buf *out)
{
	const char *p = n->xattrs.data, *end = p + n->xattrs.len;
	for (const char *q = p; q && q < end;) {
		size_t nl = strlen(q);
		uint32_t vl;
		memcpy(&vl, q + nl + 1, 4);
		if (buf_append(out, q, nl + 1) < 0)
			return -1;
		const unsigned char *v = (const unsigned char *)q + nl + 5;
		for (uint32_t i = 0; i < vl; i++) {
			char h[3];
			hex_encode(&v[i], 1, h);
			if (buf_append(out, h, 2) < 0)
				return -1;
		}
		if (buf_append(out, "", 1) < 0)
			return -1;
		q += nl + 5 + vl;
	}
	return 0;
}

char *ov_parent(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? strndup(path, (size_t)(s - path)) : strdup("");
}

char *ov_join(const char *dir, const char *name)
{
	buf b = BUF_INIT;
	if (dir[0])
		buf_printf(&b, "%s/%s", dir, name);
	else
		buf_puts(&b, name);
	return buf_steal(&b);
}
