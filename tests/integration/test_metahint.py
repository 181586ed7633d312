"""Metadata hints (issue 13, doc/commit.md "Metadata hints"): an object that
ckptfs writes outside a manifest (a single file such as `latest`, a
symlink, a chmod'ed file) gets a zero-byte `D/.ckptfs-meta/NAME`, and a
reader with the default `-o object_meta=auto` HEADs only the objects named
there.  Counted request by request (tests/integration/faultproxy.py, and
the daemon's own request metrics from `ckptfs status --json`): `ls -l` of
objects written by boto3 makes no HEAD and shows the defaults; a mixed
directory HEADs exactly the hinted names and shows their modes and symlink
targets on a fresh mount; renames and `rm -r` leave nothing behind in the
bucket; a SIGKILL between the hint's PUT and the object's, or after the
object's, and lost replies of the hint's PUT end with the file showing its
mode."""

import os
import subprocess
import time

import pytest

from faultproxy import FaultProxy
from helpers import (ckptfs_status, ckptfs_sync, det_bytes, kill_ckptfs, pending_markers,
                     s3_get, s3_sizes, wait_for)
from test_restore import keys_of, mount_via, ops

HINTS = ".ckptfs-meta/"


@pytest.fixture
def proxy(s3server):
    with FaultProxy(s3server.endpoint, seed=13) as p:
        yield p


def head_requests(m):
    """HEAD requests the daemon of mount m made (its own metrics)."""
    s3m = ckptfs_status(m)["metrics"]["s3"]
    return sum(s3m.get("head", {}).get("requests", {}).values())


