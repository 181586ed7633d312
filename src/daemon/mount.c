/*
 * daemon: mount orchestration (see mount.h for the order of start-up and
 * the fork discipline).
 */
#include "daemon/mount.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ctl/ctl.h"
#include "daemon/exporter.h"
#include "daemon/notify.h"
#include "http/loop.h"
#include "proto/keys.h"
#include "s3/client.h"
#include "util/buf.h"
#include "util/log.h"

void mount_args_init(mount_args *a)
{
	memset(a, 0, sizeof *a);
	a->fs.entry_timeout = 1.0;
	a->fs.attr_timeout = 1.0;
	a->fs.dir_timeout = 1.0;
	a->fs.uid = getuid();
	a->fs.gid = getgid();
	a->fs.umask = 022;
	a->cache.min_free = 1ull << 30;
	a->cache.chunk_size = 8u << 20;
	a->cache.per_file_conns = 8;
	a->cache.global_conns = 16;
	a->commit_delay = 5.0;
	a->eng.upload_hold_s = 10.0;
	a->cache.verify = true;
	a->fs.passthrough = true;
	a->fs.dir_readahead = 256ull << 20;
	a->retry = (retry_policy)RETRY_POLICY_DEFAULT;
}

/* root: /var/cache/ckptfs; others: $XDG_CACHE_HOME/ckptfs or ~/.cache/ckptfs */
static char *default_cache_dir(void)
{
	buf b = BUF_INIT;
	const char *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");
	if (getuid() == 0)
		buf_puts(&b, "/var/cache/ckptfs");
	else if (xdg && xdg[0] == '/')
		buf_printf(&b, "%s/ckptfs", xdg);
	else
		buf_printf(&b, "%s/.cache/ckptfs", home ? home : "/tmp");
	return buf_steal(&b);
}

void mount_args_free(mount_args *a)
{
	free(a->url);
	free(a->mountpoint);
	free(a->endpoint);
	free(a->region);
	free(a->profile);
	free(a->ca_bundle);
	free(a->cache_dir);
	free(a->temp_patterns);
	free(a->metrics);
	free(a->complete);
}

/* A mountinfo field with its octal escapes (\040 for ' ') undone, in
 * place. */
