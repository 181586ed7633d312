"""Transactions seen from another host (issue 4, doc/commit.md): a
checkpoint written through one mount appears on another mount entirely or
not at all, when a commit trigger fires; several writer mounts into one
directory become visible together; remote effects keep the order the
application issued them in (a delete of checkpoint N-1 never before N is
visible, `latest` never names an invisible checkpoint).

Another host is a second ckptfs mount with its own cache and no listing or
attribute caching (helpers.observer_options), polled in a thread for the
whole test, plus boto3 listings of the bucket judged by the protocol
(complete = every expected key with its size and no pending marker)."""

import os
import shutil
import subprocess
import time

import pytest

import helpers

from helpers import (Poller, ckptfs_commit, ckptfs_sync, det_bytes,
                     kill_ckptfs,
                     is_protocol_key, observer_options, observer_settle, pending_markers,
                     s3_get, s3_sizes, sha256_bytes, tree_view, wait_for)

MiB = 1 << 20


@pytest.fixture(autouse=True)
def _stop_pollers(mount):
    """Pollers of a test that failed midway stop before its mounts go."""
    yield
    helpers.stop_all_pollers()


def writer(mount, bucket, tmp_path, name, *opts):
    """A writing mount with its own cache directory."""
    return mount(bucket, options=(f"cache_dir={tmp_path}/cache-{name}", *opts))


def observer(mount, bucket, tmp_path, name="obs"):
    return mount(bucket, options=observer_options(tmp_path / f"cache-{name}"))


def write_slowly(path, body, chunk=MiB, pause=0.03, fsync=False):
    """Sequential writes of `chunk` bytes with a pause between them (a
    framework serialising tensors), then close."""
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    try:
        for i in range(0, len(body), chunk):
            os.write(fd, body[i:i + chunk])
            if pause:
                time.sleep(pause)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remote_complete(listing, parent, name, files):
    """Whether one listing of the bucket ({key: size}) shows parent/name
    complete by the protocol: every file with its size, no pending marker."""
    if any(k.startswith(f"{parent}/.ckptfs-pending/{name}/") for k in listing):
        return False
    return all(listing.get(f"{parent}/{name}/{rel}") == len(body)
               for rel, body in files.items())


class CheckpointWatch:
    """Polls, through an observing mount, the directory root/name that is
    expected to appear once with exactly `files` ({rel: bytes}).  Every
    observation must be "absent" or "complete"; the first complete one also
    reads every file and compares the bytes."""

    def __init__(self, root, name, files):
        self.root = root
        self.name = name
        self.files = files
        self.want = {k: len(v) for k, v in files.items()}
        self.complete_at = None
        self.absent_seen = 0
        self.poller = Poller(self.check, name=f"watch-{name}")

    def check(self):
        listed = self.name in os.listdir(self.root)
        view = tree_view(self.root / self.name)
        if view is None and not listed:
            if self.complete_at is not None:
                return f"{self.name} vanished after it was complete"
            self.absent_seen += 1
            return None
        if view is None:
            return f"{self.name} listed in {self.root} but not found"
        if view != self.want:
            return f"partial {self.name} (listed: {listed}): {sorted(view.items())}"
        if self.complete_at is None:
            for rel, body in self.files.items():
                got = (self.root / self.name / rel).read_bytes()
                if sha256_bytes(got) != sha256_bytes(body):
                    return f"{self.name}/{rel}: {len(got)} bytes, not the final ones"
            self.complete_at = time.monotonic()
        return None

    def wait_complete(self, timeout):
        wait_for(lambda: self.complete_at is not None or self.poller.bad, timeout,
                 f"{self.name} complete on the observing mount "
                 f"({self.poller.seen} observations)")
        assert not self.poller.bad, self.poller.bad[:3]

    def finish(self):
        """Stops polling; no bad observation, and the directory was seen
        absent at least once (the polling overlapped the writing)."""
        self.poller.assert_clean()
        assert self.absent_seen >= 1, "the observer never saw the checkpoint absent"


def checkpoint(seed, n=8, lo=4, hi=8):
    """n files of lo..hi MiB (plus a few odd bytes)."""
    return {f"shard-{i:02d}.bin": det_bytes(seed * 100 + i, (lo + (i % (hi - lo + 1))) * MiB + i)
            for i in range(n)}


def assert_remote(s3, bucket, prefix, files):
    for rel, body in files.items():
        got = s3_get(s3, bucket, f"{prefix}/{rel}")
        assert got is not None, f"{prefix}/{rel} not in the bucket"
        assert sha256_bytes(got) == sha256_bytes(body), f"{prefix}/{rel} differs"
    user = {k for k in s3_sizes(s3, bucket, prefix + "/") if not is_protocol_key(k)
            and not k.endswith("/")}
    assert user == {f"{prefix}/{r}" for r in files}, user


# --------------------------------------------------------------------------
# the upload hold: closed files upload once the application stops writing


def user_keys(s3, bucket, prefix):
    return sorted(k for k in s3_sizes(s3, bucket, prefix)
                  if not is_protocol_key(k) and not k.endswith("/"))


def stored_after(s3, bucket, prefix, want, limit):
    """Seconds until the bucket holds exactly the keys want under prefix."""
    t0 = time.monotonic()
    wait_for(lambda: user_keys(s3, bucket, prefix) == want, limit,
             lambda: f"stored: {user_keys(s3, bucket, prefix)}, want {want}")
    return time.monotonic() - t0


