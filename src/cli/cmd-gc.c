/*
 * ckptfs gc s3://BUCKET[/PREFIX] [--older-than DURATION] [--dry-run]
 *           [--endpoint URL] [--region R] [--profile P] [-o OPT,...]
 *
 * Works on the bucket directly (no mount): removes abandoned transactions
 * (expired pending markers, their stray objects and pending manifests) and
 * aborts incomplete multipart uploads older than DURATION (default 24h).
 * What is removed is decided by commit/gc.c over one listing of the
 * prefix; this file lists, fetches manifests, re-checks each transaction's
 * markers just before touching it, and deletes.  One output line per thing
 * removed (or that would be, with --dry-run) and a summary; exit 0, or 1
 * with "ckptfs: ..." messages when something failed.
 */
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "commit/gc.h"
#include "proto/keys.h"
#include "proto/manifest.h"
#include "s3/client.h"
#include "s3/config.h"
#include "s3/upload.h"
#include "util/buf.h"
#include "util/log.h"
#include "util/vec.h"

typedef struct gc_args {
	char *url;
	double older_than;
	bool dry_run;
	bool insecure;
	s3_settings s;
} gc_args;

typedef struct gc_run {
	gc_args *a;
	s3_client *c;
	gc_object *objs;
	size_t n, cap;
	time_t now; /* the server's clock: the earliest Date of the listing */
	int failures;
	/* totals */
	size_t txns, objects, manifests, markers, uploads, skipped;
	uint64_t bytes;
} gc_run;

static void gc_usage(FILE *f)
{
	fprintf(f,
		"usage: ckptfs gc s3://BUCKET[/PREFIX] [options]\n"
		"\n"
		"Removes abandoned transactions under the prefix (pending markers whose\n"
		"lease expired, the objects of their transactions that no committed\n"
		"manifest names, their pending manifests) and aborts incomplete multipart\n"
		"uploads. Committed files and live transactions are never touched.\n"
		"\n"
		"  --older-than DURATION  abort multipart uploads initiated longer ago\n"
		"                         (default 24h; 30s, 10m, 2h, 1d)\n"
		"  -n, --dry-run          print what would be removed, remove nothing\n"
		"  --endpoint URL         S3 endpoint (default from AWS config, else AWS)\n"
		"  --region REGION        signing region\n"
		"  --profile NAME         AWS profile for credentials and config\n"
		"  -o OPT[,OPT...]        endpoint=URL region=R profile=P ca_bundle=PATH\n"
		"                         addressing=auto|path|virtual insecure\n");
}

enum { OPT_OLDER = CLI_OPT_OWN };

/* Returns 0, -1 (error, exit 2) or 1 (--help printed, exit 0). */
static int parse_args(gc_args *a, int argc, char **argv)
{
	static const struct option lo[] = {
		{"help", no_argument, NULL, 'h'},
		{"dry-run", no_argument, NULL, 'n'},
		{"older-than", required_argument, NULL, OPT_OLDER},
		CLI_S3_LONG_OPTS,
	};
	int c;
	const char *operand;
	char **const slots[] = {&a->url};
	optind = 1;
	opterr = 0;
	while ((c = cli_getopt(argc, argv, "+hno:", lo, &operand)) != -1) {
		switch (c) {
		case CLI_OPERAND:
			if (cli_take_operand("gc", slots, 1, operand) < 0)
				return -1;
			break;
		case 'h':
			gc_usage(stdout);
			return 1;
		case 'n':
			a->dry_run = true;
			break;
		case OPT_OLDER:
			if (gc_parse_duration(optarg, &a->older_than) < 0) {
				fprintf(stderr, "ckptfs: gc: invalid duration "
						"'%s' (examples: 30s, 10m, "
						"2h, 1d)\n",
					optarg);
				return -1;
			}
			break;
		default: /* -o, --endpoint, --region, --profile */
			if (cli_s3_arg("gc", &a->s, &a->insecure, c, optarg,
				       argv[optind - 1]) < 0)
				return -1;
		}
	}
	if (!a->url) {
		fprintf(stderr, "ckptfs: gc needs s3://BUCKET[/PREFIX]\n");
		gc_usage(stderr);
		return -1;
	}
	return 0;
}

