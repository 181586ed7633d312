#!/bin/bash
# Read benchmark for ckptfs: cold, warm and hot reads through the mount, daemon
# CPU and peak RSS, against raw parallel ranged GETs with curl, s3fs and rclone
# mount, all on one throwaway Ceph RGW, on loopback and over an emulated WAN
# link (bench/latency-proxy.c).  A report, not a test: it never fails on a
# missed target.  See bench/README.md.
#
#   bench/read-bench.sh [--size-gib N] [--with-8g] [--link loopback|wan|both]
#                       [--runs N] [--json FILE] [options]   (as root)
#
# Run with --help for every option.
set -uo pipefail

PROG=read-bench
SELF_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd "$SELF_DIR/.." && pwd -P)
# shellcheck source=bench/lib-rgw.sh
. "$SELF_DIR/lib-rgw.sh"

# ------------------------------------------------------------------ options --
SIZE_GIB=1
SIZE_MIB=
WITH_8G=0
LINKS=both
RUNS=2
JSON_OUT=
DIR_FILES=16
DIR_FILE_MIB=64
TTFB_MS=30
RATE_MBPS=90
TOOLS=ckptfs,s3fs,rclone
CKPTFS_BIN=$REPO/build/ckptfs
CKPTFS_OPTS=
S3FS_OPTS=parallel_count=8,multipart_size=32
RCLONE_ARGS=
OP_TIMEOUT=600
MAX_MINUTES=120
WORK_PARENT=${TMPDIR:-/var/tmp}
KEEP=0
RAW_NS="1 4 8 16"

usage() {
    cat <<EOF
usage: bench/read-bench.sh [options]        (run as root)

  --size-gib N        size of the large test file in GiB (default $SIZE_GIB)
  --size-mib N        instead: size in MiB (quick smoke runs)
  --with-8g           also measure an 8 GiB file (needs ~10 GiB RAM for the
                      server's memstore and ~25 GiB of disk)
  --link L            loopback, wan or both (default $LINKS)
  --runs N            repetitions of each measurement; the table shows the
                      best time, mean CPU and highest RSS (default $RUNS)
  --json FILE         also write the table as JSON to FILE
  --dir-files N       files in the checkpoint-like directory (default $DIR_FILES)
  --dir-file-mib M    size of each of them in MiB (default $DIR_FILE_MIB)
  --ttfb-ms MS        WAN link: time to first byte per request (default $TTFB_MS)
  --rate-mbps R       WAN link: cap per connection and direction, MB/s
                      (10^6 bytes/s, default $RATE_MBPS)
  --tools LIST        comma-separated subset of ckptfs,s3fs,rclone (default all)
  --ckptfs PATH       ckptfs binary (default $CKPTFS_BIN)
  --ckptfs-opts O     extra -o options for ckptfs (comma-separated)
  --s3fs-opts O       s3fs read tuning (default $S3FS_OPTS)
  --rclone-args A     extra rclone mount arguments (one string, split on blanks)
  --op-timeout S      limit for any single operation (default $OP_TIMEOUT s)
  --max-minutes M     limit for the whole run (default $MAX_MINUTES)
  --workdir DIR       parent of the scratch directory (default $WORK_PARENT)
  --keep              keep the scratch directory (logs, results.tsv)
EOF
}

while (($#)); do
    case $1 in
    --size-gib) SIZE_GIB=${2:?}; shift ;;
    --size-mib) SIZE_MIB=${2:?}; shift ;;
    --with-8g) WITH_8G=1 ;;
    --link) LINKS=${2:?}; shift ;;
    --runs) RUNS=${2:?}; shift ;;
    --json) JSON_OUT=${2:?}; shift ;;
    --dir-files) DIR_FILES=${2:?}; shift ;;
    --dir-file-mib) DIR_FILE_MIB=${2:?}; shift ;;
    --ttfb-ms) TTFB_MS=${2:?}; shift ;;
    --rate-mbps) RATE_MBPS=${2:?}; shift ;;
    --tools) TOOLS=${2:?}; shift ;;
    --ckptfs) CKPTFS_BIN=${2:?}; shift ;;
    --ckptfs-opts) CKPTFS_OPTS=${2:?}; shift ;;
    --s3fs-opts) S3FS_OPTS=${2:?}; shift ;;
    --rclone-args) RCLONE_ARGS=${2:?}; shift ;;
    --op-timeout) OP_TIMEOUT=${2:?}; shift ;;
    --max-minutes) MAX_MINUTES=${2:?}; shift ;;
    --workdir) WORK_PARENT=${2:?}; shift ;;
    --keep) KEEP=1 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
    esac
    shift
done

isint() { [[ $1 =~ ^[0-9]+$ ]]; }
for v in SIZE_GIB RUNS DIR_FILES DIR_FILE_MIB OP_TIMEOUT MAX_MINUTES; do
    isint "${!v}" || die "$v must be a whole number (got '${!v}')"
