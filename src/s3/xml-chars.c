/*
 * s3xml: the characters XML 1.0 forbids but S3 keys may hold, carried
 * through expat as the bytes they stand for (declared in xml-chars.h).
 * Used by the engine of xml.c; calls nothing of it.
 *
 * Ceph RGW writes a byte below 0x20 that is not tab, LF or CR as a
 * character reference (&#x01;) wherever it does not percent-encode: in
 * NextContinuationToken and ContinuationToken (its tokens are the raw
 * last key), StartAfter, NextKeyMarker, and every <Key> of a reply it does
 * not encode (InitiateMultipartUpload).  It writes U+FFFE and U+FFFF as
 * their raw UTF-8 bytes.  XML 1.0 forbids these characters in either form
 * and expat refuses the whole body, so one such key in a bucket made every
 * listing that ends a page on it, and the mount's first probe, fail.
 *
 * xml_chars_carry rewrites each of them in element text into a processing
 * instruction <?ckptfs-bytes HEX?> holding the exact bytes meant (a code
 * point in UTF-8 form; a surrogate in the same 3-byte form), and the engine
 * appends those bytes to the element's text.  The text therefore holds the
 * bytes the server meant, the same as for a percent-encoded %01, and every
 * document type gets it (a continuation token sent back must be the exact
 * key; a copy of the bytes is always right).  Untouched: &#0; (text stays
 * a C string, so it is still refused), references inside CDATA sections,
 * comments, processing instructions and tags (attribute values), where
 * either they are literal text or XML forbids them and expat still
 * refuses them.  A body that already holds such a processing instruction
 * is refused, so the bytes can only come from a reference.
 */
#include "s3/xml-chars.h"

#include <stdbool.h>
#include <string.h>

#include "util/buf.h"

