"""Restoring checkpoint directories (issue 13), counted request by request
through tests/integration/faultproxy.py (no faults: it only logs what
ckptfs asks the server): a directory read file after file costs one GET per
small file and no HEAD, the next files download ahead of the reader, a
second reader and a remount download nothing again, `ls -l` of objects
written by another tool reads each object's metadata once (in parallel
batches) and its extended-attribute queries cost no request, and read-ahead
never evicts a file a reader holds nor fills the cache past cache_size.
Long shapes (400 files, 10 000 objects, the emulated WAN link) are in
bench/restore-bench.py."""

import collections
import os
import subprocess
import time

import pytest

from faultproxy import FaultProxy
from helpers import (cache_files, ckptfs_sync, det_bytes, kill_ckptfs, sha256_bytes,
                     sha256_file, wait_until)

KiB = 1 << 10
MiB = 1 << 20


@pytest.fixture
def proxy(s3server):
    with FaultProxy(s3server.endpoint, seed=13) as p:
        yield p


def mount_via(mount, s3server, bucket, proxy, tmp_path, *more, name="m", cache=None):
    mp = tmp_path / f"mnt-{name}"
    mp.mkdir(exist_ok=True)
    cache = cache or tmp_path / f"cache-{name}"
    options = [f"cache_dir={cache}", "commit_delay=600", *more]
    argv = mount.argv(bucket, "", mp, options, endpoint=False)
    argv += ["--endpoint", proxy.endpoint, "--region", s3server.region]
    return mount(bucket, argv=argv, mountpoint=mp)


def ops(proxy, since, prefix=""):
    """Counter of S3 operations since index `since` on keys under prefix
    (LIST counted whatever its path)."""
    c = collections.Counter()
    for op, path in proxy.oplog(since):
        if op == "LIST" or prefix in path:
            c[op] += 1
    return c


def keys_of(proxy, since, op):
    return [p for o, p in proxy.oplog(since) if o == op]


def put_shards(s3server, bucket, prefix, n, size, seed=0):
    bodies = {f"shard-{i:03d}.bin": det_bytes(seed + i, size + i) for i in range(n)}
    s3server.put_many(bucket, [(f"{prefix}/{k}", v) for k, v in bodies.items()])
    return bodies


@pytest.mark.timeout(120)
def test_directory_read_costs_one_get_per_small_file(s3server, bucket, mount, proxy,
                                                    tmp_path):
    """A checkpoint directory of 40 small files written by another tool,
    read one file after another with cat: byte-exact; each file is fetched
    whole by exactly one GET and never HEADed at open; a second reader
    downloads nothing."""
    bodies = put_shards(s3server, bucket, "ckpt", 40, 200 * KiB)
    m = mount_via(mount, s3server, bucket, proxy, tmp_path)
    d = m / "ckpt"
    names = sorted(os.listdir(d))
    assert names == sorted(bodies)
    start = len(proxy.requests_log)
    for n in names:  # one process per file, as a shard loader opens them
        out = subprocess.run(["cat", str(d / n)], capture_output=True, timeout=60,
                             check=True).stdout
        assert sha256_bytes(out) == sha256_bytes(bodies[n]), n
    c = ops(proxy, start, "/ckpt/")
    gets = keys_of(proxy, start, "GET")
    assert sorted(gets) == sorted(f"/{bucket}/ckpt/{n}" for n in names), \
        f"not one GET per file: {collections.Counter(gets).most_common(3)}"
    # object metadata (mode, owner) is read once per object in parallel
    # batches at lookup, never one HEAD per open before the GET
    heads = keys_of(proxy, start, "HEAD")
    assert len(heads) == len(set(heads)), collections.Counter(heads).most_common(3)
    # ... in a few parallel batches (32 files, then 64, ...), not one
    # HEAD round trip before each file's GET
    log = [op for op, _ in proxy.oplog(start) if op in ("HEAD", "GET")]
    runs = sum(1 for i, op in enumerate(log) if op == "HEAD" and
               (i == 0 or log[i - 1] != "HEAD"))
    assert runs <= 8, f"{runs} separate runs of HEADs: {log}"
    assert c["LIST"] <= 10, c
    # reopened after the listing and attribute timeouts (1 s) ran out: no
    # request per file to revalidate, the directory's listing does it
    time.sleep(1.5)
    again = len(proxy.requests_log)
    for n in names:
        assert sha256_file(d / n) == sha256_bytes(bodies[n])
    c2 = ops(proxy, again)
    assert c2["GET"] == 0 and c2["HEAD"] == 0 and c2["LIST"] <= 5, c2


