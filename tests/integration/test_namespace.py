"""How keys map to the directory tree: listing, pagination, implicit and
marker directories, odd names, keys that cannot be paths, hidden names,
mtimes, ownership and modes."""

import errno
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path

import pytest

from helpers import ckptfs_sync, parse_ls_la, run, wait_for

N_MANY = 10000


# --------------------------------------------------------------------------
# 10 000 objects in one directory: listing must follow pagination to the end

@pytest.fixture(scope="module")
def many(s3server):
    b = s3server.new_bucket("many")
    names = [f"f{i:05d}" + ("-x" * (i % 3)) for i in range(N_MANY)]
    s3server.put_many_small(b, ((f"many/{n}", n.encode()) for n in names),
                            threads=64)
    s3server.put(b, "many-after", b"after")   # sorts right after the prefix
    return b, names


@pytest.mark.timeout(300)
def test_directory_of_10000_objects_lists_completely(many, mount):
    b, names = many
    m = mount(b)
    got = os.listdir(m / "many")
    assert len(got) == len(set(got)), "duplicate names in readdir"
    missing = sorted(set(names) - set(got))
    extra = sorted(set(got) - set(names))
    assert not missing and not extra, (len(got), missing[:5], extra[:5])
    assert sorted(os.listdir(m.path)) == ["many", "many-after"]
    # ls (getdents with its own buffer size) agrees, and with -l (stat each)
    out = run(["ls", "-1", "--quoting-style=literal", m / "many"], timeout=120).stdout
    assert out.splitlines() == sorted(names)
    ent = parse_ls_la(run(["ls", "-la", "--time-style=+%s", m / "many"],
                          timeout=120).stdout)
    assert len(ent) == N_MANY + 2
    for n in (names[0], names[-1], names[5002]):
        assert ent[n][4] == len(n), n
    assert (m / "many" / "f09998-x-x").read_bytes() == b"f09998-x-x"


# --------------------------------------------------------------------------
# Tree shapes

@pytest.fixture(scope="module")
def shapes(s3server):
    b = s3server.new_bucket("shapes")
    items = {
        # implicit directories only (no marker objects), depth 1..5
        "n/l1.txt": b"1",
        "n/a/l2.txt": b"22",
        "n/a/b/l3.txt": b"333",
        "n/a/b/c/l4.txt": b"4444",
        "n/a/b/c/d/l5.txt": b"55555",
        "n/x/y/z/only.txt": b"only",
        # empty directories from zero-byte "name/" markers
        "empty/": b"",
        "nested-empty/inner/": b"",
        # a marker plus content: one directory
        "marked/": b"",
        "marked/f.txt": b"f",
        "marked/sub/": b"",
        # a name that is both an object and a prefix: shown as the directory
        "both": b"i am a file",
        "both/inner.txt": b"inner",
        # hidden ckptfs names
        ".ckptfs-pending/x": b"",
        ".ckptfs": b"internal",
        ".ckptfs-state/y": b"",
        "visible/.ckptfs-tmp": b"",
        "visible/keep.txt": b"keep",
        # a directory with the hidden names only appears empty
    }
    s3server.put_many(b, items.items())
    return b, items


@pytest.fixture(scope="module")
def shapes_mnt(shapes, module_mounter):
    return module_mounter(shapes[0])


def test_root_listing(shapes_mnt):
    assert sorted(os.listdir(shapes_mnt.path)) == sorted(
        ["n", "empty", "nested-empty", "marked", "both", "visible"])


def test_nested_implicit_directories_found_by_find(shapes_mnt):
    root = shapes_mnt / "n"
    files = run(["find", root, "-type", "f"]).stdout.splitlines()
    assert sorted(os.path.relpath(p, root) for p in files) == sorted(
        ["l1.txt", "a/l2.txt", "a/b/l3.txt", "a/b/c/l4.txt", "a/b/c/d/l5.txt",
         "x/y/z/only.txt"])
    dirs = run(["find", root, "-mindepth", "1", "-type", "d"]).stdout.splitlines()
    assert sorted(os.path.relpath(p, root) for p in dirs) == sorted(
        ["a", "a/b", "a/b/c", "a/b/c/d", "x", "x/y", "x/y/z"])
    assert (root / "a/b/c/d/l5.txt").read_bytes() == b"55555"
    # a path looked up directly, without listing its parents first
    st = os.stat(shapes_mnt / "n/x/y/z/only.txt")
    assert st.st_size == 4 and stat.S_ISREG(st.st_mode)
    assert stat.S_ISDIR(os.stat(shapes_mnt / "n/x/y").st_mode)