@pytest.mark.timeout(120)
def test_uploads_wait_while_the_application_writes(s3server, bucket, mount, tmp_path):
    """A file closed while another is still open for writing does not
    upload (the writer's close runs at local-disk speed without uploads
    competing); once the last writable handle closes, everything uploads
    within a second.  fsync of a file uploads it at once anyway."""
    s3 = s3server.client()
    w = writer(mount, bucket, tmp_path, "w", "commit_delay=600")
    d = w / "held"
    os.mkdir(d)
    (d / "a.bin").write_bytes(det_bytes(31, 3 * MiB))
    with open(d / "b.bin", "wb") as b:
        b.write(det_bytes(32, MiB))
        time.sleep(2.5)
        assert user_keys(s3, bucket, "held/") == [], \
            "a.bin uploaded while the application was still writing"
        with open(d / "c.bin", "wb") as c:
            c.write(b"fsynced")
            c.flush()
            os.fsync(c.fileno())
        assert user_keys(s3, bucket, "held/") == ["held/c.bin"], \
            "fsync did not store c.bin (or others went along)"
    took = stored_after(s3, bucket, "held/", ["held/a.bin", "held/b.bin", "held/c.bin"], 20)
    assert took < 3, f"uploads started {took:.1f} s after the last close"
    ckptfs_commit(d)
    assert s3_get(s3, bucket, "held/a.bin") == det_bytes(31, 3 * MiB)
    assert s3_get(s3, bucket, "held/b.bin") == det_bytes(32, MiB)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("hold", ["0", "1"])
def test_upload_hold_option_bounds_the_wait(s3server, bucket, mount, tmp_path, hold):
    """upload_hold=0 uploads every file as it closes; upload_hold=1 lets a
    closed file wait at most about a second although another stays open
    for writing."""
    s3 = s3server.client()
    w = writer(mount, bucket, tmp_path, "w", "commit_delay=600", f"upload_hold={hold}")
    d = w / "bounded"
    os.mkdir(d)
    with open(d / "open.bin", "wb") as f:
        f.write(b"still writing")
        (d / "a.bin").write_bytes(det_bytes(33, 2 * MiB))
        took = stored_after(s3, bucket, "bounded/", ["bounded/a.bin"], 15)
        assert took < 4, f"a.bin stored {took:.1f} s after its close (upload_hold={hold})"
    ckptfs_commit(d)


# --------------------------------------------------------------------------
# atomic visibility

@pytest.mark.timeout(150)
def test_multi_file_checkpoint_is_never_seen_partially(s3server, bucket, mount, tmp_path):
    """8 files of 4-8 MiB written slowly into a new directory (uploads start
    when the writing stops, or upload_hold after each close), .metadata written as .metadata.tmp and renamed (DCP),
    committed by commit_delay: another mount polling the parent sees the
    directory absent, then complete with the final bytes, nothing between."""
    s3 = s3server.client()
    s3server.put(bucket, "run/ckpt-0/old.bin", b"old")
    w = writer(mount, bucket, tmp_path, "w", "commit_delay=2")
    o = observer(mount, bucket, tmp_path)
    files = checkpoint(1)
    files[".metadata"] = b"dcp metadata " * 100
    watch = CheckpointWatch(o / "run", "ckpt-1", files)
    d = w / "run/ckpt-1"
    os.mkdir(d)
    for name, body in files.items():
        if name != ".metadata":
            write_slowly(d / name, body)
    write_slowly(d / ".metadata.tmp", files[".metadata"], fsync=True)
    os.rename(d / ".metadata.tmp", d / ".metadata")
    assert tree_view(d) == {k: len(v) for k, v in files.items()}, \
        "the writing mount does not show what it wrote"
    watch.wait_complete(90)
    watch.finish()
    assert_remote(s3, bucket, "run/ckpt-1", files)
    assert not pending_markers(s3, bucket)
    assert not [k for k in s3_sizes(s3, bucket) if ".metadata.tmp" in k]


@pytest.mark.timeout(120)
def test_orbax_temp_directory_renamed_commits_under_the_new_name(
        s3server, bucket, mount, tmp_path):
    """Orbax: mkdir <step>.orbax-checkpoint-tmp-N; per key a <key>.__lock
    file with an OFD lock, write, fsync, rename to <key>, fsync the
    directory; commit_success.txt; rename the directory to <step>.  The
    rename is the commit (commit_delay is 600 s); the temp names never
    appear anywhere."""
    import fcntl
    import struct
    s3 = s3server.client()
    s3server.put(bucket, "orbax/")
    w = writer(mount, bucket, tmp_path, "w", "commit_delay=600")
    o = observer(mount, bucket, tmp_path)
    files = {f"{k}/data": det_bytes(200 + i, 3 * MiB + i) for i, k in enumerate(["params", "opt_state"])}
    files["commit_success.txt"] = b"Checkpoint commit was successful"
    watch = CheckpointWatch(o / "orbax", "100", files)
    seen_tmp = []
    tmp_watch = Poller(lambda: seen_tmp.append(1) if any(
        "tmp" in n for n in os.listdir(o / "orbax")) else None, interval=0.02)
    t = w / "orbax/100.orbax-checkpoint-tmp-1700000000"
    os.mkdir(t)
    for k in ("params", "opt_state"):
        os.mkdir(t / k)
        lock = t / k / "data.__lock"
        fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.fcntl(fd, fcntl.F_OFD_SETLK,
                        struct.pack("@hhqqi4x", fcntl.F_WRLCK, 0, 0, 0, 0))
            body = files[f"{k}/data"]
            for i in range(0, len(body), MiB):
                os.write(fd, body[i:i + MiB])
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(lock, t / k / "data")
        fsync_dir(t / k)
    (t / "commit_success.txt").write_bytes(files["commit_success.txt"])
    assert watch.complete_at is None
    os.rename(t, w / "orbax/100")
    watch.wait_complete(60)
    watch.finish()
    tmp_watch.assert_clean()
    assert not seen_tmp, "the temp directory showed on the observing mount"
    ckptfs_sync(w)
    assert_remote(s3, bucket, "orbax/100", files)
    keys = s3_sizes(s3, bucket)
    assert not [k for k in keys if "orbax-checkpoint-tmp" in k or "__lock" in k], keys
    assert not pending_markers(s3, bucket)


