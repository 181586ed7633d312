/*
 * s3/xml.c's engine, as the document types in xml-upload.c see it: the
 * xml_spec a document type is, the parse state (xml_ctx) its hooks get,
 * and the functions of xml.c the hooks call.  Holds nothing of another
 * file (the forbidden characters are xml-chars.h's).  Not part of the
 * module's interface: include it from src/s3/xml.c and
 * src/s3/xml-upload.c only.
 *
 * A document type is an xml_spec: its root element (and an alternative)
 * and two hooks, open(path) when an element starts and close(path, text)
 * when it ends, path being the element's path below the root ("" for the
 * root itself).  Hooks find their private state in x->state, report
 * problems with xml_fail (first error wins, parsing stops) and use the
 * xml_take_* helpers, which refuse a field that occurs twice.
 */
#ifndef CKPTFS_S3_XML_INTERNAL_H
#define CKPTFS_S3_XML_INTERNAL_H

#include <expat.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "s3/xml.h"
#include "util/buf.h"

enum { XML_MAX_DEPTH = 32 };

typedef struct xml_ctx xml_ctx;

typedef struct xml_spec {
	const char *root;
	const char *alt_root; /* a second accepted root name, or NULL */
	int (*open)(xml_ctx *x, const char *path);
	int (*close)(xml_ctx *x, const char *path, const char *text,
		     size_t len);
} xml_spec;

struct xml_ctx {
	XML_Parser xp;
	const xml_spec *spec;
	const char *what;  /* the expected root, prefixed to messages */
	void *state;	   /* the document type's private state */
	s3_error *err_doc; /* where an <Error> root goes; NULL: refused */
	bool got_err_doc;
	bool parsing;	/* inside XML_Parse: XML_StopParser applies */
	bool carried;	/* the body was rewritten by xml_chars_carry */
	unsigned depth; /* open elements, root included */
	size_t path_len[XML_MAX_DEPTH];
	buf path;
	buf text;
	char *err;
};

/* Records the first error only and stops expat; always returns -1. */
int xml_fail(xml_ctx *x, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

int xml_oom(xml_ctx *x);

/* Stores the text of a field that may occur at most once. */
int xml_take_str(xml_ctx *x, char **dst, const char *name, const char *text,
		 size_t len);
/* Like xml_take_str, also recording the length (keys may gain NULs later). */
int xml_take_key(xml_ctx *x, char **dst, size_t *dst_len, const char *name,
		 const char *text, size_t len);
int xml_take_bool(xml_ctx *x, bool *dst, const char *name, const char *text);
int xml_take_time(xml_ctx *x, struct timespec *dst, const char *name,
		  const char *text);
/* Percent-decodes *s ('+' is space) in place of the raw text. */
int xml_decode_key(xml_ctx *x, char **s, size_t *len, const char *name);
/* Returns arr with room for element n (growing *cap), or NULL on ENOMEM
 * with arr untouched. */
void *xml_grow_array(void *arr, size_t *cap, size_t n, size_t size);
bool xml_is_encoding_url(const char *text);

/*
 * Parses body as a document of type spec into state.  err_doc: where an
 * <Error> root goes, NULL to refuse one.  Returns 0, S3XML_ERROR_BODY, or
 * -1 with *err set (when err is not NULL).  The caller frees state.
 */
int xml_run(const xml_spec *spec, void *state, s3_error *err_doc,
	    const char *body, size_t len, char **err);

#endif
