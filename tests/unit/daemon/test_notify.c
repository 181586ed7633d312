/*
 * Tests for the STATUS= text a service manager shows (daemon/notify.c):
 * pending transactions and what they have left to upload, failed steps,
 * a read-only mount, the unmount's drain.
 */
#include <criterion/criterion.h>

#include <string.h>

#include "daemon/notify.h"

Test(notify, idle_mount)
{
	char t[256];
	notify_status_text(NULL, 0, true, false, t, sizeof t);
	cr_expect_str_eq(t, "serving; 0 pending transactions, 0 B to upload");
}

Test(notify, pending_bytes_left)
{
	eng_txn_status v[2];
	memset(v, 0, sizeof v);
	v[0].state = "uploading";
	v[0].bytes_total = 3u << 20;
	v[0].bytes_done = 1u << 20;
	v[1].state = "waiting-for-rename";
	v[1].bytes_total = 1u << 20;
	char t[256];
	notify_status_text(v, 2, true, false, t, sizeof t);
	cr_expect_str_eq(t, "serving; 2 pending transactions, 3.0 MiB to upload");
	notify_status_text(v, 1, true, true, t, sizeof t);
	cr_expect_str_eq(t, "unmounting: 1 pending transaction, 2.0 MiB to upload");
}

Test(notify, failed_steps_named)
{
	eng_txn_status v[1];
	memset(v, 0, sizeof v);
	v[0].state = "failed";
	v[0].bytes_total = 10;
	v[0].bytes_done = 10;
	char t[256];
	notify_status_text(v, 1, true, false, t, sizeof t);
	cr_expect_str_eq(t, "serving; 1 pending transaction, 0 B to upload, 1 failed");
}

Test(notify, read_only)
{
	char t[256];
	notify_status_text(NULL, 0, false, false, t, sizeof t);
	cr_expect_str_eq(t, "serving; read-only");
}

Test(notify, no_socket_no_thread)
{
	unsetenv("NOTIFY_SOCKET");
	cr_expect_null(notify_start("/", NULL));
	notify_free(NULL);
	notify_stopping(NULL);
}
