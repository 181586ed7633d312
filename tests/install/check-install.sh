#!/bin/bash
# What `make install` and the Debian package put on a host, checked the way
# an installer would see it. Run by `make check-install` / `make check-deb`
# from a configured build directory (contrib/test.sh runs both):
#   check-install.sh          make install DESTDIR=scratch: exactly the binary,
#                             the man page and the systemd unit, at the
#                             configured paths, the unit running the installed
#                             binary; make uninstall removes every one
#   check-install.sh --deb    make deb (DEB_BUILD_OPTIONS=nocheck unless set):
#                             the package's files, dependencies and version
# The make rule passes bindir, mandir, systemdsystemunitdir, PACKAGE_VERSION.
# Ends with "check-install: N passed, M failed"; exit status 0 when none failed.
set -uo pipefail
: "${bindir:?} ${mandir:?} ${PACKAGE_VERSION:?}"
systemdsystemunitdir=${systemdsystemunitdir:-}
passed=0
failed=0
tmp=$(mktemp -d /tmp/ckptfs-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }
check() { # check DESCRIPTION COMMAND...
	local what=$1
	shift
	if "$@"; then ok "$what"; else bad "$what"; fi
}
# the unit must start the binary it was installed with
unit_runs() { # unit_runs UNITFILE BINARY
	grep -qx "ExecStart=$2 mount \${CKPTFS_SOURCE} %f -f -o log=syslog,\${CKPTFS_OPTIONS}" "$1"
}
files_under() { (cd "$1" && find . \( -type f -o -type l \) | sed 's|^\./|/|' | sort); }

check_destdir() {
	local dest=$tmp/dest want got
	make -s install DESTDIR="$dest" >"$tmp/install.out" 2>&1 ||
		{ cat "$tmp/install.out"; bad "make install DESTDIR"; return; }
	want=$(printf '%s\n' "$bindir/ckptfs" "$mandir/man1/ckptfs.1" \
		${systemdsystemunitdir:+"$systemdsystemunitdir/ckptfs@.service"} | sort)
	got=$(files_under "$dest")
	echo "installed:"
	echo "$got" | sed 's/^/  /'
	check "make install puts exactly the binary, the man page and the unit" \
		[ "$got" = "$want" ]
	check "the installed binary answers --version with $PACKAGE_VERSION" \
		[ "$("$dest$bindir/ckptfs" --version)" = "ckptfs $PACKAGE_VERSION" ]
	if [ -n "$systemdsystemunitdir" ]; then
		check "the unit's ExecStart is $bindir/ckptfs" \
			unit_runs "$dest$systemdsystemunitdir/ckptfs@.service" "$bindir/ckptfs"
	fi
	if command -v man >/dev/null; then
		check "man finds the installed page" \
			[ "$(man --manpath="$dest$mandir" -w ckptfs 2>/dev/null)" = "$dest$mandir/man1/ckptfs.1" ]
	fi
	make -s uninstall DESTDIR="$dest" >"$tmp/uninstall.out" 2>&1 ||
		{ cat "$tmp/uninstall.out"; bad "make uninstall DESTDIR"; return; }
	check "make uninstall leaves no file" [ -z "$(files_under "$dest")" ]
}

check_deb() {
	if ! command -v dpkg-buildpackage >/dev/null || ! command -v dh >/dev/null; then
		echo "check-install: no dpkg-buildpackage/debhelper: the package is not built (skipped)"
		return
	fi
	rm -f ckptfs_*.deb ckptfs-dbgsym_*.deb
	DEB_BUILD_OPTIONS=${DEB_BUILD_OPTIONS-nocheck} make -s deb >"$tmp/deb.out" 2>&1 ||
		{ tail -n 40 "$tmp/deb.out"; bad "make deb"; return; }
	local deb
	deb=$(ls ckptfs_*.deb 2>/dev/null | head -n 1)
	[ -n "$deb" ] || { bad "make deb leaves ckptfs_*.deb"; return; }
	ok "make deb built $deb"
	dpkg-deb -x "$deb" "$tmp/deb"
	local files unit
	files=$(files_under "$tmp/deb")
	echo "$deb holds:"
	echo "$files" | sed 's/^/  /'
	check "the package has /usr/bin/ckptfs" grep -qx /usr/bin/ckptfs <<<"$files"
	check "the package has the man page" grep -qx /usr/share/man/man1/ckptfs.1.gz <<<"$files"
	unit=$(grep -E '^(/usr)?/lib/systemd/system/ckptfs@\.service$' <<<"$files")
	check "the package has the unit in systemd's unit directory" [ -n "$unit" ]
	[ -z "$unit" ] || check "the package's unit runs /usr/bin/ckptfs" \
		unit_runs "$tmp/deb$unit" /usr/bin/ckptfs
	check "the packaged binary answers --version with $PACKAGE_VERSION" \
		[ "$("$tmp/deb/usr/bin/ckptfs" --version)" = "ckptfs $PACKAGE_VERSION" ]
	check "the package's version is $PACKAGE_VERSION (debian/changelog = configure.ac)" \
		[ "$(dpkg-deb -f "$deb" Version)" = "$PACKAGE_VERSION" ]
	local deps dep
	deps=$(dpkg-deb -f "$deb" Depends)
	echo "Depends: $deps"
	# (t64: the names of Debian 13's rebuilt libraries)
	for dep in fuse3 libfuse3-3 libcurl4 libsqlite3-0 libssl3 libjansson4 libisal2 libmicrohttpd12; do
		check "the package depends on $dep" grep -qE "(^|, )$dep(t64)?( |,|$)" <<<"$deps"
	done
}

if [ "${1:-}" = --deb ]; then check_deb; else check_destdir; fi
echo "check-install: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
