/*
 * log: leveled logging to stderr or syslog.
 *
 * One process-wide sink, configured once at start-up before threads exist
 * (log_init); after that the functions are thread-safe (each message is one
 * write).  A message repeated word for word from one call site within
 * LOG_RL_WINDOW_S seconds is written once, then counted: its count follows
 * as "(repeated N times in the last 10 s)" (log.c).  Secrets must never be passed to these functions: callers log
 * request lines and S3 error codes, never headers that carry credentials.
 */
#ifndef CKPTFS_UTIL_LOG_H
#define CKPTFS_UTIL_LOG_H

#include <stdbool.h>

enum log_level { LOG_LVL_ERROR = 0, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

void log_init(enum log_level level, bool use_syslog);
enum log_level log_get_level(void);
bool log_enabled(enum log_level level);
/* Seconds within which a copy of a message is counted, not written. */
#define LOG_RL_WINDOW_S 10.0

/* Sets that window (0: every message is written; tests); writes the
 * counts pending first. */
void log_ratelimit(double window_s);
/* Writes the counts of copies not yet reported (at exit). */
void log_flush(void);
void log_msg(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...)                                                        \
	do {                                                                  \
		if (log_enabled(LOG_LVL_DEBUG))                               \
			log_msg(LOG_LVL_DEBUG, __VA_ARGS__);                  \
	} while (0)

#endif