@pytest.mark.timeout(120)
def test_next_files_download_ahead_of_the_reader(s3server, bucket, mount, proxy,
                                                 tmp_path):
    """Reading the first two files of a directory starts the downloads of
    the files after them (directory read-ahead), within dir_readahead:
    files beyond the budget are not fetched.  With dir_readahead=0 only
    what is read is fetched."""
    put_shards(s3server, bucket, "ra", 30, 256 * KiB, seed=100)
    m = mount_via(mount, s3server, bucket, proxy, tmp_path, "dir_readahead=2M")
    names = sorted(os.listdir(m / "ra"))
    start = len(proxy.requests_log)
    for n in names[:2]:
        (m / "ra" / n).read_bytes()
    # 2 MiB past the file opened: the next 7 files of ~256 KiB
    got = wait_until(lambda: len(set(keys_of(proxy, start, "GET"))) >= 9, 20)
    gets = set(keys_of(proxy, start, "GET"))
    assert got, f"read-ahead fetched only {sorted(gets)}"
    time.sleep(0.5)
    gets = {g.rsplit("/", 1)[1] for g in keys_of(proxy, start, "GET")}
    assert gets <= set(names[:10]), f"read past the budget: {sorted(gets)}"

    m2 = mount_via(mount, s3server, bucket, proxy, tmp_path, "dir_readahead=0", name="off")
    start = len(proxy.requests_log)
    for n in names[:2]:
        (m2 / "ra" / n).read_bytes()
    time.sleep(1)
    gets = {g.rsplit("/", 1)[1] for g in keys_of(proxy, start, "GET")}
    assert gets == set(names[:2]), sorted(gets)


