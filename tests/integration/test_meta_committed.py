"""Attribute changes of committed names (issue 22 point 2, issue 23 point 7).

Every change of a committed file's mode, owner, mtime or user xattrs that a
call accepts reaches the bucket, whichever way it came: by path or through
a handle (open for writing or reading), UTIME_NOW or explicit times,
setxattr or removexattr.  Each test checks what another mount and a
remount show, not what the writer's own overlay says.  Before, `touch`,
`touch -d`, `fchmod` and `futimens` through an O_WRONLY handle returned 0
and were lost at the next sync, `setfattr -x` of a committed file failed
with ENODATA, and `touch -d @1000000000` of a file just written showed the
commit time on other hosts.
"""
import errno
import os
import subprocess
import time

import pytest

import helpers
from helpers import ckptfs_sync

T_OLD = 1_000_000_000_000_000_000          # 2001-09-09, ns
T_EXPLICIT = 1_234_567_890_123_456_789     # 2009-02-13, ns
T_1938 = -1_000_000_000_123_456_789        # before 1970: kept


def _seen(p):
    """mode, owner, mtime (ns) and xattrs of p, as a user sees them."""
    st = os.lstat(p)
    return {"mode": oct(st.st_mode), "uid": st.st_uid, "gid": st.st_gid,
            "mtime": st.st_mtime_ns, "size": st.st_size,
            "xattrs": {k: os.getxattr(p, k)
                       for k in sorted(os.listxattr(p))}}


def _seed(top, names):
    top.mkdir()
    for i, n in enumerate(names):
        p = top / n
        p.write_bytes(f"bytes of {n}".encode())
        os.setxattr(p, "user.keep", b"k%d" % i)
        os.setxattr(p, "user.drop", b"d%d" % i)
        os.chmod(p, 0o640)
        os.utime(p, ns=(T_OLD, T_OLD + i))


NAMES = ["touch_now", "touch_d", "fchmod_wr", "futimens_wr", "fchmod_rd",
         "fchown_wr", "chmod_path", "rmxattr", "fsetxattr_wr",
         "fremovexattr_wr", "pre1970", "twice"]


def _change(top):
    """The changes, each through another door; returns the time window of
    the UTIME_NOW ones."""
    before = time.time_ns()
    subprocess.run(["touch", top / "touch_now"], check=True)
    after = time.time_ns()
    subprocess.run(["touch", "-d", "@1000000000", top / "touch_d"],
                   check=True)
    fd = os.open(top / "fchmod_wr", os.O_WRONLY)
    os.fchmod(fd, 0o604)
    os.close(fd)
    fd = os.open(top / "futimens_wr", os.O_WRONLY)
    os.utime(fd, ns=(T_EXPLICIT, T_EXPLICIT))
    os.close(fd)
    fd = os.open(top / "fchmod_rd", os.O_RDONLY)
    os.fchmod(fd, 0o600)
    os.close(fd)
    fd = os.open(top / "fchown_wr", os.O_WRONLY)
    os.fchown(fd, 1234, 5678)
    os.close(fd)
    os.chmod(top / "chmod_path", 0o444)
    subprocess.run(["setfattr", "-x", "user.drop", top / "rmxattr"],
                   check=True)
    fd = os.open(top / "fsetxattr_wr", os.O_WRONLY)
    os.setxattr(fd, "user.new", b"through a handle")
    os.close(fd)
    fd = os.open(top / "fremovexattr_wr", os.O_WRONLY)
    os.removexattr(fd, "user.drop")
    os.close(fd)
    os.utime(top / "pre1970", ns=(T_1938, T_1938))
    # two changes in a row: the second is stored while the first commits
    # (it was stored as a plain object the manifest then overruled)
    os.chmod(top / "twice", 0o600)
    subprocess.run(["touch", "-d", "@1000000000", top / "twice"],
                   check=True)
    return before, after


def _check(view, before, after):
    """What every host must see after _change."""
    now = view["touch_now"]["mtime"]
    assert before - 1_000_000_000 <= now <= after + 1_000_000_000, view
    assert view["touch_d"]["mtime"] == 1_000_000_000 * 10**9
    assert view["fchmod_wr"]["mode"] == oct(0o100604)
    assert view["futimens_wr"]["mtime"] == T_EXPLICIT
    assert view["fchmod_rd"]["mode"] == oct(0o100600)
    assert (view["fchown_wr"]["uid"], view["fchown_wr"]["gid"]) == \
        (1234, 5678)
    assert view["chmod_path"]["mode"] == oct(0o100444)
    assert view["rmxattr"]["xattrs"] == {"user.keep": b"k7"}
    assert view["fsetxattr_wr"]["xattrs"] == {
        "user.drop": b"d8", "user.keep": b"k8",
        "user.new": b"through a handle"}
    assert view["fremovexattr_wr"]["xattrs"] == {"user.keep": b"k9"}
    assert view["pre1970"]["mtime"] == T_1938
    assert (view["twice"]["mode"], view["twice"]["mtime"]) == \
        (oct(0o100600), 1_000_000_000 * 10**9)
    # nothing else moved: bytes and the untouched attributes
    for i, n in enumerate(NAMES):
        assert view[n]["size"] == len(f"bytes of {n}"), n


def _committed_tree(bucket, mount, mp, opts):
    """The files written, committed, and the mount made again: every name
    is a remote one (the steady state of a shared host)."""
    m = mount(bucket, mountpoint=mp, options=opts)
    _seed(m / "ckpt-1", NAMES)
    ckptfs_sync(m)
    return _remounted(m, bucket, mount, opts)


def _elsewhere(bucket, mount, tmp_path, tag):
    """Another host's mount: its own cache, read-only."""
    return mount(bucket, options=helpers.observer_options(tmp_path / tag))


def _writer(bucket, mount, tmp_path):
    """The writer's mount at tmp_path/mnt with its own cache, and its
    options (for _remounted)."""
    opts = (f"cache_dir={tmp_path / 'cache-a'}",)
    mp = tmp_path / "mnt"
    mp.mkdir()
    return mount(bucket, mountpoint=mp, options=opts), opts


