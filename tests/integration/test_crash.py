"""ckptfs is SIGKILLed in the middle of saving a checkpoint (issue 4,
"Durable"): before any upload got through, during a large upload, after the
uploads but before a commit trigger, after the trigger while uploads still
run, and during the upload of a single-file transaction.  The dead mount is
detached (fusermount3 -uz) and ckptfs mounted again on the same cache
directory: the restarted mount shows everything that was written, the save
completes byte for byte, and another mount polling all along never saw a
partial checkpoint.

The writing mount talks to S3 through helpers.UploadThrottleProxy, which
can stall or slow what ckptfs sends; the restarted mount talks to S3
directly."""

import os
import shutil
import time

import pytest

import helpers

from helpers import (Poller, det_bytes, UploadThrottleProxy, ckptfs_sync, is_protocol_key,
                     kill_ckptfs, observer_options, observer_settle, pending_markers, s3_get,
                     s3_sizes, sha256_bytes, tree_view, wait_for)
from test_commit import CheckpointWatch, assert_remote
from test_verify import assert_manifest_blocks

MiB = 1 << 20


@pytest.fixture(autouse=True)
def _stop_pollers(mount):
    """Pollers of a test that failed midway stop before its mounts go."""
    yield
    helpers.stop_all_pollers()


def files_of_a_save():
    """Four 2 MiB shards, one 24 MiB file (multipart), a small .metadata."""
    f = {f"shard-{i}.bin": det_bytes(900 + i, 2 * MiB + i) for i in range(4)}
    f["big/model.pt"] = det_bytes(910, 24 * MiB + 3)
    f[".metadata"] = b"metadata" * 64
    return f


def mount_writer(mount, s3server, bucket, cdir, mp, proxy=None, *more):
    options = [f"cache_dir={cdir}", "commit_delay=600", *more]
    if proxy is None:
        return mount(bucket, options=options, mountpoint=mp)
    argv = mount.argv(bucket, "", mp, options, endpoint=False)
    argv += ["--endpoint", proxy.endpoint, "--region", s3server.region]
    return mount(bucket, argv=argv, mountpoint=mp)


def write_files(d, files, fsync=False):
    for rel, body in files.items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(d / rel, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        try:
            for i in range(0, len(body), MiB):
                os.write(fd, body[i:i + MiB])
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)


def assert_shows(root, files):
    """The mount shows exactly files under root, byte for byte."""
    assert tree_view(root) == {k: len(v) for k, v in files.items()}, \
        f"{root}: {tree_view(root)}"
    for rel, body in files.items():
        assert sha256_bytes((root / rel).read_bytes()) == sha256_bytes(body), rel


POINTS = ["before_upload", "mid_upload", "uploaded_not_committed", "committing"]


@pytest.mark.timeout(150)
@pytest.mark.parametrize("point", POINTS)
def test_sigkill_during_a_save_then_remount_completes_it(
        s3server, bucket, mount, tmp_path, point):
    """before_upload: uploads stalled at the proxy when ckptfs dies;
    mid_upload: a quarter of 32 MiB went up (3 MiB/s); uploaded_not_committed:
    every file fsynced (stored) and no trigger yet; committing: the root was
    renamed to its final name (the trigger) while the uploads still ran.
    After the restart `ckptfs sync` (committing: nothing at all) makes the
    checkpoint visible whole."""
    s3 = s3server.client()
    s3server.put(bucket, "run/")
    cdir = tmp_path / "cache-w"
    mp = tmp_path / "mnt-w"
    mp.mkdir()
    files = files_of_a_save()
    total = sum(map(len, files.values()))
    o = mount(bucket, options=observer_options(tmp_path / "cache-o"))
    watch = CheckpointWatch(o / "run", "ckpt-1", files)
    root = "staging-1" if point == "committing" else "ckpt-1"
    staging_seen = []
    staging_watch = Poller(lambda: staging_seen.append(1) if "staging-1" in os.listdir(o / "run")
                           else None, interval=0.02)

    with UploadThrottleProxy(s3server.endpoint) as proxy:
        w = mount_writer(mount, s3server, bucket, cdir, mp, proxy)
        d = w / "run" / root
        os.mkdir(d)  # the pending marker is in the bucket when this returns
        if point == "before_upload":
            proxy.held = True
        elif point in ("mid_upload", "committing"):
            proxy.up_rate = 3 * MiB
        write_files(d, files, fsync=(point == "uploaded_not_committed"))
        if point == "committing":
            os.rename(d, w / "run/ckpt-1")
        if point == "before_upload":
            user = [k for k in s3_sizes(s3, bucket, "run/") if not is_protocol_key(k)
                    and not k.endswith("/")]
            assert not user, f"uploads got through a held proxy: {user}"
        elif point in ("mid_upload", "committing"):
            wait_for(lambda: proxy.bytes_up >= total // 4, 30,
                     lambda: f"a quarter uploaded ({proxy.bytes_up} bytes went up)")
            assert proxy.bytes_up < total * 3 // 4, "uploads too fast for the test"
        else:
            for rel, body in files.items():
                assert s3_get(s3, bucket, f"run/ckpt-1/{rel}") == body, \
                    f"{rel} fsynced but not stored"
        kill_ckptfs(w)
    assert watch.complete_at is None, "visible before the crash"
    assert not watch.poller.bad, watch.poller.bad[:3]

    w2 = mount_writer(mount, s3server, bucket, cdir, mp)
    final = "ckpt-1" if point == "committing" else root
    # nothing written is lost: the restarted mount shows all of it
    assert_shows(w2 / "run" / final, files)
    if point == "committing":
        watch.wait_complete(90)  # the trigger fired before the crash
    else:
        ckptfs_sync(w2)
        observer_settle()
        assert_shows(o / "run/ckpt-1", files)
        watch.wait_complete(10)
    watch.finish()
    staging_watch.assert_clean()
    assert not staging_seen, "the old name of the renamed root showed"
    ckptfs_sync(w2)
    assert_remote(s3, bucket, "run/ckpt-1", files)
    # block checksums journaled before the crash (stored files, uploaded
    # parts) or computed after it all reach the manifest
    assert_manifest_blocks(s3, bucket, "run/ckpt-1", files)
    assert not pending_markers(s3, bucket), pending_markers(s3, bucket)
    assert not [k for k in s3_sizes(s3, bucket) if "staging-1" in k]


