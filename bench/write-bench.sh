#!/bin/bash
# Write benchmark for ckptfs: saving a checkpoint-like directory (one 1 GiB
# file and 16 files of 64 MiB) through the mount.  Two numbers per tool:
#   close:     seconds until the writing program's last close returned,
#              against the same program writing to local disk;
#   committed: seconds from the program's start until every object is in
#              the bucket (ckptfs: `ckptfs sync` returned and a listing shows
#              them), against a raw `aws s3 cp --recursive` of the same bytes.
# The same for s3fs and `rclone mount --vfs-cache-mode writes` when installed,
# all on one throwaway Ceph RGW.  A report, not a test: it never fails on a
# ratio.  See bench/README.md.
#
#   bench/write-bench.sh [--runs N] [--tools ckptfs,s3fs,rclone] [...]  (as root)
#   SIZE=0.05 bench/write-bench.sh --runs 1        # quick: sizes scaled by 0.05
set -uo pipefail

PROG=write-bench
SELF_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd "$SELF_DIR/.." && pwd -P)
# shellcheck source=bench/lib-rgw.sh
. "$SELF_DIR/lib-rgw.sh"
PY=/usr/bin/python3

SIZE=${SIZE:-1}
RUNS=2
TOOLS=ckptfs,s3fs,rclone
CKPTFS_BIN=$REPO/build/ckptfs
CKPTFS_OPTS=
S3FS_OPTS=parallel_count=8,multipart_size=32
RCLONE_ARGS="--vfs-write-back 0s"
OP_TIMEOUT=900
WORK_PARENT=${TMPDIR:-/var/tmp}
KEEP=0

usage() {
    cat <<EOF
usage: [SIZE=FACTOR] bench/write-bench.sh [options]        (run as root)

  SIZE=F              scale every file size by F (default 1: one 1 GiB file
                      + 16 x 64 MiB; SIZE=0.05 for a smoke run of ~100 MiB)
  --runs N            repetitions; the table shows the best time (default $RUNS)
  --tools LIST        comma-separated subset of ckptfs,s3fs,rclone (default all)
  --ckptfs PATH       ckptfs binary (default $CKPTFS_BIN)
  --ckptfs-opts O     extra -o options for ckptfs (comma-separated)
  --s3fs-opts O       s3fs tuning (default $S3FS_OPTS)
  --rclone-args A     extra rclone mount arguments (default "$RCLONE_ARGS")
  --op-timeout S      limit for any single operation (default $OP_TIMEOUT s)
  --workdir DIR       parent of the scratch directory (default $WORK_PARENT);
                      a real disk: the local reference and the caches go there
  --keep              keep the scratch directory (logs, results.tsv)
EOF
}

while (($#)); do
    case $1 in
    --runs) RUNS=${2:?}; shift ;;
    --tools) TOOLS=${2:?}; shift ;;
    --ckptfs) CKPTFS_BIN=${2:?}; shift ;;
    --ckptfs-opts) CKPTFS_OPTS=${2:?}; shift ;;
    --s3fs-opts) S3FS_OPTS=${2:?}; shift ;;
    --rclone-args) RCLONE_ARGS=${2:?}; shift ;;
    --op-timeout) OP_TIMEOUT=${2:?}; shift ;;
    --workdir) WORK_PARENT=${2:?}; shift ;;
    --keep) KEEP=1 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
    esac
    shift
done
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "--runs must be a whole number >= 1"
[[ $OP_TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "--op-timeout must be a whole number"
[[ $SIZE =~ ^[0-9]*\.?[0-9]+$ ]] || die "SIZE must be a positive number (got '$SIZE')"
declare -A WANT_TOOL=() TOOL_NA=()
IFS=, read -ra _t <<<"$TOOLS"
for t in "${_t[@]}"; do
    case $t in ckptfs | s3fs | rclone) WANT_TOOL[$t]=1 ;; *) die "unknown tool '$t'" ;; esac
done

bench_clean_env

