#!/bin/sh
# Install every Debian package ckptfs needs to build, test and benchmark,
# including the Ceph RADOS Gateway used as the local S3 server.
# Idempotent: packages already present are skipped; apt-get update runs once
# per invocation and only when something is missing.
set -eu

PKGS="
  build-essential autoconf automake libtool pkg-config clang
  libfuse3-dev fuse3
  libcurl4-openssl-dev libsqlite3-dev sqlite3 libssl-dev libexpat1-dev
  libjansson-dev libisal-dev libsystemd-dev libmicrohttpd-dev
  libcriterion-dev libinih-dev python3-pytest python3-pytest-xdist
  ceph-mon ceph-osd radosgw ceph-common uuid-runtime
  awscli python3-boto3 python3-torch python3-prometheus-client
  curl openssl attr psmisc procps valgrind
  s3fs rclone hyperfine
"

missing=""
for p in $PKGS; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done

if [ -z "$missing" ]; then
  echo "install-deps: all packages present"
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $missing
