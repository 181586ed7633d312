"""Warm and hot reads of checkpoint directories, and the per-entry costs
of `ls -l` (issue 13): a directory read again from the cache makes no S3
request while its listing is fresh (also after the kernel forgot the
directory), and only LISTs to revalidate it after that; a path walk past
the listings' lifetime waits for the LIST of the file's own directory
only; a file replaced remotely is still seen within the documented
timeouts although this process keeps its cache entries after the last
close (doc/cache.md, "Idle entries"); another mount sharing the cache gets
the room those entries hold when it needs it, never the room of a file a
reader holds open, also after the keeping mount was SIGKILLed; a
directory read file after file is listed again before its listing
expires, so no open waits for a LIST; `ls -l` learns from ENOTSUP that
the mount has no SELinux labels or ACLs and stops asking for them.
Timings are bench/restore-bench.py's job."""

import contextlib
import errno
import os
import shutil
import signal
import subprocess
import time
from urllib.parse import parse_qs

import pytest

from faultproxy import FaultProxy
from helpers import (cache_file_of, cache_files, ckptfs_status, det_bytes, sha256_bytes,
                     sha256_file, wait_until)

KiB = 1 << 10
MiB = 1 << 20
PART = "part_size=1M"


@pytest.fixture
def cdir(tmp_path):
    return tmp_path / "cache"


def s3_requests(m):
    """Every S3 request the mount's daemon made so far, by operation."""
    out = {}
    for op, v in ckptfs_status(m)["metrics"]["s3"].items():
        if isinstance(v, dict) and "requests" in v:
            out[op] = sum(v["requests"].values())
    return out


def delta(after, before):
    return {k: after.get(k, 0) - before.get(k, 0) for k in after
            if after.get(k, 0) != before.get(k, 0)}


def wait_idle(m, timeout=30):
    last = {}

    def idle():
        last["s"] = ckptfs_status(m)
        return last["s"]["downloads"]["active"] == 0
    assert wait_until(idle, timeout), f"downloads still active: {last.get('s')}"
    return last["s"]


def cat_tree(d, names):
    """cat each file (the program, in name order, one process): what a
    restore does; returns {name: sha256} of what cat printed."""
    out = subprocess.run(["cat", *[str(d / n) for n in names]], capture_output=True,
                         timeout=120, check=True).stdout
    got, at = {}, 0
    for n in names:
        size = (d / n).stat().st_size
        got[n] = sha256_bytes(out[at:at + size])
        at += size
    assert at == len(out), (at, len(out))
    return got


def put_dir(s3server, bucket, prefix, sizes, seed):
    bodies = {f"shard-{i:03d}.bin": det_bytes(seed + i, s) for i, s in enumerate(sizes)}
    s3server.put_many(bucket, [(f"{prefix}/{k}", v) for k, v in bodies.items()])
    return bodies


@contextlib.contextmanager
def slow_listing_mount(s3server, bucket, mount, cdir, name, seed, timeout_s, silent=None):
    """A mount whose requests go through a FaultProxy on which every LIST
    takes 0.4 s, with dir/attr/entry timeouts of timeout_s; a LIST whose
    prefix is in the set `silent` (changed by the caller as it goes) gets
    no answer for 8 s, a connection gone silent.  Yields (proxy, mount)."""
    silent = set() if silent is None else silent

    def slow_list(method, path, query, headers):
        if method == "GET" and "list-type" in query:
            prefix = parse_qs(query).get("prefix", [""])[0]
            time.sleep(8 if prefix in silent else 0.4)
        return None
    with FaultProxy(s3server.endpoint, seed=seed, inspect=slow_list) as proxy:
        mp = cdir.parent / name
        mp.mkdir(exist_ok=True)
        argv = mount.argv(bucket, "", mp, [f"cache_dir={cdir}", f"dir_timeout={timeout_s}",
                                           f"attr_timeout={timeout_s}",
                                           f"entry_timeout={timeout_s}"],
                          endpoint=False)
        argv += ["--endpoint", proxy.endpoint, "--region", s3server.region]
        yield proxy, mount(bucket, argv=argv, mountpoint=mp)


