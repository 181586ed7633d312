/*
 * fs_inode table: two chained hash indexes over the same nodes.
 *
 * Invariants: every live node is in the ino index; a node is in the path
 * index iff !detached; the root (ino 1) is never freed before the table.
 * A node is freed when nlookup == 0 and refs == 0; freeing drops the
 * reference it held on its parent, which may free the parent in turn.
 */
#include "fs/inode.h"

#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/clock.h"

/* A forgotten node's number, kept so the path gets it back on its next
 * lookup: inode numbers stay stable across the kernel's forgets (tar's
 * incremental mode and find compare them). Bounded FIFO. */
typedef struct ghost {
	char *path;
	uint64_t ino;
	bool is_dir;
	struct ghost *next_hash, *next_fifo;
	/* a directory's last listing (and manifests), kept for the next
	 * inode of the path: served when the store cannot be reached
	 * (fs_dir_load), so an outage does not hide a directory the kernel
	 * happened to forget, and as fresh as it was (listing_time,
	 * listing_gen), so a re-read after drop_caches makes no LIST within
	 * dir_timeout.  On the kept list (lprev/lnext) while held. */
	ns_dir *listing;
	vis_manifest *manifest;
	struct timespec mtime;
	double listing_time;
	double listing_began, listing_replied;
	uint64_t listing_gen;
	bool listing_held;
	struct ghost *lprev, *lnext;
} ghost;

/* Moves the listing of from (an fs_inode or a ghost: the fields have the
 * same names) to to (the other), which takes it over. */
#define LISTING_MOVE(to, from)                                           \
	do {                                                             \
		(to)->listing = (from)->listing;                         \
		(to)->manifest = (from)->manifest;                       \
		(to)->mtime = (from)->mtime;                             \
		(to)->listing_time = (from)->listing_time;               \
		(to)->listing_began = (from)->listing_began;             \
		(to)->listing_replied = (from)->listing_replied;         \
		(to)->listing_gen = (from)->listing_gen;                 \
		(to)->listing_held = (from)->listing_held;               \
		(from)->listing = NULL;                                  \
		(from)->manifest = NULL;                                 \
	} while (0)

#define GHOST_MAX 65536
/* Listings kept by ghosts, oldest dropped first: a 10 000-entry listing
 * is about 1 MiB. */
#define GHOST_LISTINGS_MAX 32

struct fs_itable {
	pthread_mutex_t mu;
	ghost **ghosts;     /* hash by path, nbuckets_g buckets */
	size_t nbuckets_g;
	ghost *g_head, *g_tail; /* FIFO for eviction */
	size_t n_ghosts;
	ghost *l_head, *l_tail; /* ghosts holding a listing, oldest first */
	size_t n_listings;
	pthread_cond_t cv;
	fs_inode **by_ino, **by_path;
	size_t nbuckets; /* power of two */
	size_t count;
	uint64_t next_ino;
	fs_inode *root;
	void (*free_hook)(void *, fs_inode *);
	void *free_arg;
};

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static size_t ino_slot(const fs_itable *t, uint64_t ino)
{
	return (size_t)((ino * 11400714819323198485ULL) >> 17) &
	       (t->nbuckets - 1);
}

static size_t path_slot(const fs_itable *t, const char *path)
{
	return (size_t)hash_str(path) & (t->nbuckets - 1);
}

static void insert_ino(fs_itable *t, fs_inode *n)
{
	size_t s = ino_slot(t, n->ino);
	n->next_ino = t->by_ino[s];
	t->by_ino[s] = n;
}

static void insert_path(fs_itable *t, fs_inode *n)
{
	size_t s = path_slot(t, n->path);
	n->next_path = t->by_path[s];
	t->by_path[s] = n;
}

static void remove_path(fs_itable *t, fs_inode *n)
{
	fs_inode **pp = &t->by_path[path_slot(t, n->path)];
	for (; *pp; pp = &(*pp)->next_path) {
		if (*pp == n) {
			*pp = n->next_path;
			break;
		}
	}
	n->detached = true;
}

static void remove_ino(fs_itable *t, fs_inode *n)
{
	fs_inode **pp = &t->by_ino[ino_slot(t, n->ino)];
	for (; *pp; pp = &(*pp)->next_ino) {
		if (*pp == n) {
			*pp = n->next_ino;
			break;
		}
	}
}

