#!/bin/sh
# Install every Debian package ckptfs needs to build, test and benchmark,
# including the Ceph RADOS Gateway used as the local S3 server, and s3rver
# (npm), the second S3 implementation of the portability run.
# Idempotent: packages already present are skipped; apt-get update runs once
# per invocation and only when something is missing.
#
# s3rver: Node.js and npm come from Debian (nodejs npm) unless a node is
# already installed; s3rver and every package it needs are pinned by
# tests/s3server/s3rver/package-lock.json and installed with `npm ci` into
# CKPTFS_S3RVER_DIR (default /var/cache/ckptfs-test/s3rver), kept across
# runs: it is installed again only when the lock file changed.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
S3RVER_DIR=${CKPTFS_S3RVER_DIR:-/var/cache/ckptfs-test/s3rver}

PKGS="
  build-essential autoconf automake libtool pkg-config clang
  debhelper dpkg-dev
  libfuse3-dev fuse3
  libcurl4-openssl-dev libsqlite3-dev sqlite3 libssl-dev libexpat1-dev
  libjansson-dev libisal-dev libsystemd-dev libmicrohttpd-dev
  libcriterion-dev libinih-dev python3-pytest python3-pytest-xdist
  ceph-mon ceph-osd radosgw ceph-common uuid-runtime
  awscli python3-boto3 python3-torch python3-prometheus-client
  curl openssl attr psmisc procps valgrind iproute2 util-linux
  s3fs rclone hyperfine
"

# A node from elsewhere (nodesource) ships its own npm: Debian's npm would
# conflict with it.
command -v node >/dev/null 2>&1 || PKGS="$PKGS nodejs npm"

missing=""
for p in $PKGS; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
if [ -z "$missing" ]; then
  echo "install-deps: all packages present"
else
  echo "install-deps: installing:$missing"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -q --no-install-recommends $missing
fi

lock=$top/tests/s3server/s3rver/package-lock.json
if [ -x "$S3RVER_DIR/node_modules/.bin/s3rver" ] &&
   cmp -s "$lock" "$S3RVER_DIR/package-lock.json"; then
  echo "install-deps: s3rver present ($S3RVER_DIR)"
else
  echo "install-deps: installing s3rver into $S3RVER_DIR (npm ci)"
  $SUDO mkdir -p "$S3RVER_DIR"
  $SUDO rm -rf "$S3RVER_DIR/node_modules"
  $SUDO cp "$top/tests/s3server/s3rver/package.json" "$lock" "$S3RVER_DIR/"
  # an npm too old for the lock file gets the pinned version without it
  (cd "$S3RVER_DIR" &&
   { $SUDO npm ci --no-audit --no-fund --omit=dev --loglevel=error ||
     $SUDO npm install --no-audit --no-fund --omit=dev --loglevel=error \
       "s3rver@$(sed -n 's/.*"s3rver": *"[^0-9]*\([0-9.]*\)".*/\1/p' package.json | head -n 1)"; }) || {
    echo "install-deps: npm could not install s3rver" >&2
    exit 1
  }
fi
