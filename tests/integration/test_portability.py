"""The core of a checkpoint's life on whichever S3 server the session runs
(CKPTFS_S3_SERVER: Ceph RGW by default, s3rver for the portability run,
doc/portability.md), with what s3rver gets wrong in the way:

  - reads: directories two levels down (s3rver's delimiter listings drop
    them), names with '+', '%' and spaces (s3rver ignores encoding-type),
    empty, one-byte and multipart-sized objects, the first and the last
    byte, all byte-exact;
  - a save to a temp name, the rename that commits it and the rotation
    that deletes the oldest, watched from a second (read-only) mount that
    never sees a partial checkpoint, and the bucket holding exactly what
    the rotation kept;
  - SIGKILL of the writer mid-save and a remount on its cache: the save
    completes byte for byte;
  - an object replaced under an open reader: old bytes or EIO, never a mix
    (s3rver ignores If-Match);
  - what ckptfs says about each degradation (one warning line).

The same assertions hold on both servers; only the warnings differ."""

import errno
import os

import pytest

import helpers
from helpers import (ckptfs_sync, det_bytes, is_protocol_key, kill_ckptfs,
                     observer_options, observer_settle, pending_markers, run, s3_get,
                     s3_sizes, sha256_bytes, sha256_file, tree_view)
from test_commit import CheckpointWatch
from test_s3_client import Tool, s3tool_bin  # noqa: F401 (fixture)

MiB = 1 << 20
LISTING_WARNING = "leave out directories two or more levels down"
ABORT_WARNING = "does not implement AbortMultipartUpload"


@pytest.fixture(autouse=True)
def _stop_pollers(mount):
    yield
    helpers.stop_all_pollers()


def user_keys(s3, bucket, prefix=""):
    return {k: v for k, v in s3_sizes(s3, bucket, prefix).items()
            if not is_protocol_key(k) and not k.endswith("/")}


def writer_options(tmp_path, name="w", *more):
    return [f"cache_dir={tmp_path / ('cache-' + name)}", "commit_delay=600", *more]


def expect_listing_warning(s3server, m):
    said = LISTING_WARNING in m.log_text()
    if s3server.kind == "s3rver":
        assert said, f"no listing warning on s3rver:\n{m.log_tail()}"
    else:
        assert not said, m.log_tail()


@pytest.mark.timeout(120)
def test_reads_deep_directories_odd_names_and_edges_byte_exact(s3server, bucket, mount,
                                                                tmp_path):
    objs = {
        "deep/a/b/shard.bin": det_bytes(1, 3 * MiB + 5),
        "deep/a/c/d/e.txt": b"five levels\n",
        "odd/page+1 %41.bin": det_bytes(2, 4097),
        "odd/a+b": b"plus",
        "empty.bin": b"",
        "one.bin": b"\x7f",
        "big.bin": det_bytes(3, 9 * MiB + 3),
    }
    s3server.put_many(bucket, objs.items(), threads=4)
    ro = mount(bucket, options=observer_options(tmp_path / "cache-ro"))
    rw = mount(bucket, options=writer_options(tmp_path))
    for m in (ro, rw):
        assert sorted(os.listdir(m.path)) == ["big.bin", "deep", "empty.bin", "odd", "one.bin"]
        assert sorted(os.listdir(m / "deep/a")) == ["b", "c"]
        assert sorted(os.listdir(m / "odd")) == ["a+b", "page+1 %41.bin"]
        found = run(["find", str(m.path), "-type", "f"]).stdout.split("\n")
        assert sorted(os.path.relpath(p, m.path) for p in found if p) == sorted(objs)
        for key, body in objs.items():
            assert os.path.getsize(m / key) == len(body), key
            assert sha256_file(m / key) == sha256_bytes(body), key
        # the first byte alone (a Range of bytes=0-0 would be the whole
        # object on s3rver) and the last (no suffix range either)
        first = run(["dd", f"if={m / 'big.bin'}", "bs=1", "count=1", "status=none"],
                    text=False).stdout
        assert first == objs["big.bin"][:1]
        last = run(["tail", "-c", "1", str(m / "big.bin")], text=False).stdout
        assert last == objs["big.bin"][-1:]
        with open(m / "big.bin", "rb") as f:
            f.seek(5 * MiB + 7)
            assert f.read(3) == objs["big.bin"][5 * MiB + 7:5 * MiB + 10]
            assert f.read(0) == b""
            f.seek(len(objs["big.bin"]) + 10)
            assert f.read(10) == b""
    expect_listing_warning(s3server, ro)
    expect_listing_warning(s3server, rw)


def save(d, files):
    for rel, body in files.items():
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(body)


def ckpt_files(step):
    return {"model.pt": det_bytes(100 + step, 9 * MiB + step),   # multipart
            "optim/state.pt": det_bytes(200 + step, 1 * MiB + 3),
            "trainer_state.json": b'{"step": %d}\n' % step}