done
[[ $TTFB_MS =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--ttfb-ms must be a number"
[[ $RATE_MBPS =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--rate-mbps must be a number"
[[ -z $SIZE_MIB ]] || isint "$SIZE_MIB" || die "--size-mib must be a whole number"
((SIZE_GIB >= 1 && RUNS >= 1 && DIR_FILES >= 1 && DIR_FILE_MIB >= 1)) ||
    die "sizes and --runs must be at least 1"
case $LINKS in
loopback) LINK_LIST="loopback" ;;
wan) LINK_LIST="wan" ;;
both) LINK_LIST="loopback wan" ;;
*) die "--link must be loopback, wan or both" ;;
esac
declare -A WANT_TOOL=()
IFS=, read -ra _t <<<"$TOOLS"
for t in "${_t[@]}"; do
    case $t in ckptfs | s3fs | rclone) WANT_TOOL[$t]=1 ;; *) die "unknown tool '$t'" ;; esac
done

# ------------------------------------------------------------- environment --
bench_clean_env

[[ $(id -u) == 0 ]] || die "run as root (drops the page cache, mounts FUSE file systems)"
[[ -w /proc/sys/vm/drop_caches ]] || die "/proc/sys/vm/drop_caches is not writable"
[[ -c /dev/fuse ]] || die "/dev/fuse missing"

need() { command -v "$1" >/dev/null 2>&1 || die "$1 not found: $2"; }
need gcc "apt-get install build-essential (or: bash contrib/install-deps.sh)"
need curl "apt-get install curl"
need fusermount3 "apt-get install fuse3"
need timeout "coreutils"
need xargs "findutils"
need /usr/bin/python3 "apt-get install python3"
[[ -x /usr/bin/aws ]] || die "/usr/bin/aws not found: apt-get install awscli (the Debian one, not another 'aws' on PATH)"
[[ -f $RGW_SH ]] || die "$RGW_SH not found"
curl --help all 2>/dev/null | grep -q -- --aws-sigv4 || die "curl lacks --aws-sigv4 (needs 7.75+)"

declare -A TOOL_NA=()
if [[ ${WANT_TOOL[ckptfs]:-} ]]; then
    [[ -x $CKPTFS_BIN ]] || TOOL_NA[ckptfs]="ckptfs binary not found at $CKPTFS_BIN (build it, or --ckptfs PATH)"
fi
if [[ ${WANT_TOOL[s3fs]:-} ]]; then
    command -v s3fs >/dev/null || TOOL_NA[s3fs]="s3fs not installed (apt-get install s3fs)"
fi
if [[ ${WANT_TOOL[rclone]:-} ]]; then
    command -v rclone >/dev/null || TOOL_NA[rclone]="rclone not installed (apt-get install rclone)"
fi
for t in "${!TOOL_NA[@]}"; do note "${TOOL_NA[$t]}: its rows will read n/a"; done

GIB=$((1 << 30))
MIB=$((1 << 20))
BUCKET=ckptfs-bench
REGION=us-east-1
DIR_KEY=ckpt

# Objects: name -> size.  Large files first, then the directory.
declare -A OBJ_SIZE=()
BIG_OBJS=()
add_big() { # add_big NAME BYTES
    [[ -n ${OBJ_SIZE[$1]:-} ]] && return
    BIG_OBJS+=("$1")
    OBJ_SIZE[$1]=$2
}
if [[ -n $SIZE_MIB ]]; then add_big "big-${SIZE_MIB}m" $((SIZE_MIB * MIB))
else add_big "big-${SIZE_GIB}g" $((SIZE_GIB * GIB)); fi
((WITH_8G)) && add_big big-8g $((8 * GIB))
DIR_BYTES=$((DIR_FILES * DIR_FILE_MIB * MIB))
TOTAL_BYTES=$DIR_BYTES
for o in "${BIG_OBJS[@]}"; do TOTAL_BYTES=$((TOTAL_BYTES + OBJ_SIZE[$o])); done
LARGEST=${OBJ_SIZE[${BIG_OBJS[-1]}]}
((DIR_BYTES > LARGEST)) && LARGEST=$DIR_BYTES

# Memory for the memstore (holds everything) and disk for the local copies,
# one raw download and one tool's cache at a time.
MEMSTORE_BYTES=$((TOTAL_BYTES + TOTAL_BYTES / 4 + 512 * MIB))
avail_kb=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
((avail_kb * 1024 > MEMSTORE_BYTES + GIB)) ||
    die "need about $(((MEMSTORE_BYTES + GIB) >> 20)) MiB of free memory for the server's memstore; MemAvailable is $((avail_kb >> 10)) MiB (drop --with-8g or lower --size-gib)"
