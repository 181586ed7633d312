/*
 * cli format helpers: byte counts and the terminal progress bar.
 */
#include <stdio.h>
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