def _remounted(m, bucket, mount, opts):
    """m unmounted cleanly and mounted again (same cache and journal)."""
    mp = m.path
    assert m.unmount() == []
    return mount(bucket, mountpoint=mp, options=opts)


def _view(top):
    return {n: _seen(top / n) for n in NAMES}


@pytest.mark.timeout(120)
def test_attribute_changes_of_committed_files_persist(bucket, mount,
                                                      tmp_path):
    opts = (f"cache_dir={tmp_path / 'cache-a'}",)
    mp = tmp_path / "mnt"
    mp.mkdir()
    m = _committed_tree(bucket, mount, mp, opts)
    top = m / "ckpt-1"
    before, after = _change(top)
    here = _view(top)
    _check(here, before, after)
    ckptfs_sync(m)
    assert _view(_elsewhere(bucket, mount, tmp_path, "cache-b") /
                 "ckpt-1") == here
    assert _view(_remounted(m, bucket, mount, opts) / "ckpt-1") == here


@pytest.mark.timeout(90)
def test_times_of_a_file_just_written(bucket, mount, tmp_path):
    """issue 23 point 7: times set on a file just written, by handle or by
    path, before or after its close, are what every host shows; a time
    the format cannot keep is refused (EINVAL), never replaced."""
    m = mount(bucket, options=(f"cache_dir={tmp_path / 'cache-a'}",))
    (m / "a").write_bytes(b"a")
    subprocess.run(["touch", "-d", "@1000000000", m / "a"], check=True)
    with open(m / "b", "wb") as f:
        f.write(b"b")
        f.flush()
        os.utime(f.fileno(), ns=(T_EXPLICIT, T_EXPLICIT))
    (m / "c").write_bytes(b"c")
    os.utime(m / "c", ns=(T_1938, T_1938))
    for bad in (2**63 + 10**9, 0):
        with pytest.raises(OSError) as e:
            os.utime(m / "c", ns=(bad, bad))
        assert e.value.errno == errno.EINVAL
    want = {"a": 1_000_000_000 * 10**9, "b": T_EXPLICIT, "c": T_1938}
    assert {n: os.lstat(m / n).st_mtime_ns for n in want} == want
    ckptfs_sync(m)
    other = _elsewhere(bucket, mount, tmp_path, "cache-b")
    assert {n: os.lstat(other / n).st_mtime_ns for n in want} == want


@pytest.mark.timeout(90)
def test_times_of_names_renamed_by_a_mount_that_read_them(bucket, mount,
                                                          tmp_path):
    """A file and a symlink outside any manifest, committed, then read by
    a mount that did not write them (their object metadata read), renamed
    there: the renames are server-side copies, whose new LastModified the
    next listing shows.  `ls -l` (readdirplus, then lstat) shows the
    recorded mtimes at once.  Before, the metadata read for the old
    version counted as known: the listing's reply carried the copy's
    LastModified with the full attr_timeout, and lstat showed it (model
    seed 9003, step 111)."""
    m, opts = _writer(bucket, mount, tmp_path)
    (m / "f").write_bytes(b"f")
    os.utime(m / "f", ns=(T_EXPLICIT, T_EXPLICIT))
    os.symlink("nowhere", m / "l")
    os.utime(m / "l", ns=(T_OLD, T_OLD), follow_symlinks=False)
    ckptfs_sync(m)
    m = _remounted(m, bucket, mount, opts)
    want = {"f": T_EXPLICIT, "l": T_OLD}
    assert {n: os.lstat(m / n).st_mtime_ns for n in sorted(os.listdir(m))} \
        == want
    os.rename(m / "f", m / "g")
    os.rename(m / "l", m / "k")
    want = {"g": T_EXPLICIT, "k": T_OLD}
    assert {n: os.lstat(m / n).st_mtime_ns for n in sorted(os.listdir(m))} \
        == want
    assert os.readlink(m / "k") == "nowhere"
    other = _elsewhere(bucket, mount, tmp_path, "cache-b")
    assert {n: os.lstat(other / n).st_mtime_ns
            for n in sorted(os.listdir(other))} == want


@pytest.mark.timeout(120)
def test_sigkill_after_attribute_changes(bucket, mount, tmp_path):
    """The changes are journaled before the calls return: a writer killed
    right after them (no sync) commits them once mounted again."""
    cdir = tmp_path / "cache-w"
    mp = tmp_path / "mnt"
    mp.mkdir()
    opts = (f"cache_dir={cdir}",)
    w = _committed_tree(bucket, mount, mp, opts)
    top = w / "ckpt-1"
    before, after = _change(top)
    here = _view(top)
    helpers.kill_ckptfs(w)
    w2 = mount(bucket, mountpoint=mp, options=opts)
    ckptfs_sync(w2)
    seen = _view(_elsewhere(bucket, mount, tmp_path, "cache-o") / "ckpt-1")
    _check(seen, before, after)
    assert seen == here


# --------------------------------------------------------------------------
# Directory metadata through the bucket (issue 22 point 1)

def _dir_tree(top):
    """Directories with their own mode, owner, user xattrs and mtime set
    last (as cp -a, rsync -a and tar do), plus files in them."""
    top.mkdir()
    for rel in ("sub", "sub/deeper", "sub/empty", "other"):
        (top / rel).mkdir()
    (top / "sub" / "f").write_bytes(b"f")
    (top / "sub" / "deeper" / "g").write_bytes(b"g")
    (top / "other" / "h").write_bytes(b"h")
    plan = [(".", 0o750, 1001, 1002), ("sub", 0o2755, 0, 1003),
            ("sub/deeper", 0o700, 1004, 0), ("sub/empty", 0o1777, 0, 0),
            ("other", 0o755, 1005, 1005)]
    for i, (rel, mode, uid, gid) in enumerate(plan):
        p = top / rel
        os.chown(p, uid, gid)
        os.chmod(p, mode)
        os.setxattr(p, "user.dir", b"d%d\0bin" % i)
    # times last, deepest first, as cp -a does
    for i, (rel, *_r) in enumerate(reversed(plan)):
        os.utime(top / rel, ns=(T_OLD, T_EXPLICIT + i * 1_000_000_007))


