"""POSIX semantics on a shared host (issue 15): a differential test.

posix_cases.py holds a table of calls (chmod, lchown, link, mkdir, mkfifo,
mknod, open, rename, rmdir, symlink, truncate, unlink, utimensat, bind,
xattrs) x file type (regular, directory, symlink, FIFO, socket, character
and block device) x caller (root, the owner, a member of the file's group,
another user) x directory (plain, read-only, sticky, set-group-ID).  Each
case runs on an allow_other ckptfs mount and on a local tmpfs, as real
users made here with useradd, and the return value, errno and resulting
stat fields are compared by name.  Every case where they differ must be in
KNOWN, which doc/posix.md explains line by line, so a new divergence fails
the test and a fixed one asks to be taken off the list.

A second pass runs the table again after the fixtures were committed to the
bucket (`ckptfs sync`), so the calls meet remote names, not the overlay.
"""
import fnmatch
import grp
import json
import os
import pwd
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import helpers
from helpers import ckptfs_commit, ckptfs_sync, run

HERE = Path(__file__).resolve().parent
USERS = {"owner": "ckptpx-owner", "group": "ckptpx-group",
         "other": "ckptpx-other"}
GROUPS = {"g_owner": "ckptpx-gown", "g_other": "ckptpx-goth",
          "g_shared": "ckptpx-gshr"}

# The committed pass's divergences, doc/posix.md "Names already committed"
# (each: case name patterns, and the only fields that may differ)
DIR_TIMES = (".mtime", ".ctime", ".atime")  # the case directory's
COMMITTED = [
    # hard links: EPERM (doc/posix.md "Hard links")
    "link/*/root", "link/*/owner",
    # the bucket keeps no atime: a committed name shows its mtime
    (["utimensat-set/*", "utimensat-omit-now/*"], ["x.atime"]),
]
# (none since the commits that store a file again, make a name or rename
# a directory in a committed directory record its attributes: doc/posix.md
# "Directory attributes")
ELSEWHERE = []
# Divergences doc/posix.md explains (fnmatch patterns over case names),
# per pass.
KNOWN = {
    # hard links: EPERM (doc/posix.md "Hard links")
    "local": ["link/*/root", "link/*/owner"],
    # names already committed (doc/posix.md "Names already committed"),
    # on the writer and on a second mount after a sync
    "committed": COMMITTED,
    "committed-elsewhere": COMMITTED + ELSEWHERE,
}
# the committed pass: agreement per family of calls (_family) at least,
# per view (measured 2026-11-29 on the representative subset, the writer
# and the second mount alike: attrs 65/72, data 39/39, link 4/7, make
# 110/110, paths 14/14, remove 28/28, rename 43/43, xattr 14/14; before
# changes of committed directories were stored: attrs 59/72, xattr 13/14)
FLOORS = {
    "committed": {"attrs": 0.85, "data": 0.95, "link": 0.5, "make": 0.95,
                  "paths": 0.95, "remove": 0.95, "rename": 0.95,
                  "xattr": 0.95},
    "committed-elsewhere": {"attrs": 0.85, "data": 0.95, "link": 0.5,
                            "make": 0.95, "paths": 0.95, "remove": 0.95,
                            "rename": 0.95, "xattr": 0.95},
}
# and in all (317/327 = 96.9% on each view; the rest is what KNOWN lists:
# hard links and atime; 310/327 before changes of committed directories
# were stored)
COMMITTED_TARGET = 0.95


def _known(lookup, name):
    try:
        lookup(name)
        return True
    except KeyError:
        return False


def _add_id(cmd, lookup, name):
    """groupadd/useradd NAME unless it exists.  Another test session on
    the machine (a second run beside this one) may add the same name at
    the same moment: a failure is fine when the name exists afterwards,
    and one on the other's lock is tried again."""
    for _ in range(50):
        if _known(lookup, name):
            return
        if run(cmd, check=False).returncode == 0:
            return
        time.sleep(0.1)
    if not _known(lookup, name):
        run(cmd)  # fails with the command's own message


