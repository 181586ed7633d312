#!/usr/bin/python3
"""Generates tests/data/bucket-v1/: a bucket written by format 1 of the
bucket format (doc/commit.md, "Format versions"), i.e. by ckptfs as of
commit 381e25d, for tests/integration/test_compat.py.

Usage (as root, like the integration tests; RGW is started and stopped):

    git worktree add /tmp/ckptfs-old 381e25d
    (cd /tmp/ckptfs-old && autoreconf -fi && mkdir -p build && cd build &&
     ../configure -q CC=gcc && make -j2)
    CKPTFS_OLD_BIN=/tmp/ckptfs-old/build/ckptfs \\
        /usr/bin/python3 tests/tools/make-compat-fixture.py [--v2] [OUTDIR]

OUTDIR defaults to tests/data/bucket-v1 (with --v2: bucket-v2).  The script runs itself under
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

With --v2 it generates tests/data/bucket-v2/ instead: a bucket written by
format 2 as of commit 2408fb3 (the previous landed main, before committed
directories' attribute changes were stored), for
tests/integration/test_compat_v2.py; CKPTFS_OLD_BIN is then a binary
built at 2408fb3 (same steps, `git worktree add /tmp/ckptfs-old 2408fb3`):

  run/ckpt-d/         committed directory: root ("dir") mode 0750, owner
                      1001:1002, xattr; sub/ (0700, xattr), sub/deeper/
                      (0711), empty sub/deeper/empty2/ and emptydir/ (own
                      owners, xattrs); every directory's and file's mtime
                      set to the ns before the commit; then model.bin
                      chmod, sub/opt.bin touch -d, config.json setfattr
                      twice, sub/deeper/notes.txt chown: addenda with
                      "parent" records
  run/latest          single-file commit
  run/ckpt-del/       `rm -r` killed with its manifests' DeleteObjects
                      held: delete record, manifest, no data
  run/ckpt-ren-dst/   `mv ckpt-ren-src ckpt-ren-dst` killed with the DELETE
                      of its marker held: copies, "renamed_from" manifest,
                      ckpt-ren-src's delete record (past the commit point)
  run/ckpt-cp-dst/    `mv ckpt-cp-src ckpt-cp-dst` killed with its third
                      CopyObject held (before the commit point)
  run/ckpt-abandoned/ as for format 1

index.json's "expect" is each visible checkpoint's tree as a fresh mount of
the old binary showed it (helpers.attr_tree); "last_modified" has
milliseconds (from the listing), so a replay keeps the order of requests
made in one second.

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
OLD_COMMITS = {1: "381e25d", 2: "2408fb3"}


def _main():
    args = sys.argv[1:]
    fmt = 1
    if args and args[0] in ("--v1", "--v2"):
        fmt = int(args.pop(0)[3:])
    commit = OLD_COMMITS[fmt]
    old = os.environ.get("CKPTFS_OLD_BIN")
    if not old or not os.access(old, os.X_OK):
        sys.exit("set CKPTFS_OLD_BIN to the ckptfs binary built at "
                 f"{commit} (see this script's docstring)")
    out = Path(args[0] if args else ROOT / f"tests/data/bucket-v{fmt}")
    os.environ["CKPTFS_BIN"] = old
    os.environ["COMPAT_FIXTURE_OUT"] = str(out.resolve())
    os.environ["COMPAT_FIXTURE_FORMAT"] = str(fmt)
    sys.path.insert(0, str(IT))
    import pytest
    sys.exit(pytest.main(["-q", "-s", "-p", "no:cacheprovider", "-p", "conftest",
                          "--rootdir", str(TOOLS), __file__,
                          "-k", f"test_generate_v{fmt}"]))


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


def _writers(s3server, bucket, mount, tmp_path):
    """writer(tag, proxy=None): a writable mount of PREFIX (lease LEASE,
    commits only when asked); killed_during(...): see its docstring."""
    from faultproxy import FaultProxy
    from helpers import ckptfs_sync, kill_ckptfs

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

    return writer, killed_during


def test_generate_v1(s3server, bucket, mount, tmp_path):
    from helpers import ckptfs_sync, run

    out = Path(os.environ["COMPAT_FIXTURE_OUT"])
    s3 = s3server.client()
    notes = {}
    writer, killed_during = _writers(s3server, bucket, mount, tmp_path)

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
    killed_during("abandon", None, _abandon,
                  lambda m, p, q, c: m == "PUT" and "/ckpt-abandoned/" in p and
                  "/.ckptfs" not in p and "-pending/" not in p, n=2)
    notes["run/ckpt-abandoned/"] = (
        "directory transaction; old writer SIGKILLed with the PUT of its "
        "second file held: marker, intent manifest, one object")

    # the dump
    dump(s3, bucket, out, notes, 1)


# ---- format 2 (--v2): tests/data/bucket-v2, by ckptfs at 2408fb3 --------------

T0 = 1_700_000_000_000_000_000  # a fixed base for every explicit mtime (ns)


def _dir(p, mode, uid, gid, xattrs=()):
    os.makedirs(p, exist_ok=True)
    os.chmod(p, mode)
    os.chown(p, uid, gid)
    for n, v in xattrs:
        os.setxattr(p, n, v)


def test_generate_v2(s3server, bucket, mount, tmp_path):
    import helpers
    from helpers import attr_tree, ckptfs_sync, run

    out = Path(os.environ["COMPAT_FIXTURE_OUT"])
    s3 = s3server.client()
    notes = {}
    writer, killed_during = _writers(s3server, bucket, mount, tmp_path)

    # (a) run/ckpt-d: a committed directory whose directories got their
    # modes, owners, xattrs and (last, once filled) mtimes before the commit
    w = writer("d")
    d = w.path / "ckpt-d"
    _dir(d, 0o750, 1001, 1002, [("user.kind", b"checkpoint")])
    _dir(d / "sub", 0o700, 2001, 2002, [("user.dirnote", b"sub dir")])
    _dir(d / "sub" / "deeper", 0o711, 2003, 2004)
    _dir(d / "sub" / "deeper" / "empty2", 0o755, 0, 0, [("user.e2", b"")])
    _dir(d / "emptydir", 0o705, 3001, 3002, [("user.empty", b"yes")])
    write(d / "model.bin", blob(101, 3000))
    write(d / "config.json", b'{"lr": 0.2}\n', mode=0o600)
    os.setxattr(d / "config.json", "user.note", b"hello v2")
    write(d / "sub" / "opt.bin", blob(102, 2000))
    write(d / "sub" / "deeper" / "notes.txt", b"deeper\n", mode=0o444)
    os.chown(d / "sub" / "deeper" / "notes.txt", 4001, 4002)
    os.symlink("model.bin", d / "link")
    files = ["model.bin", "config.json", "sub/opt.bin", "sub/deeper/notes.txt"]
    for i, rel in enumerate(files):
        os.utime(d / rel, ns=(T0, T0 + 1000 * i + 7))
    dirs = ["sub/deeper/empty2", "sub/deeper", "sub", "emptydir", "."]
    for i, rel in enumerate(dirs):  # children first: a name made moves it
        os.utime(d / rel, ns=(T0, T0 + 1_000_000_000 * (i + 1) + 123_456_789))
    before = attr_tree(d)
    assert ckptfs_sync(w.path).returncode == 0
    # (b) committed files changed after the commit: each one an addendum
    # storing the file again (with its parent directory's record).  The
    # tree is listed first: right after a sync, a change of a committed
    # file whose directory this mount has not listed since is stored as a
    # plain object, which readers ignore under a manifest (so at 2408fb3,
    # and on main as of 2026-11-29: a bug, not the format)
    for _ in os.walk(d):
        pass
    os.chmod(d / "model.bin", 0o640)
    os.utime(d / "sub" / "opt.bin", ns=(T0, T0 - 86_400_000_000_001))
    os.setxattr(d / "config.json", "user.note", b"changed after commit")
    os.setxattr(d / "config.json", "user.extra", b"x")
    os.chown(d / "sub" / "deeper" / "notes.txt", 4011, 4012)
    assert ckptfs_sync(w.path).returncode == 0
    after = attr_tree(d)
    # what the changes changed, and nothing else (directories included)
    assert {k for k in after if after[k] != before[k]} == \
        {"model.bin", "sub/opt.bin", "config.json", "sub/deeper/notes.txt"}, \
        json.dumps([before, after], indent=1)
    notes["run/ckpt-d/"] = (
        "directory transaction: modes, owners, xattrs and mtimes of its "
        "root (\"dir\"), nested and empty directories (\"dirs\") set "
        "before the commit; then model.bin chmod, sub/opt.bin touch -d, "
        "config.json setfattr x2, sub/deeper/notes.txt chown, each stored "
        "by an addendum (files + \"parent\" record)")
    # (c) latest, a single-file commit
    write(w.path / "latest", b"ckpt-d\n")
    os.utime(w.path / "latest", ns=(T0, T0 + 42))
    assert ckptfs_sync(w.path).returncode == 0
    w.unmount()

    def tree(mp, name, seed, mode):
        root = Path(mp) / name
        _dir(root, mode, 5001, 5002, [("user.tag", name.encode())])
        _dir(root / "inner", 0o710, 5003, 5004, [("user.inner", b"1")])
        for i in range(4):
            write(root / ("inner" if i % 2 else ".") / f"part-{i}.bin",
                  blob(seed + i, 600 + 100 * i))
        os.utime(root / "inner", ns=(T0, T0 + 5_000_000_000 + seed))
        os.utime(root, ns=(T0, T0 + 6_000_000_000 + seed))

    # (d) rm -r after its commit point: the delete record PUT, the data's
    # DeleteObjects landed, the writer SIGKILLed with the manifests' held
    killed_during("del", lambda mp: tree(mp, "ckpt-del", 110, 0o751),
                  lambda mp: run(["rm", "-r", f"{mp}/ckpt-del"], timeout=60),
                  lambda m, p, q, c: m == "POST" and "delete" in q, n=2)
    notes["run/ckpt-del/"] = (
        "rm -r; old writer SIGKILLed with its second DeleteObjects (the "
        "manifests') held: delete record W.gone@86400, manifests, no data")
    # (e) mv after its commit point: the new name's manifest with
    # "renamed_from", the old name's delete record; the writer SIGKILLed
    # with the DELETE of its marker on the new name held
    killed_during("ren", lambda mp: tree(mp, "ckpt-ren-src", 120, 0o701),
                  lambda mp: os.rename(f"{mp}/ckpt-ren-src", f"{mp}/ckpt-ren-dst"),
                  lambda m, p, q, c: m == "DELETE" and
                  "/.ckptfs-pending/ckpt-ren-dst/" in p)
    notes["run/ckpt-ren-dst/"] = (
        "mv ckpt-ren-src ckpt-ren-dst; old writer SIGKILLed with the DELETE "
        "of its marker on ckpt-ren-dst held: copies, manifest with "
        "renamed_from, delete record of ckpt-ren-src (past the commit point)")
    # (f) mv before its commit point: SIGKILLed with its third CopyObject held
    killed_during("cp", lambda mp: tree(mp, "ckpt-cp-src", 130, 0o755),
                  lambda mp: os.rename(f"{mp}/ckpt-cp-src", f"{mp}/ckpt-cp-dst"),
                  lambda m, p, q, c: m == "PUT" and c, n=3)
    notes["run/ckpt-cp-dst/"] = (
        "mv ckpt-cp-src ckpt-cp-dst; old writer SIGKILLed with its third "
        "CopyObject held: marker and intent on ckpt-cp-dst, two copies "
        "(before the commit point)")
    # (g) a directory transaction killed mid-upload
    killed_during("abandon", None, _abandon,
                  lambda m, p, q, c: m == "PUT" and "/ckpt-abandoned/" in p and
                  "/.ckptfs" not in p and "-pending/" not in p, n=2)
    notes["run/ckpt-abandoned/"] = (
        "directory transaction; old writer SIGKILLed with the PUT of its "
        "second file held: marker, intent manifest, one object")

    # what the old binary shows, from a fresh mount once every marker
    # expired: the fixture's expected view (test_compat_v2.py)
    time.sleep(LEASE + 1)
    obs = mount(bucket, PREFIX.rstrip("/"),
                options=helpers.observer_options(tmp_path / "obs"))
    names = sorted(os.listdir(obs.path))
    assert names == ["ckpt-cp-src", "ckpt-d", "ckpt-ren-dst", "latest"], names
    expect = {n: attr_tree(obs.path / n) for n in names}
    assert expect["ckpt-d"] == after, (expect["ckpt-d"], after)
    assert expect["ckpt-ren-dst"]["."]["mode"] == "0o701"
    assert expect["ckpt-ren-dst"]["inner"]["xattrs"] == {"user.inner": "1"}
    dump(s3, bucket, out, notes, 2, expect=expect)


def _abandon(mp):
    import helpers
    from helpers import run
    os.makedirs(f"{mp}/ckpt-abandoned")
    time.sleep(0.5)  # the marker and the intent are PUT at mkdir
    write(Path(mp) / "ckpt-abandoned" / "a.bin", blob(70, 900))
    write(Path(mp) / "ckpt-abandoned" / "b.bin", blob(71, 1100))
    run([helpers.CKPTFS_BIN, "commit", f"{mp}/ckpt-abandoned"], timeout=60,
        check=False)


def _quiet(fn, *a):
    try:
        fn(*a)
    except Exception as e:  # the writer dies under it
        sys.stderr.write(f"[generator] {fn.__name__}: {e!r} (expected)\n")


def dump(s3, bucket, out, notes, fmt, expect=None, limit=200_000):
    listed = {}  # the listing's LastModified has milliseconds (RGW)
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        listed.update((o["Key"], o["LastModified"]) for o in page.get("Contents", []))
    keys = sorted(listed)
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
             "last_modified": (r["LastModified"].isoformat() if fmt == 1 else
                               listed[k].isoformat(timespec="milliseconds")),
             "metadata": dict(sorted(r.get("Metadata", {}).items()))}
        m = re.search(r"/\.ckptfs-pending/[^/]+/([^/]+)@(\d+)$", k)
        if m:
            leases[k] = int(m.group(2))
        entries.append(e)
    writers = sorted({e["metadata"]["writer"] for e in entries
                      if "writer" in e["metadata"]})
    index = {
        "format": fmt,
        "written_by": (f"ckptfs at commit {OLD_COMMITS[fmt]} "
                       f"(tests/tools/make-compat-fixture.py{' --v2' if fmt == 2 else ''})"),
        "prefix": PREFIX,
        "lease_seconds": LEASE,
        "liveness": ("markers are judged live while LastModified + lease is "
                     "later than the server's Date; an upload gives them a "
                     "fresh LastModified, so a replay waits lease_seconds + 1 "
                     "before judging them expired"),
        "replay": ("upload in order of last_modified, ties in index order: "
                   "a format-1 delete's marker is newer than the objects it "
                   "was deleting, which `ckptfs gc` relies on" if fmt == 1 else
                   "upload in order of last_modified (milliseconds, from the "
                   "listing), ties in index order: a manifest is newer than "
                   "the objects directly in the directories it records (else "
                   "readers show their LastModified as the directory's mtime), "
                   "a delete record newer than the objects it deletes"),
        "markers": leases,
        "writers": writers,
        "notes": notes,
        "objects": entries,
    }
    if expect is not None:
        index["expect"] = expect
    (out / "index.json").write_text(json.dumps(index, indent=1, sort_keys=False) + "\n")
    total = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    sys.stderr.write(f"[generator] {len(entries)} keys, {total} bytes in {out}\n")
    assert total < limit, total


if __name__ == "__main__":
    _main()