mkdir -p "$WORK_PARENT" || die "cannot create $WORK_PARENT"
need_disk=$((TOTAL_BYTES + 2 * LARGEST + 2 * GIB))
free_disk=$(($(df -Pk "$WORK_PARENT" | awk 'NR==2 {print $4}') * 1024))
((free_disk > need_disk)) ||
    die "need about $((need_disk >> 30)) GiB free under $WORK_PARENT, have $((free_disk >> 30)) GiB (--workdir elsewhere?)"

# ------------------------------------------------------ state and cleanup --
WORK=
RGW_DIR=
PROXY_PID=
PROXY_CPU=
OP_PID=
WATCHDOG_PID=
declare -A DAEMONS=() # mountpoint -> daemon pid
CLEANED=0

cleanup() {
    ((CLEANED)) && return
    CLEANED=1
    trap '' INT TERM HUP
    if [[ -n $WATCHDOG_PID ]]; then
        pkill -P "$WATCHDOG_PID" sleep 2>/dev/null
        kill "$WATCHDOG_PID" 2>/dev/null
    fi
    if [[ -n $OP_PID ]]; then
        kill -TERM -- "-$OP_PID" 2>/dev/null || kill -TERM "$OP_PID" 2>/dev/null
        sleep 0.2
        kill -KILL -- "-$OP_PID" 2>/dev/null
    fi
    bench_unmount_all 20
    [[ -n $PROXY_PID ]] && kill_wait "$PROXY_PID"
    bench_remove_work
}
trap cleanup EXIT
trap 'note "interrupted"; exit 130' INT
trap 'note "terminated: $(cat "$WORK/log/watchdog" 2>/dev/null || echo signal)"; exit 143' TERM
trap 'exit 129' HUP

WORK=$(mktemp -d "$WORK_PARENT/ckptfs-bench.XXXXXX") || die "mktemp failed"
chmod 700 "$WORK"
mkdir -p "$WORK"/{bin,data,mnt,cache,raw,log}
RESULTS=$WORK/results.tsv
: >"$RESULTS"
bench_aws_env "$REGION" $'s3 =\n  multipart_threshold = 5GB\n  multipart_chunksize = 256MB\n'

# Watchdog: its own stdout/stderr go nowhere, so a leftover sleep can never
# hold the caller's pipe open; cleanup kills the sleep and the subshell.
(
    exec </dev/null >/dev/null 2>&1
    sleep $((MAX_MINUTES * 60))
    echo "--max-minutes $MAX_MINUTES reached" >"$WORK/log/watchdog"
    kill -TERM $$
) &
WATCHDOG_PID=$!

T_START=$SECONDS
CLK_TCK=$(getconf CLK_TCK)

# ------------------------------------------------------------------ helpers --
now_us() { local t=${EPOCHREALTIME/./}; echo "$((10#$t))"; }
us_to_s() { printf '%d.%06d' $(($1 / 1000000)) $(($1 % 1000000)); }

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# run_op OUTFILE CMD...: run CMD (stdout to OUTFILE) under timeout, in its own
# process group (timeout makes one) so cleanup can kill all of it; sets
# OP_SECS and OP_RC.  Waiting with `wait` lets Ctrl-C interrupt at once.
run_op() {
    local out=$1 t0 t1
    shift
    t0=$(now_us)
    timeout -k 5 "$OP_TIMEOUT" "$@" >"$out" 2>>"$WORK/log/ops.log" &
    OP_PID=$!
    wait "$OP_PID"
    OP_RC=$?
    t1=$(now_us)
    OP_PID=
    OP_SECS=$(us_to_s $((t1 - t0)))
    ((OP_RC == 124)) && note "timed out after ${OP_TIMEOUT}s: $*"
    return 0
}

