/*
 * proto: keys, manifests, metadata, CRC32C, temp names and ordering rules
 * of the commit protocol.  Pure functions (protocol.h).
 */
#include "commit/protocol.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <isa-l/crc.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

/* ---- CRC32C ------------------------------------------------------------- */

uint32_t proto_crc32c(uint32_t crc, const void *data, size_t n)
{
	uint32_t reg = ~crc;
	const unsigned char *p = data;
	while (n > 0) {
		int take = n > (1u << 30) ? (1 << 30) : (int)n;
		reg = crc32_iscsi((unsigned char *)p, take, reg);
		p += take;
		n -= (size_t)take;
	}
	return ~reg;
}

static uint32_t gf2_times(const uint32_t *mat, uint32_t vec)
{
	uint32_t sum = 0;
	for (int i = 0; vec; vec >>= 1, i++)
		if (vec & 1)
			sum ^= mat[i];
	return sum;
}

static void gf2_square(uint32_t *sq, const uint32_t *mat)
{
	for (int i = 0; i < 32; i++)
		sq[i] = gf2_times(mat, mat[i]);
}

uint32_t proto_crc32c_combine(uint32_t a, uint32_t b, uint64_t len_b)
{
	uint32_t even[32], odd[32];
	if (len_b == 0)
		return a;
	odd[0] = 0x82F63B78u; /* reflected Castagnoli polynomial */
	uint32_t row = 1;
	for (int i = 1; i < 32; i++, row <<= 1)
		odd[i] = row;
	gf2_square(even, odd); /* 2 zero bits */
	gf2_square(odd, even); /* 4 zero bits */
	do {
		gf2_square(even, odd);
		if (len_b & 1)
			a = gf2_times(even, a);
		len_b >>= 1;
		if (!len_b)
			break;
		gf2_square(odd, even);
		if (len_b & 1)
			a = gf2_times(odd, a);
		len_b >>= 1;
	} while (len_b);
	return a ^ b;
}

/* ---- block checksums ---------------------------------------------------- */

uint64_t proto_block_count(uint64_t size, uint32_t block)
{
	return block ? (size + block - 1) / block : 0;
}

static int hexdigit(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
				      : -1;
}

bool proto_blocks_valid(const char *hex, uint64_t size, uint32_t block)
{
	if (!hex || block < PROTO_BLOCK_MIN || block > PROTO_BLOCK_MAX)
		return false;
	uint64_t n = proto_block_count(size, block);
	size_t len = strlen(hex);
	if (n > SIZE_MAX / 8 || len != n * 8)
		return false;
	for (size_t i = 0; i < len; i++)
		if (hexdigit(hex[i]) < 0)
			return false;
	return true;
}

int proto_blocks_decode(const char *hex, size_t n, uint32_t *out)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t v = 0;
		for (size_t k = 0; k < 8; k++) {
			int d = hexdigit(hex[i * 8 + k]);
			if (d < 0)
				return -1;
			v = v << 4 | (uint32_t)d;
		}
		out[i] = v;
	}
	return 0;
}

int proto_blocks_append(buf *hex, uint32_t crc)
{
	return buf_printf(hex, "%08" PRIx32, crc) < 0 ? -1 : 0;
}

uint64_t proto_segment_count(uint64_t off, uint64_t len, uint32_t block)
{
	if (!len || !block)
		return 0;
	return (off + len - 1) / block - off / block + 1;
}

char *proto_blocks_from_parts(uint64_t size, uint64_t part_size,
			      unsigned n_parts, char *const *segs,
			      uint32_t block)
{
	if (!block || !part_size || !segs)
		return NULL;
	buf out = BUF_INIT;
	uint64_t pos = 0; /* bytes combined so far */
	uint32_t cur = 0; /* CRC of the current block so far */
	bool ok = buf_reserve(&out, 8 * proto_block_count(size, block) + 1) == 0;
	for (unsigned i = 0; ok && i < n_parts; i++) {
		uint64_t off = (uint64_t)i * part_size;
		if (off >= size && size) {
			ok = false;
			break;
		}
		uint64_t len = size - off < part_size ? size - off : part_size;
		uint64_t ns = proto_segment_count(off, len, block);
		if (!segs[i] || strlen(segs[i]) != ns * 8) {
			ok = false;
			break;
		}
		for (uint64_t k = 0; ok && k < ns; k++) {
			uint32_t crc = 0;
			ok = proto_blocks_decode(segs[i] + k * 8, 1, &crc) == 0;
			uint64_t end = (pos / block + 1) * block;
			if (end > off + len)
				end = off + len;
			uint64_t slen = end - pos;
			cur = pos % block ? proto_crc32c_combine(cur, crc, slen)
					  : crc;
			pos = end;
			if (ok && (pos % block == 0 || pos == size))
				ok = proto_blocks_append(&out, cur) == 0;
		}
	}
	if (!ok || pos != size) {
		buf_free(&out);
		return NULL;
	}
	return buf_steal(&out); /* "" for an empty file */
}

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
	snprintf(out, PROTO_WRITER_MAX, "%s-%02x%02x%02x%02x",
		 n ? clean : "host", r[0], r[1], r[2], r[3]);
}

