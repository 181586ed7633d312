#!/bin/bash
# s3rver (npm) on 127.0.0.1, the second S3 implementation of the
# portability tests (doc/portability.md), everything inside one directory.
#
#   s3rver.sh start DIR   bring it up; prints S3_ENDPOINT=, S3_ACCESS_KEY=,
#                         S3_SECRET_KEY=, ... lines (also written to DIR/env),
#                         the same shape as rgw.sh's
#   s3rver.sh stop DIR    kill exactly this server, remove DIR
#   s3rver.sh status DIR  exit 0 if the server of DIR is alive
#
# Environment knobs:
#   S3RVER_BIN            the s3rver script (default: the copy that
#                         contrib/install-deps.sh installs under
#                         /var/cache/ckptfs-test/s3rver, then s3rver on PATH)
#   S3RVER_START_TIMEOUT  seconds to wait for the endpoint (default 30)
#   S3RVER_LOG=1          log every request to DIR/log/s3rver.out
#
# s3rver accepts any well-formed signature and has fixed keys S3RVER/S3RVER.
# It needs Node's legacy OpenSSL provider: without it every listing with a
# continuation token fails with HTTP 500 (the token is encrypted with a
# cipher OpenSSL 3 disables).
set -euo pipefail

PROG=s3rver.sh
START_TIMEOUT=${S3RVER_START_TIMEOUT:-30}
NPM_DIR=${CKPTFS_S3RVER_DIR:-/var/cache/ckptfs-test/s3rver}
PY=/usr/bin/python3

unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY \
      2>/dev/null || true

die() { echo "$PROG: error: $*" >&2; exit 1; }
note() { echo "$PROG: $*" >&2; }
usage() {
    echo "usage: $PROG start|stop|status DIR" >&2
    exit 2
}

find_bin() {
    if [[ -n ${S3RVER_BIN:-} ]]; then
        [[ -x $S3RVER_BIN ]] || die "S3RVER_BIN=$S3RVER_BIN is not executable"
        echo "$S3RVER_BIN"
    elif [[ -x $NPM_DIR/node_modules/.bin/s3rver ]]; then
        echo "$NPM_DIR/node_modules/.bin/s3rver"
    elif command -v s3rver >/dev/null; then
        command -v s3rver
    else
        die "s3rver not found: run contrib/install-deps.sh (npm ci into $NPM_DIR) or set S3RVER_BIN"
    fi
}

# The version of the s3rver package next to BIN (its package.json).
bin_version() {
    local real pj
    real=$(readlink -f "$1")
    pj=$(dirname "$real")/../package.json
    [[ -r $pj ]] || { echo unknown; return; }
    "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$pj" 2>/dev/null ||
        echo unknown
}

free_port() {
    "$PY" - <<'EOF'
import random, socket
rng = random.SystemRandom()
while True:
    p = rng.randint(20000, 32767)
    if 6800 <= p <= 7300:
        continue
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        continue
    finally:
        s.close()
    print(p)
    break
EOF
}

# pid_ours PID: alive (not a zombie) and its command line names our data dir.
pid_ours() {
    local pid=$1 cmd state
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    [[ -r /proc/$pid/cmdline ]] || return 1
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
    [[ $state != Z && $state != X ]] || return 1
    cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
    [[ $cmd == *" -d $DIR/data "* ]]
}

kill_ours() {
    local pid
    [[ -r $DIR/run/s3rver.pid ]] || return 0
    pid=$(tr -dc '0-9' <"$DIR/run/s3rver.pid" 2>/dev/null || true)
    [[ -n $pid ]] && pid_ours "$pid" || return 0
    kill -KILL "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 10))
    while pid_ours "$pid"; do
        ((SECONDS < deadline)) || { note "pid $pid did not exit"; break; }
        sleep 0.05
    done
}

do_start() {
    local t0 bin version port url code pid deadline
    t0=$(date +%s.%N)
    if [[ -e $DIR ]]; then
        [[ -d $DIR ]] || die "$DIR exists and is not a directory"
        [[ -z $(ls -A "$DIR") ]] || die "$DIR is not empty"
    fi
    command -v node >/dev/null || die "node not found (apt-get install nodejs npm)"
    command -v curl >/dev/null || die "curl not found"
    bin=$(find_bin)
    version=$(bin_version "$bin")
    mkdir -p "$DIR"
    DIR=$(cd "$DIR" && pwd -P)
    mkdir -p "$DIR"/{run,log,data}
    port=$(free_port) || die "cannot find a free port"
    local quiet=(--silent)
    [[ ${S3RVER_LOG:-} == 1 ]] && quiet=()
    NODE_OPTIONS=--openssl-legacy-provider setsid node "$bin" -d "$DIR/data" -p "$port" \
        -a 127.0.0.1 --no-vhost-buckets "${quiet[@]}" </dev/null >>"$DIR/log/s3rver.out" 2>&1 &
    pid=$!
    disown "$pid" 2>/dev/null || true
    echo "$pid" >"$DIR/run/s3rver.pid"
    url=http://127.0.0.1:$port
    deadline=$((SECONDS + START_TIMEOUT))
    while :; do
        code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$url/" 2>/dev/null || true)
        [[ $code =~ ^[1-5][0-9][0-9]$ ]] && break
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -n 20 "$DIR/log/s3rver.out" >&2
            if grep -qs "EADDRINUSE" "$DIR/log/s3rver.out"; then return 98; fi
            die "s3rver exited during start-up"
        fi
        ((SECONDS < deadline)) || { kill_ours; die "s3rver at $url not answering after ${START_TIMEOUT}s"; }
        sleep 0.05
    done
    cat >"$DIR/env" <<EOF
S3_ENDPOINT=$url
S3_ACCESS_KEY=S3RVER
S3_SECRET_KEY=S3RVER
S3_REGION=us-east-1
S3_CAPACITY_BYTES=0
S3_COMPRESSION=none
S3_SERVER=s3rver
S3_SERVER_VERSION=$version
EOF
    cat "$DIR/env"
    note "s3rver $version ready in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')s (port $port) in $DIR"
}

start_with_retries() {
    local attempt rc
    for attempt in 1 2 3; do
        rc=0
        (do_start) || rc=$?
        ((rc == 0)) && return 0
        ((rc == 98 && attempt < 3)) || return 1
        note "port collision (attempt $attempt); retrying with another port"
        rm -rf -- "${DIR:?}"/*
    done
    return 1
}

do_stop() {
    [[ -d $DIR ]] || { note "$DIR does not exist; nothing to stop"; return 0; }
    DIR=$(cd "$DIR" && pwd -P)
    [[ -d $DIR/run && -d $DIR/data ]] || die "$DIR does not look like an $PROG directory (no run/data); not touching it"
    kill_ours
    rm -rf -- "$DIR"
}

do_status() {
    DIR=$(cd "$DIR" && pwd -P)
    local pid
    pid=$(tr -dc '0-9' <"$DIR/run/s3rver.pid" 2>/dev/null || true)
    if [[ -n $pid ]] && pid_ours "$pid"; then echo "s3rver: running ($pid)"; return 0; fi
    echo "s3rver: not running"
    return 1
}

[[ $# -eq 2 ]] || usage
DIR=$2
[[ -n $DIR && $DIR != / ]] || usage
[[ $DIR =~ ^[A-Za-z0-9_./+-]+$ ]] || die "DIR '$DIR' must consist of letters, digits and _ . / + - only"
case $1 in
start) start_with_retries ;;
stop) do_stop ;;
status) do_status ;;
*) usage ;;
esac
