"""Issue 21: every request of a remote operation is a crash point.

For each operation whose atomicity must live in the bucket (a delete of a
committed directory, a rename of one, a directory commit by rename, an
in-place directory followed by a `latest` file, a single-file PUT), a clean
run through the fault proxy first records the distinct mutating requests
(PUT, POST, DELETE) the writer sends for it.  Then, for every one of them
and three moments (the request held before the server sees it; sent, acted
on, and its reply never delivered; answered, with nothing sent after it),
the writer's ckptfs is SIGKILLed at that moment, on a prefix of its own:

  (a) the writer never comes back: past every lease (lease=2), an observer
      mount polling all along, a mount started afterwards and the bucket
      read through the manifests with boto3 each see the complete old state
      or the complete new state, never a mix, never an empty directory,
      never a `latest` naming a checkpoint that is not there;
  (b) `ckptfs gc` (another host) finishes or rolls back what was left: the
      same checks, and no marker or delete record is left;
  (c) the writer mounts again on its cache directory, `ckptfs sync`
      returns 0, and every view shows the new state.

Every moment of every request is visited (issue 21: the suite's CI run
covers them all); CKPTFS_CRASHPOINTS=sample visits each request at one of
its three moments, rotated by a printed seed, in a third of the time, for
a quick run while developing (`sample`).  The number of operations x crash
points covered and the violations found are printed (pytest -s shows
them); the test fails on any violation."""

import concurrent.futures
import errno
import json
import os
import re
import sys
import threading
import time

import pytest

import helpers
from faultproxy import FaultProxy
from helpers import ckptfs_sync, det_bytes, kill_ckptfs, run, wait_until
from test_gc import gc

LEASE = 2
MODES = ("held", "sent", "answered")
GONE = "gone"  # a directory that does not exist (ENOENT)


# ---- what each view sees --------------------------------------------------------


def mount_view(root, names):
    """{name: {rel: bytes} | GONE | "latest:<text>"} for the watched names
    under a mount path; an empty directory is reported as {} (a violation
    for every operation here)."""
    out = {}
    for n in names:
        p = os.path.join(root, n)
        try:
            if n == "latest":
                with open(p, "rb") as f:
                    out[n] = "latest:" + f.read().decode(errors="replace")
                continue
            files = {}
            for d, _, fs in os.walk(p, onerror=_raise):
                for f in fs:
                    full = os.path.join(d, f)
                    with open(full, "rb") as fh:
                        files[os.path.relpath(full, p)] = fh.read()
            if not os.path.isdir(p):
                raise FileNotFoundError(p)
            out[n] = files
        except FileNotFoundError:
            out[n] = GONE
        except OSError as e:
            if e.errno != errno.ENOENT:
                out[n] = f"error:{e}"
            else:
                out[n] = GONE
    return out


def _raise(e):
    raise e


