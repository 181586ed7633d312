/*
 * cli format helpers: byte counts, the terminal progress bar and upload
 * progress reports.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

void cli_fmt_bytes(uint64_t n, char out[32])
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB",
					    "PiB"};
	double v = (double)n;
	int u = 0;
	while (v >= 1024.0 && u < 5) {
		v /= 1024.0;
		u++;
	}
	if (u == 0)
		snprintf(out, 32, "%llu B", (unsigned long long)n);
	else
		snprintf(out, 32, "%.1f %s", v, units[u]);
}

void cli_progress(const char *label, uint64_t done, uint64_t total,
		  double rate)
{
	if (!isatty(STDERR_FILENO))
		return;
	char d[32], t[32], r[32];
	cli_fmt_bytes(done, d);
	cli_fmt_bytes(total, t);
	cli_fmt_bytes((uint64_t)rate, r);
	int width = 30;
	int fill = total ? (int)((double)done / (double)total * width) : width;
	char bar[64];
	for (int i = 0; i < width; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[width] = '\0';
	fprintf(stderr, "\r%s [%s] %s / %s  %s/s   ", label, bar, d, t, r);
	fflush(stderr);
}

void cli_progress_end(void)
{
	if (isatty(STDERR_FILENO))
		fputc('\n', stderr);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double cli_rate_update(cli_rate *r, uint64_t done)
{
	double now = now_s();
	if (r->last_t > 0 && now - r->last_t >= 0.2) {
		double inst = done >= r->last_done
				      ? (double)(done - r->last_done) /
						(now - r->last_t)
				      : 0;
		r->rate = r->rate > 0 ? 0.7 * r->rate + 0.3 * inst : inst;
	}
	if (r->last_t == 0 || now - r->last_t >= 0.2) {
		r->last_done = done;
		r->last_t = now;
	}
	return r->rate;
}

void cli_upload_progress_line(json_t *line, void *arg)
{
	cli_upload_progress *p = arg;
	uint64_t done = (uint64_t)json_integer_value(
		json_object_get(line, "bytes_done"));
	uint64_t total = (uint64_t)json_integer_value(
		json_object_get(line, "bytes_total"));
	double rate = cli_rate_update(&p->rate, done);
	if (isatty(STDERR_FILENO)) {
		if (total || !p->bar_needs_total) {
			cli_progress(p->label, done, total, rate);
			p->drawn = true;
		}
		return;
	}
	if (p->plain_every <= 0)
		return;
	double t = now_s();
	if (p->last_line > 0 && t - p->last_line < p->plain_every)
		return; /* a log, not an animation */
	p->last_line = t;
	char d[32], tt[32], r[32];
	cli_fmt_bytes(done, d);
	cli_fmt_bytes(total, tt);
	cli_fmt_bytes((uint64_t)rate, r);
	fprintf(stderr, "%s: %s / %s uploaded (%s/s)\n", p->label, d, tt, r);
}

void cli_upload_progress_end(void *arg)
{
	const cli_upload_progress *p = arg;
	if (p->drawn)
		cli_progress_end();
}