@pytest.mark.timeout(120)
# s3rver rewrites an object's file in place: a GET (boto3's or the
# observer's) running while the new model.pt lands reads a cut or mixed
# body, which is s3rver's doing (doc/portability.md)
@pytest.mark.rgw_only
def test_sigkill_during_a_single_file_upload(s3server, bucket, mount, tmp_path):
    """A 24 MiB file outside any new directory, closed (its commit trigger),
    ckptfs killed with part of it uploaded: after the restart it completes
    with no further command; another mount sees the old version or the new
    one, nothing else."""
    s3 = s3server.client()
    old = det_bytes(950, 5 * MiB)
    new = det_bytes(951, 24 * MiB + 1)
    s3server.put(bucket, "model.pt", old)
    cdir = tmp_path / "cache-w"
    mp = tmp_path / "mnt-w"
    mp.mkdir()
    o = mount(bucket, options=observer_options(tmp_path / "cache-o"))
    shas = {sha256_bytes(old): "old", sha256_bytes(new): "new"}
    seen = []

    def check():
        what = shas.get(sha256_bytes((o / "model.pt").read_bytes()))
        if what is None:
            return "model.pt is neither version"
        if not seen or seen[-1] != what:
            seen.append(what)
        return None
    p = Poller(check, interval=0.05)
    with UploadThrottleProxy(s3server.endpoint, up_rate=3 * MiB) as proxy:
        w = mount_writer(mount, s3server, bucket, cdir, mp, proxy)
        write_files(w.path, {"model.pt": new})
        wait_for(lambda: proxy.bytes_up >= 6 * MiB, 30, "a quarter uploaded")
        kill_ckptfs(w)
    w2 = mount_writer(mount, s3server, bucket, cdir, mp)
    assert sha256_bytes((w2 / "model.pt").read_bytes()) == sha256_bytes(new)
    wait_for(lambda: s3_get(s3, bucket, "model.pt") == new or p.bad, 60,
             "the new model.pt in the bucket after the restart")
    wait_for(lambda: (seen and seen[-1] == "new") or p.bad, 30, "the new model.pt on O")
    p.assert_clean()
    assert seen == ["old", "new"], seen
    assert s3_get(s3, bucket, "model.pt") == new



@pytest.mark.timeout(120)
def test_sigkill_right_after_unlinks_of_committed_files(
        s3server, bucket, mount, tmp_path):
    """`rm` of a committed file at the top, then of two in a committed
    directory, returns; listings keep the mount busy and ckptfs is
    SIGKILLed: the remount must not show any of them again.  (Model seed
    5003, step 105: unlinks of remote names were held in memory, their
    quiet second pushed back by every listing, and lost by the kill.)"""
    s3 = s3server.client()
    cdir = tmp_path / "cache-w"
    mp = tmp_path / "mnt-w"
    mp.mkdir()
    w = mount_writer(mount, s3server, bucket, cdir, mp)
    write_files(w.path, {"d/g/a": b"a" * 65900, "d/g/c": b"c",
                         "d/g/b": b"b", "top": b"t"})
    assert ckptfs_sync(w.path).returncode == 0
    os.unlink(w.path / "top")
    os.unlink(w.path / "d/g/a")
    os.unlink(w.path / "d/g/c")
    for _ in range(3):
        assert sorted(os.listdir(w.path / "d/g")) == ["b"]
        assert "top" not in os.listdir(w.path)
    kill_ckptfs(w)
    w2 = mount_writer(mount, s3server, bucket, cdir, mp)
    assert sorted(os.listdir(w2.path / "d/g")) == ["b"]
    assert "top" not in os.listdir(w2.path)
    assert ckptfs_sync(w2.path).returncode == 0
    keys = s3_sizes(s3, bucket, "")
    assert not {"d/g/a", "d/g/c", "top"} & set(keys), sorted(keys)
    assert (w2.path / "d/g/b").read_bytes() == b"b"