def test_empty_directories_from_markers(shapes_mnt):
    for d in ("empty", "nested-empty", "nested-empty/inner", "marked/sub"):
        st = os.stat(shapes_mnt / d)
        assert stat.S_ISDIR(st.st_mode), d
        assert stat.S_IMODE(st.st_mode) == 0o755, (d, oct(st.st_mode))
    assert os.listdir(shapes_mnt / "empty") == []
    assert os.listdir(shapes_mnt / "nested-empty") == ["inner"]
    assert os.listdir(shapes_mnt / "nested-empty/inner") == []
    # ls -a shows . and .. exactly once, and no entry with an empty name
    out = run(["ls", "-a1", shapes_mnt / "empty"]).stdout.splitlines()
    assert out == [".", ".."]


def test_marker_with_contents_is_one_directory(shapes_mnt):
    assert sorted(os.listdir(shapes_mnt / "marked")) == ["f.txt", "sub"]
    assert (shapes_mnt / "marked/f.txt").read_bytes() == b"f"
    out = run(["ls", "-a1", shapes_mnt / "marked"]).stdout.splitlines()
    assert out == [".", "..", "f.txt", "sub"]


def test_object_and_prefix_with_same_name_shows_directory(shapes_mnt):
    root_list = os.listdir(shapes_mnt.path)
    assert root_list.count("both") == 1
    st = os.stat(shapes_mnt / "both")
    assert stat.S_ISDIR(st.st_mode)
    assert os.listdir(shapes_mnt / "both") == ["inner.txt"]
    assert (shapes_mnt / "both/inner.txt").read_bytes() == b"inner"
    with pytest.raises(IsADirectoryError):
        open(shapes_mnt / "both", "rb").read()


def test_ckptfs_names_are_hidden(shapes_mnt):
    root = os.listdir(shapes_mnt.path)
    assert not [n for n in root if n.startswith(".ckptfs")], root
    assert os.listdir(shapes_mnt / "visible") == ["keep.txt"]
    for p in (".ckptfs-pending", ".ckptfs-pending/x", ".ckptfs", ".ckptfs-state",
              "visible/.ckptfs-tmp"):
        with pytest.raises(FileNotFoundError):
            os.stat(shapes_mnt / p)
    found = run(["find", shapes_mnt]).stdout
    assert ".ckptfs" not in found


def test_directory_link_counts_and_sizes_are_sane(shapes_mnt):
    ent = parse_ls_la(run(["ls", "-la", "--time-style=+%s", shapes_mnt / "n"]).stdout)
    assert ent["l1.txt"][4] == 1
    assert ent["a"][0].startswith("d") and ent["a"][1] >= 1
    assert ent["."][0].startswith("d")


# --------------------------------------------------------------------------
# Odd but valid names

ODD_NAMES = [
    "with space.txt",
    "  leading and trailing  ",
    "plus+sign.bin",
    "per%cent%20.txt",
    "hash#tag",
    "question?mark",
    "amp&eq=semi;colon:",
    "tilde~bang!dollar$",
    "quote'dquote\"back`tick",
    "paren(brackets)[braces]{}",
    "star*",
    "unicodé-日本語-🙂",
    "backslash\\name",
    "comma,at@caret^",
    "-leading-dash",
    "x" * 255,                      # the longest valid component
    "é" * 127,                      # 254 bytes of UTF-8
]


@pytest.fixture(scope="module")
def odd(s3server):
    b = s3server.new_bucket("odd")
    items = {f"odd/{n}": f"content of {n}".encode() for n in ODD_NAMES}
    items["odd/dir with space/inner +#?.txt"] = b"inner"
    items["odd/日本/ファイル"] = b"jp"
    s3server.put_many(b, items.items())
    return b, items


def test_special_characters_in_names(odd, mount):
    b, items = odd
    m = mount(b)
    listed = os.listdir(m / "odd")
    assert sorted(listed) == sorted(ODD_NAMES + ["dir with space", "日本"])
    for n in ODD_NAMES:
        assert (m / "odd" / n).read_bytes() == f"content of {n}".encode(), n
        assert os.stat(m / "odd" / n).st_size == len(f"content of {n}".encode())
    assert (m / "odd/dir with space/inner +#?.txt").read_bytes() == b"inner"
    assert (m / "odd/日本/ファイル").read_bytes() == b"jp"
    # through a shell tool too
    out = run(["cat", m / "odd" / "question?mark"]).stdout
    assert out == "content of question?mark"


