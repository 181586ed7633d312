"""The commit engine (src/commit) against the real Ceph RGW, driven through
tests/tools/eng-tool (no FUSE mount) and checked with boto3: a directory
transaction commits with its marker gone and its manifest naming every file
with size, ETag and CRC32C; the order of visibility steps (a delete issued
after a commit never lands before the commit point); resume after SIGKILL
in the middle of a multipart upload, byte-exact; remote delete and rename
of committed directories; addendum manifests; cache adoption.

The binary: $ENGTOOL_BIN, else <dir of $CKPTFS_BIN>/tests/tools/eng-tool.
"""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

import helpers
from helpers import det_bytes

MiB = 1 << 20
_CKPTFS = os.environ.get("CKPTFS_BIN", "/work/main/build/ckptfs")
ENGTOOL_BIN = os.environ.get(
    "ENGTOOL_BIN",
    str(Path(_CKPTFS).resolve().parent / "tests" / "tools" / "eng-tool"))


def crc32c(data):
    """Standard CRC-32C (what the manifest records), table-driven."""
    t = crc32c.table
    c = 0xFFFFFFFF
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def _table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


crc32c.table = _table()


@pytest.fixture(scope="module")
def engtool_bin(tmp_path_factory):
    if not os.access(ENGTOOL_BIN, os.X_OK):
        pytest.fail(f"eng-tool not found at {ENGTOOL_BIN}: build it (make) "
                    "or set ENGTOOL_BIN", pytrace=False)
    dst = tmp_path_factory.mktemp("engtool") / "eng-tool"
    shutil.copy2(ENGTOOL_BIN, dst)
    return str(dst)


class Eng:
    def __init__(self, binary, s3server, bucket, tmp):
        self.binary = binary
        self.s3 = s3server
        self.bucket = bucket
        self.state = tmp / "state"
        self.tmp = tmp

    def env(self):
        env = helpers.clean_env()
        env.update(AWS_ENDPOINT_URL=self.s3.endpoint,
                   AWS_ACCESS_KEY_ID=self.s3.access_key,
                   AWS_SECRET_ACCESS_KEY=self.s3.secret_key,
                   AWS_REGION=self.s3.region,
                   AWS_CONFIG_FILE=os.devnull,
                   AWS_SHARED_CREDENTIALS_FILE=os.devnull,
                   AWS_EC2_METADATA_DISABLED="true")
        return env

    def argv(self, prefix="p", opts=None, cache=None):
        a = [self.binary]
        if cache:
            a += ["-c", str(cache)]
        if opts:
            a += ["-o", opts]
        return a + [str(self.state), f"s3://{self.bucket}/{prefix}"]

    def run(self, script, timeout=300, ok=True, **kw):
        p = subprocess.run(self.argv(**kw), input=script, text=True,
                           capture_output=True, timeout=timeout,
                           env=self.env())
        lines = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]
        if ok:
            assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
        return lines, p

    def start(self, **kw):
        return subprocess.Popen(self.argv(**kw), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=self.env())

    def file(self, name, n, seed):
        p = self.tmp / name
        data = det_bytes(seed, n)
        p.write_bytes(data)
        return p, data


@pytest.fixture
def eng(engtool_bin, s3server, bucket, tmp_path):
    return Eng(engtool_bin, s3server, bucket, tmp_path)


def keys(s3server, bucket, prefix=""):
    return sorted(s3server.keys(bucket, prefix))


def get(s3server, bucket, key):
    return s3server.client().get_object(Bucket=bucket, Key=key)["Body"].read()


def manifest(s3server, bucket, key):
    return json.loads(get(s3server, bucket, key))


def test_dir_transaction_commits(eng, s3server, bucket):
    small, sd = eng.file("small", 5000, 1)
    big, bd = eng.file("big", 40 * MiB + 123, 2)
    lines, _ = eng.run(f"begin-dir ckpt-1\nput ckpt-1/a.pt {small} 640\n"
                       f"put ckpt-1/sub/b.pt {big}\ndir ckpt-1/empty\n"
                       "seal ckpt-1\nwait ckpt-1\n")
    writer = lines[0]["writer"]
    assert all(x.get("rc", 0) == 0 for x in lines), lines
    ks = keys(s3server, bucket)
    assert ks == sorted([
        f"p/ckpt-1/.ckptfs/manifest.{writer}.json", "p/ckpt-1/a.pt",
        "p/ckpt-1/empty/", "p/ckpt-1/sub/b.pt"]), ks
    assert get(s3server, bucket, "p/ckpt-1/a.pt") == sd
    assert get(s3server, bucket, "p/ckpt-1/sub/b.pt") == bd
    m = manifest(s3server, bucket, f"p/ckpt-1/.ckptfs/manifest.{writer}.json")
    assert m["state"] == "committed" and m["writer"] == writer
    assert m["time"] > 0
    files = {f["path"]: f for f in m["files"]}
    assert set(files) == {"a.pt", "sub/b.pt"}
    a = files["a.pt"]
    assert a["size"] == 5000 and a["mode"] == 0o640
    assert a["crc32c"] == "%08x" % crc32c(sd)
    assert a["etag"] == s3server.head(bucket, "p/ckpt-1/a.pt")["ETag"]
    b = files["sub/b.pt"]
    assert b["size"] == len(bd)
    assert b["etag"].endswith('-6"'), b  # 8 MiB parts
    assert b["crc32c"] == "%08x" % crc32c(bd)
    assert [d["path"] for d in m["dirs"]] == ["empty"]
    meta = s3server.head(bucket, "p/ckpt-1/a.pt")["Metadata"]
    assert meta["mode"] == "640" and "mtime" in meta and "uid" in meta


