#!/bin/bash
# Throwaway Ceph cluster (1 mon, 1 memstore OSD, no mgr) + radosgw (beast) on
# 127.0.0.1, everything inside one directory.  See shared/S3-TEST-SERVER.md.
#
#   rgw.sh start DIR   bring it up; prints S3_ENDPOINT=, S3_ACCESS_KEY=,
#                      S3_SECRET_KEY=, ... lines (also written to DIR/env)
#   rgw.sh stop DIR    kill exactly this cluster's daemons, remove DIR
#   rgw.sh status DIR  exit 0 if all daemons of DIR are alive
#
# Environment knobs:
#   RGW_MEMSTORE_BYTES  OSD capacity (memstore allocates RAM only for what is
#                       stored; default 3 GiB, shrunk to fit free RAM)
#   RGW_START_TIMEOUT   seconds to wait for the S3 endpoint (default 60)
#   RGW_COMPRESSION     server-side compression of the default placement:
#                       zstd (default: a patterned 4 GiB object then costs a few
#                       MiB of RAM), zlib, snappy, lz4 or none (benchmarks)
#   RGW_ACCESS_KEY / RGW_SECRET_KEY  the S3 user's keys (fixed defaults)
#   RGW_STS=1           enable RGW's STS (rgw sts key, rgw s3 auth use sts)
#                       and give the user the user-policy cap, so that
#                       GetSessionToken hands out real temporary keys once
#                       a user policy allows it.  It changes RGW's answer to
#                       a wrong key or secret to AccessDenied, so it is off
#                       by default.
#
# Ports are chosen free at random in 20000-32767 (below the ephemeral range,
# above the OSD's 6800-7300), so several clusters can run side by side.
set -euo pipefail

PROG=rgw.sh
ACCESS_KEY=${RGW_ACCESS_KEY:-ckptfs-test-access}
SECRET_KEY=${RGW_SECRET_KEY:-ckptfs-test-secret-0123456789abcdef}
START_TIMEOUT=${RGW_START_TIMEOUT:-60}
COMPRESSION=${RGW_COMPRESSION:-zstd}
RGW_ID=s3
STS=${RGW_STS:-0}
STS_CAPS=
if [[ $STS == 1 ]]; then STS_CAPS=--caps=user-policy=*; fi
PY=/usr/bin/python3

# The machine's CA/proxy settings must not influence the cluster or our probes.
unset AWS_CA_BUNDLE CURL_CA_BUNDLE REQUESTS_CA_BUNDLE SSL_CERT_FILE SSL_CERT_DIR \
      http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY \
      CEPH_CONF CEPH_ARGS CEPH_KEYRING 2>/dev/null || true

die() { echo "$PROG: error: $*" >&2; exit 1; }
note() { echo "$PROG: $*" >&2; }

usage() {
    echo "usage: $PROG start|stop|status DIR" >&2
    exit 2
}

# ---------------------------------------------------------------- helpers --

# Print N distinct ports that are free now on 127.0.0.1 (tcp).
free_ports() {
    "$PY" - "$1" <<'EOF'
import random, socket, sys
n = int(sys.argv[1])
held, ports = [], []
rng = random.SystemRandom()
while len(ports) < n:
    p = rng.randint(20000, 32767)
    if p in ports or 6800 <= p <= 7300:
        continue
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        s.close()
        continue
    held.append(s)
    ports.append(p)
print(" ".join(map(str, ports)))
EOF
}

# write_keyring FILE RGW_ID: fresh cephx keys for mon., client.admin, osd.0
# and client.rgw.ID with their caps.
write_keyring() {
    "$PY" - "$1" "$2" <<'EOF'
import base64, os, struct, sys, time
path, rgw = sys.argv[1], sys.argv[2]
def key():
    # CryptoKey encoding: type AES (1), created (sec, nsec), length, secret.
    return base64.b64encode(struct.pack("<HIIH", 1, int(time.time()), 0, 16) + os.urandom(16)).decode()
ents = [
    ("mon.", {"mon": "allow *"}),
    ("client.admin", {"mon": "allow *", "osd": "allow *", "mds": "allow *", "mgr": "allow *"}),
    ("osd.0", {"mon": "allow profile osd", "mgr": "allow profile osd", "osd": "allow *"}),
    ("client.rgw." + rgw, {"mon": "allow rw", "osd": "allow rwx", "mgr": "allow rw"}),
]
with open(path, "w") as f:
    os.fchmod(f.fileno(), 0o600)
    for name, caps in ents:
        f.write("[%s]\n\tkey = %s\n" % (name, key()))
        for k, v in caps.items():
            f.write('\tcaps %s = "%s"\n' % (k, v))
EOF
}

