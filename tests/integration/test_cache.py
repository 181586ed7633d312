"""The read cache (issue 3): eviction and pins, crashes of readers and of
ckptfs, warm remounts, object versions, two mounts on one cache, the cap
measured with du, permissions, corruption, uncached fallback, prefetch and
status, mmap.  Real mounts against the real S3 server; bytes are compared
with what was uploaded.

Every test gets its own cache directory (`-o cache_dir=`), a small part
size (1 MiB) so that files of a few MiB have many chunks, and reads with
ordinary programs (cat, sha256sum, dd, du, python os.pread / mmap).  Counters
come from `ckptfs status MOUNT --json` (per daemon process)."""

import json
import errno
import os
import mmap
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from helpers import (cache_file_of, cache_files, ckptfs_status, det_bytes, run,
                     sha256_bytes, wait_until)
import helpers

MiB = 1 << 20
PART = "part_size=1M"
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


# --------------------------------------------------------------------------
# helpers

def copts(cdir, *more):
    """Mount options: a private cache directory, 1 MiB parts, and `more`
    (later options override)."""
    return [f"cache_dir={cdir}", PART, *more]


def status(m):
    return ckptfs_status(m)


def cache_of(s):
    return s["cache"]


def downloaded(m):
    return status(m)["downloads"]["downloaded_bytes"]


def wait_idle(m, timeout=30):
    """Wait until the daemon has no download in progress; returns status."""
    last = {}

    def idle():
        last["s"] = status(m)
        return last["s"]["downloads"]["active"] == 0
    assert wait_until(idle, timeout, 0.05), \
        f"downloads still active after {timeout}s: {last.get('s')}"
    return last["s"]


def sha_of(path, timeout=60):
    """sha256sum PATH (the program), the hex digest."""
    return run(["sha256sum", str(path)], timeout=timeout).stdout.split()[0]


def assert_reads(mnt, files, timeout=60):
    for key, body in files.items():
        got = sha_of(Path(mnt) / key, timeout)
        assert got == sha256_bytes(body), f"{key}: wrong bytes through the mount"


def expected_cache_path(s3, cdir, bucket, key):
    """Where the cache file of key's current version lives (must exist)."""
    p = cache_file_of(s3, cdir, bucket, key)
    assert p is not None, (f"no cache file named SHA-256(bucket, key, ETag) for "
                           f"{key} under {cdir}/objects: {sorted(cache_files(cdir))}")
    return p


def mount_via(mount, s3server, bucket, proxy, options, mountpoint):
    """Mount with ckptfs's S3 endpoint set to `proxy` (a ThrottleProxy)."""
    mountpoint = Path(mountpoint)
    mountpoint.mkdir(exist_ok=True)
    argv = mount.argv(bucket, "", mountpoint, options, endpoint=False)
    argv += ["--endpoint", proxy.endpoint, "--region", s3server.region]
    return mount(bucket, argv=argv, mountpoint=mountpoint)


def kill_mount(m):
    """SIGKILL the ckptfs process of m, then detach the dead mount."""
    m.expect_clean_exit = False
    pids = m.pids()
    assert pids, "no ckptfs process to kill"
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    if m.proc is not None:
        m.proc.wait(30)
    m.unmount()  # problems (dead mount, lazy detach) are expected here


def du_files(objects_dir, apparent):
    """Bytes of the cache files under objects/ as measured by du (-ab:
    apparent size; -a -B1: disk blocks), the directories not counted."""
    objects_dir = Path(objects_dir)
    if not objects_dir.exists():
        return 0
    args = ["du", "-a", "-b" if apparent else "-B1", str(objects_dir)]
    p = run(args, check=False, timeout=30)
    # du complains about files evicted while it runs; what it printed counts
    total = 0
    base = len(objects_dir.parts)
    for line in p.stdout.splitlines():
        n, _, path = line.partition("\t")
        if len(Path(path).parts) == base + 2:  # objects/xx/<hash>
            total += int(n)
    return total


READER = r'''
import hashlib, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
sys.stdout.write("open\n"); sys.stdout.flush()
for line in sys.stdin:
    cmd = line.split()
    if not cmd:
        continue
    try:
        b = os.pread(fd, int(cmd[2]), int(cmd[1]))
        sys.stdout.write("%d %s\n" % (len(b), hashlib.sha256(b).hexdigest()))
    except OSError as e:
        sys.stdout.write("error %d\n" % e.errno)
    sys.stdout.flush()
'''


class Reader:
    """Another process that holds a file of the mount open and preads
    from it on request (killable with SIGKILL)."""

    def __init__(self, path, timeout=30):
        self.path = path
        self.p = subprocess.Popen([PY, "-c", READER, str(path)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=helpers.clean_env())
        self._buf = b""
        line = self._line(timeout)
        assert line == "open", f"reader could not open {path}: {line!r} " \
            f"{self.p.stderr.read().decode(errors='replace') if self.p.poll() is not None else ''}"

    def _line(self, timeout):
        deadline = time.monotonic() + timeout
        fd = self.p.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"reader of {self.path}: no answer in {timeout}s")
            r, _, _ = select.select([fd], [], [], left)
            if r:
                b = os.read(fd, 4096)
                if not b:
                    return None
                self._buf += b
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode()

    def pread(self, off, n, timeout=60):
        """(len, sha256 hex) of the bytes read, or raises OSError."""
        self.p.stdin.write(f"pread {off} {n}\n".encode())
        self.p.stdin.flush()
        line = self._line(timeout)
        assert line is not None, "reader died"
        a, b = line.split()
        if a == "error":
            raise OSError(int(b), os.strerror(int(b)))
        return int(a), b

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(30)
        for f in (self.p.stdin, self.p.stdout, self.p.stderr):
            try:
                f.close()
            except OSError:
                pass


@pytest.fixture
def cdir(tmp_path):
    """A private cache directory (not created: ckptfs creates it)."""
    return tmp_path / "cache"


def pread_all(fd, start, size, step=256 << 10):
    out = []
    off = start
    while off < size:
        b = os.pread(fd, min(step, size - off), off)
        assert b, f"unexpected EOF at {off} of {size}"
        out.append(b)
        off += len(b)
    return b"".join(out)


# --------------------------------------------------------------------------
# 1. eviction never removes a file someone holds open

