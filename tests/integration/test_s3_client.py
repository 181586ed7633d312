"""The S3 write primitives (src/s3/upload.h) against the real Ceph RGW,
driven through tests/tools/s3-tool and checked with boto3: single PUTs from
fd ranges and memory, multipart uploads, server-side copies, deletes, user
metadata, listing and aborting incomplete uploads, awkward keys, and
failures (bad credentials, missing bucket, dead endpoint).  A small fake S3
server in this process checks what RGW cannot be made to do: transient
failures mid-upload (the body is sent again from the start of its range), a
200 reply holding an <Error>, and a completion whose reply is lost.

The binary: $S3TOOL_BIN, else <dir of $CKPTFS_BIN>/tests/tools/s3-tool
(built by `make` in the build directory).
"""

import hashlib
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import helpers
from helpers import det_bytes

MiB = 1 << 20
_CKPTFS = os.environ.get("CKPTFS_BIN", "/work/main/build/ckptfs")
S3TOOL_BIN = os.environ.get(
    "S3TOOL_BIN", str(Path(_CKPTFS).resolve().parent / "tests" / "tools" / "s3-tool"))

# Awkward keys: spaces, UTF-8, and the characters URLs and encodings treat
# specially.
ODD_KEYS = [
    "sp ace/a b c",
    "utf8/\u00fc\u00f1\u00ee/\u20ac\u65e5\u672c",
    "plus+sign/a+b",
    "per%cent/100%25",
    "hash#tag/#x",
    "quest?ion/a?b=c&d",
    "amp&eq=semi;colon",
    "tilde~star*paren()",
    "quote'dq\"lt<gt>",
]


@pytest.fixture(scope="module")
def s3tool_bin(tmp_path_factory):
    """A private copy of s3-tool: a rebuild during the run must not change
    the binary under test."""
    if not os.access(S3TOOL_BIN, os.X_OK):
        pytest.fail(f"s3-tool not found at {S3TOOL_BIN}: build it (make) or "
                    "set S3TOOL_BIN", pytrace=False)
    dst = tmp_path_factory.mktemp("s3tool") / "s3-tool"
    shutil.copy2(S3TOOL_BIN, dst)
    return str(dst)


class Result:
    def __init__(self, p, elapsed):
        self.rc = p.returncode
        self.stdout = p.stdout
        self.stderr = p.stderr
        self.elapsed = elapsed
        self.lines = []
        for line in p.stdout.splitlines():
            try:
                self.lines.append(json.loads(line))
            except ValueError:
                raise AssertionError(f"s3-tool printed a non-JSON line: {line!r}"
                                     f"\nstderr: {p.stderr}") from None

    @property
    def last(self):
        return self.lines[-1] if self.lines else {}

    @property
    def error(self):
        return self.last.get("error")


class Tool:
    """Runs s3-tool against an endpoint with the given keys."""

    def __init__(self, binary, endpoint, access_key, secret_key, region="us-east-1"):
        self.binary = binary
        self.endpoint = endpoint
        self.access_key = access_key
        self.secret_key = secret_key
        self.region = region

    def env(self, **extra):
        env = helpers.clean_env()
        env.update(AWS_ENDPOINT_URL=self.endpoint,
                   AWS_ACCESS_KEY_ID=self.access_key,
                   AWS_SECRET_ACCESS_KEY=self.secret_key,
                   AWS_REGION=self.region,
                   AWS_CONFIG_FILE=os.devnull,
                   AWS_SHARED_CREDENTIALS_FILE=os.devnull,
                   AWS_EC2_METADATA_DISABLED="true",
                   LC_ALL="C.UTF-8")
        env.update({k: str(v) for k, v in extra.items()})
        return env

    def run(self, bucket, *args, ok=True, env=None, input=None, verbose=False,
            timeout=300):
        argv = [self.binary, "-b", bucket] + (["-v"] if verbose else []) + \
            [str(a) for a in args]
        t0 = time.monotonic()
        p = subprocess.run(argv, capture_output=True, timeout=timeout,
                           env=env or self.env(), input=input,
                           text=True, errors="surrogateescape")
        r = Result(p, time.monotonic() - t0)
        if ok and r.rc != 0:
            raise AssertionError(f"s3-tool {args} failed with {r.rc}\n"
                                 f"stdout: {r.stdout}\nstderr: {r.stderr}")
        if not ok:
            assert r.rc == 1, f"exit {r.rc}, expected 1\n{r.stdout}\n{r.stderr}"
            assert r.error, f"no error object printed: {r.stdout}"
            assert r.stderr.splitlines()[-1].startswith("s3-tool: "), r.stderr
        return r


