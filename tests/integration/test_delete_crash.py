"""Issue 21: a writer killed in the middle of deleting a committed
400-file checkpoint and never remounted.

A checkpoint of 400 small files is committed, then `rm -r` of it runs
through a writer mount whose S3 traffic goes through faultproxy.FaultProxy.
The proxy's inspect hook holds one DeleteObjects request of the delete
step (the first: the data batch; or the second: the manifests batch, after
the 400 data keys were deleted), the test SIGKILLs the writer's ckptfs
while it is held and the held request is refused (never forwarded), so the
bucket is left exactly as the writer left it at that request.  The writer
is never mounted again.

What users observe, checked:

* an observer mount (observer_options, another host) listing the
  checkpoint throughout (before, during and after the kill, and after
  `ckptfs gc`) sees either all 400 files or ENOENT: never a strict subset,
  never an empty directory;
* a mount started after the kill sees ENOENT (the delete happened: the
  writer passed its commit point, the delete record);
* `ckptfs gc` of the prefix (no mount; another host) exits 0, and
  afterwards boto3 finds no key of the checkpoint and no
  `.ckptfs-pending/` key at all.
"""

import os
import re
import shutil
import threading
import time

import pytest

from faultproxy import FaultProxy
from helpers import (det_bytes, kill_ckptfs, observer_options, s3_sizes, wait_for,
                     CKPTFS_BIN, run, Poller)

N_FILES = 400
CKPT = "run/ckpt-7"


def files_of():
    return {f"f-{i:03d}.bin": det_bytes(7000 + i, 100 + i) for i in range(N_FILES)}


def gc(s3server, bucket, prefix, *args, timeout=120):
    url = f"s3://{bucket}" + (f"/{prefix}" if prefix else "")
    return run([CKPTFS_BIN, "gc", url, "--endpoint", s3server.endpoint,
                "--region", s3server.region, *args],
               env=s3server.env_for_ckptfs(), check=False, timeout=timeout)


class HoldDeleteObjects:
    """inspect hook: the `nth` DeleteObjects request (POST ?delete) under
    the checkpoint is held until release(), then refused with a 503 (not
    forwarded).  `reached` is set when it arrives."""

    def __init__(self, nth):
        self.nth = nth
        self.seen = 0
        self.reached = threading.Event()
        self._release = threading.Event()
        self.lock = threading.Lock()

    def __call__(self, method, path, query, headers):
        if method != "POST" or "delete" not in query:
            return None
        with self.lock:
            self.seen += 1
            mine = self.seen == self.nth
        if not mine:
            return None
        self.reached.set()
        self._release.wait(120)   # bounded: never holds a proxy thread for ever
        return (503, "SlowDown", "held by the test, then refused")

    def release(self):
        self._release.set()


@pytest.mark.timeout(240)
@pytest.mark.parametrize("kill_at", ["first-batch", "after-data-batch"])
def test_writer_killed_mid_delete_never_remounted(s3server, bucket, mount, tmp_path,
                                                   kill_at):
    s3 = s3server.client()
    files = files_of()
    hold = HoldDeleteObjects(1 if kill_at == "first-batch" else 2)
    proxy = FaultProxy(s3server.endpoint, inspect=hold)
    try:
        _run(s3server, s3, bucket, mount, tmp_path, files, hold, proxy, kill_at)
    finally:
        hold.release()
        proxy.clear()
        proxy.close()