def _ensure_ids():
    for g in GROUPS.values():
        _add_id(["groupadd", g], grp.getgrnam, g)
    spec = {"owner": ("g_owner", ["g_shared"]),
            "group": ("g_other", ["g_owner"]),
            "other": ("g_other", [])}
    for role, name in USERS.items():
        prim, sup = spec[role]
        cmd = ["useradd", "-M", "-N", "-s", "/usr/sbin/nologin",
               "-g", GROUPS[prim]]
        if sup:
            cmd += ["-G", ",".join(GROUPS[s] for s in sup)]
        _add_id(cmd + [name], pwd.getpwnam, name)
    ids = {"groups": {k: grp.getgrnam(v).gr_gid for k, v in GROUPS.items()}}
    for role, name in USERS.items():
        prim, sup = spec[role]
        g = ids["groups"][prim]
        ids[role] = {"uid": pwd.getpwnam(name).pw_uid, "gid": g,
                     "groups": [g] + [ids["groups"][s] for s in sup]}
    return ids


@pytest.fixture(scope="module")
def ids():
    return _ensure_ids()


@pytest.fixture
def public_dir():
    d = tempfile.mkdtemp(prefix="ckptfs-posix-", dir="/tmp")
    os.chmod(d, 0o755)
    yield Path(d)
    subprocess.run(["umount", "-l", os.path.join(d, "ref")],
                   capture_output=True)
    shutil.rmtree(d, ignore_errors=True)


def _observe(root, ids, phase="all", timeout=300, subset="all",
             state=None):
    args = [sys.executable, str(HERE / "posix_cases.py"), phase, str(root),
            json.dumps(ids), subset] + ([str(state)] if state else [])
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stderr[-3000:]
    print(p.stderr.strip())
    return json.loads(p.stdout) if phase != "setup" else None


def _reference(public_dir, ids, subset="all"):
    ref = public_dir / "ref"
    ref.mkdir()
    # FUSE mounts are nosuid,nodev: the local filesystem gets the same
    run(["mount", "-t", "tmpfs", "-o", "nosuid,nodev,mode=0755", "tmpfs",
         ref])
    return _observe(ref, ids, subset=subset)


def _compare(mine, ref):
    diffs = {}
    for name, want in ref.items():
        got = mine.get(name)
        if got != want:
            d = {}
            for k in sorted(set(want) | set(got or {})):
                a, b = (got or {}).get(k), want.get(k)
                if a != b:
                    if isinstance(a, dict) and isinstance(b, dict):
                        d[k] = {f: (a.get(f), b.get(f))
                                for f in sorted(set(a) | set(b))
                                if a.get(f) != b.get(f)}
                    else:
                        d[k] = (a, b)
            diffs[name] = d
    return diffs


def _check(label, mine, ref, known, target, min_cases=500):
    diffs = _compare(mine, ref)
    n = len(ref)
    agree = n - len(diffs)
    report = "\n".join(f"  {k}: {v}" for k, v in sorted(diffs.items()))
    print(f"\n{label}: {agree}/{n} cases agree ({100.0 * agree / n:.1f}%)"
          f"\n{report}")
    if known is None:
        return
    # an entry: a pattern over case names (any field may differ), or
    # (patterns, fields): only those fields ("ret", "WATCH.FIELD", e.g.
    # ".mtime" for the case directory's) may differ
    entries = [((e,), None) if isinstance(e, str) else
               ((e[0],) if isinstance(e[0], str) else tuple(e[0]),
                set(e[1])) for e in known]

    def fields(d):
        out = set()
        for k, v in d.items():
            if isinstance(v, dict):
                out |= {(k if k != "." else "") + "." + f for f in v}
            else:
                out.add(k)  # "ret", or a name seen on one side only
        return out

    def covers(entry, k):
        return any(fnmatch.fnmatchcase(k, p) for p in entry[0])

    def explained(k):
        allowed = set()
        for e in entries:
            if covers(e, k):
                if e[1] is None:
                    return True
                allowed |= e[1]
        return fields(diffs[k]) <= allowed

    unknown = [k for k in diffs if not explained(k)]
    stale = [e[0] for e in entries
             if any(covers(e, k) for k in ref)
             and not any(covers(e, k) for k in diffs)]
    assert n >= min_cases
    assert agree >= target * n, f"{agree}/{n}\n{report}"
    assert not unknown, "divergences not in doc/posix.md:\n" + "\n".join(
        f"  {k}: {diffs[k]}" for k in sorted(unknown))
    assert not stale, f"listed divergences that no longer differ: {stale}"