@pytest.fixture
def tool(s3server, s3tool_bin):
    return Tool(s3tool_bin, s3server.endpoint, s3server.access_key,
                s3server.secret_key, s3server.region)


def get(s3server, bucket, key):
    return s3server.client().get_object(Bucket=bucket, Key=key)["Body"].read()


def md5(b):
    return hashlib.md5(b).hexdigest()


def multipart_etag(data, part_size):
    parts = [data[i:i + part_size] for i in range(0, len(data), part_size)] or [b""]
    d = b"".join(hashlib.md5(p).digest() for p in parts)
    return f'"{hashlib.md5(d).hexdigest()}-{len(parts)}"'


@pytest.fixture
def data_file(tmp_path):
    """Writes `n` deterministic bytes to a file; returns (path, bytes)."""
    def make(n, seed=1, name="data.bin"):
        b = det_bytes(seed, n)
        p = tmp_path / name
        p.write_bytes(b)
        return p, b
    return make


# --------------------------------------------------------------------------
# Single PUT

@pytest.mark.timeout(120)
def test_put_from_fd_ranges_and_memory(tool, s3server, bucket, data_file):
    path, data = data_file(3 * MiB + 17)
    cases = [
        ("whole", []),
        ("head", ["--length", 1000]),
        ("middle", ["--offset", 12345, "--length", 2 * MiB + 1]),
        ("tail", ["--offset", 3 * MiB]),
        ("empty", ["--offset", 100, "--length", 0]),
        ("mem", ["--offset", 7, "--length", 100000, "--mem"]),
        ("async", ["--offset", 99, "--length", MiB, "--async"]),
        ("md5", ["--offset", 5, "--length", 777777, "--md5"]),
    ]
    for key, opts in cases:
        r = tool.run(bucket, "put", key, path, *opts)
        off = int(opts[opts.index("--offset") + 1]) if "--offset" in opts else 0
        ln = int(opts[opts.index("--length") + 1]) if "--length" in opts else len(data) - off
        want = data[off:off + ln]
        assert get(s3server, bucket, key) == want, key
        assert r.last["etag"] == f'"{md5(want)}"', key
        assert r.last["size"] == len(want)


@pytest.mark.timeout(180)
def test_put_large_from_fd_range(tool, s3server, bucket, data_file):
    path, data = data_file(48 * MiB + 3)
    tool.run(bucket, "put", "large.bin", path, "--offset", MiB + 1)
    got = get(s3server, bucket, "large.bin")
    assert len(got) == len(data) - MiB - 1
    assert hashlib.sha256(got).digest() == hashlib.sha256(data[MiB + 1:]).digest()


def test_put_content_type_and_metadata(tool, s3server, bucket, data_file):
    path, _ = data_file(1000)
    tool.run(bucket, "put", "k", path, "--content-type", "application/json",
             "--meta", "Lease=30", "--meta", "writer=host-1_a",
             "--meta", "mtime=1700000000.123456789")
    h = s3server.head(bucket, "k")
    assert h["ContentType"] == "application/json"
    assert h["Metadata"] == {"lease": "30", "writer": "host-1_a",
                             "mtime": "1700000000.123456789"}
    # no Content-Type asked: not curl's form default
    tool.run(bucket, "put", "k2", path)
    assert s3server.head(bucket, "k2")["ContentType"] == "application/octet-stream"


def test_put_if_none_match(tool, s3server, bucket, data_file):
    path, data = data_file(4096)
    tool.run(bucket, "put", "once", path, "--if-none-match")
    for extra in ([], ["--mem"]):
        r = tool.run(bucket, "put", "once", path, "--length", 10,
                     "--if-none-match", *extra, ok=False)
        assert r.error["code"] == "PreconditionFailed"
        assert r.error["errno"] == "EEXIST"
        assert r.error["http_status"] == 412
    assert get(s3server, bucket, "once") == data


def test_put_wrong_content_md5_is_refused(tool, s3server, bucket, data_file):
    path, _ = data_file(4096)
    r = tool.run(bucket, "put", "bad", path, "--content-md5",
                 "AAAAAAAAAAAAAAAAAAAAAA==", ok=False)
    assert r.error["code"] == "BadDigest"
    assert "bad" not in s3server.keys(bucket)


