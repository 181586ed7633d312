#!/usr/bin/python3
"""Generates tests/data/bucket-v1/: a bucket written by format 1 of the
bucket format (doc/commit.md, "Format versions"), i.e. by ckptfs as of
commit 381e25d, for tests/integration/test_compat.py.

Usage (as root, like the integration tests; RGW is started and stopped):

    git worktree add /tmp/ckptfs-old 381e25d
    (cd /tmp/ckptfs-old && autoreconf -fi && mkdir -p build && cd build &&
     ../configure -q CC=gcc && make -j2)
    CKPTFS_OLD_BIN=/tmp/ckptfs-old/build/ckptfs \\
        /usr/bin/python3 tests/tools/make-compat-fixture.py [OUTDIR]

OUTDIR defaults to tests/data/bucket-v1.  The script runs itself under
pytest with tests/integration/conftest.py loaded as a plugin, so it gets
the same throwaway RGW, mounts, watchdog and hygiene as the tests; every
mount and `ckptfs` command uses the OLD binary (CKPTFS_BIN is set to
CKPTFS_OLD_BIN before conftest is imported).  Writers go through
tests/integration/faultproxy.py so that a chosen request can be held
(never reaches the server) while the writer is SIGKILLed: the states left
are what format 1 really leaves, with one documented exception (below).

Everything is written under the prefix "run/" with lease=2 (markers
expire 2 s after they are last PUT; on replay the upload gives them a
fresh LastModified, so the replay waits past the lease):

  run/ckpt-a/         committed directory: model.bin, config.json (mode
                      0600, xattr user.note), sub/opt.bin,
                      sub/deeper/notes.txt, empty directory emptydir/, a
                      symlink link -> model.bin
  run/latest          single-file commit ("ckpt-a\\n")
  run/ckpt-del-part/  `rm -r` interrupted: the old writer PUT its marker and
                      was killed with its first DeleteObjects held; then
                      two of its five data objects were deleted with boto3.
                      This stands for a directory of more than 1 000
                      objects whose first DeleteObjects batch landed (the
                      old code deletes data in batches of 1 000; five
                      small files keep the fixture small).  SYNTHESIZED
                      in that one step, recorded in the index.
  run/ckpt-del-data/  `rm -r` interrupted after its data batch: marker and
                      manifest left, no data object (killed with the
                      manifests' DeleteObjects held)
  run/ckpt-ren-src/   committed; `mv ckpt-ren-src ckpt-ren-dst` killed with
                      the third CopyObject held: marker on ckpt-ren-dst,
                      two copies there, no manifest at ckpt-ren-dst
  run/ckpt-mw/        committed by two old mounts (one shard each)
  run/ckpt-abandoned/ directory transaction killed mid-upload: marker,
                      intent manifest (state pending), at most some of its
                      files' objects

The dump (index.json + objects/NNNN) keeps, per key, the body, the
Content-Type, every x-amz-meta-* header and the original LastModified;
test_compat.py uploads them into a fresh bucket in LastModified order
(ties in index order), so that relative ages survive the replay."""

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
ROOT = TOOLS.parent.parent
IT = ROOT / "tests" / "integration"
PREFIX = "run/"
LEASE = 2
OLD_COMMIT = "381e25d"


def _main():
    old = os.environ.get("CKPTFS_OLD_BIN")
    if not old or not os.access(old, os.X_OK):
        sys.exit("set CKPTFS_OLD_BIN to the ckptfs binary built at "
                 f"{OLD_COMMIT} (see this script's docstring)")
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "tests/data/bucket-v1")
    os.environ["CKPTFS_BIN"] = old
    os.environ["COMPAT_FIXTURE_OUT"] = str(out.resolve())
    sys.path.insert(0, str(IT))
    import pytest
    sys.exit(pytest.main(["-q", "-s", "-p", "no:cacheprovider", "-p", "conftest",
                          "--rootdir", str(TOOLS), __file__]))


# ---- below: run by pytest --------------------------------------------------

class KillAt:
    """faultproxy inspect hook: the n-th mutating request matching `pred`
    (and every mutating request after it) is held, never reaching the
    server; `fired` is set so that the writer can be SIGKILLed."""

    def __init__(self, pred, n=1):
        self.pred, self.n = pred, n
        self.proxy = None
        self.count = 0
        self.fired = threading.Event()
        self.lock = threading.Lock()

    def __call__(self, method, path, query, hdrs):
        if method not in ("PUT", "POST", "DELETE"):
            return None
        copy = any(k.lower() == "x-amz-copy-source" for k, _ in hdrs)
        with self.lock:
            if not self.fired.is_set():
                if not self.pred(method, path, query, copy):
                    return None
                self.count += 1
                if self.count < self.n:
                    return None
                self.fired.set()
            self.proxy.rule("stall_before", method=method,
                            path_re=re.escape(path) + "$")
        return None