def _dirs_view(top):
    out = {}
    for dirpath, dirnames, _f in os.walk(top):
        for rel in [os.path.relpath(dirpath, top)]:
            st = os.lstat(dirpath)
            out[rel] = {"mode": oct(st.st_mode), "uid": st.st_uid,
                        "gid": st.st_gid, "mtime": st.st_mtime_ns,
                        "xattrs": {k: os.getxattr(dirpath, k)
                                   for k in sorted(os.listxattr(dirpath))}}
    return out


@pytest.mark.timeout(120)
def test_directory_metadata_round_trip(bucket, mount, tmp_path):
    """mode, owner, user xattrs and mtime (ns) of every directory written
    through the mount read back the same on another mount, after a
    remount and after a rename of the committed directory.  Before, a
    directory showed the newest LastModified under it as mtime and had no
    xattrs anywhere but on the writer until its node went."""
    m, opts = _writer(bucket, mount, tmp_path)
    _dir_tree(m / "ckpt-1")
    want = _dirs_view(m / "ckpt-1")
    assert want["sub"]["xattrs"] == {"user.dir": b"d1\0bin"}
    ckptfs_sync(m)
    time.sleep(0.5)  # the writer's local nodes go: it reads the bucket too
    assert _dirs_view(m / "ckpt-1") == want
    other = _elsewhere(bucket, mount, tmp_path, "cache-b")
    assert _dirs_view(other / "ckpt-1") == want
    # a change of a committed directory is stored (a step of its own),
    # never accepted and lost: the writer shows it at once, every host
    # after a sync, and it survives a rename (doc/posix.md, "Changing a
    # committed directory")
    want = _change_committed_dirs(m / "ckpt-1", want)
    assert _dirs_view(m / "ckpt-1") == want
    ckptfs_sync(m)
    time.sleep(0.5)  # the pending changes go: the bucket's records show
    assert _dirs_view(m / "ckpt-1") == want
    helpers.wait_for(lambda: _dirs_view(other / "ckpt-1") == want, 10,
                     "the changes on the other mount")
    os.rename(m / "ckpt-1", m / "ckpt-2")
    ckptfs_sync(m)
    assert _dirs_view(_remounted(m, bucket, mount, opts) / "ckpt-2") == want
    helpers.wait_for(lambda: not os.path.exists(other / "ckpt-1"), 10,
                     "the old name gone on the other mount")
    assert _dirs_view(other / "ckpt-2") == want


def _change_committed_dirs(top, want):
    """chmod, chown, utimensat (explicit and now), setxattr and
    removexattr of committed directories (the transaction root, one inside
    it and one deeper); want as it should show after them."""
    want = {k: dict(v, xattrs=dict(v["xattrs"])) for k, v in want.items()}
    sub = top / "sub"
    os.chmod(sub, 0o700)
    os.chown(sub, 7, 8)
    os.setxattr(sub, "user.new", b"x\0y")
    os.removexattr(sub, "user.dir")
    with pytest.raises(OSError) as e:
        os.removexattr(sub, "user.none")
    assert e.value.errno == errno.ENODATA
    with pytest.raises(OSError) as e:
        os.setxattr(sub, "user.new", b"z", os.XATTR_CREATE)
    assert e.value.errno == errno.EEXIST
    os.utime(sub, ns=(T_OLD, T_OLD))
    want["sub"].update(mode=oct(0o40700), uid=7, gid=8, mtime=T_OLD,
                       xattrs={"user.new": b"x\0y"})
    before = time.time_ns()
    os.utime(top / "sub" / "deeper")
    after = time.time_ns()
    st = os.lstat(top / "sub" / "deeper")
    assert before - 10**7 <= st.st_mtime_ns <= after + 10**7
    assert st.st_ctime_ns >= st.st_mtime_ns
    want["sub/deeper"]["mtime"] = st.st_mtime_ns
    os.chmod(top, 0o755)
    os.setxattr(top, "user.dir", b"root again")
    want["."].update(mode=oct(0o40755), xattrs={"user.dir": b"root again"})
    return want


@pytest.mark.timeout(120)
def test_changes_of_directories_just_committed(bucket, mount, tmp_path):
    """Right after a sync, before the writer listed anything again (its
    local nodes just went, the manifests not loaded), chmod and setxattr
    of the committed directories are stored, not refused; another host
    shows them at its next look at each directory (here: a stat, which
    answers from its listing and refreshes it)."""
    m = mount(bucket, options=(f"cache_dir={tmp_path / 'cache-w'}",))
    os.mkdir(m / "c", 0o1777)
    os.makedirs(m / "d" / "e")
    (m / "d" / "e" / "f").write_bytes(b"x")
    ckptfs_sync(m)
    other = _elsewhere(bucket, mount, tmp_path, "cache-o")
    assert os.listxattr(other / "c") == []
    assert os.stat(other / "d" / "e").st_mode == 0o40755
    os.setxattr(m / "c", "user.m", b"one")
    os.chmod(m / "d" / "e", 0o700)
    assert os.getxattr(m / "c", "user.m") == b"one"
    assert os.stat(m / "d" / "e").st_mode == 0o40700
    ckptfs_sync(m)

    def seen():
        os.stat(other / "c")
        return (os.listxattr(other / "c"),
                os.stat(other / "d" / "e").st_mode)
    helpers.wait_for(lambda: seen() == (["user.m"], 0o40700), 15,
                     "the changes on the other mount")
    # after a remount, a chmod(2) with no look before (the kernel sends a
    # lookup, then the setattr: the directory was never listed)
    opts = (f"cache_dir={tmp_path / 'cache-w'}",)
    m = _remounted(m, bucket, mount, opts)
    os.chmod(m / "c", 0o700)
    ckptfs_sync(m)
    m = _remounted(m, bucket, mount, opts)
    assert os.stat(m / "c").st_mode == 0o40700