@pytest.mark.timeout(120)
def test_warm_and_hot_rereads_make_no_request(s3server, bucket, mount, cdir):
    """A directory of 40 small files and 2 of 9 MiB read with cat: read
    again while its listing is fresh, it costs no S3 request at all, with
    the page cache kept (hot) or dropped (warm: the kernel also forgot the
    directory, whose listing comes back as fresh as it was), and every
    byte is right; after the timeouts have passed, only LISTs revalidate
    it."""
    bodies = put_dir(s3server, bucket, "ckpt", [256 * KiB + i for i in range(40)]
                     + [9 * MiB, 9 * MiB + 7], seed=500)
    names = sorted(bodies)
    want = {n: sha256_bytes(b) for n, b in bodies.items()}
    m = mount(bucket, options=[f"cache_dir={cdir}", PART, "dir_timeout=30",
                               "attr_timeout=30", "entry_timeout=30"])
    d = m / "ckpt"
    assert cat_tree(d, names) == want
    wait_idle(m)
    time.sleep(1.5)  # past the second closed entries used to be kept
    for i in range(2):
        dropped = i == 0 and os.geteuid() == 0
        if dropped:  # warm: the page cache (and the kernel's inodes) dropped
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
        before = s3_requests(m)
        assert cat_tree(d, names) == want
        made = delta(s3_requests(m), before)
        assert made == {}, f"a {'warm' if dropped else 'hot'} re-read made S3 requests: {made}"
    s = ckptfs_status(m)
    assert s["cache"]["uncached_opens"] == 0, s["cache"]
    assert s["downloads"]["downloaded_bytes"] == sum(map(len, bodies.values())), s

    m2 = mount(bucket, options=[f"cache_dir={cdir}-2", PART])  # 1 s timeouts
    d2 = m2 / "ckpt"
    assert cat_tree(d2, names) == want
    wait_idle(m2)
    time.sleep(1.6)
    before = s3_requests(m2)
    assert cat_tree(d2, names) == want
    made = delta(s3_requests(m2), before)
    assert set(made) <= {"list"} and made.get("list", 0) <= 4, \
        f"a warm read past the timeouts made {made} (one LIST per directory expected)"


@pytest.mark.timeout(120)
def test_replaced_remotely_is_seen_after_the_timeouts(s3server, bucket, mount, cdir):
    """Files read (and kept by this process after their close) are replaced
    remotely, one longer and one shorter: within dir_timeout + attr_timeout
    + 0.6 s a cat shows the new bytes, and a hot re-read of the new
    version is byte-exact too."""
    old = put_dir(s3server, bucket, "d", [300 * KiB, 2 * MiB + 5], seed=600)
    names = sorted(old)
    m = mount(bucket, options=[f"cache_dir={cdir}", PART])
    d = m / "d"
    assert cat_tree(d, names) == {n: sha256_bytes(b) for n, b in old.items()}
    wait_idle(m)
    new = {names[0]: det_bytes(611, 300 * KiB + 4097), names[1]: det_bytes(612, MiB + 1)}
    s3server.put_many(bucket, [(f"d/{k}", v) for k, v in new.items()])
    time.sleep(1.6)
    for _ in range(2):
        assert cat_tree(d, names) == {n: sha256_bytes(b) for n, b in new.items()}
        assert [(d / n).stat().st_size for n in names] == [len(new[n]) for n in names]


