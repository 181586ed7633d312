"""A full cache disk never fails a read: the data is still in S3.

The cache directory lives on a small tmpfs.  (1) When the disk is already
too full for an object, the open reads uncached.  (2) When the disk fills
up while the object downloads (another program writes a big file), the
download fails, the reader notices, and it goes on reading uncached: every
byte it gets is right, and the failure is logged, not returned."""
import os
import subprocess
import time

import pytest

import test_cache
from helpers import ThrottleProxy, ckptfs_status, det_bytes, sha256_bytes

MIB = 1 << 20


@pytest.fixture
def small_disk(tmp_path):
    d = tmp_path / "smallfs"
    d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m,mode=0700",
                    "tmpfs", str(d)], check=True)
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], check=False)


def fill(path, mib):
    """Writes up to mib MiB into path until the disk is full."""
    with open(path, "wb") as f:
        try:
            for _ in range(mib):
                f.write(b"\0" * MIB)
            f.flush()
            os.fsync(f.fileno())
        except OSError:
            pass


def put(s3server, bucket, key, body):
    s3server.client().put_object(Bucket=bucket, Key=key, Body=body)


def test_disk_too_full_at_open_reads_uncached(s3server, bucket, mount, small_disk):
    body = det_bytes(7, 20 * MIB)
    put(s3server, bucket, "big.bin", body)
    fill(small_disk / "ballast", 12)  # leaves ~12 MiB: the object cannot fit
    m = mount(bucket, options=(f"cache_dir={small_disk}/cache",
                               "cache_min_free=1M"))
    got = (m.path / "big.bin").read_bytes()
    assert sha256_bytes(got) == sha256_bytes(body)
    st = ckptfs_status(m.path)
    assert st["cache"]["uncached_opens"] >= 1, st


@pytest.mark.timeout(180)
def test_disk_filling_during_download_falls_back(s3server, bucket, mount,
                                                 small_disk, tmp_path):
    body = det_bytes(8, 16 * MIB)
    put(s3server, bucket, "big.bin", body)
    # 2 MiB/s per connection, one connection: the download takes ~8 s
    with ThrottleProxy(s3server.endpoint, rate=2 * MIB) as proxy:
        m = test_cache.mount_via(
            mount, s3server, bucket, proxy,
            (f"cache_dir={small_disk}/cache", "cache_min_free=0",
             "part_size=1M", "conns_per_file=1", "conns=1", "no_passthrough"),
            tmp_path / "mnt")
        with open(m.path / "big.bin", "rb") as f:
            first = f.read(MIB)
            assert first == body[:MIB]
            # the disk fills while the rest is still downloading
            fill(small_disk / "ballast", 64)
            proxy.rate = None  # then the link is fast again
            rest = f.read()
        assert first + rest == body, "bytes differ after the cache disk filled"
    log = m.log_text()
    assert "reading uncached" in log, log[-2000:]
    assert ckptfs_status(m.path)["cache"]["uncached_opens"] >= 1
