"""`-o ro`: every write operation fails with EROFS, extended attributes read
as absent, and the bucket is never changed.  Without -o ro the mount is
writable."""

import errno
import os

import pytest

from helpers import mount_entry, run, s3_get, wait_for

ITEMS = {"f.txt": b"file", "d/inner.txt": b"inner", "d2/": b""}


@pytest.fixture(scope="module")
def ro(s3server, module_mounter):
    b = s3server.new_bucket("readonly")
    s3server.put_many(b, ITEMS.items())
    m = module_mounter(b, options=("ro",))
    yield b, m
    # nothing may have reached the bucket
    assert sorted(s3server.keys(b)) == sorted(ITEMS)
    for k, v in ITEMS.items():
        assert s3server.client().get_object(Bucket=b, Key=k)["Body"].read() == v


def _open(path, flags):
    fd = os.open(path, flags, 0o644)
    os.close(fd)


OPS = {
    "create": lambda m: _open(m / "new.txt", os.O_CREAT | os.O_WRONLY),
    "create_excl": lambda m: _open(m / "d/new.txt", os.O_CREAT | os.O_EXCL | os.O_WRONLY),
    "open_wronly": lambda m: _open(m / "f.txt", os.O_WRONLY),
    "open_rdwr": lambda m: _open(m / "f.txt", os.O_RDWR),
    "open_append": lambda m: _open(m / "f.txt", os.O_WRONLY | os.O_APPEND),
    "open_trunc": lambda m: _open(m / "f.txt", os.O_WRONLY | os.O_TRUNC),
    "mkdir": lambda m: os.mkdir(m / "newdir"),
    "mkdir_nested": lambda m: os.mkdir(m / "d/newdir"),
    "rmdir": lambda m: os.rmdir(m / "d2"),
    "unlink": lambda m: os.unlink(m / "f.txt"),
    "unlink_nested": lambda m: os.unlink(m / "d/inner.txt"),
    "rename_file": lambda m: os.rename(m / "f.txt", m / "g.txt"),
    "rename_into_dir": lambda m: os.rename(m / "f.txt", m / "d/f.txt"),
    "rename_dir": lambda m: os.rename(m / "d", m / "e"),
    "chmod": lambda m: os.chmod(m / "f.txt", 0o600),
    "chmod_dir": lambda m: os.chmod(m / "d", 0o700),
    "chown": lambda m: os.chown(m / "f.txt", 1, 1),
    "truncate": lambda m: os.truncate(m / "f.txt", 0),
    "utime": lambda m: os.utime(m / "f.txt", (0, 0)),
    "setxattr": lambda m: os.setxattr(m / "f.txt", "user.test", b"v"),
    "removexattr": lambda m: os.removexattr(m / "f.txt", "user.test"),
    "symlink": lambda m: os.symlink("f.txt", m / "link"),
    "hardlink": lambda m: os.link(m / "f.txt", m / "hard"),
    "mkfifo": lambda m: os.mkfifo(m / "fifo"),
}


@pytest.mark.parametrize("op", sorted(OPS))
def test_write_operation_fails_with_erofs(ro, op):
    _, m = ro
    with pytest.raises(OSError) as ei:
        OPS[op](m)
    assert ei.value.errno == errno.EROFS, f"{op}: {ei.value!r}"


def test_write_to_a_file_opened_for_reading_fails(ro):
    _, m = ro
    with open(m / "f.txt", "rb", buffering=0) as f:
        with pytest.raises(OSError) as ei:
            os.write(f.fileno(), b"x")
        assert ei.value.errno in (errno.EBADF, errno.EROFS)
        assert f.read() == b"file"


def test_xattrs_read_as_absent(ro):
    _, m = ro
    for p in (m / "f.txt", m / "d", m.path):
        with pytest.raises(OSError) as ei:
            os.getxattr(p, "user.anything")
        assert ei.value.errno == errno.ENODATA, (p, ei.value)
        assert [a for a in os.listxattr(p) if a.startswith("user.")] == [], p


def test_shell_tools_report_read_only(ro, tmp_path):
    _, m = ro
    src = tmp_path / "local.txt"
    src.write_text("local")
    for cmd in (["touch", m / "touched"], ["cp", src, m / "copied.txt"],
                ["rm", m / "f.txt"], ["mkdir", m / "dir"], ["mv", m / "f.txt", m / "moved"],
                ["sh", "-c", f"echo hi > '{m}/f.txt'"], ["ln", "-s", "x", m / "sym"]):
        p = run(cmd, check=False)
        assert p.returncode != 0, cmd
        assert "Read-only file system" in p.stderr, (cmd, p.stderr)
    assert sorted(os.listdir(m.path)) == ["d", "d2", "f.txt"]
    assert (m / "f.txt").read_bytes() == b"file"


def test_mount_table_says_ro(ro):
    _, m = ro
    e = mount_entry(m.path)
    assert "ro" in e["options"].split(","), e


def test_without_ro_the_mount_is_writable(s3server, bucket, mount, tmp_path):
    """The same operations work on a mount without -o ro: a file written
    through it reads back and reaches the bucket."""
    m = mount(bucket, options=(f"cache_dir={tmp_path}/cache",))
    e = mount_entry(m.path)
    assert "rw" in e["options"].split(","), e
    (m / "hello.txt").write_bytes(b"written through ckptfs\n")
    os.mkdir(m / "d")
    os.rmdir(m / "d")
    assert (m / "hello.txt").read_bytes() == b"written through ckptfs\n"
    c = s3server.client()
    wait_for(lambda: s3_get(c, bucket, "hello.txt") == b"written through ckptfs\n",
             30, "hello.txt in the bucket")
