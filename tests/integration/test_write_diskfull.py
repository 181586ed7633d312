"""A full cache disk while writing (issue 4, doc/commit.md "Backpressure"):
the writer gets ENOSPC, what was staged before stays intact and gets
committed, and once space is freed writes work again.  The cache directory
lives on a 32 MiB tmpfs (as in test_cache_diskfull.py).  Also: a mount
with a small max_staged over a slow link still stores every byte."""
import collections
import errno
import os
import re
import subprocess
import time

import pytest

from helpers import (CKPTFS_BIN, UploadThrottleProxy, ckptfs_commit, ckptfs_status,
                     ckptfs_sync, det_bytes, is_protocol_key, kill_ckptfs, observer_options, observer_settle, pending_markers, run,
                     s3_get, s3_sizes, sha256_bytes, tree_view)

MiB = 1 << 20


def _tmpfs(d, size):
    """A tmpfs of `size` at d (made), unmounted when the generator ends."""
    d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700",
                    "tmpfs", str(d)], check=True)
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], check=False)


@pytest.fixture
def small_disk(tmp_path):
    yield from _tmpfs(tmp_path / "smallfs", "32m")


def writer_on(mount, bucket, disk, *more):
    return mount(bucket, options=(f"cache_dir={disk}/cache", "cache_min_free=1M",
                                  "commit_delay=600", *more))


def write_until_full(path, limit=96 * MiB):
    """Writes 1 MiB chunks to path until an error (write or close);
    returns (bytes written, the OSError or None)."""
    chunk = det_bytes(5, MiB)
    written, err = 0, None
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    try:
        while written < limit:
            written += os.write(fd, chunk)
    except OSError as e:
        err = e
    finally:
        try:
            os.close(fd)
        except OSError as e:
            err = err or e
    return written, err


@pytest.mark.timeout(120)
def test_enospc_keeps_staged_files_and_writes_work_after_freeing(
        s3server, bucket, mount, tmp_path, small_disk):
    s3 = s3server.client()
    s3server.put(bucket, "run/")
    w = writer_on(mount, bucket, small_disk)
    o = mount(bucket, options=observer_options(tmp_path / "cache-o"))
    d = w / "run/ckpt-1"
    os.mkdir(d)
    a = det_bytes(1, 8 * MiB + 1)
    (d / "a.bin").write_bytes(a)
    written, err = write_until_full(d / "b.bin")
    assert err is not None, f"{written} bytes written on a 32 MiB cache disk, no error"
    assert err.errno in (errno.ENOSPC, errno.EDQUOT), err
    assert written < 32 * MiB, written
    assert (d / "a.bin").read_bytes() == a, "a staged file was damaged by the full disk"
    # free the space: the partial file goes, then writes work again
    os.unlink(d / "b.bin")
    c = det_bytes(2, 6 * MiB)
    (d / "c.bin").write_bytes(c)
    assert (d / "c.bin").read_bytes() == c
    ckptfs_commit(d)
    observer_settle()
    assert tree_view(o / "run/ckpt-1") == {"a.bin": len(a), "c.bin": len(c)}
    assert (o / "run/ckpt-1/a.bin").read_bytes() == a
    assert (o / "run/ckpt-1/c.bin").read_bytes() == c
    assert s3_get(s3, bucket, "run/ckpt-1/a.bin") == a
    assert s3_get(s3, bucket, "run/ckpt-1/c.bin") == c
    assert s3_get(s3, bucket, "run/ckpt-1/b.bin") is None
    assert not pending_markers(s3, bucket)


@pytest.mark.timeout(120)
def test_dd_reports_no_space_and_the_mount_recovers(s3server, bucket, mount, tmp_path,
                                                    small_disk):
    """dd of 64 MiB into a file outside any new directory fails with "No
    space left on device"; after rm of it a new file is written and reaches
    the bucket; the failed file never does."""
    s3 = s3server.client()
    w = writer_on(mount, bucket, small_disk)
    before = det_bytes(3, 4 * MiB)
    (w / "before.bin").write_bytes(before)
    p = run(["dd", "if=/dev/zero", f"of={w / 'big.bin'}", "bs=1M", "count=64",
             "status=none"], check=False, timeout=120)
    assert p.returncode != 0, "dd of 64 MiB onto a 32 MiB cache disk succeeded"
    assert "No space left on device" in p.stderr, p.stderr
    run(["rm", "-f", w / "big.bin"])
    after = det_bytes(4, 6 * MiB)
    (w / "after.bin").write_bytes(after)
    assert (w / "before.bin").read_bytes() == before
    ckptfs_sync(w)
    assert s3_get(s3, bucket, "before.bin") == before
    assert s3_get(s3, bucket, "after.bin") == after
    assert s3_get(s3, bucket, "big.bin") is None
    assert not pending_markers(s3, bucket)