@pytest.mark.timeout(120)
def test_another_host_first_stat_of_a_directory_replaced_since(bucket, mount,
                                                               tmp_path):
    """Another host that listed x and y long ago (past its lookups' bound
    of 4 x dir_timeout) stats x once after the writer renamed y over x
    and chmod-ed z: that one stat shows y's mode and owner at x and z's
    new mode, not what x and z were at its last look (model seed 7509:
    the observer showed the replaced directory's mode and group for as
    long as it kept stat-ing without listing inside)."""
    m = mount(bucket, options=(f"cache_dir={tmp_path / 'cache-w'}",))
    os.mkdir(m / "x", 0o755)
    os.chown(m / "x", 0, 5678)
    os.mkdir(m / "y", 0o700)
    (m / "y" / "f").write_bytes(b"y's file")
    os.mkdir(m / "z", 0o755)
    ckptfs_sync(m)
    other = _elsewhere(bucket, mount, tmp_path, "cache-o")
    for d in ("x", "y", "z"):
        os.listdir(other / d)  # listed: its attributes known
    st = os.stat(other / "x")
    assert (st.st_mode, st.st_gid) == (0o40755, 5678)
    os.rename(m / "y", m / "x")
    os.chmod(m / "z", 0o750)
    ckptfs_sync(m)
    time.sleep(4 * helpers.OBSERVER_LISTING_S + 0.3)
    st = os.stat(other / "x")
    assert (oct(st.st_mode), st.st_gid) == (oct(0o40700), 0), \
        "the first stat showed the replaced directory's attributes"
    assert os.stat(other / "z").st_mode == 0o40750, \
        "the first stat showed the mode before the chmod"
    assert os.listdir(other / "x") == ["f"]


def test_changes_of_files_just_committed(bucket, mount, tmp_path):
    """Right after a sync, before anything listed the checkpoint directory
    again, a chmod of its committed file is stored in its manifest (an
    addendum), not as a plain object its manifest hides from readers:
    another mount, and the writer after a remount, show it, and the
    directory keeps the mtime it recorded (a plain object put there moved
    it to that object's LastModified).  So are a utimensat and a setxattr
    of a file in a subdirectory.  Found by helper-33 writing the format-2
    compat fixture: the chmod went out as a plain object when the
    directory's listing was the one held from before its commit (the
    stat of sub after the sync answers from it), whose manifest is the
    intent, not the committed one (fs/write-txn.c
    wr_manifest_root_known)."""
    opts = [f"cache_dir={tmp_path / 'cache-w'}", "lease=2",
            "commit_delay=600"]
    m = mount(bucket, "run", options=opts)
    d = m.path / "ckpt"
    os.makedirs(d / "sub")
    (d / "model.bin").write_bytes(b"x" * 3000)
    (d / "sub" / "o.bin").write_bytes(b"y" * 300)
    os.utime(d / "sub", ns=(1, 1700000000123456789))
    os.utime(d, ns=(1, 1700000001123456789))
    assert os.stat(d / "sub").st_mtime_ns == 1700000000123456789
    ckptfs_sync(m.path)
    assert os.stat(d).st_mtime_ns == 1700000001123456789
    assert os.stat(d / "sub").st_mtime_ns == 1700000000123456789
    os.chmod(d / "model.bin", 0o640)
    ckptfs_sync(m.path)
    other = mount(bucket, "run", options=helpers.observer_options(
        tmp_path / "cache-o"))

    def view(top):
        c = top / "ckpt"
        return (os.stat(c / "model.bin").st_mode, os.stat(c).st_mtime_ns)
    want = (0o100640, 1700000001123456789)
    assert view(m.path) == want
    assert view(other.path) == want
    os.utime(d / "sub" / "o.bin", ns=(1, 1600000000000000007))
    os.setxattr(d / "sub" / "o.bin", "user.k", b"v")
    ckptfs_sync(m.path)

    def sub_view(top):
        o = top / "ckpt" / "sub" / "o.bin"
        try:
            return (os.stat(o).st_mtime_ns, os.getxattr(o, "user.k"))
        except OSError as e:  # ENODATA: not shown yet
            return e.errno
    helpers.wait_for(lambda: sub_view(other.path) ==
                     (1600000000000000007, b"v"), 15, "the file's changes")
    assert m.unmount() == []
    m = mount(bucket, "run", options=opts)
    assert view(m.path) == want
    assert sub_view(m.path) == (1600000000000000007, b"v")


ADDENDUM_PUT = r"/\.ckptfs/manifest\."


@pytest.mark.timeout(240)
def test_committed_directory_changes_through_faults_and_a_kill(
        s3server, bucket, mount, tmp_path):
    """A change of a committed directory is a step of its own (one
    addendum PUT): it lands through 503s and a reset after the server
    acted (retried, the same key and bytes again), and a writer SIGKILLed
    while that PUT stalls shows the change again once mounted again (the
    journal keeps the step) and stores it then; another host sees each."""
    from faultproxy import FaultProxy
    mp = tmp_path / "mnt"
    mp.mkdir()
    opts = [f"cache_dir={tmp_path / 'cache-w'}"]
    other = _elsewhere(bucket, mount, tmp_path, "cache-o")
    with FaultProxy(s3server.endpoint, seed=22) as proxy:
        argv = mount.argv(bucket, "", mp, opts, endpoint=False)
        argv += ["--endpoint", proxy.endpoint, "--region", s3server.region]
        w = mount(bucket, argv=argv, mountpoint=mp, timeout=60)
        _dir_tree(w / "ckpt-1")
        ckptfs_sync(w)
        time.sleep(0.5)
        want = _dirs_view(w / "ckpt-1")
        proxy.rule("503", method="PUT", path_re=ADDENDUM_PUT, count=2)
        proxy.rule("reset_after", method="PUT", path_re=ADDENDUM_PUT)
        os.chmod(w / "ckpt-1" / "sub", 0o711)
        want["sub"]["mode"] = oct(0o40711)
        ckptfs_sync(w)
        hit = sorted(e.action for e in proxy.events
                     if e.action in ("503", "reset_after"))
        assert hit == ["503", "503", "reset_after"], proxy.events
        helpers.wait_for(lambda: _dirs_view(other / "ckpt-1") == want, 15,
                         "the change through faults on the other mount")
        proxy.rule("stall_before", method="PUT", path_re=ADDENDUM_PUT,
                   count=None)
        os.chown(w / "ckpt-1" / "sub" / "deeper", 9, 10)
        os.setxattr(w / "ckpt-1", "user.after", b"kill")
        want["sub/deeper"].update(uid=9, gid=10)
        want["."]["xattrs"]["user.after"] = b"kill"
        assert _dirs_view(w / "ckpt-1") == want
        helpers.kill_ckptfs(w)
        proxy.clear()
        proxy.reset_stalled()
    assert _dirs_view(other / "ckpt-1") != want  # not stored before
    w2 = mount(bucket, mountpoint=mp, options=opts)
    assert _dirs_view(w2 / "ckpt-1") == want  # shown from the journal
    ckptfs_sync(w2)
    helpers.wait_for(lambda: _dirs_view(other / "ckpt-1") == want, 15,
                     "the changes resumed after the kill on the other mount")
    assert _dirs_view(_remounted(w2, bucket, mount, opts) / "ckpt-1") == want


