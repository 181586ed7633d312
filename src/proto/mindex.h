/*
 * proto/mindex: the manifest index of a directory written by many hosts
 * (doc/scale.md, "Manifest index").  Every host that writes into one
 * checkpoint directory C commits its own manifest, and a reader shows C
 * from the union of all of them, so each host's first look into C would
 * GET every host's manifest: hosts x hosts requests.  The writer whose
 * commit finds no other writer's marker of C live (the last one) reads
 * the manifests once and PUTs C/.ckptfs/index.<writer>.txt holding their
 * bodies; a reader GETs it (it lists before the manifests) and takes from
 * it every manifest whose listed ETag is the MD5 of the body it holds, so
 * it GETs only the manifests committed after the index (the claims below
 * keep the writers of one index to about one).
 *
 * The document (text, not JSON: bodies are copied byte for byte):
 *   "ckptfs-manifest-index 1\n", then per manifest
 *   "<name> <etag> <length>\n" <length bytes of its body> "\n".
 * Names are manifest names (proto/keys.h), ETags as listed (quoted).
 * An index is only an accelerator: a reader that cannot use it (absent,
 * malformed, stale) GETs the manifests as before; deleting a directory
 * deletes it with the data.
 */
#ifndef CKPTFS_PROTO_MINDEX_H
#define CKPTFS_PROTO_MINDEX_H

#include <stdbool.h>
#include <stddef.h>

#include "util/buf.h"

#define PROTO_INDEX_MAGIC "ckptfs-manifest-index 1\n"

/* Fewer manifests than this are not worth an index. */
#define PROTO_INDEX_MIN 4

/* Whether name (the last key component in .ckptfs/) is an index. */
bool proto_is_index_name(const char *name);

/* prefix + root + "/.ckptfs/index.<writer>.txt" (malloc'd). */
char *proto_index_key(const char *prefix, const char *root,
		      const char *writer);

/*
 * Claims: several writers whose commits land together can each find no
 * other marker live.  Each PUTs an empty claim.<writer>, waits a second
 * (every racer has PUT its claim by then) and lists the claims; only the
 * writer whose claim sorts first goes on to read the manifests (a racer
 * arriving more than a second late may go on too: it only costs GETs).
 * A claim is deleted once its writer is done; the directory's delete
 * removes any left.
 */
bool proto_is_claim_name(const char *name);
char *proto_claim_key(const char *prefix, const char *root,
		      const char *writer);

/* Appends one manifest's record to b (the magic first when b is empty).
 * Returns -1 on ENOMEM or a name or etag holding a space or newline. */
int proto_index_add(buf *b, const char *name, const char *etag,
		    const char *body, size_t len);

/* Called per record; return non-zero to stop (returned by parse). */
typedef int (*proto_index_fn)(void *arg, const char *name, const char *etag,
			      const char *body, size_t len);

/* Walks the records of an index document.  Returns 0, fn's non-zero
 * value, or -1 when the document is malformed (records before the
 * fault have been passed to fn). */
int proto_index_parse(const char *data, size_t len, proto_index_fn fn,
		      void *arg);

#endif