# Daemon accounting.
cpu_ticks() { # utime+stime of a process (all its threads)
    local s
    s=$(<"/proc/$1/stat") || { echo 0; return; }
    s=${s##*) }
    awk '{print $12 + $13}' <<<"$s"
}
hwm_reset() { echo 5 >"/proc/$1/clear_refs" 2>/dev/null || true; }
hwm_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

# CPU of the S3 server's daemons (radosgw, OSD, monitor), in ticks.
server_ticks() {
    local f pid t=0 c
    for f in "$RGW_DIR"/run/*.pid; do
        pid=$(tr -dc '0-9' <"$f" 2>/dev/null)
        [[ -n $pid && -r /proc/$pid/stat ]] || continue
        c=$(cpu_ticks "$pid")
        t=$((t + ${c%.*}))
    done
    echo "$t"
}
ticks_s() { awk -v a="$1" -v b="$2" -v t="$CLK_TCK" 'BEGIN {printf "%.2f", (b - a) / t}'; }

# Proxy counters (WAN link only): sets P_REQS P_CONNS from a fresh dump.
PROXY_STATS=
proxy_stats() {
    P_REQS=0 P_CONNS=0
    [[ -n $PROXY_PID ]] || return 0
    local before after i line
    before=$(sed -n 's/^seq=\([0-9]*\).*/\1/p' "$PROXY_STATS" 2>/dev/null)
    kill -USR1 "$PROXY_PID" 2>/dev/null || return 0
    for ((i = 0; i < 100; i++)); do
        line=$(cat "$PROXY_STATS" 2>/dev/null)
        after=$(sed -n 's/^seq=\([0-9]*\).*/\1/p' <<<"$line")
        [[ -n $after && $after != "$before" ]] && break
        sleep 0.01
    done
    P_REQS=$(sed -n 's/.* requests=\([0-9]*\).*/\1/p' <<<"$line")
    P_CONNS=$(sed -n 's/.*connections=\([0-9]*\).*/\1/p' <<<"$line")
    : "${P_REQS:=0}" "${P_CONNS:=0}"
}

# delta A B: B-A on the WAN link, empty on loopback (no proxy to count)
delta() { [[ -n $PROXY_PID ]] && echo $(($2 - $1)); }

# record OBJ ITEM RUN SECS BYTES CPU_S HWM_KIB REQS CONNS STATUS [SERVER_CPU_S]
LINK=local
record() {
    local IFS=$'\t'
    echo "$LINK	$*" >>"$RESULTS"
}

# ------------------------------------------------------------------ build --
progress "compiling bench/latency-proxy.c"
gcc -O2 -Wall -Wextra -Werror -pthread -o "$WORK/bin/latency-proxy" "$SELF_DIR/latency-proxy.c" \
    2>"$WORK/log/gcc.log" || { cat "$WORK/log/gcc.log" >&2; die "latency-proxy does not compile"; }
# seek-exec FILE OFFSET CMD...: CMD's stdout is FILE opened at OFFSET without
# truncation, so parallel curls write straight into one file (no pipe, no dd).
cat >"$WORK/bin/seek-exec.c" <<'EOF'
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: seek-exec FILE OFFSET CMD...\n");
		return 2;
	}
	int fd = open(argv[1], O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0 || lseek(fd, (off_t)strtoll(argv[2], NULL, 10), SEEK_SET) < 0 ||
	    dup2(fd, 1) < 0) {
		perror(argv[1]);
		return 2;
	}
	execvp(argv[3], argv + 3);
	perror(argv[3]);
	return 127;
}
EOF
gcc -O2 -Wall -Wextra -Werror -o "$WORK/bin/seek-exec" "$WORK/bin/seek-exec.c" 2>>"$WORK/log/gcc.log" ||
    { cat "$WORK/log/gcc.log" >&2; die "seek-exec does not compile"; }
SEEK_EXEC=$WORK/bin/seek-exec

# ------------------------------------------------------------- test data --
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
if awk -v l="${LOAD_START%% *}" 'BEGIN {exit !(l > 1.0)}'; then
    note "warning: load average is $LOAD_START before start: other work on this machine will skew the numbers"
fi
progress "writing test data (${BIG_OBJS[*]} + ${DIR_FILES} x ${DIR_FILE_MIB} MiB, random bytes)"
for o in "${BIG_OBJS[@]}"; do
    run_op "$WORK/data/$o.bin" head -c "${OBJ_SIZE[$o]}" /dev/urandom
    ((OP_RC == 0)) || die "cannot write test data"
done
mkdir -p "$WORK/data/$DIR_KEY"
DIR_NAMES=()
for ((i = 0; i < DIR_FILES; i++)); do
    n=$(printf 'shard-%03d.bin' "$i")
    DIR_NAMES+=("$n")
    head -c $((DIR_FILE_MIB * MIB)) /dev/urandom >"$WORK/data/$DIR_KEY/$n" || die "cannot write test data"
done