def bucket_view(s3, bucket, prefix, names):
    """The same view from the bucket alone, applying the format's rules
    (doc/commit.md) with boto3: a directory with a delete record or a live
    marker is gone; one with manifests shows exactly the files of its
    committed ones (each must exist with the listed size); one whose
    manifests are all pending is gone; other objects show as they are."""
    keys = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket,
                                                              Prefix=prefix):
        for o in page.get("Contents", []):
            keys[o["Key"][len(prefix):]] = o
    now = time.time()
    out = {}
    for n in names:
        if n == "latest":
            out[n] = ("latest:" + s3.get_object(Bucket=bucket, Key=prefix + n)[
                "Body"].read().decode()) if n in keys else GONE
            continue
        under = {k[len(n) + 1:]: o for k, o in keys.items() if k.startswith(n + "/")}
        mans = [k for k in under if re.fullmatch(r"\.ckptfs/manifest\.[^/]+\.json", k)]
        files, committed_writers = {}, set()
        for k in sorted(mans):
            try:
                doc = json.loads(s3.get_object(Bucket=bucket, Key=prefix + n + "/" + k)[
                    "Body"].read())
            except s3.exceptions.NoSuchKey:
                continue
            if doc.get("state") != "committed" or not _rename_passed(
                    keys, n, doc, under[k]["LastModified"]):
                continue
            if re.fullmatch(r"\.ckptfs/manifest\.[^./]+\.json", k):
                committed_writers.add(doc.get("writer"))
            for f in doc.get("files", []):
                o = under.get(f["path"])
                files[f["path"]] = (s3.get_object(Bucket=bucket,
                                                  Key=prefix + n + "/" + f["path"])[
                    "Body"].read() if o and o["Size"] == f["size"] else
                    f"missing object (manifest says {f['size']} bytes)")
        hidden = False
        for k, o in keys.items():
            m = re.fullmatch(rf"\.ckptfs-pending/{re.escape(n)}/([^/]+)@(\d+)", k)
            if not m:
                continue
            if m.group(1).endswith(".gone"):
                hidden = True  # a delete past its commit point
            elif (o["LastModified"].timestamp() + int(m.group(2)) > now and
                  m.group(1) not in committed_writers):
                hidden = True  # a live writer that has not committed
        if hidden or not under:
            out[n] = GONE
        elif not mans:
            out[n] = {k: s3.get_object(Bucket=bucket, Key=prefix + n + "/" + k)[
                "Body"].read() for k in under if not k.endswith("/")}
        else:
            out[n] = files if committed_writers or files else GONE
    return out


def _rename_passed(keys, n, doc, manifest_time):
    """A manifest carrying "renamed_from" counts once the writer's delete
    record of the old name exists, or nothing under the old name is older
    than the manifest (doc/commit.md)."""
    rel = doc.get("renamed_from")
    if not rel:
        return True
    old = os.path.normpath(os.path.join(n, rel))
    parent, base = os.path.split(old)
    rec = (parent + "/" if parent else "") + f".ckptfs-pending/{base}/{doc['writer']}.gone@86400"
    if rec in keys:
        return True
    return not any(k.startswith(old + "/") and o["LastModified"] <= manifest_time
                   for k, o in keys.items())


# ---- the operations -----------------------------------------------------------


def ckpt(seed, n=3):
    return {f"shard-{i}.bin": det_bytes(seed + i, 1000 + 137 * i) for i in range(n)}


def write_dir(d, files):
    os.makedirs(d, exist_ok=True)
    for rel, body in files.items():
        with open(os.path.join(d, rel), "wb") as f:
            f.write(body)


def fsync_dir(d):
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Op:
    """setup(mp) makes the old state and syncs; act(mp) is the operation;
    old and new are the views of `names`, read in that order: later
    effects first, so a reader that straddles the commit point between two
    reads can only see the earlier state of the later name."""
    names = ()

    def allowed(self, view, moving=False, failed=False):
        """moving: two reads that may straddle the commit point (the
        observer); failed: the application saw the operation fail (the
        mount died under it), so it may have landed in part, as a local
        disk can keep part of an interrupted save."""
        return (view in (self.old, self.new) or self.in_order(view) or
                (moving and self.straddles(view)) or
                (failed and self.part(view)))

    def in_order(self, view):
        return False

    def straddles(self, view):
        return False

    def part(self, view):
        return False


class DeleteDir(Op):
    names = ("ckpt-1",)
    old = {"ckpt-1": ckpt(10)}
    new = {"ckpt-1": GONE}

    def setup(self, mp):
        write_dir(f"{mp}/ckpt-1", self.old["ckpt-1"])

    def act(self, mp):
        run(["rm", "-r", f"{mp}/ckpt-1"], timeout=60)


class RenameDir(Op):
    names = ("ckpt-2", "ckpt-1")
    old = {"ckpt-2": GONE, "ckpt-1": ckpt(20)}
    new = {"ckpt-2": ckpt(20), "ckpt-1": GONE}

    def setup(self, mp):
        write_dir(f"{mp}/ckpt-1", self.old["ckpt-1"])

    def act(self, mp):
        run(["mv", f"{mp}/ckpt-1", f"{mp}/ckpt-2"], timeout=60)

    def straddles(self, view):
        # the new name read before the commit point, the old one after
        return view == {"ckpt-2": GONE, "ckpt-1": GONE}