def _killable_writer_with_tree(bucket, mount, tmp_path):
    """A writer (its own mount point, cache and journal, commits held for
    commit_delay) that made _dir_tree's ckpt-1: (mount, mount point,
    options) to mount it again after a kill."""
    mp = tmp_path / "mnt"
    mp.mkdir()
    opts = (f"cache_dir={tmp_path / 'cache-w'}", "commit_delay=600")
    w = mount(bucket, mountpoint=mp, options=opts)
    _dir_tree(w / "ckpt-1")
    return w, mp, opts


@pytest.mark.timeout(120)
def test_sigkill_keeps_directory_metadata(bucket, mount, tmp_path):
    """A writer killed before its directory committed: the restarted
    mount commits the directories' xattrs and times too (journal version
    5 keeps directory xattrs)."""
    w, mp, opts = _killable_writer_with_tree(bucket, mount, tmp_path)
    want = _dirs_view(w / "ckpt-1")
    helpers.kill_ckptfs(w)
    w2 = mount(bucket, mountpoint=mp, options=opts)
    assert _dirs_view(w2 / "ckpt-1") == want
    ckptfs_sync(w2)
    other = _elsewhere(bucket, mount, tmp_path, "cache-o")
    assert _dirs_view(other / "ckpt-1") == want


@pytest.mark.timeout(120)
def test_sigkill_with_files_pending_in_committed_directories(
        bucket, mount, tmp_path):
    """Files written into committed directories, then a SIGKILL before
    they committed: the restarted mount shows those directories with the
    mode, owner and xattrs they have, at once and after the resumed
    commits (before: the restart's stand-in for each directory, 0755 and
    root's, showed until a resumed commit landed, then stayed until the
    next listing; model seed 7101)."""
    w, mp, opts = _killable_writer_with_tree(bucket, mount, tmp_path)
    w = _remounted(w, bucket, mount, opts)

    def no_times(view):
        return {k: {f: v for f, v in d.items() if f != "mtime"}
                for k, d in view.items()}
    # a new directory's commit waits for commit_delay; the files after
    # it wait their turn in the queue
    (w / "ckpt-1" / "sub" / "made").mkdir(mode=0o750)
    (w / "ckpt-1" / "sub" / "deeper" / "new").write_bytes(b"n" * 100)
    (w / "ckpt-1" / "other" / "new").write_bytes(b"m" * 100)
    want = no_times(_dirs_view(w / "ckpt-1"))
    helpers.kill_ckptfs(w)
    w2 = mount(bucket, mountpoint=mp, options=opts)
    assert no_times(_dirs_view(w2 / "ckpt-1")) == want, "right after the restart"
    ckptfs_sync(w2)
    assert no_times(_dirs_view(w2 / "ckpt-1")) == want, "after the resumed commits"
    assert (w2 / "ckpt-1" / "sub" / "deeper" / "new").read_bytes() == b"n" * 100


# --------------------------------------------------------------------------
# Removing the last name of a committed directory leaves the directory
# (issue 22 point 3)

def _nested(top):
    os.makedirs(top / "a" / "b" / "c")
    (top / "y").mkdir()
    os.chmod(top / "y", 0o710)
    (top / "y" / "g").write_bytes(b"g")
    (top / "z").write_bytes(b"z")


def _nested_view(top):
    return sorted((os.path.relpath(d, top), sorted(dn + fn))
                  for d, dn, fn in os.walk(top))


WANT_NESTED = [(".", ["a", "y", "z"]), ("a", ["b"]), ("a/b", []),
               ("y", [])]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kill", [False, True])
def test_rmdir_of_a_leaf_keeps_its_parents(bucket, mount, tmp_path, kill):
    """rmdir nested/a/b/c and unlink of y's only file in a committed tree
    remove only what they name: a/b and y stay, empty, with their mode,
    on every mount (before, b, a and y went too: a prefix with nothing
    under it is gone).  kill: the writer is SIGKILLed once the deletes
    are journaled, and converges when mounted again."""
    cdir = tmp_path / "cache-w"
    mp = tmp_path / "mnt"
    mp.mkdir()
    opts = (f"cache_dir={cdir}",)
    m = mount(bucket, mountpoint=mp, options=opts)
    _nested(m / "nested")
    ckptfs_sync(m)
    m = _remounted(m, bucket, mount, opts)
    top = m / "nested"
    os.rmdir(top / "a" / "b" / "c")
    os.unlink(top / "y" / "g")
    assert _nested_view(top) == WANT_NESTED
    if kill:
        time.sleep(1.5)  # held deletes are journaled after 1 s of quiet
        helpers.kill_ckptfs(m)
        m = mount(bucket, mountpoint=mp, options=opts)
    ckptfs_sync(m)
    other = _elsewhere(bucket, mount, tmp_path, "cache-o")
    assert _nested_view(other / "nested") == WANT_NESTED
    assert oct(os.lstat(other / "nested" / "y").st_mode) == oct(0o40710)
    assert _nested_view(_remounted(m, bucket, mount, opts) /
                        "nested") == WANT_NESTED


WANT_RENAMED_OUT = [(".", ["a", "c2", "g2", "y", "z"]), ("a", ["b"]),
                    ("a/b", []), ("c2", []), ("y", [])]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kill", [False, True])
