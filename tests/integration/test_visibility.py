"""Reader side of the commit protocol (doc/commit.md, src/proto/visibility.h):
what another host's mount shows while a transaction is pending, after it
commits, and of the objects of a crashed writer.  The markers and manifests
are written with boto3 exactly as a writing mount lays them out."""
import json
import os
import time

import pytest


def put(s3, bucket, key, body=b""):
    s3.put_object(Bucket=bucket, Key=key, Body=body)


def manifest(files, state="committed", writer="w1"):
    return json.dumps({
        "version": 1, "writer": writer, "state": state,
        "files": [{"path": p, "size": len(b)} for p, b in files.items()],
    }).encode()


def listdir(path):
    try:
        return sorted(os.listdir(path))
    except FileNotFoundError:
        return None


def wait_listing(path, want, timeout=6.0):
    """The listing cache lives 1 s: poll until the view matches."""
    deadline = time.monotonic() + timeout
    got = listdir(path)
    while got != want and time.monotonic() < deadline:
        time.sleep(0.25)
        got = listdir(path)
    return got


@pytest.fixture
def s3(s3server):
    return s3server.client()


def test_live_pending_marker_hides_directory(s3, bucket, mount):
    files = {"model.pt": b"m" * 1000, "optim.pt": b"o" * 500}
    for name, body in files.items():
        put(s3, bucket, f"run/checkpoint-2/{name}", body)
    put(s3, bucket, "run/checkpoint-1/model.pt", b"old")
    put(s3, bucket, "run/.ckptfs-pending/checkpoint-2/w1@600")
    m = mount(bucket)
    assert listdir(m.path / "run") == ["checkpoint-1"]
    assert not (m.path / "run" / "checkpoint-2").exists()
    # the commit point: the marker goes away
    s3.delete_object(Bucket=bucket, Key="run/.ckptfs-pending/checkpoint-2/w1@600")
    want = ["checkpoint-1", "checkpoint-2"]
    assert wait_listing(m.path / "run", want) == want
    assert (m.path / "run/checkpoint-2/model.pt").read_bytes() == files["model.pt"]


def test_expired_marker_leaves_only_what_a_manifest_committed(s3, bucket, mount):
    """A writer died (its marker expired) in a directory without a
    committed manifest: what it left (a format-1 rename's partial copy, an
    abandoned transaction) is hidden until gc removes it, never listed in
    part (issue 21).  Once the marker is gone the directory is like any
    other tool's; a committed directory whose writer died after its commit
    point shows whatever its marker says."""
    put(s3, bucket, "p/c/x.bin", b"x")
    put(s3, bucket, "p/.ckptfs-pending/c/dead@1")
    put(s3, bucket, "p/d/y.bin", b"y")
    put(s3, bucket, "p/d/.ckptfs/manifest.dead.json",
        b'{"version":2,"writer":"dead","state":"committed","txn":1,'
        b'"files":[{"path":"y.bin","size":1}]}')
    put(s3, bucket, "p/.ckptfs-pending/d/dead@1")
    time.sleep(2.1)  # the lease (1 s) ran out by the server's clock
    m = mount(bucket)
    assert listdir(m.path / "p") == ["d"]
    assert listdir(m.path / "p" / "d") == ["y.bin"]
    s3.delete_object(Bucket=bucket, Key="p/.ckptfs-pending/c/dead@1")
    assert wait_listing(m.path / "p", ["c", "d"]) == ["c", "d"]


def test_two_writers_visible_only_together(s3, bucket, mount):
    put(s3, bucket, "dcp/step-5/__0_0.distcp", b"a" * 100)
    put(s3, bucket, "dcp/.ckptfs-pending/step-5/hostA@600")
    put(s3, bucket, "dcp/.ckptfs-pending/step-5/hostB@600")
    m = mount(bucket)
    assert listdir(m.path / "dcp") == []
    s3.delete_object(Bucket=bucket, Key="dcp/.ckptfs-pending/step-5/hostA@600")
    time.sleep(1.5)
    assert listdir(m.path / "dcp") == [], "one writer still pending"
    s3.delete_object(Bucket=bucket, Key="dcp/.ckptfs-pending/step-5/hostB@600")
    assert wait_listing(m.path / "dcp", ["step-5"]) == ["step-5"]


