/*
 * eng marker: the pending markers (doc/commit.md "Remote protocol") as the
 * writer holds them: a marker PUT (with its lease) and the intent manifest
 * of a new directory transaction (eng_announce), the marker a running
 * delete or rename step holds (eng_hold_marker) and its DELETE
 * (eng_delete_marker: a commit point), and the renewal thread that
 * re-PUTs every held marker each lease/3.
 *
 * marker_mu is taken around every renewal PUT and every DELETE of a step
 * (never while holding mu), so a renewal that started before a commit
 * point cannot land after it.  Calls core.c only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commit/internal.h"
#include "proto/manifest.h"
#include "util/log.h"

int eng_put_marker(eng *e, const char *root, s3_err *x)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	char *key = proto_marker_key(e->prefix, root, e->writer, e->o.lease_s);
	char lease[16];
	snprintf(lease, sizeof lease, "%u", e->o.lease_s);
	s3_meta meta[2] = {{"lease", lease}, {"writer", e->writer}};
	s3_put_opts po = {.meta = meta, .n_meta = 2};
	http_upload body = http_upload_mem("", 0);
	int rc = key ? s3_put_object(e->s3, key, &body, &po, NULL, x) : -1;
	free(key);
	return rc;
}

int eng_put_intent(eng *e, const char *root, uint64_t txn, s3_err *x)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	char *key = proto_manifest_key(e->prefix, root, e->writer);
	char *json = proto_intent_json(e->writer, txn);
	s3_put_opts po = {.content_type = "application/json"};
	http_upload body = http_upload_mem(json, json ? strlen(json) : 0);
	int rc = key && json ? s3_put_object(e->s3, key, &body, &po, NULL, x)
			     : -1;
	free(key);
	free(json);
	return rc;
}

/* Marker and intent manifest of a final-named directory root, with the
 * engine's retry loop for transient failures kept short: the caller is a
 * mkdir waiting. */
int eng_announce(eng *e, const char *root, uint64_t txn)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	s3_err x = {0};
	if (eng_put_marker(e, root, &x) == 0 &&
	    eng_put_intent(e, root, txn, &x) == 0)
		return 0;
	log_error("cannot start the transaction of %s: %s", root, x.msg);
	return -(x.err ? x.err : EIO);
}

/* Whether another live transaction holds the marker of root. */
bool eng_marker_wanted(eng *e, const char *root, const etxn *except)
{
	CKPTFS_ASSERT_HELD(&e->mu);
	for (etxn *t = e->txns; t; t = t->next)
		if (t != except && !t->done && t->has_marker &&
		    t->state != TS_ABORTED && !strcmp(t->root, root))
			return true;
	return false;
}

void eng_hold_marker(eng *e, const char *root)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	ckpt_lock(&e->mu);
	free(e->vis_marker);
	e->vis_marker = strdup(root);
	e->vis_stopped = false;
	ckpt_unlock(&e->mu);
}

/*
 * Stops renewing root's marker (transaction id, or the running step's
 * held marker) and waits for a renewal on its way, before the PUT of the
 * manifest that is the commit point: a marker newer than its writer's
 * committed manifest hides the directory (fs/listing.c, marks_hide), so
 * none may land after it.  eng_resume_renewal undoes it when that PUT
 * failed (the marker must not expire while the step waits to run again).
 */
void eng_stop_renewal(eng *e, const char *root, int64_t id)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu); /* never while holding mu */
	ckpt_lock(&e->marker_mu);
	ckpt_lock(&e->mu);
	for (etxn *t = e->txns; t; t = t->next)
		if (t->id == id)
			t->has_marker = false;
	if (e->vis_marker && !strcmp(e->vis_marker, root))
		e->vis_stopped = true;
	ckpt_unlock(&e->mu);
	ckpt_unlock(&e->marker_mu);
}

void eng_resume_renewal(eng *e, const char *root, int64_t id)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	ckpt_lock(&e->mu);
	for (etxn *t = e->txns; t; t = t->next)
		if (t->id == id && !t->done)
			t->has_marker = true;
	if (e->vis_marker && !strcmp(e->vis_marker, root))
		e->vis_stopped = false;
	ckpt_unlock(&e->mu);
}

/*
 * Stops renewing root's marker (for transaction id, and as the running
 * step's marker) and deletes it.  marker_mu makes sure no renewal that
 * looked before is still on its way.
 */
