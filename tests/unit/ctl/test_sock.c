/*
 * Tests for where the control socket lives and who may use it
 * (ctl/sock.c): the socket directory is made 0700 and refused, never
 * repaired, when it is a symbolic link, open to others, another user's or
 * in a parent others can change; a mountpoint is claimed by one holder at
 * a time, whose pid the refusal names; listen replaces a dead daemon's
 * socket with one only its owner can use; release removes what it made; a peer of
 * this user is trusted.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl/internal.h"

static char top[64];

static void setup(void)
{
	snprintf(top, sizeof top, "/tmp/ckptfs-test-sock-XXXXXX");
	cr_assert(mkdtemp(top));
	/* for a user other than root, the socket directory goes here */
	char xdg[PATH_MAX];
	snprintf(xdg, sizeof xdg, "%s/xdg", top);
	cr_assert_eq(mkdir(xdg, 0700), 0);
	setenv("XDG_RUNTIME_DIR", xdg, 1);
}

static void teardown(void)
{
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
	cr_expect_eq(system(cmd), 0);
}

static char *sub(const char *name)
{
	static char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/%s", top, name);
	return p;
}

TestSuite(ctl_sock, .init = setup, .fini = teardown);

Test(ctl_sock, missing_directory_made_private)
{
	char *err = NULL;
	char *d = sub("s");
	cr_expect_eq(ctl_sock_dir_check(d, false, &err), -ENOENT);
	cr_assert_eq(ctl_sock_dir_check(d, true, &err), 0, "%s", err);
	struct stat st;
	cr_assert_eq(lstat(d, &st), 0);
	cr_expect(S_ISDIR(st.st_mode));
	cr_expect_eq(st.st_mode & 07777, 0700);
	cr_expect_eq(st.st_uid, geteuid());
	/* and reused as it is */
	cr_expect_eq(ctl_sock_dir_check(d, true, &err), 0);
	cr_expect_eq(ctl_sock_dir_check(d, false, &err), 0);
}

Test(ctl_sock, open_mode_refused_not_repaired)
{
	char *d = sub("s");
	cr_assert_eq(mkdir(d, 0700), 0);
	cr_assert_eq(chmod(d, 0755), 0);
	char *err = NULL;
	cr_expect_eq(ctl_sock_dir_check(d, true, &err), -1);
	cr_assert(err);
	cr_expect(strstr(err, d), "%s", err);
	cr_expect(strstr(err, "mode 0755"), "%s", err);
	free(err);
	struct stat st;
	cr_assert_eq(lstat(d, &st), 0);
	cr_expect_eq(st.st_mode & 07777, 0755);
}

Test(ctl_sock, symlink_refused)
{
	char *target = strdup(sub("real"));
	cr_assert_eq(mkdir(target, 0700), 0);
	char *d = sub("s");
	cr_assert_eq(symlink(target, d), 0);
	char *err = NULL;
	cr_expect_eq(ctl_sock_dir_check(d, true, &err), -1);
	cr_assert(err);
	cr_expect(strstr(err, "symbolic link"), "%s", err);
	free(err);
	free(target);
}

Test(ctl_sock, another_users_directory_refused)
{
	if (geteuid() != 0)
		cr_skip_test("chown needs root");
	char *d = sub("s");
	cr_assert_eq(mkdir(d, 0700), 0);
	cr_assert_eq(chown(d, 65533, 65533), 0);
	char *err = NULL;
	cr_expect_eq(ctl_sock_dir_check(d, true, &err), -1);
	cr_assert(err);
	cr_expect(strstr(err, "owned by uid 65533"), "%s", err);
	free(err);
}

Test(ctl_sock, parent_others_can_write_refused_unless_sticky)
{
	char *p = strdup(sub("p"));
	cr_assert_eq(mkdir(p, 0700), 0);
	cr_assert_eq(chmod(p, 0777), 0);
	char d[PATH_MAX];
	snprintf(d, sizeof d, "%s/s", p);
	char *err = NULL;
	cr_expect_eq(ctl_sock_dir_check(d, true, &err), -1);
	cr_assert(err);
	cr_expect(strstr(err, "another user can change"), "%s", err);
	free(err);
	err = NULL;
	cr_assert_eq(chmod(p, 01777), 0); /* as /tmp */
	cr_expect_eq(ctl_sock_dir_check(d, true, &err), 0, "%s", err);
	free(p);
}

Test(ctl_sock, one_claim_per_mountpoint)
{
	char *mp = strdup(sub("mnt"));
	cr_assert_eq(mkdir(mp, 0755), 0);
	ctl_claim a, b;
	char *err = NULL;
	cr_assert_eq(ctl_sock_claim(mp, &a, &err), 0, "%s", err);
	cr_expect_eq(ctl_sock_claim(mp, &b, &err), -1);
	cr_assert(err);
	char pid[32];
	snprintf(pid, sizeof pid, "pid %ld", (long)getpid());
	cr_expect(strstr(err, "already served by a ckptfs daemon"), "%s", err);
	cr_expect(strstr(err, pid), "%s", err);
	free(err);
	err = NULL;

	/* a dead daemon's socket at the path is replaced */
	int stale = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", a.path);
	cr_assert_eq(bind(stale, (struct sockaddr *)&sa, sizeof sa), 0);
	close(stale);
	cr_assert_geq(ctl_sock_listen(&a, &err), 0, "%s", err);
	struct stat st;
	cr_assert_eq(lstat(a.path, &st), 0);
	cr_expect(S_ISSOCK(st.st_mode));
	cr_expect_eq(st.st_mode & 077, 0, "mode %o", st.st_mode & 0777);
	int c = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_expect_eq(connect(c, (struct sockaddr *)&sa, sizeof sa), 0);
	close(c);

	char *path = strdup(a.path), *lock = strdup(a.lock);
	ctl_sock_release(&a);
	cr_expect_neq(lstat(path, &st), 0, "the socket is left behind");
	cr_expect_neq(lstat(lock, &st), 0, "the lock file is left behind");
	cr_assert_eq(ctl_sock_claim(mp, &b, &err), 0, "%s", err);
	ctl_sock_release(&b);
	free(path);
	free(lock);
	free(mp);
}

Test(ctl_sock, release_leaves_a_socket_not_its_own)
{
	char *mp = strdup(sub("mnt"));
	cr_assert_eq(mkdir(mp, 0755), 0);
	ctl_claim a;
	char *err = NULL;
	cr_assert_eq(ctl_sock_claim(mp, &a, &err), 0, "%s", err);
	cr_assert_geq(ctl_sock_listen(&a, &err), 0, "%s", err);
	/* someone put another socket in its place */
	cr_assert_eq(unlink(a.path), 0);
	int other = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", a.path);
	cr_assert_eq(bind(other, (struct sockaddr *)&sa, sizeof sa), 0);
	char *path = strdup(a.path);
	ctl_sock_release(&a);
	struct stat st;
	cr_expect_eq(lstat(path, &st), 0);
	unlink(path);
	close(other);
	free(path);
	free(mp);
}

Test(ctl_sock, own_peer_trusted)
{
	int sv[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	unsigned uid = 12345;
	cr_expect(ctl_peer_trusted(sv[0], &uid));
	cr_expect_eq(uid, (unsigned)geteuid());
	close(sv[0]);
	close(sv[1]);
}