@pytest.mark.timeout(120)
def test_sigkill_after_a_file_renamed_and_written_anew(
        s3server, bucket, mount, tmp_path):
    """Behind a checkpoint directory still open (its transaction holds the
    queue), a file is written twice, renamed, and the new name written
    again; ckptfs is SIGKILLed before any of it is visible.  The remount
    must show what the application left: the old name gone, the new name
    with its last bytes, and so must the bucket after a sync.  (Model seed
    9000: the remount showed the first version at the old name, and the
    new name with the bytes it had when renamed.)"""
    s3 = s3server.client()
    cdir = tmp_path / "cache-w"
    mp = tmp_path / "mnt-w"
    mp.mkdir()
    v1, v2, v3 = det_bytes(960, 1376), det_bytes(961, 23528), det_bytes(962, 114545)
    w = mount_writer(mount, s3server, bucket, cdir, mp)
    os.mkdir(w.path / "ckpt")  # open until commit_delay: the queue waits
    write_files(w.path, {"f1": v1})
    write_files(w.path, {"f1": v2})  # the first is committing: a new one
    os.rename(w.path / "f1", w.path / "f2")
    write_files(w.path, {"f2": v3})
    assert sorted(os.listdir(w.path)) == ["ckpt", "f2"]
    kill_ckptfs(w)
    w2 = mount_writer(mount, s3server, bucket, cdir, mp)
    assert sorted(os.listdir(w2.path)) == ["ckpt", "f2"]
    assert sha256_bytes((w2.path / "f2").read_bytes()) == sha256_bytes(v3)
    assert ckptfs_sync(w2.path).returncode == 0
    keys = s3_sizes(s3, bucket, "")
    assert "f1" not in keys, sorted(keys)
    assert s3_get(s3, bucket, "f2") == v3
    assert sorted(os.listdir(w2.path)) == ["ckpt", "f2"]
    assert sha256_bytes((w2.path / "f2").read_bytes()) == sha256_bytes(v3)


@pytest.mark.timeout(120)
def test_sigkill_in_the_middle_of_an_rm_r_shows_no_checkpoint_cut_short(
        s3server, bucket, mount, tmp_path):
    """A rotation's `rm -r` of a committed checkpoint is SIGKILLed after
    two of its unlinks (`.metadata` first, as os.scandir may order them).
    The remount hides the two names, as before the kill; another host
    keeps seeing the whole checkpoint, however long the job takes to come
    back and whatever else it writes meanwhile; the restarted job's
    `rm -r` of what is left removes it whole: the other host never sees
    it without its `.metadata`.  (The crash loop: the held deletes were
    sent at the remount, and an observer saw the checkpoint cut short.)"""
    s3 = s3server.client()
    cdir = tmp_path / "cache-w"
    mp = tmp_path / "mnt-w"
    mp.mkdir()
    files = {".metadata": b"m" * 300, "shard-0": det_bytes(970, 200_000),
             "shard-1": det_bytes(971, 300_000)}
    w = mount_writer(mount, s3server, bucket, cdir, mp)
    write_files(w.path, {f"run/checkpoint-3/{n}": b for n, b in files.items()})
    assert ckptfs_sync(w.path).returncode == 0
    o = mount(bucket, options=helpers.observer_options(tmp_path / "cache-o"))
    ck = o.path / "run/checkpoint-3"
    assert sorted(os.listdir(ck)) == sorted(files)
    os.unlink(w.path / "run/checkpoint-3/.metadata")
    os.unlink(w.path / "run/checkpoint-3/shard-0")
    kill_ckptfs(w)
    w2 = mount_writer(mount, s3server, bucket, cdir, mp)
    assert os.listdir(w2.path / "run/checkpoint-3") == ["shard-1"]
    # the job writes its next checkpoint first; time passes
    write_files(w2.path, {"run/checkpoint-4/.metadata": b"n" * 10})
    os.rename(w2.path / "run/checkpoint-4", w2.path / "run/checkpoint-5")
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        assert sorted(os.listdir(ck)) == sorted(files), \
            "another host sees the checkpoint cut short by the kill"
        time.sleep(0.2)
    def check():
        v = tree_view(ck)
        if v is None or sorted(v) == sorted(files):
            return None
        return f"another host saw the checkpoint partly removed: {v}"

    poll = Poller(check)
    shutil.rmtree(w2.path / "run/checkpoint-3")
    assert ckptfs_sync(w2.path).returncode == 0
    time.sleep(0.5)
    poll.assert_clean(min_seen=2)
    assert not [k for k in s3_sizes(s3, bucket, "run/checkpoint-3/")
                if not is_protocol_key(k)]
    assert not (o.path / "run/checkpoint-3").exists()
