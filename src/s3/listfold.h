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
 * spread over pages gives it once).  It also keeps the first common prefix
 * all of whose keys lie two or more levels down (st->deep, known once its
 * run of keys ended, or at s3_fold_finish): the evidence that tells a
 * correct server from a defective one, since only such a prefix is
 * missing from a defective server's delimiter listing (a key directly in
 * the child, or the child's own marker key, makes s3rver show it).
 * s3_fold_verdict and s3_fold_check judge a delimiter page by it (the
 * probes of a mount that may not write: s3/probe.h).
 */
#ifndef CKPTFS_S3_LISTFOLD_H
#define CKPTFS_S3_LISTFOLD_H

#include <stdbool.h>
#include <stddef.h>

#include "s3/xml.h"

typedef struct s3_fold {
	char *last; /* the last common prefix made (key bytes), or NULL */
	size_t last_len;
	bool last_deep; /* every key under last so far lies two levels down */
	char *deep; /* the first prefix all of whose keys lie two levels
		     * down, or NULL */
	size_t deep_len;
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
/* The listing ended (every page folded): the last run may be evidence. */
void s3_fold_finish(s3_fold *st);
void s3_fold_free(s3_fold *st);

/*
 * Whether delimited, a first page of a delimiter listing, shows the
 * common prefix cp (cp_len bytes): 0 it does, 1 it is missing although
 * the page covers where it sorts, -1 the page stopped before it.
 */
int s3_fold_verdict(const char *cp, size_t cp_len,
		    const s3_list_result *delimited);

/*
 * The same for the first pages of one prefix listed flat and with the
 * delimiter: 1 delimited lacks a common prefix all of whose keys in flat
 * lie two or more levels down (*example, malloc'd, names it when example
 * is not NULL), 0 it has every such prefix it covers, -1 no evidence
 * either way (no such prefix, or not within the range both pages cover).
 */
int s3_fold_check(const char *prefix, const char *delim,
		  const s3_list_result *flat, const s3_list_result *delimited,
		  char **example);

#endif