@pytest.mark.timeout(120)
def test_eviction_never_removes_a_held_file(s3server, bucket, mount, cdir):
    """cache_size=8M; a.bin held open by this process and b.bin by another
    one (each read only in part), then six other 2 MiB files read with
    sha256sum: they must evict each other, never a.bin or b.bin, whose cache
    files stay the same inodes with the right bytes, and whose holders read
    the rest of their files correctly.  After closing, they are evictable."""
    held = {"held/a.bin": det_bytes(101, 2 * MiB + 12345),
            "held/b.bin": det_bytes(102, 2 * MiB - 999)}
    others = {f"other/{i}.bin": det_bytes(110 + i, 2 * MiB + i) for i in range(6)}
    s3server.put_many(bucket, list({**held, **others}.items()))
    m = mount(bucket, options=copts(cdir, "cache_size=8M"))
    a, b = held["held/a.bin"], held["held/b.bin"]

    fd = os.open(m / "held/a.bin", os.O_RDONLY)
    rb = None
    try:
        assert os.pread(fd, 65536, 0) == a[:65536]
        rb = Reader(m / "held/b.bin")
        assert rb.pread(0, 65536) == (65536, sha256_bytes(b[:65536]))
        s = wait_idle(m)
        assert cache_of(s)["pinned_bytes"] >= len(a) + len(b), s
        fa = expected_cache_path(s3server, cdir, bucket, "held/a.bin")
        fb = expected_cache_path(s3server, cdir, bucket, "held/b.bin")
        ino = {fa: fa.stat().st_ino, fb: fb.stat().st_ino}

        for k, v in others.items():
            assert sha_of(m / k) == sha256_bytes(v), k
            for p in (fa, fb):
                assert p.exists(), f"cache file of a held file evicted after reading {k}"
                assert p.stat().st_ino == ino[p], \
                    f"cache file of a held file replaced after reading {k}"
        s = status(m)
        c = cache_of(s)
        assert c["evictions"] >= 2, f"no eviction pressure happened: {s}"
        assert c["pinned_bytes"] >= len(a) + len(b), s
        assert fa.read_bytes() == a, "the held file's cache file lost its bytes"
        assert fb.read_bytes() == b, "the held file's cache file lost its bytes"

        # the holders read the rest of their files
        assert pread_all(fd, 65536, len(a)) == a[65536:]
        off = 65536
        while off < len(b):
            n = min(300001, len(b) - off)
            assert rb.pread(off, n) == (n, sha256_bytes(b[off:off + n])), off
            off += n
    finally:
        os.close(fd)
        if rb:
            rb.kill()

    # closed: the pins go, and the entries can be evicted like any other
    assert wait_until(lambda: cache_of(status(m))["pinned_bytes"] == 0, 15), status(m)
    for k, v in others.items():
        assert sha_of(m / k) == sha256_bytes(v), k
    assert not fa.exists() and not fb.exists(), \
        "entries no longer held were never evicted (pins not released?)"


@pytest.mark.timeout(90)
def test_files_read_one_after_another_are_all_cached(s3server, bucket, mount, cdir):
    """cache_size=1536K, twenty 1 MiB files read one after another with
    sha256sum: each needs the previous one evicted, and nothing else is
    open, so none may fall back to an uncached read (a pin must not outlive
    the reader's close of a completely downloaded file)."""
    files = {f"s/{i:02d}.bin": det_bytes(150 + i, MiB + 1000 + i) for i in range(20)}
    s3server.put_many(bucket, list(files.items()))
    m = mount(bucket, options=copts(cdir, "cache_size=1536K"))
    for k, v in files.items():
        assert sha_of(m / k) == sha256_bytes(v), k
    s = wait_idle(m)
    c = cache_of(s)
    assert c["uncached_opens"] == 0, \
        f"{c['uncached_opens']} of {len(files)} files read uncached: {s}"
    assert c["evictions"] == len(files) - 1, s
    assert s["downloads"]["downloaded_bytes"] == sum(map(len, files.values())), s


# --------------------------------------------------------------------------
# 2. SIGKILL of a reader, and of ckptfs, releases the pins

@pytest.mark.timeout(120)
def test_sigkill_of_a_reader_releases_its_pin(s3server, bucket, mount, cdir):
    """A reader holding a.bin is SIGKILLed: pinned_bytes drops to 0 and a.bin
    becomes evictable (other reads then evict it); before the kill it
    survives the same pressure."""
    a = det_bytes(201, 2 * MiB + 1)
    others = {f"o/{i}.bin": det_bytes(210 + i, 2 * MiB - 7 * i) for i in range(4)}
    s3server.put_many(bucket, [("a.bin", a), *others.items()])
    m = mount(bucket, options=copts(cdir, "cache_size=5M"))
    r = Reader(m / "a.bin")
    try:
        assert r.pread(0, 4096) == (4096, sha256_bytes(a[:4096]))
        wait_idle(m)
        assert cache_of(status(m))["pinned_bytes"] >= len(a)
        fa = expected_cache_path(s3server, cdir, bucket, "a.bin")
        for k, v in others.items():
            assert sha_of(m / k) == sha256_bytes(v), k
            assert fa.exists(), f"a.bin evicted while held (after reading {k})"
        assert cache_of(status(m))["evictions"] >= 2, status(m)
    finally:
        os.kill(r.p.pid, signal.SIGKILL)
        r.kill()
    assert wait_until(lambda: cache_of(status(m))["pinned_bytes"] == 0, 15), \
        f"pin of the SIGKILLed reader not released: {status(m)}"
    for k, v in others.items():
        assert sha_of(m / k) == sha256_bytes(v), k
    assert not fa.exists(), "a.bin never evicted after its reader was killed"
    assert sha_of(m / "a.bin") == sha256_bytes(a)


