/*
 * proto/keys: key names of the bucket format, writer ids, temp-name
 * patterns and the path rules (keys.h).  Pure functions but for
 * proto_writer_id (hostname and random bytes).
 */
#include "proto/keys.h"

#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/hex.h"
#include "util/vec.h"

/* ---- writer ids, temp names, paths ------------------------------------- */

void proto_writer_id(char out[PROTO_WRITER_MAX])
{
	char host[256] = "";
	char clean[41];
	size_t n = 0;
	gethostname(host, sizeof host - 1);
	for (const char *h = host; *h && n < sizeof clean - 1; h++) {
		char c = *h;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '-')
			clean[n++] = c;
	}
	clean[n] = '\0';
	unsigned char r[4] = {0};
	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
		uint64_t t = (uint64_t)getpid() ^ (uint64_t)time(NULL);
		memcpy(r, &t, sizeof r);
	}
	char h[2 * sizeof r + 1];
	hex_encode(r, sizeof r, h);
	snprintf(out, PROTO_WRITER_MAX, "%s-%s", n ? clean : "host", h);
}

int proto_pats_parse(proto_pats *p, const char *spec)
{
	memset(p, 0, sizeof *p);
	char *s = strdup(spec ? spec : PROTO_DEFAULT_TEMP_PATTERNS);
	if (!s)
		return -1;
	for (char *save = NULL, *t = strtok_r(s, ",", &save); t;
	     t = strtok_r(NULL, ",", &save)) {
		while (*t == ' ')
			t++;
		for (size_t l = strlen(t); l && t[l - 1] == ' ';)
			t[--l] = '\0';
		if (!*t)
			continue;
		char **nv = p->n < p->cap ? p->v
					  : vec_grow(p->v, &p->cap, sizeof *nv, 4);
		if (!nv || !(nv[p->n] = strdup(t))) {
			p->v = nv ? nv : p->v;
			free(s);
			proto_pats_free(p);
			return -1;
		}
		p->v = nv;
		p->n++;
	}
	free(s);
	return 0;
}

void proto_pats_free(proto_pats *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->v[i]);
	free(p->v);
	memset(p, 0, sizeof *p);
}

static bool name_is_temp(const proto_pats *p, const char *name, size_t len)
{
	char tmp[256];
	if (len >= sizeof tmp)
		len = sizeof tmp - 1;
	memcpy(tmp, name, len);
	tmp[len] = '\0';
	for (size_t i = 0; i < p->n; i++)
		if (fnmatch(p->v[i], tmp, 0) == 0)
			return true;
	return false;
}

bool proto_is_temp(const proto_pats *p, const char *path)
{
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	return name_is_temp(p, base, strlen(base));
}

bool proto_has_temp(const proto_pats *p, const char *path)
{
	for (const char *c = path;;) {
		const char *slash = strchr(c, '/');
		size_t len = slash ? (size_t)(slash - c) : strlen(c);
		if (len && name_is_temp(p, c, len))
			return true;
		if (!slash)
			return false;
		c = slash + 1;
	}
}

bool proto_under(const char *path, const char *dir, const char **rest)
{
	size_t n = strlen(dir);
	if (strncmp(path, dir, n) != 0)
		return false;
	if (path[n] == '\0') {
		if (rest)
			*rest = path + n;
		return true;
	}
	if (path[n] != '/' && n > 0)
		return false;
	if (rest)
		*rest = n ? path + n + 1 : path;
	return true;
}

bool proto_overlap(const char *a, const char *b)
{
	return proto_under(a, b, NULL) || proto_under(b, a, NULL);
}

/* ---- keys --------------------------------------------------------------- */

bool proto_key_fits(const char *prefix, const char *path, bool is_dir)
{
	size_t n = (prefix ? strlen(prefix) : 0) + strlen(path) + is_dir;
	return n <= PROTO_KEY_MAX;
}

char *proto_key(const char *prefix, const char *path)
{
	buf b = BUF_INIT;
	buf_printf(&b, "%s%s", prefix, path);
	return buf_steal(&b);
}

char *proto_marker_key(const char *prefix, const char *root,
		       const char *writer, unsigned lease)
{
	buf b = BUF_INIT;
	const char *slash = strrchr(root, '/');
	if (slash)
		buf_printf(&b, "%s%.*s/" PROTO_PENDING_DIR "/%s/%s@%u", prefix,
			   (int)(slash - root), root, slash + 1, writer, lease);
	else
		buf_printf(&b, "%s" PROTO_PENDING_DIR "/%s/%s@%u", prefix, root,
			   writer, lease);
	return buf_steal(&b);
}

char *proto_gone_key(const char *prefix, const char *root,
		     const char *writer)
{
	buf w = BUF_INIT;
	buf_printf(&w, "%s" PROTO_GONE_SUFFIX, writer);
	char *k = w.data ? proto_marker_key(prefix, root, buf_cstr(&w),
					    PROTO_GONE_LEASE)
			 : NULL;
	buf_free(&w);
	return k;
}

