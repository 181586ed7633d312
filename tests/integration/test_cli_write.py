"""`ckptfs commit`, `ckptfs sync` and the pending transactions of `ckptfs
status` against a writable mount.

A writing mount W (commit_delay=600, so a directory commits only when a
command or another trigger says so) and an observing mount O (read-only,
its own cache, no listing or attribute caching: what another host sees
right now).  Each test uses its own names.  What the commands promise is
checked the moment they return, without waiting: `ckptfs commit PATH`
returns once PATH's transaction is visible to O and in the bucket,
`ckptfs sync W` once everything written through W is."""
import json
import os
import pty
import subprocess
import time

import pytest

from helpers import CKPTFS_BIN, det_bytes, read_pty, run

MiB = 1 << 20
PFX = "pfx"


def listdir(path):
    try:
        return sorted(os.listdir(path))
    except FileNotFoundError:
        return None


def s3_objects(s3server, bucket, prefix):
    """{key: bytes} under prefix, ckptfs' own keys left out."""
    c = s3server.client()
    out = {}
    for key in s3server.keys(bucket, prefix):
        if any(p.startswith(".ckptfs") for p in key.split("/")):
            continue
        out[key] = c.get_object(Bucket=bucket, Key=key)["Body"].read()
    return out


def markers(s3server, bucket, child=None):
    ks = [k for k in s3server.keys(bucket, PFX + "/")
          if "/.ckptfs-pending/" in "/" + k]
    if child is not None:
        ks = [k for k in ks if f".ckptfs-pending/{child}/" in k]
    return ks


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


@pytest.fixture
def mounts(s3server, bucket, mount, tmp_path):
    w = mount(bucket, PFX, options=["commit_delay=600"])
    o = mount(bucket, PFX, options=[
        "ro", f"cache_dir={tmp_path / 'observer-cache'}", "dir_timeout=0",
        "entry_timeout=0", "attr_timeout=0"])
    return w, o


def ckptfs(*args, timeout=180, check=False):
    return run([CKPTFS_BIN, *[str(a) for a in args]], timeout=timeout,
               check=check)


# --------------------------------------------------------------------------
# commit

def test_commit_dir_is_visible_when_it_returns(s3server, bucket, mounts):
    w, o = mounts
    files = {"model.pt": det_bytes(1, 3 * MiB + 11),
             "optim.pt": det_bytes(2, 20 * MiB + 3),
             "sub/rng.pth": b"rng state"}
    for rel, data in files.items():
        write(w.path / "ckpt-1" / rel, data)
    write(w.path / "ckpt-2" / "model.pt", b"not committed")
    time.sleep(1.5)
    assert "ckpt-1" not in (listdir(o.path) or []), \
        "commit_delay=600: nothing may be visible before the command"
    p = ckptfs("commit", w.path / "ckpt-1")
    assert p.returncode == 0, p.stderr
    assert "committed" in p.stdout and "ckpt-1" in p.stdout, p.stdout
    # visible to another host and in the bucket, now
    assert "ckpt-1" in listdir(o.path)
    for rel, data in files.items():
        assert (o.path / "ckpt-1" / rel).read_bytes() == data, rel
    got = s3_objects(s3server, bucket, f"{PFX}/ckpt-1/")
    assert got == {f"{PFX}/ckpt-1/{r}": d for r, d in files.items()}
    assert markers(s3server, bucket, "ckpt-1") == []
    ls = s3server.aws("s3", "ls", "--recursive", f"s3://{bucket}/{PFX}/ckpt-1/")
    for rel in files:
        assert f"{PFX}/ckpt-1/{rel}" in ls.stdout, ls.stdout
    # only what was asked for: ckpt-2 still waits for its commit_delay
    assert "ckpt-2" not in listdir(o.path)
    assert markers(s3server, bucket, "ckpt-2"), "ckpt-2 lost its marker"


def test_commit_a_file_commits_its_transaction(s3server, bucket, mounts):
    w, o = mounts
    write(w.path / "ckpt-3" / "model.pt", det_bytes(3, MiB))
    write(w.path / "ckpt-3" / "config.json", b"{}")
    p = ckptfs("commit", w.path / "ckpt-3" / "model.pt")
    assert p.returncode == 0, p.stderr
    assert sorted(listdir(o.path / "ckpt-3")) == ["config.json", "model.pt"]
    assert (o.path / "ckpt-3" / "model.pt").read_bytes() == det_bytes(3, MiB)


