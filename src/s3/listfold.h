/*
 * s3/listfold: delimiter listings made on the client, for servers whose
 * own are wrong (doc/portability.md).
 *
 * s3rver 3 answers a ListObjectsV2 with delimiter '/' without the common
 * prefix of a child all of whose keys lie two or more levels down: under
 * prefix P, the key P/a/b/c does not make P/a/ appear unless some key
 * P/a/x exists.  A mount would then miss such directories, and, worse,
 * the pending markers of the commit protocol (P/.ckptfs-pending/C/W@lease
 * are two levels down), so a reader could see a checkpoint that is not
 * complete.  In flat mode the client lists without a delimiter and folds
 * each page here into what a correct server would have answered: every
 * key with the delimiter after the prefix becomes the common prefix up to
 * and including its first delimiter, once.
 *
 * s3_fold_page is a pure function of its page and the state carried from
 * the page before (the last prefix made, so a run of keys under one child
 * spread over pages gives it once).  s3_fold_missing checks two first
 * pages of one prefix, one flat and one with the delimiter, for the
 * defect (the read-only mount's probe: no writes).
 */
#ifndef CKPTFS_S3_LISTFOLD_H
#define CKPTFS_S3_LISTFOLD_H

#include <stdbool.h>
#include <stddef.h>

#include "s3/xml.h"

typedef struct s3_fold {
	char *last; /* the last common prefix made (key bytes), or NULL */
	size_t last_len;
} s3_fold;

/*
 * Rewrites page (a flat listing of prefix) in place into the delimiter
 * listing of prefix: objects whose key has delim after prefix leave
 * page->objects, and their common prefixes are appended to
 * page->prefixes (sorted as they come, each once across the pages of one
 * fold).  Keys outside prefix are left alone.  Returns 0, or -1 on ENOMEM
 * (page then still valid to free, maybe partly folded).
 */
int s3_fold_page(s3_fold *st, const char *prefix, const char *delim,
		 s3_list_result *page);
void s3_fold_free(s3_fold *st);

/*
 * Whether delimited, the first page of the delimiter listing of prefix,
 * lacks a common prefix that flat, the first page of the flat listing of
 * the same prefix, shows, within the key range both pages cover.  On
 * true, *example (malloc'd, may be NULL on ENOMEM) names one such
 * missing prefix.
 */
bool s3_fold_missing(const char *prefix, const char *delim,
		     const s3_list_result *flat,
		     const s3_list_result *delimited, char **example);

#endif