@pytest.mark.timeout(120)
def test_two_writer_mounts_in_one_directory_become_visible_together(
        s3server, bucket, mount, tmp_path):
    """Multi-node DCP: two hosts mkdir -p the same directory, each writes
    and fsyncs its own files.  A third mount sees nothing while either is
    still pending, then every file of both at once."""
    s3 = s3server.client()
    s3server.put(bucket, "dcp/")
    a = writer(mount, bucket, tmp_path, "a", "commit_delay=1")
    b = writer(mount, bucket, tmp_path, "b", "commit_delay=1")
    c = observer(mount, bucket, tmp_path)
    files_a = {"__0_0.distcp": det_bytes(301, 6 * MiB + 1), ".metadata": b"meta" * 50}
    files_b = {"__1_0.distcp": det_bytes(302, 6 * MiB + 2)}
    watch = CheckpointWatch(c / "dcp", "step-5", {**files_a, **files_b})
    os.makedirs(a / "dcp/step-5", exist_ok=True)
    os.makedirs(b / "dcp/step-5", exist_ok=True)
    markers = pending_markers(s3, bucket, "dcp/")
    assert len(markers) == 2, f"each writer holds a marker after its mkdir: {markers}"

    write_slowly(a / "dcp/step-5/__0_0.distcp", files_a["__0_0.distcp"], fsync=True)
    write_slowly(a / "dcp/step-5/.metadata.tmp", files_a[".metadata"], fsync=True)
    os.rename(a / "dcp/step-5/.metadata.tmp", a / "dcp/step-5/.metadata")
    # A commits on its own (commit_delay): its marker goes, B's stays
    wait_for(lambda: len(pending_markers(s3, bucket, "dcp/")) == 1, 60,
             lambda: f"writer A's commit: {pending_markers(s3, bucket, 'dcp/')}")
    assert "step-5" not in os.listdir(c / "dcp"), "visible while B is pending"
    assert watch.complete_at is None

    write_slowly(b / "dcp/step-5/__1_0.distcp", files_b["__1_0.distcp"], fsync=True)
    watch.wait_complete(60)
    watch.finish()
    assert_remote(s3, bucket, "dcp/step-5", {**files_a, **files_b})
    assert not pending_markers(s3, bucket)


# --------------------------------------------------------------------------
# commit triggers

@pytest.mark.timeout(120)
@pytest.mark.parametrize("trigger", ["fsync_dir", "ckptfs_commit", "ckptfs_sync",
                                     "unmount", "rename"])
def test_commit_trigger(s3server, bucket, mount, tmp_path, trigger):
    """With commit_delay=600 a new directory stays invisible until a
    trigger: fsync of the directory, `ckptfs commit`, `ckptfs sync`
    and unmount return once it is visible; a rename of the root commits it
    under the new name (the old name never shows, nothing is left under
    it)."""
    s3 = s3server.client()
    s3server.put(bucket, "run/")
    w = writer(mount, bucket, tmp_path, "w", "commit_delay=600")
    o = observer(mount, bucket, tmp_path)
    files = {"model.pt": det_bytes(401, 5 * MiB + 1), "opt/optim.pt": det_bytes(402, 2 * MiB),
             "trainer_state.json": b'{"step": 9}'}
    name = "staging-9" if trigger == "rename" else "ckpt-9"
    watch = CheckpointWatch(o / "run", "ckpt-9", files)
    old_seen = []
    old_watch = Poller(lambda: old_seen.append(1) if "staging-9" in os.listdir(o / "run")
                       else None, interval=0.02)
    d = w / "run" / name
    os.makedirs(d / "opt")
    for rel, body in files.items():
        write_slowly(d / rel, body, pause=0)
    assert "ckpt-9" not in os.listdir(o / "run")
    assert pending_markers(s3, bucket, "run/"), "no pending marker while open"
    if trigger == "fsync_dir":
        fsync_dir(d)
    elif trigger == "ckptfs_commit":
        ckptfs_commit(d)
    elif trigger == "ckptfs_sync":
        ckptfs_sync(w)
    elif trigger == "unmount":
        assert not w.unmount(), "unmount did not go cleanly"
    else:
        os.rename(d, w / "run/ckpt-9")
    if trigger != "rename":
        # the trigger returned: visible now, no waiting (but for the
        # observer's own listing reuse)
        observer_settle()
        assert tree_view(o / "run/ckpt-9") == {k: len(v) for k, v in files.items()}
    watch.wait_complete(60)
    watch.finish()
    old_watch.assert_clean()
    assert not old_seen, "the old name of the renamed root showed"
    if trigger != "unmount":
        ckptfs_sync(w)
    assert_remote(s3, bucket, "run/ckpt-9", files)
    assert not [k for k in s3_sizes(s3, bucket) if "staging-9" in k]
    assert not pending_markers(s3, bucket)


@pytest.mark.timeout(90)
def test_idle_commit_waits_for_open_handles_and_changes(s3server, bucket, mount, tmp_path):
    """commit_delay=1: a directory commits when no handle inside it has been
    open and nothing changed for a second: not while a file inside is held
    open (3 s), not while a file is rewritten every 0.4 s (3 s), and then
    without any other trigger."""
    s3server.put(bucket, "run/")
    w = writer(mount, bucket, tmp_path, "w", "commit_delay=1")
    o = observer(mount, bucket, tmp_path)
    files = {"a.bin": det_bytes(501, MiB), "b.bin": det_bytes(502, 2 * MiB),
             "log.txt": b"".join(b"line %d\n" % i for i in range(8))}
    watch = CheckpointWatch(o / "run", "ckpt-1", files)
    d = w / "run/ckpt-1"
    os.mkdir(d)
    (d / "a.bin").write_bytes(files["a.bin"])
    (d / "b.bin").write_bytes(files["b.bin"])
    with open(d / "a.bin", "rb") as held:
        t_end = time.monotonic() + 3
        while time.monotonic() < t_end:
            assert watch.complete_at is None, "committed while a handle was open"
            time.sleep(0.1)
        assert held.read(4) == files["a.bin"][:4]
    for i in range(8):  # a change every 0.4 s, no handle open between
        with open(d / "log.txt", "ab") as f:
            f.write(b"line %d\n" % i)
        assert watch.complete_at is None, "committed while still changing"
        time.sleep(0.4)
    watch.wait_complete(30)
    watch.finish()
    assert not pending_markers(s3server.client(), bucket)