@pytest.mark.timeout(120)
def test_sigkill_of_ckptfs_releases_its_pins(s3server, bucket, mount, cdir):
    """ckptfs is SIGKILLed while a reader holds a.bin (so it has pins in the
    shared index).  A second ckptfs on the same cache_dir reaps the dead
    owner: its lock file goes, a.bin is reused from the cache (no download)
    and later evicted under pressure; every read is correct."""
    a = det_bytes(301, 3 * MiB + 5)
    others = {f"o/{i}.bin": det_bytes(310 + i, 2 * MiB + 3 * i) for i in range(3)}
    s3server.put_many(bucket, [("a.bin", a), *others.items()])
    m1 = mount(bucket, options=copts(cdir, "cache_size=6M"))
    r = Reader(m1 / "a.bin")
    try:
        assert r.pread(0, 4096) == (4096, sha256_bytes(a[:4096]))
        wait_idle(m1)
        assert cache_of(status(m1))["pinned_bytes"] >= len(a)
        locks1 = sorted(p.name for p in (cdir / "owners").iterdir())
        kill_mount(m1)
    finally:
        r.kill()
    fa = expected_cache_path(s3server, cdir, bucket, "a.bin")

    m2 = mount(bucket, options=copts(cdir, "cache_size=6M"))
    locks2 = sorted(p.name for p in (cdir / "owners").iterdir())
    assert len(locks2) == 1 and locks2 != locks1, \
        f"dead owner's lock not reaped: before {locks1}, after restart {locks2}"
    s = status(m2)
    assert cache_of(s)["pinned_bytes"] == 0, s
    assert sha_of(m2 / "a.bin") == sha256_bytes(a)
    s = wait_idle(m2)
    assert s["downloads"]["downloaded_bytes"] == 0, f"a.bin downloaded again: {s}"
    assert cache_of(s)["hits"] >= 1, s
    for k, v in others.items():
        assert sha_of(m2 / k) == sha256_bytes(v), k
    assert not fa.exists(), ("a.bin never evicted: the dead ckptfs's pin "
                             f"was not reaped ({status(m2)})")
    assert cache_of(status(m2))["uncached_opens"] == 0, status(m2)
    assert sha_of(m2 / "a.bin") == sha256_bytes(a)


# --------------------------------------------------------------------------
# 3. remount serves from the cache

@pytest.mark.timeout(90)
def test_remount_serves_from_cache(s3server, bucket, mount, cdir, tmp_path):
    """Files read through one mount are served from the cache after unmount
    and a new mount on the same cache_dir: ckptfs counts no download, and
    the server sends next to nothing (listings only) through a proxy."""
    files = {"ckpt/model.bin": det_bytes(401, 5 * MiB + 3),
             "ckpt/optim.bin": det_bytes(402, 3 * MiB),
             "ckpt/small.json": b'{"step": 100}\n',
             "ckpt/one.bin": b"x"}
    s3server.put_many(bucket, list(files.items()))
    m1 = mount(bucket, options=copts(cdir))
    assert_reads(m1, files)
    s = wait_idle(m1)
    assert s["downloads"]["downloaded_bytes"] == sum(map(len, files.values())), s
    assert not m1.unmount()

    # the second mount talks to S3 through a counting proxy
    with helpers.ThrottleProxy(s3server.endpoint) as proxy:
        m2 = mount_via(mount, s3server, bucket, proxy, copts(cdir), tmp_path / "mnt2")
        assert_reads(m2, files)
        out = run(["dd", f"if={m2 / 'ckpt/model.bin'}", "bs=1M", "status=none"],
                  text=False).stdout
        assert out == files["ckpt/model.bin"]
        s = status(m2)
        assert s["downloads"]["downloaded_bytes"] == 0, f"remount downloaded again: {s}"
        assert cache_of(s)["hits"] >= len(files), s
        assert cache_of(s)["misses"] == 0, s
        assert proxy.bytes_down < 256 << 10, \
            f"the server sent {proxy.bytes_down} bytes to the remounted ckptfs"
        assert not m2.unmount()


# --------------------------------------------------------------------------
# 4./5. object versions: ETag change, remote delete

@pytest.mark.timeout(60)
@pytest.mark.parametrize("same_size,cached", [(False, False), (True, False), (False, True)],
                         ids=["new-size", "same-size", "new-size-opened-cached"])
def test_etag_change_old_handle_old_bytes_new_open_new_bytes(
        s3server, bucket, mount, cdir, same_size, cached):
    """The object is replaced after a handle opened it (and its bytes are on
    disk): the old handle goes on reading the old version, its size too,
    while a new open after the attribute timeout reads the new version.
    cached: the file was complete in the cache before the handle was opened
    (a passthrough open)."""
    v1 = det_bytes(501, 3 * MiB + 77)
    v2 = det_bytes(502, len(v1) if same_size else 2 * MiB + 5)
    s3server.put(bucket, "w.bin", v1)
    m = mount(bucket, options=copts(cdir))
    if cached:
        assert sha_of(m / "w.bin") == sha256_bytes(v1)
        wait_idle(m)
    fd = os.open(m / "w.bin", os.O_RDONLY)
    try:
        assert os.pread(fd, 8192, 0) == v1[:8192]
        wait_idle(m)  # v1 is on disk; S3 will not have it any more
        s3server.put(bucket, "w.bin", v2)
        time.sleep(1.6)  # attr/entry timeouts (1 s) expire
        assert sha_of(m / "w.bin") == sha256_bytes(v2), "new open did not get the new version"
        assert os.stat(m / "w.bin").st_size == len(v2)
        got = b""
        off = 8192
        while off < len(v1):
            b = os.pread(fd, 256 << 10, off)
            if not b:
                break
            got += b
            off += len(b)
        assert got == v1[8192:], (
            f"the old handle read {len(got) + 8192} bytes of {len(v1)}"
            + (", cut at the new version's size" if len(got) + 8192 == len(v2) else "")
            + ": it did not keep the version it opened")
        assert os.pread(fd, 100, len(v1)) == b""
        assert os.fstat(fd).st_size == len(v1), \
            "fstat of the old handle shows the new version's size"
    finally:
        os.close(fd)
    assert sha_of(m / "w.bin") == sha256_bytes(v2)