def test_rename_of_the_last_name_keeps_its_directory(bucket, mount, tmp_path,
                                                     kill):
    """mv of the last name out of a committed directory (nested/a/b/c, a
    directory, and y/g, a file, to the top) leaves a/b and y, empty, with
    y's mode, on every mount, as on a local disk (before, they went: a
    prefix with nothing under it is gone).  kill: the writer is SIGKILLed
    right after the renames and mounted again."""
    cdir = tmp_path / "cache-w"
    mp = tmp_path / "mnt"
    mp.mkdir()
    opts = (f"cache_dir={cdir}",)
    m = mount(bucket, mountpoint=mp, options=opts)
    _nested(m / "nested")
    ckptfs_sync(m)
    m = _remounted(m, bucket, mount, opts)
    top = m / "nested"
    os.rename(top / "a" / "b" / "c", top / "c2")
    os.rename(top / "y" / "g", top / "g2")
    assert _nested_view(top) == WANT_RENAMED_OUT
    if kill:
        helpers.kill_ckptfs(m)
        m = mount(bucket, mountpoint=mp, options=opts)
        assert _nested_view(m / "nested") == WANT_RENAMED_OUT
    ckptfs_sync(m)
    other = _elsewhere(bucket, mount, tmp_path, "cache-o")
    assert _nested_view(other / "nested") == WANT_RENAMED_OUT
    assert oct(os.lstat(other / "nested" / "y").st_mode) == oct(0o40710)
    assert _nested_view(_remounted(m, bucket, mount, opts) /
                        "nested") == WANT_RENAMED_OUT


# --------------------------------------------------------------------------
# A committed directory renamed inside its transaction root keeps what it
# recorded (issue 22 point 1: "after remount and rename")

def _files_view(top):
    out = {}
    for dirpath, _d, filenames in os.walk(top):
        for n in filenames:
            p = os.path.join(dirpath, n)
            out[os.path.relpath(p, top)] = _seen(p)
    return out


def _moved(view, old, new):
    """view with the keys under old (relative paths) under new instead."""
    out = {}
    for k, v in view.items():
        if k == old or k.startswith(old + "/"):
            k = new + k[len(old):]
        out[k] = v
    return out


@pytest.mark.timeout(120)
def test_rename_inside_a_transaction_root_keeps_directory_metadata(
        bucket, mount, tmp_path):
    """ckpt-1/sub (with sub/deeper and sub/empty) renamed to ckpt-1/moved
    once committed: every directory moved keeps its mode, owner, user
    xattrs and mtime, and every file its attributes, on another mount and
    after a remount.  Before, the moved directories showed mode 0755,
    owned by the mounting user, without xattrs."""
    m, opts = _writer(bucket, mount, tmp_path)
    top = m / "ckpt-1"
    _dir_tree(top)
    os.chmod(top / "sub" / "f", 0o604)
    os.setxattr(top / "sub" / "f", "user.f", b"file")
    os.utime(top / "sub" / "f", ns=(T_OLD, T_EXPLICIT))
    ckptfs_sync(m)
    dirs = _dirs_view(top)
    files = _files_view(top)
    os.rename(top / "sub", top / "moved")
    ckptfs_sync(m)
    want_dirs = _moved(dirs, "sub", "moved")
    want_files = _moved(files, "sub", "moved")
    # the root itself: a name went and one came, its mtime may move
    del want_dirs["."]["mtime"]

    def seen(t):
        d = _dirs_view(t)
        del d["."]["mtime"]
        return d, _files_view(t)
    def check(t, where):
        d, f = seen(t)
        bad = {k: (d.get(k), want_dirs.get(k))
               for k in set(d) | set(want_dirs)
               if d.get(k) != want_dirs.get(k)}
        bad.update({k: (f.get(k), want_files.get(k))
                    for k in set(f) | set(want_files)
                    if f.get(k) != want_files.get(k)})
        assert not bad, f"{where}: {bad}"
    check(top, "writer")
    check(_elsewhere(bucket, mount, tmp_path, "cache-b") / "ckpt-1",
          "another mount")
    check(_remounted(m, bucket, mount, opts) / "ckpt-1", "remount")


@pytest.mark.timeout(120)
def test_rename_out_of_a_transaction_root_keeps_directory_metadata(
        bucket, mount, tmp_path):
    """ckpt-1/sub (recorded in ckpt-1's manifests, none of its own)
    renamed to the top once committed and listed: the first stat of the
    new name shows its mode, owner, user xattrs and mtime at once, as do
    its subdirectories, on the writer, another mount and after a remount.
    Before, the writer showed the new name with mode 0755, owned by the
    mounting user, until its listing's refresh (model seed 7100)."""
    m, opts = _writer(bucket, mount, tmp_path)
    top = m / "ckpt-1"
    _dir_tree(top)
    ckptfs_sync(m)
    dirs = _dirs_view(top / "sub")  # lists it: the rename moves a listing
    files = _files_view(top / "sub")
    os.rename(top / "sub", m / "moved")

    def check(t, where):
        d, f = _dirs_view(t), _files_view(t)
        bad = {k: (d.get(k), dirs.get(k)) for k in set(d) | set(dirs)
               if d.get(k) != dirs.get(k)}
        bad.update({k: (f.get(k), files.get(k))
                    for k in set(f) | set(files) if f.get(k) != files.get(k)})
        assert not bad, f"{where}: {bad}"
    check(m / "moved", "writer, at once")
    ckptfs_sync(m)
    check(m / "moved", "writer, after a sync")
    check(_elsewhere(bucket, mount, tmp_path, "cache-b") / "moved",
          "another mount")
    check(_remounted(m, bucket, mount, opts) / "moved", "remount")


# --------------------------------------------------------------------------
# A removal moves its directory's mtime on every mount (issue 22 point 1)

