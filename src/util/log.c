/*
 * log: the single logging sink.  The level and the sink are set once by
 * log_init before any thread starts and only read afterwards; each
 * message is formatted into one buffer and written with one write(2) so
 * lines from different threads never interleave.
 *
 * Rate limit: a message at level info or above whose text is the same as
 * one written in the last LOG_RL_WINDOW_S seconds from the same call site
 * (same format string) is not written again but counted.  The next copy
 * after the window, or the first message of any kind after it, or
 * log_flush at exit, writes the count once: "<message> (repeated N times
 * in the last 10 s)".  So a persistent error (a full cache disk failing
 * every journal write) costs a line or two per window, not hundreds; the
 * first occurrence and any changed message are always written at once.
 * The table of recent messages is small and guarded by one mutex.
 */
#include "util/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

static enum log_level g_level = LOG_LVL_INFO;
static bool g_syslog;

void log_init(enum log_level level, bool use_syslog)
{
	g_level = level;
	g_syslog = use_syslog;
	if (use_syslog)
		openlog("ckptfs", LOG_PID, LOG_DAEMON);
}

enum log_level log_get_level(void)
{
	return g_level;
}

bool log_enabled(enum log_level level)
{
	return level <= g_level;
}

static const char *const level_names[] = {"error", "warn", "info", "debug"};
static const int syslog_prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};

#define MSG_MAX 2048

/* Writes one formatted message to the sink. */
static void emit(enum log_level level, const char *msg)
{
	if (g_syslog) {
		syslog(syslog_prio[level], "%s", msg);
		return;
	}
	char line[MSG_MAX + 160];
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	int n = snprintf(line, sizeof line,
			 "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ ckptfs[%d] %s: %s\n",
			 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
			 tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000L, (int)getpid(),
			 level_names[level], msg);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof line)
		n = sizeof line - 1;
	ssize_t w = write(STDERR_FILENO, line, (size_t)n);
	(void)w;
}

/* ---- the rate limit ------------------------------------------------------ */

#define RL_SLOTS 32

/* A message written in the current window and how often it came again. */
struct rl_slot {
	const char *fmt; /* NULL: free */
	enum log_level level;
	uint64_t hash;
	double t0;	     /* when it was last written */
	double t_last;	     /* when the last copy came */
	unsigned long again; /* copies not written since */
	char msg[MSG_MAX];
};

static pthread_mutex_t rl_mu = PTHREAD_MUTEX_INITIALIZER;
static struct rl_slot rl[RL_SLOTS];
static double rl_window = LOG_RL_WINDOW_S;

static double mono_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

/* Writes slot s's count of copies not written, if any: over the time from
 * its last written copy to its last copy.  rl_mu */
static void summarize(struct rl_slot *s)
{
	if (!s->again)
		return;
	long span = (long)(s->t_last - s->t0 + 0.5);
	char line[MSG_MAX + 128];
	snprintf(line, sizeof line, "%s (repeated %lu time%s in the last %ld s)",
		 s->msg, s->again, s->again == 1 ? "" : "s", span > 1 ? span : 1);
	emit(s->level, line);
	s->again = 0;
}

/* Frees the slots whose window is over, writing their counts.  rl_mu */
static void expire(double now, const struct rl_slot *keep)
{
	for (struct rl_slot *s = rl; s < rl + RL_SLOTS; s++)
		if (s->fmt && s != keep && now - s->t0 >= rl_window) {
			summarize(s);
			s->fmt = NULL;
		}
}

/* Whether msg (from the call site of fmt) is a copy to count rather than
 * write; records it otherwise.  rl_mu */
static bool rl_suppress(enum log_level level, const char *fmt, const char *msg,
			double now)
{
	uint64_t h = fnv1a(msg);
	struct rl_slot *hit = NULL;
	for (struct rl_slot *s = rl; s < rl + RL_SLOTS && !hit; s++)
		if (s->fmt == fmt && s->level == level && s->hash == h &&
		    !strcmp(s->msg, msg))
			hit = s;
	expire(now, hit);
	if (hit && now - hit->t0 < rl_window) {
		hit->again++;
		hit->t_last = now;
		return true;
	}
	if (hit && hit->again) {
		/* the window is over: this copy carries the count */
		hit->again++;
		hit->t_last = now;
		summarize(hit);
		hit->t0 = now;
		return true;
	}
	if (!hit) { /* a free slot, or the oldest one */
		hit = rl;
		for (struct rl_slot *s = rl; s < rl + RL_SLOTS; s++) {
			if (!s->fmt) {
				hit = s;
				break;
			}
			if (s->t0 < hit->t0)
				hit = s;
		}
		summarize(hit);
		hit->fmt = fmt;
		hit->level = level;
		hit->hash = h;
		snprintf(hit->msg, sizeof hit->msg, "%s", msg);
	}
	hit->t0 = hit->t_last = now;
	hit->again = 0;
	return false;
}

void log_ratelimit(double window_s)
{
	pthread_mutex_lock(&rl_mu);
	for (struct rl_slot *s = rl; s < rl + RL_SLOTS; s++) {
		if (s->fmt)
			summarize(s);
		s->fmt = NULL;
	}
	rl_window = window_s > 0 ? window_s : 0;
	pthread_mutex_unlock(&rl_mu);
}

void log_flush(void)
{
	pthread_mutex_lock(&rl_mu);
	for (struct rl_slot *s = rl; s < rl + RL_SLOTS; s++)
		if (s->fmt)
			summarize(s);
	pthread_mutex_unlock(&rl_mu);
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	if (!log_enabled(level))
		return;
	char msg[MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (level == LOG_LVL_DEBUG) {
		emit(level, msg);
		return;
	}
	pthread_mutex_lock(&rl_mu);
	if (rl_window <= 0 || !rl_suppress(level, fmt, msg, mono_now()))
		emit(level, msg);
	pthread_mutex_unlock(&rl_mu);
}