# --------------------------------------------------------------------------
# Keys with control characters XML 1.0 forbids (0x01, 0x1f): Ceph RGW
# percent-encodes them in <Key> but writes its continuation token (the raw
# last key of a page) as &#x01;.  The mount's first probe (one key of the
# bucket) and any page ending on such a key used to be refused as malformed
# XML.  They are listed under their real names (doc/architecture.md,
# "Namespace"), and the listing goes on exactly after them.

CTL_NAMES = ["\x01first", "us\x1fsep", "ok.txt"]
CTL_PAGE = [f"a{i:03d}" for i in range(999)]   # then the 1000th: b\x01x
CTL_AFTER = ["b\x01x", "b\x02y", "b\x1fz", "b a", "c.txt"]


@pytest.fixture(scope="module")
def ctl(s3server):
    b = s3server.new_bucket("ctl")
    items = {f"ctl/{n}": f"content of {n!r}".encode() for n in CTL_NAMES}
    items["ctl/dir\x1f/inner.txt"] = b"inner"
    items.update({f"ctl/page/{n}": n.encode() for n in CTL_AFTER})
    s3server.put_many(b, items.items())
    s3server.put_many_small(b, ((f"ctl/page/{n}", n.encode()) for n in CTL_PAGE))
    return b


def test_keys_with_control_characters_list_under_their_names(ctl, mount):
    m = mount(ctl)   # the probe's one-key page ends on "ctl/\x01first"
    assert os.listdir(m.path) == ["ctl"]
    assert sorted(os.listdir(m / "ctl")) == sorted(CTL_NAMES + ["dir\x1f", "page"])
    for n in CTL_NAMES:
        assert (m / "ctl" / n).read_bytes() == f"content of {n!r}".encode(), repr(n)
    assert (m / "ctl/dir\x1f/inner.txt").read_bytes() == b"inner"
    # the first page of ctl/page/ ends on b\x01x: the next one starts right
    # after it, so b\x02y, b\x1fz and "b a" (between it and "b%01x") are there
    page = os.listdir(m / "ctl/page")
    assert sorted(page) == sorted(CTL_PAGE + CTL_AFTER), (
        len(page), sorted(set(CTL_PAGE + CTL_AFTER) - set(page)))
    for n in CTL_AFTER:
        assert (m / "ctl/page" / n).read_bytes() == n.encode(), repr(n)
    assert (m / "ctl/page/a998").read_bytes() == b"a998"


# --------------------------------------------------------------------------
# Keys that cannot be paths

LONG = "c" * 256


@pytest.fixture(scope="module")
def invalid(s3server):
    b = s3server.new_bucket("invalid")
    items = {
        "bad/a//b": b"double slash",
        "bad/./dot": b"dot",
        "bad/../escape": b"dotdot",
        "bad/..": b"dotdot object",
        "bad/.": b"dot object",
        f"bad/{LONG}": b"long name",
        f"bad/{LONG}/f": b"long dir",
        "bad//lead": b"empty component",
        "/rootslash": b"leading slash",
        "bad/ok.txt": b"ok",
        "bad/sub/ok2.txt": b"ok2",
        "good.txt": b"good",
    }
    s3server.put_many(b, items.items())
    return b, items


def test_invalid_keys_are_skipped_and_the_mount_works(invalid, mount):
    b, _ = invalid
    m = mount(b)
    root = sorted(os.listdir(m.path))
    # nothing escapes to the root ("../escape" must not show up as "escape")
    assert "escape" not in root and "rootslash" not in root
    assert "bad" in root and "good.txt" in root
    bad = os.listdir(m / "bad")
    for n in bad:
        assert n and "/" not in n and n not in (".", "..") and len(n.encode()) <= 255, bad
    assert "ok.txt" in bad and "sub" in bad
    assert LONG not in bad and "dot" not in bad and "escape" not in bad
    assert "lead" not in bad
    out = run(["ls", "-a1", m / "bad"]).stdout.splitlines()
    assert out.count(".") == 1 and out.count("..") == 1
    # the valid neighbours read fine, and a full walk completes
    assert (m / "bad/ok.txt").read_bytes() == b"ok"
    assert (m / "bad/sub/ok2.txt").read_bytes() == b"ok2"
    assert (m / "good.txt").read_bytes() == b"good"
    walked = run(["find", m], timeout=60).stdout.splitlines()
    for p in walked:
        rel = os.path.relpath(p, m.path)
        assert "//" not in p and "/../" not in p + "/" and "/./" not in p + "/", p
        assert all(len(c.encode()) <= 255 for c in rel.split("/")), p
    with pytest.raises(OSError) as ei:
        os.stat(m / "bad" / LONG)
    assert ei.value.errno in (errno.ENAMETOOLONG, errno.ENOENT)
    # still alive after all that
    assert sorted(os.listdir(m / "bad/sub")) == ["ok2.txt"]