bench_rgw_start "$MEMSTORE_BYTES"
RGW_PORT=${S3_ENDPOINT##*:}

awsc() { /usr/bin/aws --endpoint-url "$S3_ENDPOINT" "$@"; }
progress "uploading $((TOTAL_BYTES >> 20)) MiB to s3://$BUCKET"
awsc s3 mb "s3://$BUCKET" >"$WORK/log/upload.log" 2>&1 || { cat "$WORK/log/upload.log" >&2; die "cannot create the bucket"; }
for o in "${BIG_OBJS[@]}"; do
    run_op "$WORK/log/upload.out" /usr/bin/aws --endpoint-url "$S3_ENDPOINT" s3 cp --only-show-errors \
        "$WORK/data/$o.bin" "s3://$BUCKET/$o.bin"
    ((OP_RC == 0)) || { tail "$WORK/log/ops.log" >&2; die "upload of $o failed"; }
done
run_op "$WORK/log/upload.out" /usr/bin/aws --endpoint-url "$S3_ENDPOINT" s3 cp --only-show-errors \
    --recursive "$WORK/data/$DIR_KEY" "s3://$BUCKET/$DIR_KEY/"
((OP_RC == 0)) || { tail "$WORK/log/ops.log" >&2; die "upload of $DIR_KEY/ failed"; }

# rclone's config file (empty: everything is on its command line; s3fs's
# is S3FS_PASSWD).
RCLONE_CONF=$WORK/rclone.conf
: >"$RCLONE_CONF"
SIGN=(--aws-sigv4 "aws:amz:$REGION:s3" --user "$S3_ACCESS_KEY:$S3_SECRET_KEY"
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD")

# ------------------------------------------------- local references ----
# Local disk (page cache dropped) and page cache reads of the local copies.
progress "local references: disk cat and page-cache cat"
# Three tries per run (they are cheap), so a busy moment does not become the
# reference.
for o in "${BIG_OBJS[@]}"; do
    for ((r = 1; r <= RUNS; r++)); do
        for k in 1 2 3; do
            drop_caches
            run_op /dev/null cat "$WORK/data/$o.bin"
            record "$o" ref:disk-cat "$r.$k" "$OP_SECS" "${OBJ_SIZE[$o]}" "" "" "" "" "$( ((OP_RC == 0)) && echo ok || echo "error:cat rc $OP_RC")"
        done
        run_op /dev/null cat "$WORK/data/$o.bin" # now in the page cache
        for k in 1 2 3; do
            run_op /dev/null cat "$WORK/data/$o.bin"
            record "$o" ref:pagecache-cat "$r.$k" "$OP_SECS" "${OBJ_SIZE[$o]}" "" "" "" "" "$( ((OP_RC == 0)) && echo ok || echo "error:cat rc $OP_RC")"
        done
    done
done

# ------------------------------------------------------------ raw curl ----
# raw_big OBJ N RUN: N parallel ranged GETs into one preallocated file.
raw_big() {
    local o=$1 n=$2 run=$3 size=${OBJ_SIZE[$1]} out="$WORK/raw/$1.bin" list="$WORK/raw/list"
    local part=$(((size + n - 1) / n)) a b i
    part=$(((part + MIB - 1) / MIB * MIB))
    rm -f "$out"
    fallocate -l "$size" "$out" 2>/dev/null || truncate -s "$size" "$out"
    : >"$list"
    for ((i = 0; i < n; i++)); do
        a=$((i * part))
        ((a < size)) || break
        b=$((a + part - 1))
        ((b >= size)) && b=$((size - 1))
        if ((n == 1)); then
            printf '%s %s curl -sS --fail -o - --aws-sigv4 aws:amz:%s:s3 --user %s:%s -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" %s\n' \
                "$out" "$a" "$REGION" "$S3_ACCESS_KEY" "$S3_SECRET_KEY" "$EP/$BUCKET/$o.bin" >>"$list"
        else
            printf '%s %s curl -sS --fail -o - --aws-sigv4 aws:amz:%s:s3 --user %s:%s -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -H "Range: bytes=%s-%s" %s\n' \
                "$out" "$a" "$REGION" "$S3_ACCESS_KEY" "$S3_SECRET_KEY" "$a" "$b" "$EP/$BUCKET/$o.bin" >>"$list"
        fi
    done
    drop_caches
    proxy_stats
    local r0=$P_REQS c0=$P_CONNS s0 s1
    s0=$(server_ticks)
    run_op /dev/null xargs -a "$list" -P "$n" -L 1 "$SEEK_EXEC"
    local rc=$OP_RC secs=$OP_SECS
    s1=$(server_ticks)
    proxy_stats
    local st=ok
    ((rc == 0)) || st="error:curl/xargs rc $rc"
    if [[ $st == ok && $run == 1 && $n == "${RAW_NS##* }" ]]; then
        cmp -s "$out" "$WORK/data/$o.bin" || st="error:downloaded bytes differ"
    fi
    record "$o" "raw:N$n" "$run" "$secs" "$size" "" "" "$(delta "$r0" "$P_REQS")" "$(delta "$c0" "$P_CONNS")" "$st" "$(ticks_s "$s0" "$s1")"
    rm -f "$out"
}

# raw_dir P RUN: every object of the directory, whole-object GETs, P at a time.
raw_dir() {
    local p=$1 run=$2 list="$WORK/raw/list" n
    rm -rf "$WORK/raw/dir"
    mkdir -p "$WORK/raw/dir"
    : >"$list"
    for n in "${DIR_NAMES[@]}"; do
        printf '%s 0 curl -sS --fail -o - --aws-sigv4 aws:amz:%s:s3 --user %s:%s -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" %s\n' \
            "$WORK/raw/dir/$n" "$REGION" "$S3_ACCESS_KEY" "$S3_SECRET_KEY" "$EP/$BUCKET/$DIR_KEY/$n" >>"$list"
    done
    drop_caches
    proxy_stats
    local r0=$P_REQS c0=$P_CONNS s0 s1
    s0=$(server_ticks)
    run_op /dev/null xargs -a "$list" -P "$p" -L 1 "$SEEK_EXEC"
    local rc=$OP_RC secs=$OP_SECS
    s1=$(server_ticks)
    proxy_stats
    local st=ok
    ((rc == 0)) || st="error:curl/xargs rc $rc"
    if [[ $st == ok && $run == 1 ]]; then
        diff -rq "$WORK/raw/dir" "$WORK/data/$DIR_KEY" >/dev/null || st="error:downloaded bytes differ"
    fi
    record "$DIR_KEY" "raw:N$p" "$run" "$secs" "$DIR_BYTES" "" "" "$(delta "$r0" "$P_REQS")" "$(delta "$c0" "$P_CONNS")" "$st" "$(ticks_s "$s0" "$s1")"
    rm -rf "$WORK/raw/dir"
}

# ----------------------------------------------------------------- mounts --
CKPTFS_CACHE=unknown # yes / no once probed
MNT=
MPID=
MCACHE=

# mount_tool TOOL: fresh mount point and empty cache dir; sets MNT MPID MCACHE.
mount_tool() {
    local tool=$1 i opts log
    MNT=$WORK/mnt/$tool
    MCACHE=$WORK/cache/$tool
    log=$WORK/log/$tool-$LINK.log
    mkdir -p "$MNT"
    rm -rf --one-file-system -- "$MCACHE"
    mkdir -p "$MCACHE"
    chmod 700 "$MCACHE"
    echo "=== mount $(date +%T)" >>"$log"
    case $tool in
    ckptfs)
        opts=$CKPTFS_OPTS
        [[ $CKPTFS_CACHE != no ]] && opts="cache_dir=$MCACHE${opts:+,$opts}"
        "$CKPTFS_BIN" mount "s3://$BUCKET" "$MNT" -f --endpoint "$EP" --region "$REGION" \
            ${opts:+-o "$opts"} >>"$log" 2>&1 &
        ;;
    s3fs)
        s3fs "$BUCKET" "$MNT" -f -o "url=$EP,use_path_request_style,endpoint=$REGION,passwd_file=$S3FS_PASSWD,use_cache=$MCACHE,dbglevel=warn${S3FS_OPTS:+,$S3FS_OPTS}" \
            >>"$log" 2>&1 &
        ;;
    rclone)
        # shellcheck disable=SC2086
        rclone mount ":s3:$BUCKET" "$MNT" --config "$RCLONE_CONF" --s3-provider Ceph \
            --s3-endpoint "$EP" --s3-region "$REGION" --s3-access-key-id "$S3_ACCESS_KEY" \
            --s3-secret-access-key "$S3_SECRET_KEY" --vfs-cache-mode full --cache-dir "$MCACHE" \
            --log-level NOTICE $RCLONE_ARGS >>"$log" 2>&1 &
        ;;
    esac
    MPID=$!
    DAEMONS[$MNT]=$MPID
    for ((i = 0; i < 300; i++)); do
        if ! kill -0 "$MPID" 2>/dev/null; then
            wait "$MPID" 2>/dev/null
            unset "DAEMONS[$MNT]"
            if [[ $tool == ckptfs && $CKPTFS_CACHE == unknown ]]; then
                note "ckptfs does not accept -o cache_dir yet (see $log); measuring without a cache"
                CKPTFS_CACHE=no
                mount_tool ckptfs
                return
            fi
            note "$tool exited during mount; last lines of $log:"
            tail -n 5 "$log" >&2
            return 1
        fi
        if is_mounted "$MNT" && timeout 10 ls "$MNT" >/dev/null 2>&1; then
            [[ $tool == ckptfs && $CKPTFS_CACHE == unknown ]] && CKPTFS_CACHE=yes
            return 0
        fi
        sleep 0.1
    done
    note "$tool did not mount within 30 s"
    umount_tool
    return 1
}