[[ $(id -u) == 0 ]] || die "run as root (mounts FUSE file systems)"
[[ -c /dev/fuse ]] || die "/dev/fuse missing"
command -v fusermount3 >/dev/null || die "fusermount3 not found: apt-get install fuse3"
[[ -x /usr/bin/aws ]] || die "/usr/bin/aws not found: apt-get install awscli"
$PY -c 'import boto3' 2>/dev/null || die "python3-boto3 missing: apt-get install python3-boto3"
if [[ ${WANT_TOOL[ckptfs]:-} ]]; then
    [[ -x $CKPTFS_BIN ]] || die "ckptfs binary $CKPTFS_BIN not found: build it or pass --ckptfs"
    "$CKPTFS_BIN" sync --help >/dev/null 2>&1 ||
        TOOL_NA[ckptfs]="this ckptfs has no 'sync' command (no write path yet)"
fi
if [[ ${WANT_TOOL[s3fs]:-} ]] && ! command -v s3fs >/dev/null; then
    TOOL_NA[s3fs]="s3fs not installed (apt-get install s3fs)"
fi
if [[ ${WANT_TOOL[rclone]:-} ]] && ! command -v rclone >/dev/null; then
    TOOL_NA[rclone]="rclone not installed (apt-get install rclone)"
fi
for t in "${!TOOL_NA[@]}"; do note "${TOOL_NA[$t]}: its rows will read n/a"; done

MIB=$((1 << 20))
mib() { awk -v s="$SIZE" -v m="$1" 'BEGIN {v = int(s * m); print (v < 1 ? 1 : v)}'; }
BIG_MIB=$(mib 1024)
DIR_FILES=16
FILE_MIB=$(mib 64)
TOTAL=$(((BIG_MIB + DIR_FILES * FILE_MIB) * MIB))
BUCKET=ckptfs-wbench
REGION=us-east-1

# The server's memstore holds one saved copy at a time (each is deleted
# after its measurement) plus slack; the writer holds the checkpoint in
# memory; local disk holds the source, the local copy and one tool's cache.
MEMSTORE_BYTES=$((2 * TOTAL + 512 * MIB))
avail_kb=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
((avail_kb * 1024 > MEMSTORE_BYTES + TOTAL + (1 << 30))) ||
    die "need about $(((MEMSTORE_BYTES + TOTAL) >> 20)) MiB of free memory (server memstore + the writer's copy); lower SIZE"
mkdir -p "$WORK_PARENT" || die "cannot create $WORK_PARENT"
free_disk=$(($(df -Pk "$WORK_PARENT" | awk 'NR==2 {print $4}') * 1024))
((free_disk > 4 * TOTAL + (1 << 30))) || die "need about $(((4 * TOTAL) >> 30)) GiB free under $WORK_PARENT"

# ------------------------------------------------------ state and cleanup --
WORK=
RGW_DIR=
MNT=
MPID=
declare -A DAEMONS=()
CLEANED=0
cleanup() {
    ((CLEANED)) && return
    CLEANED=1
    trap '' INT TERM HUP
    bench_unmount_all 60
    bench_remove_work
}
trap cleanup EXIT
trap 'note "interrupted"; exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