# --------------------------------------------------------------------------
# Times

def test_file_mtime_is_last_modified_and_dir_mtime_is_newest(s3server, bucket, mount):
    s3server.put(bucket, "mt/old.txt", b"old")
    time.sleep(2.1)
    s3server.put(bucket, "mt/new.txt", b"new")
    s3server.put(bucket, "mt/sub/deeper.txt", b"deeper")
    lm = {k: s3server.head(bucket, k)["LastModified"].timestamp()
          for k in ("mt/old.txt", "mt/new.txt")}
    m = mount(bucket)
    for k, t in lm.items():
        st = os.stat(m / k)
        assert abs(st.st_mtime - t) <= 1.0, (k, st.st_mtime, t)
    assert os.stat(m / "mt/old.txt").st_mtime < os.stat(m / "mt/new.txt").st_mtime
    os.listdir(m / "mt")  # the directory's contents are now known
    dm = os.stat(m / "mt").st_mtime
    assert abs(dm - lm["mt/new.txt"]) <= 1.0, (dm, lm)
    # stat(1) and ls agree with the kernel's view
    out = run(["stat", "-c", "%Y", m / "mt/new.txt"]).stdout.strip()
    assert abs(int(out) - lm["mt/new.txt"]) <= 1


def test_dir_mtime_follows_new_objects_with_stat_alone(s3server, bucket, mount):
    """stat of a directory answers from its last listing at once (a
    writer's path walk must not wait for a LIST) and refreshes it, so a
    later stat shows a newer object's time without anyone listing."""
    s3server.put(bucket, "mt2/a.txt", b"a")
    m = mount(bucket, options=("dir_timeout=0", "entry_timeout=0", "attr_timeout=0"))
    t0 = os.stat(m / "mt2").st_mtime
    assert abs(t0 - s3server.head(bucket, "mt2/a.txt")["LastModified"].timestamp()) <= 1.0
    time.sleep(2.1)
    s3server.put(bucket, "mt2/b.txt", b"b")
    t1 = s3server.head(bucket, "mt2/b.txt")["LastModified"].timestamp()
    wait_for(lambda: abs(os.stat(m / "mt2").st_mtime - t1) <= 1.0, 10,
             "the directory's mtime is the new object's")


# --------------------------------------------------------------------------
# Ownership and modes

def test_default_owner_and_modes(s3server, bucket, mount):
    s3server.put(bucket, "d/f", b"x")
    m = mount(bucket)
    st = os.stat(m / "d/f")
    assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid())
    assert stat.S_IMODE(st.st_mode) == 0o644
    st = os.stat(m / "d")
    assert stat.S_IMODE(st.st_mode) == 0o755 and stat.S_ISDIR(st.st_mode)
    st = os.stat(m.path)
    assert stat.S_ISDIR(st.st_mode)


def test_uid_gid_umask_options(s3server, bucket, mount):
    s3server.put(bucket, "d/f", b"x")
    m = mount(bucket, options=("uid=1234", "gid=5678", "umask=027"))
    st = os.stat(m / "d/f")
    assert (st.st_uid, st.st_gid) == (1234, 5678)
    assert stat.S_IMODE(st.st_mode) == 0o640
    st = os.stat(m / "d")
    assert (st.st_uid, st.st_gid) == (1234, 5678)
    # a umask masks directories as well (as in s3fs, rclone, mountpoint-s3)
    assert stat.S_IMODE(st.st_mode) == 0o750, oct(st.st_mode)
    out = run(["ls", "-ln", m / "d"]).stdout
    assert " 1234 5678 " in out, out


def _as_nobody(cmd):
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]


@pytest.fixture
def public_dir():
    """A directory that other users can traverse (tmp_path's parents are
    0700)."""
    d = tempfile.mkdtemp(prefix="ckptfs-pub-", dir="/tmp")
    os.chmod(d, 0o755)
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


def test_allow_other_lets_other_users_read(public_dir, s3server, bucket, mount):
    s3server.put(bucket, "shared.txt", b"for everyone")
    mp1, mp2 = public_dir / "private", public_dir / "public"
    mp1.mkdir()
    mp2.mkdir()
    mount(bucket, mountpoint=mp1)
    mount(bucket, mountpoint=mp2, options=("allow_other",))
    p = run(_as_nobody(["cat", mp2 / "shared.txt"]), check=False)
    assert p.returncode == 0 and p.stdout == "for everyone", p.stderr
    p = run(_as_nobody(["ls", mp1]), check=False)
    assert p.returncode != 0 and "Permission denied" in p.stderr, (p.returncode, p.stderr)