def test_local_source_failures_are_final(tool, s3server, bucket, data_file, tmp_path):
    path, _ = data_file(1000)
    # the file is shorter than the range to send: no retry, no object
    r = tool.run(bucket, "put", "short", path, "--length", 5000, ok=False,
                 verbose=True)
    assert "it ended before the announced length" in r.error["message"]
    assert r.error["errno"] == "EIO"
    assert r.stderr.count("(attempt ") == 1
    # a source that cannot be read at all (a directory)
    r = tool.run(bucket, "put", "dir", tmp_path, "--length", 10, ok=False)
    assert "reading the local source: Is a directory" in r.error["message"]
    r = tool.run(bucket, "mpu-upload", "mp", path, "--length", 6 * MiB,
                 "--part-size", 5 * MiB, ok=False)
    assert "ended before the announced length" in r.error["message"]
    assert s3server.keys(bucket) == []
    assert not s3server.client().list_multipart_uploads(Bucket=bucket).get("Uploads")


# --------------------------------------------------------------------------
# Multipart

@pytest.mark.timeout(180)
@pytest.mark.parametrize("mode", ["parallel", "sync"])
def test_multipart_upload(tool, s3server, bucket, data_file, mode):
    path, data = data_file(23 * MiB + 5)  # 5 MiB parts: 4 full + 3 MiB+5
    extra = ["--parallel", 3] if mode == "parallel" else ["--sync"]
    r = tool.run(bucket, "mpu-upload", "ckpt/model.bin", path,
                 "--part-size", 5 * MiB, *extra)
    assert r.last["parts"] == 5
    assert r.last["part_size"] == 5 * MiB
    want_etag = multipart_etag(data, 5 * MiB)
    assert r.last["etag"] == want_etag
    h = s3server.head(bucket, "ckpt/model.bin")
    assert h["ETag"] == want_etag
    assert h["ETag"].strip('"').endswith("-5")
    assert h["ContentLength"] == len(data)
    assert get(s3server, bucket, "ckpt/model.bin") == data
    assert not s3server.client().list_multipart_uploads(Bucket=bucket).get("Uploads")


@pytest.mark.timeout(180)
def test_multipart_from_fd_range_with_metadata(tool, s3server, bucket, data_file):
    path, data = data_file(16 * MiB)
    off, ln = 3 * MiB + 1, 11 * MiB
    r = tool.run(bucket, "mpu-upload", "r.bin", path, "--offset", off,
                 "--length", ln, "--part-size", 5 * MiB,
                 "--content-type", "application/x-safetensors",
                 "--meta", "mode=0644")
    assert r.last["parts"] == 3
    assert get(s3server, bucket, "r.bin") == data[off:off + ln]
    h = s3server.head(bucket, "r.bin")
    assert h["ContentType"] == "application/x-safetensors"
    assert h["Metadata"] == {"mode": "0644"}


def test_multipart_single_short_part(tool, s3server, bucket, data_file):
    path, data = data_file(1234)
    r = tool.run(bucket, "mpu-upload", "tiny", path)
    assert r.last["parts"] == 1
    assert r.last["part_size"] == 8 * MiB  # the default
    assert r.last["etag"] == multipart_etag(data, 8 * MiB)
    assert get(s3server, bucket, "tiny") == data


def test_part_with_wrong_content_md5_and_bad_complete(tool, s3server, bucket, data_file):
    path, data = data_file(6 * MiB)
    uid = tool.run(bucket, "mpu-create", "p").last["upload_id"]
    r = tool.run(bucket, "mpu-part", "p", uid, 1, path, "--content-md5",
                 "AAAAAAAAAAAAAAAAAAAAAA==", ok=False)
    assert r.error["code"] == "BadDigest"
    e1 = tool.run(bucket, "mpu-part", "p", uid, 1, path, "--md5").last["etag"]
    assert e1 == f'"{md5(data)}"'
    r = tool.run(bucket, "mpu-complete", "p", uid, "1:\"0123456789abcdef0123456789abcdef\"",
                 ok=False)
    assert r.error["code"] == "InvalidPart"
    assert "COMPLETE MULTIPART UPLOAD s3://" in r.error["message"]
    r = tool.run(bucket, "mpu-complete", "p", uid, f"1:{e1}")
    assert r.last["etag"] == multipart_etag(data, 6 * MiB)
    assert get(s3server, bucket, "p") == data