def write(p, body, mode=None):
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(body)
    if mode is not None:
        os.chmod(p, mode)


def blob(seed, n):
    import helpers
    return helpers.det_bytes(seed, n)


def test_generate(s3server, bucket, mount, tmp_path):
    import helpers
    from faultproxy import FaultProxy
    from helpers import ckptfs_sync, kill_ckptfs, run, wait_until

    out = Path(os.environ["COMPAT_FIXTURE_OUT"])
    s3 = s3server.client()
    notes = {}

    def writer(tag, proxy=None):
        mp = mount.workdir / f"w-{tag}"
        mp.mkdir(parents=True, exist_ok=True)
        argv = mount.argv(bucket, PREFIX.rstrip("/"), mp,
                          [f"cache_dir={tmp_path / ('c-' + tag)}", f"lease={LEASE}",
                           "commit_delay=600"], endpoint=False)
        argv += ["--endpoint", proxy.endpoint if proxy else s3server.endpoint,
                 "--region", s3server.region]
        return mount(bucket, argv=argv, mountpoint=mp)

    def killed_during(tag, setup, act, pred, n=1):
        """setup(mp) through a writer that syncs; then act(mp) in a thread
        on a second writer through a proxy holding the n-th request that
        matches pred; SIGKILL it there."""
        hook = KillAt(pred, n)
        with FaultProxy(s3server.endpoint, inspect=hook) as proxy:
            hook.proxy = proxy
            if setup:
                w0 = writer(tag + "-setup")
                setup(w0.path)
                assert ckptfs_sync(w0.path).returncode == 0
                w0.unmount()
            w = writer(tag, proxy)
            t = threading.Thread(target=lambda: _quiet(act, w.path), daemon=True)
            t.start()
            assert hook.fired.wait(60), f"{tag}: the request to hold never came"
            time.sleep(0.3)  # requests in flight beside it land
            kill_ckptfs(w)
            t.join(30)

    # (a) a committed directory with every kind of entry
    w = writer("a")
    a = w.path / "ckpt-a"
    os.makedirs(a / "sub" / "deeper")
    os.makedirs(a / "emptydir")
    write(a / "model.bin", blob(1, 3000))
    write(a / "config.json", b'{"lr": 0.1}\n', mode=0o600)
    os.setxattr(a / "config.json", "user.note", b"hello compat")
    write(a / "sub" / "opt.bin", blob(2, 2000))
    write(a / "sub" / "deeper" / "notes.txt", b"deep\n")
    os.symlink("model.bin", a / "link")
    assert ckptfs_sync(w.path).returncode == 0
    # (b) latest, a single-file commit
    write(w.path / "latest", b"ckpt-a\n")
    assert ckptfs_sync(w.path).returncode == 0
    # (e) the first writer of a two-writer directory: both mkdir before
    # either commits (each one's marker exists before anybody commits)
    w2 = writer("mw2")
    os.makedirs(w.path / "ckpt-mw")
    os.makedirs(w2.path / "ckpt-mw")
    write(w.path / "ckpt-mw" / "shard-0.bin", blob(30, 1500))
    write(w2.path / "ckpt-mw" / "shard-1.bin", blob(31, 1700))
    write(w2.path / "ckpt-mw" / ".metadata", b"meta\n")
    assert ckptfs_sync(w.path).returncode == 0
    assert ckptfs_sync(w2.path).returncode == 0
    w2.unmount()
    w.unmount()

    def five(mp, name, seed):
        for i in range(5):
            write(Path(mp) / name / f"part-{i}.bin", blob(seed + i, 800 + 100 * i))

    # (c1) rm -r killed with its first DeleteObjects (the data batch) held
    killed_during("delpart", lambda mp: five(mp, "ckpt-del-part", 40),
                  lambda mp: run(["rm", "-r", f"{mp}/ckpt-del-part"], timeout=60),
                  lambda m, p, q, c: m == "POST" and "delete" in q)
    # ... then the first batch of a large directory: two data objects go
    for i in (0, 3):
        s3.delete_object(Bucket=bucket, Key=f"{PREFIX}ckpt-del-part/part-{i}.bin")
    notes["run/ckpt-del-part/"] = (
        "old writer SIGKILLed with its first DeleteObjects held (marker PUT, "
        "nothing deleted); then part-0.bin and part-3.bin deleted with boto3, "
        "standing for the first 1000-key batch of a larger directory")

    # (c2) rm -r killed with its second DeleteObjects (the manifests) held
    killed_during("deldata", lambda mp: five(mp, "ckpt-del-data", 50),
                  lambda mp: run(["rm", "-r", f"{mp}/ckpt-del-data"], timeout=60),
                  lambda m, p, q, c: m == "POST" and "delete" in q, n=2)
    notes["run/ckpt-del-data/"] = (
        "old writer SIGKILLed with the manifests' DeleteObjects held: data "
        "deleted, manifest and marker left")

    # (d) mv killed with its third CopyObject held
    killed_during("ren", lambda mp: five(mp, "ckpt-ren-src", 60),
                  lambda mp: os.rename(f"{mp}/ckpt-ren-src", f"{mp}/ckpt-ren-dst"),
                  lambda m, p, q, c: m == "PUT" and c, n=3)
    notes["run/ckpt-ren-dst/"] = (
        "mv ckpt-ren-src ckpt-ren-dst, old writer SIGKILLed with its third "
        "CopyObject held: marker on ckpt-ren-dst, two copies, no manifest")

    # (f) a directory transaction killed mid-upload
    def abandon(mp):
        os.makedirs(f"{mp}/ckpt-abandoned")
        time.sleep(0.5)  # the marker and the intent are PUT at mkdir
        write(Path(mp) / "ckpt-abandoned" / "a.bin", blob(70, 900))
        write(Path(mp) / "ckpt-abandoned" / "b.bin", blob(71, 1100))
        run([helpers.CKPTFS_BIN, "commit", f"{mp}/ckpt-abandoned"], timeout=60,
            check=False)
    killed_during("abandon", None, abandon,
                  lambda m, p, q, c: m == "PUT" and "/ckpt-abandoned/" in p and
                  "/.ckptfs" not in p and "-pending/" not in p, n=2)
    notes["run/ckpt-abandoned/"] = (
        "directory transaction; old writer SIGKILLed with the PUT of its "
        "second file held: marker, intent manifest, one object")

    # the dump
    dump(s3, bucket, out, notes)