@pytest.mark.timeout(240)
def test_posix_differential(public_dir, ids, s3server, bucket, mount):
    """The table on names this mount holds (made through it, not yet
    committed or just committed): the target is 95% agreement."""
    ref = _reference(public_dir, ids)
    mp = public_dir / "mnt"
    mp.mkdir()
    m = mount(bucket, mountpoint=mp, options=("allow_other",))
    root = m / "posix"
    root.mkdir()
    mine = _observe(root, ids)
    _check("local", mine, ref, KNOWN["local"], 0.95)


# families of calls (the first component of a case's name, or its start)
FAMILY_OF = (("symlink-target-kept", "paths"), ("link-to", "make"),
             ("link", "link"), ("rename", "rename"),
             ("einval-rename-into-self", "rename"), ("chmod", "attrs"),
             ("lchown", "attrs"), ("chown", "attrs"), ("utimensat", "attrs"),
             ("truncate", "data"), ("write", "data"), ("open", "data"),
             ("unlink", "remove"), ("rmdir", "remove"),
             ("setxattr", "xattr"), ("getxattr", "xattr"),
             ("mkdir", "make"), ("mkfifo", "make"), ("mknod", "make"),
             ("symlink", "make"), ("create-excl", "make"), ("bind", "make"))


def _family(case):
    """The family of calls a case belongs to (FLOORS); "paths" for the
    errors of path walks."""
    f = case.split("/")[0]
    for head, fam in FAMILY_OF:
        if f == head or f.startswith(head + "-"):
            return fam
    return "paths"


def _floors(label, mine, ref, floors):
    """Agreement per family of calls must reach its floor."""
    diffs = _compare(mine, ref)
    per = {}
    for k in ref:
        n, a = per.get(_family(k), (0, 0))
        per[_family(k)] = (n + 1, a + (k not in diffs))
    print(f"{label} by family: " + ", ".join(
        f"{f} {a}/{n}" for f, (n, a) in sorted(per.items())))
    low = {f: f"{a}/{n} < {floors[f]:.0%}" for f, (n, a) in per.items()
           if a < floors[f] * n}
    assert not low, f"{label}: families under their floor: {low}"