@pytest.mark.timeout(120)
def test_small_max_staged_over_a_slow_link_stores_every_byte(
        s3server, bucket, mount, tmp_path):
    """max_staged=4 MiB, uploads at 8 MiB/s: writing 3 x 6 MiB (writers
    wait for uploads rather than fail) ends with every byte in the bucket."""
    s3 = s3server.client()
    s3server.put(bucket, "run/")
    files = {f"f{i}.bin": det_bytes(10 + i, 6 * MiB + i) for i in range(3)}
    mp = tmp_path / "mnt"
    mp.mkdir()
    with UploadThrottleProxy(s3server.endpoint, up_rate=8 * MiB) as proxy:
        argv = mount.argv(bucket, "", mp, [f"cache_dir={tmp_path}/cache",
                                           "commit_delay=600", f"max_staged={4 * MiB}"],
                          endpoint=False)
        argv += ["--endpoint", proxy.endpoint, "--region", s3server.region]
        w = mount(bucket, argv=argv, mountpoint=mp)
        d = w / "run/ckpt"
        os.mkdir(d)
        for name, body in files.items():
            (d / name).write_bytes(body)
        for name, body in files.items():
            assert (d / name).read_bytes() == body
        ckptfs_commit(d, timeout=120)
        assert proxy.bytes_up >= sum(map(len, files.values()))
        assert not w.unmount(), "unmount did not go cleanly"
    for name, body in files.items():
        got = s3_get(s3, bucket, f"run/ckpt/{name}")
        assert got is not None and sha256_bytes(got) == sha256_bytes(body), name
    assert not pending_markers(s3, bucket)
    assert sorted(k for k in s3_sizes(s3, bucket, "run/ckpt/")
                  if not is_protocol_key(k) and not k.endswith("/")) == \
        [f"run/ckpt/{n}" for n in sorted(files)]


def poison_checkpoint(w, small_disk):
    """Makes run/ckpt-1 with a.bin (2 MiB) and big.bin, whose writes end in
    ENOSPC; then frees 12 MiB of the disk (a filler file written before).
    Returns (directory, a's bytes)."""
    d = w / "run/ckpt-1"
    os.mkdir(d)
    a = det_bytes(6, 2 * MiB)
    (d / "a.bin").write_bytes(a)
    written, err = write_until_full(d / "big.bin")
    assert err is not None and err.errno in (errno.ENOSPC, errno.EDQUOT), (written, err)
    os.unlink(small_disk / "filler")  # the space comes back
    return d, a


def assert_poisoned(w, d, o):
    """The checkpoint at d is held back with its cause, on the writer and
    everywhere else."""
    p = run([CKPTFS_BIN, "commit", str(d)], check=False, timeout=60)
    assert p.returncode != 0, "ckptfs commit of a checkpoint with a failed write succeeded"
    st = ckptfs_status(w)
    mine = [t for t in st.get("pending", []) if t.get("path") == "run/ckpt-1"]
    assert mine and mine[0]["state"] == "poisoned", st.get("pending")
    assert "big.bin" in mine[0]["error"] and "No space left" in mine[0]["error"], mine
    observer_settle()
    assert tree_view(o / "run/ckpt-1") is None, "a checkpoint with a failed write was published"


def fill(small_disk, n):
    with open(small_disk / "filler", "wb") as f:
        f.write(b"\0" * n)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["rewrite", "truncate", "remove"])
def test_failed_write_poisons_its_checkpoint_until_rewritten_or_removed(
        s3server, bucket, mount, tmp_path, small_disk, how):
    """ENOSPC while writing big.bin: once space returns the checkpoint is
    still never published with the short file (ckptfs commit fails, status
    says "poisoned" and why; sync names the step and what lifts it, not
    `ckptfs retry`, which refuses it); rewriting big.bin (O_TRUNC, or a
    truncate to 0 and new bytes) or removing it lets it commit."""
    s3server.put(bucket, "run/")
    fill(small_disk, 12 * MiB)
    w = writer_on(mount, bucket, small_disk)
    o = mount(bucket, options=observer_options(tmp_path / "cache-o"))
    d, a = poison_checkpoint(w, small_disk)
    assert_poisoned(w, d, o)
    p = run([CKPTFS_BIN, "sync", str(w)], check=False, timeout=60)
    assert p.returncode != 0, p.stdout
    for want in ("step", "run/ckpt-1", "big.bin", "No space left",
                 "written again or removed", "ckptfs drop"):
        assert want in p.stderr, (want, p.stderr)
    assert "ckptfs retry" not in p.stderr, p.stderr
    p = run([CKPTFS_BIN, "retry", str(w)], check=False, timeout=60)
    assert p.returncode != 0 and "poisoned" in p.stderr, (p.returncode, p.stdout, p.stderr)
    want = {"a.bin": len(a)}
    big = det_bytes(7, 4 * MiB)
    if how == "rewrite":
        (d / "big.bin").write_bytes(big)
        want["big.bin"] = len(big)
    elif how == "truncate":
        os.truncate(d / "big.bin", 0)
        with open(d / "big.bin", "r+b") as f:
            f.write(big)
        want["big.bin"] = len(big)
    else:
        os.unlink(d / "big.bin")
    ckptfs_commit(d)
    observer_settle()
    assert tree_view(o / "run/ckpt-1") == want
    if how != "remove":
        assert (o / "run/ckpt-1/big.bin").read_bytes() == big


