/*
 * ctl sock: where a mount's control socket lives and who may use it
 * (ctl/internal.h).
 *
 * The socket directory is trusted only when nobody but its owner can put
 * anything in it: a real directory (not a symbolic link) owned by this
 * user, mode 0700, in a parent that only its owner (this user or root)
 * can write to, or a sticky one such as /tmp.  A directory that fails any
 * of these is refused, never repaired: someone else made it, and chmod
 * would not take out what they may already have placed there (ssh-agent
 * and tmux do the same).
 *
 * One daemon per mountpoint: a daemon holds an exclusive flock on
 * HASH.lock beside HASH.sock for its whole life, so only the holder ever
 * binds or removes HASH.sock, and a second daemon on the same mountpoint
 * is refused before it touches anything (after CLAIM_WAIT_S, for a holder
 * that is letting go).  The lock file is removed by its
 * holder before it lets go; a taker checks that the file it locked is
 * still the one at the path (else it was removed under it) and tries
 * again.
 */
#include "ctl/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/clock.h"
#include "util/hex.h"
#include "util/log.h"

char *ctl_sock_dir(void)
{
	buf b = BUF_INIT;
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	if (geteuid() == 0)
		buf_puts(&b, "/run/ckptfs");
	else if (xdg && xdg[0] == '/')
		buf_printf(&b, "%s/ckptfs", xdg);
	else
		buf_printf(&b, "/tmp/ckptfs-%u", (unsigned)geteuid());
	return buf_steal(&b);
}

char *ctl_socket_path(const char *mountpoint)
{
	char *real = realpath(mountpoint, NULL);
	if (!real)
		return NULL;
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256((const unsigned char *)real, strlen(real), md);
	free(real);
	char *dir = ctl_sock_dir();
	buf b = BUF_INIT;
	buf_printf(&b, "%s/", dir);
	char h[2 * 16 + 1];
	hex_encode(md, 16, h);
	buf_puts(&b, h);
	buf_puts(&b, ".sock");
	free(dir);
	return buf_steal(&b);
}

/* "control socket directory DIR WHY: ...", what to do about it */
static char *unsafe(const char *dir, const char *why)
{
	buf m = BUF_INIT;
	buf_printf(&m, "control socket directory %s %s: another user could "
		       "answer in the mount's name; remove it%s",
		   dir, why,
		   geteuid() ? ", or set XDG_RUNTIME_DIR to a private directory"
			     : "");
	return buf_steal(&m);
}

int ctl_sock_dir_check(const char *dir, bool create, char **err)
{
	if (create && mkdir(dir, 0700) < 0 && errno != EEXIST) {
		buf b = BUF_INIT;
		buf_printf(&b, "cannot create the control socket directory "
			       "%s: %s",
			   dir, strerror(errno));
		*err = buf_steal(&b);
		return -1;
	}
	struct stat st;
	if (lstat(dir, &st) < 0) {
		if (errno == ENOENT && !create)
			return -ENOENT;
		buf b = BUF_INIT;
		buf_printf(&b, "control socket directory %s: %s", dir,
			   strerror(errno));
		*err = buf_steal(&b);
		return -1;
	}
	unsigned me = (unsigned)geteuid();
	char why[128] = "";
	if (S_ISLNK(st.st_mode))
		snprintf(why, sizeof why, "is a symbolic link");
	else if (!S_ISDIR(st.st_mode))
		snprintf(why, sizeof why, "is not a directory");
	else if (st.st_uid != me)
		snprintf(why, sizeof why, "is owned by uid %u, not by this "
					  "user (uid %u)",
			 (unsigned)st.st_uid, me);
	else if (st.st_mode & 077)
		snprintf(why, sizeof why, "has mode %04o (others can enter "
					  "it; it must be 0700)",
			 (unsigned)(st.st_mode & 07777));
	if (why[0]) {
		*err = unsafe(dir, why);
		return -1;
	}
	/* the parent: nobody else may rename the directory away and put
	 * another in its place */
	char *parent = strdup(dir);
	char *slash = parent ? strrchr(parent, '/') : NULL;
	if (!slash) {
		free(parent);
		return 0;
	}
	if (slash == parent)
		slash[1] = '\0';
	else
		*slash = '\0';
	struct stat pst;
	int rc = 0;
	if (stat(parent, &pst) < 0) {
		buf b = BUF_INIT;
		buf_printf(&b, "control socket directory %s: %s: %s", dir,
			   parent, strerror(errno));
		*err = buf_steal(&b);
		rc = -1;
	} else if ((pst.st_uid != me && pst.st_uid != 0) ||
		   ((pst.st_mode & 022) && !(pst.st_mode & S_ISVTX))) {
		buf b = BUF_INIT;
		buf_printf(&b, "control socket directory %s is in %s (uid %u, "
			       "mode %04o), which another user can change: "
			       "set XDG_RUNTIME_DIR to a private directory",
			   dir, parent, (unsigned)pst.st_uid,
			   (unsigned)(pst.st_mode & 07777));
		*err = buf_steal(&b);
		rc = -1;
	}
	free(parent);
	return rc;
}