class CommitDir(Op):
    """A temp-named directory renamed to its final name (the rename is the
    commit trigger)."""
    names = ("ckpt-1",)
    old = {"ckpt-1": GONE}
    new = {"ckpt-1": ckpt(30)}

    def setup(self, mp):
        pass

    def act(self, mp):
        write_dir(f"{mp}/tmp-ckpt-1", self.new["ckpt-1"])
        os.rename(f"{mp}/tmp-ckpt-1", f"{mp}/ckpt-1")


class InPlaceLatest(Op):
    """A checkpoint written in place, fsynced, then `latest` naming it."""
    names = ("latest", "ckpt-2", "ckpt-1")
    old = {"latest": "latest:ckpt-1", "ckpt-2": GONE, "ckpt-1": ckpt(40)}
    new = {"latest": "latest:ckpt-2", "ckpt-2": ckpt(50), "ckpt-1": ckpt(40)}

    def setup(self, mp):
        write_dir(f"{mp}/ckpt-1", self.old["ckpt-1"])
        fsync_dir(f"{mp}/ckpt-1")
        with open(f"{mp}/latest", "w") as f:
            f.write("ckpt-1")

    def act(self, mp):
        write_dir(f"{mp}/ckpt-2", self.new["ckpt-2"])
        fsync_dir(f"{mp}/ckpt-2")
        with open(f"{mp}/latest", "w") as f:
            f.write("ckpt-2")

    def in_order(self, view):
        # the checkpoint visible before the file naming it
        return view == dict(self.new, latest="latest:ckpt-1")

    def part(self, view):
        # an interrupted save: `latest` still names the old checkpoint,
        # the new directory holds some of its files, each whole
        c2 = view["ckpt-2"]
        return (view["latest"] == "latest:ckpt-1" and
                view["ckpt-1"] == self.old["ckpt-1"] and
                (c2 == GONE or (isinstance(c2, dict) and all(
                    self.new["ckpt-2"].get(k) == v for k, v in c2.items()))))


class FilePut(Op):
    names = ("latest",)
    old = {"latest": "latest:ckpt-1"}
    new = {"latest": "latest:ckpt-2"}

    def setup(self, mp):
        with open(f"{mp}/latest", "w") as f:
            f.write("ckpt-1")

    def act(self, mp):
        with open(f"{mp}/latest", "w") as f:
            f.write("ckpt-2")


OPS = {"delete": DeleteDir, "rename": RenameDir, "commit_dir": CommitDir,
       "inplace_latest": InPlaceLatest, "file_put": FilePut}


# ---- killing at a request ----------------------------------------------------


class CrashAt:
    """The proxy's inspect hook: counts the distinct mutating requests
    (method, path, upload part) sent after arm(); at the n-th it sets the
    moment's fault and `fire`.  n=None only records."""

    def __init__(self, proxy, bucket):
        self.p, self.bucket = proxy, bucket
        self.armed = False
        self.seen = []
        self.n = None
        self.mode = None
        self.fire = threading.Event()
        self.nth = threading.Event()
        self.lock = threading.Lock()

    def arm(self, n=None, mode=None):
        with self.lock:
            self.seen, self.n, self.mode = [], n, mode
            self.fire.clear()
            self.nth.clear()
            self.armed = True

    def __call__(self, method, path, query, hdrs):
        if method not in ("PUT", "POST", "DELETE") or \
                not (path + "/").startswith(f"/{self.bucket}/"):
            return None
        ident = (method, path, re.sub(r"uploadId=[^&]*", "", query))
        with self.lock:
            if ident[2].startswith("delete"):  # DeleteObjects: each batch
                ident = (method, path, f"{ident[2]} #{len(self.seen) + 1}")
            renewal = ".ckptfs-pending/" in path and ".gone@" not in path
            if not self.armed or (renewal and ident in self.seen):
                return None  # a marker's renewal: not a new point
            self.seen.append(ident)
            i = len(self.seen)
            if i == self.n:
                self.nth.set()
            if self.n is None or self.fire.is_set():
                if self.fire.is_set():  # after the kill moment: held
                    self.p.rule("stall_before", method=method,
                                path_re=re.escape(path) + "$")
                return None
            if i == self.n and self.mode in ("held", "sent"):
                self.p.rule("stall_before" if self.mode == "held" else "stall_after",
                            method=method, path_re=re.escape(path) + "$")
                self.fire.set()
            elif i == self.n + 1 and self.mode == "answered":
                self.p.rule("stall_before", method=method,
                            path_re=re.escape(path) + "$")
                self.fire.set()
        return None