@pytest.mark.timeout(150)
def test_poisoned_checkpoint_stays_unpublished_after_sigkill(
        s3server, bucket, mount, tmp_path, small_disk):
    """The poison is journaled: after SIGKILL and a remount the checkpoint is
    still held back with its cause; writing big.bin again lets it commit."""
    s3server.put(bucket, "run/")
    fill(small_disk, 12 * MiB)
    mp = tmp_path / "mnt-w"
    mp.mkdir()
    opts = (f"cache_dir={small_disk}/cache", "cache_min_free=1M", "commit_delay=600")
    w = mount(bucket, options=opts, mountpoint=mp)
    o = mount(bucket, options=observer_options(tmp_path / "cache-o"))
    d, a = poison_checkpoint(w, small_disk)
    assert_poisoned(w, d, o)  # space is back: the poison is journaled now
    kill_ckptfs(w)
    w = mount(bucket, options=opts, mountpoint=mp)
    d = w / "run/ckpt-1"
    assert_poisoned(w, d, o)
    # big.bin's last bytes could not be journaled on the full disk: the
    # restarted mount does not show it, the poison names it; writing it
    # again lets the checkpoint commit
    big = det_bytes(8, 3 * MiB)
    (d / "big.bin").write_bytes(big)
    ckptfs_commit(d)
    observer_settle()
    assert tree_view(o / "run/ckpt-1") == {"a.bin": len(a), "big.bin": len(big)}
    assert (o / "run/ckpt-1/big.bin").read_bytes() == big



@pytest.mark.timeout(120)
def test_a_persistent_error_is_logged_with_a_rate_limit(
        s3server, bucket, mount, tmp_path, small_disk):
    """The cache disk stays full for 5 s after a write failed in a
    checkpoint the idle trigger keeps trying to seal: each journal write
    fails (before the rate limit about 4 lines a second of the same error,
    20 in 5 s); the log now holds its first copy and, once it stops, one
    line with its count ("(repeated N times in the last S s)").  The disk
    is filled so far before the mount that the journal gets no reserve
    (which would let the first failed write be journaled, and the error
    end)."""
    s3server.put(bucket, "run/")
    fill(small_disk, 25 * MiB)
    w = writer_on(mount, bucket, small_disk, "commit_delay=1")
    d = w / "run/ckpt-1"
    os.mkdir(d)
    written, err = write_until_full(d / "big.bin")
    assert err is not None and err.errno in (errno.ENOSPC, errno.EDQUOT), (written, err)
    time.sleep(5)
    os.unlink(small_disk / "filler")  # the space comes back
    assert not w.unmount(), "unmount did not go cleanly"
    lines = [ln.split("] ", 1)[-1] for ln in w.log_text().splitlines() if "] " in ln]
    errors = [ln for ln in lines if ln.startswith("error: ")]
    base = collections.Counter(re.sub(r" \(repeated \d+ times? in the last \d+ s\)$", "", ln)
                               for ln in errors)
    assert base, f"no error logged while the disk was full:\n{w.log_tail()}"
    worst, n = base.most_common(1)[0]
    assert "disk is full" in worst, base
    assert n <= 4, f"{n} copies of {worst!r} in 5 s:\n{w.log_tail()}"
    summary = [ln for ln in errors if ln.startswith(worst + " (repeated ")]
    assert summary, f"no count of {worst!r}:\n{w.log_tail()}"
    assert int(re.search(r"repeated (\d+) time", summary[0]).group(1)) >= 5, summary
    assert errors.index(worst) < errors.index(summary[0]), "the first copy comes first"


@pytest.fixture
def pt_disk(tmp_path):
    """A 1300 MiB tmpfs: more than cache_min_free (1 MiB) + 1 GiB free, so
    writes go through passthrough (doc/commit.md "Write passthrough")."""
    yield from _tmpfs(tmp_path / "ptfs", "1300m")


