/*
 * Tests for log's rate limit: a message repeated word for word from one
 * call site within the window is written once and then counted ("(repeated
 * N times in the last S s)"); the first copy, a changed message and another
 * call site's are always written; debug messages are never limited.  The
 * log goes to stderr, redirected here to a file (each test is a process).
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"

static char path[] = "/tmp/ckptfs-test-log-XXXXXX";

static void to_file(void)
{
	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	cr_assert(dup2(fd, STDERR_FILENO) >= 0);
	close(fd);
	log_init(LOG_LVL_DEBUG, false);
}

static void cleanup(void)
{
	unlink(path);
}

/* The log so far (static buffer). */
static const char *text(void)
{
	static char b[1 << 16];
	FILE *f = fopen(path, "r");
	cr_assert(f);
	size_t n = fread(b, 1, sizeof b - 1, f);
	b[n] = 0;
	fclose(f);
	return b;
}

static int count(const char *s, const char *what)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

static void nap(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	nanosleep(&ts, NULL);
}

static void journal_error(void)
{
	log_error("journal: %s: %s", "INSERT INTO files", "database or disk is full");
}

TestSuite(log, .init = to_file, .fini = cleanup);

Test(log, a_repeated_message_is_written_once_then_counted)
{
	for (int i = 0; i < 80; i++)
		journal_error();
	const char *t = text();
	cr_assert_eq(count(t, "journal: INSERT INTO files"), 1, "%s", t);
	cr_assert(strstr(t, "error: journal: INSERT INTO files: database or disk is full\n"), "%s", t);
	log_flush();
	t = text();
	cr_assert_eq(count(t, "journal: INSERT INTO files"), 2, "%s", t);
	cr_assert(strstr(t, "database or disk is full (repeated 79 times in the last 1 s)\n"),
		  "%s", t);
	log_flush(); /* nothing more to report */
	cr_assert_eq(count(text(), "journal: INSERT INTO files"), 2);
}

Test(log, a_changed_message_is_written_at_once)
{
	for (int i = 0; i < 5; i++)
		log_warn("commit of %s failed: %d", "ckpt", i);
	for (int i = 0; i < 3; i++)
		log_warn("commit of %s failed: %d", "ckpt", 4);
	log_warn("%s", "commit of ckpt failed: 4"); /* another call site */
	const char *t = text();
	for (int i = 0; i < 5; i++) {
		char m[64];
		snprintf(m, sizeof m, "commit of ckpt failed: %d\n", i);
		cr_assert_eq(count(t, m), i == 4 ? 2 : 1, "%s: %s", m, t);
	}
	cr_assert_eq(count(t, "repeated"), 0, "%s", t);
}

Test(log, after_the_window_the_next_copy_carries_the_count)
{
	log_ratelimit(0.3);
	for (int i = 0; i < 10; i++)
		journal_error();
	nap(0.4);
	journal_error();
	const char *t = text();
	cr_assert_eq(count(t, "journal: INSERT INTO files"), 2, "%s", t);
	cr_assert(strstr(t, "(repeated 10 times in the last 1 s)"), "%s", t);
	/* a new window: one more copy is counted again */
	journal_error();
	cr_assert_eq(count(text(), "journal: INSERT INTO files"), 2);
	log_flush();
	cr_assert(strstr(text(), "(repeated 1 time in the last 1 s)"), "%s", text());
}

Test(log, another_message_after_the_window_writes_the_count)
{
	log_ratelimit(0.3);
	journal_error();
	journal_error();
	journal_error();
	nap(0.4);
	log_info("mounted %s", "s3://b");
	const char *t = text();
	cr_assert(strstr(t, "(repeated 2 times in the last 1 s)"), "%s", t);
	cr_assert(strstr(t, "repeated 2 times") < strstr(t, "mounted s3://b"), "%s", t);
}

Test(log, the_count_survives_a_full_table)
{
	journal_error();
	journal_error();
	for (int i = 0; i < 100; i++)
		log_info("file %d", i); /* evicts the journal error's slot */
	const char *t = text();
	cr_assert(strstr(t, "(repeated 1 time in the last 1 s)"), "%s", t);
	cr_assert_eq(count(t, "file 99\n"), 1);
}

Test(log, debug_messages_and_window_0_are_not_limited)
{
	for (int i = 0; i < 4; i++)
		log_debug("lookup %s", "a");
	cr_assert_eq(count(text(), "lookup a\n"), 4);
	log_ratelimit(0);
	for (int i = 0; i < 4; i++)
		journal_error();
	cr_assert_eq(count(text(), "journal: INSERT INTO files"), 4);
}
