#!/bin/bash
# ThreadSanitizer bench step (not in contrib/test.sh: TSan slows ckptfs
# 5-15x, too much for CI's time budget).  Builds ckptfs with --enable-tsan
# in build-tsan/ and runs the suites where the daemon's threads meet the
# most (faults and retries, the crash loop, many writer mounts), then
# prints every distinct race TSan reported in the mounts' logs, as
# "file:line (function)" of the two accesses' top frames.
#
#   bench/tsan-run.sh                     # build + the three suites
#   bench/tsan-run.sh test_commit.py ...  # other suite files instead
#   TSAN_SKIP_BUILD=1 bench/tsan-run.sh   # reuse build-tsan/
#
# As root (FUSE, RGW).  Exit status: 0 when TSan reported nothing and
# pytest passed; 1 when TSan reported something; 2 when pytest failed
# without a TSan report (a failure under TSan's slowdown is reported, not
# a race).  The pytest output is in build-tsan/tsan-run.out, the mounts'
# logs under the pytest tmp directory (--basetemp build-tsan/pytest).
set -uo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(test_faults.py test_crashloop.py test_multihost.py)

if [ -z "${TSAN_SKIP_BUILD:-}" ]; then
	[ -x configure ] || autoreconf -fi >/dev/null 2>&1 || exit 2
	mkdir -p build-tsan && cd build-tsan &&
		"$top"/configure -q CC=gcc --enable-tsan && make -j"$(nproc)" >make.out 2>&1 ||
		{ echo "tsan build failed (build-tsan/make.out)"; exit 2; }
	cd "$top"
fi

# the daemon's reports go to its stderr, which the tests keep in each
# mount's log; halt_on_error=0: keep running, report every race once
export TSAN_OPTIONS="halt_on_error=0 second_deadlock_stack=1 history_size=4 report_signal_unsafe=0"
export CKPTFS_CRASHLOOP_KILLS=${CKPTFS_CRASHLOOP_KILLS:-10}
rm -rf build-tsan/pytest
t0=$(date +%s)
CKPTFS_BIN="$top/build-tsan/ckptfs" /usr/bin/python3 -m pytest -q -p no:cacheprovider \
	--basetemp "$top/build-tsan/pytest" "${suites[@]/#/$top/tests/integration/}" \
	2>&1 | tee build-tsan/tsan-run.out
prc=${PIPESTATUS[0]}
echo "tsan run: $(( $(date +%s) - t0 )) s, load average $(cut -d' ' -f1-3 /proc/loadavg)"

n=$(grep -rl "WARNING: ThreadSanitizer" build-tsan/pytest 2>/dev/null | wc -l)
if [ "$n" -eq 0 ]; then
	echo "ThreadSanitizer: no report in any mount's log"
	[ "$prc" -eq 0 ] && exit 0 || exit 2
fi
echo "ThreadSanitizer: reports in $n log files; distinct ones (kind: top frames of the accesses):"
grep -rh -A12 "WARNING: ThreadSanitizer" build-tsan/pytest |
	awk '/WARNING: ThreadSanitizer/ {if (k) print k; k=$0; sub(/.*ThreadSanitizer: /, "", k); f=0; next}
	     /^ +#0 / {sub(/^ +#0 +/, ""); sub(/ \(.*$/, ""); k=k " | " $0; f++}
	     END {if (k) print k}' | sed "s|$top/||g" | sort | uniq -c | sort -rn
exit 1
