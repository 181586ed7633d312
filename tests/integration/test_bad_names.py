"""Names and metadata the store cannot take (issue 23 point 1, doc/commit.md
"Names the store refuses"): a name whose key would exceed S3's 1 024 bytes
is refused at the call that makes it (ENAMETOOLONG), and the other files
of its checkpoint are published; a symlink target too long for object
metadata is kept in the manifest, so its checkpoint commits, and refused
with ENAMETOOLONG where no manifest records it."""
import errno
import os

import pytest

from helpers import ckptfs_commit, observer_options, observer_settle, tree_view

SEG = "s" * 250  # a legal name; four of them make a key over 1 024 bytes


def expect_errno(code, fn, *args):
    with pytest.raises(OSError) as e:
        fn(*args)
    assert e.value.errno == code, e.value


@pytest.mark.timeout(90)
def test_key_over_1024_bytes_refused_and_checkpoint_published(
        s3server, bucket, mount, tmp_path):
    s3server.put(bucket, "pre/run/")
    w = mount(bucket, prefix="pre", options=("commit_delay=600",))
    o = mount(bucket, prefix="pre", options=observer_options(tmp_path / "cache-o"))
    d = w / "run/ckpt-1"
    os.mkdir(d)
    (d / "a.bin").write_bytes(b"a" * 1000)
    # "pre/run/ckpt-1/" is 15 bytes, then three segments: the directory's
    # keys begin with 768 bytes; deep/"uu"/ with 771
    deep = d / SEG / SEG / SEG / "uu"
    os.makedirs(deep)
    fits, over = "g" * 253, "g" * 254  # keys of 1 024 and 1 025 bytes
    (deep / fits).write_bytes(b"x")
    expect_errno(errno.ENAMETOOLONG, os.open, deep / over,
                 os.O_CREAT | os.O_WRONLY, 0o644)
    expect_errno(errno.ENAMETOOLONG, os.mkdir, deep / ("h" * 253))
    expect_errno(errno.ENAMETOOLONG, os.symlink, "a.bin", deep / over)
    expect_errno(errno.ENAMETOOLONG, os.mknod, deep / over)
    expect_errno(errno.ENAMETOOLONG, os.rename, d / "a.bin", deep / over)
    assert (d / "a.bin").exists()
    assert sorted(os.listdir(deep)) == [fits]
    ckptfs_commit(d)
    observer_settle()
    seen = tree_view(o / "run/ckpt-1")
    assert seen == {"a.bin": 1000, f"{SEG}/{SEG}/{SEG}/uu/{fits}": 1}, seen


@pytest.mark.timeout(90)
def test_long_symlink_target_commits(s3server, bucket, mount, tmp_path):
    s3server.put(bucket, "run/")
    w = mount(bucket, options=("commit_delay=600",))
    o = mount(bucket, options=observer_options(tmp_path / "cache-o"))
    d = w / "run/ckpt-1"
    os.mkdir(d)
    (d / "a.bin").write_bytes(b"a" * 100)
    target = "../" + "t" * 3997  # 4 000 bytes: over S3's 2 KiB of metadata
    os.symlink(target, d / "long")
    os.symlink("a.bin", d / "short")
    ckptfs_commit(d)
    observer_settle()
    seen = tree_view(o / "run/ckpt-1")
    assert seen == {"a.bin": 100, "long": 4000, "short": 5}, seen
    assert os.path.islink(o / "run/ckpt-1/long")
    assert os.readlink(o / "run/ckpt-1/long") == target
    assert os.readlink(o / "run/ckpt-1/short") == "a.bin"
    # a symlink beside the checkpoint (a single-file commit, no manifest
    # records it): refused at symlink(), a short one works
    expect_errno(errno.ENAMETOOLONG, os.symlink, target, w / "run/latest")
    assert not os.path.lexists(w / "run/latest")
    os.symlink("ckpt-1", w / "run/latest")
    ckptfs_commit(w / "run/latest")
    observer_settle()
    assert os.readlink(o / "run/latest") == "ckpt-1"


@pytest.mark.timeout(90)
def test_long_symlink_target_survives_sigkill(s3server, bucket, mount, tmp_path):
    """The long target is journaled: after SIGKILL before the commit and a
    remount, the checkpoint commits with it."""
    from helpers import kill_ckptfs
    s3server.put(bucket, "run/")
    mp = tmp_path / "mnt-w"
    mp.mkdir()
    opts = (f"cache_dir={tmp_path}/cache-w", "commit_delay=600")
    w = mount(bucket, options=opts, mountpoint=mp)
    o = mount(bucket, options=observer_options(tmp_path / "cache-o"))
    d = w / "run/ckpt-1"
    os.mkdir(d)
    target = "/" + "u" * 2999
    os.symlink(target, d / "long")
    kill_ckptfs(w)
    w = mount(bucket, options=opts, mountpoint=mp)
    assert os.readlink(w / "run/ckpt-1/long") == target
    ckptfs_commit(w / "run/ckpt-1")
    observer_settle()
    assert os.readlink(o / "run/ckpt-1/long") == target