def test_part_size_command():
    """The tool's pure part-size command (no server)."""
    exe = S3TOOL_BIN
    if not os.access(exe, os.X_OK):
        pytest.skip("no s3-tool")
    def ps(*a):
        p = subprocess.run([exe, "part-size", *map(str, a)], capture_output=True,
                           text=True, check=True)
        return json.loads(p.stdout)
    assert ps(0) == {"part_size": 8 * MiB, "parts": 1}
    assert ps(5 << 40)["part_size"] == 525 * MiB
    assert ps(5 << 40)["parts"] <= 10000
    assert ps((5 << 40) + 1)["part_size"] == 0


# --------------------------------------------------------------------------
# Copies

@pytest.mark.timeout(240)
def test_part_copy_of_multipart_source(tool, s3server, bucket, data_file):
    path, data = data_file(21 * MiB + 7)
    tool.run(bucket, "mpu-upload", "src/model.bin", path, "--part-size", 8 * MiB,
             "--meta", "lease=10", "--content-type", "application/octet-stream")
    assert s3server.head(bucket, "src/model.bin")["ETag"].endswith('-3"')
    dst = "dst/m o+d%e#l?.bin"
    r = tool.run(bucket, "part-copy", "src/model.bin", dst, "--part-size", 5 * MiB)
    assert r.last["parts"] == 5
    assert r.last["etag"] == multipart_etag(data, 5 * MiB)
    assert get(s3server, bucket, dst) == data
    h = s3server.head(bucket, dst)
    assert h["ETag"] == r.last["etag"]
    assert h["Metadata"] == {"lease": "10"}
    # pinned to a version that is not the source's: refused
    r = tool.run(bucket, "part-copy", "src/model.bin", "dst/x", "--if-match",
                 '"0123456789abcdef0123456789abcdef-3"', ok=False)
    assert r.error["errno"] == "ESTALE"
    assert r.error["code"] == "PreconditionFailed"


def test_copy_metadata_copy_and_replace(tool, s3server, bucket, data_file):
    path, data = data_file(10000)
    tool.run(bucket, "put", "a", path, "--content-type", "text/plain",
             "--meta", "one=1", "--meta", "two=2")
    etag = s3server.head(bucket, "a")["ETag"]
    r = tool.run(bucket, "copy", "a", "kept", "--length", len(data))
    assert r.last["etag"] == etag  # quoted, as S3 sends it in headers
    h = s3server.head(bucket, "kept")
    assert h["Metadata"] == {"one": "1", "two": "2"}
    assert h["ContentType"] == "text/plain"
    tool.run(bucket, "copy", "a", "replaced", "--replace", "--meta", "three=3",
             "--content-type", "application/json", "--if-match", etag)
    h = s3server.head(bucket, "replaced")
    assert h["Metadata"] == {"three": "3"}
    assert h["ContentType"] == "application/json"
    assert get(s3server, bucket, "replaced") == data
    # in place: the way chmod/utimens will update metadata
    tool.run(bucket, "copy", "a", "a", "--replace", "--meta", "mode=0600")
    assert s3server.head(bucket, "a")["Metadata"] == {"mode": "0600"}
    assert get(s3server, bucket, "a") == data
    r = tool.run(bucket, "copy", "a", "b", "--if-match",
                 '"0123456789abcdef0123456789abcdef"', ok=False)
    assert r.error["errno"] == "ESTALE"
    r = tool.run(bucket, "copy", "missing", "b", ok=False)
    assert r.error["errno"] == "ENOENT"
    assert r.error["code"] == "NoSuchKey"
    assert "b" not in s3server.keys(bucket)


# --------------------------------------------------------------------------
# Deletes

@pytest.mark.timeout(240)
def test_delete_many_1500_keys(tool, s3server, bucket):
    keys = [f"ckpt-{i // 100:02d}/shard-{i:05d}.bin" for i in range(1500)]
    s3server.put_many(bucket, [(k, b"x") for k in keys])
    s3server.put(bucket, "keep/me", b"y")
    stdin = "\n".join(keys + ["never/existed"]) + "\n"
    r = tool.run(bucket, "delete-many", "--stdin", input=stdin)
    assert r.last == {"deleted": 1501, "failed": 0, "batches": 2}
    assert s3server.keys(bucket) == ["keep/me"]