/* ---- listing -------------------------------------------------------------- */

static int push_obj(gc_run *g, const s3_object *o)
{
	if (o->key_len != strlen(o->key))
		return 0; /* %00 in a key: never one of ours */
	if (g->n == g->cap) {
		gc_object *nv = vec_grow(g->objs, &g->cap, sizeof *nv, 1024);
		if (!nv)
			return -1;
		g->objs = nv;
	}
	char *k = strdup(o->key);
	if (!k)
		return -1;
	g->objs[g->n++] = (gc_object){k, o->size, o->mtime.tv_sec};
	return 0;
}

/* One page of list_into (s3_page_fn): the objects, and the earliest
 * server Date seen. */
static int page_into(void *arg, const char *prefix, const s3_list_result *page)
{
	(void)prefix;
	gc_run *g = arg;
	if (page->server_time && (!g->now || page->server_time < g->now))
		g->now = page->server_time;
	for (size_t i = 0; i < page->n_objects; i++)
		if (push_obj(g, &page->objects[i]) < 0)
			return -ENOMEM;
	return 0;
}

/* Every object under prefix (delim NULL: recursive). */
static int list_into(gc_run *g, const char *prefix, const char *delim)
{
	s3_err e = {0};
	if (s3_list_all(g->c, prefix, delim, page_into, g, &e) == 0)
		return 0;
	if (e.err == ENOMEM)
		fprintf(stderr, "ckptfs: gc: out of memory\n");
	else
		fprintf(stderr, "ckptfs: gc: %s\n",
			e.msg[0] ? e.msg : "listing failed");
	return -1;
}

/* The prefix, plus .ckptfs/ of every directory above it (manifests there
 * may name files below the prefix). */
static int list_all(gc_run *g)
{
	const char *prefix = g->a->s.prefix;
	if (list_into(g, prefix, NULL) < 0)
		return -1;
	buf p = BUF_INIT;
	for (const char *q = prefix; *q; q++) {
		if (q != prefix && q[-1] != '/')
			continue;
		buf_reset(&p);
		buf_printf(&p, "%.*s" PROTO_META_DIR "/", (int)(q - prefix),
			   prefix);
		if (!strcmp(buf_cstr(&p), prefix)) /* the prefix is .ckptfs/ */
			continue;
		if (list_into(g, buf_cstr(&p), "/") < 0) {
			buf_free(&p);
			return -1;
		}
	}
	buf_free(&p);
	if (!g->now)
		g->now = time(NULL); /* no Date header: our clock */
	return 0;
}

/* ---- manifests ------------------------------------------------------------ */

/* Fetches the manifests the plan needs.  A manifest gone since the
 * listing is left out; any other failure fails the run. */
static int fetch_docs(gc_run *g, gc_doc **docs, size_t *n_docs)
{
	size_t *idx;
	size_t nk;
	*docs = NULL;
	*n_docs = 0;
	if (gc_manifests_needed(g->objs, g->n, g->now, &idx, &nk) < 0)
		return -1;
	gc_doc *v = calloc(nk ? nk : 1, sizeof *v);
	int rc = v ? 0 : -1;
	size_t k = 0;
	for (size_t i = 0; i < nk && rc == 0; i++) {
		const gc_object *o = &g->objs[idx[i]];
		uint64_t size = o->size;
		if (size > PROTO_MANIFEST_MAX) {
			/* not a manifest we wrote: unreadable, the plan
			 * leaves its transaction alone */
			v[k++] = (gc_doc){o->key, strdup(""), 0};
			continue;
		}
		/* whole: a manifest rewritten since the listing (intent to
		 * committed) is longer than listed, and was read cut */
		char *body = NULL;
		size_t got = 0;
		s3_err e = {0};
		if (s3_get_object(g->c, o->key, PROTO_MANIFEST_MAX, NULL, &body,
				  &got, NULL, &e) < 0) {
			if (e.err == ENOENT)
				continue;
			if (e.err == EFBIG) { /* grew past any of ours */
				v[k++] = (gc_doc){o->key, strdup(""), 0};
				continue;
			}
			fprintf(stderr, "ckptfs: gc: %s\n", e.msg);
			rc = -1;
			break;
		}
		v[k++] = (gc_doc){o->key, body, got};
	}
	free(idx);
	if (rc < 0) {
		for (size_t i = 0; i < k; i++)
			free((char *)v[i].body);
		free(v);
		return -1;
	}
	*docs = v;
	*n_docs = k;
	return 0;
}