static bool forbidden_code_point(unsigned long cp)
{
	return (cp >= 1 && cp < 0x20 && cp != 0x9 && cp != 0xA && cp != 0xD) ||
	       (cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFFFE || cp == 0xFFFF;
}

/* The length of a character reference at p ("&#N;" or "&#xH;", 1 to 7
 * digits) with its code point in *cp, or 0 when p holds none. */
static size_t char_ref(const char *p, const char *end, unsigned long *cp)
{
	const char *q = p + 2;
	bool hex = q < end && *q == 'x';
	q += hex;
	unsigned long v = 0;
	size_t n = 0;
	for (; q < end && n < 8; q++, n++) {
		int d = *q >= '0' && *q <= '9'		? *q - '0'
			: hex && *q >= 'a' && *q <= 'f' ? *q - 'a' + 10
			: hex && *q >= 'A' && *q <= 'F' ? *q - 'A' + 10
							: -1;
		if (d < 0)
			break;
		v = v * (hex ? 16 : 10) + (unsigned long)d;
	}
	if (n == 0 || n == 8 || q >= end || *q != ';')
		return 0;
	*cp = v;
	return (size_t)(q + 1 - p);
}

/* UTF-8 form of a code point below 0x10000 (surrogates included). */
static size_t utf8_bytes(unsigned long cp, unsigned char out[3])
{
	if (cp < 0x80) {
		out[0] = (unsigned char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (unsigned char)(0xC0 | cp >> 6);
		out[1] = (unsigned char)(0x80 | (cp & 0x3F));
		return 2;
	}
	out[0] = (unsigned char)(0xE0 | cp >> 12);
	out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
	out[2] = (unsigned char)(0x80 | (cp & 0x3F));
	return 3;
}

static int put_bytes_pi(buf *o, const unsigned char *b, size_t n)
{
	if (buf_puts(o, "<?" XML_BYTES_PI " ") < 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (buf_printf(o, "%02x", b[i]) < 0)
			return -1;
	return buf_puts(o, "?>");
}

/* The end of markup starting at p: past `close` (or the body's end). */
static const char *skip_to(const char *p, const char *end, const char *close)
{
	size_t n = strlen(close);
	const char *q = memmem(p, (size_t)(end - p), close, n);
	return q ? q + n : end;
}

/* The end of a tag at p: its '>' outside quoted attribute values. */
static const char *skip_tag(const char *p, const char *end)
{
	char quote = 0;
	for (; p < end; p++) {
		if (quote) {
			if (*p == quote)
				quote = 0;
		} else if (*p == '"' || *p == '\'') {
			quote = *p;
		} else if (*p == '>') {
			return p + 1;
		}
	}
	return end;
}

static bool starts(const char *p, const char *end, const char *s)
{
	size_t n = strlen(s);
	return (size_t)(end - p) >= n && memcmp(p, s, n) == 0;
}

/* Whether body may hold anything carry_forbidden rewrites. */
static bool maybe_forbidden(const char *body, size_t len)
{
	if (memmem(body, len, "&#", 2))
		return true;
	return memmem(body, len, "\xEF\xBF\xBE", 3) ||
	       memmem(body, len, "\xEF\xBF\xBF", 3);
}

/* The markup at p ('<'): the end of what is copied as it is, or NULL for a
 * processing instruction only xml_chars_carry may write. */
static const char *skip_markup(const char *p, const char *end)
{
	if (starts(p, end, "<!--"))
		return skip_to(p + 4, end, "-->");
	if (starts(p, end, "<![CDATA["))
		return skip_to(p + 9, end, "]]>");
	if (starts(p, end, "<?" XML_BYTES_PI))
		return NULL;
	if (starts(p, end, "<?"))
		return skip_to(p + 2, end, "?>");
	return skip_tag(p + 1, end);
}

/*
 * Rewrites the characters XML 1.0 forbids in the body's text into
 * <?ckptfs-bytes?> instructions (see above).  Returns XML_CHARS_CARRIED
 * with the new body in *o, XML_CHARS_NONE when there was nothing to
 * rewrite, XML_CHARS_RESERVED when the body holds such an instruction
 * itself, XML_CHARS_OOM.
 */
int xml_chars_carry(const char *body, size_t len, buf *o)
{
	if (!maybe_forbidden(body, len))
		return XML_CHARS_NONE;
	const char *p = body, *end = body + len, *copied = body;
	bool changed = false;
	while (p < end) {
		unsigned char b[3];
		size_t n = 0, used = 0;
		unsigned long cp;
		if (*p == '<') {
			const char *q = skip_markup(p, end);
			if (!q)
				return XML_CHARS_RESERVED;
			p = q;
			continue;
		}
		if (*p == '&' && starts(p, end, "&#") &&
		    (used = char_ref(p, end, &cp)) && forbidden_code_point(cp))
			n = utf8_bytes(cp, b);
		else if (starts(p, end, "\xEF\xBF\xBE") ||
			 starts(p, end, "\xEF\xBF\xBF")) {
			memcpy(b, p, 3);
			n = used = 3;
		}
		if (!n) {
			p++;
			continue;
		}
		if (buf_append(o, copied, (size_t)(p - copied)) < 0 ||
		    put_bytes_pi(o, b, n) < 0)
			return XML_CHARS_OOM;
		p += used;
		copied = p;
		changed = true;
	}
	if (!changed)
		return XML_CHARS_NONE;
	if (buf_append(o, copied, (size_t)(end - copied)) < 0)
		return XML_CHARS_OOM;
	return XML_CHARS_CARRIED;
}

static int hex_digit(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
				      : -1;
}

/* Appends the bytes of a <?ckptfs-bytes HEX?> instruction's data to out:
 * 0, XML_CHARS_BAD (not pairs of lowercase hex digits, or a NUL),
 * XML_CHARS_OOM. */
int xml_chars_bytes(const char *data, buf *out)
{
	for (const char *d = data; *d; d += 2) {
		int hi = hex_digit(d[0]), lo = hi < 0 ? -1 : hex_digit(d[1]);
		if (lo < 0 || (hi == 0 && lo == 0))
			return XML_CHARS_BAD;
		if (buf_putc(out, (char)(hi << 4 | lo)) < 0)
			return XML_CHARS_OOM;
	}
	return 0;
}