@pytest.mark.timeout(90)
# s3rver replaces an object in place: a read during the replacement gets
# a cut body (doc/portability.md)
@pytest.mark.rgw_only
def test_single_file_commits_on_close_never_half_written(s3server, bucket, mount, tmp_path):
    """A file outside any new directory is its own transaction: while it is
    being rewritten (O_TRUNC, slowly) another mount reads the old bytes, and
    after close the new ones, never anything else; commit_delay is 600 s,
    close is the trigger."""
    old = det_bytes(601, 6 * MiB)
    new = det_bytes(602, 7 * MiB + 5)
    s3server.put(bucket, "model.pt", old)
    w = writer(mount, bucket, tmp_path, "w", "commit_delay=600")
    o = observer(mount, bucket, tmp_path)
    shas = {sha256_bytes(old): "old", sha256_bytes(new): "new"}
    seen = []

    def check():
        try:
            got = (o / "model.pt").read_bytes()
        except FileNotFoundError:
            return "model.pt missing"
        what = shas.get(sha256_bytes(got))
        if what is None:
            return f"model.pt read as {len(got)} bytes that are neither version"
        if not seen or seen[-1] != what:
            seen.append(what)
        return None
    p = Poller(check)
    fd = os.open(w / "model.pt", os.O_WRONLY | os.O_TRUNC)
    try:
        for i in range(0, len(new), MiB):
            os.write(fd, new[i:i + MiB])
            time.sleep(0.05)
        assert (o / "model.pt").read_bytes() == old, "new bytes visible before close"
    finally:
        os.close(fd)
    wait_for(lambda: seen and seen[-1] == "new" or p.bad, 60, "the new version on O")
    p.assert_clean()
    assert seen == ["old", "new"], seen
    assert s3_get(s3server.client(), bucket, "model.pt") == new


# --------------------------------------------------------------------------
# ordering

def save_hf(w, n, files):
    """HF Trainer: makedirs checkpoint-N, write the files (commit_delay
    commits it)."""
    d = w / "run" / f"checkpoint-{n}"
    os.makedirs(d)
    for rel, body in files.items():
        write_slowly(d / rel, body, pause=0.01)


def save_adaptdl(w, n, files):
    """adaptdl: write into _checkpoint/, rename it to checkpoint-N."""
    d = w / "run/_checkpoint"
    os.makedirs(d)
    for rel, body in files.items():
        write_slowly(d / rel, body, pause=0.01)
    os.rename(d, w / "run" / f"checkpoint-{n}")


@pytest.mark.timeout(150)
def test_a_reader_inside_a_directory_sees_its_delete_whole(s3server, bucket, mount, tmp_path):
    """A reader already inside a committed checkpoint (it holds the
    directory open, as a shell's cwd does, so no lookup in the parent
    hides it) lists it again and again while another mount deletes it:
    each listing shows every file or none, never part of them."""
    w = writer(mount, bucket, tmp_path, "w")
    files = {f"f{i:03}": det_bytes(900 + i, 100 + i) for i in range(400)}
    d = w / "ck"
    d.mkdir()
    for n, b in files.items():
        (d / n).write_bytes(b)
    ckptfs_commit(d)
    o = observer(mount, bucket, tmp_path)
    fd = os.open(o / "ck", os.O_RDONLY | os.O_DIRECTORY)
    seen = {"all": 0, "none": 0}

    def check():
        try:
            # a new open of the directory itself, not through its parent
            names = os.listdir(f"/proc/self/fd/{fd}")
        except FileNotFoundError:
            names = []
        if sorted(names) == sorted(files):
            seen["all"] += 1
        elif not names:
            seen["none"] += 1
        else:
            return f"{len(names)} of {len(files)} files listed"
        return None

    try:
        poller = Poller(check)
        wait_for(lambda: seen["all"] >= 3, 30, "the observer lists the whole checkpoint")
        shutil.rmtree(d)
        ckptfs_sync(w)
        wait_for(lambda: seen["none"] >= 3 or len(poller.bad) > 20, 30,
                 "the observer lists it empty")
        poller.assert_clean(min_seen=6)
    finally:
        os.close(fd)
    assert not [k for k in s3_sizes(s3server.client(), bucket, "ck/")], "deleted remotely"