def test_delete_odd_keys_in_batch_and_one_by_one(tool, s3server, bucket):
    # a key XML 1.0 cannot carry (\x01) goes by a single DELETE; newline,
    # tab and CR go into the XML as character references
    keys = ODD_KEYS + ["ctl\x01char", "new\nline", "tab\there", "cr\rhere"]
    s3server.put_many(bucket, [(k, b"z") for k in keys])
    assert sorted(s3server.keys(bucket)) == sorted(keys)
    r = tool.run(bucket, "delete-many", "--stdin", "-0",
                 input="\0".join(keys) + "\0")
    assert r.last == {"deleted": len(keys), "failed": 0, "batches": 1}
    assert s3server.keys(bucket) == []


def test_delete_single(tool, s3server, bucket):
    s3server.put(bucket, "d/x", b"1")
    tool.run(bucket, "delete", "d/x")
    assert s3server.keys(bucket) == []
    tool.run(bucket, "delete", "d/x")  # already gone: still success


# --------------------------------------------------------------------------
# Metadata

def test_metadata_round_trip(tool, s3server, bucket, data_file):
    path, _ = data_file(100)
    meta = {"Lease": "30", "uid": "1000", "gid": "1000", "mode": "0100644",
            "mtime": "1700000000.5", "symlink-target": "../a b/c", "X-Y": "!#$%&'()*+,-./:;<=>?@[]^_`{|}~"}
    args = []
    for k, v in meta.items():
        args += ["--meta", f"{k}={v}"]
    tool.run(bucket, "put", "m", path, "--content-type", "x/y", *args)
    r = tool.run(bucket, "head-meta", "m")
    want = {k.lower(): v for k, v in meta.items()}
    assert r.last["meta"] == want
    assert r.last["content_type"] == "x/y"
    assert r.last["size"] == 100
    assert s3server.head(bucket, "m")["Metadata"] == want
    # set by another tool, read by ours
    s3server.client().put_object(Bucket=bucket, Key="n", Body=b"",
                                 Metadata={"from": "boto3"})
    assert tool.run(bucket, "head-meta", "n").last["meta"] == {"from": "boto3"}


def test_get_whole_object(tool, s3server, bucket):
    """s3_get_object reads an object whole, whatever size it was listed
    at (a manifest rewritten longer since), within a bound."""
    c = s3server.client()
    body = det_bytes(5, 70000)  # more than one receive buffer
    c.put_object(Bucket=bucket, Key="doc", Body=body)
    r = tool.run(bucket, "get", "doc").last
    assert r["size"] == len(body)
    assert r["sha256"] == hashlib.sha256(body).hexdigest()
    assert r["etag"] == f'"{md5(body)}"'
    assert r["terminated"]
    # the version pinned by its ETag, and one replaced since
    assert tool.run(bucket, "get", "doc", "--if-match",
                    r["etag"]).last["size"] == len(body)
    c.put_object(Bucket=bucket, Key="doc", Body=body + b"more")
    stale = tool.run(bucket, "get", "doc", "--if-match", r["etag"], ok=False)
    assert stale.error["errno"] == "ESTALE"
    assert tool.run(bucket, "get", "doc").last["size"] == len(body) + 4
    # the bound: at it passes, past it fails with EFBIG, not a cut body
    assert tool.run(bucket, "get", "doc", "--length",
                    len(body) + 4).last["size"] == len(body) + 4
    big = tool.run(bucket, "get", "doc", "--length", len(body), ok=False)
    assert big.error["errno"] == "EFBIG"
    # empty and missing objects
    c.put_object(Bucket=bucket, Key="empty", Body=b"")
    e = tool.run(bucket, "get", "empty").last
    assert e["size"] == 0 and e["terminated"]
    assert tool.run(bucket, "get", "nothing",
                    ok=False).error["errno"] == "ENOENT"


def test_invalid_metadata_is_refused_before_sending(tool, s3server, bucket, data_file):
    path, _ = data_file(100)
    for bad in ["bad name=1", "ok=line\r\nX-Injected: 1", "u=\u00fc", "t= lead",
                "under_score=1"]:
        r = tool.run(bucket, "put", "m", path, "--meta", bad, ok=False)
        assert r.error["errno"] == "EINVAL", bad
        assert r.error["http_status"] == 0
    assert s3server.keys(bucket) == []


# --------------------------------------------------------------------------
# Incomplete uploads