static void grow(fs_itable *t)
{
	size_t old = t->nbuckets;
	fs_inode **oi = t->by_ino, **op = t->by_path;
	fs_inode **ni = calloc(old * 2, sizeof *ni);
	fs_inode **np = calloc(old * 2, sizeof *np);
	if (!ni || !np) {
		free(ni);
		free(np);
		return; /* keep the old, longer chains */
	}
	t->by_ino = ni;
	t->by_path = np;
	t->nbuckets = old * 2;
	for (size_t i = 0; i < old; i++) {
		for (fs_inode *n = oi[i], *nx; n; n = nx) {
			nx = n->next_ino;
			insert_ino(t, n);
		}
		for (fs_inode *n = op[i], *nx; n; n = nx) {
			nx = n->next_path;
			insert_path(t, n);
		}
	}
	free(oi);
	free(op);
}

static ghost **ghost_slot(fs_itable *t, const char *path)
{
	return &t->ghosts[hash_str(path) & (t->nbuckets_g - 1)];
}

static void ghost_unhash(fs_itable *t, ghost *g)
{
	for (ghost **pp = ghost_slot(t, g->path); *pp; pp = &(*pp)->next_hash) {
		if (*pp == g) {
			*pp = g->next_hash;
			return;
		}
	}
}

/* Takes g off the list of ghosts holding a listing (g->listing set). */
static void ghost_unlist(fs_itable *t, ghost *g)
{
	if (g->lprev)
		g->lprev->lnext = g->lnext;
	else
		t->l_head = g->lnext;
	if (g->lnext)
		g->lnext->lprev = g->lprev;
	else
		t->l_tail = g->lprev;
	g->lprev = g->lnext = NULL;
	t->n_listings--;
}

/* Frees the listing g holds, if any. */
static void ghost_drop_listing(fs_itable *t, ghost *g)
{
	if (!g->listing)
		return;
	ghost_unlist(t, g);
	ns_dir_free(g->listing);
	free(g->listing);
	g->listing = NULL;
	if (g->manifest) {
		vis_manifest_free(g->manifest);
		free(g->manifest);
		g->manifest = NULL;
	}
}

/* Takes the remembered number of n's path, if any, out of the ghost
 * table; a directory also gets the listing its last inode had, as fresh
 * as it was (served while dir_timeout lasts, then fetched again, and
 * served if that fails transiently). */
static uint64_t ghost_take(fs_itable *t, fs_inode *n, bool is_dir)
{
	if (!t->ghosts)
		return 0;
	for (ghost *g = *ghost_slot(t, n->path); g; g = g->next_hash) {
		if (strcmp(g->path, n->path) != 0)
			continue;
		uint64_t ino = g->is_dir == is_dir ? g->ino : 0;
		g->ino = 0; /* used up; the FIFO frees it later */
		if (ino && is_dir && g->listing) {
			ghost_unlist(t, g);
			LISTING_MOVE(n, g);
		} else {
			ghost_drop_listing(t, g);
		}
		return ino;
	}
	return 0;
}

/* Remembers n's number (and a directory's listing, taken from n). */
static void ghost_add(fs_itable *t, fs_inode *n)
{
	if (!t->ghosts || n->detached)
		return;
	if (t->n_ghosts >= GHOST_MAX) {
		ghost *old = t->g_head;
		t->g_head = old->next_fifo;
		if (!t->g_head)
			t->g_tail = NULL;
		ghost_unhash(t, old);
		ghost_drop_listing(t, old);
		free(old->path);
		free(old);
		t->n_ghosts--;
	}
	ghost *g = calloc(1, sizeof *g);
	if (!g || !(g->path = strdup(n->path))) {
		free(g);
		return;
	}
	g->ino = n->ino;
	g->is_dir = n->is_dir;
	if (n->is_dir && n->listing) {
		if (t->n_listings >= GHOST_LISTINGS_MAX)
			ghost_drop_listing(t, t->l_head);
		LISTING_MOVE(g, n);
		g->lprev = t->l_tail;
		if (t->l_tail)
			t->l_tail->lnext = g;
		else
			t->l_head = g;
		t->l_tail = g;
		t->n_listings++;
	}
	ghost **slot = ghost_slot(t, g->path);
	g->next_hash = *slot;
	*slot = g;
	if (t->g_tail)
		t->g_tail->next_fifo = g;
	else
		t->g_head = g;
	t->g_tail = g;
	t->n_ghosts++;
}