def test_manifest_union_hides_uncommitted_objects(s3, bucket, mount):
    a = {"__0_0.distcp": b"0" * 64, "sub/a.pt": b"a"}
    b = {"__1_0.distcp": b"1" * 64, ".metadata": b"meta"}
    for name, body in {**a, **b}.items():
        put(s3, bucket, f"ck/{name}", body)
    # objects of a writer that crashed before committing its manifest
    put(s3, bucket, "ck/__2_0.distcp", b"partial")
    put(s3, bucket, "ck/junk/half.pt", b"partial")
    put(s3, bucket, "ck/.ckptfs/manifest.w0.json", manifest(a, writer="w0"))
    put(s3, bucket, "ck/.ckptfs/manifest.w1.json", manifest(b, writer="w1"))
    put(s3, bucket, "ck/.ckptfs/manifest.w2.json",
        manifest({}, state="pending", writer="w2"))
    m = mount(bucket)
    assert listdir(m.path / "ck") == sorted(
        [".metadata", "__0_0.distcp", "__1_0.distcp", "sub"])
    assert listdir(m.path / "ck/sub") == ["a.pt"]
    assert not (m.path / "ck/__2_0.distcp").exists()
    assert not (m.path / "ck/junk").exists()
    assert (m.path / "ck/__1_0.distcp").read_bytes() == b["__1_0.distcp"]


def test_invalid_manifest_is_ignored_not_fatal(s3, bucket, mount):
    put(s3, bucket, "d/a.bin", b"a")
    put(s3, bucket, "d/.ckptfs/manifest.bad.json", b"{not json")
    put(s3, bucket, "d/.ckptfs/manifest.ok.json", manifest({"a.bin": b"a"}))
    m = mount(bucket)
    assert listdir(m.path / "d") == ["a.bin"]
    assert m.log_text().count("ignoring") >= 1


def test_directories_without_protocol_files_show_everything(s3, bucket, mount):
    for k in ("plain/a", "plain/b/c"):
        put(s3, bucket, k, b"z")
    m = mount(bucket)
    assert listdir(m.path / "plain") == ["a", "b"]
    assert ".ckptfs" not in listdir(m.path)


def test_directory_deleted_after_its_parent_was_listed_answers_enoent(s3, bucket, mount):
    """A reader that saw a directory in its parent's listing and opens it
    after another host deleted it gets ENOENT, as a local filesystem
    answers for a removed directory, never an empty listing (an empty
    checkpoint directory looks like a damaged one).  Both for a directory
    of plain objects and for a ckptfs directory (manifest)."""
    files = {"model.pt": b"m" * 1000, "optim.pt": b"o" * 500}
    for d in ("plain", "ckpt"):
        for name, body in files.items():
            put(s3, bucket, f"run/{d}/{name}", body)
    put(s3, bucket, "run/ckpt/.ckptfs/manifest.w1.json", manifest(files))
    put(s3, bucket, "run/keep/x", b"x")
    put(s3, bucket, "run/empty/")  # an empty directory made by another tool
    # the parent's listing is kept for 30 s: the names stay known
    m = mount(bucket, options=["dir_timeout=30", "entry_timeout=30", "attr_timeout=30"])
    assert listdir(m.path / "run") == ["ckpt", "empty", "keep", "plain"]
    for d in ("plain", "ckpt"):
        for name in files:
            s3.delete_object(Bucket=bucket, Key=f"run/{d}/{name}")
    s3.delete_object(Bucket=bucket, Key="run/ckpt/.ckptfs/manifest.w1.json")
    for d in ("plain", "ckpt"):
        with pytest.raises(FileNotFoundError):
            os.listdir(m.path / "run" / d)
    assert listdir(m.path / "run/empty") == [], "an empty directory still exists"
    assert listdir(m.path / "run/keep") == ["x"]
    assert listdir(m.path) == ["run"]


def test_directory_with_only_pending_manifests_answers_enoent(s3, bucket, mount):
    """Issue 21: a checkpoint directory whose manifests are all pending
    (nothing of it committed) that a parent listing names anyway: its
    marker gone (expired: an abandoned transaction), or, in the crash
    loop, a transaction aborted and started again under the same name
    between the parent's LISTs so that neither saw a marker.  Opening it
    gives ENOENT, never an empty directory (what readers took for a
    damaged checkpoint); a subdirectory inside it too.  Committed
    directories beside it are untouched."""
    put(s3, bucket, "run/ckpt-1/a.bin", b"a")
    put(s3, bucket, "run/ckpt-1/sub/b.bin", b"b")
    put(s3, bucket, "run/ckpt-1/.ckptfs/manifest.w1.json", manifest({}, state="pending"))
    put(s3, bucket, "run/ckpt-0/a.bin", b"a")
    put(s3, bucket, "run/ckpt-0/.ckptfs/manifest.w1.json", manifest({"a.bin": b"a"}))
    put(s3, bucket, "run/.ckptfs-pending/ckpt-1/w1@1")  # expired long ago
    m = mount(bucket)
    names = listdir(m.path / "run")
    assert "ckpt-0" in names
    assert listdir(m.path / "run/ckpt-0") == ["a.bin"]
    if "ckpt-1" in names:
        with pytest.raises(FileNotFoundError):
            os.listdir(m.path / "run/ckpt-1")
    with pytest.raises(FileNotFoundError):
        os.listdir(m.path / "run/ckpt-1/sub")