def _run(s3server, s3, bucket, mount, tmp_path, files, hold, proxy, kill_at):
    # the checkpoint, committed by a first writer (directly to RGW); run/
    # exists already, so ckpt-7 is a transaction root with its own manifest
    s3server.put(bucket, "run/")
    w0 = mount(bucket, options=[f"cache_dir={tmp_path}/cache-w0", "commit_delay=1"])
    d = w0 / CKPT
    os.makedirs(d)
    for rel, body in files.items():
        (d / rel).write_bytes(body)
    run([CKPTFS_BIN, "sync", str(w0)], timeout=120)
    keys = s3_sizes(s3, bucket, CKPT + "/")
    assert sum(1 for k in keys if "/.ckptfs" not in k) == N_FILES, len(keys)
    w0.unmount()

    # the writer that deletes it, through the proxy
    mp = tmp_path / "mnt-w"
    mp.mkdir()
    argv = mount.argv(bucket, "", mp, [f"cache_dir={tmp_path}/cache-w", "commit_delay=1"],
                      endpoint=False)
    argv += ["--endpoint", proxy.endpoint, "--region", s3server.region]
    w = mount(bucket, argv=argv, mountpoint=mp, timeout=60)
    o = mount(bucket, options=observer_options(tmp_path / "cache-o"))
    want = sorted(files)
    wait_for(lambda: sorted(os.listdir(o / CKPT)) == want, 30,
             "the observer sees the committed checkpoint")
    wait_for(lambda: len(os.listdir(w / CKPT)) == N_FILES, 30,
             "the writer sees the committed checkpoint")

    sightings = {"all": 0, "enoent": 0}
    lock = threading.Lock()

    def look():
        try:
            names = os.listdir(o / CKPT)
        except FileNotFoundError:
            with lock:
                sightings["enoent"] += 1
            return None
        if sorted(names) == want:
            with lock:
                sightings["all"] += 1
            return None
        return (f"{time.monotonic():.2f}: the observer listed {len(names)} of "
                f"{N_FILES} files: {sorted(names)[:5]}...")

    poll = Poller(look, interval=0.02, name="observer")
    try:
        # the observer is watching the whole checkpoint before the delete
        # starts (the delete's record lands at the rmdir, at once)
        wait_for(lambda: sightings["all"] > 0, 30, "the observer polls it whole")
        t0 = time.monotonic()
        r = run(["rm", "-r", str(w / CKPT)], timeout=60, check=False)
        assert r.returncode == 0, f"rm -r: {r.stderr}"
        assert hold.reached.wait(60), (
            f"DeleteObjects #{hold.nth} of the delete never came "
            f"({hold.seen} seen); proxy log {proxy.oplog()[-20:]}\n{w.log_tail(30)}")
        held_after = time.monotonic() - t0
        kill_ckptfs(w)   # SIGKILL while the request is held; never remounted
        hold.release()   # the held request is refused, never forwarded
        ops = proxy.oplog()
        # the delete record (commit point) was stored before any DeleteObjects
        gone = [k for k in s3_sizes(s3, bucket, "run/.ckptfs-pending/") if ".gone@" in k]
        left = s3_sizes(s3, bucket, CKPT + "/")
        data_left = [k for k in left if "/.ckptfs" not in k]
        if kill_at == "first-batch":
            assert len(data_left) == N_FILES, \
                f"{len(data_left)} data keys left; the held batch went through?"
        else:
            assert not data_left, f"{len(data_left)} data keys left after the data batch"
            assert [k for k in left if "/.ckptfs/manifest" in k], \
                "the manifests went although their batch was held"

        # the observer keeps looking for a while after the kill
        time.sleep(3)
        # a mount started afterwards: the checkpoint is gone
        late = mount(bucket, options=observer_options(tmp_path / "cache-late"))
        assert not (late / CKPT).exists(), \
            f"a new mount lists {CKPT}: {sorted(os.listdir(late / CKPT))[:5]}..."
        assert CKPT.split("/")[1] not in os.listdir(late / "run")

        # ckptfs gc on another host finishes the delete
        g = gc(s3server, bucket, "run")
        assert g.returncode == 0, f"gc exit {g.returncode}: {g.stderr}"
        leftover = s3_sizes(s3, bucket, CKPT + "/")
        assert not leftover, f"after gc, keys of {CKPT} left: {sorted(leftover)[:10]}"
        pend = [k for k in s3_sizes(s3, bucket) if "/.ckptfs-pending/" in "/" + k]
        assert not pend, f"after gc, .ckptfs-pending keys left: {pend}"
        time.sleep(1)
        assert not (late / CKPT).exists()
    finally:
        poll.stop()
    import sys
    sys.stderr.write(f"\n[{kill_at}] DeleteObjects #{hold.nth} held {held_after:.1f}s after "
                     f"rm -r started; delete record {gone}; observer: {sightings}, "
                     f"{poll.seen} looks; requests before the kill: "
                     f"{[op for op in ops if op[0] != 'GET' and op[0] != 'LIST'][-6:]}\n")
    assert not poll.bad, f"{len(poll.bad)} bad observations, first: {poll.bad[:3]}"
    assert sightings["all"] > 0 and sightings["enoent"] > 0, sightings
    assert gone, "no delete record in the bucket when the writer was killed"