int proto_pats_parse(proto_pats *p, const char *spec)
{
	memset(p, 0, sizeof *p);
	char *s = strdup(spec ? spec : ENG_DEFAULT_TEMP_PATTERNS);
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
		char **nv = realloc(p->v, (p->n + 1) * sizeof *nv);
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
		buf_printf(&b, "%s%.*s/.ckptfs-pending/%s/%s@%u", prefix,
			   (int)(slash - root), root, slash + 1, writer, lease);
	else
		buf_printf(&b, "%s.ckptfs-pending/%s/%s@%u", prefix, root,
			   writer, lease);
	return buf_steal(&b);
}

char *proto_manifest_key(const char *prefix, const char *root,
			 const char *writer)
{
	buf b = BUF_INIT;
	buf_printf(&b, "%s%s/.ckptfs/manifest.%s.json", prefix, root, writer);
	return buf_steal(&b);
}

char *proto_addendum_key(const char *prefix, const char *mroot,
			 const char *writer, uint64_t txn)
{
	buf b = BUF_INIT;
	buf_printf(&b, "%s%s%s.ckptfs/manifest.%s.%" PRIu64 ".json", prefix,
		   mroot, mroot[0] ? "/" : "", writer, txn);
	return buf_steal(&b);
}

bool proto_is_meta_key(const char *rel)
{
	return strncmp(rel, ".ckptfs/", 8) == 0;
}

/* ---- attributes --------------------------------------------------------- */

void proto_meta_from(proto_meta *d, const eng_meta *m)
{
	memset(d, 0, sizeof *d);
	if (!m) {
		d->mode = 0644;
		return;
	}
	d->mode = m->mode & 07777;
	d->uid = m->uid;
	d->gid = m->gid;
	d->mtime_ns = (int64_t)m->mtime.tv_sec * 1000000000LL + m->mtime.tv_nsec;
	if (m->xattrs && m->xattrs_len) {
		d->xattrs = malloc(m->xattrs_len);
		if (d->xattrs) {
			memcpy(d->xattrs, m->xattrs, m->xattrs_len);
			d->xattrs_len = m->xattrs_len;
		}
	}
	d->symlink = m->symlink ? strdup(m->symlink) : NULL;
}

void proto_meta_to(const proto_meta *s, eng_meta *m)
{
	memset(m, 0, sizeof *m);
	m->mode = s->mode;
	m->uid = s->uid;
	m->gid = s->gid;
	m->mtime.tv_sec = (time_t)(s->mtime_ns / 1000000000LL);
	m->mtime.tv_nsec = (long)(s->mtime_ns % 1000000000LL);
	m->xattrs = s->xattrs;
	m->xattrs_len = s->xattrs_len;
	m->symlink = s->symlink;
}

void proto_meta_free(proto_meta *m)
{
	free(m->xattrs);
	free(m->symlink);
	memset(m, 0, sizeof *m);
}

/* user xattrs as {"name":"base64",...} (the manifest's form), or nothing
 * when there are none or they would not fit in object metadata. */