@pytest.mark.timeout(180)
def test_passthrough_write_that_fills_the_disk_is_never_published(
        s3server, bucket, mount, tmp_path, pt_disk):
    """dd into a checkpoint written through passthrough fills the cache
    disk: dd gets ENOSPC, which ckptfs never sees.  The checkpoint is still
    never published with the short file (commit fails, status names the
    file and says the disk filled while it was written through passthrough,
    another mount and the bucket see nothing); rewriting it once space is
    back lets it commit."""
    s3 = s3server.client()
    s3server.put(bucket, "run/")
    w = writer_on(mount, bucket, pt_disk, "debug")
    o = mount(bucket, options=observer_options(tmp_path / "cache-o"))
    d = w / "run/ckpt-1"
    os.mkdir(d)
    a = det_bytes(6, 2 * MiB)
    (d / "a.bin").write_bytes(a)
    fd = os.open(d / "big.bin", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    os.close(fd)
    # room made after the open would be too late for passthrough: the
    # filler (freed later) takes its share of the disk now
    fill(pt_disk, 200 * MiB)
    p = run(["dd", "if=/dev/zero", f"of={d / 'big.bin'}", "bs=1M", "count=1400",
             "status=none"], check=False, timeout=120)
    assert p.returncode != 0 and "No space left on device" in p.stderr, \
        (p.returncode, p.stderr)
    log = w.log_text()
    assert re.search(r"run/ckpt-1/big\.bin: passthrough to staging file", log), \
        f"big.bin was not written through passthrough:\n{w.log_tail()}"
    assert "the staging disk is full" not in log, "the write went through ckptfs"
    p = run([CKPTFS_BIN, "commit", str(d)], check=False, timeout=60)
    assert p.returncode != 0, "ckptfs commit of a checkpoint with a short file succeeded"
    st = ckptfs_status(w)
    mine = [t for t in st.get("pending", []) if t.get("path") == "run/ckpt-1"]
    assert mine and mine[0]["state"] == "poisoned", st.get("pending")
    assert "big.bin" in mine[0]["error"] and "passthrough" in mine[0]["error"], mine
    observer_settle()
    assert tree_view(o / "run/ckpt-1") is None, "a checkpoint with a short file was published"
    # what was uploaded stays hidden behind the checkpoint's pending marker
    assert pending_markers(s3, bucket, "run/"), "the checkpoint is not pending"
    os.unlink(pt_disk / "filler")  # the space comes back
    big = det_bytes(7, 4 * MiB)
    (d / "big.bin").write_bytes(big)
    ckptfs_commit(d)
    observer_settle()
    assert tree_view(o / "run/ckpt-1") == {"a.bin": len(a), "big.bin": len(big)}
    assert s3_get(s3, bucket, "run/ckpt-1/big.bin") == big


@pytest.mark.timeout(150)
def test_sigkill_on_the_full_disk_right_after_a_failed_write_keeps_the_poison(
        s3server, bucket, mount, tmp_path, small_disk):
    """ckptfs is SIGKILLed while the disk is still full, right after a
    write failed (nothing tried since): the poison reached the journal all
    the same (the journal's reserve was freed for it).  After space comes
    back and a remount, the checkpoint is still held back with its cause,
    published neither with the short file nor without it; writing it again
    lets it commit."""
    s3 = s3server.client()
    s3server.put(bucket, "run/")
    fill(small_disk, 12 * MiB)
    mp = tmp_path / "mnt-w"
    mp.mkdir()
    opts = (f"cache_dir={small_disk}/cache", "cache_min_free=1M", "commit_delay=600")
    w = mount(bucket, options=opts, mountpoint=mp)
    o = mount(bucket, options=observer_options(tmp_path / "cache-o"))
    d = w / "run/ckpt-1"
    os.mkdir(d)
    a = det_bytes(6, 2 * MiB)
    (d / "a.bin").write_bytes(a)
    written, err = write_until_full(d / "big.bin")
    assert err is not None and err.errno in (errno.ENOSPC, errno.EDQUOT), (written, err)
    kill_ckptfs(w)
    os.unlink(small_disk / "filler")  # the space comes back
    w = mount(bucket, options=opts, mountpoint=mp)
    d = w / "run/ckpt-1"
    assert_poisoned(w, d, o)
    assert pending_markers(s3, bucket, "run/"), "the checkpoint is not pending"
    big = det_bytes(8, 3 * MiB)
    (d / "big.bin").write_bytes(big)
    ckptfs_commit(d)
    observer_settle()
    assert tree_view(o / "run/ckpt-1") == {"a.bin": len(a), "big.bin": len(big)}
