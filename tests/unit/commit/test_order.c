/* Unit test for the ordering rule of the visibility queue
 * (commit/order.c). */
#include <criterion/criterion.h>

#include "commit/internal.h"

Test(order, upload_blocked_by_earlier_overlapping_steps)
{
	eng_order_step q[] = {
	    {"ckpt-1", NULL, false},          /* commit of ckpt-1 */
	    {"old", NULL, false},             /* delete of old */
	    {"a", "b/c", false},              /* rename a -> b/c */
	    {"ckpt-1", NULL, false},          /* rewrite of ckpt-1 */
	    {"done", NULL, true},             /* finished: constrains nothing */
	    {"x", NULL, false},
	};
	size_t n = sizeof q / sizeof *q;
	cr_assert_not(eng_order_blocked(q, n, 0, "ckpt-1/model.pt"));
	cr_assert(eng_order_blocked(q, n, 3, "ckpt-1/model.pt"));
	cr_assert(eng_order_blocked(q, n, 5, "old/x"));
	cr_assert(eng_order_blocked(q, n, 5, "b/c/d"));
	cr_assert(eng_order_blocked(q, n, 5, "b"));
	cr_assert_not(eng_order_blocked(q, n, 5, "b/d"));
	cr_assert_not(eng_order_blocked(q, n, 5, "done/x"));
	cr_assert_not(eng_order_blocked(q, n, 1, "old/x"),
		      "only earlier steps count");
}

Test(order, one_step_waits_for_overlapping_paths)
{
	eng_order_step commit = {"ckpt-1", NULL, false};
	eng_order_step rename = {"a", "b/c", false};
	eng_order_step gone = {"ckpt-1", NULL, true};
	cr_assert(eng_order_waits(&commit, "ckpt-1/model.pt"));
	cr_assert(eng_order_waits(&commit, "ckpt-1"));
	cr_assert_not(eng_order_waits(&commit, "ckpt-10/model.pt"));
	cr_assert(eng_order_waits(&rename, "a/x"));
	cr_assert(eng_order_waits(&rename, "b"), "above the target");
	cr_assert_not(eng_order_waits(&rename, "b/d"));
	cr_assert_not(eng_order_waits(&gone, "ckpt-1/model.pt"),
		      "done, aborted or parked: constrains nothing");
}
