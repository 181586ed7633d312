/*
 * log: the single logging sink.  State is set once by log_init before any
 * thread starts and only read afterwards, so no locking is needed; each
 * message is formatted into one buffer and written with one write(2) so
 * lines from different threads never interleave.
 */
#include "util/log.h"

#include <stdarg.h>
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

void log_msg(enum log_level level, const char *fmt, ...)
{
	if (!log_enabled(level))
		return;
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (g_syslog) {
		syslog(syslog_prio[level], "%s", msg);
		return;
	}
	char line[2200];
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
