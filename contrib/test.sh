#!/bin/bash
# The whole ckptfs test suite on a fresh Debian 12 machine (run as root):
#   1. install every needed Debian package (contrib/install-deps.sh)
#   2. build with gcc (-Werror) and run the criterion unit tests (make check);
#      make install into a scratch DESTDIR puts the binary, the man page and
#      the systemd unit where they belong, make uninstall removes them
#   3. integration tests: real FUSE mounts against a real Ceph RADOS Gateway;
#      meanwhile, in the background: the clang build (-Werror: warning-free),
#      make distcheck (the release tarball builds and passes its unit
#      tests), the Debian package (make deb: its files, dependencies,
#      version), the ASan+UBSan build and its unit tests
#   4. portability: the core suites against s3rver, a second S3
#      implementation (doc/portability.md), about a minute
#   5. ASan+UBSan: the core integration suites and the fault, crash-loop
#      and multi-host suites again
# Ends with one line "ckptfs tests: N passed, M failed (in S s)"; each step
# says when it began, and each integration run lists its slowest tests.
set -uo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
JOBS=$(nproc)
passed=0
failed=0

step() { printf '\n=== %s (at %d s) ===\n' "$*" "$SECONDS"; }

# count_make_check LOGFILE: add the automake test-suite counts
count_make_check() {
	local p f
	p=$(grep -h '^# PASS:' "$1" | awk '{s+=$3} END {print s+0}')
	f=$(grep -hE '^# (FAIL|ERROR|XPASS):' "$1" | awk '{s+=$3} END {print s+0}')
	passed=$((passed + p))
	failed=$((failed + f))
}