def test_another_users_write_drops_the_set_id_bits(public_dir, s3server, bucket, mount):
    """ckptfs drops set-id bits itself (it takes FUSE_HANDLE_KILLPRIV_V2,
    which spares a GETXATTR round trip per write(2)): as on a local disk,
    root's write keeps them, another user's write or truncate drops
    set-user-ID and set-group-ID, and the bits stay dropped after a
    remount."""
    mp = public_dir / "m"
    mp.mkdir()
    opts = ("allow_other", "attr_timeout=0", "commit_delay=0.5")
    m = mount(bucket, mountpoint=mp, options=opts)
    d = m / "setid"
    d.mkdir()
    os.chmod(d, 0o777)
    for name in ("w", "t", "root"):
        (d / name).write_bytes(b"0123456789")
        os.chmod(d / name, 0o6777)
    with open(d / "root", "r+b") as f:
        f.write(b"ab")
    assert stat.S_IMODE(os.stat(d / "root").st_mode) == 0o6777
    p = run(_as_nobody(["dd", "if=/dev/zero", f"of={d / 'w'}", "bs=1", "count=3",
                        "conv=notrunc", "status=none"]), check=False)
    assert p.returncode == 0, p.stderr
    assert stat.S_IMODE(os.stat(d / "w").st_mode) == 0o777
    p = run(_as_nobody(["truncate", "-s", "4", d / "t"]), check=False)
    assert p.returncode == 0, p.stderr
    assert stat.S_IMODE(os.stat(d / "t").st_mode) == 0o777
    assert (d / "w").read_bytes() == b"\0\0\0" + b"3456789"
    assert (d / "t").read_bytes() == b"0123"
    ckptfs_sync(m)
    m2 = mount(bucket, options=("attr_timeout=0",))
    modes = {n: stat.S_IMODE(os.stat(m2 / "setid" / n).st_mode) for n in ("w", "t", "root")}
    assert modes == {"w": 0o777, "t": 0o777, "root": 0o6777}, modes


# --------------------------------------------------------------------------
# Listing cache

def test_dir_timeout_zero_shows_new_objects(s3server, bucket, mount):
    s3server.put(bucket, "live/a", b"a")
    m = mount(bucket, options=("dir_timeout=0", "entry_timeout=0", "attr_timeout=0"))
    assert os.listdir(m / "live") == ["a"]
    s3server.put(bucket, "live/b", b"bb")
    assert sorted(os.listdir(m / "live")) == ["a", "b"]
    assert (m / "live/b").read_bytes() == b"bb"


def test_new_objects_appear_after_dir_timeout(s3server, bucket, mount):
    s3server.put(bucket, "live/a", b"a")
    m = mount(bucket, options=("dir_timeout=1", "entry_timeout=1", "attr_timeout=1"))
    assert os.listdir(m / "live") == ["a"]
    s3server.put(bucket, "live/b", b"bb")
    time.sleep(2.5)
    assert sorted(os.listdir(m / "live")) == ["a", "b"]


def test_times_are_stable_across_lookups_and_opens(s3server, bucket, mount):
    """stat before and after listing, after opening and reading the file
    (HEAD/GET Last-Modified has whole seconds, ListObjects milliseconds),
    and after the attribute cache expired must all agree: tar reports "file
    changed as we read it" otherwise."""
    s3server.put(bucket, "st/f.txt", b"f")
    s3server.put(bucket, "st/g.txt", b"g")
    m = mount(bucket)
    seen = {"st/f.txt": [os.stat(m / "st/f.txt")]}   # looked up without listing
    os.listdir(m / "st")
    seen["st/g.txt"] = [os.stat(m / "st/g.txt")]
    for path, sts in seen.items():
        with open(m / path, "rb") as f:
            sts.append(os.fstat(f.fileno()))
            f.read()
            sts.append(os.fstat(f.fileno()))
        sts.append(os.stat(m / path))
    time.sleep(2.2)                                   # default timeouts are 1 s
    for path, sts in seen.items():
        sts.append(os.stat(m / path))
        # (st_ino is left out: a re-lookup after the kernel forgot the inode
        # may give a new number, as in most FUSE file systems)
        for a in ("st_mtime_ns", "st_ctime_ns", "st_size", "st_mode"):
            vals = [getattr(st, a) for st in sts]
            assert len(set(vals)) == 1, (path, a, vals)