umount_tool() {
    [[ -n $MNT ]] || return 0
    if is_mounted "$MNT"; then
        timeout 30 fusermount3 -u "$MNT" 2>>"$WORK/log/ops.log" || {
            sleep 1
            timeout 30 fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" 2>/dev/null
        }
    fi
    local i
    for ((i = 0; i < 150; i++)); do
        kill -0 "$MPID" 2>/dev/null || break
        sleep 0.1
    done
    kill_wait "$MPID"
    wait "$MPID" 2>/dev/null
    unset "DAEMONS[$MNT]"
    rm -rf --one-file-system -- "$MCACHE"
    MNT=
}

# measured_read OBJ ITEM RUN BYTES CMD...: one timed read with the daemon's
# CPU, peak RSS (reset first) and, on the WAN link, the proxy's request count.
measured_read() {
    local o=$1 item=$2 run=$3 bytes=$4 c0 c1 h r0 cn0 s0 s1
    shift 4
    hwm_reset "$MPID"
    c0=$(cpu_ticks "$MPID")
    proxy_stats
    r0=$P_REQS cn0=$P_CONNS
    s0=$(server_ticks)
    run_op /dev/null "$@"
    local rc=$OP_RC secs=$OP_SECS
    s1=$(server_ticks)
    c1=$(cpu_ticks "$MPID")
    h=$(hwm_kib "$MPID")
    proxy_stats
    local cpu
    cpu=$(awk -v a="$c0" -v b="$c1" -v t="$CLK_TCK" 'BEGIN {printf "%.3f", (b - a) / t}')
    local st=ok
    ((rc == 0)) || st="error:$(basename "$1") rc $rc"
    kill -0 "$MPID" 2>/dev/null || st="error:daemon died"
    record "$o" "$item" "$run" "$secs" "$bytes" "$cpu" "$h" "$(delta "$r0" "$P_REQS")" "$(delta "$cn0" "$P_CONNS")" "$st" "$(ticks_s "$s0" "$s1")"
    [[ $st == ok ]]
}

