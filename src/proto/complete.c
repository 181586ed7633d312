/*
 * proto/complete: completion rules (complete.h).  Pure functions over a
 * finished listing; fs/nodes.c applies them to every directory it loads.
 */
#include "proto/complete.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "proto/visibility.h"
#include "util/buf.h"
#include "util/vec.h"

void vis_rules_free(vis_rules *r)
{
	for (size_t i = 0; i < r->n; i++) {
		free(r->v[i].trigger);
		free(r->v[i].required);
	}
	free(r->v);
	r->v = NULL;
	r->n = r->cap = 0;
}

static int bad_rule(vis_rules *r, const char *s, size_t len, char **err)
{
	buf b = BUF_INIT;
	buf_printf(&b, "bad completion rule '%.*s' (want TRIGGER/REQUIRED, "
		       "two non-empty name patterns)", (int)len, s);
	*err = buf_steal(&b);
	vis_rules_free(r);
	return -1;
}

int vis_rules_parse(vis_rules *r, const char *spec, char **err)
{
	*err = NULL;
	vis_rules_free(r);
	if (!strcmp(spec, "none"))
		return 0;
	for (const char *s = spec; *s;) {
		const char *end = strchr(s, ':');
		size_t len = end ? (size_t)(end - s) : strlen(s);
		const char *slash = memchr(s, '/', len);
		if (!slash || slash == s || slash + 1 == s + len ||
		    memchr(slash + 1, '/', len - (size_t)(slash + 1 - s)))
			return bad_rule(r, s, len, err);
		if (r->n == r->cap) {
			vis_rule *nv = vec_grow(r->v, &r->cap, sizeof *nv, 4);
			if (!nv)
				return bad_rule(r, s, len, err);
			r->v = nv;
		}
		vis_rule *x = &r->v[r->n];
		x->trigger = strndup(s, (size_t)(slash - s));
		x->required = strndup(slash + 1, len - (size_t)(slash + 1 - s));
		r->n++;
		if (!x->trigger || !x->required)
			return bad_rule(r, s, len, err);
		s += len;
		if (*s == ':')
			s++;
	}
	return 0;
}

static bool holds_file(const ns_dir *d, const char *pattern)
{
	for (size_t i = 0; i < d->n; i++)
		if (!d->v[i].is_dir && fnmatch(pattern, d->v[i].name, 0) == 0)
			return true;
	return false;
}

bool vis_rules_incomplete(const ns_dir *d, const vis_rules *r)
{
	if (!r)
		return false;
	for (size_t i = 0; i < r->n; i++)
		if (holds_file(d, r->v[i].trigger) &&
		    !holds_file(d, r->v[i].required))
			return true;
	return false;
}

bool vis_rules_apply(ns_dir *d, const vis_rules *r)
{
	if (!vis_rules_incomplete(d, r))
		return false;
	vis_hide_all(d);
	return true;
}
