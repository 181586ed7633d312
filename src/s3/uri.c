/*
 * uri: RFC 3986 percent-encoding the way S3 and SigV4 use it.
 *
 * Encoding is byte-oriented: it never interprets UTF-8, so a multi-byte
 * character becomes one %XX per byte, and any byte outside the unreserved
 * set (A-Z a-z 0-9 - . _ ~), including NUL, is escaped with upper-case hex.
 * '/' is the only byte whose treatment is chosen by the caller.
 *
 * Invariants:
 *  - uri_encode either appends the whole encoding or leaves the buffer
 *    untouched: it reserves the worst case (3 bytes per input byte) before
 *    writing, so a failed allocation never leaves half an escape behind.
 *  - uri_decode rejects every malformed escape ('%' not followed by two hex
 *    digits) instead of passing it through, so a decoded string always
 *    round-trips to the canonical encoding.  Decoded output may contain NUL
 *    bytes (%00); callers that care use the reported length, not strlen.
 */
#include "s3/uri.h"
#include "util/hex.h"

#include <stdint.h>
#include <stdlib.h>

static const char uri_hex[] = "0123456789ABCDEF";

static bool uri_unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	       c == '~';
}

int uri_encode(buf *out, const char *s, size_t n, bool keep_slash)
{
	if (n > (SIZE_MAX - 1 - out->len) / 3)
		return -1;
	if (buf_reserve(out, 3 * n) < 0)
		return -1;
	char *p = out->data + out->len;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (uri_unreserved(c) || (c == '/' && keep_slash)) {
			*p++ = (char)c;
			continue;
		}
		*p++ = '%';
		*p++ = uri_hex[c >> 4];
		*p++ = uri_hex[c & 0x0f];
	}
	*p = '\0';
	out->len = (size_t)(p - out->data);
	return 0;
}

/* Value of one hex digit, or -1. */
char *uri_decode(const char *s, size_t n, bool plus_is_space, size_t *out_len)
{
	if (n == SIZE_MAX)
		return NULL;
	char *out = malloc(n + 1);
	if (!out)
		return NULL;
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c == '+' && plus_is_space) {
			out[o++] = ' ';
			continue;
		}
		if (c != '%') {
			out[o++] = c;
			continue;
		}
		/* Both digits must exist and be hex: "%", "%2", "%zz" fail. */
		int hi = i + 2 < n ? hex_val(s[i + 1]) : -1;
		int lo = hi >= 0 ? hex_val(s[i + 2]) : -1;
		if (lo < 0) {
			free(out);
			return NULL;
		}
		out[o++] = (char)(hi << 4 | lo);
		i += 2;
	}
	out[o] = '\0';
	if (out_len)
		*out_len = o;
	return out;
}