bool ctl_peer_trusted(int fd, unsigned *uid)
{
	struct ucred cr;
	socklen_t len = sizeof cr;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 ||
	    len != sizeof cr) {
		*uid = (unsigned)-1;
		return false;
	}
	*uid = (unsigned)cr.uid;
	return cr.uid == geteuid() || cr.uid == 0;
}

/* ---- the daemon's claim on a mountpoint ---------------------------------- */

/* "WHAT ARG: strerror(errno)" */
static char *errf(const char *what, const char *arg)
{
	buf b = BUF_INIT;
	buf_printf(&b, "%s %s: %s", what, arg, strerror(errno));
	return buf_steal(&b);
}

/* The pid a lock file names (its holder wrote it), or 0. */
static long lock_holder(int fd)
{
	char s[32] = "";
	ssize_t r = pread(fd, s, sizeof s - 1, 0);
	return r > 0 ? strtol(s, NULL, 10) : 0;
}

/* How long a claim waits for a holder that is letting go: a daemon
 * unmounted a moment ago releases its claim as its teardown begins, before
 * it drains what is pending, so `fusermount3 -u M && ckptfs mount ... M`
 * works. */
#define CLAIM_WAIT_S 1.0

static int take_lock(ctl_claim *c, const char *mountpoint, char **err)
{
	double deadline = clock_mono() + CLAIM_WAIT_S;
	for (;;) {
		int fd = open(c->lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
			      0600);
		if (fd < 0) {
			*err = errf("cannot open", c->lock);
			return -1;
		}
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			int e = errno;
			if (e == EWOULDBLOCK && clock_mono() < deadline) {
				close(fd);
				usleep(50 * 1000);
				continue;
			}
			buf b = BUF_INIT;
			if (e == EWOULDBLOCK)
				buf_printf(&b, "%s is already served by a ckptfs "
					       "daemon (pid %ld): one daemon per "
					       "mountpoint; unmount it first "
					       "(fusermount3 -u %s)",
					   mountpoint, lock_holder(fd), mountpoint);
			else
				buf_printf(&b, "cannot lock %s: %s", c->lock,
					   strerror(e));
			*err = buf_steal(&b);
			close(fd);
			return -1;
		}
		struct stat a, b;
		if (fstat(fd, &a) == 0 && lstat(c->lock, &b) == 0 &&
		    a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
			char pid[32];
			int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
			/* the pid is only for messages */
			if (ftruncate(fd, 0) == 0 &&
			    pwrite(fd, pid, (size_t)n, 0) < 0)
				log_debug("cannot write %s: %s", c->lock,
					  strerror(errno));
			c->lock_fd = fd;
			return 0;
		}
		close(fd); /* its holder removed it as we locked it */
	}
}

int ctl_sock_claim(const char *mountpoint, ctl_claim *c, char **err)
{
	memset(c, 0, sizeof *c);
	c->lock_fd = c->lfd = -1;
	char *dir = ctl_sock_dir();
	int rc = dir ? ctl_sock_dir_check(dir, true, err) : -1;
	free(dir);
	if (rc < 0)
		return -1;
	c->path = ctl_socket_path(mountpoint);
	if (!c->path) {
		*err = errf("cannot resolve", mountpoint);
		return -1;
	}
	size_t n = strlen(c->path);
	buf b = BUF_INIT;
	buf_printf(&b, "%.*s.lock", (int)(n - strlen(".sock")), c->path);
	c->lock = buf_steal(&b);
	if (take_lock(c, mountpoint, err) < 0) {
		ctl_sock_release(c);
		return -1;
	}
	return 0;
}

int ctl_sock_listen(ctl_claim *c, char **err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", c->path);
	/* a socket left by a dead daemon on this mountpoint: only the lock's
	 * holder gets here */
	unlink(c->path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	mode_t old = umask(077);
	int rc = fd < 0 ? -1 : bind(fd, (struct sockaddr *)&sa, sizeof sa);
	umask(old);
	struct stat st;
	if (rc < 0 || listen(fd, 16) < 0 || lstat(c->path, &st) < 0) {
		*err = errf("cannot listen on", c->path);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	c->lfd = fd;
	c->dev = st.st_dev;
	c->ino = st.st_ino;
	return fd;
}

void ctl_sock_release(ctl_claim *c)
{
	struct stat st;
	if (c->lfd >= 0) {
		/* ours alone while the lock is held; checked all the same */
		if (lstat(c->path, &st) == 0 && st.st_dev == c->dev &&
		    st.st_ino == c->ino)
			unlink(c->path);
		close(c->lfd);
		c->lfd = -1;
	}
	if (c->lock_fd >= 0) {
		unlink(c->lock); /* before letting go: see the top */
		close(c->lock_fd);
		c->lock_fd = -1;
	}
	free(c->path);
	free(c->lock);
	c->path = c->lock = NULL;
}