def test_commit_of_the_mount_root_commits_everything(s3server, bucket, mounts):
    w, o = mounts
    write(w.path / "ckpt-4" / "a", b"a")
    write(w.path / "ckpt-5" / "b", b"b")
    p = ckptfs("commit", w.path)
    assert p.returncode == 0, p.stderr
    assert {"ckpt-4", "ckpt-5"} <= set(listdir(o.path))
    assert markers(s3server, bucket) == []


def test_commit_when_nothing_is_pending(s3server, bucket, mounts):
    w, o = mounts
    write(w.path / "ckpt-6" / "a", b"a")
    assert ckptfs("commit", w.path / "ckpt-6").returncode == 0
    p = ckptfs("commit", w.path / "ckpt-6")
    assert p.returncode == 0, p.stderr
    assert "nothing pending" in p.stdout, p.stdout


def test_commit_errors(s3server, bucket, mounts, tmp_path):
    w, o = mounts
    p = ckptfs("commit", w.path / "no-such-dir")
    assert p.returncode == 1 and p.stderr.startswith("ckptfs: "), p.stderr
    (tmp_path / "plain").mkdir()
    p = ckptfs("commit", tmp_path / "plain")
    assert p.returncode == 1 and p.stderr.startswith("ckptfs: "), p.stderr
    p = ckptfs("commit", o.path)
    assert p.returncode == 1 and "read-only" in p.stderr, p.stderr
    p = ckptfs("commit")
    assert p.returncode == 2 and "usage" in p.stderr, p.stderr


# --------------------------------------------------------------------------
# sync

def test_sync_returns_when_everything_is_in_the_bucket(s3server, bucket, mounts):
    w, o = mounts
    files = {f"ckpt-7/shard-{i}.pt": det_bytes(10 + i, 2 * MiB + i)
             for i in range(6)}
    files["ckpt-7/big.pt"] = det_bytes(20, 40 * MiB + 1)
    files["latest"] = b"ckpt-7"
    for rel, data in files.items():
        write(w.path / rel, data)
    p = ckptfs("sync", w.path)
    assert p.returncode == 0, p.stderr
    assert "visible" in p.stdout, p.stdout
    got = s3_objects(s3server, bucket, f"{PFX}/")
    for rel, data in files.items():
        assert got.get(f"{PFX}/{rel}") == data, rel
    assert markers(s3server, bucket) == []
    assert (o.path / "latest").read_bytes() == b"ckpt-7"
    assert sorted(listdir(o.path / "ckpt-7")) == sorted(
        r.split("/", 1)[1] for r in files if r.startswith("ckpt-7/"))
    # a path inside the mount names the mount too
    p = ckptfs("sync", w.path / "ckpt-7")
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("committed_first", [False, True],
                         ids=["new", "committed_first"])
@pytest.mark.parametrize("passthrough", [True, False],
                         ids=["passthrough", "no_passthrough"])
def test_sync_includes_a_file_whose_release_comes_after_close(
        s3server, bucket, mount, tmp_path, passthrough, committed_first):
    """close() returns at FUSE's flush; the release that ends the handle
    comes asynchronously, and a `ckptfs sync` run right after close() can
    arrive first.  It must still commit what was closed.  The release is
    held back here by a child that inherited the descriptor and closes it
    0.5 s after the parent's close: before, a sync without passthrough
    sealed nothing (the file's transaction still counted the handle as
    open) and returned 0 with the file on no other host."""
    opts = ["commit_delay=600"] + ([] if passthrough else ["no_passthrough"])
    w = mount(bucket, PFX, options=opts)
    data = det_bytes(41, 3 * MiB + 5)
    (w / "ckpt-9").mkdir()
    fd = os.open(w / "ckpt-9" / "model.pt", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, data[:MiB])
    if committed_first:  # then written on, and changed: a new transaction
        ckptfs("commit", w / "ckpt-9", check=True)
        os.chmod(w / "ckpt-9" / "model.pt", 0o604)
    os.write(fd, data[MiB:])
    r, wr = os.pipe()
    pid = os.fork()
    if pid == 0:  # holds its copy of fd until told, then closes it
        os.close(wr)
        os.read(r, 1)
        time.sleep(0.5)
        os.close(fd)
        os._exit(0)
    os.close(r)
    os.close(fd)  # flush: the parent's close returns
    os.close(wr)  # the child closes 0.5 s from now: the release
    p = ckptfs("sync", w)
    os.waitpid(pid, 0)
    assert p.returncode == 0, p.stderr
    got = s3_objects(s3server, bucket, f"{PFX}/ckpt-9/")
    assert got == {f"{PFX}/ckpt-9/model.pt": data}
    assert markers(s3server, bucket) == []
    mode = s3server.client().head_object(
        Bucket=bucket, Key=f"{PFX}/ckpt-9/model.pt")["Metadata"].get("mode")
    if committed_first:
        assert mode is None or int(mode, 8) & 0o7777 == 0o604, mode