WORK=$(mktemp -d "$WORK_PARENT/ckptfs-wbench.XXXXXX") || die "mktemp failed"
chmod 700 "$WORK"
mkdir -p "$WORK"/{data/ckpt,local,mnt,cache,log}
RESULTS=$WORK/results.tsv
: >"$RESULTS"
# The AWS CLI's defaults (8 MiB parts, 10 concurrent requests) stay: the raw
# reference is what a user gets from `aws s3 cp --recursive`.
bench_aws_env "$REGION"
T_START=$SECONDS
record() { local IFS=$'\t'; echo "$*" >>"$RESULTS"; } # TOOL WHAT RUN SECONDS STATUS
now() { echo "$EPOCHREALTIME"; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", b - a}'; }

# ------------------------------------------------------------------ data ---
progress "writing test data: 1 x $BIG_MIB MiB + $DIR_FILES x $FILE_MIB MiB (random bytes)"
head -c $((BIG_MIB * MIB)) /dev/urandom >"$WORK/data/ckpt/model-00.bin" || die "cannot write test data"
for ((i = 1; i <= DIR_FILES; i++)); do
    head -c $((FILE_MIB * MIB)) /dev/urandom >"$WORK/data/ckpt/$(printf 'optim-%02d.bin' "$i")" ||
        die "cannot write test data"
done
SRC=$WORK/data/ckpt

bench_rgw_start "$MEMSTORE_BYTES"
EP=$S3_ENDPOINT
awsc() { timeout -k 5 "$OP_TIMEOUT" /usr/bin/aws --endpoint-url "$EP" "$@"; }
awsc s3 mb "s3://$BUCKET" >"$WORK/log/aws.log" 2>&1 || { cat "$WORK/log/aws.log" >&2; die "cannot create the bucket"; }

# writer DST: the checkpoint-saving program; sets W_CLOSE (seconds until
# the last close returned) and W_T0 (epoch of its first write call).  Every
# writer starts from the same state: no dirty pages left by the previous
# row (which otherwise throttle the next writer: seen from 0.3 s to 13 s
# for the same local-disk write on this kind of machine), and no clean page
# cache either, so every row starts from the same memory state.  That does
# not remove all variation: on this VM the 2 GiB local save, after a drop,
# took 3.0-3.5 s, and once 0.36 s.
writer() {
    local out
    sync
    echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
    out=$(timeout -k 5 "$OP_TIMEOUT" $PY "$SELF_DIR/ckpt-writer.py" "$SRC" "$1" 2>>"$WORK/log/writer.log") ||
        { W_CLOSE=; return 1; }
    read -r W_CLOSE W_T0 <<<"$out"
}
# s3_wait PREFIX: until every object is listed with its size; sets S3_DONE
# (epoch): when the listing first showed them all, or when s3_wait started
# if they were all there already
s3_wait() {
    local t0 out
    t0=$(now)
    out=$(timeout -k 5 "$OP_TIMEOUT" $PY "$SELF_DIR/s3-wait.py" "$EP" "$BUCKET" "$1" "$SRC" "$OP_TIMEOUT" \
        2>>"$WORK/log/s3-wait.log") || { S3_DONE=; return 1; }
    if [[ $out == already ]]; then S3_DONE=$t0; else S3_DONE=$out; fi
}
s3_clear() { awsc s3 rm --recursive --only-show-errors "s3://$BUCKET/" >>"$WORK/log/aws.log" 2>&1; }

mount_tool() { # mount_tool TOOL: fresh mount point and cache; sets MNT MPID
    local tool=$1 i cache=$WORK/cache/$1 log=$WORK/log/$1.log
    MNT=$WORK/mnt/$tool
    mkdir -p "$MNT"
    rm -rf --one-file-system -- "$cache"
    mkdir -p "$cache" && chmod 700 "$cache"
    case $tool in
    ckptfs)
        "$CKPTFS_BIN" mount "s3://$BUCKET" "$MNT" -f --endpoint "$EP" --region "$REGION" \
            -o "cache_dir=$cache${CKPTFS_OPTS:+,$CKPTFS_OPTS}" >>"$log" 2>&1 &
        ;;
    s3fs)
        s3fs "$BUCKET" "$MNT" -f -o "url=$EP,use_path_request_style,endpoint=$REGION,passwd_file=$S3FS_PASSWD,use_cache=$cache,dbglevel=warn${S3FS_OPTS:+,$S3FS_OPTS}" \
            >>"$log" 2>&1 &
        ;;
    rclone)
        # shellcheck disable=SC2086
        rclone mount ":s3:$BUCKET" "$MNT" --config /dev/null --s3-provider Ceph \
            --s3-endpoint "$EP" --s3-region "$REGION" --s3-access-key-id "$S3_ACCESS_KEY" \
            --s3-secret-access-key "$S3_SECRET_KEY" --vfs-cache-mode writes --cache-dir "$cache" \
            --log-level NOTICE $RCLONE_ARGS >>"$log" 2>&1 &
        ;;
    esac
    MPID=$!
    DAEMONS[$MNT]=$MPID
    for ((i = 0; i < 300; i++)); do
        if ! kill -0 "$MPID" 2>/dev/null; then
            unset "DAEMONS[$MNT]"
            note "$tool exited during mount; last lines of $log:"
            tail -n 5 "$log" >&2
            return 1
        fi
        is_mounted "$MNT" && timeout 10 ls "$MNT" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    note "$tool did not mount within 30 s"
    umount_tool
    return 1
}
umount_tool() {
    [[ -n $MNT ]] || return 0
    if is_mounted "$MNT"; then
        timeout "$OP_TIMEOUT" fusermount3 -u "$MNT" 2>>"$WORK/log/ops.log" || fusermount3 -uz "$MNT" 2>/dev/null
    fi
    local i
    for ((i = 0; i < 600; i++)); do
        kill -0 "$MPID" 2>/dev/null || break
        sleep 0.1
    done
    kill_wait "$MPID"
    wait "$MPID" 2>/dev/null
    unset "DAEMONS[$MNT]"
    rm -rf --one-file-system -- "$WORK/cache/${MNT##*/}"
    MNT=
}

