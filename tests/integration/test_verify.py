"""Downloads checked against the manifest (issue 4): every file a
transaction commits gets, in its manifest entry, the standard CRC-32C of
each 8 MiB block ("block", "blocks"); another mount reading the file checks
each downloaded piece against it.  A piece with the wrong bytes is fetched
again; if it stays wrong the read fails with EIO; wrong bytes are never
returned and never kept in the cache (doc/commit.md, "Block checksums";
doc/cache.md, "Checking downloads against manifests").

The damage comes from helpers.CorruptProxy, an HTTP proxy between the
reading mount and RGW that flips one byte in the bodies of GETs of one key.
"""

import errno
import json
import os
import sqlite3
import subprocess
import time

import pytest

import helpers
from helpers import (CorruptProxy, ckptfs_commit, ckptfs_status, ckptfs_sync, det_bytes,
                     observer_options, observer_settle, s3_get, sha256_bytes)

MiB = 1 << 20
BLOCK = 8 * MiB
BIG = "model.bin"
SMALL = "meta.json"


def crc32c(data):
    """Standard CRC-32C (RFC 3720) of data."""
    try:
        from awscrt import checksums
        return checksums.crc32c(data)
    except ImportError:  # slow, but only a few MiB
        if not hasattr(crc32c, "table"):
            t = []
            for i in range(256):
                c = i
                for _ in range(8):
                    c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
                t.append(c)
            crc32c.table = t
        c = 0xFFFFFFFF
        t = crc32c.table
        for b in data:
            c = t[(c ^ b) & 0xFF] ^ (c >> 8)
        return c ^ 0xFFFFFFFF


def block_list(body):
    return "".join("%08x" % crc32c(body[o:o + BLOCK])
                   for o in range(0, len(body), BLOCK))


@pytest.fixture
def ckpt(s3server, bucket, mount, tmp_path):
    """A committed checkpoint directory ckpt/ written through a mount: a
    20 MiB file (three blocks, the last one short: multipart), a small one
    and an empty one.  Returns {name: bytes}."""
    files = {BIG: det_bytes(41, 20 * MiB + 12345),
             SMALL: b'{"step": 100}\n' * 70,
             "empty": b""}
    w = mount(bucket, options=(f"cache_dir={tmp_path}/cache-w",))
    d = w / "ckpt"
    os.mkdir(d)
    for name, body in files.items():
        (d / name).write_bytes(body)
    ckptfs_commit(d)
    return files


def manifest_files(s3, bucket, root):
    """{path: entry} of the committed manifests of root."""
    out = {}
    keys = [k for k in helpers.s3_sizes(s3, bucket, f"{root}/.ckptfs/")
            if k.rsplit("/", 1)[-1].startswith("manifest.")]
    for k in keys:
        m = json.loads(helpers.s3_get(s3, bucket, k))
        if m.get("state") == "committed":
            out.update({f["path"]: f for f in m["files"]})
    return out


