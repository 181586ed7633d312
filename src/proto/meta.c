/*
 * proto/meta: attributes as object metadata and the two forms of xattrs
 * (meta.h).  Pure functions; base64 through OpenSSL, JSON through jansson.
 */
#include "proto/meta.h"
#include "util/hex.h"

#include <inttypes.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

bool proto_time_ok(const struct timespec *ts)
{
	/* INT64 ns: 9223372036.854775807 s either side of the epoch */
	if (ts->tv_nsec < 0 || ts->tv_nsec > 999999999)
		return false;
	if (ts->tv_sec > 9223372035 || ts->tv_sec < -9223372035)
		return false;
	return ts->tv_sec || ts->tv_nsec;
}

int64_t proto_time_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec;
}

void proto_ns_time(int64_t ns, struct timespec *ts)
{
	int64_t s = ns / 1000000000LL, r = ns % 1000000000LL;
	if (r < 0) { /* floor: -1 ns is 1969-12-31 23:59:59.999999999 */
		s--;
		r += 1000000000LL;
	}
	ts->tv_sec = (time_t)s;
	ts->tv_nsec = (long)r;
}

void proto_meta_free(proto_meta *m)
{
	free(m->xattrs);
	free(m->symlink);
	memset(m, 0, sizeof *m);
}

uint32_t proto_mode_type(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFIFO:
	case S_IFSOCK:
	case S_IFCHR:
	case S_IFBLK:
		return mode & S_IFMT;
	default:
		return S_IFREG;
	}
}

uint32_t proto_file_mode(uint32_t mode)
{
	return proto_mode_type(mode) | (mode & 07777);
}

/* ---- xattrs ------------------------------------------------------------ */

int proto_xattr_append(buf *b, const char *name, const void *val,
		       uint32_t len)
{
	unsigned char l[4] = {len & 0xff, (len >> 8) & 0xff, (len >> 16) & 0xff,
			      len >> 24};
	if (buf_append(b, name, strlen(name) + 1) < 0 ||
	    buf_append(b, l, 4) < 0 || (len && buf_append(b, val, len) < 0))
		return -1;
	return 0;
}

bool proto_xattr_next(const char *blob, size_t len, size_t *pos,
		      const char **name, const char **val, uint32_t *vlen)
{
	size_t p = *pos;
	if (!blob || p >= len)
		return false;
	const char *nul = memchr(blob + p, '\0', len - p);
	if (!nul || (size_t)(nul - blob) + 5 > len)
		return false;
	const unsigned char *l = (const unsigned char *)nul + 1;
	uint32_t n = l[0] | (uint32_t)l[1] << 8 | (uint32_t)l[2] << 16 |
		     (uint32_t)l[3] << 24;
	size_t vstart = (size_t)(nul - blob) + 5;
	if (n > len - vstart)
		return false;
	*name = blob + p;
	*val = blob + vstart;
	*vlen = n;
	*pos = vstart + n;
	return true;
}

static json_t *b64(const char *v, uint32_t n)
{
	char *out = malloc(4 * ((size_t)n / 3 + 1) + 1);
	if (!out)
		return NULL;
	EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)v, (int)n);
	json_t *j = json_string(out);
	free(out);
	return j;
}

json_t *proto_xattrs_json(const char *blob, size_t len)
{
	json_t *x = json_object();
	size_t pos = 0;
	const char *name, *val;
	uint32_t vlen;
	bool ok = x != NULL;
	while (x && proto_xattr_next(blob, len, &pos, &name, &val, &vlen)) {
		json_t *v = b64(val, vlen);
		if (!v || json_object_set_new(x, name, v) < 0)
			ok = false;
	}
	if (!ok) {
		json_decref(x);
		return NULL;
	}
	return x;
}

int proto_xattrs_decode(const char *json, buf *blob)
{
	json_t *x = json ? json_loads(json, 0, NULL) : NULL;
	const char *name;
	json_t *val;
	int rc = 0;
	json_object_foreach(x, name, val)
	{
		const char *s = json_string_value(val);
		size_t len = s ? strlen(s) : 0;
		unsigned char *out = malloc(len + 4);
		int n = out ? EVP_DecodeBlock(out, (const unsigned char *)s,
					      (int)len)
			    : -1;
		if (!out)
			rc = -1;
		/* EVP_DecodeBlock counts padding bytes as data */
		while (n > 0 && len && s[len - 1] == '=') {
			n--;
			len--;
		}
		if (n >= 0 && proto_xattr_append(blob, name, out, (uint32_t)n) < 0)
			rc = -1;
		free(out);
	}
	json_decref(x);
	return rc;
}

/* ---- object metadata ---------------------------------------------------- */

/* The xattrs pair's value (compact JSON) into store, or nothing when there
 * are none, a name is not printable ASCII, or they would not fit. */