static fs_inode *node_new(fs_itable *t, fs_inode *parent, const char *name,
			  bool is_dir)
{
	fs_inode *n = calloc(1, sizeof *n);
	if (!n)
		return NULL;
	n->name = strdup(name);
	buf p = BUF_INIT;
	if (parent && parent->path[0])
		buf_printf(&p, "%s/%s", parent->path, name);
	else
		buf_puts(&p, name);
	n->path = buf_steal(&p);
	if (!n->name || !n->path) {
		free(n->name);
		free(n->path);
		free(n);
		return NULL;
	}
	n->ino = ghost_take(t, n, is_dir);
	if (!n->ino)
		n->ino = t->next_ino++;
	n->is_dir = is_dir;
	n->parent = parent;
	if (parent)
		parent->refs++;
	if (t->count + 1 > t->nbuckets)
		grow(t);
	insert_ino(t, n);
	insert_path(t, n);
	t->count++;
	return n;
}

fs_itable *fs_itable_new(void)
{
	fs_itable *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	t->nbuckets = 1024;
	t->nbuckets_g = 16384;
	t->ghosts = calloc(t->nbuckets_g, sizeof *t->ghosts);
	t->by_ino = calloc(t->nbuckets, sizeof *t->by_ino);
	t->by_path = calloc(t->nbuckets, sizeof *t->by_path);
	pthread_mutex_init(&t->mu, NULL);
	pthread_cond_init(&t->cv, NULL);
	t->next_ino = 1; /* FUSE_ROOT_ID */
	if (t->by_ino && t->by_path)
		t->root = node_new(t, NULL, "", true);
	if (!t->root) {
		fs_itable_free(t);
		return NULL;
	}
	t->root->nlookup = 1;
	return t;
}

static void node_free(fs_inode *n)
{
	if (n->manifest) {
		vis_manifest_free(n->manifest);
		free(n->manifest);
	}
	if (n->listing) {
		ns_dir_free(n->listing);
		free(n->listing);
	}
	free(n->name);
	free(n->path);
	free(n->etag);
	free(n->kc_etag);
	free(n->served_etag);
	free(n->pt_etag);
	free(n->symlink);
	free(n->xattrs_json);
	free(n->meta_etag);
	free(n->ra_last);
	free(n->ra_upto);
	free(n);
}

void fs_itable_free(fs_itable *t)
{
	if (!t)
		return;
	for (size_t i = 0; t->by_ino && i < t->nbuckets; i++) {
		for (fs_inode *n = t->by_ino[i], *nx; n; n = nx) {
			nx = n->next_ino;
			node_free(n);
		}
	}
	free(t->by_ino);
	free(t->by_path);
	while (t->g_head) {
		ghost *g = t->g_head;
		t->g_head = g->next_fifo;
		ghost_drop_listing(t, g);
		free(g->path);
		free(g);
	}
	free(t->ghosts);
	pthread_cond_destroy(&t->cv);
	pthread_mutex_destroy(&t->mu);
	free(t);
}

void fs_itable_lock(fs_itable *t)
{
	pthread_mutex_lock(&t->mu);
}

void fs_itable_unlock(fs_itable *t)
{
	pthread_mutex_unlock(&t->mu);
}

void fs_itable_wait(fs_itable *t)
{
	pthread_cond_wait(&t->cv, &t->mu);
}

int fs_itable_timedwait(fs_itable *t, const struct timespec *until)
{
	return pthread_cond_timedwait(&t->cv, &t->mu, until);
}

void fs_itable_broadcast(fs_itable *t)
{
	pthread_cond_broadcast(&t->cv);
}

pthread_mutex_t *fs_itable_mutex(fs_itable *t)
{
	return &t->mu;
}

fs_inode *fs_itable_root(fs_itable *t)
{
	return t->root;
}

fs_inode *fs_itable_get(fs_itable *t, uint64_t ino)
{
	for (fs_inode *n = t->by_ino[ino_slot(t, ino)]; n; n = n->next_ino)
		if (n->ino == ino)
			return n;
	return NULL;
}

static fs_inode *find_path(fs_itable *t, const char *path)
{
	for (fs_inode *n = t->by_path[path_slot(t, path)]; n; n = n->next_path)
		if (strcmp(n->path, path) == 0)
			return n;
	return NULL;
}