@pytest.mark.timeout(150)
def test_save_rename_commit_and_rotation_seen_whole_from_a_second_mount(
        s3server, bucket, mount, tmp_path):
    s3 = s3server.client()
    s3server.put(bucket, "run/")
    obs = mount(bucket, options=observer_options(tmp_path / "cache-o"))
    w = mount(bucket, options=writer_options(tmp_path))
    kept = {}
    for step in (1, 2, 3):
        files = ckpt_files(step)
        watch = CheckpointWatch(obs / "run", f"ckpt-{step}", files)
        tmp = w / "run" / f"tmp-ckpt-{step}"
        save(tmp, files)
        os.rename(tmp, w / "run" / f"ckpt-{step}")        # the commit trigger
        kept[f"ckpt-{step}"] = files
        if step >= 3:
            run(["rm", "-r", str(w / "run" / f"ckpt-{step - 2}")])
            del kept[f"ckpt-{step - 2}"]
        watch.wait_complete(90)
        watch.finish()
    ckptfs_sync(w)
    observer_settle()
    # the bucket holds exactly what the rotation kept, byte for byte
    want = {f"run/{c}/{rel}": body for c, fs in kept.items() for rel, body in fs.items()}
    assert set(user_keys(s3, bucket, "run/")) == set(want)
    for key, body in want.items():
        assert sha256_bytes(s3_get(s3, bucket, key)) == sha256_bytes(body), key
    assert not pending_markers(s3, bucket), "a pending marker outlived sync"
    # and the second mount shows the same
    assert sorted(os.listdir(obs / "run")) == sorted(kept)
    for c, fs in kept.items():
        assert tree_view(obs / "run" / c) == {k: len(v) for k, v in fs.items()}
        for rel, body in fs.items():
            assert sha256_file(obs / "run" / c / rel) == sha256_bytes(body)
    expect_listing_warning(s3server, w)


@pytest.mark.timeout(150)
def test_sigkill_mid_save_then_remount_completes_it(s3server, bucket, mount, tmp_path):
    s3 = s3server.client()
    s3server.put(bucket, "run/")
    obs = mount(bucket, options=observer_options(tmp_path / "cache-o"))
    files = ckpt_files(7)
    watch = CheckpointWatch(obs / "run", "ckpt-7", files)
    mp = tmp_path / "mnt-w"
    mp.mkdir()
    w = mount(bucket, options=writer_options(tmp_path), mountpoint=mp)
    d = w / "run" / "ckpt-7"
    os.mkdir(d)
    for rel, body in files.items():       # stored, not committed
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        try:
            os.write(fd, body)
            os.fsync(fd)
        finally:
            os.close(fd)
    kill_ckptfs(w)
    assert watch.complete_at is None, "visible before the crash"
    assert not watch.poller.bad, watch.poller.bad[:3]

    w2 = mount(bucket, options=writer_options(tmp_path), mountpoint=mp)
    assert tree_view(w2 / "run" / "ckpt-7") == {k: len(v) for k, v in files.items()}
    ckptfs_sync(w2)
    observer_settle()
    watch.wait_complete(30)
    watch.finish()
    assert user_keys(s3, bucket, "run/") == {f"run/ckpt-7/{k}": len(v)
                                             for k, v in files.items()}
    for rel, body in files.items():
        assert sha256_bytes(s3_get(s3, bucket, f"run/ckpt-7/{rel}")) == sha256_bytes(body)
        assert sha256_file(obs / "run/ckpt-7" / rel) == sha256_bytes(body)


@pytest.mark.timeout(90)
def test_object_replaced_under_an_open_reader_gives_old_bytes_or_eio(
        s3server, bucket, mount, tmp_path):
    """A file larger than the cache cap is read uncached, through windows
    of ranged GETs with If-Match.  s3rver ignores If-Match and answers with
    the new version: ckptfs checks the ETag of the reply itself.  Either
    way the reader never gets a mix of two versions.  (A GET already
    streaming when s3rver overwrites the object in place does mix them:
    s3rver replaces objects without a new file, beyond what a client can
    see; doc/portability.md.)"""
    old = det_bytes(11, 16 * MiB)
    new = det_bytes(12, 16 * MiB)
    s3server.put(bucket, "f.bin", old)
    m = mount(bucket, options=[f"cache_dir={tmp_path / 'cache'}", "ro",
                               "cache_size=4M"])
    got = bytearray()
    err = None
    with open(m / "f.bin", "rb", buffering=0) as f:
        got += f.read(4096)             # the first window: [0, 1 MiB)
        s3server.put(bucket, "f.bin", new)
        try:
            while True:
                b = f.read(MiB)
                if not b:
                    break
                got += b
        except OSError as e:
            err = e
    assert bytes(got) == old[:len(got)], \
        f"read {len(got)} bytes that are not all of the version opened"
    assert err is not None and err.errno == errno.EIO, \
        f"{len(got)} bytes read, then {err!r}: the change went unnoticed"
    assert len(got) < len(old)


