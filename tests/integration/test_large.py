"""Offsets above 4 GiB (32-bit offset/size bugs) on a 5.1 GiB object (the
issue asks for files over 5 GiB, the largest single PUT S3 allows).

How the object is made cheaply: it is assembled on the server with
UploadPartCopy from one 64 MiB + 12345 byte source object, so the test
uploads 64 MiB, not 5.1 GiB.  The source is patterned (every 4 KiB page
starts with its own offset, followed by a fixed filler), and the test
server stores the default placement zstd-compressed (rgw.sh,
RGW_COMPRESSION), so the 5.1 GiB cost a few MiB of memstore RAM.  The part
size does not divide 4 GiB, so a read that lost the high bits of its offset
returns different bytes and is caught.

Skipped when the server cannot hold it (no compression and a memstore below
5.6 GiB), when the local disk has under 12 GiB free (ckptfs may cache the
whole file), or with CKPTFS_TEST_SKIP_HUGE=1.
"""

import os
import random
import shutil
import stat
import tempfile
from concurrent.futures import ThreadPoolExecutor

import pytest

from helpers import det_bytes, run, sha256_bytes

GiB = 1 << 30
SRC = (64 << 20) + 12345            # part size: not a divisor of 4 GiB
TOTAL = 5200 << 20                  # 5.08 GiB: over the 5 GiB PUT limit
KEY = "huge/checkpoint.bin"


def _source():
    filler = det_bytes(11, 4096 - 16)
    return b"".join(b"off=%011x|" % o + filler for o in range(0, SRC, 4096))[:SRC]


def expected(src, off, n):
    """Bytes [off, off+n) of the object: part k is src[0:SRC]."""
    end = min(off + n, TOTAL)
    out = bytearray()
    while off < end:
        i = off % SRC
        take = min(SRC - i, end - off)
        out += src[i:i + take]
        off += take
    return bytes(out)


@pytest.fixture(scope="module")
def huge(s3server):
    if os.environ.get("CKPTFS_TEST_SKIP_HUGE") == "1":
        pytest.skip("CKPTFS_TEST_SKIP_HUGE=1")
    if s3server.compression == "none" and s3server.capacity < TOTAL + GiB // 2:
        pytest.skip(f"test server capacity {s3server.capacity >> 20} MiB without "
                    "compression cannot hold a 5.1 GiB object")
    free = shutil.disk_usage(tempfile.gettempdir()).free
    if free < 12 * GiB:
        pytest.skip(f"only {free >> 30} GiB free on disk for the ckptfs cache")
    c = s3server.client()
    b = s3server.new_bucket("huge")
    src = _source()
    c.put_object(Bucket=b, Key="src/pattern.bin", Body=src)
    up = c.create_multipart_upload(Bucket=b, Key=KEY)["UploadId"]
    nparts = (TOTAL + SRC - 1) // SRC

    def part(i):
        n = min(SRC, TOTAL - i * SRC)
        r = c.upload_part_copy(Bucket=b, Key=KEY, UploadId=up, PartNumber=i + 1,
                               CopySource={"Bucket": b, "Key": "src/pattern.bin"},
                               CopySourceRange=f"bytes=0-{n - 1}")
        return {"PartNumber": i + 1, "ETag": r["CopyPartResult"]["ETag"]}
    with ThreadPoolExecutor(4) as ex:
        parts = list(ex.map(part, range(nparts)))
    c.complete_multipart_upload(Bucket=b, Key=KEY, UploadId=up,
                                MultipartUpload={"Parts": parts})
    assert c.head_object(Bucket=b, Key=KEY)["ContentLength"] == TOTAL
    # the server itself serves the high offsets right
    o = (4 * GiB) + 777
    got = c.get_object(Bucket=b, Key=KEY, Range=f"bytes={o}-{o + 99}")["Body"].read()
    assert got == expected(src, o, 100)
    return b, src


@pytest.fixture(scope="module")
def hmnt(huge, module_mounter):
    return module_mounter(huge[0])


def test_size_above_4gib(huge, hmnt):
    st = os.stat(hmnt / KEY)
    assert stat.S_ISREG(st.st_mode)
    assert st.st_size == TOTAL
    out = run(["stat", "-c", "%s", hmnt / KEY]).stdout.strip()
    assert int(out) == TOTAL
    assert int(run(["du", "-b", hmnt / KEY]).stdout.split()[0]) == TOTAL
    assert st.st_blocks * 512 >= TOTAL


@pytest.mark.timeout(300)
def test_pread_above_4gib(huge, hmnt):
    _, src = huge
    four = 4 * GiB
    cases = [(0, 4096), (SRC - 10, 20), (2 * GiB - 5, 10), (2 * GiB, 4096),
             (four - 5, 10), (four - 4096, 8192), (four, 4096), (four + 1, 1),
             (four + SRC, 65536), (TOTAL - 4096, 4096), (TOTAL - 1, 1),
             (TOTAL - 10, 1 << 20), (TOTAL, 1), (TOTAL + 1, 4096),
             (TOTAL + GiB, 10), (3 * GiB + 12345, 1 << 20),
             (5 * GiB - 3, 6), (5 * GiB, 4096), (5 * GiB + 4097, 65536)]
    rng = random.Random(99)
    cases += [(rng.randrange(four, TOTAL), rng.choice([4096, 65536, 1 << 20]))
              for _ in range(40)]
    cases += [(rng.randrange(0, four), rng.choice([4096, 1 << 20])) for _ in range(10)]
    fd = os.open(hmnt / KEY, os.O_RDONLY)
    try:
        for off, n in cases:
            got = os.pread(fd, n, off)
            assert got == expected(src, off, n), f"pread(n={n}, off={off:#x})"
    finally:
        os.close(fd)


@pytest.mark.timeout(300)
def test_tools_read_above_4gib(huge, hmnt):
    _, src = huge
    # tail seeks to the end; dd skips to 4 GiB + 1 MiB
    out = run(["tail", "-c", "5000", hmnt / KEY], text=False).stdout
    assert out == expected(src, TOTAL - 5000, 5000)
    p = run(["sh", "-c", f"dd if='{hmnt}/{KEY}' bs=1M skip=4097 count=3 status=none | sha256sum"],
            timeout=200)
    assert p.stdout.split()[0] == sha256_bytes(expected(src, 4097 << 20, 3 << 20))
    with open(hmnt / KEY, "rb") as f:
        f.seek(-123, os.SEEK_END)
        assert f.tell() == TOTAL - 123
        assert f.read() == expected(src, TOTAL - 123, 123)
