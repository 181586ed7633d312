# shellcheck shell=bash
# What read-bench.sh and write-bench.sh share: a clean environment, private
# AWS config files, their own Ceph RGW and its credentials, and the pieces
# of their clean-up.  Sourced (not run) right after a script sets PROG,
# SELF_DIR and REPO.  Functions use the script's WORK (scratch directory),
# RGW_DIR, DAEMONS (mount point -> daemon pid), KEEP and T_START.

RGW_SH=$REPO/tests/s3server/rgw.sh

die() { echo "$PROG: error: $*" >&2; exit 1; }
note() { echo "$PROG: $*" >&2; }
progress() { printf '%s: [%4ds] %s\n' "$PROG" $((SECONDS - T_START)) "$*" >&2; }

# bench_clean_env: the machine's CA/proxy settings break rclone and must not
# leak into any tool; neither may its AWS profile or endpoint.
bench_clean_env() {
    unset AWS_CA_BUNDLE CURL_CA_BUNDLE REQUESTS_CA_BUNDLE SSL_CERT_FILE SSL_CERT_DIR \
        NODE_EXTRA_CA_CERTS http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy \
        ALL_PROXY no_proxy NO_PROXY AWS_PROFILE AWS_DEFAULT_PROFILE AWS_SESSION_TOKEN \
        AWS_ENDPOINT_URL RCLONE_CONFIG 2>/dev/null || true
    export LC_ALL=C
}

# bench_aws_env REGION [CONFIG_LINES]: HOME and the AWS config files inside
# $WORK (never ~/.aws of the machine); CONFIG_LINES go into [default] after
# the region.
bench_aws_env() {
    mkdir -p "$WORK"/{aws,home}
    export HOME=$WORK/home
    export AWS_CONFIG_FILE=$WORK/aws/config AWS_SHARED_CREDENTIALS_FILE=$WORK/aws/credentials
    export AWS_EC2_METADATA_DISABLED=true AWS_REQUEST_CHECKSUM_CALCULATION=when_required
    export AWS_RESPONSE_CHECKSUM_VALIDATION=when_required AWS_DEFAULT_REGION=$1
    printf '[default]\nregion = %s\n%s' "$1" "${2:-}" >"$AWS_CONFIG_FILE"
    : >"$AWS_SHARED_CREDENTIALS_FILE"
}

# bench_rgw_start MEMSTORE_BYTES: a Ceph RGW in $WORK/rgw without
# compression (it would cost server CPU).  Sets RGW_DIR, S3_ENDPOINT,
# S3_ACCESS_KEY and S3_SECRET_KEY, exports the keys as AWS_ACCESS_KEY_ID /
# AWS_SECRET_ACCESS_KEY and writes them to S3FS_PASSWD for s3fs.
bench_rgw_start() {
    progress "starting Ceph RGW (memstore $(($1 >> 20)) MiB, no compression)"
    RGW_DIR=$WORK/rgw
    RGW_COMPRESSION=none RGW_MEMSTORE_BYTES=$1 bash "$RGW_SH" start "$RGW_DIR" \
        >"$WORK/log/rgw-start.log" 2>&1 || { tail -n 30 "$WORK/log/rgw-start.log" >&2; die "the S3 server did not start"; }
    S3_ENDPOINT=$(sed -n 's/^S3_ENDPOINT=//p' "$RGW_DIR/env")
    S3_ACCESS_KEY=$(sed -n 's/^S3_ACCESS_KEY=//p' "$RGW_DIR/env")
    S3_SECRET_KEY=$(sed -n 's/^S3_SECRET_KEY=//p' "$RGW_DIR/env")
    [[ -n $S3_ENDPOINT && -n $S3_ACCESS_KEY && -n $S3_SECRET_KEY ]] || die "no endpoint/keys in $RGW_DIR/env"
    export AWS_ACCESS_KEY_ID=$S3_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET_KEY
    S3FS_PASSWD=$WORK/s3fs.passwd
    (umask 077 && echo "$S3_ACCESS_KEY:$S3_SECRET_KEY" >"$S3FS_PASSWD")
}

kill_wait() { # kill_wait PID: TERM, wait up to 10 s, then KILL
    local pid=$1 i
    kill -TERM "$pid" 2>/dev/null || return 0
    for ((i = 0; i < 100; i++)); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
}

is_mounted() { awk -v m="$1" '$5 == m {f = 1} END {exit !f}' /proc/self/mountinfo; }

# bench_unmount_all SECONDS: unmount every mount of DAEMONS (fusermount3 -u
# given SECONDS, else lazily) and stop its daemon.
bench_unmount_all() {
    local m
    for m in "${!DAEMONS[@]}"; do
        if is_mounted "$m"; then
            timeout "$1" fusermount3 -u "$m" 2>/dev/null || fusermount3 -uz "$m" 2>/dev/null
        fi
        kill_wait "${DAEMONS[$m]}"
    done
}

# bench_remove_work: stop the RGW, then remove $WORK (or say where it was
# kept, with KEEP=1); never rm through a live mount.
bench_remove_work() {
    local m
    if [[ -n $RGW_DIR && -d $RGW_DIR ]]; then
        bash "$RGW_SH" stop "$RGW_DIR" >/dev/null 2>&1 || note "could not stop the S3 server in $RGW_DIR"
    fi
    if [[ -n $WORK && -d $WORK ]]; then
        for m in "${!DAEMONS[@]}"; do is_mounted "$m" && fusermount3 -uz "$m" 2>/dev/null; done
        if ((KEEP)); then note "scratch directory kept: $WORK"
        else rm -rf --one-file-system -- "$WORK"; fi
    fi
}