@pytest.mark.timeout(60)
def test_abort_of_a_multipart_upload(s3server, bucket, s3tool_bin):
    """RGW aborts; s3rver has no AbortMultipartUpload: a clear error, and
    the warning says what it means."""
    tool = Tool(s3tool_bin, s3server.endpoint, s3server.access_key,
                s3server.secret_key, s3server.region)
    upload_id = tool.run(bucket, "mpu-create", "k.bin").last["upload_id"]
    if s3server.kind == "s3rver":
        r = tool.run(bucket, "abort", "k.bin", upload_id, ok=False)
        assert "not supported by the server" in r.stderr, r.stderr
        assert r.stderr.count(ABORT_WARNING) == 1, r.stderr
    else:
        tool.run(bucket, "abort", "k.bin", upload_id)
    assert "k.bin" not in s3server.keys(bucket)


@pytest.mark.timeout(60)
def test_gc_runs_and_says_what_the_server_cannot_do(s3server, bucket):
    """s3rver cannot list multipart uploads: gc does the rest, says so
    and exits 0."""
    s3server.put(bucket, "run/ckpt-1/model.pt", b"m")
    p = run([helpers.CKPTFS_BIN, "gc", f"s3://{bucket}", "--endpoint", s3server.endpoint,
             "--region", s3server.region], env=s3server.env_for_ckptfs(), check=False)
    assert p.returncode == 0, p.stderr
    said = "cannot list multipart uploads" in p.stderr
    assert said == (s3server.kind == "s3rver"), p.stderr
    assert s3server.keys(bucket) == ["run/ckpt-1/model.pt"]


@pytest.mark.rgw_only  # bucket policies
@pytest.mark.timeout(90)
def test_a_refused_listing_probe_leaves_the_mount_working(s3server, bucket, mount, tmp_path):
    """The store refuses the probe's write (a bucket policy): the mount
    decides by listing instead, works, and leaves nothing behind.  A probe
    object left by a mount killed mid-probe stays hidden."""
    import json
    s3 = s3server.client()
    s3server.put(bucket, "deep/a/b/x.bin", b"x" * 100)
    s3server.put(bucket, ".ckptfs-probe/dead-writer/d/e/f", b"")   # a killed probe's
    s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Deny", "Principal": "*", "Action": "s3:PutObject",
                       "Resource": f"arn:aws:s3:::{bucket}/.ckptfs-probe/*"}]}))
    try:
        w = mount(bucket, options=writer_options(tmp_path))
        assert sorted(os.listdir(w.path)) == ["deep"]
        assert os.listdir(w / "deep/a/b") == ["x.bin"]
        save(w / "ckpt-1", {"m.pt": b"model"})
        ckptfs_sync(w)
        assert s3_get(s3, bucket, "ckpt-1/m.pt") == b"model"
        assert sorted(os.listdir(w.path)) == ["ckpt-1", "deep"]
    finally:
        s3.delete_bucket_policy(Bucket=bucket)
    assert [k for k in s3server.keys(bucket) if k.startswith(".ckptfs-probe/")] == \
        [".ckptfs-probe/dead-writer/d/e/f"]
    assert LISTING_WARNING not in w.log_text()


@pytest.mark.timeout(120)
def test_listing_probe_under_faults(s3server, bucket, mount, tmp_path):
    """The probe's write reset every time: the mount gives up on it after
    three attempts (a 503 SlowDown would be retried for at most 15 s),
    comes up and lists right all the same.  Its delete's reply lost once:
    retried, nothing left behind."""
    import time
    from faultproxy import FaultProxy
    s3server.put(bucket, "deep/a/b/x.bin", b"x" * 10)
    with FaultProxy(s3server.endpoint, seed=14) as fp:
        fp.rule("reset_before", method="PUT", path_re=r"/\.ckptfs-probe/", count=50)
        mp = tmp_path / "m1"
        mp.mkdir()
        argv = mount.argv(bucket, "", mp, writer_options(tmp_path, "a"), endpoint=False)
        argv += ["--endpoint", fp.endpoint, "--region", s3server.region]
        t0 = time.monotonic()
        m = mount(bucket, argv=argv, mountpoint=mp)
        assert time.monotonic() - t0 < 20
        assert os.listdir(m / "deep/a/b") == ["x.bin"]
        assert sorted(os.listdir(m.path)) == ["deep"]
        expect_listing_warning(s3server, m)
        m.unmount()
    with FaultProxy(s3server.endpoint, seed=15) as fp:
        fp.rule("reset_after", method="DELETE", path_re=r"/\.ckptfs-probe/")
        mp2 = tmp_path / "m2"
        mp2.mkdir()
        argv = mount.argv(bucket, "", mp2, writer_options(tmp_path, "b"), endpoint=False)
        argv += ["--endpoint", fp.endpoint, "--region", s3server.region]
        m2 = mount(bucket, argv=argv, mountpoint=mp2)
        assert sorted(os.listdir(m2.path)) == ["deep"]
        assert any(e.action == "reset_after" for e in fp.events), fp.events
    assert s3server.keys(bucket) == ["deep/a/b/x.bin"]