def test_marker_and_intent_exist_before_commit(eng, s3server, bucket):
    small, _ = eng.file("small", 100, 3)
    p = eng.start()
    p.stdin.write(f"begin-dir c\nput c/x {small}\n")
    p.stdin.flush()
    assert json.loads(p.stdout.readline())["op"] == "open"
    writer_line = json.loads(p.stdout.readline())
    assert writer_line["rc"] == 0
    json.loads(p.stdout.readline())
    ks = keys(s3server, bucket)
    markers = [k for k in ks if k.startswith("p/.ckptfs-pending/c/")]
    assert len(markers) == 1 and markers[0].endswith("@60"), ks
    intent = [k for k in ks if "/.ckptfs/manifest." in k]
    assert manifest(s3server, bucket, intent[0])["state"] == "pending"
    p.stdin.write("seal c\nwait c\n")
    p.stdin.close()
    assert p.wait(60) == 0
    ks = keys(s3server, bucket)
    assert not [k for k in ks if ".ckptfs-pending" in k], ks
    assert manifest(s3server, bucket, intent[0])["state"] == "committed"


def test_ordering_delete_after_commit(eng, s3server, bucket):
    """A delete of old issued after the commit of new never lands before the
    new one's commit point, although new's upload takes a while."""
    s3server.put_many(bucket, [(f"p/old/f{i}", b"x") for i in range(50)])
    big, _ = eng.file("big", 96 * MiB, 4)
    seen = []
    stop = threading.Event()

    def watch():
        c = s3server.client()
        while not stop.is_set():
            ks = [o["Key"] for o in c.list_objects_v2(
                Bucket=bucket, Prefix="p/").get("Contents", [])]
            old_hit = (len([k for k in ks if k.startswith("p/old/")]) < 50 or
                       any(k.startswith("p/.ckptfs-pending/old/") for k in ks))
            new_committed = (any(k.startswith("p/new/.ckptfs/manifest.") for k in ks)
                             and not any(k.startswith("p/.ckptfs-pending/new/")
                                         for k in ks))
            seen.append((time.monotonic(), old_hit, new_committed))
    t = threading.Thread(target=watch)
    t.start()
    try:
        eng.run(f"begin-dir new\nput new/model.pt {big}\nseal new\n"
                "rdel old dir\nbegin-file latest\n"
                f"put latest {eng.tmp / 'big'}\nseal latest\nsync\n",
                opts="conns=4")
    finally:
        stop.set()
        t.join()
    assert seen
    for ts, old_hit, new_committed in seen:
        assert not old_hit or new_committed, "delete of old before new committed"
    assert any(old_hit for _, old_hit, _ in seen) or not keys(s3server, bucket, "p/old/")
    assert keys(s3server, bucket, "p/old/") == []
    assert not keys(s3server, bucket, "p/.ckptfs-pending/")


def test_resume_after_sigkill_mid_upload(eng, s3server, bucket):
    big, data = eng.file("big", 300 * MiB + 5, 5)
    p = eng.start(opts="conns=2")
    p.stdin.write(f"begin-dir run\nput run/model.pt {big}\nseal run\nsync\n")
    p.stdin.flush()
    c = s3server.client()
    deadline = time.monotonic() + 120
    parts = 0
    while time.monotonic() < deadline:
        ups = c.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
        if ups:
            u = ups[0]
            parts = len(c.list_parts(Bucket=bucket, Key=u["Key"],
                                     UploadId=u["UploadId"]).get("Parts", []))
            if parts >= 4:
                break
        time.sleep(0.05)
    p.kill()
    p.wait(10)
    assert 4 <= parts < 38, f"killed after {parts} parts"
    assert "p/run/model.pt" not in keys(s3server, bucket)
    lines, proc = eng.run("sync\nstatus\n", opts="conns=2")
    assert [x for x in lines if x["op"] == "sync"][0]["rc"] == 0
    assert "resuming" in proc.stderr
    got = get(s3server, bucket, "p/run/model.pt")
    assert hashlib.sha256(got).digest() == hashlib.sha256(data).digest()
    # the upload continued: the object has every part, no upload left over
    assert not c.list_multipart_uploads(Bucket=bucket).get("Uploads")
    assert not keys(s3server, bucket, "p/.ckptfs-pending/")
    assert not list((eng.state / "staging").iterdir())