@pytest.mark.timeout(150)
@pytest.mark.parametrize("keeper_end", ["alive", "sigkill"])
def test_another_mount_gets_the_room_of_kept_entries(s3server, bucket, mount, cdir,
                                                     keeper_end):
    """cache_size=6M shared by two mounts.  m1 reads four 1 MiB files and
    closes them (it keeps them, pinned, after the close) and holds a fifth
    open; its status counts only the held one as pinned.  m2 then reads
    four other 1 MiB files one after another: each must be cached (no
    uncached read), which needs m1's closed files evicted (m1 alive: m2
    asks it for them; m1 SIGKILLed: its pins are reaped), never the held
    one, whose reader reads it to the end byte-exact."""
    a = put_dir(s3server, bucket, "a", [MiB + i for i in range(4)], seed=700)
    held = det_bytes(720, MiB + 99)
    s3server.put(bucket, "held.bin", held)
    b = put_dir(s3server, bucket, "b", [MiB + 10 + i for i in range(4)], seed=730)
    opts = [f"cache_dir={cdir}", PART, "cache_size=6M", "dir_readahead=0"]
    m1 = mount(bucket, options=opts)
    m2 = mount(bucket, options=opts)
    f = open(m1 / "held.bin", "rb")
    try:
        assert f.read(4096) == held[:4096]
        for n in sorted(a):
            assert sha256_file(m1 / "a" / n) == sha256_bytes(a[n]), n
        s = wait_idle(m1)
        fh = cache_file_of(s3server, cdir, bucket, "held.bin")
        assert fh is not None, sorted(cache_files(cdir))
        ino = fh.stat().st_ino
        assert wait_until(lambda: ckptfs_status(m1)["cache"]["pinned_bytes"] == len(held),
                          10), ckptfs_status(m1)["cache"]
        if keeper_end == "sigkill":
            m1.expect_clean_exit = False
            for pid in m1.pids():
                os.kill(pid, signal.SIGKILL)
            m1.proc.wait(30)
            f, dead = None, f
            try:
                dead.close()
            except OSError:  # ENOTCONN: its mount is gone
                pass
            m1.unmount()  # a dead mount: problems are expected here
        for n in sorted(b):
            assert sha256_file(m2 / "b" / n) == sha256_bytes(b[n]), n
        s = wait_idle(m2)
        assert s["cache"]["uncached_opens"] == 0, \
            f"m2 read uncached: the room of m1's closed files was not freed: {s['cache']}"
        assert s["downloads"]["downloaded_bytes"] == sum(map(len, b.values())), s
        if f is not None:
            assert fh.exists() and fh.stat().st_ino == ino, "a held file was evicted"
            assert f.read() == held[4096:]
        used = sum(p.stat().st_blocks * 512 for p in cache_files(cdir).values())
        assert used <= 6 * MiB, used
    finally:
        if f is not None:
            f.close()