/* ---- deleting ------------------------------------------------------------- */

static const char *kind_name(gc_kind k)
{
	switch (k) {
	case GC_OBJECT: return "object";
	case GC_MANIFEST: return "manifest";
	case GC_MARKER: return "marker";
	}
	return "?";
}

static void fmt_time(time_t t, char out[32])
{
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Whether every marker of t is still expired now (a writer may have
 * renewed its lease, or another joined, since the listing). */
static bool still_abandoned(gc_run *g, const gc_txn *t)
{
	s3_list_result page = {0};
	s3_err e = {0};
	if (s3_list_page(g->c, t->pending_dir, NULL, NULL, 1000, &page, &e) < 0) {
		fprintf(stderr, "ckptfs: gc: %s\n", e.msg);
		g->failures++;
		return false;
	}
	time_t now = page.server_time ? page.server_time : time(NULL);
	bool ok = !page.truncated;
	for (size_t i = 0; i < page.n_objects && ok; i++) {
		char *root, *writer;
		unsigned lease;
		if (gc_parse_marker_key(page.objects[i].key, &root, &writer,
					&lease) < 0)
			continue;
		if (page.objects[i].mtime.tv_sec + (time_t)lease > now)
			ok = false;
		free(root);
		free(writer);
	}
	s3_list_result_free(&page);
	return ok;
}

static void count(gc_run *g, const gc_delete *d)
{
	switch (d->kind) {
	case GC_OBJECT:
		g->objects++;
		g->bytes += d->size;
		break;
	case GC_MANIFEST:
		g->manifests++;
		break;
	case GC_MARKER:
		g->markers++;
		break;
	}
}

static void print_del(gc_run *g, const gc_delete *d)
{
	printf("%s %-8s s3://%s/%s\n", g->a->dry_run ? "would delete" : "deleted",
	       kind_name(d->kind), g->a->s.bucket, d->key);
}

/* Deletes del[first..last) (one kind, one transaction) in batches.
 * Returns the number that failed. */
static size_t delete_batch(gc_run *g, const gc_delete *del, size_t first,
			   size_t last)
{
	size_t failed = 0;
	for (size_t i = first; i < last; i += S3_DELETE_MAX) {
		size_t n = last - i < S3_DELETE_MAX ? last - i : S3_DELETE_MAX;
		const char **keys = malloc(n * sizeof *keys);
		s3_delete_status *st = calloc(n, sizeof *st);
		s3_err e = {0};
		if (!keys || !st) {
			free(keys);
			free(st);
			return failed + (last - i);
		}
		for (size_t k = 0; k < n; k++)
			keys[k] = del[i + k].key;
		if (s3_delete_objects(g->c, keys, n, st, NULL, &e) < 0) {
			fprintf(stderr, "ckptfs: gc: %s\n", e.msg);
			failed += n;
		} else {
			for (size_t k = 0; k < n; k++) {
				if (st[k].err) {
					fprintf(stderr,
						"ckptfs: gc: cannot delete "
						"s3://%s/%s: %s\n",
						g->a->s.bucket, keys[k],
						st[k].msg[0] ? st[k].msg
							     : strerror(st[k].err));
					failed++;
					continue;
				}
				print_del(g, &del[i + k]);
				count(g, &del[i + k]);
			}
		}
		free(keys);
		free(st);
	}
	return failed;
}

static void run_txn(gc_run *g, const gc_plan *p, size_t ti, size_t first,
		    size_t last)
{
	const gc_txn *t = &p->txns[ti];
	char when[32];
	if (t->gone) {
		/* a delete past its commit point: no lease to look at */
		fmt_time(t->gone_at, when);
		printf("unfinished delete of s3://%s/%s (writer %s, decided "
		       "%s)\n",
		       g->a->s.bucket, t->root, t->writers[0], when);
	} else if (!g->a->dry_run && !still_abandoned(g, t)) {
		printf("skipped  s3://%s/%s: a writer renewed its lease\n",
		       g->a->s.bucket, t->root);
		g->skipped++;
		return;
	} else {
		fmt_time(t->expired_at, when);
		printf("abandoned transaction s3://%s/%s (writer %s%s, lease "
		       "expired %s)\n",
		       g->a->s.bucket, t->root, t->writers[0],
		       t->n_writers > 1 ? " and others" : "", when);
	}
	g->txns++;
	/* objects, then manifests, then markers: each group only when the
	 * previous one is gone entirely */
	for (size_t i = first; i < last;) {
		size_t j = i;
		while (j < last && p->del[j].kind == p->del[i].kind)
			j++;
		if (g->a->dry_run) {
			for (size_t k = i; k < j; k++) {
				print_del(g, &p->del[k]);
				count(g, &p->del[k]);
			}
		} else if (delete_batch(g, p->del, i, j) > 0) {
			fprintf(stderr, "ckptfs: gc: s3://%s/%s left in part: "
					"run gc again\n",
				g->a->s.bucket, t->root);
			g->failures++;
			return;
		}
		i = j;
	}
}

static void run_plan(gc_run *g, const gc_plan *p)
{
	for (size_t ti = 0; ti < p->n_txns; ti++) {
		const gc_txn *t = &p->txns[ti];
		if (t->skip) {
			printf("skipped  s3://%s/%s: %s\n", g->a->s.bucket,
			       t->root, t->skip);
			g->skipped++;
		}
	}
	for (size_t i = 0; i < p->n_del;) {
		size_t j = i;
		while (j < p->n_del && p->del[j].txn == p->del[i].txn)
			j++;
		run_txn(g, p, p->del[i].txn, i, j);
		i = j;
	}
}

/* ---- multipart uploads ---------------------------------------------------- */

static void run_uploads(gc_run *g, const gc_plan *p)
{
	char *km = NULL, *um = NULL;
	bool more = true;
	while (more) {
		s3_uploads_result r = {0};
		s3_err e = {0};
		if (s3_list_multipart_uploads(g->c, g->a->s.prefix, km, um, 1000,
					      &r, &e) < 0) {
			if (e.http_status == 501 || e.http_status == 405) {
				/* s3rver: no ListMultipartUploads (and no
				 * abort); the rest of gc stands */
				fprintf(stderr,
					"ckptfs: gc: the server cannot list "
					"multipart uploads (%s): none "
					"aborted\n",
					e.code[0] ? e.code : "not supported");
				break;
			}
			fprintf(stderr, "ckptfs: gc: %s\n", e.msg);
			g->failures++;
			break;
		}
		for (size_t i = 0; i < r.n_uploads; i++) {
			const s3_upload *u = &r.uploads[i];
			if (u->key_len != strlen(u->key) ||
			    !gc_upload_expired(u->initiated.tv_sec, g->now,
					       g->a->older_than) ||
			    gc_in_live_root(p, u->key))
				continue;
			char when[32];
			fmt_time(u->initiated.tv_sec, when);
			s3_err ae = {0};
			if (!g->a->dry_run &&
			    s3_mpu_abort(g->c, u->key, u->upload_id, &ae) < 0 &&
			    ae.err != ENOENT) {
				fprintf(stderr, "ckptfs: gc: %s\n", ae.msg);
				g->failures++;
				continue;
			}
			printf("%s upload   s3://%s/%s (initiated %s, id %s)\n",
			       g->a->dry_run ? "would abort " : "aborted",
			       g->a->s.bucket, u->key, when, u->upload_id);
			g->uploads++;
		}
		free(km);
		free(um);
		km = um = NULL;
		more = r.truncated && r.next_key_marker;
		if (more) {
			/* Ceph 16 leaves NextKeyMarker undecoded: start after
			 * the last listed upload instead (doc/commit.md) */
			const s3_upload *last = r.n_uploads
							? &r.uploads[r.n_uploads - 1]
							: NULL;
			km = strdup(last ? last->key : r.next_key_marker);
			um = last ? strdup(last->upload_id)
				  : r.next_upload_id_marker
					    ? strdup(r.next_upload_id_marker)
					    : NULL;
			more = km != NULL;
		}
		s3_uploads_result_free(&r);
	}
	free(km);
	free(um);
}

/* ---- main ----------------------------------------------------------------- */

static int gc_main(gc_args *a)
{
	s3_settings *s = &a->s;
	cli_bucket bk;
	if (cli_bucket_open("gc", a->url, s, a->insecure, &bk) < 0)
		return 1;
	int rc = 1;
	gc_run g = {.a = a, .c = bk.c};
	gc_plan plan = {0};
	gc_doc *docs = NULL;
	size_t n_docs = 0;
	if (list_all(&g) < 0 || fetch_docs(&g, &docs, &n_docs) < 0)
		goto out;
	if (gc_make_plan(g.objs, g.n, g.now, docs, n_docs, &plan) < 0) {
		fprintf(stderr, "ckptfs: gc: out of memory\n");
		goto out;
	}
	run_plan(&g, &plan);
	run_uploads(&g, &plan);
	char b[32];
	cli_fmt_bytes(g.bytes, b);
	printf("%s s3://%s/%s: %zu abandoned transaction%s, %zu object%s (%s), "
	       "%zu pending manifest%s, %zu marker%s %s; %zu multipart "
	       "upload%s %s",
	       a->dry_run ? "dry run:" : "gc", s->bucket, s->prefix, g.txns,
	       g.txns == 1 ? "" : "s", g.objects, g.objects == 1 ? "" : "s", b,
	       g.manifests, g.manifests == 1 ? "" : "s", g.markers,
	       g.markers == 1 ? "" : "s",
	       a->dry_run ? "would be deleted" : "deleted", g.uploads,
	       g.uploads == 1 ? "" : "s",
	       a->dry_run ? "would be aborted" : "aborted");
	if (g.skipped)
		printf("; %zu transaction%s skipped", g.skipped,
		       g.skipped == 1 ? "" : "s");
	printf("\n");
	rc = g.failures ? 1 : 0;
out:
	gc_plan_free(&plan);
	for (size_t i = 0; i < n_docs; i++)
		free((char *)docs[i].body);
	free(docs);
	for (size_t i = 0; i < g.n; i++)
		free((char *)g.objs[i].key);
	free(g.objs);
	cli_bucket_close(&bk);
	return rc;
}

static int cmd_gc(int argc, char **argv)
{
	gc_args a = {.older_than = 86400};
	int rc = parse_args(&a, argc, argv);
	if (rc == 0) {
		log_init(LOG_LVL_WARN, false);
		curl_global_init(CURL_GLOBAL_DEFAULT);
		rc = gc_main(&a);
		curl_global_cleanup();
	} else {
		rc = rc > 0 ? 0 : 2;
	}
	free(a.url);
	s3_settings_free(&a.s);
	return rc;
}

const cli_cmd cli_cmd_gc = {
	.name = "gc",
	.usage = "s3://BUCKET[/PREFIX] [--older-than 24h] [--dry-run] "
		 "[--endpoint URL]...",
	.summary = "remove abandoned transactions and old multipart uploads",
	.exec = cmd_gc,
};
