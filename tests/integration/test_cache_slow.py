"""The read cache over a slow link (issue 3): ckptfs talks to the S3 server
through helpers.ThrottleProxy, which caps each connection at RATE bytes/s,
so that a download takes seconds and the tests can observe it in progress:
random reads jump the queue, nobody waits for the whole file, downloads
continue after close, an object replaced or deleted during a download never
gives an old handle another version's bytes, a ckptfs killed mid-download
leaves a cache the next mount resumes from, and prefetch draws a progress bar
on a terminal only."""

import errno
import os
import pty
import select
import subprocess
import time

import pytest

import helpers
import test_cache
from helpers import ThrottleProxy, ckptfs_status, det_bytes, run, sha256_bytes, wait_until
from test_cache import (MiB, Reader, cache_of, copts, expected_cache_path, kill_mount,
                        pread_all, sha_of, wait_idle)

RATE = 1_000_000  # bytes/s per connection


@pytest.fixture
def cdir(tmp_path):
    """A private cache directory (ckptfs creates it)."""
    return tmp_path / "cache"


@pytest.fixture
def link(s3server):
    """A slow link to the S3 server: RATE bytes/s per connection."""
    with ThrottleProxy(s3server.endpoint, rate=RATE) as p:
        yield p


def mount_via(mount, s3server, bucket, proxy, options, tmp_path, name="slow"):
    return test_cache.mount_via(mount, s3server, bucket, proxy, options,
                                tmp_path / f"mnt-{name}")


def downloads(m):
    return ckptfs_status(m)["downloads"]


# --------------------------------------------------------------------------

@pytest.mark.timeout(90)
def test_random_read_jumps_the_queue(s3server, bucket, mount, cdir, link, tmp_path):
    """24 MiB in 1 MiB parts over 4 connections of 1 MB/s: a full download
    takes ~6 s.  A pread of the last bytes right after open, and one in the
    middle, return while most of the file is still missing, with the right
    bytes; afterwards the whole file is right and was downloaded once."""
    size = 24 * MiB + 4321
    body = det_bytes(2001, size)
    s3server.put(bucket, "big.bin", body)
    m = mount_via(mount, s3server, bucket, link,
                  copts(cdir, "conns_per_file=4", "conns=4"), tmp_path)
    fd = os.open(m / "big.bin", os.O_RDONLY)
    try:
        t0 = time.monotonic()
        tail = os.pread(fd, 8192, size - 8192)
        t_tail = time.monotonic() - t0
        d = downloads(m)
        assert tail == body[-8192:], "wrong bytes at the end of the file"
        assert d["active"] >= 1 and d["downloaded_bytes"] <= size * 0.6, \
            (f"the read of the last bytes returned after {t_tail:.1f}s, when "
             f"{d['downloaded_bytes']} of {size} bytes were downloaded: it waited "
             f"for (most of) the file instead of jumping the queue ({d})")
        mid = size // 2 + 12345
        got = os.pread(fd, 100000, mid)
        d = downloads(m)
        assert got == body[mid:mid + 100000]
        assert d["active"] >= 1 and d["downloaded_bytes"] < size, d
        assert pread_all(fd, 0, size, step=1 << 20) == body
    finally:
        os.close(fd)
    s = wait_idle(m)
    assert s["downloads"]["downloaded_bytes"] == size, \
        f"chunks downloaded more than once: {s}"
    assert sha_of(m / "big.bin") == sha256_bytes(body)


@pytest.mark.timeout(90)
def test_first_bytes_do_not_wait_and_download_continues_after_close(
        s3server, bucket, mount, cdir, link, tmp_path):
    """The first read returns long before the file is complete; the
    download goes on after the handle is closed, and the file is then
    served from the cache."""
    size = 12 * MiB + 1
    body = det_bytes(2101, size)
    s3server.put(bucket, "f.bin", body)
    m = mount_via(mount, s3server, bucket, link,
                  copts(cdir, "conns_per_file=4", "conns=4"), tmp_path)
    fd = os.open(m / "f.bin", os.O_RDONLY)
    try:
        assert os.pread(fd, 4096, 0) == body[:4096]
        d = downloads(m)
        assert d["active"] >= 1 and d["downloaded_bytes"] <= size // 2, d
    finally:
        os.close(fd)
    d = downloads(m)
    assert d["active"] >= 1, f"download stopped at close: {d}"
    s = wait_idle(m, timeout=40)
    assert s["downloads"]["downloaded_bytes"] == size, s
    assert expected_cache_path(s3server, cdir, bucket, "f.bin").read_bytes() == body
    link.rate = 20000  # too slow for 12 MiB: the read must come from disk
    t0 = time.monotonic()
    assert sha_of(m / "f.bin") == sha256_bytes(body)
    assert time.monotonic() - t0 < 10
    s = ckptfs_status(m)
    assert s["downloads"]["downloaded_bytes"] == size and cache_of(s)["hits"] >= 1, s