def _quiet(fn, *a):
    try:
        fn(*a)
    except Exception as e:  # the writer dies under it
        sys.stderr.write(f"[generator] {fn.__name__}: {e!r} (expected)\n")


def dump(s3, bucket, out, notes):
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys += [o["Key"] for o in page.get("Contents", [])]
    keys.sort()
    objdir = out / "objects"
    if out.exists():
        for f in sorted(objdir.glob("*")) if objdir.exists() else []:
            f.unlink()
    objdir.mkdir(parents=True, exist_ok=True)
    entries, leases = [], {}
    for i, k in enumerate(keys):
        r = s3.get_object(Bucket=bucket, Key=k)
        body = r["Body"].read()
        name = f"{i:04d}"
        (objdir / name).write_bytes(body)
        e = {"key": k, "file": f"objects/{name}", "size": len(body),
             "md5": hashlib.md5(body).hexdigest(),
             "content_type": r.get("ContentType", ""),
             "last_modified": r["LastModified"].isoformat(),
             "metadata": dict(sorted(r.get("Metadata", {}).items()))}
        m = re.search(r"/\.ckptfs-pending/[^/]+/([^/]+)@(\d+)$", k)
        if m:
            leases[k] = int(m.group(2))
        entries.append(e)
    writers = sorted({e["metadata"]["writer"] for e in entries
                      if "writer" in e["metadata"]})
    index = {
        "format": 1,
        "written_by": f"ckptfs at commit {OLD_COMMIT} (tests/tools/make-compat-fixture.py)",
        "prefix": PREFIX,
        "lease_seconds": LEASE,
        "liveness": ("markers are judged live while LastModified + lease is "
                     "later than the server's Date; an upload gives them a "
                     "fresh LastModified, so a replay waits lease_seconds + 1 "
                     "before judging them expired"),
        "replay": ("upload in order of last_modified, ties in index order: "
                   "a format-1 delete's marker is newer than the objects it "
                   "was deleting, which `ckptfs gc` relies on"),
        "markers": leases,
        "writers": writers,
        "notes": notes,
        "objects": entries,
    }
    (out / "index.json").write_text(json.dumps(index, indent=1, sort_keys=False) + "\n")
    total = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    sys.stderr.write(f"[generator] {len(entries)} keys, {total} bytes in {out}\n")
    assert total < 200_000, total


if __name__ == "__main__":
    _main()