def test_sync_draws_a_progress_bar_on_a_terminal(s3server, bucket, mount, tmp_path):
    """`ckptfs sync` on a terminal draws a bar redrawn in place (\\r) while
    it waits.  The writer's link holds every upload of the file 1.5 s
    (fault proxy), so the sync takes several of the bar's one-second ticks
    on any machine; 16 MiB is enough (it was 256 MiB on a fast link and
    asserted the bar only when the sync happened to last 3 s)."""
    from faultproxy import FaultProxy

    def slow_uploads(method, path, query, hdrs):
        if method in ("PUT", "POST") and "/ckpt-8/big.pt" in path:
            time.sleep(1.5)
        return None
    data = det_bytes(30, 16 * MiB)
    with FaultProxy(s3server.endpoint, inspect=slow_uploads) as proxy:
        mp = tmp_path / "w-slow"
        mp.mkdir()
        argv = mount.argv(bucket, PFX, mp, [f"cache_dir={tmp_path / 'c-slow'}",
                                            "commit_delay=600"], endpoint=False)
        argv += ["--endpoint", proxy.endpoint, "--region", s3server.region]
        w = mount(bucket, argv=argv, mountpoint=mp, timeout=60)
        write(w.path / "ckpt-8" / "big.pt", data)
        master, slave = pty.openpty()
        proc = subprocess.Popen([CKPTFS_BIN, "sync", str(w.path)],
                                stdout=subprocess.PIPE, stderr=slave)
        os.close(slave)
        out = proc.communicate(timeout=120)[0].decode()
        tty = read_pty(master)
        assert proc.returncode == 0, tty.decode(errors="replace")
        assert "visible" in out, out
        assert b"sync [" in tty and b"\r" in tty, tty[-500:]
        assert s3_objects(s3server, bucket, f"{PFX}/ckpt-8/") == {
            f"{PFX}/ckpt-8/big.pt": data}


def test_sync_of_a_read_only_mount(s3server, bucket, mounts):
    w, o = mounts
    p = ckptfs("sync", o.path)
    assert p.returncode == 0, p.stderr
    assert "read-only" in p.stdout, p.stdout


def test_sync_errors(tmp_path):
    p = ckptfs("sync", tmp_path)
    assert p.returncode == 1 and p.stderr.startswith("ckptfs: "), p.stderr
    p = ckptfs("sync", tmp_path / "missing")
    assert p.returncode == 1 and p.stderr.startswith("ckptfs: "), p.stderr


# --------------------------------------------------------------------------
# status

def test_status_lists_pending_transactions(s3server, bucket, mounts):
    w, o = mounts
    write(w.path / "ckpt-9" / "model.pt", det_bytes(40, 5 * MiB))
    write(w.path / "ckpt-9" / "optim.pt", det_bytes(41, 3 * MiB))
    p = ckptfs("status", w.path, check=True)
    assert "pending transactions" in p.stdout, p.stdout
    assert "ckpt-9" in p.stdout, p.stdout
    section = p.stdout.split("pending transactions", 1)[1]
    assert "state" in section and "uploaded" in section and "rate" in section
    j = json.loads(ckptfs("status", w.path, "--json", check=True).stdout)
    assert j["writable"] is True
    mine = [t for t in j["pending"] if t["path"] == "ckpt-9"]
    assert len(mine) == 1, j["pending"]
    t = mine[0]
    for k in ("state", "bytes_done", "bytes_total", "rate_bytes_per_s"):
        assert k in t, t
    assert t["bytes_total"] == 8 * MiB, t
    assert 0 <= t["bytes_done"] <= t["bytes_total"]
    # once synced nothing is pending
    assert ckptfs("sync", w.path).returncode == 0
    p = ckptfs("status", w.path, check=True)
    assert p.stdout.split("pending transactions", 1)[1].strip().startswith("none"), p.stdout
    assert json.loads(ckptfs("status", w.path, "--json", check=True).stdout)["pending"] == []


def test_status_of_a_read_only_mount(s3server, bucket, mounts):
    w, o = mounts
    p = ckptfs("status", o.path, check=True)
    assert "pending transactions  none (read-only mount)" in p.stdout, p.stdout
    j = json.loads(ckptfs("status", o.path, "--json", check=True).stdout)
    assert j["writable"] is False and j["pending"] is None