@pytest.mark.timeout(120)
def test_a_file_patched_here_reads_new_after_a_commit_its_reader_outlived(
        s3server, bucket, mount, cdir, tmp_path):
    """A cached file patched in place (r+b) and chmodded through the mount,
    with a reader's handle open across `ckptfs sync` and closed after it:
    the next open reads the committed bytes and mode, not the version
    cached before the patch (the handle's release dropped the local copy
    without the inode forgetting the old version: CI saw dd conv=notrunc's
    patch missing after sync).  attr_timeout=30 keeps the old version's
    attributes fresh, as 1 s does for a quick reader."""
    v1 = det_bytes(511, 3 * MiB + 5)
    s3server.put(bucket, "d/p.bin", v1)
    m = mount(bucket, options=copts(cdir, "attr_timeout=30", "commit_delay=600"))
    p = m / "d/p.bin"
    assert sha_of(p) == sha256_bytes(v1)
    wait_idle(m)  # v1 is cached whole
    with open(p, "r+b") as f:
        f.seek(MiB + 7)
        f.write(b"P" * 5000)
    os.chmod(p, 0o440)
    want = v1[:MiB + 7] + b"P" * 5000 + v1[MiB + 7 + 5000:]
    fd = os.open(p, os.O_RDONLY)  # a reader of the local copy
    try:
        assert os.pread(fd, 5000, MiB + 7) == b"P" * 5000
        helpers.ckptfs_sync(m)
    finally:
        os.close(fd)
    assert helpers.s3_get(s3server.client(), bucket, "d/p.bin") == want, \
        "the bucket does not hold the patched file"
    got = p.read_bytes()
    assert got == want, (
        "the mount reads the version cached before the patch"
        if got == v1 else f"the mount reads {len(got)} other bytes")
    assert os.stat(p).st_mode & 0o7777 == 0o440, "the chmod is lost"


@pytest.mark.timeout(60)
def test_remote_delete_while_reading_completes_the_read(s3server, bucket, mount, cdir):
    body = det_bytes(601, 4 * MiB + 99)
    s3server.put(bucket, "gone.bin", body)
    m = mount(bucket, options=copts(cdir))
    fd = os.open(m / "gone.bin", os.O_RDONLY)
    try:
        assert os.pread(fd, 1 << 20, 0) == body[:1 << 20]
        wait_idle(m)
        s3server.client().delete_object(Bucket=bucket, Key="gone.bin")
        time.sleep(1.6)
        assert not os.path.exists(m / "gone.bin"), "deleted object still listed"
        assert pread_all(fd, 1 << 20, len(body)) == body[1 << 20:]
    finally:
        os.close(fd)
    p = run(["cat", m / "gone.bin"], check=False)
    assert p.returncode != 0 and "No such file" in p.stderr, p.stderr


# --------------------------------------------------------------------------
# 6. two mounts, one cache directory: one download

@pytest.mark.timeout(120)
def test_two_mounts_sharing_a_cache_download_once(s3server, bucket, mount, cdir):
    files = {f"f{i}.bin": det_bytes(701 + i, 8 * MiB + 1000 * i + 1) for i in range(3)}
    s3server.put_many(bucket, list(files.items()))
    m1 = mount(bucket, options=copts(cdir))
    m2 = mount(bucket, options=copts(cdir))
    jobs = [(m, k) for k in files for m in (m1, m2)]
    barrier = threading.Barrier(len(jobs))
    results = {}

    def one(m, k):
        barrier.wait(30)
        try:
            results[(str(m), k)] = sha_of(m / k)
        except AssertionError as e:
            results[(str(m), k)] = str(e).strip().splitlines()[-1]
    ts = [threading.Thread(target=one, args=j) for j in jobs]
    for t in ts:
        t.start()
    for t in ts:
        t.join(90)
    assert len(results) == len(jobs), "a reader did not finish"
    for (mp, k), h in results.items():
        assert h == sha256_bytes(files[k]), (mp, k)
    s1, s2 = wait_idle(m1), wait_idle(m2)
    d1, d2 = s1["downloads"]["downloaded_bytes"], s2["downloads"]["downloaded_bytes"]
    total = sum(map(len, files.values()))
    assert d1 + d2 == total, (f"downloaded {d1} + {d2} = {d1 + d2} bytes for "
                              f"{total} bytes of objects (each must be fetched once)")
    assert len(cache_files(cdir)) == len(files), sorted(cache_files(cdir))


# --------------------------------------------------------------------------
# 7. the cap, measured with du

@pytest.mark.timeout(150)
def test_cap_measured_with_du_holds_while_reading_many_files(s3server, bucket, mount, cdir):
    """Two readers read 16 files of 1-3 MiB (32 MiB in all) through a mount
    with cache_size=8M while du samples the cache files' size, apparent
    (du -ab) and on disk (du -a -B1): never above the cap plus the bytes of
    files open at that moment."""
    import random
    rnd = random.Random(7)
    files = {f"d/{i:02d}.bin": det_bytes(800 + i, rnd.randint(1 * MiB, 3 * MiB))
             for i in range(16)}
    s3server.put_many(bucket, list(files.items()))
    cap = 8 * MiB
    m = mount(bucket, options=copts(cdir, "cache_size=8M"))
    objects = cdir / "objects"
    lock = threading.Lock()
    open_bytes = [0]   # bytes of files open right now
    window_max = [0]   # max of open_bytes since the current sample started
    samples, bad = [], []
    stop = threading.Event()

    def sampler():
        while not stop.is_set():
            with lock:
                window_max[0] = open_bytes[0]
            app = du_files(objects, apparent=True)
            blk = du_files(objects, apparent=False)
            with lock:
                bound = cap + window_max[0]
            samples.append((app, blk, bound))
            if app > bound or blk > bound:
                bad.append((app, blk, bound))
            time.sleep(0.02)

    def reader(keys):
        for k in keys:
            with lock:
                open_bytes[0] += len(files[k])
                window_max[0] = max(window_max[0], open_bytes[0])
            try:
                assert sha_of(m / k) == sha256_bytes(files[k]), k
            finally:
                with lock:
                    open_bytes[0] -= len(files[k])
    keys = sorted(files)
    errors = []

    def run_reader(ks):
        try:
            reader(ks)
        except BaseException as e:  # noqa: B902
            errors.append(e)
    st = threading.Thread(target=sampler)
    st.start()
    rs = [threading.Thread(target=run_reader, args=(keys[i::2],)) for i in range(2)]
    try:
        for t in rs:
            t.start()
        for t in rs:
            t.join(120)
    finally:
        stop.set()
        st.join(30)
    assert not errors, errors
    s = wait_idle(m)
    final = (du_files(objects, True), du_files(objects, False))
    assert len(samples) >= 5, f"du sampled only {len(samples)} times"
    assert not bad, (f"{len(bad)} of {len(samples)} du samples above cap + open "
                     f"bytes, e.g. (apparent, disk, bound) = {bad[:5]}")
    assert max(final) <= cap, f"du after the reads: {final} > cap {cap}"
    assert cache_of(s)["bytes"] <= cap, s
    assert cache_of(s)["evictions"] > 0, s