# pid_ours PID: true if PID is alive (not a zombie) and its cmdline names our conf.
pid_ours() {
    local pid=$1 cmd state
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    [[ -r /proc/$pid/cmdline ]] || return 1
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
    [[ $state != Z && $state != X ]] || return 1
    cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
    [[ $cmd == *" -c $CONF "* || $cmd == *" -c $CONF" || $cmd == *"--conf $CONF"* ]]
}

# kill_ours: SIGKILL every daemon of this DIR (throwaway data: no clean
# shutdown, which for memstore would write the whole store to disk), wait.
kill_ours() {
    local f pid pids=()
    for f in "$DIR"/run/*.pid; do
        [[ -e $f ]] || continue
        pid=$(tr -dc '0-9' <"$f" 2>/dev/null || true)
        if [[ -n $pid ]] && pid_ours "$pid"; then
            kill -KILL "$pid" 2>/dev/null || true
            pids+=("$pid")
        fi
    done
    # Daemons we started but whose pid file is not written yet.
    for f in "$DIR"/run/*.spawn; do
        [[ -e $f ]] || continue
        pid=$(tr -dc '0-9' <"$f" 2>/dev/null || true)
        if [[ -n $pid ]] && pid_ours "$pid"; then
            kill -KILL "$pid" 2>/dev/null || true
            pids+=("$pid")
        fi
    done
    local deadline=$((SECONDS + 10))
    for pid in "${pids[@]}"; do
        while pid_ours "$pid"; do
            ((SECONDS < deadline)) || { note "pid $pid did not exit"; break; }
            sleep 0.05
        done
    done
}

logs_tail() {
    local f
    for f in "$DIR"/log/*; do
        [[ -s $f ]] || continue
        echo "----- tail of $f -----" >&2
        tail -n 20 "$f" >&2
    done
}

fail_start() {
    echo "$PROG: error: $*" >&2
    logs_tail
    kill_ours
    echo "$PROG: start failed; logs kept in $DIR/log (run '$PROG stop $DIR' to remove)" >&2
    exit 1
}

ceph_cli() {
    timeout 30 ceph -c "$CONF" --connect-timeout 20 "$@"
}

# spawn NAME CMD...: start a ceph daemon in the foreground mode (-f) as a
# background job in its own session, stdio to DIR/log/NAME.out.
spawn() {
    local name=$1; shift
    setsid "$@" -f </dev/null >>"$DIR/log/$name.out" 2>&1 &
    echo $! >"$DIR/run/$name.spawn"
    disown $! 2>/dev/null || true
}

# -------------------------------------------------------------------- start --

wait_s3() {
    local url=$1 deadline=$((SECONDS + START_TIMEOUT)) code f pid
    while :; do
        code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$url/" 2>/dev/null || true)
        [[ $code == 200 ]] && return 0
        for f in "$DIR"/run/*.spawn; do
            pid=$(<"$f")
            kill -0 "$pid" 2>/dev/null ||
                fail_start "$(basename "$f" .spawn) exited during start-up"
        done
        ((SECONDS < deadline)) || fail_start "S3 endpoint $url not answering after ${START_TIMEOUT}s (last HTTP code '$code')"
        sleep 0.05
    done
}


do_start() {
    local t0
    t0=$(date +%s.%N)
    if [[ -e $DIR ]]; then
        [[ -d $DIR ]] || die "$DIR exists and is not a directory"
        [[ -z $(ls -A "$DIR") ]] || die "$DIR is not empty"
    fi
    for b in ceph-mon ceph-osd radosgw ceph ceph-authtool monmaptool radosgw-admin curl uuidgen; do
        command -v "$b" >/dev/null || die "$b not found (apt-get install ceph-mon ceph-osd radosgw ceph-common curl uuid-runtime)"
    done
    mkdir -p "$DIR"
    DIR=$(cd "$DIR" && pwd -P)
    CONF=$DIR/ceph.conf
    mkdir -p "$DIR"/{run,log,mon,osd/ceph-0,rgw,crash}

    # Capacity: memstore takes RAM only for stored data; keep the cap within
    # what the machine has free.
    local want=${RGW_MEMSTORE_BYTES:-$((3 * 1024 * 1024 * 1024))}
    local avail_kb
    avail_kb=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
    local avail=$((avail_kb * 1024))
    if ((avail < 768 * 1024 * 1024)); then
        die "only $((avail >> 20)) MiB of memory available; need at least 768 MiB"
    fi
    local cap=$want
    if ((cap > avail - 512 * 1024 * 1024)); then
        cap=$(((avail - 512 * 1024 * 1024) / 2))
        note "memstore capacity lowered to $((cap >> 20)) MiB (MemAvailable $((avail >> 20)) MiB)"
    fi

    local ports p1 p2 prgw
    ports=$(free_ports 3) || die "cannot find free ports"
    read -r p1 p2 prgw <<<"$ports"

    local fsid
    fsid=$(uuidgen)
    cat >"$CONF" <<EOF
# generated by $PROG for a throwaway test cluster
[global]
fsid = $fsid
mon host = [v2:127.0.0.1:$p2,v1:127.0.0.1:$p1]
mon initial members = a
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind ipv6 = false
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
keyring = $DIR/keyring
run dir = $DIR/run
pid file = $DIR/run/\$name.pid
admin socket = $DIR/run/\$name.asok
log file = $DIR/log/\$name.log
log to stderr = false
err to stderr = false
log to syslog = false
mon cluster log file = $DIR/log/cluster.log
mon cluster log to syslog = false
crash dir = $DIR/crash
exporter sock dir = $DIR/run
mon data = $DIR/mon/\$cluster-\$id
osd data = $DIR/osd/\$cluster-\$id
rgw data = $DIR/rgw/\$cluster-\$id
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
mon max pg per osd = 1000
mon_osd_full_ratio = 0.99
mon_osd_backfillfull_ratio = 0.99
mon_osd_nearfull_ratio = 0.99
osd failsafe full ratio = 0.995
debug ms = 0
debug monc = 0

[mon]
paxos propose interval = 0.01
paxos min wait = 0.001
mon data avail crit = 0
mon data avail warn = 0
mon osd report timeout = 900

[osd]
osd objectstore = memstore
memstore device bytes = $cap
osd max object size = 134217728
osd op num threads per shard = 1
osd op num shards = 2
osd crush update on start = true

[client.rgw.$RGW_ID]
rgw frontends = beast endpoint=127.0.0.1:$prgw
rgw thread pool size = 64
rgw dns name = 127.0.0.1
rgw enable usage log = false
rgw gc obj min wait = 0
rgw gc processor period = 5
rgw gc processor max time = 5
rgw lc debug interval = 10
rgw relaxed s3 bucket names = false
rgw max put size = 5368709120
EOF
    # Temporary credentials (GetSessionToken) for the credential tests.
    if [[ $STS == 1 ]]; then
        cat >>"$CONF" <<EOF
rgw sts key = ckptfs-sts-key16
rgw s3 auth use sts = true
EOF
    fi

    # Keys (one keyring for every daemon; ceph-authtool per key costs 0.15 s).
    write_keyring "$DIR/keyring" "$RGW_ID" || fail_start "cannot write keyring"
    local kr=$DIR/keyring

    monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$p2,v1:127.0.0.1:$p1]" \
        "$DIR/monmap" >>"$DIR/log/setup.out" 2>&1 || fail_start "monmaptool failed"
    ceph-mon -c "$CONF" --mkfs -i a --monmap "$DIR/monmap" --keyring "$kr" \
        >>"$DIR/log/setup.out" 2>&1 || fail_start "ceph-mon --mkfs failed"
    spawn mon.a ceph-mon -c "$CONF" -i a

    # OSD: make its store while the monitor starts.
    local osd_uuid
    osd_uuid=$(uuidgen)
    ceph-osd -c "$CONF" -i 0 --mkfs --osd-uuid "$osd_uuid" --keyring "$kr" \
        >>"$DIR/log/osd-mkfs.out" 2>&1 &
    local mkfs_pid=$! id
    id=$(ceph_cli osd new "$osd_uuid" 0 2>>"$DIR/log/setup.out") ||
        fail_start "'ceph osd new' failed (monitor not reachable?)"
    [[ $id == 0 ]] || fail_start "'ceph osd new' returned id '$id', expected 0"
    wait "$mkfs_pid" || fail_start "ceph-osd --mkfs failed"
    spawn osd.0 ceph-osd -c "$CONF" -i 0

    # The S3 user.  The first radosgw-admin call that opens the store also
    # creates the default zonegroup, zone and pools (waiting for the OSD).
    timeout 30 radosgw-admin -c "$CONF" -n client.admin user create --uid=ckptfs-test \
        --display-name="ckptfs test" --access-key="$ACCESS_KEY" --secret-key="$SECRET_KEY" \
        ${STS_CAPS:+"$STS_CAPS"} \
        >>"$DIR/log/radosgw-admin.out" 2>&1 || fail_start "radosgw-admin user create failed"

    # Server-side compression for the default placement, set before radosgw
    # starts (it reads the zone once).  A patterned test object of many GiB
    # then costs little memory; incompressible data is stored as is.
    if [[ $COMPRESSION != none ]]; then
        timeout 30 radosgw-admin -c "$CONF" -n client.admin zone placement modify \
            --rgw-zone=default --placement-id=default-placement \
            --compression="$COMPRESSION" >>"$DIR/log/radosgw-admin.out" 2>&1 ||
            fail_start "radosgw-admin zone placement modify --compression=$COMPRESSION failed"
    fi

    spawn "client.rgw.$RGW_ID" radosgw -c "$CONF" -n "client.rgw.$RGW_ID"
    local url=http://127.0.0.1:$prgw
    wait_s3 "$url"

    # Pid files: the daemons write theirs at start; make sure they exist.
    for n in mon.a osd.0 "client.rgw.$RGW_ID"; do
        local spid
        spid=$(<"$DIR/run/$n.spawn")
        [[ -s $DIR/run/$n.pid ]] || echo "$spid" >"$DIR/run/$n.pid"
    done

    cat >"$DIR/env" <<EOF
S3_ENDPOINT=$url
S3_ACCESS_KEY=$ACCESS_KEY
S3_SECRET_KEY=$SECRET_KEY
S3_REGION=us-east-1
S3_CAPACITY_BYTES=$cap
S3_COMPRESSION=$COMPRESSION
CEPH_CONF_FILE=$CONF
EOF
    cat "$DIR/env"
    note "ready in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')s (mon $p2/$p1, rgw $prgw) in $DIR"
}

# --------------------------------------------------------------------- stop --

do_stop() {
    [[ -d $DIR ]] || { note "$DIR does not exist; nothing to stop"; return 0; }
    DIR=$(cd "$DIR" && pwd -P)
    CONF=$DIR/ceph.conf
    [[ -f $CONF && -d $DIR/run ]] || die "$DIR does not look like an $PROG directory (no ceph.conf/run); not touching it"
    kill_ours
    rm -rf -- "$DIR"
}

do_status() {
    DIR=$(cd "$DIR" && pwd -P)
    CONF=$DIR/ceph.conf
    local f pid ok=0
    for f in "$DIR"/run/*.pid; do
        [[ -e $f ]] || { echo "no pid files"; return 1; }
        pid=$(tr -dc '0-9' <"$f")
        if pid_ours "$pid"; then echo "$(basename "$f" .pid): running ($pid)"
        else echo "$(basename "$f" .pid): not running"; ok=1; fi
    done
    return $ok
}

# A port picked free can be taken by someone else before our daemon binds it:
# retry the whole start with new ports when a log says so.
start_with_retries() {
    local attempt d
    for attempt in 1 2 3; do
        (do_start) && return 0
        d=$(cd "$DIR" 2>/dev/null && pwd -P) || return 1
        [[ -d $d/log ]] && grep -qs "Address already in use" "$d"/log/* || return 1
        ((attempt < 3)) || return 1
        note "port collision (attempt $attempt); retrying with other ports"
        rm -rf -- "${d:?}"/*
    done
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
