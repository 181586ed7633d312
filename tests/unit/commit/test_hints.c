/* Unit test for the engine's table of metadata hints it PUT
 * (commit/hints.c): a hint PUT is trusted for 5 minutes, forgotten when
 * deleted or when a directory delete or rename forgets them all. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "commit/internal.h"

Test(commit, hints_known_for_five_minutes)
{
	eng *e = calloc(1, sizeof *e);
	cr_assert_not_null(e);
	ckpt_mutex_init(&e->mu);
	ckpt_lock(&e->mu); /* the table's rule */
	const char *a = "run/.ckptfs-meta/latest", *b = ".ckptfs-meta/latest";
	cr_assert_not(eng_hint_known(e, a, 100.0));
	eng_hint_note(e, a, 100.0);
	cr_assert(eng_hint_known(e, a, 100.0));
	cr_assert(eng_hint_known(e, a, 399.0));
	cr_assert_not(eng_hint_known(e, a, 401.0), "trusted for 5 minutes");
	cr_assert_not(eng_hint_known(e, a, 99.0), "a clock going back");
	cr_assert_not(eng_hint_known(e, b, 100.0), "another key");
	eng_hint_note(e, b, 100.0);
	eng_hint_unnote(e, a);
	cr_assert_not(eng_hint_known(e, a, 100.0), "deleted: PUT again");
	cr_assert(eng_hint_known(e, b, 100.0));
	eng_hint_unnote(e, "x/.ckptfs-meta/y"); /* not there: nothing */
	cr_assert(eng_hint_known(e, b, 100.0));
	ckpt_unlock(&e->mu);
	eng_hints_forget(e); /* takes mu itself */
	ckpt_lock(&e->mu);
	cr_assert_not(eng_hint_known(e, b, 100.0), "a directory delete forgets");
	ckpt_unlock(&e->mu);
	ckpt_mutex_destroy(&e->mu);
	free(e);
}