@pytest.mark.timeout(600)
def test_posix_differential_committed(public_dir, ids, s3server, bucket,
                                      mount):
    """The same table after the fixtures were committed, so every call
    meets a remote name: what another host, or this one after a remount,
    sees.  The fixtures are one transaction (every case directory under
    one checkpoint directory, committed by one sync), the writer is
    mounted again so nothing is held locally, the calls run, and the
    result is observed on the writer and, after a sync, on a second mount.
    Each view must reach the floor of every family of calls, and every
    difference must be listed in KNOWN (doc/posix.md, "Names already
    committed").  By default a representative third of the table
    (posix_cases.representative); CKPTFS_POSIX_COMMITTED=1 runs all of it
    (several minutes)."""
    subset = "all" if os.environ.get("CKPTFS_POSIX_COMMITTED") else "ci"
    ref = _reference(public_dir, ids, subset)
    mp = public_dir / "mnt"
    mp.mkdir()
    opts = ("allow_other", f"cache_dir={public_dir / 'cache-w'}")
    m = mount(bucket, mountpoint=mp, options=opts)
    root = m / "t"
    root.mkdir()
    t0 = time.monotonic()
    _observe(root, ids, "setup", subset=subset)
    t1 = time.monotonic()
    ckptfs_sync(m)
    t2 = time.monotonic()
    # nothing held locally: every name is the bucket's
    assert m.unmount() == []
    m = mount(bucket, mountpoint=mp, options=opts)
    root = m / "t"
    state = public_dir / "state.json"
    t3 = time.monotonic()
    committed = _observe(root, ids, "run", timeout=900, subset=subset,
                         state=state)
    t4 = time.monotonic()
    ckptfs_sync(m)
    # another host: its own cache; one listing per directory suffices
    other = mount(bucket, options=("ro", f"cache_dir={public_dir / 'cache-o'}",
                                   "dir_timeout=600"))
    elsewhere = _observe(other / "t", ids, "look", subset=subset,
                         state=state)
    print(f"committed pass ({len(ref)} cases): set-up {t1 - t0:.1f}s, "
          f"sync {t2 - t1:.1f}s, run {t4 - t3:.1f}s, second mount "
          f"{time.monotonic() - t4:.1f}s")
    failures = []
    for label, mine in (("committed", committed),
                        ("committed-elsewhere", elsewhere)):
        for check in (lambda: _floors(label, mine, ref, FLOORS[label]),
                      lambda: _check(label, mine, ref, KNOWN[label],
                                     COMMITTED_TARGET, min_cases=300)):
            try:
                check()
            except AssertionError as e:
                failures.append(str(e))
    assert not failures, "\n".join(failures)


# --------------------------------------------------------------------------
# Metadata round trip: a second mount and a remount see what was written

def _make_tree(top, ids):
    """Every type with its own mode, owner, times, device number, symlink
    target and user xattrs, inside a checkpoint-like directory (top: one
    transaction) with subdirectories of their own mode and owner."""
    top.mkdir()
    os.chown(top, ids["group"]["uid"], ids["groups"]["g_other"])
    os.chmod(top, 0o1775)
    sub = top / "sub"
    sub.mkdir(mode=0o750)
    os.chown(sub, ids["owner"]["uid"], ids["groups"]["g_shared"])
    os.chmod(sub, 0o2750)
    (top / "data.bin").write_bytes(b"x" * 1000)
    os.mkfifo(top / "pipe", 0o620)
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(top / "sock"))
    s.close()
    os.mknod(top / "tty", stat.S_IFCHR | 0o640, os.makedev(4, 67))
    os.mknod(sub / "disk", stat.S_IFBLK | 0o600, os.makedev(259, 1))
    os.symlink("../odd name/%20 é", top / "link")
    (sub / "setid").write_bytes(b"#!/bin/sh\n")
    plan = [("data.bin", "owner", "g_owner", 0o640),
            ("pipe", "other", "g_other", 0o620),
            ("sock", "group", "g_shared", 0o755),
            ("tty", "owner", "g_other", 0o640),
            ("sub/disk", "root", "g_shared", 0o600),
            ("sub/setid", "owner", "g_owner", 0o6755)]
    for i, (name, who, g, mode) in enumerate(plan):
        p = top / name
        os.chown(p, ids[who]["uid"] if who != "root" else 0, ids["groups"][g])
        os.chmod(p, mode)
        os.setxattr(p, "user.k", f"v{i}\0bin".encode()) \
            if name in ("data.bin", "sub/setid") else None
        os.utime(p, ns=(1_600_000_000_000_000_000 + i,
                        1_650_000_000_123_456_789 + i))
    os.lchown(top / "link", ids["other"]["uid"], ids["groups"]["g_other"])