fs_inode *fs_itable_child(fs_itable *t, fs_inode *parent, const char *name,
			  bool is_dir)
{
	buf p = BUF_INIT;
	if (parent->path[0])
		buf_printf(&p, "%s/%s", parent->path, name);
	else
		buf_puts(&p, name);
	fs_inode *n = find_path(t, buf_cstr(&p));
	buf_free(&p);
	if (n && n->is_dir == is_dir && n->parent == parent)
		return n;
	if (n)
		remove_path(t, n); /* changed type remotely: a new inode */
	return node_new(t, parent, name, is_dir);
}

static void maybe_free(fs_itable *t, fs_inode *n)
{
	while (n && n != t->root && n->nlookup == 0 && n->refs == 0) {
		fs_inode *parent = n->parent;
		if (!n->detached) {
			remove_path(t, n);
			n->detached = false; /* still the path's own number */
			ghost_add(t, n);
		}
		remove_ino(t, n);
		t->count--;
		if (t->free_hook)
			t->free_hook(t->free_arg, n);
		node_free(n);
		if (parent)
			parent->refs--;
		n = parent;
	}
}

void fs_itable_forget(fs_itable *t, fs_inode *n, uint64_t nlookup)
{
	n->nlookup = nlookup > n->nlookup ? 0 : n->nlookup - nlookup;
	maybe_free(t, n);
}

void fs_inode_ref(fs_inode *n)
{
	n->refs++;
}

void fs_itable_unref(fs_itable *t, fs_inode *n)
{
	n->refs--;
	maybe_free(t, n);
}

void fs_itable_detach(fs_itable *t, fs_inode *n)
{
	if (!n->detached && n != t->root)
		remove_path(t, n);
}

void fs_itable_set_free_hook(fs_itable *t, void (*fn)(void *, fs_inode *),
			     void *arg)
{
	t->free_hook = fn;
	t->free_arg = arg;
}

size_t fs_itable_count(fs_itable *t)
{
	return t->count;
}

double fs_now(void)
{
	return clock_mono();
}

/* Replaces the leading `from_len` bytes of n's path by `to`. */
static int repath(fs_itable *t, fs_inode *n, size_t from_len, const char *to)
{
	buf p = BUF_INIT;
	buf_puts(&p, to);
	buf_puts(&p, n->path + from_len);
	char *np = buf_steal(&p);
	if (!np)
		return -1;
	bool indexed = !n->detached;
	if (indexed)
		remove_path(t, n);
	free(n->path);
	n->path = np;
	if (indexed) {
		fs_inode *other = find_path(t, np);
		if (other)
			remove_path(t, other);
		insert_path(t, n);
		n->detached = false;
	}
	return 0;
}

int fs_itable_move(fs_itable *t, fs_inode *n, fs_inode *new_parent,
		   const char *new_name)
{
	buf p = BUF_INIT;
	if (new_parent->path[0])
		buf_printf(&p, "%s/%s", new_parent->path, new_name);
	else
		buf_puts(&p, new_name);
	char *to = buf_steal(&p);
	char *name = strdup(new_name);
	if (!to || !name) {
		free(to);
		free(name);
		return -1;
	}
	fs_inode *old = find_path(t, to);
	if (old && old != n)
		fs_itable_detach(t, old);
	size_t from_len = strlen(n->path);
	char *from = strdup(n->path);
	if (!from) {
		free(to);
		free(name);
		return -1;
	}
	/* descendants first: their paths start with "from/" */
	for (size_t i = 0; i < t->nbuckets; i++) {
		for (fs_inode *c = t->by_ino[i]; c; c = c->next_ino) {
			if (c != n && !strncmp(c->path, from, from_len) &&
			    c->path[from_len] == '/')
				repath(t, c, from_len, to);
		}
	}
	repath(t, n, from_len, to);
	free(from);
	free(to);
	free(n->name);
	n->name = name;
	if (n->parent != new_parent) {
		fs_inode *op = n->parent;
		new_parent->refs++;
		n->parent = new_parent;
		if (op) {
			op->refs--;
			maybe_free(t, op);
		}
	}
	return 0;
}

fs_inode *fs_itable_find(fs_itable *t, const char *path)
{
	return find_path(t, path);
}
