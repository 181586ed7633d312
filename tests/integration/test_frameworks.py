"""Issue 5: training code runs on ckptfs unmodified.

Every row of FRAMEWORKS.md, replayed call for call by a script in
frameworks/ (each one a separate program, like a training job), plus real
PyTorch (Debian's python3-torch) through contrib/examples/train_resume.py.

Each "host" is its own ckptfs mount with its own cache directory.  The
reference for "complete and byte-identical" is the same script run on a
local directory: the tree another host sees must equal it exactly (files,
sizes, SHA-256, exec bits, symlinks, directories; nothing more, nothing
less), and the framework's own find-latest logic must pick the same
checkpoint and read the same bytes the framework's way (sequential, preads,
private mmap).  While a save runs and commits, another host runs that
find-latest-and-load logic in a loop: it may find an older checkpoint or
none, never an incomplete one.

Run: /usr/bin/python3 -m pytest tests/integration/test_frameworks.py (root).
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import helpers
from helpers import clean_env, run, wait_until

HERE = Path(__file__).resolve().parent
FW = HERE / "frameworks"
EXAMPLE = HERE.parent.parent / "contrib" / "examples" / "train_resume.py"
PY = "/usr/bin/python3"   # Debian's python3-torch lives there
sys.path.insert(0, str(FW))
from _common import tree  # noqa: E402

# script -> the checkpoint its find-latest must pick after saving 100,200 + 300
REPLAY = {
    "adaptdl": "checkpoint-300",
    "orbax": "300",
    "safetensors_save": 300,
    "deepspeed": "global_step300",
    "megatron": "iter_0000300",
    "tensorflow": "ckpt-300",
    "lightning": "epoch=0-step=300.ckpt",
    "hf_trainer": "checkpoint-300",
    "ray_train": "checkpoint_000300",
    "dcp": "step-300",
}
VISIBLE_TIMEOUT = 45.0   # commit_delay + upload + listing cache, generously


def env_for(tmp_path):
    tmpdir = tmp_path / "tmpdir"        # $TMPDIR on local disk (Lightning's EXDEV)
    tmpdir.mkdir(exist_ok=True)
    env = clean_env()
    env.update(TMPDIR=str(tmpdir), PYTHONDONTWRITEBYTECODE="1", LC_ALL="C.UTF-8",
               OMP_NUM_THREADS="1")
    return env


def script(tmp_path, name, *args, timeout=120, check=True):
    p = run([PY, FW / f"{name}.py", *args], env=env_for(tmp_path), timeout=timeout,
            check=check)
    if not check:
        return p
    return json.loads(p.stdout.strip().splitlines()[-1])


def ckptfs(*args, timeout=120):
    return run([helpers.CKPTFS_BIN, *args], timeout=timeout)


def host(mount, bucket, tmp_path, name, *options):
    """A mount standing for one host: its own cache directory."""
    cache = tmp_path / f"cache-{name}"
    cache.mkdir(exist_ok=True)
    opts = [f"cache_dir={cache}"]
    for o in options:
        if helpers.ckptfs_supports(o.split("=", 1)[0] + "="):
            opts.append(o)
    return mount(bucket, options=tuple(opts))


def sync(m):
    ckptfs("sync", m.path, timeout=150)


class Prober:
    """Runs `SCRIPT load ROOT` in a loop on another host until stopped:
    every run must succeed (latest: an older one, the new one or none; never
    an incomplete or torn one), with one exception that a local disk has
    too: the checkpoint a run picked from its listing is deleted by the
    rotation before the run opens it (listdir, then open of a file of a
    checkpoint the trainer removed in between: FileNotFoundError).  Here
    that window is a listing's age (dir_timeout, doc/architecture.md), so
    it is excused once per name, and only when the name is then gone on
    this host within entry_timeout; a second run sent to the same deleted
    name, or a name that stays, is a failure."""

    def __init__(self, tmp_path, name, root):
        self.args = (tmp_path, name, "load", str(root))
        self.root = Path(root)
        self.failures, self.seen, self.excused = [], [], []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)
        self._t.start()

    def _loop(self):
        while not self._stop.is_set():
            p = script(*self.args, check=False)
            if p.returncode != 0:
                gone = self._deleted_under_us(p.stderr)
                if gone and gone not in self.excused:
                    self.excused.append(gone)
                else:
                    self.failures.append(helpers.tail(p.stderr, 8))
            else:
                latest = json.loads(p.stdout.strip().splitlines()[-1]).get("latest")
                if not self.seen or self.seen[-1] != latest:
                    self.seen.append(latest)
            time.sleep(0.05)

    def _deleted_under_us(self, stderr):
        """The name under ROOT a failed run's FileNotFoundError was for
        (a checkpoint directory or file), when it is gone on this host
        within a second (the kernel's entry_timeout); else None."""
        last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
        pre = "FileNotFoundError: [Errno 2] No such file or directory: '"
        if not last.startswith(pre):
            return None
        try:
            rel = Path(last[len(pre):].rstrip("'")).relative_to(self.root)
        except ValueError:
            return None
        top = self.root / rel.parts[0]
        if not helpers.wait_until(lambda: not os.path.lexists(top), 1.5):
            return None
        return rel.parts[0]

    def stop(self):
        self._stop.set()
        self._t.join(60)
        return self.failures


@pytest.mark.timeout(150)
@pytest.mark.parametrize("name", sorted(REPLAY))
def test_framework_replay(name, s3server, bucket, mount, tmp_path):
    # Reference: the same program on local disk.
    ref = tmp_path / "ref" / "run"
    ref.mkdir(parents=True)
    script(tmp_path, name, "save", ref, "--steps", "100,200")
    script(tmp_path, name, "save", ref, "--steps", "300")
    want_tree = tree(ref)
    want_load = script(tmp_path, name, "load", ref)
    assert want_load["latest"] == REPLAY[name]

    # The output directory exists already (an earlier run made it).
    s3server.put(bucket, "run/")
    a = host(mount, bucket, tmp_path, "A", "commit_delay=1")
    b = host(mount, bucket, tmp_path, "B")
    prober = Prober(tmp_path, name, b / "run")
    try:
        out1 = script(tmp_path, name, "save", a / "run", "--steps", "100,200")
        out2 = script(tmp_path, name, "save", a / "run", "--steps", "300")  # a restarted job
        if name == "lightning":
            assert out1["exdev"] and out2["exdev"], \
                "the move from $TMPDIR to the mount should have crossed filesystems"
        # the writer sees its own checkpoint at once
        assert tree(a / "run") == want_tree
        assert script(tmp_path, name, "load", a / "run") == want_load
        # another host: without any sync, idle transactions commit
        # (commit_delay) and renames/closes commit at once
        deadline = time.monotonic() + VISIBLE_TIMEOUT
        while True:
            p = script(tmp_path, name, "load", b / "run", check=False)
            got = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else None
            if got and got.get("latest") == REPLAY[name]:
                break
            assert time.monotonic() < deadline, (
                f"another host does not see {REPLAY[name]} {VISIBLE_TIMEOUT:.0f}s after the "
                f"save returned (no sync): last load said {got or helpers.tail(p.stderr, 5)}; "
                f"seen so far {prober.seen}")
            time.sleep(0.25)
        sync(a)
    finally:
        failures = prober.stop()
    assert not failures, (f"another host found an incomplete checkpoint while the save "
                          f"ran ({len(failures)} times):\n" + "\n---\n".join(failures[:3]))
    assert got == want_load
    kept = set(os.listdir(a / "run"))
    assert not kept & set(prober.excused), (
        f"a run failed on {sorted(kept & set(prober.excused))}, which the job did not delete")
    # complete and byte-identical, nothing left over (temp files, rotated
    # checkpoints, temp dirs): poll past the listing cache
    def settled():
        # a name deleted a moment ago may still be in B's dentry cache
        # (entry_timeout): it then vanishes between listing and reading
        try:
            return tree(b / "run") == want_tree
        except FileNotFoundError:
            return False
    assert wait_until(settled, 10), _tree_diff(tree(b / "run"), want_tree)
    # a third host with an empty cache, after everything committed
    c = host(mount, bucket, tmp_path, "C")
    assert tree(c / "run") == want_tree
    assert script(tmp_path, name, "load", c / "run") == want_load


def _tree_diff(got, want):
    lines = []
    for k in sorted(got.keys() | want.keys()):
        if got.get(k) != want.get(k):
            lines.append(f"  {k}: mount {got.get(k, 'MISSING')} / local {want.get(k, 'MISSING')}")
    return "tree differs from the local reference:\n" + "\n".join(lines[:30])


@pytest.mark.timeout(150)
def test_dcp_two_writer_hosts(s3server, bucket, mount, tmp_path):
    """torch.distributed.checkpoint across two hosts: each writes its own
    __R_0.distcp and fsyncs it; the coordinator writes .metadata.tmp and
    renames it to .metadata after both finished.  A third host sees the
    directory only complete, .metadata included."""
    s3server.put(bucket, "dcp/")
    # a long commit_delay: commits come from the explicit syncs only, as
    # in a real save where the coordinator finishes right after the barrier
    a = host(mount, bucket, tmp_path, "A", "commit_delay=60")
    b = host(mount, bucket, tmp_path, "B", "commit_delay=60")
    c = host(mount, bucket, tmp_path, "C")
    seen, stop = [], threading.Event()

    def watch():
        while not stop.is_set():
            try:
                names = sorted(os.listdir(c / "dcp"))
                if "step-100" in names:
                    d = c / "dcp" / "step-100"
                    seen.append({n: os.stat(d / n).st_size for n in os.listdir(d)})
            except FileNotFoundError:
                pass
            time.sleep(0.05)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    try:
        run([PY, FW / "dcp.py", "rank", a / "dcp", "100", "0"], env=env_for(tmp_path))
        run([PY, FW / "dcp.py", "rank", b / "dcp", "100", "1"], env=env_for(tmp_path))
        sync(b)   # host B is done and committed; host A's part is pending
        time.sleep(2.0)   # past C's listing cache
        assert "step-100" not in os.listdir(c / "dcp"), \
            "the checkpoint is visible while host A has not committed"
        run([PY, FW / "dcp.py", "finish", a / "dcp", "100"], env=env_for(tmp_path))
        sync(a)
        assert wait_until(lambda: "step-100" in os.listdir(c / "dcp"), 10), \
            "the checkpoint is not visible after both hosts committed"
        time.sleep(0.3)
    finally:
        stop.set()
        t.join(10)
    rank_size = 1_000_000 + 3 * 100   # dcp.TENSORS at step 100
    assert seen, "the watcher never saw the checkpoint"
    for view in seen:
        assert sorted(view) == [".metadata", "__0_0.distcp", "__1_0.distcp"], \
            f"third host saw an incomplete checkpoint: {view}"
        assert view["__0_0.distcp"] == view["__1_0.distcp"] == rank_size and view[".metadata"] > 0, \
            f"third host saw an incomplete checkpoint: {view}"
    res = script(tmp_path, "dcp", "load", c / "dcp")
    assert res["latest"] == "step-100" and len(res["read"]) == 6


READER = r"""
import hashlib, os, sys, time
path, flag = sys.argv[1], sys.argv[2]
h = hashlib.sha256()
n = 0
with open(path, "rb") as f:
    while True:
        b = f.read(1 << 20)
        if not b:
            break
        h.update(b)
        n += len(b)
        if n == 8 << 20:
            print("reading", flush=True)
            while not os.path.exists(flag):   # training deletes the file meanwhile
                time.sleep(0.05)
        time.sleep(0.005)
print(n, h.hexdigest(), flush=True)
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("where", ["same-mount", "same-host-other-mount"])
def test_rotation_while_reading(where, s3server, bucket, mount, tmp_path):
    """An evaluation job on the training host reads an old checkpoint
    slowly while training saves a new one and deletes the old one: the
    reader gets every byte."""
    s3server.put(bucket, "run/")
    a = host(mount, bucket, tmp_path, "A")
    data = helpers.det_bytes("rot", 32 << 20)
    old = a / "run" / "checkpoint-1"
    old.mkdir()
    (old / "model.pt").write_bytes(data)
    sync(a)
    if where == "same-mount":
        r = a
    else:   # another ckptfs on this host, sharing its cache directory
        r = mount(bucket, options=(f"cache_dir={tmp_path / 'cache-A'}",))
    flag = tmp_path / "deleted"
    reader = subprocess.Popen([PY, "-c", READER, str(r / "run" / "checkpoint-1" / "model.pt"), str(flag)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env_for(tmp_path))
    try:
        assert reader.stdout.readline().strip() == "reading", reader.stderr.read()
        new = a / "run" / "checkpoint-2"
        new.mkdir()
        (new / "model.pt").write_bytes(helpers.det_bytes("rot2", 1 << 20))
        shutil.rmtree(old)
        sync(a)
        assert not s3server.keys(bucket, "run/checkpoint-1/"), "the deletion did not reach the bucket"
        assert not (a / "run" / "checkpoint-1").exists()
        assert reader.poll() is None
        flag.touch()
        out, err = reader.communicate(timeout=60)
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
    assert reader.returncode == 0, err
    assert out.split() == [str(len(data)), helpers.sha256_bytes(data)]


@pytest.mark.timeout(120)
def test_ray_per_reader_deletion_locks(s3server, bucket, mount, tmp_path):
    """Ray's Checkpoint.as_directory(): two readers on one host share a
    temp copy of the checkpoint; each holds a `.del_lock_<pid>`; the first
    to finish leaves the copy to the other, the last one removes it."""
    s3server.put(bucket, "run/")
    a = host(mount, bucket, tmp_path, "A")
    script(tmp_path, "ray_train", "save", a / "run", "--steps", "100,200")
    sync(a)
    tmp_parent = a / "ray-tmp"
    tmp_parent.mkdir()
    cmd = [PY, FW / "ray_train.py", "read", a / "run", tmp_parent]
    r1 = subprocess.Popen([str(x) for x in cmd + ["3"]], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=env_for(tmp_path))
    try:
        ready = json.loads(r1.stdout.readline() or "{}")
        assert ready, r1.stderr.read()
        out2 = run([str(x) for x in cmd + ["0.1"]], env=env_for(tmp_path)).stdout.splitlines()
        done2 = json.loads(out2[-1])
        assert not done2["removed"] and done2["remaining"] == [ready["lock"]]
        assert os.path.isdir(ready["ready"]) and os.path.exists(ready["lock"])
        out1, err1 = r1.communicate(timeout=60)
    finally:
        if r1.poll() is None:
            r1.kill()
            r1.wait()
    assert r1.returncode == 0, err1
    done1 = json.loads(out1.splitlines()[-1])
    assert done1["removed"] and done1["read"] == done2["read"]
    assert os.listdir(tmp_parent) == []
    sync(a)
    b = host(mount, bucket, tmp_path, "B")
    assert not (b / "ray-tmp").exists() or os.listdir(b / "ray-tmp") == []
    assert script(tmp_path, "ray_train", "load", b / "run")["latest"] == "checkpoint_000200"


@pytest.mark.timeout(170)
def test_pytorch_train_kill_resume_on_another_host(s3server, bucket, mount, tmp_path):
    """Real PyTorch: contrib/examples/train_resume.py trains, saves
    checkpoint-N/ every 5 steps, keeps the last 2, and is killed (SIGKILL);
    on another host (own mount, own cache) the latest complete checkpoint is
    found by listing, loaded with torch.load and through a private mmap, and
    equals a model trained locally to the same step; training resumes there,
    rotates away host A's checkpoints, and host A then sees the final state."""
    if not Path(PY).exists() or run([PY, "-c", "import torch"], check=False).returncode:
        pytest.fail("python3-torch is needed (apt-get install python3-torch; "
                    "contrib/install-deps.sh installs it)")
    s3server.put(bucket, "run/")
    a = host(mount, bucket, tmp_path, "A")
    env = env_for(tmp_path)
    trainer = subprocess.Popen(
        [PY, str(EXAMPLE), str(a / "run"), "--steps", "40", "--save-every", "5",
         "--keep", "2", "--step-sleep", "0.05"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines = []
    try:
        for line in trainer.stdout:
            lines.append(line.strip())
            if line.startswith("saved checkpoint-15 "):
                break
        trainer.send_signal(signal.SIGKILL)
    finally:
        if trainer.poll() is None:
            trainer.kill()
        trainer.wait()
    assert "saved checkpoint-15" in " ".join(lines), \
        f"trainer output: {lines}\n{trainer.stderr.read()}"
    sync(a)   # the job died; its closed files still commit

    b = host(mount, bucket, tmp_path, "B")
    chk = json.loads(run([PY, FW / "torch_save.py", "check", b / "run"], env=env,
                         timeout=120).stdout.splitlines()[-1])
    assert chk["step"] >= 15, chk
    complete = [c for c in chk["checkpoints"] if c[2]]
    assert len(complete) <= 2, f"rotation kept more than 2: {chk['checkpoints']}"
    sys.stderr.write(f"[torch] host B loaded {chk['latest']}; mmap load: {chk['mmap_load']}\n")

    res = run([PY, str(EXAMPLE), str(b / "run"), "--steps", "50", "--save-every", "5",
               "--keep", "2"], env=env, timeout=120).stdout.splitlines()
    assert res[0] == f"resumed from {chk['latest']}", res
    assert res[-1] == "done at step 50", res
    sync(b)
    # host A (its own cache and listing) sees host B's final state
    final = None
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        final = json.loads(run([PY, FW / "torch_save.py", "check", a / "run"], env=env,
                               timeout=120).stdout.splitlines()[-1])
        if final["checkpoints"] == [[50, "checkpoint-50", True], [45, "checkpoint-45", True]]:
            break
        time.sleep(0.5)
    assert final["checkpoints"] == [[50, "checkpoint-50", True], [45, "checkpoint-45", True]], final
