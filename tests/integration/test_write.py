"""Writing through the mount (issue 4): every call through the programs and
Python calls that training code uses, read back through the writing mount
before and after the upload, then compared byte for byte with what is in
the bucket (boto3, the AWS CLI) and with what a second mount with its own
cache shows (another host's view).

One writing mount W of s3://BUCKET/pfx (commit_delay=600: directory
transactions commit only on a trigger; the tests use `ckptfs sync W`,
which returns once everything written is visible) and one observing mount
O (read-only, own cache, no listing or attribute caching) serve the tests
of this module; each test uses its own names.  Files that exist only
remotely ("remote-only": never read through W) are uploaded with the AWS
CLI before W is mounted."""

import errno
import fcntl
import json
import mmap
import os
import random
import shutil
import stat
import struct
import tempfile
import time
from pathlib import Path

import pytest

from helpers import (ckptfs_sync, det_bytes, is_protocol_key, local_tree,
                     observer_options, observer_settle, pending_markers, run, s3_get, s3_sizes,
                     sha256_bytes, tree_view, wait_for)

MiB = 1 << 20
PFX = "pfx"

# Remote-only files, uploaded by `aws s3 cp --recursive` before the mount.
# 9 MiB and more: the AWS CLI uploads them as multipart objects.
REMOTE = {
    "remote/dd-remote-only.bin": det_bytes(101, 9 * MiB + 7),
    "remote/dd-cached.bin": det_bytes(102, 9 * MiB + 7),
    "remote/append-remote-only.txt": b"".join(b"step %d\n" % i for i in range(50000)),
    "remote/append-cached.txt": b"".join(b"iter %d\n" % i for i in range(50000)),
    "remote/pyrw-remote-only.bin": det_bytes(103, 3 * MiB + 5),
    "remote/latest": b"global_step1",
    "remote/trunc.bin": det_bytes(104, 2 * MiB + 1),
    "remote/shrink-then-append.bin": det_bytes(105, 1 * MiB),
    "remote/unlink-me.bin": det_bytes(106, 4096),
    "remote/tree/a.bin": det_bytes(107, 100),
    "remote/tree/sub/b.bin": det_bytes(108, 200),
    "remote/tree/sub/deeper/c.bin": det_bytes(109, 300),
    "remote/mv-src.bin": det_bytes(110, MiB + 1),
    "remote/mv-dst.bin": det_bytes(111, 77),
    "remote/cross/from/file.bin": det_bytes(112, 5000),
    "remote/cross/to/other.bin": b"other",
    "remote/olddir/model.pt": det_bytes(113, 2 * MiB + 9),
    "remote/olddir/optim.pt": det_bytes(114, 3 * MiB),
    "remote/olddir/nested/rng.pth": b"rng",
    "remote/model.safetensors": det_bytes(115, 2 * MiB),
    "remote/chmod-me.bin": b"chmod me",
    "remote/progress.txt": b"iteration 100\n",
}
REMOTE_DIRS = ["remote/emptydir/", "remote/fsync/"]


def differ(got, want):
    """Where got first departs from want, for a failure's message."""
    n = min(len(got), len(want))
    at = next((i for i in range(0, n, 4096) if got[i:i + 4096] != want[i:i + 4096]), None)
    if at is None:
        return f"same first {n} bytes, {len(got)} vs {len(want)}"
    end = next((i for i in range(n - 4096 if n > 4096 else 0, at, -4096)
                if got[i:i + 4096] != want[i:i + 4096]), at)
    return f"first differing 4 KiB block at {at}, last at {end}"


class Env:
    """The module's bucket and mounts, and the checks shared by the tests."""

    def __init__(self, s3server, bucket, w, o, tmp):
        self.s3server = s3server
        self.c = s3server.client()
        self.bucket = bucket
        self.w = w
        self.o = o
        self.tmp = tmp

    def key(self, rel):
        return f"{PFX}/{rel}"

    def remote(self, rel):
        return s3_get(self.c, self.bucket, self.key(rel))

    def aws_bytes(self, rel):
        """The object's bytes as `aws s3 cp` downloads them."""
        dst = Path(tempfile.mkdtemp(dir=self.tmp)) / "obj"
        self.s3server.aws("s3", "cp", "--only-show-errors",
                          f"s3://{self.bucket}/{self.key(rel)}", str(dst))
        return dst.read_bytes()

    def sync(self):
        """ckptfs sync W: afterwards everything written is visible, and no
        pending marker is left in the bucket."""
        ckptfs_sync(self.w)
        observer_settle()
        left = pending_markers(self.c, self.bucket)
        assert not left, f"pending markers left after ckptfs sync: {left}"

    def assert_file(self, rel, body, aws=False):
        """rel holds exactly body through W, in the bucket and through O
        (call after sync)."""
        want = sha256_bytes(body)
        got = (self.w / rel).read_bytes()
        if sha256_bytes(got) != want:
            r = self.remote(rel)
            pytest.fail(f"{rel}: W reads {len(got)} other bytes "
                        f"({differ(got, body)}); the bucket's "
                        f"{'are right' if r == body else 'differ too: ' + differ(r or b'', body)}")
        r = self.remote(rel)
        assert r is not None, f"{self.key(rel)} not in the bucket"
        assert sha256_bytes(r) == want, \
            f"{rel}: the bucket holds {len(r)} bytes, {len(body)} expected"
        if aws:
            assert sha256_bytes(self.aws_bytes(rel)) == want, f"{rel}: aws s3 cp differs"
        assert os.stat(self.o / rel).st_size == len(body), rel
        got = (self.o / rel).read_bytes()
        assert sha256_bytes(got) == want, f"{rel}: O reads {len(got)} other bytes"

    def assert_gone(self, rel):
        """rel exists nowhere: not through W, not as an object (nor under it
        as a prefix), not through O."""
        assert not os.path.lexists(self.w / rel), f"{rel} still shown by W"
        left = [k for k in s3_sizes(self.c, self.bucket, self.key(rel))
                if k == self.key(rel) or k.startswith(self.key(rel) + "/")]
        assert not left, f"objects of {rel} left in the bucket: {left}"
        assert not os.path.lexists(self.o / rel), f"{rel} still shown by O"


