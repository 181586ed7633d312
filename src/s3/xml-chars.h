/*
 * s3/xml-chars.c: the characters XML 1.0 forbids (C0 controls but NUL,
 * U+FFFE, U+FFFF, surrogates; as references or raw) carried through expat.
 * xml_chars_carry rewrites them in element text into <?ckptfs-bytes HEX?>
 * instructions, which the engine of xml.c turns back into those bytes
 * with xml_chars_bytes.  Pure functions; private to src/s3/xml.c.
 */
#ifndef CKPTFS_S3_XML_CHARS_H
#define CKPTFS_S3_XML_CHARS_H

#include <stddef.h>

#include "util/buf.h"

#define XML_BYTES_PI "ckptfs-bytes"
enum {
	XML_CHARS_NONE = 0,
	XML_CHARS_CARRIED = 1,
	XML_CHARS_OOM = -1,
	XML_CHARS_RESERVED = -2, /* the body holds a <?ckptfs-bytes?> */
	XML_CHARS_BAD = -3,
};
int xml_chars_carry(const char *body, size_t len, buf *o);
int xml_chars_bytes(const char *data, buf *out);

#endif