# bench_tool TOOL RUN: save through the mount, then wait for the commit.
bench_tool() {
    local tool=$1 r=$2 st=ok key
    if [[ -n ${TOOL_NA[$tool]:-} ]]; then
        if ((r == 1)); then
            record "$tool" close 1 "" "na:${TOOL_NA[$tool]}"
            record "$tool" committed 1 "" "na:${TOOL_NA[$tool]}"
        fi
        return
    fi
    progress "run $r/$RUNS: $tool"
    if ! mount_tool "$tool"; then
        record "$tool" close "$r" "" "error:mount failed"
        return
    fi
    key="$tool-$r"
    if ! writer "$MNT/$key"; then
        record "$tool" close "$r" "" "error:the writer failed: $(tail -n 1 "$WORK/log/writer.log")"
        umount_tool
        s3_clear
        return
    fi
    record "$tool" close "$r" "$W_CLOSE" ok
    case $tool in
    ckptfs)  # the contract: `ckptfs sync` returns when everything is committed
        timeout -k 5 "$OP_TIMEOUT" "$CKPTFS_BIN" sync "$MNT" >>"$WORK/log/ops.log" 2>&1 ||
            st="error:ckptfs sync failed"
        ;;
    s3fs) ;;   # s3fs uploads in flush/close: committed when close returned
    rclone) ;; # uploads in the background after close (--vfs-write-back)
    esac
    # every tool: done when a listing shows every object with its size
    if [[ $st == ok ]] && s3_wait "$key"; then
        record "$tool" committed "$r" "$(secs "$W_T0" "$S3_DONE")" ok
    else
        [[ $st == ok ]] && st="error:objects not in the bucket after ${OP_TIMEOUT}s"
        record "$tool" committed "$r" "" "$st"
    fi
    umount_tool
    s3_clear
}

for ((r = 1; r <= RUNS; r++)); do
    progress "run $r/$RUNS: local disk and raw upload references"
    rm -rf "$WORK/local/ckpt"
    if writer "$WORK/local/ckpt"; then
        record local close "$r" "$W_CLOSE" ok
        sync
        record local close+sync "$r" "$(secs "$W_T0" "$(now)")" ok
    else
        record local close "$r" "" "error:the writer failed"
    fi
    rm -rf "$WORK/local/ckpt"
    t0=$(now)
    if awsc s3 cp --recursive --only-show-errors "$SRC" "s3://$BUCKET/raw-$r" >>"$WORK/log/aws.log" 2>&1 &&
        s3_wait "raw-$r"; then
        record raw committed "$r" "$(secs "$t0" "$S3_DONE")" ok
    else
        record raw committed "$r" "" "error:aws s3 cp failed (see log/aws.log)"
    fi
    s3_clear
    for tool in ckptfs s3fs rclone; do
        [[ ${WANT_TOOL[$tool]:-} ]] && bench_tool "$tool" "$r"
    done
done

# ------------------------------------------------------------------ report --
{
    echo "ckptfs=$("$CKPTFS_BIN" --version 2>/dev/null | head -n 1)"
    command -v s3fs >/dev/null && echo "s3fs=$(s3fs --version 2>/dev/null | head -n 1 | sed 's/ (commit.*//; s/.* V//')"
    command -v rclone >/dev/null && echo "rclone=$(rclone version 2>/dev/null | head -n 1)"
    echo "aws=$(/usr/bin/aws --version 2>&1 | cut -d' ' -f1)"
    echo "cpus=$(nproc) load=$(cut -d' ' -f1-3 /proc/loadavg)"
} >"$WORK/versions"
export BENCH_RESULTS=$RESULTS BENCH_VERSIONS=$WORK/versions BENCH_RUNS=$RUNS \
    BENCH_DESC="1 x $BIG_MIB MiB + $DIR_FILES x $FILE_MIB MiB = $((TOTAL >> 20)) MiB (SIZE=$SIZE)" \
    BENCH_RCLONE_ARGS="$RCLONE_ARGS" BENCH_TOTAL=$TOTAL
$PY "$SELF_DIR/write-report.py" || die "report failed (raw results in $RESULTS; rerun with --keep)"