@pytest.mark.timeout(120)
def test_ls_l_reads_metadata_once_and_xattrs_locally(s3server, bucket, mount, proxy,
                                                     tmp_path):
    """ls -l of 600 objects written by another tool: sizes from the
    listing, each object's metadata read at most once (no GET), and the
    xattr queries ls and getfattr make (security.*, system.posix_acl_*)
    answered without a request.  A file written through ckptfs with a mode
    of its own still shows it."""
    s3server.put_many_small(bucket, [(f"many/o-{i:04d}", b"x" * (i % 7 + 1))
                                     for i in range(600)])
    m = mount_via(mount, s3server, bucket, proxy, tmp_path)
    (m / "many" / "run.sh").write_bytes(b"#!/bin/sh\n")
    os.chmod(m / "many" / "run.sh", 0o750)
    ckptfs_sync(m)
    m2 = mount_via(mount, s3server, bucket, proxy, tmp_path, name="reader")
    start = len(proxy.requests_log)
    out = subprocess.run(["ls", "-l", "--time-style=+%s", str(m2 / "many")],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    lines = [ln.split() for ln in out.splitlines() if not ln.startswith("total")]
    assert len(lines) == 601
    sizes = {ln[-1]: int(ln[4]) for ln in lines}
    assert sizes["o-0005"] == 6 and sizes["o-0599"] == 599 % 7 + 1
    modes = {ln[-1]: ln[0] for ln in lines}
    assert modes["run.sh"] == "-rwxr-x---", modes["run.sh"]
    assert modes["o-0001"] == "-rw-r--r--"
    c = ops(proxy, start)
    heads = keys_of(proxy, start, "HEAD")
    assert c["GET"] == 0, c
    assert len(heads) == len(set(heads)) and len(heads) <= 601, \
        collections.Counter(heads).most_common(3)
    start = len(proxy.requests_log)
    subprocess.run(["getfattr", "-d", "-m", "-", *[str(m2 / "many" / f"o-{i:04d}")
                                                    for i in range(50)]],
                   capture_output=True, timeout=60)
    subprocess.run(["ls", "-l", str(m2 / "many")], capture_output=True, timeout=60,
                   check=True)
    assert ops(proxy, start)["HEAD"] == 0, ops(proxy, start)


@pytest.mark.timeout(150)
def test_readahead_never_evicts_a_held_file_nor_passes_the_cap(s3server, bucket, mount,
                                                               proxy, tmp_path):
    """cache_size=12M: a reader holds a 4 MiB file open while another reads
    a directory of 24 × 1 MiB in order with read-ahead on.  The held file's
    cache copy stays and reads byte-exact to the end; the cache directory
    never holds more than the cap; every file reads byte-exact."""
    held = det_bytes(7, 4 * MiB)
    s3server.put(bucket, "held.bin", held)
    bodies = put_shards(s3server, bucket, "dir", 24, 1 * MiB, seed=300)
    cache = tmp_path / "cache-cap"
    m = mount_via(mount, s3server, bucket, proxy, tmp_path, "cache_size=12M",
                  "dir_readahead=64M", cache=cache)
    f = open(m / "held.bin", "rb")
    try:
        assert f.read(1 * MiB) == held[:1 * MiB]
        held_files = set(cache_files(cache))
        peak = 0
        for n in sorted(bodies):
            assert sha256_file(m / "dir" / n) == sha256_bytes(bodies[n]), n
            used = sum(blocks_of(p) * 512 for p in cache_files(cache).values())
            peak = max(peak, used)
            assert held_files <= set(cache_files(cache)), "the held file was evicted"
        assert peak <= 12 * MiB, f"cache held {peak} bytes"
        assert f.read() == held[1 * MiB:]
    finally:
        f.close()


def blocks_of(p):
    """Blocks of cache file p; 0 when it was evicted since it was listed
    (read-ahead keeps evicting while the test walks the directory)."""
    try:
        return p.stat().st_blocks
    except FileNotFoundError:
        return 0


@pytest.mark.timeout(120)
def test_remount_reads_from_cache_without_a_request_per_file(s3server, bucket, mount,
                                                             proxy, tmp_path):
    """A checkpoint saved through the mount (with a manifest), read once,
    then read again after a remount on the same cache: no GET, no HEAD, a
    few LISTs for the whole directory."""
    m = mount_via(mount, s3server, bucket, proxy, tmp_path, name="w")
    (m / "tmp-ck").mkdir()
    bodies = {f"rank-{i}.pt": det_bytes(500 + i, 300 * KiB + i) for i in range(20)}
    for k, v in bodies.items():
        (m / "tmp-ck" / k).write_bytes(v)
    os.rename(m / "tmp-ck", m / "ck")
    ckptfs_sync(m)
    cache = tmp_path / "cache-r"
    r = mount_via(mount, s3server, bucket, proxy, tmp_path, name="r", cache=cache)
    for k in sorted(bodies):
        assert sha256_file(r / "ck" / k) == sha256_bytes(bodies[k])
    assert r.unmount() == []
    r2 = mount_via(mount, s3server, bucket, proxy, tmp_path, name="r", cache=cache)
    start = len(proxy.requests_log)
    for k in sorted(bodies):
        assert sha256_file(r2 / "ck" / k) == sha256_bytes(bodies[k])
    c = ops(proxy, start)
    data_gets = [k for k in keys_of(proxy, start, "GET") if "/.ckptfs" not in k]
    assert data_gets == [] and c["HEAD"] == 0, (data_gets, c)
    assert c["GET"] <= 1 and c["LIST"] <= 8, c  # the manifest, the listings


@pytest.mark.timeout(120)
def test_ls_l_without_object_meta_issues_no_head(s3server, bucket, mount, proxy,
                                                 tmp_path):
    """-o object_meta=off: ls -l, find -ls, du and stat of 400 objects
    written by another tool cost the directory's listing and nothing per
    object; sizes and times come from the listing."""
    s3server.put_many_small(bucket, [(f"many/o-{i:04d}", b"y" * (i % 5 + 1))
                                     for i in range(400)])
    lm = s3server.head(bucket, "many/o-0007")["LastModified"].timestamp()
    m = mount_via(mount, s3server, bucket, proxy, tmp_path, "object_meta=off")
    start = len(proxy.requests_log)
    out = subprocess.run(["ls", "-l", "--time-style=+%s", str(m / "many")],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    lines = {ln.split()[-1]: ln.split() for ln in out.splitlines()
             if not ln.startswith("total")}
    assert len(lines) == 400
    assert int(lines["o-0007"][4]) == 3 and lines["o-0007"][0] == "-rw-r--r--"
    assert abs(int(lines["o-0007"][5]) - lm) <= 1
    for cmd in (["find", str(m / "many"), "-ls"], ["du", "-sb", str(m / "many")],
                ["stat", *[str(m / "many" / f"o-{i:04d}") for i in range(0, 400, 7)]]):
        subprocess.run(cmd, capture_output=True, timeout=60, check=True)
    c = ops(proxy, start)
    assert c["HEAD"] == 0 and c["GET"] == 0, c
    assert c["LIST"] <= 4, c
    assert (m / "many" / "o-0003").read_bytes() == b"y" * 4


@pytest.mark.timeout(150)
def test_ranks_on_one_host_download_each_object_once(s3server, bucket, mount, proxy,
                                                     tmp_path):
    """Four local ranks restore the same checkpoint at once, two through
    one mount and two through a second mount sharing its cache directory,
    all with read-ahead: every object is fetched once (one GET each for
    these single-chunk files), and every rank reads every byte right."""
    bodies = put_shards(s3server, bucket, "ck", 24, 700 * KiB, seed=900)
    cache = tmp_path / "shared-cache"
    m1 = mount_via(mount, s3server, bucket, proxy, tmp_path, name="a", cache=cache)
    m2 = mount_via(mount, s3server, bucket, proxy, tmp_path, name="b", cache=cache)
    start = len(proxy.requests_log)
    script = ("import hashlib, os, sys\n"
              "d = sys.argv[1]\n"
              "for n in sorted(os.listdir(d)):\n"
              "    print(n, hashlib.sha256(open(os.path.join(d, n), 'rb').read()).hexdigest())\n")
    procs = [subprocess.Popen(["/usr/bin/python3", "-c", script, str(m / "ck")],
                              stdout=subprocess.PIPE, text=True)
             for m in (m1, m1, m2, m2)]
    want = {n: sha256_bytes(b) for n, b in bodies.items()}
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        assert dict(ln.split() for ln in out.splitlines()) == want
    gets = collections.Counter(keys_of(proxy, start, "GET"))
    assert set(gets) == {f"/{bucket}/ck/{n}" for n in bodies}, sorted(gets)
    assert max(gets.values()) == 1, gets.most_common(3)


@pytest.mark.timeout(180)
def test_readahead_through_faults_and_a_killed_daemon(s3server, bucket, mount, proxy,
                                                      tmp_path):
    """Read-ahead downloads meet 503s and replies reset mid-body (10% of
    requests): every file still reads byte-exact.  Then ckptfs is SIGKILLed
    while read-ahead of a second directory is in flight; the remount on the
    same cache reads every file byte-exact (partial downloads resumed or
    refetched, never served torn)."""
    a = put_shards(s3server, bucket, "a", 24, 900 * KiB, seed=1300)
    b = put_shards(s3server, bucket, "b", 24, 900 * KiB, seed=1400)
    cache = tmp_path / "cache-f"
    m = mount_via(mount, s3server, bucket, proxy, tmp_path, "retry_max_delay=0.5",
                  name="f", cache=cache)
    names = sorted(os.listdir(m / "a"))
    proxy.set(p503=0.05, reset_mid=0.05)
    for n in names:
        assert sha256_file(m / "a" / n) == sha256_bytes(a[n]), n
    proxy.set()
    assert proxy.stats["503"] + proxy.stats["reset_mid"] > 0, proxy.stats
    start = len(proxy.requests_log)
    assert sha256_file(m / "b" / names[0]) == sha256_bytes(b[names[0]])
    assert wait_until(lambda: len(keys_of(proxy, start, "GET")) >= 3, 20)
    kill_ckptfs(m)
    m2 = mount_via(mount, s3server, bucket, proxy, tmp_path, name="f", cache=cache)
    for n in names:
        assert sha256_file(m2 / "b" / n) == sha256_bytes(b[n]), n
        assert sha256_file(m2 / "a" / n) == sha256_bytes(a[n]), n