def _meta(top):
    """What a user sees of top and every name under it."""
    st = os.lstat(top)
    out = {".": {"mode": oct(st.st_mode), "uid": st.st_uid,
                 "gid": st.st_gid}}
    for dirpath, dirnames, filenames in os.walk(top):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            e = {"mode": oct(st.st_mode), "uid": st.st_uid, "gid": st.st_gid}
            if not stat.S_ISDIR(st.st_mode):
                e["mtime"] = st.st_mtime_ns
                e["nlink"] = st.st_nlink
            if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                e["size"] = st.st_size
            if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
                e["rdev"] = (os.major(st.st_rdev), os.minor(st.st_rdev))
            if stat.S_ISLNK(st.st_mode):
                e["target"] = os.readlink(p)
            if stat.S_ISREG(st.st_mode):
                e["xattrs"] = {k: os.getxattr(p, k).hex()
                               for k in sorted(os.listxattr(p))}
            out[os.path.relpath(p, top)] = e
    return out


@pytest.mark.timeout(180)
def test_metadata_round_trip(public_dir, ids, s3server, bucket, mount,
                             tmp_path):
    """mode, owner, mtime, device numbers, symlink targets and user xattrs
    written on one mount read back identical from a second mount and after
    a remount, also for what a remote rename moved."""
    mp = public_dir / "mnt"
    mp.mkdir()
    opts = ("allow_other", f"cache_dir={tmp_path / 'cache-a'}")
    m = mount(bucket, mountpoint=mp, options=opts)
    top = m / "ckpt-1"
    _make_tree(top, ids)
    want = _meta(top)
    ckptfs_sync(m)
    # a rename of committed names keeps their attributes, a chown and
    # utimensat of a committed symlink keep it a symlink
    os.rename(top / "pipe", top / "pipe2")
    os.lchown(top / "link", ids["owner"]["uid"], ids["groups"]["g_shared"])
    os.utime(top / "link", ns=(5, 1_660_000_000_000_000_005),
             follow_symlinks=False)
    want["link"].update(uid=ids["owner"]["uid"],
                        gid=ids["groups"]["g_shared"],
                        mtime=1_660_000_000_000_000_005)
    os.rename(top / "data.bin", top / "data2.bin")
    want["pipe2"] = want.pop("pipe")
    want["data2.bin"] = want.pop("data.bin")
    ckptfs_sync(m)
    assert _meta(top) == want
    other = mount(bucket, options=(f"cache_dir={tmp_path / 'cache-b'}",
                                   "ro"))
    assert _meta(other / "ckpt-1") == want
    assert m.unmount() == []
    again = mount(bucket, options=opts, mountpoint=mp)
    assert _meta(again / "ckpt-1") == want
    assert stat.S_ISFIFO(os.lstat(again / "ckpt-1" / "pipe2").st_mode)


@pytest.mark.timeout(90)
def test_metadata_of_a_file_open_across_its_commit(bucket, mount, tmp_path):
    """A file open for writing while its directory commits (`ckptfs
    commit`, a subprocess: its copy of the descriptor closes in the child),
    then changed (chmod, xattr, more bytes) and closed: its last bytes and
    attributes reach another mount.  Before, the child's close handed the
    file over while the opener still wrote into its staging file, the
    commit took that file into the cache, and the real close's upload
    never found it (`ckptfs sync` waited for ever)."""
    m = mount(bucket, options=(f"cache_dir={tmp_path / 'cache-a'}",))
    top = m / "ckpt-1"
    top.mkdir()
    with open(top / "open.log", "wb") as f:
        f.write(b"first")
        f.flush()
        ckptfs_commit(top)
        os.chmod(top / "open.log", 0o604)
        os.setxattr(top / "open.log", "user.state", b"open")
        f.write(b" second")
    want = _meta(top)
    ckptfs_sync(m, timeout=20)
    other = mount(bucket, options=(f"cache_dir={tmp_path / 'cache-b'}",
                                   "ro"))
    assert _meta(other / "ckpt-1") == want


