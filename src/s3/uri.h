/*
 * uri: percent-encoding as S3 and SigV4 define it.
 *
 * Unreserved characters (A-Z a-z 0-9 - . _ ~) pass through; every other byte
 * becomes %XX with upper-case hex.  Object keys are encoded once with '/'
 * kept (keep_slash) to form request paths; query names and values are
 * encoded with '/' escaped.
 */
#ifndef CKPTFS_S3_URI_H
#define CKPTFS_S3_URI_H

#include <stdbool.h>
#include <stddef.h>

#include "util/buf.h"

/* Appends the encoding of s[0..n) to out.  Returns 0, or -1 on ENOMEM. */
int uri_encode(buf *out, const char *s, size_t n, bool keep_slash);

/*
 * Decodes %XX escapes of s[0..n) into a malloc'd NUL-terminated string and
 * stores its length (which may be less than strlen if %00 occurs) in
 * *out_len.  When plus_is_space is set '+' decodes to ' ' (S3 list responses
 * with encoding-type=url).  Returns NULL on a malformed escape or ENOMEM.
 */
char *uri_decode(const char *s, size_t n, bool plus_is_space, size_t *out_len);

#endif