static void mountinfo_unescape(char *s)
{
	char *w = s;
	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' &&
		    r[2] <= '7' && r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 +
				      (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

/*
 * Whether a ckptfs mount sits on mountpoint (its real path) in this mount
 * namespace (proc(5)'s mountinfo: field 5 the mount point, the file
 * system type and source after " - ").  *source the mounted s3:// URL
 * (malloc'd).
 */
static bool served_by_ckptfs(const char *real, char **source)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return false;
	char *line = NULL;
	size_t cap = 0;
	bool found = false;
	while (!found && getline(&line, &cap, f) > 0) {
		char *save = NULL, *mp = NULL;
		char *tok = strtok_r(line, " \n", &save);
		for (int i = 1; tok && i < 5; i++)
			tok = mp = strtok_r(NULL, " \n", &save);
		while (tok && strcmp(tok, "-") != 0)
			tok = strtok_r(NULL, " \n", &save);
		char *type = tok ? strtok_r(NULL, " \n", &save) : NULL;
		char *src = type ? strtok_r(NULL, " \n", &save) : NULL;
		if (!mp || !type || strcmp(type, "fuse.ckptfs") != 0)
			continue;
		mountinfo_unescape(mp);
		if (strcmp(mp, real) != 0)
			continue;
		found = true;
		if (src)
			mountinfo_unescape(src);
		*source = strdup(src ? src : "?");
	}
	free(line);
	fclose(f);
	return found;
}

static int check_mountpoint(const mount_args *a)
{
	struct stat st;
	if (stat(a->mountpoint, &st) < 0) {
		fprintf(stderr, "ckptfs: mountpoint %s: %s\n", a->mountpoint,
			strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "ckptfs: mountpoint %s is not a directory\n",
			a->mountpoint);
		return -1;
	}
	/* one daemon per mountpoint, nonempty or not: a second one would
	 * hide the first, which still holds (and commits) what was
	 * written through it */
	char *real = realpath(a->mountpoint, NULL), *source = NULL;
	bool served = real && served_by_ckptfs(real, &source);
	free(real);
	if (served) {
		fprintf(stderr,
			"ckptfs: %s is already a ckptfs mount (%s): one daemon "
			"per mountpoint; unmount it first (fusermount3 -u %s)\n",
			a->mountpoint, source ? source : "?", a->mountpoint);
		free(source);
		return -1;
	}
	if (a->nonempty)
		return 0;
	DIR *d = opendir(a->mountpoint);
	if (!d) {
		fprintf(stderr, "ckptfs: mountpoint %s: %s\n", a->mountpoint,
			strerror(errno));
		return -1;
	}
	struct dirent *de;
	bool empty = true;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			empty = false;
	closedir(d);
	if (!empty) {
		fprintf(stderr,
			"ckptfs: mountpoint %s is not empty (use -o nonempty "
			"to mount over it anyway)\n",
			a->mountpoint);
		return -1;
	}
	return 0;
}

static void explain_access_error(const s3_settings *s, const s3_err *e)
{
	const char *hint = s3_access_hint(e);
	fprintf(stderr, "ckptfs: cannot mount s3://%s/%s from %s: %s%s%s\n",
		s->bucket, s->prefix, s->endpoint, hint, hint[0] ? ": " : "",
		e->msg);
}

/* Everything up to a live, empty FUSE session.  Returns NULL on error. */
struct mounted {
	s3_settings settings;
	creds_chain *creds;
	http_loop *loop;
	s3_client *s3;
	cache *cache;
	ctl_server *ctl;
	eng *eng;
	fs_ctx *fs;
	struct fuse_session *se;
	notifier *notify;
	exporter *metrics;
};

static void mounted_free(struct mounted *m)
{
	if (m->se)
		fuse_session_destroy(m->se);
	fs_ctx_close_handles(m->fs);
	/* no control request may reach the engine once it closes */
	ctl_server_stop(m->ctl);
	m->ctl = NULL;
	if (m->eng && !m->fs) {
		eng_close(m->eng, false);
	} else if (m->eng) {
		notify_stopping(m->notify);
		/* unmount waits until what was written is visible; a killed
		 * process leaves the journal, resumed by the next mount */
		log_info("unmount: committing what is pending");
		int rc = fs_sync(m->fs, NULL, NULL);
		if (rc < 0) {
			/* name what is left (each failed step, its path, the
			 * server's error, what waits for it), as `ckptfs sync`
			 * does (doc/commit.md, "Errors"), not just an errno */
			char *why = eng_failed_text(m->eng);
			log_error("unmount: pending commits failed (%s); they stay "
				  "journaled and resume at the next mount%s%s",
				  strerror(-rc), why ? ": " : "", why ? why : "");
			free(why);
		}
		fs_ctx_stop_writes(m->fs);
		notify_free(m->notify);
		m->notify = NULL;
		exporter_stop(m->metrics); /* scraped while draining */
		m->metrics = NULL;
		eng_close(m->eng, rc == 0);
	}
	ctl_server_stop(m->ctl);
	exporter_stop(m->metrics); /* it reads the engine and the cache */
	m->metrics = NULL;
	notify_stopping(m->notify); /* read-only: nothing to drain */
	notify_free(m->notify);
	/* no new downloads; abort running ones; then free what they used */
	cache_shutdown(m->cache);
	http_loop_free(m->loop);
	cache_free(m->cache);
	fs_ctx_free(m->fs);
	s3_client_free(m->s3);
	creds_chain_free(m->creds);
	s3_settings_free(&m->settings);
}

/*
 * The commit engine's state (journal and staging files) lives under the
 * cache directory, one directory per bucket/prefix and live mount:
 * writes/<hash>.<n>.  A mount takes the first one no live mount holds,
 * so a remount after a crash adopts (and resumes) the journal it left.
 */
static int open_engine(mount_args *a, struct mounted *m)
{
	uint64_t h = 1469598103934665603ULL;
	for (const char *p = m->settings.bucket; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	h = (h ^ '/') * 1099511628211ULL;
	for (const char *p = m->settings.prefix; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	buf d = BUF_INIT;
	buf_printf(&d, "%s/writes", a->cache_dir);
	mkdir(buf_cstr(&d), 0700);
	for (int n = 0; n < 64; n++) {
		buf dir = BUF_INIT;
		buf_printf(&dir, "%s/%016llx.%d", buf_cstr(&d),
			   (unsigned long long)h, n);
		mkdir(buf_cstr(&dir), 0700);
		char *err = NULL;
		int rc = eng_open(m->s3, m->cache, buf_cstr(&dir),
				  m->settings.bucket, m->settings.prefix,
				  &a->eng, &m->eng, &err);
		buf_free(&dir);
		if (rc == -EBUSY) {
			free(err);
			continue;
		}
		buf_free(&d);
		if (rc < 0) {
			fprintf(stderr, "ckptfs: cannot start the commit engine: "
					"%s\n",
				err ? err : strerror(-rc));
			free(err);
			return -1;
		}
		return 0;
	}
	buf_free(&d);
	fprintf(stderr, "ckptfs: too many mounts of s3://%s/%s share the "
			"cache directory %s\n",
		m->settings.bucket, m->settings.prefix, a->cache_dir);
	return -1;
}

/* The listing mode (s3/probe.h): a writable mount probes under a name of
 * its own in the reserved .ckptfs-probe directory, a read-only one only
 * reads. */
static void probe_listing(const mount_args *a, const s3_settings *s,
			  s3_client *c)
{
	buf dir = BUF_INIT;
	if (!a->read_only) {
		char w[PROTO_WRITER_MAX];
		proto_writer_id(w);
		buf_printf(&dir, "%s%s/%s/", s->prefix, PROTO_PROBE_DIR, w);
	}
	s3_probe_listing(c, a->listing, s->prefix,
			 a->read_only ? NULL : buf_cstr(&dir));
	buf_free(&dir);
}

static int setup_s3(mount_args *a, struct mounted *m)
{
	char *err = NULL;
	s3_settings *s = &m->settings;
	if (s3_parse_url(a->url, &s->bucket, &s->prefix, &err) < 0)
		goto fail;
	s->endpoint = a->endpoint ? strdup(a->endpoint) : NULL;
	s->region = a->region ? strdup(a->region) : NULL;
	s->profile = a->profile ? strdup(a->profile) : NULL;
	s->ca_bundle = a->ca_bundle ? strdup(a->ca_bundle) : NULL;
	s->addressing = a->addressing;
	if (s3_settings_resolve(s, &err) < 0)
		goto fail;
	if (check_mountpoint(a) < 0)
		return -1;
	/* before anything is set up: one daemon per mountpoint, and a
	 * socket directory only this user can write to (ctl/ctl.h) */
	m->ctl = ctl_server_claim(a->mountpoint, &err);
	if (!m->ctl)
		goto fail;
	s3_err e;
	int rc = s3_connect(s, a->insecure, &a->retry, &m->creds, &m->loop,
			    &m->s3, &err, &e);
	if (rc == -2) {
		explain_access_error(s, &e);
		return -1;
	}
	if (rc < 0)
		goto fail;
	probe_listing(a, s, m->s3);
	if (!a->cache_dir)
		a->cache_dir = default_cache_dir();
	a->cache.dir = a->cache_dir;
	if (cache_open(&a->cache, m->s3, s->bucket, &m->cache, &err) < 0)
		goto fail;
	if (!a->read_only && open_engine(a, m) < 0)
		return -1;
	/* before the FUSE mount: resolving the mountpoint afterwards would
	 * ask this very process, whose loop is not running yet */
	ctl_target t = {a->mountpoint, s->bucket, s->prefix, m->s3, m->cache,
			&m->fs, NULL, http_loop_metrics(m->loop)};
	if (a->metrics) {
		m->metrics = exporter_start(a->metrics, &t, &err);
		if (!m->metrics)
			goto fail;
		t.metrics_url = exporter_url(m->metrics);
	}
	if (ctl_server_start(m->ctl, &t, &err) < 0)
		goto fail;
	return 0;
fail:
	fprintf(stderr, "ckptfs: %s\n", err ? err : "out of memory");
	free(err);
	return -1;
}

/*
 * Appends s as a value of a libfuse option string: a prefix may hold any
 * byte a key may (',' '\\' ' ' '='), and fuse_opt splits at commas and
 * reads backslashes, so both are escaped with a backslash (fuse_opt.c
 * takes the byte after a '\\' as it is; '=' needs nothing, the value runs
 * to the next unescaped comma).
 */
static void fuse_opt_escaped(buf *o, const char *s)
{
	for (; *s; s++) {
		if (*s == ',' || *s == '\\')
			buf_putc(o, '\\');
		buf_putc(o, *s);
	}
}

static int setup_fuse(mount_args *a, struct mounted *m)
{
	m->fs = fs_ctx_new(m->s3, m->cache, m->settings.prefix, &a->fs);
	if (!m->fs)
		return -1;
	if (m->eng) {
		fs_ctx_set_engine(m->fs, m->eng, a->commit_delay);
		fs_ctx_restore(m->fs);
	}
	buf o = BUF_INIT;
	buf_puts(&o, "fsname=");
	fuse_opt_escaped(&o, "s3://");
	fuse_opt_escaped(&o, m->settings.bucket);
	fuse_opt_escaped(&o, "/");
	fuse_opt_escaped(&o, m->settings.prefix);
	buf_puts(&o, ",subtype=ckptfs,default_permissions");
	if (a->allow_other)
		buf_puts(&o, ",allow_other");
	if (a->read_only)
		buf_puts(&o, ",ro");
	char *argv[] = {"ckptfs", "-o", (char *)buf_cstr(&o), NULL};
	struct fuse_args fa = FUSE_ARGS_INIT(3, argv);
	m->se = fuse_session_new(&fa, fs_lowlevel_ops(),
				 sizeof(struct fuse_lowlevel_ops), m->fs);
	fuse_opt_free_args(&fa);
	buf_free(&o);
	if (!m->se) {
		fprintf(stderr, "ckptfs: cannot create the FUSE session\n");
		return -1;
	}
	fs_ctx_set_session(m->fs, m->se);
	if (fuse_session_mount(m->se, a->mountpoint) != 0) {
		fprintf(stderr, "ckptfs: cannot mount on %s (is /dev/fuse "
				"available and fusermount3 installed?)\n",
			a->mountpoint);
		return -1;
	}
	if (a->fs.passthrough && fs_pt_install(m->se, fs_ctx_pt(m->fs)) != 0)
		log_warn("cannot install the passthrough hooks; cached files "
			 "are read through FUSE");
	return 0;
}

static int serve(struct mounted *m)
{
	if (fuse_set_signal_handlers(m->se) != 0)
		return -1;
	struct fuse_loop_config *cfg = fuse_loop_cfg_create();
	fuse_loop_cfg_set_max_threads(cfg, 16);
	fuse_loop_cfg_set_idle_threads(cfg, 8);
	log_info("mounted s3://%s/%s", m->settings.bucket, m->settings.prefix);
	int rc = fuse_session_loop_mt(m->se, cfg);
	/* libfuse reports the signal that ended the loop; an unmount asked
	 * for by SIGINT/SIGTERM/SIGHUP is a clean exit */
	if (rc == SIGINT || rc == SIGTERM || rc == SIGHUP)
		rc = 0;
	fuse_loop_cfg_destroy(cfg);
	fuse_remove_signal_handlers(m->se);
	fuse_session_unmount(m->se);
	log_info("unmounted");
	return rc;
}

static void report(int fd, char status)
{
	if (fd < 0)
		return;
	ssize_t w = write(fd, &status, 1);
	(void)w;
	close(fd);
}

static void detach_stdio(void)
{
	int fd = open("/dev/null", O_RDWR);
	if (fd < 0)
		return;
	dup2(fd, STDIN_FILENO);
	dup2(fd, STDOUT_FILENO);
	dup2(fd, STDERR_FILENO);
	if (fd > STDERR_FILENO)
		close(fd);
}

/* The soft descriptor limit raised towards the hard one (at most
 * NOFILE_WANT): the read cache keeps a descriptor per idle entry, as many
 * as a quarter of this limit (doc/cache.md, "Idle entries"), and a
 * service manager's soft default (1024) would keep too few for a
 * directory of a few hundred shards. */
#define NOFILE_WANT 65536
static void raise_nofile(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= NOFILE_WANT)
		return;
	rlim_t want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > NOFILE_WANT
			      ? NOFILE_WANT
			      : rl.rlim_max;
	if (want > rl.rlim_cur) {
		rl.rlim_cur = want;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			log_debug("cannot raise the descriptor limit: %s",
				  strerror(errno));
	}
}

static int run(mount_args *a, int ready_fd)
{
	raise_nofile();
	struct mounted m;
	memset(&m, 0, sizeof m);
	int rc = 1;
	if (setup_s3(a, &m) == 0 && setup_fuse(a, &m) == 0) {
		report(ready_fd, 'y');
		m.notify = notify_start(a->mountpoint, m.eng);
		if (!a->foreground) {
			if (!a->log_set || a->use_syslog)
				detach_stdio();
			int r = chdir("/");
			(void)r;
		}
		rc = serve(&m) == 0 ? 0 : 1;
	} else {
		report(ready_fd, 'n');
	}
	mounted_free(&m);
	log_flush(); /* the counts of messages repeated at the end */
	return rc;
}

int daemon_mount_main(mount_args *a)
{
	bool syslog_mode = a->log_set ? a->use_syslog : !a->foreground;
	log_init(a->debug ? LOG_LVL_DEBUG : LOG_LVL_INFO, syslog_mode);
	if (a->foreground)
		return run(a, -1);
	if (getenv("NOTIFY_SOCKET")) /* on stderr: the log is syslog now */
		fprintf(stderr, "ckptfs: warning: NOTIFY_SOCKET is set but the "
				"mount goes to the background: a service "
				"manager takes readiness only from the process "
				"it started (use -f with Type=notify)\n");
	int p[2];
	if (pipe(p) < 0) {
		perror("ckptfs: pipe");
		return 1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("ckptfs: fork");
		return 1;
	}
	if (pid == 0) {
		close(p[0]);
		setsid();
		_exit(run(a, p[1]));
	}
	close(p[1]);
	char status = 'n';
	ssize_t r;
	while ((r = read(p[0], &status, 1)) < 0 && errno == EINTR)
		;
	close(p[0]);
	if (r == 1 && status == 'y')
		return 0;
	int ws;
	waitpid(pid, &ws, 0);
	return 1;
}