class HoldPuts:
    """FaultProxy inspect hook: PUTs whose path matches pat pass, but for
    the first `skip`; the others wait until release() (at most 120 s),
    then pass."""

    def __init__(self, pat, skip=0):
        self.pat, self.skip = pat, skip
        self.seen = 0
        self.reached = threading.Event()
        self._release = threading.Event()
        self.lock = threading.Lock()

    def __call__(self, method, path, query, headers):
        if method != "PUT" or not self.pat.search(path):
            return None
        with self.lock:
            self.seen += 1
            held = self.seen > self.skip
        if held:
            self.reached.set()
            self._release.wait(120)
        return None

    def release(self):
        self._release.set()


def _through(proxy, s3server, bucket, mount, mp, opts):
    argv = mount.argv(bucket, "", mp, opts, endpoint=False)
    argv += ["--endpoint", proxy.endpoint, "--region", s3server.region]
    return mount(bucket, argv=argv, mountpoint=mp, timeout=60)


@pytest.mark.timeout(240)
def test_rmdir_held_behind_its_commit_stays_gone_after_a_kill(
        s3server, bucket, mount, tmp_path):
    """rmdir of an empty checkpoint directory with a `latest` written after
    it seals it (issue 21: it commits in its place, then its delete runs).
    Its commit is stalled, the delete is sent behind it (after 1 s of
    quiet), and the writer is SIGKILLed; the next mount resumes both, its
    commit stalled again.  The directory must not show again meanwhile:
    before, the directory the journal restored for the commit showed until
    the delete ran (model seed 8100)."""
    s3 = s3server.client()
    mp = tmp_path / "mnt-w"
    mp.mkdir()
    opts = [f"cache_dir={tmp_path}/cache-w", "commit_delay=3600"]
    commit_put = r"/run/ckpt/\.ckptfs/manifest\.[^/]*\.json$"
    proxy = FaultProxy(s3server.endpoint)
    try:
        w = _through(proxy, s3server, bucket, mount, mp, opts)
        (w / "run").mkdir()
        run([CKPTFS_BIN, "sync", str(w)], timeout=120)
        (w / "run" / "ckpt").mkdir()
        wait_for(lambda: any("run/ckpt/.ckptfs/manifest" in k for k in
                             s3_sizes(s3, bucket, "run/ckpt/")), 30,
                 "the checkpoint's intent is stored")
        proxy.rule("stall_before", method="PUT", path_re=commit_put,
                   count=None)
        (w / "run" / "latest").write_text("ckpt")
        os.rmdir(w / "run" / "ckpt")
        time.sleep(2.5)  # the held delete is sent after 1 s of quiet
        assert sorted(os.listdir(w / "run")) == ["latest"]
        kill_ckptfs(w)
    finally:
        proxy.clear()
        proxy.close()
    # the next mount announces the checkpoint again (one PUT of its
    # intent), then its commit is held until released
    hold = HoldPuts(re.compile(commit_put), skip=1)
    proxy = FaultProxy(s3server.endpoint, inspect=hold)
    try:
        w = _through(proxy, s3server, bucket, mount, mp, opts)
        assert sorted(os.listdir(w / "run")) == ["latest"]
        assert hold.reached.wait(30), "the commit was not resumed"
        assert sorted(os.listdir(w / "run")) == ["latest"]
        hold.release()
        run([CKPTFS_BIN, "sync", str(w)], timeout=120)
        assert sorted(os.listdir(w / "run")) == ["latest"]
        # unmounted while its proxy runs (after, its unmount could not
        # reach the server and the mount was left behind, detached)
        assert w.unmount() == []
    finally:
        hold.release()
        proxy.clear()
        proxy.close()
    o = mount(bucket, options=observer_options(tmp_path / "cache-o"))
    assert sorted(os.listdir(o / "run")) == ["latest"]