static void xattrs_json(const proto_meta *m, buf *store)
{
	size_t pos = 0, start = store->len;
	const char *name, *val;
	uint32_t vlen;
	bool first = true;
	while (m->xattrs &&
	       proto_xattr_next(m->xattrs, m->xattrs_len, &pos, &name, &val,
				&vlen)) {
		for (const char *c = name; *c; c++) {
			if (*c < 0x21 || *c > 0x7e || *c == '"' || *c == '\\') {
				store->len = start; /* not printable: skip all */
				return;
			}
		}
		buf_printf(store, "%s\"%s\":\"", first ? "{" : ",", name);
		first = false;
		size_t need = 4 * ((vlen + 2) / 3) + 1;
		if (buf_reserve(store, need) < 0) {
			store->len = start;
			return;
		}
		int n = EVP_EncodeBlock((unsigned char *)store->data + store->len,
					(const unsigned char *)val, (int)vlen);
		store->len += (size_t)n;
		buf_putc(store, '"');
		if (store->len - start > PROTO_META_XATTRS_MAX) {
			store->len = start;
			return;
		}
	}
	if (!first)
		buf_putc(store, '}');
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
	if (m->symlink) {
		names[n] = "symlink";
		off[n++] = store->len;
		size_t len = strlen(m->symlink);
		for (size_t i = 0; i < len; i++) {
			unsigned char c = (unsigned char)m->symlink[i];
			bool edge = (i == 0 || i + 1 == len) && c == ' ';
			if (c < 0x20 || c > 0x7e || c == '%' || edge)
				buf_printf(store, "%%%02X", c);
			else
				buf_putc(store, (char)c);
		}
		buf_putc(store, '\0');
	}
	size_t before = store->len;
	xattrs_json(m, store);
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

/* ---- manifests ---------------------------------------------------------- */

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

static int put_attrs(json_t *o, const proto_meta *m)
{
	if (!m)
		return 0;
	int rc = json_object_set_new(o, "mode", json_integer(m->mode)) |
		 json_object_set_new(o, "uid", json_integer(m->uid)) |
		 json_object_set_new(o, "gid", json_integer(m->gid)) |
		 json_object_set_new(o, "mtime", json_integer(m->mtime_ns));
	if (m->symlink) {
		json_t *s = json_string(m->symlink);
		if (!s)
			return -1;
		rc |= json_object_set_new(o, "symlink", s);
	}
	if (m->xattrs_len) {
		json_t *x = json_object();
		size_t pos = 0;
		const char *name, *val;
		uint32_t vlen;
		while (x && proto_xattr_next(m->xattrs, m->xattrs_len, &pos,
					     &name, &val, &vlen)) {
			json_t *v = b64(val, vlen);
			if (!v || json_object_set_new(x, name, v) < 0)
				rc = -1;
		}
		rc |= x ? json_object_set_new(o, "xattrs", x) : -1;
	}
	return rc ? -1 : 0;
}

static json_t *manifest_head(const char *writer, uint64_t txn,
			     const char *state)
{
	return json_pack("{s:i,s:s,s:s,s:I}", "version", 1, "writer", writer,
			 "state", state, "txn", (json_int_t)txn);
}

char *proto_manifest_json(const char *writer, uint64_t txn, int64_t time_ns,
			  const proto_mfile *f, size_t nf, const proto_mdir *d,
			  size_t nd)
{
	json_t *root = manifest_head(writer, txn, "committed");
	json_t *files = json_array(), *dirs = json_array();
	bool ok = root && files && dirs &&
		  !json_object_set_new(root, "time", json_integer(time_ns));
	char crc[9];
	for (size_t i = 0; ok && i < nf; i++) {
		json_t *p = json_string(f[i].path);
		json_t *o = p ? json_pack("{s:o,s:I,s:s}", "path", p, "size",
					  (json_int_t)f[i].size, "etag",
					  f[i].etag ? f[i].etag : "")
			      : NULL;
		if (o && f[i].has_crc) {
			snprintf(crc, sizeof crc, "%08" PRIx32, f[i].crc32c);
			json_object_set_new(o, "crc32c", json_string(crc));
		}
		if (o && proto_blocks_valid(f[i].blocks, f[i].size, f[i].block)) {
			json_object_set_new(o, "block", json_integer(f[i].block));
			json_object_set_new(o, "blocks",
					    json_string(f[i].blocks));
		}
		ok = o && !put_attrs(o, f[i].m) && !json_array_append_new(files, o);
	}
	for (size_t i = 0; ok && i < nd; i++) {
		json_t *p = json_string(d[i].path);
		json_t *o = p ? json_pack("{s:o}", "path", p) : NULL;
		ok = o && !put_attrs(o, d[i].m) && !json_array_append_new(dirs, o);
	}
	char *s = NULL;
	if (ok) {
		json_object_set(root, "files", files);
		json_object_set(root, "dirs", dirs);
		s = json_dumps(root, JSON_COMPACT);
	}
	json_decref(files);
	json_decref(dirs);
	json_decref(root);
	return s;
}

char *proto_intent_json(const char *writer, uint64_t txn)
{
	json_t *root = manifest_head(writer, txn, "pending");
	char *s = root ? json_dumps(root, JSON_COMPACT) : NULL;
	json_decref(root);
	return s;
}

/* ---- ordering ----------------------------------------------------------- */

bool proto_upload_blocked(const proto_step *q, size_t n, size_t self,
			  const char *path)
{
	for (size_t i = 0; i < self && i < n; i++) {
		if (q[i].done)
			continue;
		if ((q[i].a && proto_overlap(q[i].a, path)) ||
		    (q[i].b && proto_overlap(q[i].b, path)))
			return true;
	}
	return false;
}
