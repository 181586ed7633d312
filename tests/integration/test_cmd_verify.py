"""`ckptfs verify PATH|s3://bucket/prefix` (issue 14; doc/verify.md): every
object of a checkpoint is read again from the bucket, not the cache, and
checked against what its manifest recorded at commit (size, ETag, CRC-32C,
the CRC-32C of each 8 MiB block); objects without a manifest by size and
MD5 ETag.  Damage is made with boto3 in the bucket (replaced, truncated,
deleted objects, a manifest whose block list disagrees with the bytes)
and on the wire (helpers.CorruptProxy flips a byte of every GET of one
key).  Exit status: 0 every byte checks, 1 a bad file, 3 no verification
possible.

(test_verify.py is the read cache's own checking of downloads.)"""
import json
import os
import pty
import socket
import subprocess
import time

import pytest

from helpers import CKPTFS_BIN, CorruptProxy, ckptfs_commit, det_bytes, read_pty, run

MiB = 1 << 20
FILES = {"model.bin": det_bytes(11, 20 * MiB), "config.json": b'{"a": 1}\n',
         "sub/opt.bin": det_bytes(12, 1 * MiB + 17)}


@pytest.fixture
def ckpt(s3server, bucket, mount):
    """A committed checkpoint pfx/ckpt-1 written through a mount, plus two
    objects another tool wrote: pfx/extra/plain.bin (PUT: MD5 ETag) and
    pfx/extra/multi.bin (multipart: ETag "...-2")."""
    m = mount(bucket, "pfx", options=["commit_delay=600"])
    os.makedirs(m / "tmp-ckpt-1" / "sub")
    for name, data in FILES.items():
        (m / "tmp-ckpt-1" / name).write_bytes(data)
    os.rename(m / "tmp-ckpt-1", m / "ckpt-1")
    ckptfs_commit(m / "ckpt-1")
    c = s3server.client()
    c.put_object(Bucket=bucket, Key="pfx/extra/plain.bin", Body=det_bytes(13, 300000))
    up = c.create_multipart_upload(Bucket=bucket, Key="pfx/extra/multi.bin")
    parts = []
    for i in (1, 2):
        r = c.upload_part(Bucket=bucket, Key="pfx/extra/multi.bin", PartNumber=i,
                          UploadId=up["UploadId"], Body=det_bytes(20 + i, 5 * MiB))
        parts.append({"PartNumber": i, "ETag": r["ETag"]})
    c.complete_multipart_upload(Bucket=bucket, Key="pfx/extra/multi.bin",
                                UploadId=up["UploadId"],
                                MultipartUpload={"Parts": parts})
    return m


def verify(*args, s3=None, timeout=120):
    argv = [CKPTFS_BIN, "verify", *map(str, args)]
    env = s3.env_for_ckptfs() if s3 else None
    return run(argv, check=False, timeout=timeout, env=env)


def verify_json(*args, s3=None):
    p = verify(*args, "--json", s3=s3)
    doc = json.loads(p.stdout)
    return p.returncode, doc, {f["path"]: f for f in doc["files"]}


def test_good_checkpoint(s3server, bucket, ckpt):
    p = verify(ckpt / "ckpt-1")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == (
        f"verify s3://{bucket}/pfx/ckpt-1: 3 files, 21.0 MiB read: 3 ok, 0 bad "
        "(3 against manifests, 0 by MD5 ETag, 0 by size only)")
    # one file: the manifest of the directory above it governs it
    p = verify(ckpt / "ckpt-1" / "sub" / "opt.bin")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().startswith(
        f"verify s3://{bucket}/pfx/ckpt-1/sub/opt.bin: 1 file, 1.0 MiB read: 1 ok, 0 bad "
        "(1 against manifests")
    rc, doc, files = verify_json(ckpt / "ckpt-1")
    assert rc == 0 and doc["ok"] is True
    assert sorted(files) == sorted(FILES)
    assert all(f["ok"] and f["check"] == "manifest" for f in files.values())
    assert doc["summary"]["bytes"] == sum(len(d) for d in FILES.values())
    # the whole mount, by URL from this process: the other tool's objects too
    rc, doc, files = verify_json(f"s3://{bucket}/pfx", "--endpoint", s3server.endpoint,
                                 s3=s3server)
    assert rc == 0, doc
    assert files["extra/plain.bin"]["check"] == "md5"
    assert files["extra/multi.bin"]["check"] == "size"
    assert files["ckpt-1/model.bin"]["check"] == "manifest"
    assert doc["summary"]["files"] == 5 and doc["summary"]["bad"] == 0
    # the whole bucket
    rc, doc, files = verify_json(f"s3://{bucket}", "--endpoint", s3server.endpoint,
                                 s3=s3server)
    assert rc == 0 and doc["target"] == f"s3://{bucket}/"
    assert sorted(files) == sorted(["pfx/extra/plain.bin", "pfx/extra/multi.bin"] +
                                   [f"pfx/ckpt-1/{n}" for n in FILES])