@pytest.fixture(scope="module")
def env(s3server, module_mounter, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("write")
    src = tmp / "src"
    for rel, body in REMOTE.items():
        p = src / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(body)
    b = s3server.new_bucket("write")
    s3server.aws("s3", "cp", "--recursive", "--only-show-errors", str(src),
                 f"s3://{b}/{PFX}/")
    for d in REMOTE_DIRS:
        s3server.put(b, f"{PFX}/{d}")
    w = module_mounter(b, PFX, options=(f"cache_dir={tmp}/cache-w",
                                        "commit_delay=600"))
    o = module_mounter(b, PFX, options=observer_options(tmp / "cache-o"))
    return Env(s3server, b, w, o, tmp)


def read_through_w(env, rel):
    """Reads rel whole through W (it lands in W's read cache)."""
    return (env.w / rel).read_bytes()


# --------------------------------------------------------------------------
# create, write, read back

def test_create_write_close_reads_back_and_commits_on_close(env):
    """A new file outside any new directory is a single-file transaction:
    it reads back at once through W and reaches the bucket after close
    without any trigger."""
    body = det_bytes(1, 3 * MiB + 1)
    with open(env.w / "single.bin", "wb", buffering=0) as f:
        for i in range(0, len(body), 65536):
            f.write(body[i:i + 65536])
    st = os.stat(env.w / "single.bin")
    assert stat.S_ISREG(st.st_mode) and st.st_size == len(body)
    assert (env.w / "single.bin").read_bytes() == body, "read back before the upload"
    wait_for(lambda: env.remote("single.bin") == body, 60,
             "single.bin in the bucket after close")
    assert env.aws_bytes("single.bin") == body
    assert (env.o / "single.bin").read_bytes() == body
    assert (env.w / "single.bin").read_bytes() == body, "read back after the upload"


def test_cp_r_of_a_tree(env, tmp_path):
    """cp -r of a local tree (nested directories, an empty file, an empty
    directory) into the mount: the same tree through W at once, and after
    the commit in the bucket and through O; .ckptfs names never shown."""
    src = tmp_path / "tree"
    files = {"model.pt": det_bytes(2, 2 * MiB + 3), "empty.bin": b"",
             "cfg/config.json": b'{"lr": 0.1}\n',
             "shards/a/0.bin": det_bytes(3, 70000), "shards/a/1.bin": det_bytes(4, 1)}
    for rel, body in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(body)
    (src / "emptydir").mkdir()
    run(["cp", "-r", src, env.w / "cptree"])
    got, dirs = local_tree(env.w / "cptree")
    assert got == files
    assert dirs == {"cfg", "shards", "shards/a", "emptydir"}
    env.sync()
    for rel, body in files.items():
        env.assert_file(f"cptree/{rel}", body)
    assert tree_view(env.o / "cptree") == {k: len(v) for k, v in files.items()}
    assert os.listdir(env.o / "cptree/emptydir") == []
    for m in (env.w, env.o):
        assert not [n for n in os.listdir(m / "cptree") if n.startswith(".ckptfs")]
        assert not [n for n in os.listdir(m.path) if n.startswith(".ckptfs")]
    user = {k for k in s3_sizes(env.c, env.bucket, env.key("cptree/"))
            if not is_protocol_key(k)}
    assert {env.key(f"cptree/{r}") for r in files} <= user
    assert user - {env.key(f"cptree/{r}") for r in files} <= {
        env.key("cptree/"), env.key("cptree/emptydir/"), env.key("cptree/cfg/"),
        env.key("cptree/shards/"), env.key("cptree/shards/a/")}, user


def test_random_and_sequential_writes(env):
    """Sequential writes, then pwrite at random offsets (some past EOF,
    leaving holes), reads through the same and another handle between
    writes: the bytes always equal a model kept in memory."""
    rng = random.Random(5)
    model = bytearray(det_bytes(6, 2 * MiB))
    p = env.w / "random.bin"
    fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        for i in range(0, len(model), 1 << 17):
            assert os.write(fd, model[i:i + (1 << 17)]) == min(1 << 17, len(model) - i)
        for n in range(200):
            off = rng.randrange(0, len(model) + 300000)
            data = rng.randbytes(rng.randrange(1, 70000))
            assert os.pwrite(fd, data, off) == len(data)
            if off > len(model):
                model.extend(b"\0" * (off - len(model)))
            model[off:off + len(data)] = data
            if n % 40 == 0:
                assert os.pread(fd, len(model) + 10, 0) == model
                assert p.read_bytes() == model
    finally:
        os.close(fd)
    assert os.stat(p).st_size == len(model)
    assert p.read_bytes() == model
    env.sync()
    env.assert_file("random.bin", bytes(model))


# --------------------------------------------------------------------------
# overwrite and append of existing files

@pytest.mark.parametrize("mode", ["remote-only", "cached"])
def test_dd_conv_notrunc_patches_a_remote_file(env, mode, tmp_path):
    """dd conv=notrunc into the middle of a 9 MiB multipart object: the
    result is the old bytes with the patch in place, byte for byte."""
    rel = f"remote/dd-{mode}.bin"
    old = REMOTE[rel]
    if mode == "cached":
        assert read_through_w(env, rel) == old
    patch = det_bytes(7, 3 * 4096 + 11)
    pf = tmp_path / "patch"
    pf.write_bytes(patch)
    off = 1000 * 4096
    run(["dd", f"if={pf}", f"of={env.w / rel}", "bs=4096", f"seek={off // 4096}",
         "conv=notrunc", "status=none"])
    want = old[:off] + patch + old[off + len(patch):]
    assert os.stat(env.w / rel).st_size == len(old)
    assert (env.w / rel).read_bytes() == want, "read back before the upload"
    env.sync()
    env.assert_file(rel, want, aws=True)


@pytest.mark.parametrize("mode", ["remote-only", "cached"])
def test_append_to_a_remote_file(env, mode):
    """>> from the shell and open('ab') from Python (Megatron's progress
    file): old bytes + new bytes, exactly."""
    rel = f"remote/append-{mode}.txt"
    old = REMOTE[rel]
    if mode == "cached":
        assert read_through_w(env, rel) == old
    run(["sh", "-c", f"printf 'appended by sh\\n' >> '{env.w / rel}'"])
    with open(env.w / rel, "ab") as f:
        f.write(b"appended by python\n")
    want = old + b"appended by sh\nappended by python\n"
    assert (env.w / rel).read_bytes() == want
    env.sync()
    env.assert_file(rel, want)


def test_o_append_from_two_handles(env):
    """Two O_APPEND handles on one file: every write lands at the end."""
    p = env.w / "remote/progress.txt"
    a = os.open(p, os.O_WRONLY | os.O_APPEND)
    b = os.open(p, os.O_WRONLY | os.O_APPEND)
    try:
        for i in range(5):
            os.write(a, b"a%d\n" % i)
            os.write(b, b"b%d\n" % i)
    finally:
        os.close(a)
        os.close(b)
    want = REMOTE["remote/progress.txt"] + b"".join(
        b"a%d\nb%d\n" % (i, i) for i in range(5))
    assert p.read_bytes() == want
    env.sync()
    env.assert_file("remote/progress.txt", want)


def test_read_modify_write_of_a_remote_only_file(env):
    """open r+b on a file never read through W, overwrite a range in the
    middle and extend it: old prefix + new bytes + old rest + extension."""
    rel = "remote/pyrw-remote-only.bin"
    old = REMOTE[rel]
    with open(env.w / rel, "r+b") as f:
        f.seek(MiB + 3)
        f.write(b"X" * 5000)
        f.seek(0, os.SEEK_END)
        f.write(b"tail")
    want = old[:MiB + 3] + b"X" * 5000 + old[MiB + 3 + 5000:] + b"tail"
    assert (env.w / rel).read_bytes() == want
    env.sync()
    env.assert_file(rel, want, aws=True)


def test_o_trunc_rewrites_in_place(env):
    """DeepSpeed rewrites `latest` with O_TRUNC; torch.save opens with
    O_TRUNC: the file holds exactly the new, shorter bytes."""
    p = env.w / "remote/latest"
    assert p.read_bytes() == b"global_step1"
    fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
    try:
        assert os.fstat(fd).st_size == 0
        os.write(fd, b"step2")
    finally:
        os.close(fd)
    assert p.read_bytes() == b"step2"
    run(["sh", "-c", f"echo global_step3 > '{p}'"])
    assert p.read_bytes() == b"global_step3\n"
    env.sync()
    env.assert_file("remote/latest", b"global_step3\n")


def test_truncate_and_ftruncate(env):
    """truncate(1) shrinking and extending a remote file, ftruncate of a new
    file to its final size before the writes (safetensors)."""
    p = env.w / "remote/trunc.bin"
    old = REMOTE["remote/trunc.bin"]
    run(["truncate", "-s", "1000", p])
    assert p.read_bytes() == old[:1000]
    run(["truncate", "-s", "5000", p])
    assert p.read_bytes() == old[:1000] + b"\0" * 4000
    os.truncate(p, 3000)
    assert p.read_bytes() == old[:1000] + b"\0" * 2000

    q = env.w / "remote/shrink-then-append.bin"
    with open(q, "r+b") as f:
        f.truncate(100)
        f.seek(0, os.SEEK_END)
        f.write(b"after")
    want_q = REMOTE["remote/shrink-then-append.bin"][:100] + b"after"

    body = det_bytes(8, 3 * MiB + 17)
    n = env.w / "ftrunc.bin"
    fd = os.open(n, os.O_CREAT | os.O_WRONLY, 0o600)
    try:
        os.ftruncate(fd, len(body))
        assert os.fstat(fd).st_size == len(body)
        for i in range(0, len(body), MiB):
            os.write(fd, body[i:i + MiB])
    finally:
        os.close(fd)
    env.sync()
    env.assert_file("remote/trunc.bin", old[:1000] + b"\0" * 2000)
    env.assert_file("remote/shrink-then-append.bin", want_q)
    env.assert_file("ftrunc.bin", body)


def test_fallocate(env):
    """fallocate(1) and posix_fallocate give the file its size (zeros),
    later writes land inside it."""
    p = env.w / "falloc.bin"
    run(["fallocate", "-l", str(2 * MiB), p])
    assert os.stat(p).st_size == 2 * MiB
    assert p.read_bytes() == b"\0" * (2 * MiB)
    fd = os.open(env.w / "pfalloc.bin", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.posix_fallocate(fd, 0, MiB + 5)
        os.pwrite(fd, b"middle", 4096)
    finally:
        os.close(fd)
    want = b"\0" * 4096 + b"middle" + b"\0" * (MiB + 5 - 4096 - 6)
    assert (env.w / "pfalloc.bin").read_bytes() == want
    env.sync()
    env.assert_file("falloc.bin", b"\0" * (2 * MiB))
    env.assert_file("pfalloc.bin", want)


# --------------------------------------------------------------------------
# directories, unlink, rename, symlink

def test_mkdir_rmdir_and_empty_directories(env):
    """mkdir -p makes directories that survive empty (a name/ marker);
    rmdir removes new and remote empty directories; a non-empty directory
    refuses rmdir."""
    run(["mkdir", "-p", env.w / "mk/a/b/c"])
    assert stat.S_ISDIR(os.stat(env.w / "mk/a/b/c").st_mode)
    os.rmdir(env.w / "mk/a/b/c")
    assert os.listdir(env.w / "mk/a/b") == []
    with pytest.raises(OSError) as ei:
        os.rmdir(env.w / "mk/a")
    assert ei.value.errno == errno.ENOTEMPTY
    with pytest.raises(OSError) as ei:
        os.mkdir(env.w / "mk/a")
    assert ei.value.errno == errno.EEXIST
    assert os.listdir(env.w / "remote/emptydir") == []
    os.rmdir(env.w / "remote/emptydir")
    assert not os.path.exists(env.w / "remote/emptydir")
    env.sync()
    assert os.listdir(env.o / "mk/a/b") == []
    assert not os.path.exists(env.o / "mk/a/b/c")
    assert env.c.head_object(Bucket=env.bucket, Key=env.key("mk/a/b/"))["ContentLength"] == 0
    env.assert_gone("mk/a/b/c")
    env.assert_gone("remote/emptydir")


def test_unlink_and_rm_r_of_remote_files(env):
    run(["rm", env.w / "remote/unlink-me.bin"])
    run(["rm", "-r", env.w / "remote/tree"])
    for rel in ("remote/unlink-me.bin", "remote/tree"):
        assert not os.path.exists(env.w / rel), rel
    assert "tree" not in os.listdir(env.w / "remote")
    with pytest.raises(FileNotFoundError):
        os.unlink(env.w / "remote/unlink-me.bin")
    env.sync()
    env.assert_gone("remote/unlink-me.bin")
    env.assert_gone("remote/tree")


def test_unlink_of_a_new_file_and_of_an_open_file(env):
    """A new file removed before any commit never reaches the bucket; a
    file unlinked while open stays readable through the open handle."""
    (env.w / "gone-before-commit").mkdir()
    (env.w / "gone-before-commit/x.bin").write_bytes(b"x" * 1000)
    os.unlink(env.w / "gone-before-commit/x.bin")
    (env.w / "unlinked-open.bin").write_bytes(b"still here")
    fd = os.open(env.w / "unlinked-open.bin", os.O_RDONLY)
    try:
        os.unlink(env.w / "unlinked-open.bin")
        assert not os.path.exists(env.w / "unlinked-open.bin")
        assert os.pread(fd, 100, 0) == b"still here"
    finally:
        os.close(fd)
    env.sync()
    assert os.listdir(env.o / "gone-before-commit") == []
    env.assert_gone("gone-before-commit/x.bin")
    env.assert_gone("unlinked-open.bin")


def test_remove_and_rewrite_while_the_first_upload_runs(env):
    """A file removed while its upload runs and written again at once
    (Lightning's save_last link replaced, a tracker rewritten): the upload
    of the removed version, finishing late, must not delete the object of
    the new one.  Many names at once, so uploads overlap."""
    d = env.w / "rewrite"
    d.mkdir()
    env.sync()  # d committed: each file below is its own transaction
    names = [f"f{i:02d}" for i in range(16)]
    for rnd in range(2):
        for n in names:
            (d / n).write_bytes(f"{n} round {rnd}".encode() * 2000)
        for n in names:
            os.remove(d / n)
            (d / n).write_bytes(f"{n} final {rnd}".encode() * 1000)
        env.sync()
        for n in names:
            env.assert_file(f"rewrite/{n}", f"{n} final {rnd}".encode() * 1000)
    # inside a new directory (one transaction, files uploaded in
    # parallel): a slow first version removed and replaced by a small one
    # while it uploads must not land over the small one
    nd = env.w / "rewrite-new"
    nd.mkdir()
    for i, n in enumerate(names[:8]):
        (nd / n).write_bytes(det_bytes(700 + i, 3 * MiB))
        os.remove(nd / n)
        (nd / n).write_bytes(f"{n} small".encode())
    env.sync()
    for n in names[:8]:
        env.assert_file(f"rewrite-new/{n}", f"{n} small".encode())


def test_rename_file_over_an_existing_target(env):
    """mv of a remote file over another remote file, os.replace of a new
    file over a remote file: the target holds the source's bytes, the source
    name is gone, remotely too."""
    src_body = REMOTE["remote/mv-src.bin"]
    run(["mv", env.w / "remote/mv-src.bin", env.w / "remote/mv-dst.bin"])
    assert not os.path.exists(env.w / "remote/mv-src.bin")
    assert (env.w / "remote/mv-dst.bin").read_bytes() == src_body
    (env.w / "remote/new-over.tmpx").write_bytes(b"new bytes")
    os.replace(env.w / "remote/new-over.tmpx", env.w / "remote/mv-dst.bin")
    assert (env.w / "remote/mv-dst.bin").read_bytes() == b"new bytes"
    env.sync()
    env.assert_file("remote/mv-dst.bin", b"new bytes")
    env.assert_gone("remote/mv-src.bin")
    env.assert_gone("remote/new-over.tmpx")


def test_rename_across_directories(env):
    """A remote file moved into another remote directory; a new file moved
    out of a new directory (TensorFlow's *_temp directory); shutil.move."""
    run(["mv", env.w / "remote/cross/from/file.bin", env.w / "remote/cross/to/file.bin"])
    os.mkdir(env.w / "tf_temp")
    body = det_bytes(9, 100000)
    (env.w / "tf_temp/part.tempstate123").write_bytes(body)
    os.rename(env.w / "tf_temp/part.tempstate123", env.w / "remote/cross/to/model.data-00000-of-00001")
    os.rmdir(env.w / "tf_temp")
    shutil.move(str(env.w / "remote/cross/to/other.bin"), str(env.w / "remote/cross/from/other.bin"))
    assert sorted(os.listdir(env.w / "remote/cross/to")) == ["file.bin", "model.data-00000-of-00001"]
    assert os.listdir(env.w / "remote/cross/from") == ["other.bin"]
    env.sync()
    env.assert_file("remote/cross/to/file.bin", REMOTE["remote/cross/from/file.bin"])
    env.assert_file("remote/cross/to/model.data-00000-of-00001", body)
    env.assert_file("remote/cross/from/other.bin", b"other")
    env.assert_gone("remote/cross/from/file.bin")
    env.assert_gone("remote/cross/to/other.bin")
    env.assert_gone("tf_temp")
    assert not [k for k in s3_sizes(env.c, env.bucket) if "tempstate" in k]


def test_rename_of_a_remote_directory(env):
    """mv of a committed directory: every file under the new name, byte for
    byte; nothing left under the old name."""
    old = {k[len("remote/olddir/"):]: v for k, v in REMOTE.items()
           if k.startswith("remote/olddir/")}
    run(["mv", env.w / "remote/olddir", env.w / "remote/newdir"])
    assert not os.path.exists(env.w / "remote/olddir")
    assert tree_view(env.w / "remote/newdir") == {k: len(v) for k, v in old.items()}
    env.sync()
    for rel, body in old.items():
        env.assert_file(f"remote/newdir/{rel}", body)
    env.assert_gone("remote/olddir")


def test_rename_of_a_new_directory_over_an_empty_one(env):
    os.makedirs(env.w / "rdir/src/sub")
    (env.w / "rdir/src/sub/f.bin").write_bytes(b"f" * 3000)
    (env.w / "rdir/src/g.bin").write_bytes(b"g")
    os.mkdir(env.w / "rdir/dst")
    os.mkdir(env.w / "rdir/full")
    (env.w / "rdir/full/x").write_bytes(b"x")
    with pytest.raises(OSError) as ei:
        os.rename(env.w / "rdir/src", env.w / "rdir/full")
    assert ei.value.errno in (errno.ENOTEMPTY, errno.EEXIST)
    os.rename(env.w / "rdir/src", env.w / "rdir/dst")
    assert tree_view(env.w / "rdir/dst") == {"sub/f.bin": 3000, "g.bin": 1}
    env.sync()
    env.assert_file("rdir/dst/sub/f.bin", b"f" * 3000)
    env.assert_file("rdir/dst/g.bin", b"g")
    env.assert_gone("rdir/src")


def test_symlink_and_readlink(env):
    """ln -s, readlink, reading through the link; Lightning's
    save_last='link' replaces the link: the new target shows remotely."""
    (env.w / "links").mkdir()
    (env.w / "links/epoch=1.ckpt").write_bytes(b"one")
    (env.w / "links/epoch=2.ckpt").write_bytes(b"two")
    run(["ln", "-s", "epoch=1.ckpt", env.w / "links/last.ckpt"])
    assert os.readlink(env.w / "links/last.ckpt") == "epoch=1.ckpt"
    assert (env.w / "links/last.ckpt").read_bytes() == b"one"
    os.remove(env.w / "links/last.ckpt")
    os.symlink("epoch=2.ckpt", env.w / "links/last.ckpt")
    os.symlink("/absolute/elsewhere", env.w / "links/dangling")
    assert stat.S_ISLNK(os.lstat(env.w / "links/last.ckpt").st_mode)
    assert (env.w / "links/last.ckpt").read_bytes() == b"two"
    env.sync()
    for m in (env.w, env.o):
        assert os.readlink(m / "links/last.ckpt") == "epoch=2.ckpt", m
        assert os.readlink(m / "links/dangling") == "/absolute/elsewhere", m
        assert stat.S_ISLNK(os.lstat(m / "links/last.ckpt").st_mode), m
    assert (env.o / "links/last.ckpt").read_bytes() == b"two"


# --------------------------------------------------------------------------
# frameworks' patterns

def test_safetensors_tempfile_ftruncate_rename_over(env):
    """safetensors: NamedTemporaryFile in the target's directory (0600, a
    *tmp* name), ftruncate to the final size, 1 MiB writes, rename over the
    existing file.  The temp name never reaches the bucket."""
    body = det_bytes(10, 4 * MiB + 99)
    f = tempfile.NamedTemporaryFile(dir=env.w / "remote", delete=False)
    tmpname = os.path.basename(f.name)
    assert "tmp" in tmpname
    try:
        assert stat.S_IMODE(os.fstat(f.fileno()).st_mode) == 0o600
        os.ftruncate(f.fileno(), len(body))
        for i in range(0, len(body), MiB):
            f.write(body[i:i + MiB])
    finally:
        f.close()
    os.replace(f.name, env.w / "remote/model.safetensors")
    assert (env.w / "remote/model.safetensors").read_bytes() == body
    env.sync()
    env.assert_file("remote/model.safetensors", body)
    env.assert_gone(f"remote/{tmpname}")
    assert not [k for k in s3_sizes(env.c, env.bucket) if tmpname in k]


def test_lightning_shutil_move_from_local_disk(env, tmp_path):
    """Lightning saves to $TMPDIR and shutil.move()s: EXDEV, copy2 (copystat:
    utime, chmod) then chmod 0666 & ~umask.  Bytes, mode and mtime arrive."""
    src = tmp_path / "epoch=3.ckpt"
    body = det_bytes(11, MiB + 123)
    src.write_bytes(body)
    os.chmod(src, 0o600)
    os.utime(src, ns=(1_600_000_000_000_000_000, 1_650_000_000_000_000_000))
    dst = env.w / "lightning"
    dst.mkdir()
    shutil.move(str(src), str(dst / "epoch=3.ckpt"))
    os.chmod(dst / "epoch=3.ckpt", 0o644)
    st = os.stat(dst / "epoch=3.ckpt")
    assert int(st.st_mtime) == 1_650_000_000 and stat.S_IMODE(st.st_mode) == 0o644
    env.sync()
    env.assert_file("lightning/epoch=3.ckpt", body)
    st = os.stat(env.o / "lightning/epoch=3.ckpt")
    assert int(st.st_mtime) == 1_650_000_000, st
    assert stat.S_IMODE(st.st_mode) == 0o644, oct(st.st_mode)


# --------------------------------------------------------------------------
# attributes

def test_chmod_chown_utime_are_kept_remotely(env):
    """chmod (DeepSpeed's chmod +x of zero_to_fp32.py), chown and utimens
    on a new and on a remote-only file: another mount shows them."""
    p = env.w / "attrs.py"
    p.write_bytes(b"#!/usr/bin/env python3\n")
    run(["chmod", "+x", p])
    os.chown(p, 1234, 5678)
    os.utime(p, ns=(1_700_000_000_000_000_000, 1_700_000_123_000_000_000))
    r = env.w / "remote/chmod-me.bin"
    os.chmod(r, 0o600)
    os.utime(r, (1_600_000_000, 1_600_000_000))
    for path, mode, owner, mtime in ((p, 0o755, (1234, 5678), 1_700_000_123),
                                     (r, 0o600, (0, 0), 1_600_000_000)):
        st = os.stat(path)
        assert stat.S_IMODE(st.st_mode) == mode, (path, oct(st.st_mode))
        assert (st.st_uid, st.st_gid) == owner, path
        assert int(st.st_mtime) == mtime, path
    env.sync()
    env.assert_file("remote/chmod-me.bin", REMOTE["remote/chmod-me.bin"])
    for rel, mode, owner, mtime in (("attrs.py", 0o755, (1234, 5678), 1_700_000_123),
                                    ("remote/chmod-me.bin", 0o600, (0, 0), 1_600_000_000)):
        st = os.stat(env.o / rel)
        assert stat.S_IMODE(st.st_mode) == mode, (rel, oct(st.st_mode))
        assert (st.st_uid, st.st_gid) == owner, (rel, st.st_uid, st.st_gid)
        assert int(st.st_mtime) == mtime, (rel, st.st_mtime)


def test_user_xattrs(env):
    """setxattr/getxattr/listxattr/removexattr of user.* names on a new
    file; the values (bytes) reach another mount."""
    p = env.w / "xattr.bin"
    p.write_bytes(b"payload")
    os.setxattr(p, "user.step", b"100")
    os.setxattr(p, "user.blob", b"\x00\xff\x01binary")
    os.setxattr(p, "user.gone", b"x")
    os.removexattr(p, "user.gone")
    assert os.getxattr(p, "user.step") == b"100"
    assert os.getxattr(p, "user.blob") == b"\x00\xff\x01binary"
    assert sorted(a for a in os.listxattr(p) if a.startswith("user.")) == ["user.blob", "user.step"]
    with pytest.raises(OSError) as ei:
        os.getxattr(p, "user.gone")
    assert ei.value.errno == errno.ENODATA
    with pytest.raises(OSError) as ei:
        os.setxattr(p, "user.step", b"again", os.XATTR_CREATE)
    assert ei.value.errno == errno.EEXIST
    env.sync()
    env.assert_file("xattr.bin", b"payload")
    q = env.o / "xattr.bin"
    assert os.getxattr(q, "user.step") == b"100"
    assert os.getxattr(q, "user.blob") == b"\x00\xff\x01binary"
    assert sorted(a for a in os.listxattr(q) if a.startswith("user.")) == ["user.blob", "user.step"]


# --------------------------------------------------------------------------
# flush, fsync, fsyncdir, locks

def test_fsync_of_a_file_stores_it_fsync_of_the_directory_commits(env):
    """In a new directory (W's commit_delay is 600 s): fsync(file) returns
    once the file's bytes are in the bucket under their final key, while the
    directory stays invisible to O; fsync(directory) returns once O shows
    it whole."""
    d = env.w / "remote/fsync/ckpt-1"
    os.mkdir(d)
    bodies = {"a.bin": det_bytes(12, 6 * MiB + 1), "b.bin": det_bytes(13, 1000)}
    for name, body in bodies.items():
        fd = os.open(d / name, os.O_CREAT | os.O_WRONLY, 0o644)
        try:
            os.write(fd, body)
            os.fsync(fd)
            key = env.key(f"remote/fsync/ckpt-1/{name}")
            got = s3_get(env.c, env.bucket, key)
            assert got is not None and sha256_bytes(got) == sha256_bytes(body), \
                f"fsync returned before {key} was stored"
        finally:
            os.close(fd)
    assert "ckpt-1" not in os.listdir(env.o / "remote/fsync"), \
        "the directory is visible before anything committed it"
    assert pending_markers(env.c, env.bucket, env.key("remote/")), \
        "no pending marker for the open transaction"
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    observer_settle()
    assert tree_view(env.o / "remote/fsync/ckpt-1") == {k: len(v) for k, v in bodies.items()}
    for name, body in bodies.items():
        assert (env.o / "remote/fsync/ckpt-1" / name).read_bytes() == body
    assert not pending_markers(env.c, env.bucket, env.key("remote/fsync/"))


def test_ofd_locks_and_flock_work_locally(env):
    """Orbax takes an OFD byte-range lock on <key>.__lock; other tools use
    flock: conflicting locks are refused, released locks can be taken, and
    the file's bytes are untouched."""
    p = env.w / "locks.__lock"
    p.write_bytes(b"0" * 4096)
    a = os.open(p, os.O_RDWR)
    b = os.open(p, os.O_RDWR)
    try:
        def ofd(fd, typ, start, length):
            # struct flock: l_type, l_whence, l_start, l_len, l_pid (0 for OFD)
            arg = struct.pack("@hhqqi4x", typ, os.SEEK_SET, start, length, 0)
            fcntl.fcntl(fd, fcntl.F_OFD_SETLK, arg)
        ofd(a, fcntl.F_WRLCK, 0, 100)
        with pytest.raises(OSError) as ei:
            ofd(b, fcntl.F_WRLCK, 50, 10)
        assert ei.value.errno in (errno.EAGAIN, errno.EACCES)
        ofd(b, fcntl.F_WRLCK, 100, 100)  # no overlap
        ofd(a, fcntl.F_UNLCK, 0, 100)
        ofd(b, fcntl.F_WRLCK, 50, 10)
        ofd(b, fcntl.F_UNLCK, 0, 0)

        fcntl.flock(a, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert run(["flock", "-n", p, "true"], check=False).returncode != 0
        with pytest.raises(OSError) as ei:
            fcntl.flock(b, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert ei.value.errno in (errno.EAGAIN, errno.EWOULDBLOCK)
        fcntl.flock(a, fcntl.LOCK_UN)
        assert run(["flock", "-n", p, "true"], check=False).returncode == 0
    finally:
        os.close(a)
        os.close(b)
    os.rename(p, env.w / "locked.key")
    env.sync()
    env.assert_file("locked.key", b"0" * 4096)
    env.assert_gone("locks.__lock")


def test_close_of_a_dup_flushes_and_writing_goes_on(env):
    """Each close of a dup'ed descriptor is a flush; writes through the
    other descriptor go on after it, and the file ends up whole."""
    p = env.w / "dup.bin"
    body = det_bytes(14, 2 * MiB)
    fd = os.open(p, os.O_CREAT | os.O_WRONLY, 0o644)
    fd2 = os.dup(fd)
    os.write(fd, body[:MiB])
    os.close(fd)  # flush with fd2 still open
    os.write(fd2, body[MiB:])
    os.close(fd2)
    assert p.read_bytes() == body
    env.sync()
    env.assert_file("dup.bin", body)


def test_writes_after_fsync_and_through_a_shared_mapping(env):
    """Writes the kernel passes straight to the staging file: fsync stores
    the bytes written so far (the bucket holds exactly them when fsync
    returns), writes after it and through a MAP_SHARED mapping that
    outlives close() still reach the bucket, byte for byte."""
    # in a new directory: files of a directory transaction are stored
    # under their final keys (a single file's PUT would be its commit,
    # which waits for its turn in the queue)
    os.mkdir(env.w / "mapped")
    p = env.w / "mapped/mapped.bin"
    first = det_bytes(15, 3 * MiB)
    fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.write(fd, first)
        os.fsync(fd)
        got = s3_get(env.c, env.bucket, env.key("mapped/mapped.bin"))
        assert got is not None and sha256_bytes(got) == sha256_bytes(first), \
            "fsync returned before the bytes written so far were stored"
        os.write(fd, b"tail after fsync")
        m = mmap.mmap(fd, len(first), mmap.MAP_SHARED,
                      mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)
    m[MiB:MiB + 12] = b"via mmap!!!!"  # after close: the mapping lives on
    m.flush()
    m.close()
    want = bytearray(first + b"tail after fsync")
    want[MiB:MiB + 12] = b"via mmap!!!!"
    assert p.read_bytes() == want
    env.sync()
    env.assert_file("mapped/mapped.bin", bytes(want))


def test_rename_right_after_close_commits_every_byte(env):
    """adaptdl/Orbax: write files into a temporary directory, close, and
    rename it at once.  The commit the rename triggers holds every file
    whole, though the kernel reports each close to ckptfs asynchronously."""
    for rnd in range(3):
        tmp = env.w / f"renamed-{rnd}.tmp"
        os.mkdir(tmp)
        bodies = {f"shard-{i}.bin": det_bytes(40 + rnd * 8 + i, MiB + i)
                  for i in range(6)}
        for name, body in bodies.items():
            with open(tmp / name, "wb") as f:
                f.write(body)
        os.rename(tmp, env.w / f"renamed-{rnd}")
        env.sync()
        for name, body in bodies.items():
            env.assert_file(f"renamed-{rnd}/{name}", body)
        # one commit holding all six: no file came late, as an addendum
        meta = env.key(f"renamed-{rnd}/.ckptfs/")
        manifests = sorted(s3_sizes(env.c, env.bucket, meta))
        assert len(manifests) == 1, f"more than the commit's manifest: {manifests}"
        doc = json.loads(s3_get(env.c, env.bucket, manifests[0]))
        listed = sorted(os.path.basename(f["path"]) for f in doc["files"])
        assert listed == sorted(bodies), listed


def test_errors_of_the_namespace(env):
    """The error numbers programs rely on."""
    with pytest.raises(FileExistsError):
        os.open(env.w / "remote/mv-dst.bin", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    with pytest.raises(FileNotFoundError):
        os.unlink(env.w / "no/such/file")
    with pytest.raises(FileNotFoundError):
        open(env.w / "no-such-dir/new.bin", "wb")
    with pytest.raises(NotADirectoryError):
        os.rmdir(env.w / "remote/latest")
    with pytest.raises(IsADirectoryError):
        os.unlink(env.w / "remote")
    with pytest.raises(IsADirectoryError):
        open(env.w / "remote", "wb")


# --------------------------------------------------------------------------
# attributes survive a remount (function-scoped mounts)

def test_attributes_and_contents_survive_remount(s3server, bucket, mount, tmp_path):
    """Everything written, its mode, owner, mtime, xattrs and symlinks are
    there after unmount (which waits for the commits) and a new mount with a
    fresh cache."""
    w = mount(bucket, options=(f"cache_dir={tmp_path}/c1", "commit_delay=600"))
    os.mkdir(w / "ck")
    (w / "ck/f.bin").write_bytes(b"f" * 10000)
    os.chmod(w / "ck/f.bin", 0o640)
    os.chown(w / "ck/f.bin", 42, 43)
    os.utime(w / "ck/f.bin", (1_500_000_000, 1_500_000_000))
    os.setxattr(w / "ck/f.bin", "user.k", b"v")
    os.mkdir(w / "ck/empty")
    os.symlink("f.bin", w / "ck/link")
    (w / "top.txt").write_bytes(b"top")
    os.chmod(w / "top.txt", 0o600)
    t0 = time.monotonic()
    assert not w.unmount(), "unmount did not go cleanly"
    print(f"unmount with a pending commit took {time.monotonic() - t0:.1f}s")
    w2 = mount(bucket, options=(f"cache_dir={tmp_path}/c2",))
    assert (w2 / "ck/f.bin").read_bytes() == b"f" * 10000
    st = os.stat(w2 / "ck/f.bin")
    assert stat.S_IMODE(st.st_mode) == 0o640, oct(st.st_mode)
    assert (st.st_uid, st.st_gid) == (42, 43)
    assert int(st.st_mtime) == 1_500_000_000
    assert os.getxattr(w2 / "ck/f.bin", "user.k") == b"v"
    assert os.listdir(w2 / "ck/empty") == []
    assert os.readlink(w2 / "ck/link") == "f.bin"
    assert stat.S_IMODE(os.stat(w2 / "top.txt").st_mode) == 0o600
    assert (w2 / "top.txt").read_bytes() == b"top"
    assert not pending_markers(s3server.client(), bucket)