@pytest.mark.timeout(150)
@pytest.mark.parametrize("pattern", ["hf", "adaptdl"])
def test_deleting_the_previous_checkpoint_never_leaves_none(
        s3server, bucket, mount, tmp_path, pattern):
    """Save checkpoint N, then at once rm -r checkpoint N-1 (rotation, keep
    1), three times.  The delete reaches the bucket only after N committed:
    a boto3 poller (judging listings by the protocol) and an observing mount
    always find a complete checkpoint."""
    s3 = s3server.client()
    s3server.put(bucket, "run/")
    w = writer(mount, bucket, tmp_path, "w", "commit_delay=1")
    o = observer(mount, bucket, tmp_path)
    ckpts = {n: {f"part-{i}.bin": det_bytes(700 + 10 * n + i, MiB + 1000 * i + n)
                 for i in range(4)} for n in range(1, 5)}
    save = save_hf if pattern == "hf" else save_adaptdl
    save(w, 1, ckpts[1])
    ckptfs_sync(w)

    def any_complete_remote():
        listing = s3_sizes(s3, bucket, "run/")
        return any(remote_complete(listing, "run", f"checkpoint-{n}", f)
                   for n, f in ckpts.items())

    def check_remote():
        # a listing is no snapshot: when one finds nothing complete, the
        # next one (started after it ended) must find something
        if any_complete_remote() or any_complete_remote():
            return None
        return f"no complete checkpoint in the bucket: {sorted(s3_sizes(s3, bucket, 'run/'))}"

    def any_complete_mount():
        for n, f in ckpts.items():
            if tree_view(o / "run" / f"checkpoint-{n}") == {k: len(v) for k, v in f.items()}:
                return True
        return False

    def check_mount():
        # the observer reuses a listing for OBSERVER_LISTING_S: one pass can
        # resolve checkpoint-N in a run/ listing taken just before N+1
        # committed, and list inside N just after its delete began (a
        # reader that is that much slower sees the same); a second pass
        # after the listings expired must find a complete one
        if any_complete_mount():
            return None
        time.sleep(2 * helpers.OBSERVER_LISTING_S)
        if any_complete_mount():
            return None
        seen = {n: tree_view(o / "run" / f"checkpoint-{n}") for n in ckpts}
        return (f"no complete checkpoint on the observing mount: "
                f"{os.listdir(o / 'run')}; each one now: {seen}")

    pr = Poller(check_remote)
    pm = Poller(check_mount)
    for n in (2, 3, 4):
        save(w, n, ckpts[n])
        shutil.rmtree(w / "run" / f"checkpoint-{n - 1}")
        assert sorted(os.listdir(w / "run")) == [f"checkpoint-{n}"]
        wait_for(lambda: not [k for k in s3_sizes(s3, bucket, f"run/checkpoint-{n - 1}/")
                              if not is_protocol_key(k)] and any_complete_remote(), 60,
                 f"checkpoint-{n - 1} deleted remotely, checkpoint-{n} committed")
    pr.assert_clean(min_seen=5)
    pm.assert_clean(min_seen=2)
    ckptfs_sync(w)
    observer_settle()  # a listing made just before the sync may be reused
    assert sorted(os.listdir(o / "run")) == ["checkpoint-4"]
    assert_remote(s3, bucket, "run/checkpoint-4", ckpts[4])
    assert not [k for k in s3_sizes(s3, bucket) if "_checkpoint" in k]
    assert not pending_markers(s3, bucket)


