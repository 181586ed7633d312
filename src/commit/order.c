/*
 * The ordering rule of the visibility queue on plain paths (declared in
 * commit/internal.h): an upload waits for every earlier unfinished step
 * that touches an overlapping path (proto_overlap, proto/keys.h).  The
 * engine applies the same rule to its live queue in eng_upload_blocked
 * (commit/engine.c), which also skips parked steps.
 */
#include "commit/internal.h"

bool eng_order_blocked(const eng_order_step *q, size_t n, size_t self,
		       const char *path)
{
	for (size_t i = 0; i < self && i < n; i++) {
		if (q[i].done)
			continue;
		if ((q[i].a && proto_overlap(q[i].a, path)) ||
		    (q[i].b && proto_overlap(q[i].b, path)))
			return true;
	}
	return false;
}
