/*
 * buf: a growable byte buffer, always NUL-terminated.
 *
 * Used for building request strings, collecting response bodies and
 * assembling canonical requests.  All appends keep data[len] == '\0' so the
 * contents can be used as a C string when they hold text.  On allocation
 * failure the append functions return -1 and leave the buffer unchanged.
 */
#ifndef CKPTFS_UTIL_BUF_H
#define CKPTFS_UTIL_BUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct buf {
	char *data; /* NULL until the first append */
	size_t len;
	size_t cap;
} buf;

#define BUF_INIT {NULL, 0, 0}

void buf_init(buf *b);
void buf_free(buf *b);
void buf_reset(buf *b); /* len = 0, keeps memory */
int buf_reserve(buf *b, size_t extra);
int buf_append(buf *b, const void *p, size_t n);
int buf_puts(buf *b, const char *s);
int buf_putc(buf *b, char c);
int buf_printf(buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int buf_vprintf(buf *b, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

/* Sets *err (when err is not NULL and *err is still NULL: the first
 * message wins) to a malloc'd message, NULL if even that fails. */
void buf_set_err(char **err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Returns the malloc'd NUL-terminated contents ("" if empty) and resets b. */
char *buf_steal(buf *b);
/* Returns a C string view, "" when empty. */
const char *buf_cstr(const buf *b);

#endif