@pytest.mark.timeout(150)
# s3rver replaces an object in place: a read during the replacement gets
# a cut body (doc/portability.md)
@pytest.mark.rgw_only
def test_latest_never_names_an_invisible_checkpoint(s3server, bucket, mount, tmp_path):
    """DeepSpeed: makedirs global_stepN, write the files, copy
    zero_to_fp32.py and chmod +x, then rewrite `latest` (O_TRUNC) with the
    name, three times.  Whenever `latest` names global_stepN -- read with
    boto3 or through another mount -- a look started afterwards finds
    global_stepN complete."""
    s3 = s3server.client()
    s3server.put(bucket, "run/")
    w = writer(mount, bucket, tmp_path, "w", "commit_delay=1")
    o = observer(mount, bucket, tmp_path)
    ckpts = {n: {"mp_rank_00_model_states.pt": det_bytes(800 + n, 3 * MiB + n),
                 "zero_pp_rank_0_mp_rank_00_optim_states.pt": det_bytes(810 + n, 4 * MiB),
                 "zero_to_fp32.py": b"#!/usr/bin/env python\n"}
             for n in (1, 2, 3)}
    seen = set()

    def check_remote():
        v = s3_get(s3, bucket, "run/latest")
        if v is None:
            return None
        n = int(v.decode().removeprefix("global_step"))
        seen.add(("remote", n))
        listing = s3_sizes(s3, bucket, "run/")
        if not remote_complete(listing, "run", f"global_step{n}", ckpts[n]):
            return f"latest names global_step{n}, not complete in the bucket"
        return None

    def check_mount():
        try:
            v = (o / "run/latest").read_bytes()
        except FileNotFoundError:
            return None
        n = int(v.decode().removeprefix("global_step"))
        seen.add(("mount", n))
        view = tree_view(o / "run" / f"global_step{n}")
        if view != {k: len(b) for k, b in ckpts[n].items()}:
            return f"latest names global_step{n}, the observer shows {view}"
        return None
    pr = Poller(check_remote)
    pm = Poller(check_mount)
    for n in (1, 2, 3):
        d = w / "run" / f"global_step{n}"
        os.makedirs(d)
        for rel, body in ckpts[n].items():
            write_slowly(d / rel, body, pause=0.01)
        os.chmod(d / "zero_to_fp32.py", 0o755)
        fd = os.open(w / "run/latest", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        os.write(fd, b"global_step%d" % n)
        os.close(fd)
        assert (w / "run/latest").read_bytes() == b"global_step%d" % n
        wait_for(lambda: s3_get(s3, bucket, "run/latest") == b"global_step%d" % n, 60,
                 f"latest = global_step{n} in the bucket")
        wait_for(lambda: {("mount", n), ("remote", n)} <= seen or pm.bad or pr.bad, 30,
                 f"the observer and the bucket poller reading latest = global_step{n}")
    pr.assert_clean(min_seen=5)
    pm.assert_clean(min_seen=2)
    assert {("remote", 3), ("mount", 3)} <= seen, seen
    st = os.stat(o / "run/global_step3/zero_to_fp32.py")
    assert st.st_mode & 0o777 == 0o755, oct(st.st_mode)


# --------------------------------------------------------------------------
# a file renamed over another, both just written at the top (single-file
# transactions committing on close; test_model's regression
# rename_over_just_written_file)

class SlowPuts:
    """A FaultProxy inspect hook: each PUT of a key named in `slow` waits
    `secs` before it is forwarded (once per key), and `seen` records the
    keys whose PUT arrived."""

    def __init__(self, slow, secs=2.0):
        self.slow, self.secs, self.seen = set(slow), secs, []

    def __call__(self, method, path, query, hdrs):
        if method == "PUT" and "uploadId" not in (query or ""):
            key = path.split("?")[0].rsplit("/", 1)[-1]
            self.seen.append(key)
            if key in self.slow:
                self.slow.discard(key)
                time.sleep(self.secs)
        return None


def proxied_writer(mount, bucket, tmp_path, proxy, name="w"):
    mp = tmp_path / f"mnt-{name}"
    mp.mkdir(exist_ok=True)
    argv = mount.argv(bucket, "", mp, [f"cache_dir={tmp_path}/cache-{name}",
                                       "commit_delay=3600"], endpoint=False)
    argv += ["--endpoint", proxy.endpoint, "--region", mount.s3.region]
    return mount(bucket, argv=argv, mountpoint=mp, timeout=60)


def unmount_in(proxy, w):
    """Unmounts w while its proxy still runs (what is pending commits)."""
    probs = w.unmount()
    assert not probs, probs


def assert_renamed_over(s3server, bucket, w, want):
    """The mount (right away and after a sync) and the bucket show f0 with
    the renamed file's bytes, and no f1."""
    names = sorted(os.listdir(w.path))
    assert names == ["f0"], f"mount right after the rename: {names}"
    assert (w.path / "f0").read_bytes() == want, "f0 right after the rename"
    ckptfs_sync(w.path)
    assert sorted(os.listdir(w.path)) == ["f0"], os.listdir(w.path)
    assert (w.path / "f0").read_bytes() == want, "f0 after the sync"
    assert user_keys(s3server.client(), bucket, "") == ["f0"]
    assert s3_get(s3server.client(), bucket, "f0") == want


@pytest.mark.timeout(120)
def test_rename_of_a_file_whose_put_is_in_flight(s3server, bucket, mount, tmp_path):
    """f1 closed (its commit starts), renamed to f0 while its PUT to f1 is
    on its way: what lands at f1 must go too (the mount left it there,
    and showed it again after the sync)."""
    from faultproxy import FaultProxy
    slow = SlowPuts({"f1"})
    new = det_bytes(701, 12260)
    with FaultProxy(s3server.endpoint, inspect=slow) as proxy:
        w = proxied_writer(mount, bucket, tmp_path, proxy)
        (w.path / "f1").write_bytes(new)
        wait_for(lambda: "f1" in slow.seen, 30, "the PUT of f1")
        os.rename(w.path / "f1", w.path / "f0")
        assert_renamed_over(s3server, bucket, w, new)
        unmount_in(proxy, w)


@pytest.mark.timeout(120)
def test_rename_of_a_file_rewritten_during_its_commit(s3server, bucket, mount, tmp_path):
    """f1 closed (its commit starts, the PUT on its way), rewritten and
    closed again, then renamed to f0: the first version, which lands at
    f1 after the rename, must go too (it stayed, and the mount showed it
    again: f1 with its first bytes)."""
    from faultproxy import FaultProxy
    slow = SlowPuts({"f1"})
    first, new = det_bytes(706, 12260), det_bytes(707, 1544)
    with FaultProxy(s3server.endpoint, inspect=slow) as proxy:
        w = proxied_writer(mount, bucket, tmp_path, proxy)
        (w.path / "f1").write_bytes(first)
        wait_for(lambda: "f1" in slow.seen, 30, "the PUT of f1")
        (w.path / "f1").write_bytes(new)
        os.rename(w.path / "f1", w.path / "f0")
        assert_renamed_over(s3server, bucket, w, new)
        unmount_in(proxy, w)


class GatedPuts:
    """A FaultProxy inspect hook: every PUT of the object f0 or f1 (with
    hints=True: of their metadata hints) waits until open() (at most
    60 s); `seen` records them as they arrive."""

    def __init__(self, hints=False):
        import threading
        self.gate, self.seen, self.hints = threading.Event(), [], hints

    def open(self):
        self.gate.set()

    def __call__(self, method, path, query, hdrs):
        key = path.split("?")[0].rsplit("/", 1)[-1]
        if method == "PUT" and key in ("f0", "f1") and \
                ("/.ckptfs-meta/" in path) == self.hints:
            self.seen.append(key)
            self.gate.wait(60)
        return None


@pytest.mark.timeout(180)
@pytest.mark.parametrize("hints,seeds", [(False, (702, 703)), (True, (710, 711))],
                         ids=["object_put", "hint_put"])
def test_rename_over_a_file_whose_commit_is_under_way(s3server, bucket, mount, tmp_path,
                                                       hints, seeds):
    """f1 then f0 closed (two single-file commits, in that order; f1's
    PUT on its way, f0's waiting for it), f1 renamed over f0: f0 ends
    with f1's bytes (the moved commit kept its place ahead of f0's own,
    and the old f0 landed last).  hint_put: f1 renamed while its commit
    PUTs its metadata hint (the step before its object): the commit then
    PUT f1's bytes at f0 ahead of f0's own commit, queued before it since
    the rename, and the old f0 landed last."""
    from faultproxy import FaultProxy
    gate = GatedPuts(hints=hints)
    src, old = det_bytes(seeds[0], 1544), det_bytes(seeds[1], 4193)
    with FaultProxy(s3server.endpoint, inspect=gate) as proxy:
        w = proxied_writer(mount, bucket, tmp_path, proxy)
        try:
            (w.path / "f1").write_bytes(src)
            (w.path / "f0").write_bytes(old)
            wait_for(lambda: "f1" in gate.seen, 30,
                     "the hint PUT of f1" if hints else "the PUT of f1")
            os.rename(w.path / "f1", w.path / "f0")
        finally:
            gate.open()
        assert_renamed_over(s3server, bucket, w, src)
        unmount_in(proxy, w)


@pytest.mark.timeout(120)
def test_rename_of_a_committed_file_over_one_committing(s3server, bucket, mount, tmp_path):
    """f1 committed, f0 closed with its PUT on its way: the rename is
    server-side, after f0's commit; the mount shows its result as soon as
    it returns (the remote path of the model's regression; it passed
    before the fixes above too)."""
    from faultproxy import FaultProxy
    slow = SlowPuts({"f0"})
    src, old = det_bytes(704, 1544), det_bytes(705, 4193)
    with FaultProxy(s3server.endpoint, inspect=slow) as proxy:
        w = proxied_writer(mount, bucket, tmp_path, proxy)
        (w.path / "f1").write_bytes(src)
        ckptfs_sync(w.path)
        assert sorted(os.listdir(w.path)) == ["f1"]
        (w.path / "f0").write_bytes(old)
        assert sorted(os.listdir(w.path)) == ["f0", "f1"]
        wait_for(lambda: "f0" in slow.seen, 30, "the PUT of f0")
        os.rename(w.path / "f1", w.path / "f0")
        assert_renamed_over(s3server, bucket, w, src)
        unmount_in(proxy, w)


@pytest.mark.timeout(120)
def test_rename_of_a_remote_file_just_rewritten(s3server, bucket, mount, tmp_path):
    """A remote file rewritten (its commit on close) and renamed at once:
    the new name shows the new bytes right away, the old name is gone
    (the old name's whiteout moved along with the file and hid it)."""
    old, new = det_bytes(708, 3000), det_bytes(709, 5000)
    s3server.put(bucket, "r1", old)
    w = writer(mount, bucket, tmp_path, "w", "commit_delay=3600")
    assert (w.path / "r1").read_bytes() == old
    (w.path / "r1").write_bytes(new)
    os.rename(w.path / "r1", w.path / "f0")
    assert_renamed_over(s3server, bucket, w, new)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("then", ["sync", "sigkill"])
def test_rename_of_a_remote_file_opened_for_writing_and_left_unchanged(
        s3server, bucket, mount, tmp_path, then):
    """A committed file opened for writing, written 0 bytes and closed (its
    copy for the write changed nothing, so it was never stored) beside a
    new directory, whose commit (sealed by the file after it, issue 21)
    the link slows: the file's empty transaction waits behind it, and the
    file is renamed meanwhile.  The new name keeps the bytes, on the mount,
    after a sync or a SIGKILL and the next mount, and in the bucket.
    Before, the old name's object was deleted and the new name never
    stored: the file was gone after the sync (model seed 8312)."""
    from faultproxy import FaultProxy
    old = det_bytes(710, 19887)
    s3server.put(bucket, "f1", old)
    # the directory's intent goes through, its commit takes 3 s
    slow_commit = helpers.SlowNth(
        lambda m, p, q: m == "PUT" and "/d/.ckptfs/manifest." in p)
    seen = slow_commit.seen

    with FaultProxy(s3server.endpoint, inspect=slow_commit) as proxy:
        w = proxied_writer(mount, bucket, tmp_path, proxy)
        (w.path / "d").mkdir()
        fd = os.open(w.path / "f1", os.O_WRONLY)
        try:
            assert os.pwrite(fd, b"", 9478) == 0
        finally:
            os.close(fd)
        os.rename(w.path / "f1", w.path / "f0")
        if then == "sigkill":
            kill_ckptfs(w)
            w = proxied_writer(mount, bucket, tmp_path, proxy)
        assert sorted(os.listdir(w.path)) == ["d", "f0"]
        assert (w.path / "f0").read_bytes() == old, "f0 after the rename"
        ckptfs_sync(w.path)
        assert sorted(os.listdir(w.path)) == ["d", "f0"], "after the sync"
        assert (w.path / "f0").read_bytes() == old, "f0 after the sync"
        assert len(seen) >= 2, "the directory's commit never came"
        unmount_in(proxy, w)
    assert user_keys(s3server.client(), bucket, "") == ["f0"]
    assert s3_get(s3server.client(), bucket, "f0") == old


@pytest.mark.timeout(180)
@pytest.mark.parametrize("then", ["run", "sigkill"])
def test_a_directory_moved_into_another_open_one_leaves_nothing_behind(
        s3server, bucket, mount, tmp_path, then):
    """mkdir c, a file written in it (its upload starts on close, under
    c/, which c's marker hides), mkdir f2, mv c f2/c: c's transaction is
    left with nothing and is cleaned up.  What it had uploaded under c/
    must go with its marker: before, it stayed (garbage of f2's
    transaction, not committed for an hour) and every host showed a plain
    directory c with the file (model seed 8511)."""
    s3 = s3server.client()
    body = det_bytes(711, 789)
    w = writer(mount, bucket, tmp_path, "w", "commit_delay=3600")
    (w.path / "c").mkdir()
    (w.path / "c" / "f0").write_bytes(body)
    wait_for(lambda: "c/f0" in s3_sizes(s3, bucket, "c/"), 30,
             "the upload of c/f0")
    (w.path / "f2").mkdir()
    os.rename(w.path / "c", w.path / "f2" / "c")
    if then == "sigkill":  # the clean-up is journaled: the next mount's
        kill_ckptfs(w)
        w = writer(mount, bucket, tmp_path, "w", "commit_delay=3600")
    assert sorted(os.listdir(w.path)) == ["f2"]
    wait_for(lambda: not [k for k in s3_sizes(s3, bucket, "")
                          if k.startswith("c/") or "-pending/c/" in k], 30,
             "c's keys gone (its objects, intent and marker)")
    o = observer(mount, bucket, tmp_path)
    assert "c" not in os.listdir(o.path)
    assert (w.path / "f2" / "c" / "f0").read_bytes() == body
    ckptfs_sync(w.path)
    wait_for(lambda: (o.path / "f2" / "c" / "f0").exists(), 10,
             "f2/c/f0 on the other host after the sync")
    assert (o.path / "f2" / "c" / "f0").read_bytes() == body
    assert sorted(os.listdir(o.path)) == ["f2"]


@pytest.mark.timeout(120)
def test_a_committed_directory_renamed_over_a_new_empty_one_changes_nothing(
        s3server, bucket, mount, tmp_path):
    """rename(2) of a committed directory into a directory not committed
    yet answers EXDEV (doc/posix.md: mv copies it).  Over an empty
    directory there, the refused rename must leave that one in place:
    before, the target was removed first and the rename then refused
    (model seed 8611)."""
    import errno
    w = writer(mount, bucket, tmp_path, "w", "commit_delay=3600")
    (w.path / "d" / "x").mkdir(parents=True)
    (w.path / "d" / "x" / "f").write_bytes(b"f" * 100)
    ckptfs_sync(w.path)
    (w.path / "n" / "c").mkdir(parents=True)
    with pytest.raises(OSError) as e:
        os.rename(w.path / "d" / "x", w.path / "n" / "c")
    assert e.value.errno == errno.EXDEV
    assert os.listdir(w.path / "n") == ["c"]
    assert os.listdir(w.path / "d" / "x") == ["f"]
    ckptfs_sync(w.path)
    o = observer(mount, bucket, tmp_path)
    assert os.listdir(o.path / "n") == ["c"]
    assert os.listdir(o.path / "d" / "x") == ["f"]


@pytest.mark.timeout(120)
def test_rename_inside_a_checkpoint_being_committed(s3server, bucket, mount,
                                                   tmp_path):
    """A rename of a file inside a checkpoint directory whose commit is on
    its way (sealed by `ckptfs commit`, its upload slowed by the link)
    waits for that commit and then renames the committed file, as a
    rename of a committed name waits for what is ahead of it; it answered
    EBUSY before.  Every host ends with the new name and the same bytes."""
    from faultproxy import FaultProxy

    def slow_uploads(method, path, query, hdrs):
        if method in ("PUT", "POST") and "/ckpt-1/a.pt" in path:
            time.sleep(1.5)
        return None
    data = det_bytes(41, 3 * MiB)
    with FaultProxy(s3server.endpoint, inspect=slow_uploads) as proxy:
        mp = tmp_path / "w"
        mp.mkdir()
        argv = mount.argv(bucket, "", mp, [f"cache_dir={tmp_path / 'c-w'}",
                                           "commit_delay=600"],
                          endpoint=False)
        argv += ["--endpoint", proxy.endpoint, "--region", s3server.region]
        w = mount(bucket, argv=argv, mountpoint=mp, timeout=60)
        (w / "ckpt-1").mkdir()
        (w / "ckpt-1" / "a.pt").write_bytes(data)
        (w / "ckpt-1" / "b.pt").write_bytes(b"b")
        c = subprocess.Popen([helpers.CKPTFS_BIN, "commit", str(w / "ckpt-1")])
        time.sleep(0.5)  # sealed, its upload held back by the link
        os.rename(w / "ckpt-1" / "a.pt", w / "ckpt-1" / "c.pt")
        assert c.wait(timeout=60) == 0
        assert sorted(os.listdir(w / "ckpt-1")) == ["b.pt", "c.pt"]
        assert (w / "ckpt-1" / "c.pt").read_bytes() == data
        ckptfs_sync(w)
    assert_remote(s3server.client(), bucket, "ckpt-1",
                  {"b.pt": b"b", "c.pt": data})
    o = observer(mount, bucket, tmp_path)
    assert sorted(os.listdir(o / "ckpt-1")) == ["b.pt", "c.pt"]


@pytest.mark.timeout(120)
def test_rename_of_a_file_committed_while_a_reader_holds_it(s3server, bucket, mount,
                                                           tmp_path):
    """A committed file stored again (utimensat), its commit done while a
    reader still holds it open, renamed over a committed file in another
    committed directory: the rename succeeds, the new name shows the bytes
    and the time set (it answered ENOENT: the node the reader held stayed
    in the overlay, and the rename asked the engine to move a transaction
    it had finished; model seed 7101, whose check's read was the reader)."""
    w = writer(mount, bucket, tmp_path, "w", "commit_delay=3600")
    body, old = det_bytes(7101, 7744), det_bytes(7102, 4790)
    (w / "c").mkdir()
    (w / "c" / "a").write_bytes(old)
    (w / "f0").mkdir(0o750)
    (w / "f0" / "f0").write_bytes(body)
    ckptfs_sync(w)
    t = 1575059477567046897
    os.utime(w / "f0" / "f0", ns=(t, t))
    fd = os.open(w / "f0" / "f0", os.O_RDONLY)
    try:
        ckptfs_sync(w)  # its commit done, the reader still there
        os.rename(w / "f0" / "f0", w / "c" / "a")
        assert os.pread(fd, 16, 0) == body[:16]
    finally:
        os.close(fd)
    assert os.listdir(w / "f0") == []
    assert (w / "c" / "a").read_bytes() == body
    assert os.stat(w / "c" / "a").st_mtime_ns == t
    ckptfs_sync(w)
    o = observer(mount, bucket, tmp_path)
    assert os.listdir(o / "f0") == []
    assert (o / "c" / "a").read_bytes() == body
    assert os.stat(o / "c" / "a").st_mtime_ns == t


def test_rm_then_mv_of_a_tracker_file_while_a_checkpoint_is_open(
        s3server, bucket, mount, tmp_path):
    """`rm latest; mv latest.tmp latest` (coreutils) while a checkpoint
    directory is still being written: the new `latest` shows at once on
    the writer and, once synced, on another mount, with its bytes.  The
    removal of the old one was queued behind the open checkpoint, its
    whiteout stayed at `latest` beside the file moved there and hid it:
    ls showed no `latest` (bench seed 7407)."""
    w = writer(mount, bucket, tmp_path, "w", "commit_delay=3600")
    (w / "latest").write_text("step-1\n")
    ckptfs_sync(w)
    (w / "step-2").mkdir()
    (w / "step-2" / "model.pt").write_bytes(det_bytes(7407, 50000))
    (w / "latest.tmp").write_text("step-2\n")
    subprocess.run(["rm", str(w / "latest")], check=True)
    subprocess.run(["mv", str(w / "latest.tmp"), str(w / "latest")],
                   check=True)
    assert (w / "latest").read_text() == "step-2\n"
    assert "latest" in os.listdir(w)
    assert "latest.tmp" not in os.listdir(w)
    ckptfs_sync(w)
    o = observer(mount, bucket, tmp_path)
    assert (o / "latest").read_text() == "step-2\n"
    assert (o / "step-2" / "model.pt").read_bytes() == det_bytes(7407, 50000)
    assert "latest.tmp" not in os.listdir(o)
