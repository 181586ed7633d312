/*
 * s3/listfold: delimiter listings folded on the client (listfold.h).
 */
#include "s3/listfold.h"
#include "util/vec.h"

#include <stdlib.h>
#include <string.h>

/* Length of the common prefix key[0..len) falls under (prefix + child +
 * delim), or 0 when the key lies directly in prefix or outside it. */
static size_t child_prefix_len(const char *key, size_t len, const char *prefix,
			       size_t plen, const char *delim, size_t dlen)
{
	if (len < plen || memcmp(key, prefix, plen) != 0 || !dlen)
		return 0;
	const char *d = memmem(key + plen, len - plen, delim, dlen);
	return d ? (size_t)(d - key) + dlen : 0;
}

/* Appends a prefix to p, whose two prefix arrays have room for *cap. */
static int append_prefix(s3_list_result *p, size_t *cap, const char *key,
			 size_t n)
{
	char **v = p->prefixes;
	size_t *l = p->prefix_lens;
	if (p->n_prefixes == *cap) {
		/* both arrays, one cap: it advances once both grew */
		size_t c2 = *cap, c1 = *cap;
		if (!(v = vec_grow(p->prefixes, &c1, sizeof *v, 16)))
			return -1;
		p->prefixes = v;
		if (!(l = vec_grow(p->prefix_lens, &c2, sizeof *l, 16)))
			return -1;
		p->prefix_lens = l;
		*cap = c1;
	}
	char *s = malloc(n + 1);
	if (!s)
		return -1;
	memcpy(s, key, n);
	s[n] = '\0';
	v[p->n_prefixes] = s;
	l[p->n_prefixes] = n;
	p->n_prefixes++;
	return 0;
}

static bool same(const char *a, size_t an, const char *b, size_t bn)
{
	return an == bn && memcmp(a, b, an) == 0;
}

/* Whether key (with a child prefix of cp bytes) lies two levels down. */
static bool two_down(const char *key, size_t len, size_t cp, const char *delim,
		     size_t dlen)
{
	return memmem(key + cp, len - cp, delim, dlen) != NULL;
}

/* The run of keys under st->last ends: if every one of them lay two
 * levels down, it is the evidence (the first such run is kept). */
static void run_end(s3_fold *st)
{
	if (st->last && st->last_deep && !st->deep) {
		st->deep = malloc(st->last_len);
		if (st->deep) {
			memcpy(st->deep, st->last, st->last_len);
			st->deep_len = st->last_len;
		}
	}
	st->last_deep = false;
}

int s3_fold_page(s3_fold *st, const char *prefix, const char *delim,
		 s3_list_result *page)
{
	size_t plen = strlen(prefix), dlen = strlen(delim);
	size_t keep = 0, pcap = page->n_prefixes;
	int rc = 0;
	for (size_t i = 0; i < page->n_objects; i++) {
		s3_object *o = &page->objects[i];
		size_t cp = rc ? 0
			       : child_prefix_len(o->key, o->key_len, prefix,
						  plen, delim, dlen);
		if (!cp) {
			page->objects[keep++] = *o;
			continue;
		}
		bool deep = two_down(o->key, o->key_len, cp, delim, dlen);
		if (!st->last || !same(st->last, st->last_len, o->key, cp)) {
			char *last = malloc(cp);
			if (!last || append_prefix(page, &pcap, o->key, cp) < 0) {
				free(last);
				rc = -1;
				page->objects[keep++] = *o;
				continue;
			}
			memcpy(last, o->key, cp);
			run_end(st);
			free(st->last);
			st->last = last;
			st->last_len = cp;
			st->last_deep = deep;
		} else {
			st->last_deep = st->last_deep && deep;
		}
		free(o->key);
		free(o->etag);
	}
	page->n_objects = keep;
	return rc;
}

void s3_fold_finish(s3_fold *st)
{
	run_end(st);
}

void s3_fold_free(s3_fold *st)
{
	free(st->last);
	free(st->deep);
	memset(st, 0, sizeof *st);
}

/* Bytewise order of two keys of known lengths. */
static int key_cmp(const char *a, size_t an, const char *b, size_t bn)
{
	int c = memcmp(a, b, an < bn ? an : bn);
	return c ? c : (an > bn) - (an < bn);
}

static size_t prefix_len_at(const s3_list_result *r, size_t i)
{
	return r->prefix_lens ? r->prefix_lens[i] : strlen(r->prefixes[i]);
}

int s3_fold_verdict(const char *cp, size_t cp_len,
		    const s3_list_result *delimited)
{
	const char *end = NULL;
	size_t end_len = 0;
	for (size_t i = 0; i < delimited->n_prefixes; i++) {
		size_t n = prefix_len_at(delimited, i);
		if (same(delimited->prefixes[i], n, cp, cp_len))
			return 0;
		if (!end || key_cmp(delimited->prefixes[i], n, end, end_len) > 0)
			end = delimited->prefixes[i], end_len = n;
	}
	if (!delimited->truncated)
		return 1;
	for (size_t i = 0; i < delimited->n_objects; i++) {
		const s3_object *o = &delimited->objects[i];
		if (!end || key_cmp(o->key, o->key_len, end, end_len) > 0)
			end = o->key, end_len = o->key_len;
	}
	/* stopped early: missing only if the page went past where cp sorts */
	return end && key_cmp(cp, cp_len, end, end_len) < 0 ? 1 : -1;
}

int s3_fold_check(const char *prefix, const char *delim,
		  const s3_list_result *flat, const s3_list_result *delimited,
		  char **example)
{
	size_t plen = strlen(prefix), dlen = strlen(delim);
	int verdict = -1;
	const char *run = NULL; /* the current run's child prefix */
	size_t run_len = 0;
	bool run_deep = false;
	for (size_t i = 0; i <= flat->n_objects && verdict != 1; i++) {
		const s3_object *o = i < flat->n_objects ? &flat->objects[i]
							: NULL;
		size_t cp = o ? child_prefix_len(o->key, o->key_len, prefix,
						 plen, delim, dlen)
			      : 0;
		if (o && !cp)
			continue;
		if (o && run && same(run, run_len, o->key, cp)) {
			run_deep = run_deep &&
				   two_down(o->key, o->key_len, cp, delim, dlen);
			continue;
		}
		/* a run ended; the page's last one only if nothing follows */
		if (run && run_deep && (o || !flat->truncated)) {
			int v = s3_fold_verdict(run, run_len, delimited);
			if (v == 1 && example)
				*example = strndup(run, run_len);
			if (v >= 0)
				verdict = v;
		}
		if (o) {
			run = o->key;
			run_len = cp;
			run_deep = two_down(o->key, o->key_len, cp, delim, dlen);
		}
	}
	return verdict;
}
