/*
 * ctl requests retry and drop: an operator's answer to commit steps that
 * failed (`ckptfs retry`, `ckptfs drop`; doc/commit.md "Errors").
 */
#include <errno.h>
#include <stdlib.h>

#include "commit/engine.h"
#include "ctl/internal.h"

/* {"cmd":"retry"[,"id":N]}: failed steps (or step N) try again now. */
void ctl_req_retry(const ctl_req *r)
{
	eng *e = ctl_target_eng(r->t);
	int n = e ? eng_step_retry(e, r->id) : -ENOENT;
	if (n == -EBUSY)
		ctl_send_error(r->fd, "poisoned by a failed write (`ckptfs "
				      "status` names the file): a retry cannot "
				      "lift that; write the file again or remove "
				      "it, or `ckptfs drop MOUNT STEP` gives the "
				      "step up");
	else if (n < 0)
		ctl_send_error(r->fd, r->id ? "no failed step with that id"
					    : "no step has failed");
	else
		ctl_send_json(r->fd,
			      json_pack("{s:i, s:b}", "retried", n, "done", 1));
}

/* {"cmd":"drop","id":N}: gives step N up. */
void ctl_req_drop(const ctl_req *r)
{
	eng *e = ctl_target_eng(r->t);
	char *what = NULL;
	if (!r->id) {
		ctl_send_error(r->fd,
			       "which step? (the id `ckptfs status` shows)");
		return;
	}
	int rc = e ? eng_step_drop(e, r->id, &what) : -ENOENT;
	if (rc < 0)
		ctl_send_error(r->fd, "no pending step with that id");
	else
		ctl_send_json(r->fd, json_pack("{s:s, s:b}", "dropped",
					       what ? what : "", "done", 1));
	free(what);
}