# --------------------------------------------------------------------------
# 8. permissions and names

@pytest.mark.timeout(60)
@pytest.mark.parametrize("umask", [0o022, 0o000], ids=["umask022", "umask000"])
def test_cache_permissions_and_names(s3server, bucket, mount, cdir, umask):
    keys = {"secret-run-name/step-000123/model.safetensors": det_bytes(901, 2 * MiB + 1),
            "secret-run-name/step-000123/tokenizer.json": b'{"a": 1}\n'}
    s3server.put_many(bucket, list(keys.items()))
    old = os.umask(umask)
    try:
        m = mount(bucket, options=copts(cdir))
    finally:
        os.umask(old)
    assert_reads(m, keys)
    wait_idle(m)

    mode = lambda p: os.lstat(p).st_mode & 0o7777  # noqa: E731
    assert mode(cdir) == 0o700, oct(mode(cdir))
    db = cdir / "index.db"
    assert db.is_file()
    with open(db, "rb") as f:
        hdr = f.read(100)
    assert hdr[:16] == b"SQLite format 3\0" and hdr[18] == 2 and hdr[19] == 2, \
        "index.db is not in WAL mode"
    everything = []
    for dirpath, dirnames, filenames in os.walk(cdir):
        for d in dirnames:
            p = Path(dirpath) / d
            everything.append(p)
            assert mode(p) & 0o077 == 0, f"{p} is {oct(mode(p))}: group/other access"
        for fn in filenames:
            p = Path(dirpath) / fn
            everything.append(p)
            assert mode(p) == 0o600, f"{p} is {oct(mode(p))}, expected 0600"
    names = {p.name for p in everything}
    assert "index.db-wal" in names, sorted(names)
    locks = list((cdir / "owners").iterdir())
    assert len(locks) == 1 and locks[0].name.endswith(".lock"), locks
    for p in everything:
        rel = p.relative_to(cdir).as_posix()
        for word in ("secret", "run-name", "step-000123", "model", "safetensors",
                     "tokenizer", bucket):
            assert word not in rel, f"cache path {rel} reveals the key/bucket"
    objs = cache_files(cdir)
    for n, p in objs.items():
        assert len(n) == 64 and all(c in "0123456789abcdef" for c in n), n
        assert p.parent.name == n[:2] and p.parent.parent == cdir / "objects", p
    for k in keys:
        p = expected_cache_path(s3server, cdir, bucket, k)
        assert p.read_bytes() == keys[k]
    assert len(objs) == len(keys), sorted(objs)


# --------------------------------------------------------------------------
# 9. corrupted, deleted, truncated cache files

def _flip(path, off, n):
    """Overwrite n bytes at off with different bytes, keeping the mtime."""
    st = os.stat(path)
    with open(path, "r+b") as f:
        f.seek(off)
        old = f.read(n)
        f.seek(off)
        f.write(bytes(x ^ 0x5A for x in old))
        f.flush()
        os.fsync(f.fileno())
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["passthrough", "no_passthrough"])
def test_corrupted_cache_file_is_detected_and_refetched(s3server, bucket, mount, cdir, mode):
    """Two chunks of a complete cache file are overwritten while unmounted
    (mtime restored).  After remount the reads are right, verify_failures
    counts the two chunks and only they are downloaded again."""
    body = det_bytes(1001, 5 * MiB + 100)
    s3server.put(bucket, "c.bin", body)
    extra = ["no_passthrough"] if mode == "no_passthrough" else []
    m1 = mount(bucket, options=copts(cdir, *extra))
    assert sha_of(m1 / "c.bin") == sha256_bytes(body)
    wait_idle(m1)
    assert not m1.unmount()
    p = expected_cache_path(s3server, cdir, bucket, "c.bin")
    _flip(p, 1 * MiB + 4321, 100)      # chunk 1
    _flip(p, 4 * MiB + 200000, 4096)   # chunk 4
    assert p.read_bytes() != body

    m2 = mount(bucket, options=copts(cdir, *extra))
    assert sha_of(m2 / "c.bin") == sha256_bytes(body), "corrupted cache file served"
    out = run(["dd", f"if={m2 / 'c.bin'}", "bs=64k", "skip=16", "count=1",
               "status=none"], text=False).stdout
    assert out == body[MiB:MiB + 65536]
    s = wait_idle(m2)
    c = cache_of(s)
    assert c["verify_failures"] == 2, f"expected 2 bad chunks detected: {s}"
    assert s["downloads"]["downloaded_bytes"] == 2 * MiB, \
        f"expected exactly the 2 bad 1 MiB chunks downloaded again: {s}"
    assert p.read_bytes() == body, "cache file not repaired"
    assert sha_of(m2 / "c.bin") == sha256_bytes(body)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", ["passthrough", "no_passthrough"])