# ---- the test -------------------------------------------------------------------


class Checker:
    def __init__(self, op, label):
        self.op, self.label = op, label
        self.violations = []

    def check(self, where, view, **how):
        if not self.op.allowed(view, **how):
            self.violations.append(f"{self.label} {where}: {_short(view)}")


def _short(view):
    def one(v):
        if isinstance(v, dict):
            return {k: (len(b) if isinstance(b, bytes) else b) for k, b in v.items()}
        return v
    return {k: one(v) for k, v in view.items()}


class Observer(threading.Thread):
    """Polls a mount all along; its views are judged at the end, once it
    is known whether the application saw the operation succeed."""

    def __init__(self, path, op):
        super().__init__(daemon=True)
        self.path, self.op = path, op
        self.stop = threading.Event()
        self.looks = 0
        self.views = []

    def run(self):
        while not self.stop.is_set():
            v = mount_view(self.path, self.op.names)
            if not self.views or self.views[-1] != v:
                self.views.append(v)
            self.looks += 1
            time.sleep(0.05)


_MOUNTING = threading.Lock()  # points run side by side; the fixture is not


def writer_mount(mount, s3server, bucket, prefix, cdir, endpoint):
    mp = mount.workdir / f"w-{prefix}"
    mp.mkdir(parents=True, exist_ok=True)
    argv = mount.argv(bucket, prefix, mp, [f"cache_dir={cdir}", f"lease={LEASE}",
                                           "commit_delay=600"], endpoint=False)
    argv += ["--endpoint", endpoint, "--region", s3server.region]
    with _MOUNTING:
        return mount(bucket, argv=argv, mountpoint=mp)


def observer_mount(mount, bucket, prefix, tmp_path, tag):
    mp = mount.workdir / f"o-{prefix}-{tag}"
    mp.mkdir(parents=True, exist_ok=True)
    with _MOUNTING:
        return mount(bucket, prefix, mountpoint=mp, options=helpers.observer_options(
            tmp_path / f"oc-{prefix}-{tag}"))


def record(op_name, s3server, bucket, mount, tmp_path, proxy, hook):
    """The clean run: the distinct mutating requests of the operation."""
    op = OPS[op_name]()
    prefix = f"{op_name}-ref"
    w = writer_mount(mount, s3server, bucket, prefix, tmp_path / "c-ref", proxy.endpoint)
    op.setup(w.path)
    assert ckptfs_sync(w.path).returncode == 0
    hook.arm()
    op.act(w.path)
    assert ckptfs_sync(w.path).returncode == 0
    hook.armed = False
    seen = list(hook.seen)
    s3 = s3server.client()
    assert bucket_view(s3, bucket, prefix + "/", op.names) == op.new
    w.unmount()
    return seen


def one_point(op_name, n, total, mode, s3server, bucket, mount, tmp_path):
    """One crash point, on its own prefix and its own proxy (points run
    side by side)."""
    with FaultProxy(s3server.endpoint) as proxy:
        hook = CrashAt(proxy, bucket)
        proxy.inspect = hook
        return _one_point(op_name, n, total, mode, s3server, bucket, mount,
                          tmp_path, proxy, hook)