def ls_l(path):
    """{name: (mode string, size, mtime seconds, link target or None)}."""
    out = subprocess.run(["ls", "-l", "--time-style=+%s", str(path)], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    r = {}
    for ln in out.splitlines():
        if ln.startswith("total"):
            continue
        f = ln.split()
        target = None
        if " -> " in ln:
            name, target = ln.split(" -> ")
            name = name.split()[-1]
        else:
            name = f[-1]
        r[name] = (f[0], int(f[4]), int(f[5]), target)
    return r


def hint_keys(s3, bucket, prefix=""):
    return sorted(k for k in s3_sizes(s3, bucket, prefix) if f"/{HINTS}" in "/" + k)


@pytest.mark.timeout(120)
def test_ls_l_of_objects_written_by_another_tool_makes_no_head(s3server, bucket, mount,
                                                               proxy, tmp_path):
    """400 objects written by boto3 (no ckptfs metadata, no hints): ls -l,
    find -ls and stat with the default object_meta=auto cost the listing
    and no HEAD (the proxy's log and the daemon's metrics agree), and show
    the defaults: mode 0644, the listing's size and LastModified."""
    s3server.put_many_small(bucket, [(f"many/o-{i:04d}", b"z" * (i % 9 + 1))
                                     for i in range(400)])
    lm = s3server.head(bucket, "many/o-0011")["LastModified"].timestamp()
    m = mount_via(mount, s3server, bucket, proxy, tmp_path)
    start = len(proxy.requests_log)
    h0 = head_requests(m)
    got = ls_l(m / "many")
    assert len(got) == 400
    assert got["o-0011"][:2] == ("-rw-r--r--", 11 % 9 + 1), got["o-0011"]
    assert abs(got["o-0011"][2] - lm) <= 1
    for cmd in (["find", str(m / "many"), "-ls"],
                ["stat", *[str(m / "many" / f"o-{i:04d}") for i in range(0, 400, 9)]]):
        subprocess.run(cmd, capture_output=True, timeout=60, check=True)
    c = ops(proxy, start)
    assert c["HEAD"] == 0 and c["GET"] == 0, c
    assert c["LIST"] <= 4, c
    assert head_requests(m) - h0 == 0
    assert (m / "many" / "o-0003").read_bytes() == b"z" * 4


def write_mixed(s3server, bucket, w, d="run"):
    """boto3's objects in d, and beside them, through mount w: `latest`
    (mode 0600), a symlink, a boto3 object chmod'ed to 0640 (copied and
    written again with its metadata).  Returns the names ckptfs wrote."""
    s3server.put_many_small(bucket, [(f"{d}/o-{i:03d}", b"b" * (i % 5 + 1))
                                     for i in range(200)])
    fd = os.open(w / d / "latest", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    os.write(fd, b"ckpt-5\n")
    os.close(fd)
    os.symlink("ckpt-5", w / d / "last")
    os.chmod(w / d / "o-007", 0o640)
    ckptfs_sync(w)
    return {"latest", "last", "o-007"}


def assert_mixed(got):
    assert got["latest"][:2] == ("-rw-------", 7), got["latest"]
    assert got["last"][0].startswith("l") and got["last"][3] == "ckpt-5", got["last"]
    assert got["o-007"][:2] == ("-rw-r-----", 3), got["o-007"]
    assert got["o-008"][:2] == ("-rw-r--r--", 4), got["o-008"]


@pytest.mark.timeout(150)
def test_mixed_directory_heads_only_hinted_names(s3server, bucket, mount, proxy, tmp_path):
    """A directory of 200 boto3 objects plus three files ckptfs wrote
    outside any manifest: the bucket holds exactly their three hints; a
    fresh auto mount HEADs exactly those three objects, once each, and
    shows their modes and the symlink's target while the 197 neighbours
    show the defaults; object_meta=on (buckets from before hints) HEADs
    every object and shows the same; off HEADs none."""
    s3 = s3server.client()
    s3server.put(bucket, "run/")  # written by another tool: no manifest
    w = mount(bucket, options=[f"cache_dir={tmp_path / 'cache-w'}", "commit_delay=600"])
    names = write_mixed(s3server, bucket, w)
    assert hint_keys(s3, bucket) == sorted(f"run/{HINTS}{n}" for n in names)
    assert all(s3_sizes(s3, bucket, f"run/{HINTS}").get(f"run/{HINTS}{n}") == 0
               for n in names)

    r = mount_via(mount, s3server, bucket, proxy, tmp_path, name="auto")
    start = len(proxy.requests_log)
    h0 = head_requests(r)
    got = ls_l(r / "run")
    assert len(got) == 202
    assert_mixed(got)
    assert os.readlink(r / "run" / "last") == "ckpt-5"
    assert (r / "run" / "latest").read_bytes() == b"ckpt-5\n"
    heads = keys_of(proxy, start, "HEAD")
    assert sorted(heads) == sorted(f"/{bucket}/run/{n}" for n in names), heads
    assert head_requests(r) - h0 == 3
    c = ops(proxy, start)
    assert c["LIST"] <= 6, c  # the root, run/, run/.ckptfs-meta/ (and refreshes)

    on = mount_via(mount, s3server, bucket, proxy, tmp_path, "object_meta=on", name="on")
    start = len(proxy.requests_log)
    assert_mixed(ls_l(on / "run"))
    assert len(set(keys_of(proxy, start, "HEAD"))) >= 200
    off = mount_via(mount, s3server, bucket, proxy, tmp_path, "object_meta=off", name="off")
    start = len(proxy.requests_log)
    got = ls_l(off / "run")
    assert got["latest"][0] == "-rw-r--r--" and got["o-007"][0] == "-rw-r--r--"
    assert keys_of(proxy, start, "HEAD") == []


@pytest.mark.timeout(120)
def test_changes_keeping_the_bytes_reach_a_mount_that_read_them(s3server, bucket, mount,
                                                                tmp_path):
    """A symlink replaced by one to another target, and a chmod of a file
    whose bytes stay, are new versions with the same ETag (every empty
    object has the same one): a mount that has read the old metadata shows
    the new target and mode once its listing is refreshed, as a reader of
    Lightning's `last.ckpt` needs (test_frameworks' replay saw the old
    target for good)."""
    s3server.put(bucket, "run/")
    w = mount(bucket, options=[f"cache_dir={tmp_path / 'cache-w'}", "commit_delay=600"])
    os.symlink("ckpt-1", w / "run" / "last")
    (w / "run" / "state").write_bytes(b"same bytes\n")
    os.chmod(w / "run" / "state", 0o644)
    ckptfs_sync(w)
    r = fresh(mount, bucket, tmp_path, "r")
    assert os.readlink(r / "run" / "last") == "ckpt-1"
    assert oct(os.stat(r / "run" / "state").st_mode & 0o777) == oct(0o644)
    time.sleep(1.1)  # another LastModified second than the first versions
    os.remove(w / "run" / "last")
    os.symlink("ckpt-2", w / "run" / "last")
    os.chmod(w / "run" / "state", 0o600)
    ckptfs_sync(w)
    wait_for(lambda: os.readlink(r / "run" / "last") == "ckpt-2", 10,
             lambda: f"the reader still shows last -> {os.readlink(r / 'run' / 'last')}")
    wait_for(lambda: os.stat(r / "run" / "state").st_mode & 0o777 == 0o600, 10,
             lambda: f"the reader still shows mode {os.stat(r / 'run' / 'state').st_mode:o}")
    assert (r / "run" / "state").read_bytes() == b"same bytes\n"


def fresh(mount, bucket, tmp_path, name):
    return mount(bucket, options=[f"cache_dir={tmp_path / ('cache-' + name)}"],
                 mountpoint=_mp(tmp_path, name))


def _mp(tmp_path, name):
    p = tmp_path / f"mnt-{name}"
    p.mkdir(exist_ok=True)
    return p


@pytest.mark.timeout(180)
def test_renames_and_rm_r_leave_nothing_behind(s3server, bucket, mount, tmp_path):
    """Single-file rename: the new name gets a hint, the old one's goes.
    Directory rename: nothing is left under the old name, no hint is
    copied, and the new name's manifest keeps latest's mode and the
    symlink's target.  rm -r: nothing at all is left under the directory
    (no .ckptfs-meta/ keeping its prefix alive), and the name is gone on a
    fresh mount."""
    s3 = s3server.client()
    s3server.put(bucket, "d1/")  # written by another tool: no manifests
    s3server.put(bucket, "d3/")
    w = mount(bucket, options=[f"cache_dir={tmp_path / 'cache-w'}", "commit_delay=600"],
              mountpoint=_mp(tmp_path, "w"))
    write_mixed(s3server, bucket, w, "d1")
    os.rename(w / "d1" / "latest", w / "d1" / "newest")
    ckptfs_sync(w)
    assert hint_keys(s3, bucket) == sorted(f"d1/{HINTS}{n}" for n in ("newest", "last",
                                                                         "o-007"))
    r = fresh(mount, bucket, tmp_path, "r1")
    got = ls_l(r / "d1")
    assert "latest" not in got and got["newest"][:2] == ("-rw-------", 7), got.get("newest")
    assert r.unmount() == []

    os.rename(w / "d1", w / "d2")
    ckptfs_sync(w)
    keys = s3_sizes(s3, bucket)
    assert not [k for k in keys if k.startswith("d1/")], [k for k in keys if "d1/" in k][:5]
    assert hint_keys(s3, bucket) == [], "hints copied: the new name's manifest governs"
    assert not pending_markers(s3, bucket)
    r = fresh(mount, bucket, tmp_path, "r2")
    assert "d1" not in os.listdir(r)
    got = ls_l(r / "d2")
    assert len(got) == 202
    assert got["newest"][:2] == ("-rw-------", 7), got["newest"]
    assert got["last"][3] == "ckpt-5" and got["o-007"][0] == "-rw-r-----", got
    assert got["o-008"][0] == "-rw-r--r--"
    assert r.unmount() == []

    # a directory with hints, deleted whole
    s3server.put_many_small(bucket, [(f"d3/x-{i}", b"x") for i in range(20)])
    fd = os.open(w / "d3" / "latest", os.O_CREAT | os.O_WRONLY, 0o600)
    os.write(fd, b"1")
    os.close(fd)
    ckptfs_sync(w)
    assert f"d3/{HINTS}latest" in s3_sizes(s3, bucket, "d3/")
    subprocess.run(["rm", "-r", str(w / "d2"), str(w / "d3")], check=True, timeout=120)
    ckptfs_sync(w)
    left = sorted(s3_sizes(s3, bucket))
    assert left == [], left
    r = fresh(mount, bucket, tmp_path, "r3")
    assert os.listdir(r) == []


def put_latest(w, body=b"ckpt-7\n"):
    fd = os.open(w / "latest", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    os.write(fd, body)
    os.close(fd)


@pytest.mark.timeout(150)
@pytest.mark.parametrize("point", ["hint_stored", "object_stored"])
def test_sigkill_between_hint_and_object(s3server, bucket, mount, tmp_path, point):
    """The single-file commit of `latest` (mode 0600) beside boto3 objects,
    ckptfs SIGKILLed with the hint stored and the object's PUT stalled
    before the server (hint_stored), or with the object stored and its
    reply never delivered (object_stored).  After a remount on the same
    cache directory and `ckptfs sync`, a fresh mount shows latest with its
    mode and bytes, and HEADs only latest."""
    s3 = s3server.client()
    s3server.put_many_small(bucket, [(f"o-{i}", b"o") for i in range(30)])
    cdir = tmp_path / "cache-w"
    action = "stall_before" if point == "hint_stored" else "stall_after"
    with FaultProxy(s3server.endpoint, seed=3) as p:
        w = mount_via(mount, s3server, bucket, p, tmp_path, name="w", cache=cdir)
        p.rule(action, method="PUT", path_re=rf"^/{bucket}/latest$")
        put_latest(w)
        wait_for(lambda: p.stats[action] == 1, 30, "the object's PUT held at the proxy")
        if point == "object_stored":
            wait_for(lambda: "latest" in s3_sizes(s3, bucket), 30, "the object stored")
        time.sleep(0.5)
        keys = s3_sizes(s3, bucket)
        assert f"{HINTS}latest" in keys, "the hint goes before the object"
        assert ("latest" in keys) == (point == "object_stored"), sorted(keys)[:5]
        kill_ckptfs(w)
    w2 = mount(bucket, options=[f"cache_dir={cdir}", "commit_delay=600"],
               mountpoint=_mp(tmp_path, "w"))
    ckptfs_sync(w2)
    assert s3_get(s3, bucket, "latest") == b"ckpt-7\n"
    assert hint_keys(s3, bucket) == [f"{HINTS}latest"]
    with FaultProxy(s3server.endpoint, seed=4) as p2:
        r = mount_via(mount, s3server, bucket, p2, tmp_path, name="r")
        start = len(p2.requests_log)
        got = ls_l(r)
        assert got["latest"][:2] == ("-rw-------", 7), got["latest"]
        assert got["o-3"][0] == "-rw-r--r--"
        assert keys_of(p2, start, "HEAD") == [f"/{bucket}/latest"]
        assert r.unmount() == []


@pytest.mark.timeout(150)
@pytest.mark.parametrize("action", ["503", "reset_after", "stall_after"])
def test_faults_on_the_hint_put(s3server, bucket, mount, tmp_path, action):
    """The hint's PUT answered 503 (nothing done), or done by the server
    with its reply lost (reset, or never answered): the commit retries,
    `ckptfs sync` returns, the bucket holds latest and its hint, and a
    fresh mount shows latest's mode."""
    s3 = s3server.client()
    with FaultProxy(s3server.endpoint, seed=5) as p:
        more = ["first_byte_timeout=1", "retry_max_delay=1"] if action == "stall_after" else []
        w = mount_via(mount, s3server, bucket, p, tmp_path, *more, name="w")
        p.rule(action, method="PUT", path_re=rf"^/{bucket}/\.ckptfs-meta/latest$")
        put_latest(w)
        ckptfs_sync(w)
        assert p.stats[action] == 1, p.describe()
        p.reset_stalled()
        assert w.unmount() == []
    assert s3_get(s3, bucket, "latest") == b"ckpt-7\n"
    assert s3_sizes(s3, bucket) == {"latest": 7, f"{HINTS}latest": 0}
    r = fresh(mount, bucket, tmp_path, "r")
    assert ls_l(r)["latest"][:2] == ("-rw-------", 7)
    assert (r / "latest").read_bytes() == b"ckpt-7\n"
