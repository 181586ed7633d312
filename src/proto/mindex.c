/*
 * proto/mindex: the manifest index document (mindex.h).  Pure functions:
 * commit/steps.c writes it, fs/listing.c reads it.
 */
#include "proto/mindex.h"

#include <stdlib.h>
#include <string.h>

#include "proto/keys.h"

bool proto_is_index_name(const char *name)
{
	size_t n = strlen(name);
	return !strchr(name, '/') && n > 10 && !strncmp(name, "index.", 6) &&
	       !strcmp(name + n - 4, ".txt");
}

/* The key of a file of root's PROTO_META_DIR: NAME WRITER SUFFIX. */
static char *meta_key(const char *prefix, const char *root, const char *name,
		      const char *writer, const char *suffix)
{
	buf b = BUF_INIT;
	buf_printf(&b, "%s%s%s" PROTO_META_DIR "/%s%s%s", prefix, root,
		   root[0] ? "/" : "", name, writer, suffix);
	return buf_steal(&b);
}

char *proto_index_key(const char *prefix, const char *root,
		      const char *writer)
{
	return meta_key(prefix, root, "index.", writer, ".txt");
}

bool proto_is_claim_name(const char *name)
{
	return !strchr(name, '/') && strlen(name) > 6 && !strncmp(name, "claim.", 6);
}

char *proto_claim_key(const char *prefix, const char *root,
		      const char *writer)
{
	return meta_key(prefix, root, "claim.", writer, "");
}

static bool token_ok(const char *s)
{
	return *s && !strpbrk(s, " \n\r\t");
}

int proto_index_add(buf *b, const char *name, const char *etag,
		    const char *body, size_t len)
{
	if (!token_ok(name) || !token_ok(etag))
		return -1;
	if (b->len == 0 && buf_puts(b, PROTO_INDEX_MAGIC) < 0)
		return -1;
	if (buf_printf(b, "%s %s %zu\n", name, etag, len) < 0 ||
	    buf_append(b, body, len) < 0 || buf_putc(b, '\n') < 0)
		return -1;
	return 0;
}

int proto_index_parse(const char *data, size_t len, proto_index_fn fn,
		      void *arg)
{
	size_t ml = strlen(PROTO_INDEX_MAGIC);
	if (len < ml || memcmp(data, PROTO_INDEX_MAGIC, ml))
		return -1;
	size_t i = ml;
	char name[256], etag[256];
	while (i < len) {
		const char *nl = memchr(data + i, '\n', len - i);
		if (!nl || (size_t)(nl - (data + i)) >= 600)
			return -1;
		size_t hl = (size_t)(nl - (data + i));
		char head[600];
		memcpy(head, data + i, hl);
		head[hl] = 0;
		char *sp1 = strchr(head, ' ');
		char *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
		if (!sp1 || !sp2 || sp1 == head || sp2 == sp1 + 1 ||
		    (size_t)(sp1 - head) >= sizeof name ||
		    (size_t)(sp2 - sp1 - 1) >= sizeof etag)
			return -1;
		memcpy(name, head, (size_t)(sp1 - head));
		name[sp1 - head] = 0;
		memcpy(etag, sp1 + 1, (size_t)(sp2 - sp1 - 1));
		etag[sp2 - sp1 - 1] = 0;
		char *end;
		unsigned long long bl = strtoull(sp2 + 1, &end, 10);
		if (*end || !sp2[1] || sp2[1] == '-')
			return -1;
		i += hl + 1;
		if (bl > len - i || len - i - bl < 1 || data[i + bl] != '\n')
			return -1;
		int rc = fn(arg, name, etag, data + i, (size_t)bl);
		if (rc)
			return rc;
		i += bl + 1;
	}
	return 0;
}