def test_corrupted_cache_file_read_by_concurrent_readers(s3server, bucket, mount, cdir, mode):
    """Every 1 MiB chunk of a 16 MiB cache file is damaged while unmounted;
    after remount six sha256sum processes read the file at once (like ranks
    loading one checkpoint): each must get the right bytes."""
    body = det_bytes(1051, 16 * MiB + 100)
    s3server.put(bucket, "c.bin", body)
    extra = ["no_passthrough"] if mode == "no_passthrough" else []
    m1 = mount(bucket, options=copts(cdir, *extra))
    assert sha_of(m1 / "c.bin") == sha256_bytes(body)
    wait_idle(m1)
    assert not m1.unmount()
    p = expected_cache_path(s3server, cdir, bucket, "c.bin")
    for i in range(17):  # every chunk, the last one (100 bytes) too
        clen = min(MiB, len(body) - i * MiB)
        _flip(p, i * MiB + (4321 * i) % (clen - 50), 50)
    m2 = mount(bucket, options=copts(cdir, *extra))
    res = {}

    def one(i):
        try:
            res[i] = sha_of(m2 / "c.bin")
        except AssertionError as e:  # the read failed (e.g. EIO)
            res[i] = str(e).strip().splitlines()[-1]
    ts = [threading.Thread(target=one, args=(i,)) for i in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    bad = [i for i in range(6) if res.get(i) != sha256_bytes(body)]
    s = wait_idle(m2)
    assert not bad, (f"readers {bad} of 6 got wrong bytes or errors: "
                     f"{[res.get(i) for i in bad]} (damaged chunks served?) {s}")
    assert cache_of(s)["verify_failures"] == 17, s
    assert s["downloads"]["downloaded_bytes"] == len(body), s
    assert p.read_bytes() == body


@pytest.mark.timeout(60)
@pytest.mark.parametrize("damage", ["deleted", "truncated", "extended"])
def test_deleted_or_truncated_cache_file_is_refetched(s3server, bucket, mount, cdir, damage):
    body = det_bytes(1101, 3 * MiB + 33)
    s3server.put(bucket, "t.bin", body)
    m1 = mount(bucket, options=copts(cdir))
    assert sha_of(m1 / "t.bin") == sha256_bytes(body)
    wait_idle(m1)
    assert not m1.unmount()
    p = expected_cache_path(s3server, cdir, bucket, "t.bin")
    if damage == "deleted":
        p.unlink()
    elif damage == "truncated":
        os.truncate(p, 3 * MiB // 2)
    else:
        with open(p, "ab") as f:
            f.write(b"junk" * 1000)

    m2 = mount(bucket, options=copts(cdir))
    assert sha_of(m2 / "t.bin") == sha256_bytes(body), f"{damage} cache file served"
    s = wait_idle(m2)
    assert s["downloads"]["downloaded_bytes"] == len(body), \
        f"expected one fresh download of the object: {s}"
    p = expected_cache_path(s3server, cdir, bucket, "t.bin")
    assert p.read_bytes() == body


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["passthrough", "no_passthrough"])
def test_cache_file_corrupted_while_mounted_is_not_served(s3server, bucket, mount, cdir, mode):
    """A complete cache file, not open, is overwritten while the mount is
    live; a later open (after the attribute timeout) must not serve the
    damaged bytes."""
    body = det_bytes(1201, 3 * MiB + 1)
    s3server.put(bucket, "h.bin", body)
    extra = ["no_passthrough"] if mode == "no_passthrough" else []
    m = mount(bucket, options=copts(cdir, *extra))
    assert sha_of(m / "h.bin") == sha256_bytes(body)
    wait_idle(m)
    p = expected_cache_path(s3server, cdir, bucket, "h.bin")
    _flip(p, 2 * MiB + 10, 64)
    time.sleep(1.6)
    assert sha_of(m / "h.bin") == sha256_bytes(body), "damaged cache file served"


# --------------------------------------------------------------------------
# 10. pinned data alone exceeds the cap: uncached reads

@pytest.mark.timeout(90)
def test_pinned_data_over_cap_reads_uncached(s3server, bucket, mount, cdir):
    a = det_bytes(1301, 3 * MiB)
    b = det_bytes(1302, 3 * MiB + 17)
    big = det_bytes(1303, 6 * MiB + 1)
    s3server.put_many(bucket, [("a.bin", a), ("b.bin", b), ("big.bin", big)])
    cap = 4 * MiB
    m = mount(bucket, options=copts(cdir, "cache_size=4M"))
    fd = os.open(m / "a.bin", os.O_RDONLY)
    try:
        assert os.pread(fd, 4096, 0) == a[:4096]
        wait_idle(m)
        assert cache_of(status(m))["pinned_bytes"] >= len(a)
        assert sha_of(m / "b.bin") == sha256_bytes(b), "uncached read wrong"
        s = status(m)
        assert cache_of(s)["uncached_opens"] >= 1, f"b.bin should have been read uncached: {s}"
        assert max(du_files(cdir / "objects", True), du_files(cdir / "objects", False)) <= cap
        assert cache_of(s)["entries"] == 1, s
        assert pread_all(fd, 4096, len(a)) == a[4096:]
    finally:
        os.close(fd)
    # a file larger than the cap never fits: uncached, still right
    n0 = cache_of(status(m))["uncached_opens"]
    out = run(["dd", f"if={m / 'big.bin'}", "bs=1M", "status=none"], text=False).stdout
    assert out == big
    assert cache_of(status(m))["uncached_opens"] > n0
    assert max(du_files(cdir / "objects", True), du_files(cdir / "objects", False)) <= cap
    # a.bin closed: b.bin is cached now (a.bin evicted)
    assert wait_until(lambda: cache_of(status(m))["pinned_bytes"] == 0, 15), status(m)
    n1 = cache_of(status(m))["uncached_opens"]
    assert sha_of(m / "b.bin") == sha256_bytes(b)
    wait_idle(m)
    assert cache_of(status(m))["uncached_opens"] == n1, status(m)
    assert cache_file_of(s3server, cdir, bucket, "b.bin") is not None


# --------------------------------------------------------------------------
# 12. prefetch and status

@pytest.mark.timeout(90)
def test_prefetch_directory_then_reads_download_nothing(s3server, bucket, mount, cdir):
    files = {"ckpt/model-00001.safetensors": det_bytes(1401, 3 * MiB + 1),
             "ckpt/model-00002.safetensors": det_bytes(1402, 2 * MiB),
             "ckpt/sub/optim.pt": det_bytes(1403, 1 * MiB + 4097),
             "ckpt/config.json": b'{"layers": 2}\n',
             "other.bin": det_bytes(1404, 2 * MiB)}
    s3server.put_many(bucket, list(files.items()))
    m = mount(bucket, options=copts(cdir))
    ckpt = {k: v for k, v in files.items() if k.startswith("ckpt/")}
    p = run([helpers.CKPTFS_BIN, "prefetch", m / "ckpt"], timeout=60)
    assert p.stderr == "", f"progress or noise on a non-terminal: {p.stderr!r}"
    assert p.stdout.startswith(f"{m / 'ckpt'}: {len(ckpt)} files, "), p.stdout
    assert p.stdout.rstrip().endswith("cached"), p.stdout
    s = status(m)
    total = sum(map(len, ckpt.values()))
    assert s["downloads"]["downloaded_bytes"] == total, s
    assert s["downloads"]["active"] == 0, f"prefetch returned before the end: {s}"
    for k in ckpt:
        assert cache_file_of(s3server, cdir, bucket, k) is not None or not ckpt[k], k
    assert cache_file_of(s3server, cdir, bucket, "other.bin") is None

    assert_reads(m, ckpt)
    s2 = status(m)
    assert s2["downloads"]["downloaded_bytes"] == total, \
        f"reading prefetched files downloaded again: {s2}"
    assert cache_of(s2)["hits"] >= 3 and cache_of(s2)["misses"] == cache_of(s)["misses"], s2

    # a single file
    p = run([helpers.CKPTFS_BIN, "prefetch", m / "other.bin"], timeout=60)
    assert p.stdout.startswith(f"{m / 'other.bin'}: 1 files") or \
        p.stdout.startswith(f"{m / 'other.bin'}: 1 file"), p.stdout
    assert downloaded(m) == total + len(files["other.bin"])
    assert_reads(m, {"other.bin": files["other.bin"]})
    assert downloaded(m) == total + len(files["other.bin"])


@pytest.mark.timeout(60)
def test_prefetch_errors_exit_1_with_a_message(s3server, bucket, mount, cdir, tmp_path):
    s3server.put(bucket, "x.bin", b"x" * 1000)
    m = mount(bucket, options=copts(cdir))
    for path in (m / "no-such-file", m / "no/such/dir", tmp_path):
        p = run([helpers.CKPTFS_BIN, "prefetch", path], check=False, timeout=30)
        assert p.returncode == 1, (path, p.returncode, p.stdout, p.stderr)
        assert p.stderr.startswith("ckptfs: ") and str(path) in p.stderr, p.stderr
    # one bad path among good ones: the good one is fetched, exit 1
    p = run([helpers.CKPTFS_BIN, "prefetch", m / "x.bin", m / "nope"], check=False, timeout=30)
    assert p.returncode == 1, p
    assert f"{m / 'x.bin'}: 1 file" in p.stdout, p.stdout
    assert downloaded(m) == 1000


@pytest.mark.timeout(60)
def test_status_table_and_json(s3server, bucket, mount, cdir, tmp_path):
    body = det_bytes(1501, 2 * MiB + 3)
    s3server.put(bucket, "p/x.bin", body)
    m = mount(bucket, prefix="p", options=copts(cdir, "cache_size=64M",
                                                "cache_min_free=100M"))
    assert sha_of(m / "x.bin") == sha256_bytes(body)
    assert sha_of(m / "x.bin") == sha256_bytes(body)
    wait_idle(m)
    # a closed file's entry stays pinned, idle (a reopen then costs no
    # index transaction: doc/cache.md, "Idle entries"); pinned_bytes counts
    # only what handles hold
    assert wait_until(lambda: cache_of(status(m))["pinned_bytes"] == 0, 15), status(m)
    s = status(m)
    assert s["mountpoint"] == str(m) and s["bucket"] == bucket, s
    assert s["prefix"].strip("/") == "p", s
    assert s["pid"] == m.proc.pid, s
    c = cache_of(s)
    assert Path(c["dir"]) == cdir, c
    assert c["cap"] == 64 * MiB and c["min_free"] == 100 * MiB, c
    assert c["entries"] == 1 and c["bytes"] == len(body), c
    assert c["hits"] == 1 and c["misses"] == 1, c
    assert s["downloads"]["downloaded_bytes"] == len(body), s
    for k in ("pinned_bytes", "uncached_opens", "evictions", "verify_failures"):
        assert c[k] == 0, (k, c)
    assert isinstance(s["downloads"]["rate_bytes_per_s"], (int, float))

    out = run([helpers.CKPTFS_BIN, "status", m]).stdout
    rows = {}
    for line in out.splitlines():
        parts = line.strip().split(None, 1)
        if parts:
            rows.setdefault(parts[0], parts[1] if len(parts) > 1 else "")
    for row in ("mount", "source", "pid", "cache", "used", "pinned", "cap", "hits",
                "misses", "evictions", "downloads", "active", "downloaded",
                "throughput"):
        assert row in rows, f"status table has no {row!r} row:\n{out}"
    assert f"s3://{bucket}/p" in out and str(m) in out and str(cdir) in out, out
    assert "64.0 MiB" in rows["cap"], out
    assert rows["hits"] == "1" and rows["misses"] == "1", out
    assert "uncached opens" in out, out

    p = run([helpers.CKPTFS_BIN, "status", tmp_path], check=False)
    assert p.returncode == 1 and p.stderr.startswith("ckptfs: "), p


# --------------------------------------------------------------------------
# 13. mmap

MMAP = r'''
import hashlib, json, mmap, os, sys
path, regions = sys.argv[1], json.loads(sys.argv[2])
fd = os.open(path, os.O_RDONLY)
mm = mmap.mmap(fd, 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
out = [hashlib.sha256(mm[o:o + n]).hexdigest() for o, n in regions]
out.append(hashlib.sha256(mm[:]).hexdigest())
mm[0:4] = b"XXXX"   # private copy-on-write: never reaches the file
out.append(mm[0:8].hex())
mm.close()
os.close(fd)
print(json.dumps(out))
'''


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["passthrough", "no_passthrough"])
def test_mmap_private_of_cached_and_uncached_files(s3server, bucket, mount, cdir, mode):
    cached = det_bytes(1601, 4 * MiB + 12345)
    cold = det_bytes(1602, 6 * MiB + 777)
    s3server.put_many(bucket, [("cached.bin", cached), ("cold.bin", cold)])
    extra = ["no_passthrough"] if mode == "no_passthrough" else []
    m = mount(bucket, options=copts(cdir, *extra))
    assert sha_of(m / "cached.bin") == sha256_bytes(cached)
    wait_idle(m)
    for name, body in (("cached.bin", cached), ("cold.bin", cold)):
        size = len(body)
        regions = [(size - 5000, 5000), (size // 2 - 3, 70001), (0, 4096),
                   (MiB - 1, 2), (3 * MiB + 11, MiB)]
        p = run([PY, "-c", MMAP, m / name, json.dumps(regions)], timeout=60,
                env=helpers.clean_env())
        out = json.loads(p.stdout)
        for (o, n), h in zip(regions, out):
            assert h == sha256_bytes(body[o:o + n]), f"{name}: mmap bytes [{o}, +{n}) wrong"
        assert out[len(regions)] == sha256_bytes(body), f"{name}: whole mapping wrong"
        assert out[-1] == (b"XXXX" + body[4:8]).hex()
        assert sha_of(m / name) == sha256_bytes(body), "private mapping write leaked"
    s = wait_idle(m)
    assert cache_of(s)["hits"] >= 2 and cache_of(s)["misses"] == 2, s


@pytest.mark.timeout(60)
def test_replaced_between_listing_and_first_read_reads_the_new_version(
        s3server, bucket, mount, cdir):
    """Another host rewrites a small file (a `latest` tracker: same size)
    after this mount listed it: open trusts the listing (attr_timeout), the
    old bytes are gone from the bucket, and the first read takes the new
    version instead of failing with EIO (Megatron's loader polling
    latest_checkpointed_iteration.txt saw EIO for a second).  A new size
    works too, longer ("999" -> "1000": the kernel's size grows before the
    read returns) or shorter, and stat then shows the new size."""
    s3server.put(bucket, "run/latest", b"100")
    s3server.put(bucket, "run/other", b"x" * 10)
    s3server.put(bucket, "run/third", b"z" * 4000)
    # dir_readahead=0: read-ahead after the open of latest would cache the
    # old versions of other and third before they are replaced, and their
    # reads would then (rightly) return those bytes within attr_timeout
    m = mount(bucket, options=copts(cdir, "attr_timeout=30", "entry_timeout=30",
                                    "dir_timeout=30", "dir_readahead=0"))
    assert os.stat(m / "run/latest").st_size == 3  # listed: ETag of "100"
    assert os.stat(m / "run/other").st_size == 10
    assert os.stat(m / "run/third").st_size == 4000
    s3server.put(bucket, "run/latest", b"200")
    assert (m / "run/latest").read_bytes() == b"200"
    grown = det_bytes(77, 9000)  # past the kernel's first page too
    s3server.put(bucket, "run/other", grown)
    assert (m / "run/other").read_bytes() == grown
    assert os.stat(m / "run/other").st_size == len(grown)
    s3server.put(bucket, "run/third", b"w" * 5)
    assert (m / "run/third").read_bytes() == b"w" * 5
    assert os.stat(m / "run/third").st_size == 5


def _fstat_and_map(path):
    """(fstat's size, the bytes of a private read-only map of the whole
    file): how safetensors' loader sees a file."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        mm = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
        try:
            return size, bytes(mm)
        finally:
            mm.close()


@pytest.mark.timeout(60)
def test_open_of_a_version_of_another_size_shows_its_size_to_fstat_and_mmap(
        s3server, bucket, mount, cdir):
    """The kernel caches a file's size for attr_timeout; a fresh listing
    (dir_timeout) names a new version of another size, and open pins it:
    fstat and a private mmap of that handle (safetensors' loader) show the
    new version whole, never the new bytes cut to the old size or padded
    to it (test_frameworks' safetensors replay read 600 100 bytes of the
    600 200-byte shard)."""
    old, grown, shrunk = det_bytes(1, 600_100), det_bytes(2, 600_200), det_bytes(3, 4096)
    # a directory of 1 000 names: a lookup answers from a listing past
    # dir_timeout and refreshes it after replying (doc/architecture.md)
    s3server.put_many_small(bucket, [(f"run/o-{i:04d}", b"o") for i in range(1000)])
    s3server.put(bucket, "run/shard", old)
    m = mount(bucket, options=copts(cdir, "dir_readahead=0"))
    for new in (grown, shrunk):
        assert os.stat(m / "run/shard").st_size in (len(old), len(grown))
        s3server.put(bucket, "run/shard", new)
        time.sleep(1.2)
        size, got = _fstat_and_map(m / "run/shard")
        seen = (size, sha256_bytes(got))
        prev = grown if new is shrunk else old
        assert seen in ((len(prev), sha256_bytes(prev)), (len(new), sha256_bytes(new))), (
            f"{seen[0]} bytes, neither the old version whole nor the new one")


@pytest.mark.timeout(60)
def test_replaced_after_listing_a_mapped_file_is_one_version_whole(
        s3server, bucket, mount, cdir):
    """Another host replaces a shard with one of another size after this
    mount listed it (attr_timeout=30: open trusts that listing).  A reader
    that opens, fstats and maps it (safetensors) gets one version whole:
    the size and the bytes of the same version, never the new bytes cut
    to the old size (test_frameworks' safetensors replay, 4 runs in 10
    under load: 600 100 bytes of the 600 200-byte shard)."""
    old, new = det_bytes(11, 600_100), det_bytes(12, 600_200)
    s3server.put(bucket, "run/shard", old)
    m = mount(bucket, options=copts(cdir, "attr_timeout=30", "entry_timeout=30",
                                    "dir_timeout=30", "dir_readahead=0"))
    assert os.stat(m / "run/shard").st_size == len(old)  # listed
    s3server.put(bucket, "run/shard", new)
    size, got = _fstat_and_map(m / "run/shard")
    assert (size, sha256_bytes(got)) == (len(new), sha256_bytes(new)), (
        f"fstat said {size} bytes; the bytes mapped are "
        f"{'the new version cut to the old size' if got == new[:size] else 'neither version'}")
    # and the mount counts it (doc/metrics.md)
    assert cache_of(status(m))["replaced_opens"] == 1, status(m)


@pytest.mark.timeout(60)
def test_replaced_file_open_twice_before_first_read_reads_the_new_version(
        s3server, bucket, mount, cdir):
    """Two readers on this host (Megatron's loader on two ranks, or a
    poller and the job) open a listed `latest` file that another host has
    rewritten (same size) since this mount listed it; both open before
    either reads.  Both reads return the new version: the kernel holds no
    bytes of the old one, so neither open handle stops the other from
    switching (CI saw EIO here)."""
    s3server.put(bucket, "run/latest", b"100")
    m = mount(bucket, options=copts(cdir, "attr_timeout=30", "entry_timeout=30",
                                    "dir_timeout=30"))
    assert os.stat(m / "run/latest").st_size == 3
    s3server.put(bucket, "run/latest", b"200")
    f1 = open(m / "run/latest", "rb")
    f2 = open(m / "run/latest", "rb")
    try:
        assert f1.read() == b"200"
        assert f2.read() == b"200"
    finally:
        f1.close()
        f2.close()
    assert (m / "run/latest").read_bytes() == b"200"