def _one_point(op_name, n, total, mode, s3server, bucket, mount, tmp_path, proxy, hook):
    op = OPS[op_name]()
    prefix = f"{op_name}-{n}-{mode}"
    c = Checker(op, f"{op_name} request {n} {mode}")
    s3 = s3server.client()
    cdir = tmp_path / f"c-{prefix}"
    w = writer_mount(mount, s3server, bucket, prefix, cdir, proxy.endpoint)
    op.setup(w.path)
    assert ckptfs_sync(w.path).returncode == 0, f"{prefix}: setup sync"
    obs_m = observer_mount(mount, bucket, prefix, tmp_path, "o")
    wait_until(lambda: mount_view(obs_m.path, op.names) == op.old, 10)
    obs = Observer(obs_m.path, op)
    obs.start()
    hook.arm(n, mode)
    acted = []  # the operation returned success to the application
    act = threading.Thread(target=lambda: _quiet(op.act, w.path, done=acted),
                           daemon=True)
    act.start()
    if mode == "answered" and n == total:
        # the last request: answered, nothing after it
        fired = hook.nth.wait(30)
        time.sleep(0.5)
    else:
        fired = hook.fire.wait(30)
    assert fired, f"{prefix}: request {n} never came ({hook.seen})"
    time.sleep(0.3 if mode != "held" else 0.1)
    kill_ckptfs(w)
    hook.armed = False
    act.join(30)
    proxy.reset_stalled()
    proxy.clear()
    # (a) the writer never comes back: past every lease
    time.sleep(LEASE + 1.5)
    fresh = observer_mount(mount, bucket, prefix, tmp_path, "a")
    c.check("fresh mount", mount_view(fresh.path, op.names))
    c.check("bucket", bucket_view(s3, bucket, prefix + "/", op.names))
    fresh.unmount()
    # (b) gc from another host finishes or rolls back
    r = gc(s3server, bucket, prefix)
    if r.returncode != 0:
        c.violations.append(f"{c.label}: gc exit {r.returncode}: {r.stdout} {r.stderr}")
    left = [k for k in helpers.s3_sizes(s3, bucket, prefix + "/")
            if ".ckptfs-pending/" in k]
    if left:
        c.violations.append(f"{c.label}: gc left {left}")
    after_gc = bucket_view(s3, bucket, prefix + "/", op.names)
    c.check("bucket after gc", after_gc)
    fresh = observer_mount(mount, bucket, prefix, tmp_path, "b")
    c.check("mount after gc", mount_view(fresh.path, op.names))
    fresh.unmount()
    # (c) the writer comes back and converges
    w2 = writer_mount(mount, s3server, bucket, prefix, cdir, s3server.endpoint)
    sr = ckptfs_sync(w2.path)
    if sr.returncode != 0:
        c.violations.append(f"{c.label}: sync after remount: {sr.stdout} {sr.stderr}")
    time.sleep(0.3)
    obs.stop.set()
    obs.join(10)
    # an operation the application saw succeed is never lost; one it saw
    # fail (the mount died under it) may land or not, but whole
    for v in obs.views:
        c.check("observer", v, moving=True, failed=not acted)
    for where, v in (("writer back: bucket", bucket_view(s3, bucket, prefix + "/", op.names)),
                     ("writer back: observer", mount_view(obs_m.path, op.names))):
        if acted and v != op.new:
            c.violations.append(f"{c.label} {where}: {_short(v)} (want the new state)")
        c.check(where, v, failed=not acted)
    w2.unmount()
    obs_m.unmount()
    if only_one():
        print(f"writer logs: {w.log} {w2.log}", file=sys.stderr)
        for k, sz in sorted(helpers.s3_sizes(s3, bucket, prefix + "/").items()):
            body = helpers.s3_get(s3, bucket, k) if "manifest" in k else b""
            print(f"  {k} {sz} {body[:400]!r}", file=sys.stderr)
    return c.violations, obs.looks


def only_one():
    return bool(os.environ.get("CKPTFS_CRASHPOINT"))


def _quiet(fn, *a, done=None):
    try:
        fn(*a)
        if done is not None:
            done.append(True)
    except (OSError, helpers.CommandError):
        pass  # the mount died under it