na_all() { # na_all TOOL REASON: mark every row of TOOL n/a on this link
    local o item
    for o in "${BIG_OBJS[@]}"; do
        for item in cold-cat cold-dd warm-cat hot-cat cachefile-cat; do
            record "$o" "$1:$item" 1 "" "${OBJ_SIZE[$o]}" "" "" "" "" "na:$2"
        done
    done
    record "$DIR_KEY" "$1:cold-cat" 1 "" "$DIR_BYTES" "" "" "" "" "na:$2"
}

# tool_big TOOL OBJ RUN: cold cat, warm cat, hot cat (+ the cache file), then
# cold dd on a fresh mount.
tool_big() {
    local tool=$1 o=$2 r=$3 size=${OBJ_SIZE[$2]} f k
    progress "$LINK: $tool $o run $r/$RUNS: cold cat, warm, hot"
    if ! mount_tool "$tool"; then
        record "$o" "$tool:cold-cat" "$r" "" "$size" "" "" "" "" "error:mount failed"
        return
    fi
    drop_caches
    if ! measured_read "$o" "$tool:cold-cat" "$r" "$size" cat "$MNT/$o.bin"; then
        umount_tool
        return
    fi
    # warm: reads with the page cache dropped, from the tool's cache.  Three
    # of them, like the cache-file reference below: on a VM the first read
    # of a freshly written file misses the host's cache too, and a single
    # warm read against a best-of-three reference would measure that.
    if [[ $tool == ckptfs && $CKPTFS_CACHE != yes ]]; then
        record "$o" "$tool:warm-cat" "$r" "" "$size" "" "" "" "" "na:no cache yet"
    else
        for k in 1 2 3; do
            drop_caches
            measured_read "$o" "$tool:warm-cat" "$r.$k" "$size" cat "$MNT/$o.bin"
        done
    fi
    # hot: once more, page cache kept
    measured_read "$o" "$tool:hot-cat" "$r" "$size" cat "$MNT/$o.bin"
    # the cache file itself, read from disk
    if [[ $tool == ckptfs ]]; then
        f=
        if [[ $CKPTFS_CACHE == yes && -d $MCACHE/objects ]]; then
            f=$(find "$MCACHE/objects" -type f -size "${size}c" 2>/dev/null | head -n 1)
        fi
        if [[ -n $f ]]; then
            for k in 1 2 3; do
                drop_caches
                run_op /dev/null cat "$f"
                record "$o" "$tool:cachefile-cat" "$r.$k" "$OP_SECS" "$size" "" "" "" "" \
                    "$( ((OP_RC == 0)) && echo ok || echo "error:cat rc $OP_RC")"
            done
        else
            record "$o" "$tool:cachefile-cat" "$r" "" "$size" "" "" "" "" \
                "na:$([[ $CKPTFS_CACHE == yes ]] && echo "no cache file of $size bytes under cache_dir/objects" || echo "no cache yet")"
        fi
    fi
    umount_tool

    progress "$LINK: $tool $o run $r/$RUNS: cold dd bs=1M"
    if mount_tool "$tool"; then
        drop_caches
        measured_read "$o" "$tool:cold-dd" "$r" "$size" dd if="$MNT/$o.bin" of=/dev/null bs=1M status=none
        umount_tool
    else
        record "$o" "$tool:cold-dd" "$r" "" "$size" "" "" "" "" "error:mount failed"
    fi
}