@pytest.mark.timeout(120)
def test_removal_moves_the_directory_mtime(bucket, mount, tmp_path):
    """unlink and rmdir of a name move the directory's mtime, as on a
    local disk: in a directory this mount still holds (the commit records
    the time), and in committed directories, a transaction root and one
    below it (the delete stores the directory's object again), on the
    writer, another mount and after a remount.  Before, a committed
    directory kept its recorded mtime on every mount."""
    m, opts = _writer(bucket, mount, tmp_path)
    for top in ("local", "ckpt"):
        (m / top / "sub" / "gone").mkdir(parents=True)
        for d in (m / top, m / top / "sub"):
            for n in ("a", "b"):
                (d / n).write_bytes(n.encode())
            os.utime(d, ns=(T_OLD, T_OLD))
    ckptfs_sync(m)
    m = _remounted(m, bucket, mount, opts)
    (m / "local2" / "sub").mkdir(parents=True)
    for d in (m / "local2", m / "local2" / "sub"):
        for n in ("a", "b"):
            (d / n).write_bytes(n.encode())
        os.utime(d, ns=(T_OLD, T_OLD))
    before = time.time_ns()
    for top in ("local2", "ckpt"):
        os.unlink(m / top / "b")
        os.unlink(m / top / "sub" / "b")
        if top == "ckpt":
            os.rmdir(m / top / "sub" / "gone")
    dirs = ("ckpt", "ckpt/sub", "local2", "local2/sub")

    def mtimes(root):
        return {d: os.lstat(root / d).st_mtime_ns for d in dirs}

    def moved(seen):
        # second resolution at least: the bucket's LastModified
        return all(t >= before - 1_000_000_000 for t in seen.values())
    assert moved(mtimes(m)), mtimes(m)
    ckptfs_sync(m)
    time.sleep(1.5)  # the writer's local nodes go: it reads the bucket
    assert moved(mtimes(m)), mtimes(m)
    other = _elsewhere(bucket, mount, tmp_path, "cache-b")
    assert moved(mtimes(other)), mtimes(other)
    try:
        helpers.wait_for(lambda: mtimes(other) == mtimes(m), 10,
                         "the writer and another mount agree")
    except AssertionError:
        raise AssertionError(f"{mtimes(m)} != {mtimes(other)}")
    assert moved(mtimes(_remounted(m, bucket, mount, opts))), "remount"
    assert sorted(os.listdir(other / "ckpt" / "sub")) == ["a"]


@pytest.mark.timeout(180)
def test_directory_mtime_after_store_mkdir_and_rename(bucket, mount,
                                                      tmp_path):
    """In committed directories: a file stored again (chmod, touch, new
    bytes) leaves its directory's mtime and ctime alone; a mkdir, or a
    rename of a directory, moves its parent's mtime, as on a local disk.
    The writer, another mount and a remount show the same times.  Before,
    another mount (and a remount) showed the stored file's LastModified as
    its directory's mtime and ctime, and the mkdir's and rename's parents
    kept their old mtime there."""
    m, opts = _writer(bucket, mount, tmp_path)
    for d in ("ckpt/keep", "ckpt/make", "ckpt/ren/d1", "ckpt/top"):
        (m / d).mkdir(parents=True)
    for d in ("ckpt/keep", "ckpt/make", "ckpt/ren/d1"):
        for n in ("a", "b", "c"):
            (m / d / n).write_bytes(n.encode())
    for d in ("ckpt/keep", "ckpt/make", "ckpt/ren/d1", "ckpt/ren",
              "ckpt/top", "ckpt"):
        os.utime(m / d, ns=(T_OLD, T_OLD))
    ckptfs_sync(m)
    m = _remounted(m, bucket, mount, opts)
    dirs = ("ckpt", "ckpt/keep", "ckpt/make", "ckpt/ren")

    def times(root):
        return {d: (os.lstat(root / d).st_mtime_ns,
                    os.lstat(root / d).st_ctime_ns) for d in dirs}

    was = times(m)
    assert all(t[0] == T_OLD for t in was.values()), was
    time.sleep(1.1)  # a LastModified is in whole seconds
    before = time.time_ns()
    os.chmod(m / "ckpt/keep/a", 0o600)
    os.utime(m / "ckpt/keep/b", ns=(T_OLD, T_OLD + 5))
    (m / "ckpt/keep/c").write_bytes(b"new bytes")
    (m / "ckpt/make/new").mkdir()
    os.rename(m / "ckpt/ren/d1", m / "ckpt/ren/d2")
    ckptfs_sync(m)

    def right(seen):
        return (seen["ckpt/keep"] == was["ckpt/keep"] and
                seen["ckpt"] == was["ckpt"] and
                all(seen[d][0] >= before and seen[d][1] >= before
                    for d in ("ckpt/make", "ckpt/ren")))

    time.sleep(1.5)  # the writer's local nodes go: it reads the bucket
    mine = times(m)
    assert right(mine), (was, mine)
    other = _elsewhere(bucket, mount, tmp_path, "cache-b")
    assert times(other) == mine, "another mount"
    assert times(_remounted(m, bucket, mount, opts)) == mine, "remount"


# --------------------------------------------------------------------------
# The writer's own view of a name it just committed in a subdirectory of a
# transaction root (model seed 7708)

def _walk_reading(top):
    """Every directory's names under top, reading each file and its
    xattrs on the way (as `cp -a` or the model's snapshot do), which
    spaces the listings of a directory and of its subdirectories."""
    names = {}
    for d, dn, fn in os.walk(top):
        names[os.path.relpath(d, top)] = set(dn + fn)
        for f in fn:
            p = os.path.join(d, f)
            os.listxattr(p, follow_symlinks=False)
            if not os.path.islink(p):
                with open(p, "rb") as fh:
                    fh.read()
    return names


@pytest.mark.timeout(180)
def test_a_name_committed_in_a_subdirectory_stays_listed(bucket, mount,
                                                          tmp_path):
    """ckpt/sub is a committed directory inside the transaction root ckpt;
    a symlink made in it commits alone, recorded in an addendum of ckpt.
    A listing of ckpt/sub taken after that commit landed was filtered by
    ckpt's manifests as listed before it, without the addendum, so the
    symlink vanished from the writer's own view until ckpt was listed
    again (a tree walk reading files listed ckpt, then the commit landed,
    then it listed ckpt/sub): before, most of the 15 rounds lost it."""
    m = mount(bucket, options=(f"cache_dir={tmp_path / 'cache'}",
                               "commit_delay=3600"))
    top = m / "ckpt"
    os.makedirs(top / "sub")
    for k in range(20):
        (top / f"shard-{k}").write_bytes(os.urandom(100_000))
    (top / "sub" / "y").write_bytes(b"y")
    ckptfs_sync(m)
    lost = []
    for i in range(15):
        os.chown(top / "sub", 1000 + i, 0)  # a step of the directory's own
        os.symlink("y", top / "sub" / f"link-{i}")
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            if f"link-{i}" not in _walk_reading(m).get("ckpt/sub", set()):
                lost.append(i)
                break
    assert lost == []