static void xattrs_pair(const proto_meta *m, buf *store)
{
	size_t pos = 0;
	const char *name, *val;
	uint32_t vlen;
	while (m->xattrs && proto_xattr_next(m->xattrs, m->xattrs_len, &pos,
					     &name, &val, &vlen))
		for (const char *c = name; *c; c++)
			if (*c < 0x21 || *c > 0x7e || *c == '"' || *c == '\\')
				return; /* not printable: skip all */
	json_t *x = m->xattrs ? proto_xattrs_json(m->xattrs, m->xattrs_len)
			      : NULL;
	char *s = x && json_object_size(x) ? json_dumps(x, JSON_COMPACT) : NULL;
	/* the limit counts what precedes the closing brace */
	if (s && strlen(s) - 1 <= PROTO_META_XATTRS_MAX)
		buf_puts(store, s);
	free(s);
	json_decref(x);
}

/* The symlink pair's value: target percent-encoded (control characters,
 * non-ASCII, '%' and a space at either end); NULL store: only counts.
 * Returns its length. */
static size_t symlink_encode(const char *target, buf *store)
{
	size_t len = strlen(target), out = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)target[i];
		bool edge = (i == 0 || i + 1 == len) && c == ' ';
		bool esc = c < 0x20 || c > 0x7e || c == '%' || edge;
		out += esc ? 3 : 1;
		if (store && esc)
			buf_printf(store, "%%%02X", c);
		else if (store)
			buf_putc(store, (char)c);
	}
	return out;
}

bool proto_meta_symlink_fits(const char *target)
{
	return symlink_encode(target, NULL) <= PROTO_META_SYMLINK_MAX;
}

size_t proto_object_meta(const proto_meta *m, s3_meta out[PROTO_META_N],
			 buf *store)
{
	/* offsets first: store may move while it grows */
	size_t off[PROTO_META_N], n = 0;
	const char *names[PROTO_META_N];
	buf_reset(store);
	names[n] = "mode";
	off[n++] = store->len;
	buf_printf(store, "%o", (unsigned)m->mode);
	buf_putc(store, '\0');
	names[n] = "uid";
	off[n++] = store->len;
	buf_printf(store, "%u", (unsigned)m->uid);
	buf_putc(store, '\0');
	names[n] = "gid";
	off[n++] = store->len;
	buf_printf(store, "%u", (unsigned)m->gid);
	buf_putc(store, '\0');
	names[n] = "mtime";
	off[n++] = store->len;
	buf_printf(store, "%" PRId64, m->mtime_ns);
	buf_putc(store, '\0');
	uint32_t t = proto_mode_type(m->mode);
	if (t == S_IFCHR || t == S_IFBLK) {
		names[n] = "rdev";
		off[n++] = store->len;
		buf_printf(store, "%" PRIu64, m->rdev);
		buf_putc(store, '\0');
	}
	if (m->symlink && proto_meta_symlink_fits(m->symlink)) {
		names[n] = "symlink";
		off[n++] = store->len;
		symlink_encode(m->symlink, store);
		buf_putc(store, '\0');
	}
	size_t before = store->len;
	xattrs_pair(m, store);
	if (store->len > before) {
		names[n] = "xattrs";
		off[n++] = before;
		buf_putc(store, '\0');
	}
	for (size_t i = 0; i < n; i++) {
		out[i].name = names[i];
		out[i].value = store->data + off[i];
	}
	return n;
}

/* The symlink pair's value, percent-decoded (malloc'd). */
static char *symlink_of(const char *v)
{
	char *sl = malloc(strlen(v) + 1);
	char *o = sl;
	for (const char *p = v; sl && *p; p++) {
		if (*p == '%' && hex_val(p[1]) >= 0 && hex_val(p[2]) >= 0) {
			*o++ = (char)(hex_val(p[1]) * 16 + hex_val(p[2]));
			p += 2;
		} else {
			*o++ = *p;
		}
	}
	if (o)
		*o = 0;
	return sl;
}

unsigned proto_object_meta_parse(const s3_meta *kv, size_t n, proto_meta *m,
				 char **xattrs_json)
{
	unsigned has = 0;
	memset(m, 0, sizeof *m);
	*xattrs_json = NULL;
	for (size_t i = 0; i < n; i++) {
		const char *k = kv[i].name, *v = kv[i].value;
		if (!strcmp(k, "mode")) {
			m->mode = (uint32_t)strtoul(v, NULL, 8);
			has |= PROTO_HAS_MODE;
		} else if (!strcmp(k, "uid")) {
			m->uid = (uint32_t)strtoul(v, NULL, 10);
			has |= PROTO_HAS_UID;
		} else if (!strcmp(k, "gid")) {
			m->gid = (uint32_t)strtoul(v, NULL, 10);
			has |= PROTO_HAS_GID;
		} else if (!strcmp(k, "mtime")) {
			m->mtime_ns = (int64_t)strtoll(v, NULL, 10);
			has |= PROTO_HAS_MTIME;
		} else if (!strcmp(k, "rdev")) {
			m->rdev = (uint64_t)strtoull(v, NULL, 10);
			has |= PROTO_HAS_RDEV;
		} else if (!strcmp(k, "xattrs")) {
			free(*xattrs_json);
			*xattrs_json = strdup(v);
			has |= PROTO_HAS_XATTRS;
		} else if (!strcmp(k, "symlink")) {
			free(m->symlink);
			m->symlink = symlink_of(v);
			has |= PROTO_HAS_SYMLINK;
		}
	}
	return has;
}