def assert_manifest_blocks(s3, bucket, root, files):
    """The committed manifests of root record, for each of files ({rel:
    bytes}), the whole file's CRC-32C and the CRC-32C of each 8 MiB block
    (also used by test_crash.py: the lists survive a SIGKILL and resume)."""
    entries = manifest_files(s3, bucket, root)
    assert set(entries) == set(files), sorted(entries)
    for name, body in files.items():
        e = entries[name]
        assert e["size"] == len(body)
        assert e["crc32c"] == "%08x" % crc32c(body), name
        assert e.get("block") == BLOCK, (name, e)
        assert e.get("blocks") == block_list(body), name
        assert len(e["blocks"]) == 8 * ((len(body) + BLOCK - 1) // BLOCK)


def reader_via(mount, s3server, bucket, proxy, tmp_path, name, *opts):
    """A read-only mount with its own cache whose S3 endpoint is proxy."""
    mp = tmp_path / f"mnt-{name}"
    mp.mkdir()
    options = observer_options(tmp_path / f"cache-{name}", *opts)
    argv = mount.argv(bucket, "", mp, options, endpoint=False)
    argv += ["--endpoint", proxy.endpoint, "--region", s3server.region]
    return mount(bucket, argv=argv, mountpoint=mp)


def read_pieces(path, size, piece=MiB):
    """Reads path in piece-sized preads (one open); returns {offset: bytes
    or the errno of the failure}."""
    out = {}
    fd = os.open(path, os.O_RDONLY)
    try:
        for off in range(0, size, piece):
            try:
                out[off] = os.pread(fd, piece, off)
            except OSError as e:
                out[off] = e.errno
    finally:
        os.close(fd)
    return out


def index_crcs(cache_dir, bucket, key, etag, chunk=BLOCK):
    """{chunk: raw CRC} the reader's cache index records for key@etag (an
    entry of chunk-byte chunks)."""
    names = helpers.cache_names(bucket, key, etag)
    db = sqlite3.connect(f"file:{cache_dir}/index.db?mode=ro", uri=True,
                         timeout=30)
    try:
        q = ",".join("?" * len(names))
        rows = db.execute(f"SELECT idx, crc FROM chunks WHERE name IN ({q})",
                          names).fetchall()
        sizes = db.execute(f"SELECT chunk_size FROM entries WHERE name IN ({q})",
                           names).fetchall()
    finally:
        db.close()
    assert all(s[0] == chunk for s in sizes), sizes
    return {i: c & 0xFFFFFFFF for i, c in rows}


def raw(std):
    """The cache's CRC convention (no final inversion) of a standard one."""
    return ~std & 0xFFFFFFFF


# --------------------------------------------------------------------------

@pytest.mark.timeout(120)
def test_manifest_records_block_checksums(s3server, bucket, ckpt):
    """Each file's manifest entry has "block": 8 MiB and "blocks": the
    CRC-32C of each block, 8 hex digits per block; "crc32c" is still the
    whole file's."""
    assert_manifest_blocks(s3server.client(), bucket, "ckpt", ckpt)


@pytest.mark.timeout(180)
def test_corrupted_first_download_of_each_block_is_fetched_again(
        s3server, bucket, mount, tmp_path, ckpt):
    """The first GET of every piece of model.bin comes back with a flipped
    byte: each piece is fetched again and the reader gets the exact bytes."""
    key = f"ckpt/{BIG}"
    with CorruptProxy(s3server.endpoint, key, mode="first") as proxy:
        r = reader_via(mount, s3server, bucket, proxy, tmp_path, "r")
        body = ckpt[BIG]
        got = (r / "ckpt" / BIG).read_bytes()
        assert len(got) == len(body)
        assert sha256_bytes(got) == sha256_bytes(body), "wrong bytes returned"
        assert (r / "ckpt" / SMALL).read_bytes() == ckpt[SMALL]
        assert proxy.corrupted >= 3, (proxy.gets, proxy.corrupted)
        assert proxy.gets >= proxy.corrupted + 3, (proxy.gets, proxy.corrupted)
        st = ckptfs_status(r)
        assert st["cache"]["verify_failures"] >= proxy.corrupted, st["cache"]
        log = r.log_text()
        assert "downloading it again" in log, r.log_tail()
        assert "does not match its manifest" not in log, r.log_tail()
        # what the cache recorded is what the manifest says
        etag = s3server.head(bucket, key)["ETag"]
        crcs = index_crcs(tmp_path / "cache-r", bucket, key, etag)
        want = {i: raw(crc32c(body[i * BLOCK:(i + 1) * BLOCK]))
                for i in range(3)}
        assert crcs == want


@pytest.mark.timeout(180)
def test_corrupted_every_download_fails_with_eio_and_is_not_kept(
        s3server, bucket, mount, tmp_path, ckpt):
    """Every GET of model.bin is damaged: reads fail with EIO (never wrong
    bytes), the log names the key, the offset and both CRCs, the cache
    keeps none of the bad pieces, and once the link is clean a new open
    reads the exact bytes."""
    key = f"ckpt/{BIG}"
    body = ckpt[BIG]
    with CorruptProxy(s3server.endpoint, key, mode="all") as proxy:
        r = reader_via(mount, s3server, bucket, proxy, tmp_path, "r")
        path = r / "ckpt" / BIG
        with pytest.raises(OSError) as ei:
            path.read_bytes()
        assert ei.value.errno == errno.EIO, ei.value
        pieces = read_pieces(path, len(body))
        for off, v in pieces.items():
            assert v == errno.EIO or v == body[off:off + MiB], \
                f"wrong bytes at {off}"
        assert any(v == errno.EIO for v in pieces.values())
        # other files are not affected
        assert (r / "ckpt" / SMALL).read_bytes() == ckpt[SMALL]
        assert proxy.corrupted >= 3

        log = r.log_text()
        bad = [l for l in log.splitlines() if "does not match its manifest" in l]
        assert bad, r.log_tail()
        # one line per failed piece: key, offset, both CRCs
        first = [l for l in bad if "at offset 0 " in l]
        assert first, bad
        want = "%08x" % crc32c(body[:BLOCK])
        damaged = bytearray(body[:BLOCK])
        damaged[4096] ^= 0xFF
        got = "%08x" % crc32c(bytes(damaged))
        assert key in first[0] and want in first[0] and got in first[0], first[0]

        etag = s3server.head(bucket, key)["ETag"]
        time.sleep(0.5)  # the index writer records in batches
        wanted = {i: raw(crc32c(body[i * BLOCK:(i + 1) * BLOCK]))
                  for i in range(3)}
        kept = index_crcs(tmp_path / "cache-r", bucket, key, etag)
        assert all(kept[i] == wanted[i] for i in kept), \
            f"the cache recorded damaged chunks: {kept} (want {wanted})"

        proxy.mode = "off"
        got = path.read_bytes()
        assert sha256_bytes(got) == sha256_bytes(body), "wrong bytes after retry"
        assert index_crcs(tmp_path / "cache-r", bucket, key, etag) == wanted


@pytest.mark.timeout(180)
def test_unchecked_prefetch_in_larger_chunks_is_caught_at_open(
        s3server, bucket, mount, tmp_path, ckpt):
    """`ckptfs prefetch` (which does not read manifests) caches model.bin
    through a link that damages every GET, in 16 MiB chunks (part_size):
    the next open checks the recorded chunk CRCs against the manifest's
    8 MiB blocks combined, drops the damaged chunks, fetches them again
    through the now clean link and reads the exact bytes."""
    key = f"ckpt/{BIG}"
    body = ckpt[BIG]
    with CorruptProxy(s3server.endpoint, key, mode="all") as proxy:
        r = reader_via(mount, s3server, bucket, proxy, tmp_path, "r",
                       "part_size=16M")
        p = subprocess.run([helpers.CKPTFS_BIN, "prefetch", str(r / "ckpt" / BIG)],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        assert proxy.corrupted >= 2
        etag = s3server.head(bucket, key)["ETag"]
        chunk = 16 * MiB
        damaged = index_crcs(tmp_path / "cache-r", bucket, key, etag, chunk)
        assert len(damaged) == 2, damaged  # cached (damaged), unchecked
        proxy.mode = "off"
        observer_settle()
        got = (r / "ckpt" / BIG).read_bytes()
        assert sha256_bytes(got) == sha256_bytes(body), "damaged bytes served"
        log = r.log_text()
        assert "chunk 0 (offset 0) has CRC-32C" in log, r.log_tail()
        assert ckptfs_status(r)["cache"]["verify_failures"] >= 2
        time.sleep(0.5)  # the index writer records in batches
        assert index_crcs(tmp_path / "cache-r", bucket, key, etag, chunk) == {
            i: raw(crc32c(body[i * chunk:(i + 1) * chunk])) for i in range(2)}


@pytest.mark.timeout(180)
def test_copy_on_write_of_a_damaged_download_fails_and_stores_nothing(
        s3server, bucket, mount, tmp_path, ckpt):
    """Appending to a manifest-listed file copies it into staging through
    the cache first; with every GET damaged that copy is checked like a
    read: the open fails with EIO, and nothing with wrong bytes reaches the
    bucket.  Once the link is clean the append works on the exact bytes."""
    key = f"ckpt/{BIG}"
    body = ckpt[BIG]
    with CorruptProxy(s3server.endpoint, key, mode="all") as proxy:
        mp = tmp_path / "mnt-cow"
        mp.mkdir()
        argv = mount.argv(bucket, "", mp, (f"cache_dir={tmp_path}/cache-cow",),
                          endpoint=False)
        argv += ["--endpoint", proxy.endpoint, "--region", s3server.region]
        w = mount(bucket, argv=argv, mountpoint=mp)
        with pytest.raises(OSError) as ei:
            with open(w / "ckpt" / BIG, "ab") as f:
                f.write(b"appended")
        assert ei.value.errno == errno.EIO, ei.value
        assert proxy.corrupted >= 1
        ckptfs_sync(w)
        s3 = s3server.client()
        assert sha256_bytes(s3_get(s3, bucket, key)) == sha256_bytes(body), \
            "a damaged copy was stored"

        proxy.mode = "off"
        with open(w / "ckpt" / BIG, "ab") as f:
            f.write(b"appended")
        ckptfs_sync(w)
        got = s3_get(s3, bucket, key)
        assert sha256_bytes(got) == sha256_bytes(body + b"appended")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("mode", ["first", "all"])
def test_uncached_reads_check_whole_blocks(s3server, bucket, mount, tmp_path,
                                           ckpt, mode):
    """A cache too small for the file (cache_size=1M): reads go to S3
    uncached, and are checked too, a whole block at a time.  A first
    damaged GET of each block is fetched again (exact bytes); damage on
    every GET gives EIO and never wrong bytes."""
    key = f"ckpt/{BIG}"
    body = ckpt[BIG]
    with CorruptProxy(s3server.endpoint, key, mode=mode) as proxy:
        r = reader_via(mount, s3server, bucket, proxy, tmp_path, "u",
                       "cache_size=1M")
        path = r / "ckpt" / BIG
        pieces = read_pieces(path, len(body))
        assert proxy.corrupted >= 1
        for off, v in pieces.items():
            assert v == errno.EIO or v == body[off:off + MiB], \
                f"wrong bytes at {off}"
        if mode == "first":
            assert all(v != errno.EIO for v in pieces.values()), \
                "a damaged first download was not fetched again"
        else:
            assert all(v == errno.EIO for v in pieces.values())
            assert "do not match its manifest" in r.log_text(), r.log_tail()
        assert "reading uncached" in r.log_text(), \
            "the read went through the cache: this test checks nothing"