@pytest.mark.timeout(90)
def test_names_made_after_a_sync_with_a_file_open(bucket, mount, tmp_path):
    """`ckptfs sync` while a file of a new directory is open for writing,
    then more bytes, a new file and a new subdirectory there: all reach
    another mount.  Before, the sync committed the directory without
    sealing it in the overlay, so the mkdir after it failed with ENOENT
    and the files closed after it were handed to a transaction the engine
    had finished (lost)."""
    m = mount(bucket, options=(f"cache_dir={tmp_path / 'cache-a'}",
                               "commit_delay=600"))
    top = m / "ckpt-1"
    top.mkdir()
    with open(top / "open.log", "wb") as f:
        f.write(b"first")
        f.flush()
        ckptfs_sync(m, timeout=20)
        f.write(b" second")
    (top / "after").write_bytes(b"after")
    os.mkdir(top / "sub")
    (top / "sub" / "x").write_bytes(b"x")
    ckptfs_sync(m, timeout=20)
    other = mount(bucket, options=(f"cache_dir={tmp_path / 'cache-b'}",
                                   "ro"))
    assert {rel: p.read_bytes() for rel, p in
            ((str(p.relative_to(other)), p) for p in
             (other / "ckpt-1").rglob("*")) if p.is_file()} == {
        "ckpt-1/open.log": b"first second", "ckpt-1/after": b"after",
        "ckpt-1/sub/x": b"x"}


# --------------------------------------------------------------------------
# Special files through a crash: their type and device number are journaled

@pytest.mark.timeout(120)
@pytest.mark.parametrize("point", ["pending", "committing"])
def test_sigkill_keeps_special_files(public_dir, ids, s3server, bucket, mount,
                                     tmp_path, point):
    """pending: the directory was written, no commit trigger yet;
    committing: its rename (the trigger) was issued just before the kill.
    The restarted mount shows the FIFO, socket and device nodes with their
    mode, owner and device number, and commits them; another mount then
    sees the same."""
    cdir = tmp_path / "cache-w"
    mp = public_dir / "mnt"
    mp.mkdir()
    opts = (f"cache_dir={cdir}", "commit_delay=600")
    w = mount(bucket, mountpoint=mp, options=opts)
    d = w / "tmp-ckpt"
    _make_tree(d, ids)
    want = _meta(d)
    name = "tmp-ckpt"
    if point == "committing":
        os.rename(d, w / "ckpt-1")
        name = "ckpt-1"
    helpers.kill_ckptfs(w)
    w2 = mount(bucket, mountpoint=mp, options=opts)
    assert _meta(w2 / name) == want
    if name == "tmp-ckpt":
        os.rename(w2 / name, w2 / "ckpt-1")
    ckptfs_sync(w2)
    other = mount(bucket, options=(f"cache_dir={tmp_path / 'cache-o'}",
                                   "ro"))
    assert _meta(other / "ckpt-1") == want


@pytest.mark.timeout(60)
def test_hard_links_fail_with_eperm(bucket, mount):
    """link(2) answers EPERM (doc/posix.md "Hard links"): `ln` and `cp -al`
    say "Operation not permitted" and exit 1, nothing is half made, and
    `cp -a` (what to use instead) copies."""
    m = mount(bucket)
    src = m / "ckpt-1"
    src.mkdir()
    (src / "model.pt").write_bytes(b"w" * 100)
    with pytest.raises(PermissionError):
        os.link(src / "model.pt", src / "alias.pt")
    p = run(["ln", src / "model.pt", m / "alias.pt"], check=False)
    assert p.returncode == 1 and "Operation not permitted" in p.stderr
    p = run(["cp", "-al", src, m / "ckpt-2"], check=False)
    assert p.returncode == 1 and "Operation not permitted" in p.stderr
    assert not (m / "ckpt-2" / "model.pt").exists()
    run(["cp", "-a", src, m / "ckpt-3"])
    assert (m / "ckpt-3" / "model.pt").read_bytes() == b"w" * 100
    assert os.stat(m / "ckpt-3" / "model.pt").st_nlink == 1