def sample(op_name, points):
    """The crash points this run visits, and a line saying which: all of
    them, or with CKPTFS_CRASHPOINTS=sample every request at one of its
    three moments, rotating with a seed (printed; CKPTFS_CRASHPOINTS_SEED
    replays it), in a third of the time."""
    if os.environ.get("CKPTFS_CRASHPOINTS") != "sample" or len(points) <= len(MODES):
        return points, f"all {len(points)} points"
    seed = int(os.environ.get("CKPTFS_CRASHPOINTS_SEED") or
               int.from_bytes(os.urandom(2), "little"))
    k = seed + sum(map(ord, op_name))
    picked = [(n, m) for n, m in points if MODES.index(m) == (n + k) % len(MODES)]
    return picked, (f"{len(picked)} of {len(points)} points, one moment per request "
                    f"(CKPTFS_CRASHPOINTS_SEED={seed} replays)")


# points side by side: each mostly sleeps (past the lease) or waits on the
# server; 8 took 17% less time than 4 with the machine busy (load 11)
JOBS = int(os.environ.get("CKPTFS_CRASHPOINT_JOBS", "8"))


@pytest.mark.timeout(900)
@pytest.mark.parametrize("op_name", list(OPS))
def test_every_request_is_a_safe_crash_point(s3server, bucket, mount, tmp_path, op_name):
    with FaultProxy(s3server.endpoint) as proxy:
        hook = CrashAt(proxy, bucket)
        proxy.inspect = hook
        seen = record(op_name, s3server, bucket, mount, tmp_path, proxy, hook)
    assert seen, "the operation sent nothing"
    reqs = "\n  ".join(f"{i + 1}: {m} {p} {q}" for i, (m, p, q) in enumerate(seen))
    print(f"\n{op_name}:\n  {reqs}", file=sys.stderr)
    only = os.environ.get("CKPTFS_CRASHPOINT", "")  # "rename:7:held" replays one
    points = [(n, mode) for n in range(1, len(seen) + 1) for mode in MODES
              if not only or only == f"{op_name}:{n}:{mode}"]
    points, how = sample(op_name, points)
    print(f"\n{op_name}: {how}", file=sys.stderr)
    violations, looks = [], 0
    with concurrent.futures.ThreadPoolExecutor(JOBS) as pool:
        for v, lk in pool.map(lambda p: one_point(op_name, p[0], len(seen), p[1],
                                                  s3server, bucket, mount, tmp_path),
                              points):
            violations += v
            looks += lk
    print(f"\ncrash points: {op_name}: {len(seen)} requests x {len(MODES)} moments = "
          f"{len(points)} points, {looks} observer looks, {len(violations)} violations")
    assert not violations, "\n".join(violations[:40])


@pytest.mark.timeout(120)
def test_rm_r_then_sigkill_at_once_loses_nothing(s3server, bucket, mount, tmp_path):
    """`rm -r` of a committed checkpoint returns, and ckptfs is SIGKILLed
    at once: the delete was journaled by the directory's own rmdir (before,
    held deletes lived in memory for a second of quiet and were lost), so
    the writer back deletes it; nothing of it is left in the bucket."""
    s3 = s3server.client()
    cdir = tmp_path / "c"
    w = writer_mount(mount, s3server, bucket, "p", cdir, s3server.endpoint)
    files = {"a/x.bin": b"x" * 100, "a/sub/y.bin": b"y" * 200, "b.bin": b"b"}
    for rel, body in files.items():
        os.makedirs(os.path.dirname(f"{w.path}/ckpt-1/{rel}"), exist_ok=True)
        with open(f"{w.path}/ckpt-1/{rel}", "wb") as f:
            f.write(body)
    assert ckptfs_sync(w.path).returncode == 0
    assert any(k.startswith("p/ckpt-1/") for k in helpers.s3_sizes(s3, bucket, "p/"))
    run(["rm", "-r", f"{w.path}/ckpt-1"], timeout=60)
    kill_ckptfs(w)
    w2 = writer_mount(mount, s3server, bucket, "p", cdir, s3server.endpoint)
    assert ckptfs_sync(w2.path).returncode == 0
    assert not os.path.exists(f"{w2.path}/ckpt-1")
    left = [k for k in helpers.s3_sizes(s3, bucket, "p/") if "ckpt-1" in k]
    assert not left, f"left in the bucket: {left}"