def test_remote_rename_and_delete(eng, s3server, bucket):
    a, ad = eng.file("a", 3000, 6)
    eng.run(f"begin-dir d1\nput d1/x/a {a}\ndir d1/e\nseal d1\nwait d1\n"
            "rren d1 d2 dir\nsync\n")
    ks = keys(s3server, bucket)
    assert not [k for k in ks if k.startswith("p/d1/")], ks
    assert "p/d2/x/a" in ks and "p/d2/e/" in ks
    assert get(s3server, bucket, "p/d2/x/a") == ad
    man = [k for k in ks if k.startswith("p/d2/.ckptfs/manifest.")]
    assert len(man) == 1
    m = manifest(s3server, bucket, man[0])
    assert [f["path"] for f in m["files"]] == ["x/a"]
    assert m["files"][0]["crc32c"] == "%08x" % crc32c(ad)
    assert [d["path"] for d in m["dirs"]] == ["e"]
    eng.run("rdel d2 dir\nsync\n")
    assert keys(s3server, bucket) == []


def test_addendum_in_manifest_root(eng, s3server, bucket):
    a, _ = eng.file("a", 10, 7)
    lines, _ = eng.run(f"begin-dir top\nput top/f {a}\nseal top\nwait top\n"
                       f"begin-file top/latest top\nput top/latest {a}\n"
                       "seal top/latest\nsync\n")
    w = lines[0]["writer"]
    ks = keys(s3server, bucket)
    add = [k for k in ks if k.startswith(f"p/top/.ckptfs/manifest.{w}.")
           and k.count(".") == 4]
    assert len(add) == 1, ks
    m = manifest(s3server, bucket, add[0])
    assert [f["path"] for f in m["files"]] == ["latest"]


def test_abort_and_cache_adoption(eng, s3server, bucket, tmp_path):
    a, ad = eng.file("a", 20 * MiB, 8)
    cache = tmp_path / "cache"
    lines, _ = eng.run(f"begin-dir gone\nput gone/a {a}\nwait-file gone/a\n"
                       "abort gone\nbegin-dir kept\n"
                       f"put kept/a {a}\nseal kept\nwait kept\nsleep 0.5\n"
                       "cache-stats\nsync\n", cache=cache)
    ks = keys(s3server, bucket)
    assert not [k for k in ks if "gone" in k], ks
    st = [x for x in lines if x["op"] == "cache-stats"][0]
    assert st["entries"] == 1 and st["bytes"] == len(ad)
    objs = list((cache / "objects").rglob("*"))
    files = [o for o in objs if o.is_file()]
    assert len(files) == 1 and files[0].read_bytes() == ad


def test_second_engine_on_state_dir_is_refused(eng):
    p = eng.start()
    try:
        assert json.loads(p.stdout.readline())["rc"] == 0
        lines, proc = eng.run("", ok=False)
        assert proc.returncode == 1
        assert "in use" in proc.stderr
    finally:
        p.stdin.close()
        p.wait(30)


def test_fsync_of_single_file_is_durable_not_visible(eng, s3server, bucket):
    """eng_wait_file on an open single-file transaction uploads its bytes
    as the parts of a multipart upload; only the ordered step (at seal)
    makes the object appear."""
    a, ad = eng.file("a", 3000, 9)
    p = eng.start()
    p.stdin.write(f"begin-file f\nput f {a}\nwait-file f\n")
    p.stdin.flush()
    lines = [json.loads(p.stdout.readline()) for _ in range(4)]
    assert lines[-1]["op"] == "wait-file" and lines[-1]["rc"] == 0, lines
    c = s3server.client()
    ups = c.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert [u["Key"] for u in ups] == ["p/f"]
    assert keys(s3server, bucket) == []
    p.stdin.write("seal f\nsync\n")
    p.stdin.close()
    assert p.wait(60) == 0
    assert get(s3server, bucket, "p/f") == ad
    assert not c.list_multipart_uploads(Bucket=bucket).get("Uploads")