@pytest.mark.timeout(180)
def test_a_listing_opened_before_a_commit_landed_shows_what_it_committed(
        s3server, bucket, mount, tmp_path):
    """A committed file rewritten; a directory listing opened (os.scandir:
    opendir) while its commit is on its way and read after it landed.  The
    file shows what the commit stored: its new size and the mtime of the
    write, not the mtime the manifest listed before the commit recorded
    (model seed 8200: os.walk showed a file's new size with its old
    mtime)."""
    import re
    import threading
    from faultproxy import FaultProxy
    addendum = re.compile(r"/f1/\.ckptfs/manifest\.[^/]*\.\d+\.json$")
    armed, reached, release = (threading.Event(), threading.Event(),
                               threading.Event())

    def hold(method, path, query, headers):
        if method == "PUT" and armed.is_set() and addendum.search(path):
            reached.set()
            release.wait(60)
        return None

    mp = tmp_path / "mnt"
    mp.mkdir()
    old_mtime = 1_000_000_000_123_456_789  # 2001
    with FaultProxy(s3server.endpoint, inspect=hold) as proxy:
        argv = mount.argv(bucket, "", mp, [f"cache_dir={tmp_path}/cache-w"],
                          endpoint=False)
        argv += ["--endpoint", proxy.endpoint, "--region", s3server.region]
        w = mount(bucket, argv=argv, mountpoint=mp, timeout=60)
        (w / "f1").mkdir()
        (w / "f1" / "a").write_bytes(b"v1" * 4000)
        ckptfs_sync(w)
        os.utime(w / "f1" / "a", ns=(old_mtime, old_mtime))
        ckptfs_sync(w)
        assert os.lstat(w / "f1" / "a").st_mtime_ns == old_mtime
        assert sorted(os.listdir(w / "f1")) == ["a"]  # listed, as recorded
        armed.set()
        before = time.time_ns()
        with open(w / "f1" / "a", "r+b") as f:
            f.seek(20000)
            f.write(b"v2" * 3000)
        try:
            assert reached.wait(30), "the rewrite's commit never came"
            it = os.scandir(w / "f1")  # opendir: the commit on its way
        finally:
            armed.clear()
            release.set()
        try:
            ckptfs_sync(w)  # landed
            names = sorted(e.name for e in it)  # readdir after it
        finally:
            it.close()
        assert names == ["a"]
        st = os.lstat(w / "f1" / "a")
        assert st.st_size == 26000
        assert st.st_mtime_ns >= before - 10**9, (
            f"mtime {st.st_mtime_ns}: the write was at {before} "
            f"(the old record said {old_mtime})")
        assert w.unmount() == []


def test_removexattr_of_a_plain_committed_file_reaches_other_mounts(
        bucket, mount, tmp_path):
    """A file outside any checkpoint directory keeps its attributes in its
    object's metadata; removexattr stores it again without the name.
    Another mount that had read the name must drop it (before, it kept the
    xattrs of the version it read first when the new version recorded
    none: model seed 8515), and so must a fresh one."""
    w, _ = _writer(bucket, mount, tmp_path)
    (w / "c").write_bytes(b"c" * 1217)
    os.setxattr(w / "c", "user.k", b"xyz")
    os.setxattr(w / "c", "user.m", b"kept")
    ckptfs_sync(w)
    other = _elsewhere(bucket, mount, tmp_path, "cache-o")
    helpers.wait_for(lambda: os.getxattr(other / "c", "user.k") == b"xyz",
                     10, "the xattr on the other mount")
    os.removexattr(w / "c", "user.k")
    os.removexattr(w / "c", "user.m")
    ckptfs_sync(w)
    assert os.listxattr(w / "c") == []
    helpers.wait_for(lambda: os.listxattr(other / "c") == [], 10,
                     "the removed names gone on the other mount")
    fresh = _elsewhere(bucket, mount, tmp_path, "cache-f")
    assert os.listxattr(fresh / "c") == []


def test_a_plain_file_replaced_by_another_tool_shows_the_defaults(
        s3server, bucket, mount, tmp_path):
    """A file outside any checkpoint directory that another tool replaced
    (a PUT without ckptfs's metadata) shows what any object written by
    another tool shows: the mount's default mode and owner and the
    object's LastModified, on a mount that had read the version ckptfs
    wrote as on a fresh one.  Before, a mount that had read the old
    version kept its mode and owner."""
    w, _ = _writer(bucket, mount, tmp_path)
    (w / "c").write_bytes(b"c" * 1217)
    os.chmod(w / "c", 0o600)
    os.chown(w / "c", 1234, 5678)
    os.utime(w / "c", ns=(10**18, 10**18))
    ckptfs_sync(w)
    other = _elsewhere(bucket, mount, tmp_path, "cache-o")

    def attrs(m):
        st = os.lstat(m / "c")
        return (oct(st.st_mode), st.st_uid, st.st_gid, st.st_size)
    helpers.wait_for(lambda: attrs(other) == (oct(0o100600), 1234, 5678, 1217),
                     10, "the writer's attributes on the other mount")
    s3server.put(bucket, "c", b"replaced by another tool\n")
    t_put = time.time()
    fresh = _elsewhere(bucket, mount, tmp_path, "cache-f")
    want = (oct(0o100644), 0, 0, 25)
    assert attrs(fresh) == want
    helpers.wait_for(lambda: attrs(other) == want, 10,
                     "the defaults on the mount that had read the old version")
    for m in (fresh, other):
        assert abs(os.lstat(m / "c").st_mtime - t_put) < 30
        assert (m / "c").read_bytes() == b"replaced by another tool\n"