@pytest.mark.timeout(120)
def test_ls_l_asks_for_xattrs_once(s3server, bucket, mount, cdir, tmp_path):
    """Only user xattrs exist on the mount: reading security.selinux,
    system.posix_acl_access or trusted.* fails with ENOTSUP (as setting them
    does), on remote files, directories and files written locally, while
    user.* still answers ENODATA.  So ls -l of 300 objects makes one
    getxattr of each kind in all, not one per file (counted with strace),
    and prints every entry."""
    s3server.put_many(bucket, [(f"many/o-{i:04d}", b"x" * (i % 5 + 1)) for i in range(300)])
    m = mount(bucket, options=[f"cache_dir={cdir}", "object_meta=off"])
    (m / "local.txt").write_bytes(b"local")
    for p in (m / "many" / "o-0001", m / "many", m / "local.txt", m.path):
        for name in ("security.selinux", "system.posix_acl_access",
                     "system.posix_acl_default", "trusted.x"):
            with pytest.raises(OSError) as ei:
                os.getxattr(p, name)
            assert ei.value.errno == errno.ENOTSUP, (p, name, ei.value)
        with pytest.raises(OSError) as ei:
            os.getxattr(p, "user.nothing")
        assert ei.value.errno == errno.ENODATA, (p, ei.value)
    with pytest.raises(OSError) as ei:
        os.setxattr(m / "local.txt", "security.x", b"1")
    assert ei.value.errno == errno.ENOTSUP
    os.setxattr(m / "local.txt", "user.k", b"v")
    assert os.getxattr(m / "local.txt", "user.k") == b"v"
    if not shutil.which("strace"):
        pytest.skip("strace not installed: the per-file count is not checked")
    log = tmp_path / "ls.strace"
    out = subprocess.run(["strace", "-f", "-o", str(log), "-e",
                          "trace=getxattr,lgetxattr,fgetxattr", "ls", "-l",
                          str(m / "many")], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert len([ln for ln in out.splitlines() if " o-" in ln]) == 300
    calls = [ln for ln in log.read_text().splitlines() if "getxattr(" in ln]
    assert 1 <= len(calls) <= 4, f"ls -l made {len(calls)} getxattr calls: {calls[:6]}"


@pytest.mark.timeout(120)
def test_reading_a_directory_never_waits_for_its_listing(s3server, bucket, mount, cdir):
    """Every LIST takes 0.4 s (a slow link); dir_timeout=2.  A reader
    opens and reads the 40 files of a directory one after another, 0.12 s
    apart (about 5 s, two listing lifetimes and more): the listing is
    refreshed ahead of its expiry, so no open after the first waits for a
    LIST (each takes well under 0.4 s), and every byte is right."""
    bodies = put_dir(s3server, bucket, "d", [64 * KiB + i for i in range(40)], seed=800)
    with slow_listing_mount(s3server, bucket, mount, cdir, "mnt-slow", 13, 2) as (proxy, m):
        d = m / "d"
        names = sorted(bodies)
        slow = []
        for i, n in enumerate(names):
            t = time.monotonic()
            fd = os.open(d / n, os.O_RDONLY)
            took = time.monotonic() - t
            try:
                data = b""
                while chunk := os.read(fd, 1 << 20):
                    data += chunk
            finally:
                os.close(fd)
            assert data == bodies[n], n
            if i > 0 and took >= 0.3:
                slow.append((n, round(took, 2)))
            time.sleep(0.12)
        lists = sum(1 for op, _ in proxy.oplog(0) if op == "LIST")
        assert not slow, (f"opens waited for a LIST: {slow} "
                          f"({lists} LISTs in all)")
        assert lists >= 3, f"the listing was not refreshed ({lists} LISTs)"


@pytest.mark.timeout(120)
def test_a_path_walk_waits_for_one_listing_not_one_per_directory(s3server, bucket, mount,
                                                                 cdir):
    """Every LIST takes 0.4 s; dir_timeout=1.  After every listing has
    expired, opening run/step-10/rank/shard-000.bin waits for the LIST of
    the file's own directory only: the names of the directories above it
    answer from their last listings while those are listed again behind
    the reply (before: one LIST per directory, in turn, 1.6 s), also when
    those LISTs go unanswered.  A
    directory new since appears at its first lookup after dir_timeout, and
    one removed since answers ENOENT once the refresh has landed."""
    bodies = put_dir(s3server, bucket, "run/step-10/rank", [64 * KiB, 64 * KiB + 1], seed=900)
    silent = set()
    with slow_listing_mount(s3server, bucket, mount, cdir, "mnt-walk", 17, 1,
                            silent) as (proxy, m):
        f = m / "run" / "step-10" / "rank" / "shard-000.bin"
        assert f.read_bytes() == bodies["shard-000.bin"]
        walks = []
        for _ in range(2):
            time.sleep(2.2)  # every listing and kernel entry expired
            lists0 = sum(1 for op, _ in proxy.oplog(0) if op == "LIST")
            t = time.monotonic()
            data = f.read_bytes()
            walks.append(round(time.monotonic() - t, 2))
            assert data == bodies["shard-000.bin"]
            # the three directories above were listed again behind the reply
            assert wait_until(lambda: sum(1 for op, _ in proxy.oplog(0) if op == "LIST")
                              >= lists0 + 4, 10), proxy.oplog(0)
        assert all(w < 0.75 for w in walks), f"the walk waited for more than one LIST: {walks}"

        # the directories above go silent (their LISTs get no answer): the
        # walk still waits for the file's own directory only
        silent.update({"", "run/", "run/step-10/"})
        time.sleep(1.3)
        t = time.monotonic()
        assert f.read_bytes() == bodies["shard-000.bin"]
        took = time.monotonic() - t
        assert took < 0.75, f"the walk waited {took:.2f} s for silent parents"
        silent.clear()

        # a directory new since the listings shows at its first lookup once
        # they are past dir_timeout (a name they lack is never answered
        # from them); a removed one goes
        s3server.put_many(bucket, [("run/step-20/rank/shard-000.bin", b"new")])
        time.sleep(2.2)
        assert (m / "run" / "step-20" / "rank" / "shard-000.bin").read_bytes() == b"new"
        s3 = s3server.client()
        for k in ("run/step-10/rank/shard-000.bin", "run/step-10/rank/shard-001.bin"):
            s3.delete_object(Bucket=bucket, Key=k)
        time.sleep(1.2)
        assert wait_until(lambda: not (m / "run" / "step-10").exists(), 10), \
            "a directory removed remotely still shows"
        assert sorted(os.listdir(m / "run")) == ["step-20"]