# count_pytest LOGFILE: add pytest's "N passed, M failed" summary
count_pytest() {
	local line p f e
	line=$(grep -E '(passed|failed|error).* in [0-9.]+s' "$1" | tail -n 1)
	p=$(echo "$line" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+')
	f=$(echo "$line" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+')
	e=$(echo "$line" | grep -oE '[0-9]+ error' | grep -oE '[0-9]+')
	passed=$((passed + ${p:-0}))
	failed=$((failed + ${f:-0} + ${e:-0}))
	[ -n "$line" ] || failed=$((failed + 1))
}

build() { # build DIR CONFIGURE-ARGS...
	local dir=$1
	shift
	rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" &&
		"$top"/configure -q "$@" && make -j"$JOBS" >/dev/null
	local rc=$?
	cd "$top"
	return $rc
}

# Unit tests that bound wall-clock times (stall deadlines, credential
# refresh timing, idle release, the log's one-second windows): a sanitizer
# build run at nice 19 beside the integration tests can be starved past
# those bounds (CI's ASan test_stall failed there, its log cut off), so
# the background runs leave them out and they run in the foreground.
TIMED_UNIT="tests/unit/http/test_stall tests/unit/s3/test_creds tests/unit/cache/test_idle tests/unit/util/test_log"

# unit_tests_but_timed DIR: the TESTS list of DIR's Makefile without TIMED_UNIT
unit_tests_but_timed() {
	local t out=()
	for t in $(make -s --no-print-directory -C "$1" -f Makefile \
		-f <(printf 'print-tests:\n\t@echo $(TESTS)\n') print-tests); do
		[[ " $TIMED_UNIT " == *" $t "* ]] || out+=("$t")
	done
	echo "${out[*]}"
}

run_unit() { # run_unit DIR [make check arguments]
	local dir=$1
	shift
	(cd "$dir" && make -j"$JOBS" check "$@") >"$dir/check.out" 2>&1
	local rc=$?
	grep -E '^(# |PASS|FAIL|ERROR)' "$dir/check.out" || true
	count_make_check "$dir/check.out"
	if [ $rc -ne 0 ]; then
		failed_unit_logs "$dir" "$dir/check.out"
		failed=$((failed + 1))
	fi
}

# failed_unit_logs DIR CHECK-OUTPUT: the logs of the unit tests that failed
failed_unit_logs() {
	local t
	for t in $(sed -nE 's/^(FAIL|ERROR): //p' "$2"); do
		echo "--- $1/$t.log"
		tail -n 60 "$1/$t.log" 2>/dev/null
	done
}

# Integration test files run on WORKERS pytest-xdist processes, a file at a
# time each (most of a test's time is waiting for the server or a timer, so
# two workers on two cores take about half the time); each worker starts
# its own RGW.  CKPTFS_TEST_WORKERS=0 runs them in this process.
WORKERS=${CKPTFS_TEST_WORKERS:-2}

run_integration() { # run_integration BINARY LABEL [TEST FILES...]
	local bin=$1 label=$2 log="$top/build/integration-$2.out"
	shift 2
	local what=("$@") par=()
	[ ${#what[@]} -gt 0 ] || what=("$top/tests/integration")
	[ "$WORKERS" -gt 0 ] && par=(-n "$WORKERS" --dist loadfile)
	# the slowest tests, printed above the summary: where CI time goes
	CKPTFS_BIN="$bin" /usr/bin/python3 -m pytest -q -p no:cacheprovider \
		--durations=25 --durations-min=10 \
		"${par[@]}" "${what[@]}" 2>&1 | tee "$log"
	count_pytest "$log"
}

# Under ASan+UBSan the suites that exercise the daemon's own code paths
# (reads, the cache, every write call, commits, crashes, a full disk, the
# control socket) and the bad day of issue 21: faults and outages, the
# crash loops, several hosts.  The rest (5 GiB objects, real PyTorch,
# throttled links measured against each other, gc and CLI plumbing, the
# crash-point enumeration, which repeats test_crash's paths 96 times)
# repeat those paths at ASan's 2-4x slowdown.  Tests that need a link
# slower than the daemon scale it by helpers.SLOWDOWN.  bench/tsan-run.sh
# runs the fault, crash-loop and multi-host suites under TSan.
ASAN_SUITES=(test_read.py test_namespace.py test_errors.py test_readonly.py
	test_cache.py test_visibility.py test_write.py test_commit.py
	test_crash.py test_write_diskfull.py test_engine.py test_recovery.py
	test_restore.py test_posix.py test_warm.py test_metahint.py
	test_hostile_local.py test_meta_committed.py test_bad_names.py test_faults.py
	test_crashloop.py
	test_multihost.py)

# The portability run against s3rver (CKPTFS_S3_SERVER=s3rver): the core
# of a checkpoint's life (read, save, rename-commit, rotation, crash
# resume); the README's portability table lists what passed where.
PORTABILITY_SUITES=(test_portability.py test_read.py test_crash.py
	test_commit.py::test_deleting_the_previous_checkpoint_never_leaves_none)

# The crash loop's CI length: 10 kills (bench/crashloop.py runs the long one)
export CKPTFS_CRASHLOOP_KILLS=${CKPTFS_CRASHLOOP_KILLS:-10}

step "install dependencies"
bash contrib/install-deps.sh || exit 1

step "autoreconf"
autoreconf -fi >/dev/null 2>&1 || { echo "autoreconf failed"; exit 1; }

step "gcc build + unit tests"
if build build CC=gcc; then run_unit build; else echo "gcc build failed"; failed=$((failed + 1)); fi

step "make install / uninstall (DESTDIR)"
if (cd build && make -s check-install); then passed=$((passed + 1)); else failed=$((failed + 1)); fi

# The other builds run while the gcc build's integration tests do (those
# mostly wait on the server and on timers): the ASan+UBSan build with its
# unit tests, the clang build, distcheck and the Debian package.  Each writes its verdict
# to build/bg-*.rc, read after the integration tests.
background_builds() {
	# the sanitizer build first: its integration run comes next
	if build build-asan CC=gcc --enable-sanitizers; then
		(export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
		 export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
		 cd build-asan &&
			 make -j"$JOBS" check TESTS="$(unit_tests_but_timed .)") \
			>build-asan-check.out 2>&1
		echo $? >build/bg-asan-unit.rc
		echo 0 >build/bg-asan.rc
	else
		echo 1 >build/bg-asan.rc
	fi
	if build build-clang CC=clang; then echo 0; else echo 1; fi >build/bg-clang.rc
	# (its unit tests without the timed ones, which ran in the foreground
	# on the same sources)
	if (cd build && make -j"$JOBS" distcheck \
		TESTS="$(unit_tests_but_timed .)" >distcheck.out 2>&1); then echo 0; else echo 1; fi \
		>build/bg-distcheck.rc
	# unit tests: run above, not again in the package build
	if (cd build && DEB_BUILD_OPTIONS=nocheck make -s check-deb >check-deb.out 2>&1); then
		echo 0; else echo 1; fi >build/bg-deb.rc
}
rm -f build/bg-*.rc
# at the lowest priority: the tests' timers and the links they emulate
# must not wait behind the compilers (load-sensitive tests flaked at a
# load average of 10 when the builds ran at the tests' priority)
export -f build background_builds unit_tests_but_timed
export TIMED_UNIT
JOBS=$JOBS top=$top nice -n 19 bash -c background_builds >build/background.out 2>&1 &
bg_pid=$!

step "shape of src/ (layers, call cycles, file sizes)"
if /usr/bin/python3 tests/tools/layers.py --build build; then
	passed=$((passed + 1))
else
	failed=$((failed + 1))
fi

step "integration tests (gcc build)"
if [ -x build/ckptfs ]; then run_integration "$top/build/ckptfs" gcc; else failed=$((failed + 1)); fi

step "portability: core suites against s3rver"
if [ -x build/ckptfs ]; then
	export CKPTFS_S3_SERVER=s3rver
	run_integration "$top/build/ckptfs" s3rver \
		"${PORTABILITY_SUITES[@]/#/$top/tests/integration/}"
	unset CKPTFS_S3_SERVER
else
	failed=$((failed + 1))
fi

step "clang build (warning-free), distcheck, Debian package, ASan+UBSan build (run meanwhile)"
wait "$bg_pid"
verdict() { # verdict NAME FILE: 0 in FILE is a pass
	if [ "$(cat "$2" 2>/dev/null)" = 0 ]; then
		echo "$1 ok"; passed=$((passed + 1))
	else
		echo "$1 failed"; failed=$((failed + 1))
	fi
}
verdict "clang build" build/bg-clang.rc
verdict "distcheck" build/bg-distcheck.rc
[ "$(cat build/bg-distcheck.rc 2>/dev/null)" = 0 ] || tail -n 40 build/distcheck.out
verdict "Debian package" build/bg-deb.rc
grep -E '^(ok|FAIL|check-install)' build/check-deb.out 2>/dev/null
[ "$(cat build/bg-deb.rc 2>/dev/null)" = 0 ] || tail -n 40 build/check-deb.out
verdict "sanitizer build" build/bg-asan.rc

step "ASan+UBSan: unit + integration tests"
if [ "$(cat build/bg-asan.rc 2>/dev/null)" = 0 ]; then
	grep -E '^(# |PASS|FAIL|ERROR)' build-asan-check.out || true
	count_make_check build-asan-check.out
	if [ "$(cat build/bg-asan-unit.rc)" != 0 ]; then
		failed_unit_logs build-asan build-asan-check.out
		failed=$((failed + 1))
	fi
	export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
	export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
	# the timed unit tests, left out of the background run
	run_unit build-asan TESTS="$TIMED_UNIT"
	# the crash loops' restarts under the sanitizers: 6 kills (the gcc
	# run above has 10, bench/crashloop.py the long one)
	export CKPTFS_CRASHLOOP_KILLS=${CKPTFS_ASAN_CRASHLOOP_KILLS:-6}
	run_integration "$top/build-asan/ckptfs" asan \
		"${ASAN_SUITES[@]/#/$top/tests/integration/}"
fi

echo
echo "ckptfs tests: $passed passed, $failed failed (in $SECONDS s)"
[ "$failed" -eq 0 ]