def test_damaged_objects_named(s3server, bucket, ckpt):
    c = s3server.client()
    orig = FILES["sub/opt.bin"]
    # same size, other bytes
    c.put_object(Bucket=bucket, Key="pfx/ckpt-1/sub/opt.bin",
                 Body=bytes([orig[0] ^ 1]) + orig[1:])
    # truncated
    c.put_object(Bucket=bucket, Key="pfx/ckpt-1/config.json", Body=FILES["config.json"][:-3])
    p = verify(ckpt / "ckpt-1")
    assert p.returncode == 1
    lines = p.stdout.splitlines()
    assert sorted(l for l in lines if l.startswith("BAD")) == [
        f"BAD  config.json: size {len(FILES['config.json']) - 3}, the manifest says "
        f"{len(FILES['config.json'])}",
        next(l for l in lines if l.startswith("BAD  sub/opt.bin: ETag ")),
    ]
    assert "the manifest says" in next(l for l in lines if l.startswith("BAD  sub/opt.bin"))
    assert lines[-1].endswith("3 files, 20.0 MiB read: 1 ok, 2 bad "
                              "(3 against manifests, 0 by MD5 ETag, 0 by size only)")
    # missing
    c.delete_object(Bucket=bucket, Key="pfx/ckpt-1/model.bin")
    rc, doc, files = verify_json(ckpt / "ckpt-1")
    assert rc == 1 and doc["ok"] is False
    assert files["model.bin"]["problem"].startswith("missing: the manifest lists it")
    assert not files["config.json"]["ok"] and not files["sub/opt.bin"]["ok"]


def test_block_checksums_checked(s3server, bucket, ckpt):
    """The bytes are read and checked block by block: a manifest whose
    block list disagrees with the object (as after bit rot that kept the
    ETag) names the block."""
    c = s3server.client()
    keys = [o["Key"] for o in c.list_objects_v2(Bucket=bucket, Prefix="pfx/ckpt-1/.ckptfs/")
            ["Contents"]]
    mkey = next(k for k in keys if k.split("/")[-1].startswith("manifest."))
    doc = json.loads(c.get_object(Bucket=bucket, Key=mkey)["Body"].read())
    f = next(f for f in doc["files"] if f["path"] == "model.bin")
    blocks = f["blocks"]
    assert len(blocks) == 8 * 3
    wrong = "%08x" % (int(blocks[8:16], 16) ^ 0x1)
    f["blocks"] = blocks[:8] + wrong + blocks[16:]
    c.put_object(Bucket=bucket, Key=mkey, Body=json.dumps(doc).encode())
    p = verify(ckpt / "ckpt-1")
    assert p.returncode == 1
    assert (f"BAD  model.bin: block 1 (bytes 8388608-16777215) has CRC-32C "
            f"{blocks[8:16]}, the manifest says {wrong}") in p.stdout


def test_bytes_damaged_in_transit(s3server, bucket, ckpt):
    """Through a proxy that flips one byte of every GET of a key: the
    manifest's CRC-32C catches it for a checkpoint file, the MD5 ETag for
    another tool's object; the untouched files still check."""
    for key, want in (("ckpt-1/model.bin", "block 0 (bytes 0-8388607) has CRC-32C"),
                      ("extra/plain.bin", "MD5 ")):
        with CorruptProxy(s3server.endpoint, f"pfx/{key}", mode="all") as px:
            rc, doc, files = verify_json(f"s3://{bucket}/pfx", "--endpoint", px.endpoint,
                                         s3=s3server)
        assert rc == 1
        assert [p for p, f in files.items() if not f["ok"]] == [key]
        assert files[key]["problem"].startswith(want), files[key]
        assert px.corrupted >= 1


def test_dead_server_clear_error(s3server, bucket, tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    t0 = time.monotonic()
    p = verify(f"s3://{bucket}/pfx", "--endpoint", f"http://127.0.0.1:{port}",
               s3=s3server, timeout=60)
    took = time.monotonic() - t0
    assert p.returncode == 3
    assert p.stderr.startswith(f"ckptfs: verify: cannot reach s3://{bucket}/pfx/ at "
                               f"http://127.0.0.1:{port}")
    assert took < 30, took
    assert p.stdout == ""


def test_nothing_there_and_usage(s3server, bucket, ckpt):
    p = verify(f"s3://{bucket}/no-such-thing", "--endpoint", s3server.endpoint, s3=s3server)
    assert p.returncode == 3
    assert "nothing stored under" in p.stderr
    p = verify(ckpt / "ckpt-1", "--threads", "0")
    assert p.returncode == 2 and "--threads takes a number" in p.stderr
    p = verify("/", "x")
    assert p.returncode == 2


def test_progress_on_a_terminal(ckpt):
    """A progress bar on stderr when it is a terminal; none otherwise."""
    master, slave = pty.openpty()
    p = subprocess.run([CKPTFS_BIN, "verify", str(ckpt / "ckpt-1")], stdout=subprocess.PIPE,
                       stderr=slave, timeout=120)
    os.close(slave)
    out = read_pty(master)
    assert p.returncode == 0
    assert b"verify [" in out
    assert b"verify [" not in p.stdout


@pytest.mark.timeout(150)
def test_mount_path_server_down(s3server, bucket, mount, tmp_path):
    """Verifying a mount's path while its server is down: the daemon's
    listing fails after its retries, the command says so (exit 3) within
    retry_timeout, and the mount keeps working once the server is back."""
    from faultproxy import FaultProxy
    with FaultProxy(s3server.endpoint, seed=3) as px:
        mp = tmp_path / "mnt-px"
        mp.mkdir()
        argv = mount.argv(bucket, "pfx", mp, ["commit_delay=600", "retry_timeout=10"],
                          endpoint=False)
        argv += ["--endpoint", px.endpoint, "--region", s3server.region]
        m = mount(bucket, argv=argv, mountpoint=mp)
        os.mkdir(m / "ckpt-2")
        (m / "ckpt-2" / "w.bin").write_bytes(det_bytes(5, 3 * MiB))
        ckptfs_commit(m / "ckpt-2")
        px.down(60)
        t0 = time.monotonic()
        p = verify(m / "ckpt-2", timeout=90)
        took = time.monotonic() - t0
        assert p.returncode == 3, p.stdout + p.stderr
        assert p.stderr.startswith(f"ckptfs: verify s3://{bucket}/pfx/ckpt-2: ")
        assert took < 40, took
        px.down(0)
        assert verify(m / "ckpt-2").returncode == 0