int eng_delete_marker(eng *e, const char *root, int64_t id, s3_err *x)
{
	CKPTFS_ASSERT_NOT_HELD(&e->mu);
	ckpt_lock(&e->mu);
	for (etxn *t = e->txns; t; t = t->next)
		if (t->id == id)
			t->has_marker = false;
	if (e->vis_marker && !strcmp(e->vis_marker, root)) {
		free(e->vis_marker);
		e->vis_marker = NULL;
		e->vis_stopped = false;
	}
	ckpt_unlock(&e->mu);
	char *k = proto_marker_key(e->prefix, root, e->writer, e->o.lease_s);
	CKPTFS_ASSERT_NOT_HELD(&e->mu); /* never while holding mu */
	ckpt_lock(&e->marker_mu);
	int rc = s3_delete_object(e->s3, k, x);
	ckpt_unlock(&e->marker_mu);
	free(k);
	return rc;
}

/*
 * Whether root's manifest of this writer is the committed one of
 * transaction txn: a step resumed after a crash that had passed its commit
 * point (the manifest PUT, doc/commit.md "Directory commits") must not be
 * hidden again by a new marker, since later effects (a `latest` naming it)
 * may be visible already.  Any failure answers "no": the marker is PUT as
 * before, which hides nothing that is not committed.
 */
/* This writer's own manifest of root as it is in the bucket: 0 with *body
 * (malloc'd) and *len, -1 when it cannot be read (missing included). */
int eng_get_manifest(eng *e, const char *root, char **body, size_t *len)
{
	char *k = proto_manifest_key(e->prefix, root, e->writer);
	s3_err x;
	*body = NULL;
	*len = 0;
	/* whole, in one GET (a HEAD then a read of its size cut one
	 * rewritten in between) */
	int rc = k ? s3_get_object(e->s3, k, PROTO_MANIFEST_MAX, NULL, body,
				   len, NULL, &x)
		   : -1;
	free(k);
	return rc;
}

static bool manifest_committed(eng *e, const char *root, int64_t txn)
{
	char *body;
	size_t got;
	bool committed = false;
	uint64_t id = 0;
	if (eng_get_manifest(e, root, &body, &got) < 0)
		return false;
	bool yes = proto_manifest_state(body, got, &committed, &id) == 0 &&
		   committed && id == (uint64_t)txn;
	free(body);
	return yes;
}

/*
 * Before a resumed engine uploads anything: every directory transaction
 * with a final name gets its marker and its intent again, unless its
 * manifest is committed already (its step passed its commit point before
 * the crash and only finishes; a marker would hide nothing, an intent
 * would overwrite the commit).  A gc on another host may have rolled the
 * transaction back while this writer was away (deleted its objects, intent
 * and marker): without them, the first file uploaded again would show in
 * a directory that looks like another tool's, alone.  No thread runs yet.
 */
void eng_resume_markers(eng *e)
{
	for (etxn *t = e->txns; t; t = t->next) {
		if (!t->check_committed)
			continue;
		t->check_committed = false;
		if (manifest_committed(e, t->root, t->id)) {
			t->has_marker = false;
			log_info("commit: %s was committed before the restart; "
				 "finishing it", t->root);
			continue;
		}
		s3_err x;
		if (eng_put_marker(e, t->root, &x) < 0 ||
		    eng_put_intent(e, t->root, (uint64_t)t->id, &x) < 0)
			log_error("commit: announcing %s again after the restart: "
				  "%s", t->root, x.msg);
	}
}

void *eng_renew_main(void *arg)
{
	eng *e = arg;
	ckpt_lock(&e->mu);
	double every = e->o.lease_s / 3.0;
	while (!e->stopping) {
		size_t n = 0;
		for (etxn *t = e->txns; t; t = t->next)
			n++;
		char **roots = calloc(n + 2, sizeof *roots);
		size_t k = 0;
		for (etxn *t = e->txns; roots && t; t = t->next)
			if (!t->done && t->has_marker && t->state != TS_ABORTED)
				roots[k++] = strdup(t->root);
		if (roots && e->vis_marker && !e->vis_stopped)
			roots[k++] = strdup(e->vis_marker);
		ckpt_unlock(&e->mu);
		for (size_t i = 0; i < k; i++) {
			CKPTFS_ASSERT_NOT_HELD(&e->mu); /* never while holding mu */
			ckpt_lock(&e->marker_mu);
			ckpt_lock(&e->mu);
			bool want = eng_marker_wanted(e, roots[i], NULL) ||
				    (e->vis_marker && !e->vis_stopped &&
				     !strcmp(e->vis_marker, roots[i]));
			ckpt_unlock(&e->mu);
			s3_err x;
			if (want && eng_put_marker(e, roots[i], &x) < 0)
				log_warn("commit: renewing the marker of %s: %s",
					 roots[i], x.msg);
			ckpt_unlock(&e->marker_mu);
			free(roots[i]);
		}
		free(roots);
		ckpt_lock(&e->mu);
		double until = eng_now() + every;
		while (!e->stopping && eng_now() < until)
			eng_sleep(e, until - eng_now());
	}
	ckpt_unlock(&e->mu);
	return NULL;
}