@pytest.mark.timeout(120)
def test_a_reader_never_pairs_a_new_index_with_an_older_shard(s3, bucket, mount):
    """Another writer replaces a shard and then the index naming its step,
    in that order, many times (safetensors' sharded save, or any tool that
    writes a file before the file pointing at it).  A reader that opens the
    index and then the shard never gets a shard older than the index: S3
    shows the two writes in order, and so must the mount, although each
    name's attributes are cached on their own (doc/architecture.md,
    "Reads": an open never pins a version older than one pinned before in
    the same directory)."""
    def body(step, size):
        return (f"{step:08d}".encode() * (size // 8 + 1))[:size]

    put(s3, bucket, "run/shard.bin", body(0, 4096))
    put(s3, bucket, "run/index.json", b"0")
    m = mount(bucket)
    d = m.path / "run"
    assert (d / "index.json").read_bytes() == b"0"
    stop = time.monotonic() + 20
    steps = 0
    bad = []
    import threading

    def writer():
        nonlocal steps
        k = 0
        while time.monotonic() < stop:
            k += 1
            put(s3, bucket, "run/shard.bin", body(k, 4096 + k))
            put(s3, bucket, "run/index.json", str(k).encode())
            steps = k
            time.sleep(0.3)

    t = threading.Thread(target=writer)
    t.start()
    reads = 0
    try:
        while time.monotonic() < stop:
            idx = int((d / "index.json").read_bytes())
            got = (d / "shard.bin").read_bytes()
            shard = int(got[:8])
            assert got == body(shard, len(got)), "a torn shard"
            reads += 1
            if shard < idx:
                bad.append((idx, shard))
            time.sleep(0.02)
    finally:
        t.join()
    assert steps > 30 and reads > 100
    assert not bad, f"{len(bad)} of {reads} reads paired index N with an older shard: {bad[:5]}"


def test_a_manifest_rewritten_after_the_listing_is_read_whole(
        s3, s3server, bucket, mount, tmp_path):
    """A writer's manifest is rewritten in place as its transaction
    moves on (the intent, then the committed document, longer).  A reader
    that listed the short version and reads it after the rewrite must
    read the new one whole.  Before, it read the listed size of the new
    version: a cut document, ignored ("not JSON"), and the checkpoint it
    committed stayed hidden until the next listing, or, the directory's
    only manifest, everything in it showed (seen in the model bench's and
    CI's logs)."""
    from faultproxy import FaultProxy
    files = {"model.pt": b"m" * 1000, "optim.pt": b"o" * 500}
    for name, b in files.items():
        put(s3, bucket, f"run/ckpt/{name}", b)
    put(s3, bucket, "run/ckpt/partial.pt", b"p" * 10)  # no manifest has it
    key = "run/ckpt/.ckptfs/manifest.w1.json"
    put(s3, bucket, key, manifest({"model.pt": files["model.pt"]}))
    longer = manifest(files)  # the same writer's document, rewritten
    rewrites = []

    def rewrite_first_read(method, path, query, headers):
        if method == "GET" and path.endswith("/" + key) and not rewrites:
            put(s3, bucket, key, longer)
            rewrites.append(path)
        return None

    proxy = FaultProxy(s3server.endpoint, inspect=rewrite_first_read)
    try:
        mp = tmp_path / "mnt"
        mp.mkdir()
        argv = mount.argv(bucket, "", mp, (), endpoint=False)
        argv += ["--endpoint", proxy.endpoint, "--region", s3server.region]
        m = mount(bucket, argv=argv, mountpoint=mp)
        got = listdir(m.path / "run" / "ckpt")
        assert rewrites, "the reader never read the manifest"
        assert got == sorted(files), (
            f"{got}: the reader did not show what the rewritten manifest "
            f"commits\n{m.log_tail()}")
        assert (m.path / "run/ckpt/optim.pt").read_bytes() == files["optim.pt"]
        assert "not JSON" not in m.log_text()
    finally:
        proxy.close()
