#!/bin/bash
# ckptfs's main job on a fresh Debian 12 machine (run as root): install,
# build, start a local S3 server (Ceph RGW), put a checkpoint in a bucket,
# mount it with ckptfs and read it back with ordinary tools; then save a new
# checkpoint through the mount the way training code does (write to a temp
# directory, rename it) and watch it reach the bucket as one commit.
# CKPTFS_BIN=PATH runs that ckptfs instead of building one, e.g. the
# installed package's: CKPTFS_BIN=ckptfs bash contrib/demo.sh (a bare name
# is looked up on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
work=$(mktemp -d /tmp/ckptfs-demo.XXXXXX)
mnt="$work/mnt"
unset AWS_CA_BUNDLE CURL_CA_BUNDLE REQUESTS_CA_BUNDLE AWS_PROFILE

cleanup() {
	set +e
	fusermount3 -u "$mnt" 2>/dev/null
	fusermount3 -u "$work/mnt2" 2>/dev/null
	bash "$top/tests/s3server/rgw.sh" stop "$work/rgw" >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT

if [ -n "${CKPTFS_BIN:-}" ]; then
	echo "== installing packages"
	bash contrib/install-deps.sh
	ckptfs=$(command -v "$CKPTFS_BIN") || { echo "demo: CKPTFS_BIN=$CKPTFS_BIN not found" >&2; exit 1; }
	echo "using $ckptfs: $("$ckptfs" --version)"
else
	echo "== installing packages and building"
	bash contrib/install-deps.sh
	[ -x configure ] || autoreconf -fi >/dev/null 2>&1
	mkdir -p build
	(cd build && { [ -f Makefile ] || ../configure -q; } && make -j"$(nproc)" >/dev/null)
	ckptfs=$top/build/ckptfs
fi

echo "== starting a local S3 server (Ceph RADOS Gateway)"
bash tests/s3server/rgw.sh start "$work/rgw" >/dev/null
# shellcheck disable=SC1091
. "$work/rgw/env"
export AWS_ACCESS_KEY_ID=$S3_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET_KEY
export AWS_DEFAULT_REGION=us-east-1 AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
export AWS_REQUEST_CHECKSUM_CALCULATION=when_required
aws() { /usr/bin/aws --endpoint-url "$S3_ENDPOINT" "$@"; }

echo "== uploading a checkpoint to s3://demo/run1/"
aws s3 mb s3://demo >/dev/null
mkdir -p "$work/src/checkpoint-100" "$work/src/checkpoint-200"
for step in 100 200; do
	head -c $((64 << 20)) /dev/urandom >"$work/src/checkpoint-$step/model.safetensors"
	head -c $((8 << 20)) /dev/urandom >"$work/src/checkpoint-$step/optimizer.pt"
	echo "{\"global_step\": $step}" >"$work/src/checkpoint-$step/trainer_state.json"
done
aws s3 cp --recursive --quiet "$work/src" s3://demo/run1/

echo "== mounting s3://demo/run1 on $mnt"
mkdir -p "$mnt"
"$ckptfs" mount s3://demo/run1 "$mnt" --endpoint "$S3_ENDPOINT" --region us-east-1 \
	-o cache_dir="$work/cache"
ls -la "$mnt"
ls -la "$mnt/checkpoint-200"
du -sb "$mnt"
cat "$mnt/checkpoint-200/trainer_state.json"
echo "== comparing checksums (mount vs. source)"
(cd "$mnt" && sha256sum checkpoint-200/*) >"$work/mnt.sum"
(cd "$work/src" && sha256sum checkpoint-200/*) >"$work/src.sum"
cat "$work/mnt.sum"
diff "$work/src.sum" "$work/mnt.sum" && echo "OK: the mounted checkpoint is byte-identical"
echo "== the cache after reading it"
"$ckptfs" status "$mnt"
echo "== saving checkpoint-300 through the mount (tmp dir, then rename)"
mkdir "$mnt/tmp-checkpoint-300"
head -c $((64 << 20)) /dev/urandom >"$mnt/tmp-checkpoint-300/model.safetensors"
head -c $((8 << 20)) /dev/urandom >"$mnt/tmp-checkpoint-300/optimizer.pt"
echo '{"global_step": 300}' >"$mnt/tmp-checkpoint-300/trainer_state.json"
mv "$mnt/tmp-checkpoint-300" "$mnt/checkpoint-300"
"$ckptfs" status "$mnt" | sed -n '/pending/,$p'
echo "== ckptfs sync: waits until every write is visible in the bucket"
"$ckptfs" sync "$mnt"
aws s3 ls --recursive s3://demo/run1/checkpoint-300/
echo "== another host (a second mount with its own cache) sees it whole"
mkdir -p "$work/mnt2"
"$ckptfs" mount s3://demo/run1 "$work/mnt2" --endpoint "$S3_ENDPOINT" --region us-east-1 \
	-o ro,cache_dir="$work/cache2"
(cd "$mnt" && sha256sum checkpoint-300/*) >"$work/w.sum"
(cd "$work/mnt2" && sha256sum checkpoint-300/*) >"$work/r.sum"
cat "$work/r.sum"
diff "$work/w.sum" "$work/r.sum" && echo "OK: the committed checkpoint is byte-identical on the other mount"