@pytest.mark.timeout(90)
@pytest.mark.parametrize("change", ["overwrite", "delete"])
def test_object_changed_during_download_never_mixes_versions(
        s3server, bucket, mount, cdir, link, tmp_path, change):
    """The object is replaced (same size) or deleted while its download is in
    progress.  The old handle must read only the version it opened: each
    1 MiB read returns the old bytes or fails (EIO) -- the bytes of the new
    version never, and no read hangs.  A new open later gets the new
    version."""
    size = 16 * MiB
    v1 = det_bytes(2201, size)
    v2 = det_bytes(2202, size)
    s3server.put(bucket, "w.bin", v1)
    m = mount_via(mount, s3server, bucket, link,
                  copts(cdir, "conns_per_file=4", "conns=4"), tmp_path)
    fd = os.open(m / "w.bin", os.O_RDONLY)
    outcome = []
    try:
        assert os.pread(fd, 4096, 0) == v1[:4096]
        d = downloads(m)
        assert d["active"] >= 1 and d["downloaded_bytes"] < size // 2, \
            f"the download is not in progress: {d}"
        if change == "overwrite":
            s3server.put(bucket, "w.bin", v2)
        else:
            s3server.client().delete_object(Bucket=bucket, Key="w.bin")
        for i in range(size // MiB):
            off = i * MiB
            try:
                b = os.pread(fd, MiB, off)
            except OSError as e:
                outcome.append(f"errno {e.errno}")
                continue
            if b == v1[off:off + MiB]:
                outcome.append("old")
            elif b == v2[off:off + MiB]:
                outcome.append("NEW")
            else:
                outcome.append("MIXED")
    finally:
        os.close(fd)
    assert "NEW" not in outcome and "MIXED" not in outcome, \
        f"the old handle got other bytes than its version's: {outcome}"
    assert outcome[0] == "old", outcome
    ok_errors = {f"errno {e}" for e in (errno.EIO, errno.ENOENT, errno.ESTALE)}
    assert all(o == "old" or o in ok_errors for o in outcome), \
        f"a failed read must fail with EIO/ENOENT/ESTALE: {outcome}"
    print(change, outcome)
    time.sleep(1.6)
    if change == "overwrite":
        link.rate = None
        assert sha_of(m / "w.bin") == sha256_bytes(v2)
    else:
        assert not os.path.exists(m / "w.bin")


@pytest.mark.timeout(120)
def test_ckptfs_killed_mid_download_next_mount_resumes(s3server, bucket, mount, cdir,
                                                        link, tmp_path):
    """ckptfs is SIGKILLed while a 16 MiB download is half done (chunks
    written, some half written).  A new mount on the same cache_dir (direct
    link) serves the right bytes and downloads less than the whole object:
    the chunks recorded before the crash are kept (design: resumed)."""
    size = 16 * MiB + 99
    body = det_bytes(2301, size)
    s3server.put(bucket, "r.bin", body)
    m1 = mount_via(mount, s3server, bucket, link,
                   copts(cdir, "conns_per_file=4", "conns=4"), tmp_path)
    r = Reader(m1 / "r.bin")
    try:
        assert r.pread(0, 4096) == (4096, sha256_bytes(body[:4096]))
        assert wait_until(lambda: downloads(m1)["downloaded_bytes"] >= 6 * MiB, 30), \
            downloads(m1)
        d1 = downloads(m1)
        assert d1["active"] >= 1 and d1["downloaded_bytes"] < size, d1
        kill_mount(m1)
    finally:
        r.kill()
    m2 = mount(bucket, options=copts(cdir))
    assert sha_of(m2 / "r.bin") == sha256_bytes(body), "wrong bytes after the crash"
    s = wait_idle(m2)
    got = s["downloads"]["downloaded_bytes"]
    assert got < size, f"the download started over after the crash ({got} of {size} bytes)"
    assert expected_cache_path(s3server, cdir, bucket, "r.bin").read_bytes() == body
    assert not m2.unmount()
    m3 = mount(bucket, options=copts(cdir))
    assert sha_of(m3 / "r.bin") == sha256_bytes(body)
    assert ckptfs_status(m3)["downloads"]["downloaded_bytes"] == 0


def _run_with_pty_stderr(argv, timeout):
    """Run argv with stderr on a pseudo-terminal; (rc, stdout, tty output)."""
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=slave, env=helpers.clean_env())
    finally:
        os.close(slave)
    tty = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            r, _, _ = select.select([master], [], [], 0.2)
            if r:
                try:
                    b = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not b:
                    break
                tty += b
            elif p.poll() is not None:
                break
        else:
            p.kill()
        out = p.stdout.read()
        rc = p.wait(30)
    finally:
        os.close(master)
        p.stdout.close()
    return rc, out.decode(errors="replace"), tty.decode(errors="replace")


@pytest.mark.timeout(90)
def test_prefetch_progress_bar_only_on_a_terminal(s3server, bucket, mount, cdir, link,
                                                  tmp_path):
    files = {"ckpt/a.bin": det_bytes(2401, 6 * MiB + 1),
             "ckpt/b.bin": det_bytes(2402, 4 * MiB + 2)}
    other = {"more/c.bin": det_bytes(2403, 6 * MiB + 3)}
    s3server.put_many(bucket, list({**files, **other}.items()))
    m = mount_via(mount, s3server, bucket, link,
                  copts(cdir, "conns_per_file=4", "conns=8"), tmp_path)
    rc, out, tty = _run_with_pty_stderr([helpers.CKPTFS_BIN, "prefetch", str(m / "ckpt")], 60)
    assert rc == 0, (rc, out, tty)
    assert out.startswith(f"{m / 'ckpt'}: 2 files"), out
    assert "\r" in tty and "#" in tty and "/s" in tty, \
        f"no progress bar on the terminal: {tty!r}"
    s = wait_idle(m)
    assert s["downloads"]["downloaded_bytes"] == sum(map(len, files.values())), s

    p = run([helpers.CKPTFS_BIN, "prefetch", m / "more"], timeout=60)
    assert p.stderr == "", f"progress output on a pipe: {p.stderr!r}"
    assert p.stdout.startswith(f"{m / 'more'}: 1 file"), p.stdout
    link.rate = 20000  # too slow for the data: reads must come from disk
    for k, v in {**files, **other}.items():
        assert sha_of(m / k) == sha256_bytes(v), k
