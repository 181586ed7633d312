/*
 * buf: growable byte buffer.  Invariant: data == NULL && len == cap == 0, or
 * data holds cap bytes with len < cap and data[len] == '\0'.
 */
#include "util/buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/vec.h"

void buf_init(buf *b)
{
	b->data = NULL;
	b->len = b->cap = 0;
}

void buf_free(buf *b)
{
	free(b->data);
	buf_init(b);
}

void buf_reset(buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

int buf_reserve(buf *b, size_t extra)
{
	char *p = vec_reserve(b->data, &b->cap, 1, b->len + extra + 1, 64);
	if (!p)
		return -1;
	b->data = p;
	return 0;
}

int buf_append(buf *b, const void *p, size_t n)
{
	if (buf_reserve(b, n) < 0)
		return -1;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int buf_puts(buf *b, const char *s)
{
	return buf_append(b, s, strlen(s));
}

int buf_putc(buf *b, char c)
{
	return buf_append(b, &c, 1);
}

int buf_vprintf(buf *b, const char *fmt, va_list ap)
{
	va_list ap2;
	va_copy(ap2, ap);
	int n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n < 0 || buf_reserve(b, (size_t)n) < 0)
		return -1;
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return 0;
}

int buf_printf(buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = buf_vprintf(b, fmt, ap);
	va_end(ap);
	return r;
}

char *buf_steal(buf *b)
{
	char *p = b->data;
	if (!p)
		p = calloc(1, 1);
	buf_init(b);
	return p;
}

const char *buf_cstr(const buf *b)
{
	return b->data ? b->data : "";
}

void buf_set_err(char **err, const char *fmt, ...)
{
	if (!err || *err)
		return;
	va_list ap;
	va_start(ap, fmt);
	buf b = BUF_INIT;
	int r = buf_vprintf(&b, fmt, ap);
	va_end(ap);
	*err = r == 0 ? buf_steal(&b) : NULL;
	buf_free(&b);
}
