/*
 * Directory read-ahead's choices (fs/readahead.c): which opens go forward
 * in name order, and which files after the one opened start within the
 * byte budget (directories, empty files and files already started
 * skipped, at least one file, at most max).
 */
#include <criterion/criterion.h>

#include <string.h>

#include "fs/readahead.h"

static ns_entry ents[] = {
	{"a-dir", true, 0, NULL, {0, 0}, false},
	{"f0", false, 100, "\"e0\"", {0, 0}, false},
	{"f1", false, 100, "\"e1\"", {0, 0}, false},
	{"f2", false, 0, "\"e2\"", {0, 0}, false}, /* empty: nothing to fetch */
	{"f3", false, 300, "\"e3\"", {0, 0}, false},
	{"f4", false, 100, "\"e4\"", {0, 0}, false},
	{"g-dir", true, 0, NULL, {0, 0}, false},
	{"h5", false, 1000, "\"e5\"", {0, 0}, false},
};
static ns_dir dir = {.v = ents, .n = sizeof ents / sizeof ents[0]};

Test(readahead, forward_means_first_file_or_after_the_last_open)
{
	cr_assert(fs_ra_forward(&dir, 1, NULL), "f0 is the first file");
	cr_assert_not(fs_ra_forward(&dir, 2, NULL), "f1 opened first");
	cr_assert(fs_ra_forward(&dir, 2, "f0"));
	cr_assert(fs_ra_forward(&dir, 4, "f0"), "skipping files is forward");
	cr_assert_not(fs_ra_forward(&dir, 1, "f3"), "going back");
	cr_assert_not(fs_ra_forward(&dir, 2, "f1"), "the same file again");
}

Test(readahead, window_stops_at_the_budget)
{
	size_t idx[8];
	/* after f0: f1 (100) + f3 (300) = 400 <= 450; f4 would pass it */
	size_t n = fs_ra_window(&dir, 1, NULL, 450, true, 8, idx);
	cr_assert_eq(n, 2);
	cr_assert_eq(idx[0], 2);
	cr_assert_eq(idx[1], 4);
	/* everything: directories and the empty file never count */
	n = fs_ra_window(&dir, 1, NULL, 1u << 20, true, 8, idx);
	cr_assert_eq(n, 4);
	cr_assert_eq(idx[3], 7);
}

Test(readahead, window_has_at_least_one_file_unless_strict_and_at_most_max)
{
	size_t idx[8];
	size_t n = fs_ra_window(&dir, 5, NULL, 10, true, 8, idx); /* h5 > budget */
	cr_assert_eq(n, 1);
	cr_assert_eq(idx[0], 7);
	n = fs_ra_window(&dir, 1, NULL, 1u << 20, true, 2, idx);
	cr_assert_eq(n, 2);
	cr_assert_eq(fs_ra_window(&dir, 7, NULL, 1u << 20, true, 8, idx), 0,
		     "nothing after the last file");
	cr_assert_eq(fs_ra_window(&dir, 5, NULL, 10, false, 8, idx), 0,
		     "strict: h5 alone is over the budget");
}

Test(readahead, files_started_before_are_not_started_again)
{
	size_t idx[8];
	/* f1 and f3 were started by the open of f0; f1 opened now */
	size_t n = fs_ra_window(&dir, 2, "f3", 1u << 20, true, 8, idx);
	cr_assert_eq(n, 2);
	cr_assert_eq(idx[0], 5);
	cr_assert_eq(idx[1], 7);
	/* they still count in the budget: f3 (300) leaves no room for f4 */
	cr_assert_eq(fs_ra_window(&dir, 2, "f3", 350, true, 8, idx), 0);
}