@pytest.mark.timeout(120)
def test_list_and_abort_incomplete_uploads(tool, s3server, bucket, data_file):
    path, _ = data_file(5 * MiB)
    mine = {}
    for key in ["gc/a", "gc/a", "gc/b b+%#?", "gc/\u00fc/c", "gc/z"]:
        uid = tool.run(bucket, "mpu-create", key).last["upload_id"]
        mine[uid] = key
    # one with a part, one outside the prefix
    any_uid = next(iter(mine))
    tool.run(bucket, "mpu-part", mine[any_uid], any_uid, 1, path)
    other = tool.run(bucket, "mpu-create", "other/x").last["upload_id"]

    r = tool.run(bucket, "list-uploads", "gc/", "--page-size", 2)
    listed = {u["upload_id"]: u["key"] for u in r.lines if "upload_id" in u}
    assert listed == mine
    assert r.last == {"count": 5, "pages": 3}
    now = time.time()
    assert all(abs(u["initiated"] - now) < 600 for u in r.lines if "initiated" in u)
    boto = s3server.client().list_multipart_uploads(Bucket=bucket, Prefix="gc/")
    assert {u["UploadId"]: u["Key"] for u in boto["Uploads"]} == mine

    for uid, key in mine.items():
        assert tool.run(bucket, "abort", key, uid).last == {"aborted": True}
    assert tool.run(bucket, "list-uploads", "gc/").last == {"count": 0, "pages": 1}
    left = s3server.client().list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert [u["UploadId"] for u in left] == [other]
    r = tool.run(bucket, "abort", "gc/a", any_uid, ok=False)
    assert r.error["code"] == "NoSuchUpload"
    assert r.error["errno"] == "ENOENT"
    assert s3server.keys(bucket) == []  # aborting wrote nothing


# --------------------------------------------------------------------------
# Awkward keys through every operation

@pytest.mark.timeout(180)
def test_odd_keys_everywhere(tool, s3server, bucket, data_file):
    path, data = data_file(6 * MiB + 1)
    for i, key in enumerate(ODD_KEYS):
        small = data[i:i + 1000]
        tool.run(bucket, "put", key, path, "--offset", i, "--length", 1000,
                 "--meta", f"i={i}")
        assert get(s3server, bucket, key) == small, key
        assert tool.run(bucket, "head-meta", key).last["meta"] == {"i": str(i)}
        tool.run(bucket, "copy", key, key + ".copy")
        assert get(s3server, bucket, key + ".copy") == small, key
    big = ODD_KEYS[3]
    tool.run(bucket, "mpu-upload", big + ".mp", path, "--part-size", 5 * MiB)
    tool.run(bucket, "part-copy", big + ".mp", ODD_KEYS[5] + ".pc", "--part-size", 5 * MiB)
    assert get(s3server, bucket, ODD_KEYS[5] + ".pc") == data
    every = sorted(s3server.keys(bucket))
    assert len(every) == 2 * len(ODD_KEYS) + 2
    for key in ODD_KEYS[:3]:
        tool.run(bucket, "delete", key)
    rest = [k for k in every if k not in ODD_KEYS[:3]]
    r = tool.run(bucket, "delete-many", *rest)
    assert r.last["deleted"] == len(rest)
    assert s3server.keys(bucket) == []


# --------------------------------------------------------------------------
# Failures

def test_wrong_credentials(tool, s3server, bucket, data_file):
    path, _ = data_file(100)
    secret = "wrong-secret-DO-NOT-PRINT-0123456789"
    env = tool.env(AWS_SECRET_ACCESS_KEY=secret)
    for args in (["put", "k", path], ["mpu-upload", "k", path],
                 ["delete-many", "a", "b"], ["list-uploads"], ["copy", "a", "b"]):
        r = tool.run(bucket, *args, env=env, ok=False, verbose=True)
        assert r.error["errno"] == "EACCES", args
        assert r.error["code"] in ("SignatureDoesNotMatch", "AccessDenied"), args
        assert f"s3://{bucket}/" in r.error["message"]
        for out in (r.stdout, r.stderr):
            assert secret not in out
            assert s3server.secret_key not in out
    env = tool.env(AWS_ACCESS_KEY_ID="AKIDNOSUCHKEY000000")
    r = tool.run(bucket, "put", "k", path, env=env, ok=False)
    assert r.error["code"] == "InvalidAccessKeyId"
    assert r.error["errno"] == "EACCES"
    assert s3server.keys(bucket) == []


def test_nonexistent_bucket(tool, data_file):
    path, _ = data_file(100)
    for args in (["put", "k", path], ["mpu-upload", "k", path],
                 ["delete-many", "a"], ["copy", "a", "b"], ["list-uploads"]):
        r = tool.run("no-such-bucket-zz9", *args, ok=False)
        assert r.error["code"] == "NoSuchBucket", args
        assert r.error["errno"] == "ENOENT", args
        assert "s3://no-such-bucket-zz9/" in r.error["message"]