char *proto_rel_path(const char *from, const char *to)
{
	/* the longest common run of whole leading components */
	size_t c = 0;
	for (size_t i = 0;; i++) {
		if ((!from[i] || from[i] == '/') && (!to[i] || to[i] == '/'))
			c = i;
		if (!from[i] || !to[i] || from[i] != to[i])
			break;
	}
	const char *up = from + c + (from[c] == '/');
	const char *down = to + c + (to[c] == '/');
	buf b = BUF_INIT;
	for (const char *p = up; *up && p; p = strchr(p + 1, '/'))
		buf_puts(&b, b.len ? "/.." : "..");
	if (*down)
		buf_printf(&b, "%s%s", b.len ? "/" : "", down);
	return buf_steal(&b);
}

char *proto_key_resolve(const char *dir_key, const char *rel)
{
	size_t n = strlen(dir_key);
	if (!rel[0] || (n && dir_key[n - 1] != '/'))
		return NULL;
	buf b = BUF_INIT;
	buf_puts(&b, dir_key);
	const char *p = rel;
	while (*p) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		if (len == 2 && !strncmp(p, "..", 2)) {
			if (b.len == 0) {
				buf_free(&b);
				return NULL;
			}
			size_t k = b.len - 1; /* drop the last component */
			while (k > 0 && b.data[k - 1] != '/')
				k--;
			b.len = k;
			b.data[k] = 0;
		} else if (len && !(len == 1 && *p == '.')) {
			buf_printf(&b, "%.*s/", (int)len, p);
		}
		p += len + (slash != NULL);
	}
	return buf_steal(&b);
}

char *proto_manifest_key(const char *prefix, const char *root,
			 const char *writer)
{
	buf b = BUF_INIT;
	buf_printf(&b, "%s%s/" PROTO_META_DIR "/manifest.%s.json", prefix, root,
		   writer);
	return buf_steal(&b);
}

char *proto_addendum_key(const char *prefix, const char *mroot,
			 const char *writer, uint64_t txn)
{
	buf b = BUF_INIT;
	buf_printf(&b, "%s%s%s" PROTO_META_DIR "/manifest.%s.%" PRIu64 ".json",
		   prefix, mroot, mroot[0] ? "/" : "", writer, txn);
	return buf_steal(&b);
}

char *proto_hint_key(const char *prefix, const char *path)
{
	buf b = BUF_INIT;
	const char *slash = strrchr(path, '/');
	if (slash)
		buf_printf(&b, "%s%.*s/" PROTO_HINT_DIR "/%s", prefix,
			   (int)(slash - path), path, slash + 1);
	else
		buf_printf(&b, "%s" PROTO_HINT_DIR "/%s", prefix, path);
	return buf_steal(&b);
}

/* Where key has the component PROTO_HINT_DIR followed by '/', from p on;
 * NULL when nowhere. */
static const char *hint_comp(const char *key, const char *p)
{
	size_t n = sizeof PROTO_HINT_DIR - 1;
	for (; (p = strstr(p, PROTO_HINT_DIR)); p++)
		if ((p == key || p[-1] == '/') && p[n] == '/')
			return p;
	return NULL;
}

bool proto_is_hint_key(const char *key, const char **name)
{
	const char *slash = strrchr(key, '/');
	if (!slash || !slash[1])
		return false;
	size_t n = sizeof PROTO_HINT_DIR - 1;
	const char *comp = slash - n;
	if (comp < key || memcmp(comp, PROTO_HINT_DIR, n) ||
	    (comp > key && comp[-1] != '/'))
		return false;
	if (name)
		*name = slash + 1;
	return true;
}

bool proto_in_hint_dir(const char *key)
{
	return hint_comp(key, key) != NULL;
}

bool proto_is_meta_key(const char *rel)
{
	return strncmp(rel, PROTO_META_DIR "/", sizeof PROTO_META_DIR) == 0;
}

bool proto_is_manifest_name(const char *name)
{
	size_t n = strlen(name);
	return !strchr(name, '/') && !strncmp(name, "manifest.", 9) &&
	       n > 14 && !strcmp(name + n - 5, ".json");
}

bool proto_manifest_of(const char *name, const char *writer)
{
	size_t wl = strlen(writer);
	if (strncmp(name, "manifest.", 9) || strncmp(name + 9, writer, wl))
		return false;
	const char *p = name + 9 + wl;
	if (!strcmp(p, ".json"))
		return true;
	if (*p++ != '.' || !(*p >= '0' && *p <= '9'))
		return false;
	while (*p >= '0' && *p <= '9')
		p++;
	return !strcmp(p, ".json");
}