# tool_dir TOOL RUN: cold cat of the whole directory.
tool_dir() {
    local tool=$1 r=$2
    progress "$LINK: $tool $DIR_KEY/ run $r/$RUNS: cold cat of $DIR_FILES files"
    if mount_tool "$tool"; then
        local files=("$MNT/$DIR_KEY"/*)
        drop_caches
        if ((${#files[@]} != DIR_FILES)); then
            record "$DIR_KEY" "$tool:cold-cat" "$r" "" "$DIR_BYTES" "" "" "" "" "error:listing shows ${#files[@]} files, expected $DIR_FILES"
        else
            measured_read "$DIR_KEY" "$tool:cold-cat" "$r" "$DIR_BYTES" cat "${files[@]}"
        fi
        umount_tool
    else
        record "$DIR_KEY" "$tool:cold-cat" "$r" "" "$DIR_BYTES" "" "" "" "" "error:mount failed"
    fi
}

# bench_tool TOOL RUN: one run of every read of TOOL on this link.
bench_tool() {
    local tool=$1 r=$2 o
    if [[ -n ${TOOL_NA[$tool]:-} ]]; then
        ((r == 1)) && na_all "$tool" "${TOOL_NA[$tool]}"
        return
    fi
    for o in "${BIG_OBJS[@]}"; do
        tool_big "$tool" "$o" "$r"
    done
    tool_dir "$tool" "$r"
}

# ------------------------------------------------------------------- links --
for LINK in $LINK_LIST; do
    if [[ $LINK == wan ]]; then
        PPORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
        PROXY_STATS=$WORK/log/proxy.stats
        "$WORK/bin/latency-proxy" --listen "127.0.0.1:$PPORT" --target "127.0.0.1:$RGW_PORT" \
            --ttfb-ms "$TTFB_MS" --rate-mbps "$RATE_MBPS" --stats "$PROXY_STATS" \
            >>"$WORK/log/proxy.log" 2>&1 &
        PROXY_PID=$!
        for ((i = 0; i < 50; i++)); do
            [[ -s $PROXY_STATS ]] && break
            kill -0 "$PROXY_PID" 2>/dev/null || { cat "$WORK/log/proxy.log" >&2; die "latency-proxy exited"; }
            sleep 0.1
        done
        EP=http://127.0.0.1:$PPORT
        curl -sS --fail -o /dev/null "${SIGN[@]}" "$EP/$BUCKET/$DIR_KEY/${DIR_NAMES[0]}" ||
            die "no S3 answer through the proxy at $EP"
    else
        EP=$S3_ENDPOINT
    fi
    progress "=== link $LINK ($EP)"
    # Run by run, every measurement in turn, so a change in the machine's
    # load hits the references and the tools alike.
    for ((r = 1; r <= RUNS; r++)); do
        for o in "${BIG_OBJS[@]}"; do
            for n in $RAW_NS; do
                progress "$LINK: run $r/$RUNS: raw curl $o N=$n"
                raw_big "$o" "$n" "$r"
            done
        done
        for n in $RAW_NS; do
            ((n > DIR_FILES)) && continue
            progress "$LINK: run $r/$RUNS: raw curl $DIR_KEY/ P=$n"
            raw_dir "$n" "$r"
        done
        for tool in ckptfs s3fs rclone; do
            [[ ${WANT_TOOL[$tool]:-} ]] && bench_tool "$tool" "$r"
        done
    done
    if [[ -n $PROXY_PID ]]; then
        PROXY_CPU=$(ticks_s 0 "$(cpu_ticks "$PROXY_PID")")
        kill_wait "$PROXY_PID"
        wait "$PROXY_PID" 2>/dev/null
        PROXY_PID=
    fi
done
LINK=local

# ------------------------------------------------------------------ report --
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
versions() {
    echo "ckptfs=$("$CKPTFS_BIN" --version 2>/dev/null | head -n 1 | sed 's/^ckptfs //')"
    echo "ckptfs_commit=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null)$(git -C "$REPO" diff --quiet HEAD -- src 2>/dev/null || echo "+dirty src")"
    command -v s3fs >/dev/null && echo "s3fs=$(s3fs --version 2>/dev/null | head -n 1 | sed 's/ (commit.*//; s/.* V//')"
    command -v rclone >/dev/null && echo "rclone=$(rclone version 2>/dev/null | head -n 1 | sed 's/^rclone //')"
    echo "curl=$(curl --version | head -n 1 | cut -d' ' -f2)"
    echo "kernel=$(uname -r)"
    echo "cpus=$(nproc)"
    [[ -n ${PROXY_CPU:-} ]] && echo "latency-proxy_cpu_s=$PROXY_CPU"
}
versions >"$WORK/versions"
export BENCH_RESULTS=$RESULTS BENCH_JSON=$JSON_OUT BENCH_RUNS=$RUNS BENCH_TTFB=$TTFB_MS \
    BENCH_RATE=$RATE_MBPS BENCH_LOAD_START=$LOAD_START BENCH_LOAD_END=$LOAD_END \
    BENCH_VERSIONS=$WORK/versions BENCH_CKPTFS_CACHE=$CKPTFS_CACHE BENCH_DIR_KEY=$DIR_KEY \
    BENCH_DIR_DESC="$DIR_FILES x $DIR_FILE_MIB MiB" BENCH_S3FS_OPTS=$S3FS_OPTS \
    BENCH_ELAPSED=$((SECONDS - T_START)) BENCH_LINKS="$LINK_LIST"
/usr/bin/python3 "$SELF_DIR/report.py" || die "report failed (raw results in $RESULTS; rerun with --keep to inspect)"