def _closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.timeout(120)
def test_dead_endpoint_bounded_retries(s3tool_bin, data_file):
    path, _ = data_file(100)
    t = Tool(s3tool_bin, f"http://127.0.0.1:{_closed_port()}", "AKIDEXAMPLE",
             "dead-endpoint-secret-xyz")
    for args in (["put", "k", path], ["mpu-upload", "k", path],
                 ["delete-many", "a"]):
        r = t.run("bkt", *args, ok=False, verbose=True)
        assert r.error["http_status"] == 0
        assert r.error["curl_code"] == 7  # CURLE_COULDNT_CONNECT
        assert "cannot reach http://127.0.0.1:" in r.error["message"]
        attempts = r.stderr.count("(attempt ")
        assert attempts == 6, r.stderr  # RETRY_POLICY_DEFAULT
        assert r.elapsed < 30
        assert "dead-endpoint-secret-xyz" not in r.stdout + r.stderr
    r = t.run("bkt", "put", "k", path, ok=False, verbose=True,
              env=t.env(S3TOOL_MAX_ATTEMPTS=2))
    assert r.stderr.count("(attempt ") == 2


# --------------------------------------------------------------------------
# Transient failures, with a fake S3 server

class FakeS3(ThreadingHTTPServer):
    """Just enough S3 for PUT and multipart uploads, with scripted faults.
    faults: {op: [action, ...]} consumed one per request of that op, where
    op is put/part/create/complete and action is "ok", "503" (SlowDown after
    reading the body), "drop-half" (close after reading half the body),
    "error-body" (200 with an <Error>), or "lost" (do the work, then close
    without replying)."""
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), FakeHandler)
        self.lock = threading.Lock()
        self.objects = {}
        self.uploads = {}
        self.bodies = []  # (op, key, bytes) of every request that sent one
        self.faults = {}
        self.requests = []

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.server_address[1]}"

    def next_fault(self, op):
        with self.lock:
            q = self.faults.get(op) or []
            return q.pop(0) if q else "ok"


class FakeHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _reply(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status, code):
        self._reply(status, f"<?xml version=\"1.0\"?><Error><Code>{code}</Code>"
                            f"<Message>scripted</Message></Error>".encode())

    def _drop(self):
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _target(self):
        u = urllib.parse.urlsplit(self.path)
        parts = u.path.split("/", 2)  # "", bucket, key
        key = urllib.parse.unquote(parts[2]) if len(parts) > 2 else ""
        q = urllib.parse.parse_qs(u.query, keep_blank_values=True)
        return key, q

    def _body(self, fault):
        n = int(self.headers.get("Content-Length", "0"))
        if fault == "drop-half":
            self.rfile.read(n // 2)
            self._drop()
            return None
        return self.rfile.read(n)

    def do_HEAD(self):
        key, _ = self._target()
        srv = self.server
        srv.requests.append(("HEAD", key))
        if key not in srv.objects:
            return self._reply(404)
        data, etag = srv.objects[key]
        self.send_response(200)
        self.send_header("ETag", etag)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()

    def do_PUT(self):
        key, q = self._target()
        srv = self.server
        op = "part" if "partNumber" in q else "put"
        fault = srv.next_fault(op)
        srv.requests.append((op, key, fault))
        body = self._body(fault)
        if body is None:
            return
        srv.bodies.append((op, key, body))
        if fault == "503":
            return self._error(503, "SlowDown")
        etag = f'"{md5(body)}"'
        if op == "part":
            srv.uploads[q["uploadId"][0]][int(q["partNumber"][0])] = (body, etag)
        else:
            srv.objects[key] = (body, etag)
        self._reply(200, headers=[("ETag", etag)])

    def do_DELETE(self):
        key, q = self._target()
        srv = self.server
        srv.requests.append(("abort" if "uploadId" in q else "delete", key))
        if "uploadId" in q:
            srv.uploads.pop(q["uploadId"][0], None)
        else:
            srv.objects.pop(key, None)
        self._reply(204)

    def do_POST(self):
        key, q = self._target()
        srv = self.server
        op = "create" if "uploads" in q else "complete"
        fault = srv.next_fault(op)
        srv.requests.append((op, key, fault))
        body = self._body(fault)
        if body is None:
            return
        if fault == "503":
            return self._error(503, "SlowDown")
        if op == "create":
            uid = f"up-{len(srv.uploads)}"
            srv.uploads[uid] = {}
            return self._reply(200, f"<InitiateMultipartUploadResult><UploadId>{uid}"
                                    f"</UploadId></InitiateMultipartUploadResult>".encode())
        uid = q["uploadId"][0]
        if uid not in srv.uploads:
            return self._error(404, "NoSuchUpload")
        if fault == "error-body":
            return self._reply(200, b"<?xml version=\"1.0\"?>\n\n<Error><Code>InternalError"
                                    b"</Code><Message>try again</Message></Error>")
        parts = srv.uploads.pop(uid)
        data = b"".join(parts[n][0] for n in sorted(parts))
        d = b"".join(bytes.fromhex(parts[n][1].strip('"')) for n in sorted(parts))
        etag = f'"{hashlib.md5(d).hexdigest()}-{len(parts)}"'
        srv.objects[key] = (data, etag)
        if fault == "lost":
            return self._drop()
        self._reply(200, f"<CompleteMultipartUploadResult><ETag>{etag}</ETag>"
                         f"</CompleteMultipartUploadResult>".encode())


@pytest.fixture
def fake_s3(s3tool_bin):
    srv = FakeS3()
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield srv, Tool(s3tool_bin, srv.endpoint, "AKIDFAKE", "fake-secret")
    srv.shutdown()
    srv.server_close()


@pytest.mark.parametrize("fault", ["503", "drop-half"])
@pytest.mark.parametrize("mode", [[], ["--async"], ["--mem"]])
def test_retried_put_resends_the_range(fake_s3, data_file, fault, mode):
    srv, t = fake_s3
    path, data = data_file(3 * MiB + 1)
    srv.faults["put"] = [fault, fault]
    r = t.run("bkt", "put", "k", path, "--offset", 4097, "--length", 2 * MiB, *mode)
    want = data[4097:4097 + 2 * MiB]
    assert r.last["etag"] == f'"{md5(want)}"'
    assert srv.objects["k"][0] == want
    puts = [x for x in srv.requests if x[0] == "put"]
    assert [x[2] for x in puts] == [fault, fault, "ok"]
    for op, key, body in srv.bodies:
        assert body == want  # every attempt sent the whole range


@pytest.mark.timeout(120)
def test_retried_parts_and_complete(fake_s3, data_file):
    srv, t = fake_s3
    path, data = data_file(13 * MiB)
    srv.faults["part"] = ["503", "drop-half", "ok", "503"]
    srv.faults["complete"] = ["error-body", "503"]
    srv.faults["create"] = ["503"]
    r = t.run("bkt", "mpu-upload", "m", path, "--part-size", 5 * MiB, "--parallel", 2)
    assert r.last["etag"] == multipart_etag(data, 5 * MiB)
    assert srv.objects["m"][0] == data
    completes = [x[2] for x in srv.requests if x[0] == "complete"]
    assert completes == ["error-body", "503", "ok"]
    parts = [b for op, _, b in srv.bodies if op == "part"]
    assert sorted(set(parts), key=data.index) == [data[0:5 * MiB], data[5 * MiB:10 * MiB],
                                                   data[10 * MiB:]]


def test_complete_whose_reply_was_lost(fake_s3, data_file):
    srv, t = fake_s3
    path, data = data_file(11 * MiB)
    srv.faults["complete"] = ["lost"]
    r = t.run("bkt", "mpu-upload", "m", path, "--part-size", 5 * MiB, "--sync")
    # the retry found NoSuchUpload; the object's ETag proved it landed
    assert [x[2] for x in srv.requests if x[0] == "complete"] == ["lost", "ok"]
    assert ("HEAD", "m") in srv.requests
    assert r.last["etag"] == multipart_etag(data, 5 * MiB)


def test_complete_error_body_is_not_success(fake_s3, data_file):
    srv, t = fake_s3
    path, _ = data_file(6 * MiB)
    srv.faults["complete"] = ["error-body"] * 10
    r = t.run("bkt", "mpu-upload", "m", path, "--part-size", 5 * MiB, ok=False,
              env=t.env(S3TOOL_MAX_ATTEMPTS=3))
    assert r.error["code"] == "InternalError"
    assert r.error["http_status"] == 200
    assert "with an error body" in r.error["message"]
    assert [x[2] for x in srv.requests if x[0] == "complete"] == ["error-body"] * 3
    assert "m" not in srv.objects
