"""The model-based random test of ckptfs's semantics (issue 22 point 6):
the generator of random steps, the differential oracle, the comparison of
what a mount shows with it, and the shrinker.  test_model.py and
bench/model-bench.py drive it.

The oracle is a local tmpfs: every step through the mount is replayed on
it, and the mount must show what the tmpfs shows and answer every call
with the same errno, except for the differences doc/posix.md documents,
each applied by one named rule below (RULES) and nowhere else.

Steps are plain tuples (printable, so a failing sequence can be pasted
into test_model.py as a regression test):

    ("create", path, size, seed)         open(O_CREAT|O_TRUNC), write
    ("write", path, offset, size, seed)  open(O_WRONLY), pwrite, close
    ("truncate", path, size)
    ("rename", src, dst)
    ("unlink", path) ("mkdir", path, mode) ("rmdir", path)
    ("chmod", path, mode) ("chown", path, uid, gid)       (lchown)
    ("utimens", path, atime_ns, mtime_ns)   (no follow; None: UTIME_NOW)
    ("setxattr", path, name, value) ("removexattr", path, name)
    ("symlink", target, path)
    ("h2_write", name, size, seed) ("h2_unlink", name) ("h2_sync",)
                                      another host: a second writable
                                      mount, in its own subtree h2/
    ("s3_put", name, size, seed) ("s3_delete", name)
                                      another tool: boto3, subtree ext/
    ("sync",) ("remount",) ("kill",)  ckptfs sync; unmount + mount;
                                      SIGKILL + mount (same cache)
"""
import errno
import hashlib
import os
import random
import shutil
import stat
import subprocess
import time
from pathlib import Path

import helpers

H2 = "h2"     # the second writer mount's subtree
EXT = "ext"   # boto3's subtree
OTHERS = (H2, EXT)

# The documented differences (doc/posix.md) the comparison applies; the
# report of a run counts how often each one was used.
RULES = {
    "ctime-atime": "times: the bucket keeps no ctime or atime (not compared)",
    "dir-mtime": "a committed directory's mtime follows its objects' "
                 "LastModified (\"Directory attributes\"; not compared)",
    "enotsup-dir": "Changing a committed directory: chmod, chown, utimensat, "
                   "setxattr, removexattr answer ENOTSUP only while the "
                   "directory's own commit is on its way",
    "exdev": "Errors: EXDEV for a remote directory renamed into a "
             "directory this mount made and has not committed",
    "truncate-same-size": "Times: a truncate to the file's own size marks "
                          "no time (POSIX, as ext4 and XFS; tmpfs marks it "
                          "when the file holds data)",
    "other-host": "another host sees a file's last committed or current "
                  "version, whole (any one written since its last sync: a "
                  "close commits a file outside a new directory alone), "
                  "and exactly the committed state after its sync",
}

NAMES = ["a", "b", "c"]          # directory-ish names
FILES = ["f0", "f1", "f2", "g"]
XATTRS = ["user.k", "user.m"]
UIDS = [0, 1000, 1234]
GIDS = [0, 100, 5678]
T_BASE = 1_000_000_000_000_000_000   # 2001-09-09 in ns


def data_of(seed, size):
    return helpers.det_bytes(seed, size) if size else b""


# --------------------------------------------------------------------------
# The generator

class Gen:
    """Random steps over a small name space, biased to names that exist
    in the oracle so that most calls succeed and some fail."""

    def __init__(self, seed, oracle_root, others=True, crashes=True):
        self.r = random.Random(seed)
        self.root = Path(oracle_root)
        self.others = others
        self.crashes = crashes
        self.h2_names = set()
        self.ext_names = set()

    def _existing(self, kind=None):
        out = []
        for dp, dns, fns in os.walk(self.root):
            rel = os.path.relpath(dp, self.root)
            for n in dns + fns:
                p = n if rel == "." else f"{rel}/{n}"
                st = os.lstat(self.root / p)
                if kind == "dir" and not stat.S_ISDIR(st.st_mode):
                    continue
                if kind == "file" and not stat.S_ISREG(st.st_mode):
                    continue
                out.append(p)
        return sorted(out)

    def _new_path(self):
        dirs = [""] + self._existing("dir")
        d = self.r.choice(dirs)
        if d.count("/") >= 2:
            d = ""
        n = self.r.choice(NAMES + FILES)
        return f"{d}/{n}" if d else n

    def _path(self, kind=None):
        ex = self._existing(kind)
        if ex and self.r.random() < 0.8:
            return self.r.choice(ex)
        return self._new_path()

    def _size(self):
        x = self.r.random()
        if x < 0.1:
            return 0
        if x < 0.8:
            return self.r.randrange(1, 5000)
        if x < 0.97:
            return self.r.randrange(5000, 70000)
        return self.r.randrange(1 << 20, 3 << 20)

    def _mtime(self):
        if self.r.random() < 0.2:
            return None
        return T_BASE + self.r.randrange(1, 10**18)

    def step(self):
        r = self.r
        ops = [("create", 12), ("write", 12), ("truncate", 5), ("rename", 10),
               ("unlink", 5), ("mkdir", 8), ("rmdir", 4), ("chmod", 4),
               ("chown", 3), ("utimens", 5), ("setxattr", 4),
               ("removexattr", 2), ("symlink", 3), ("sync", 3)]
        if self.others:
            ops += [("h2_write", 3), ("h2_unlink", 1), ("h2_sync", 2),
                    ("s3_put", 2), ("s3_delete", 1)]
        if self.crashes:
            ops += [("remount", 1), ("kill", 1)]
        names, weights = zip(*ops)
        op = r.choices(names, weights)[0]
        if op == "create":
            return ("create", self._new_path() if r.random() < 0.6
                    else self._path("file"), self._size(), r.randrange(1 << 30))
        if op == "write":
            p = self._path("file")
            try:
                size = os.lstat(self.root / p).st_size
            except OSError:
                size = 0
            off = r.randrange(0, size + 2) if r.random() < 0.8 else \
                size + r.randrange(0, 100000)
            return ("write", p, off, self._size(), r.randrange(1 << 30))
        if op == "truncate":
            p = self._path("file")
            return ("truncate", p, r.choice([0, r.randrange(0, 10000),
                                             r.randrange(0, 200000)]))
        if op == "rename":
            return ("rename", self._path(), self._path() if r.random() < 0.5
                    else self._new_path())
        if op == "unlink":
            return ("unlink", self._path())
        if op == "mkdir":
            return ("mkdir", self._new_path(), r.choice([0o755, 0o700, 0o2775,
                                                         0o1777, 0o750]))
        if op == "rmdir":
            return ("rmdir", self._path("dir"))
        if op == "chmod":
            return ("chmod", self._path(), r.choice([0o644, 0o600, 0o755,
                                                     0o4755, 0o2750, 0o1700,
                                                     0o444, 0o0]))
        if op == "chown":
            return ("chown", self._path(), r.choice(UIDS), r.choice(GIDS))
        if op == "utimens":
            m = self._mtime()
            return ("utimens", self._path(), m, m)
        if op == "setxattr":
            return ("setxattr", self._path(), r.choice(XATTRS),
                    bytes(r.randrange(256) for _ in range(r.randrange(0, 40))))
        if op == "removexattr":
            return ("removexattr", self._path(), r.choice(XATTRS))
        if op == "symlink":
            p = self._new_path()
            t = r.choice(FILES + NAMES + ["nowhere", "a/f0", "../b"])
            if t.startswith("..") and "/" not in p:
                t = t[3:]
            return ("symlink", t, p)
        if op == "h2_write":
            n = r.choice(FILES)
            self.h2_names.add(n)
            return ("h2_write", n, self._size() % 100000, r.randrange(1 << 30))
        if op == "h2_unlink":
            return ("h2_unlink", r.choice(sorted(self.h2_names) or FILES))
        if op == "s3_put":
            n = r.choice(FILES + ["d/" + f for f in FILES[:2]])
            self.ext_names.add(n)
            return ("s3_put", n, self._size() % 100000, r.randrange(1 << 30))
        if op == "s3_delete":
            return ("s3_delete", r.choice(sorted(self.ext_names) or FILES))
        return (op,)


# --------------------------------------------------------------------------
# One call, on either root

def call(root, st):
    """Runs one filesystem step under root; returns 0 or the errno name."""
    op, args = st[0], st[1:]
    p = lambda rel: os.path.join(root, rel)  # noqa: E731
    try:
        if op == "create":
            fd = os.open(p(args[0]), os.O_CREAT | os.O_WRONLY | os.O_TRUNC,
                         0o644)
            try:
                os.write(fd, data_of(args[2], args[1]))
            finally:
                os.close(fd)
        elif op == "write":
            fd = os.open(p(args[0]), os.O_WRONLY)
            try:
                os.pwrite(fd, data_of(args[3], args[2]), args[1])
            finally:
                os.close(fd)
        elif op == "truncate":
            os.truncate(p(args[0]), args[1])
        elif op == "rename":
            os.rename(p(args[0]), p(args[1]))
        elif op == "unlink":
            os.unlink(p(args[0]))
        elif op == "mkdir":
            os.mkdir(p(args[0]), args[1])
        elif op == "rmdir":
            os.rmdir(p(args[0]))
        elif op == "chmod":
            os.chmod(p(args[0]), args[1])
        elif op == "chown":
            os.chown(p(args[0]), args[1], args[2], follow_symlinks=False)
        elif op == "utimens":
            if args[1] is None:
                os.utime(p(args[0]), follow_symlinks=False)
            else:
                os.utime(p(args[0]), ns=(args[1], args[2]),
                         follow_symlinks=False)
        elif op == "setxattr":
            os.setxattr(p(args[0]), args[1], args[2], follow_symlinks=False)
        elif op == "removexattr":
            os.removexattr(p(args[0]), args[1], follow_symlinks=False)
        elif op == "symlink":
            os.symlink(args[0], p(args[1]))
        else:
            raise ValueError(op)
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
    return 0


# --------------------------------------------------------------------------
# What a tree shows

def _node(path, rel_for_top):
    st = os.lstat(path)
    fmt = stat.S_IFMT(st.st_mode)
    n = {"type": {stat.S_IFREG: "f", stat.S_IFDIR: "d",
                  stat.S_IFLNK: "l"}.get(fmt, oct(fmt)),
         "mode": oct(stat.S_IMODE(st.st_mode)), "uid": st.st_uid,
         "gid": st.st_gid, "ino": st.st_ino}
    if fmt == stat.S_IFREG:
        n["size"] = st.st_size
        with open(path, "rb") as f:
            n["sha"] = hashlib.sha256(f.read()).hexdigest()[:16]
    if fmt == stat.S_IFLNK:
        n["target"] = os.readlink(path)
    if fmt != stat.S_IFDIR:
        n["mtime"] = st.st_mtime_ns
    if fmt in (stat.S_IFREG, stat.S_IFDIR):
        n["xattrs"] = {k: os.getxattr(path, k)
                       for k in sorted(os.listxattr(path))}
    return n


def snapshot(root, skip=OTHERS):
    """{relative path: node} of everything under root but `skip` at the
    top; a name that vanishes between its listing and its lstat is
    reported as such."""
    out = {}
    stack = [""]
    while stack:
        rel = stack.pop()
        names = os.listdir(os.path.join(root, rel) if rel else root)
        for n in names:
            r = f"{rel}/{n}" if rel else n
            if not rel and n in skip:
                continue
            try:
                out[r] = _node(os.path.join(root, r), r)
            except FileNotFoundError:
                out[r] = {"type": "vanished"}
                continue
            if out[r]["type"] == "d":
                stack.append(r)
    return out


def files_view(root, sub):
    """{name: sha} of the regular files under root/sub (another host's or
    tool's subtree), None when sub is absent.  A name the listing showed
    that open then finds gone counts as absent: a listing may show an
    object deleted since for up to dir_timeout, while open asks again
    (doc/architecture.md, "Inodes and caching of metadata": a rotation
    between listdir and open, which a local disk can do too)."""
    base = os.path.join(root, sub)
    if not os.path.isdir(base):
        return None
    out = {}
    for dp, _d, fns in os.walk(base):
        for f in fns:
            full = os.path.join(dp, f)
            try:
                with open(full, "rb") as fh:
                    out[os.path.relpath(full, base)] = \
                        hashlib.sha256(fh.read()).hexdigest()[:16]
            except FileNotFoundError:
                continue
    return out


# --------------------------------------------------------------------------
# The run

# Divergences found and not fixed (not documented differences: bugs
# left for later).  A run that meets one records it in World.known_hits
# and goes on; test_model.py keeps the reproducer as an xfail.
# Divergences the model tolerates while they are open (none now: the
# LastModified-for-a-moment mtime of a file just committed was fixed by
# fs_inode.attrs_committed; a fixed one is removed from here).
KNOWN = {}


class Divergence(AssertionError):
    def __init__(self, step_no, step, what):
        super().__init__(f"step {step_no} {step!r}: {what}")
        self.step_no, self.step, self.what = step_no, step, what

    def kind(self):
        """What diverged, without values: the shrinker keeps a smaller
        sequence only when it diverges the same way."""
        return (self.step[0] if self.step else "", self.what.split(":")[0])


class World:
    """A bucket, the writer mount, an observer mount, the second writer
    (another host), a tmpfs oracle; built by `make_world` in the tests."""

    def __init__(self, s3, bucket, mounter, workdir, check_every=1,
                 log=None):
        self.s3, self.bucket, self.mounter = s3, bucket, mounter
        self.work = Path(workdir)
        self.work.mkdir(parents=True, exist_ok=True)
        self.check_every = check_every
        self.log = log or (lambda s: None)
        self.oracle = self.work / "oracle"
        self.oracle.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o",
                        "nosuid,nodev,mode=0755,size=256m", "tmpfs",
                        str(self.oracle)], check=True)
        self.mp = self.work / "mnt"
        self.mp.mkdir()
        self.opts = (f"cache_dir={self.work / 'cache-w'}", "commit_delay=3600") + (("debug",) if os.environ.get("CKPTFS_MODEL_DEBUG") else ())
        self.m = mounter(bucket, mountpoint=self.mp, options=self.opts)
        self.h2 = None
        self.obs = None
        # inode numbers (of the oracle) of names that may be committed
        self.committed = set()
        self.explicit_mtime = set()     # oracle inodes with a set mtime
        # another host's files: committed and local versions
        self.h2_committed, self.h2_local = {}, {}
        # versions h2 wrote (None: removed) since its last sync: each
        # close of a file outside a new directory commits it alone, so any
        # of them may be the last committed one another host sees while
        # the next is on its way
        self.h2_since = {}
        self.ext = {}
        self.ext_gone = {}   # key -> [(time replaced, value)]
        self.rules_used = {k: 0 for k in RULES}
        self.known_hits = []            # (step no, step, KNOWN key, what)
        self.steps_run = 0

    def close(self):
        problems = []
        for m in (self.obs, self.h2, self.m):
            if m is not None:
                problems += m.unmount()
        subprocess.run(["umount", "-l", str(self.oracle)],
                       capture_output=True)
        return problems

    # ---------------------------------------------------------- bookkeeping
    def _ino(self, rel, follow=False):
        try:
            return (os.stat if follow else os.lstat)(self.oracle / rel).st_ino
        except OSError:
            return None

    def _subtree_inos(self, rel):
        out = set()
        base = self.oracle / rel
        if base.is_symlink() or not base.exists():
            return out
        out.add(os.lstat(base).st_ino)
        if base.is_dir():
            for dp, dns, fns in os.walk(base):
                for n in dns + fns:
                    out.add(os.lstat(os.path.join(dp, n)).st_ino)
        return out

    def _all_committed(self):
        self.committed = self._subtree_inos("")

    def _may_be_committed(self, rel):
        """Whether the name rel (the root: "") may be committed: it was
        when last synced, or it is a file (or symlink) outside any new
        directory, which commits on close (doc/commit.md,
        "Transactions"; a commit may still be on its way)."""
        if rel == "":
            return True
        if self._ino(rel) in self.committed:
            return True
        p = self.oracle / rel
        if not os.path.lexists(p) or (p.is_dir() and not p.is_symlink()):
            return False
        parent = os.path.dirname(rel)
        return parent == "" or self._ino(parent) in self.committed

    def _followed(self, rel):
        """rel with its symlinks resolved (chmod follows them: the others
        are called with follow_symlinks=False), relative to the oracle."""
        real = os.path.realpath(self.oracle / rel)
        root = os.path.realpath(self.oracle)
        if real == root:
            return ""
        if real.startswith(root + "/"):
            return real[len(root) + 1:]
        return rel

    def _open_roots(self):
        """Roots of the mount's open transactions (`ckptfs status`): the
        names under them are this mount's and not committed; any other
        name is committed or on its way (a sealed transaction)."""
        return [t["path"] for t in
                helpers.ckptfs_status(self.mp).get("pending") or []
                if t.get("state") == "open"]

    def _sealed(self, rel, roots=None):
        """Whether the directory rel is outside every open transaction of
        the mount (asked after a call that changed nothing, or before
        one: an open transaction stays open until a call seals it)."""
        if roots is None:
            roots = self._open_roots()
        return not any(rel == r or rel.startswith(r + "/") or r == ""
                       for r in roots)

    def _is_committed_dir(self, rel):
        i = self._ino(rel)
        return (i in self.committed and
                os.path.isdir(self.oracle / rel) and
                not os.path.islink(self.oracle / rel))

    # ---------------------------------------------------------- steps
    def step(self, n, st):
        op = st[0]
        self.steps_run += 1
        if op == "sync":
            helpers.ckptfs_sync(self.m)
            self._all_committed()
            self.check(n, st, observer=True)
            return
        if op in ("remount", "kill"):
            if op == "remount":
                probs = self.m.unmount()
                if probs:
                    raise Divergence(n, st, f"unmount: {probs}")
            else:
                helpers.kill_ckptfs(self.m)
            self.m = self.mounter(self.bucket, mountpoint=self.mp,
                                  options=self.opts)
            self._all_committed()
            self.check(n, st)
            return
        if op.startswith("h2_") or op.startswith("s3_"):
            self._other(n, st)
            return
        self._fs(n, st)
        if self.check_every and n % self.check_every == 0:
            self.check(n, st)

    def _fs(self, n, st):
        op = st[0]
        before_inos = None
        remote_rename = False
        if op == "rename":
            before_inos = self._subtree_inos(st[1])
            remote_rename = self._may_be_committed(st[1]) and \
                self._may_be_committed(os.path.dirname(st[2]))
        got = call(self.mp, st)
        # documented refusals: the oracle is not asked.  Whether a
        # directory is committed (or sealed) is asked of the mount after
        # the refusal: a call refused changed nothing
        if got == "ENOTSUP" and op in ("chmod", "chown", "utimens",
                                       "setxattr", "removexattr"):
            d = self._followed(st[1]) if op == "chmod" else st[1]
            if os.path.isdir(self.oracle / d) and \
                    not os.path.islink(self.oracle / d) and \
                    (self._is_committed_dir(d) or self._sealed(d)):
                self.rules_used["enotsup-dir"] += 1
                return
        if got == "EXDEV" and op == "rename" and \
                os.path.isdir(self.oracle / st[1]) and \
                not os.path.islink(self.oracle / st[1]):
            dst_parent = os.path.dirname(st[2])
            roots = self._open_roots()
            if dst_parent and not self._sealed(dst_parent, roots) and \
                    (self._is_committed_dir(st[1]) or
                     self._sealed(st[1], roots)):
                self.rules_used["exdev"] += 1
                return
        before = None
        if op == "truncate":
            try:
                before = os.stat(self.oracle / st[1])
            except OSError:
                pass
        want = call(self.oracle, st)
        if got != want:
            raise Divergence(n, st, f"errno: mount {got}, local {want}")
        if want != 0:
            return
        if before is not None and before.st_size == st[2]:
            if os.stat(self.oracle / st[1]).st_mtime_ns != \
                    before.st_mtime_ns:
                os.utime(self.oracle / st[1], ns=(before.st_atime_ns,
                                                  before.st_mtime_ns))
                self.rules_used["truncate-same-size"] += 1
            return
        if op == "utimens":
            i = self._ino(st[1])
            if st[2] is None:
                self.explicit_mtime.discard(i)
            else:
                self.explicit_mtime.add(i)
        elif op in ("create", "write", "truncate"):
            # these follow a symlink: the file written is its target's
            self.explicit_mtime.discard(self._ino(st[1], follow=True))
        elif op in ("mkdir", "symlink"):
            # a new inode may reuse the number of one whose mtime was set
            self.explicit_mtime.discard(
                self._ino(st[1] if op == "mkdir" else st[2]))
        elif op == "rename" and remote_rename:
            # a rename of a committed name commits every transaction
            # pending ahead of it (doc/commit.md, "Transactions")
            self._all_committed()
        elif op == "rename" and before_inos and \
                os.path.isdir(self.oracle / st[2]) and \
                not os.path.islink(self.oracle / st[2]):
            # a rename of a transaction root commits it
            self.committed |= before_inos

    def _other(self, n, st):
        op = st[0]
        if op == "h2_write":
            if self.h2 is None:
                self.h2 = self.mounter(
                    self.bucket, options=(f"cache_dir={self.work / 'cache-h2'}",
                                          "commit_delay=3600"))
            d = self.h2 / H2
            d.mkdir(exist_ok=True)
            data = data_of(st[3], st[2])
            (d / st[1]).write_bytes(data)
            self.h2_local[st[1]] = hashlib.sha256(data).hexdigest()[:16]
            self.h2_since.setdefault(st[1], set()).add(self.h2_local[st[1]])
        elif op == "h2_unlink":
            if self.h2 is None:
                return
            try:
                os.unlink(self.h2 / H2 / st[1])
            except FileNotFoundError:
                if st[1] in self.h2_local:
                    raise Divergence(n, st, "h2: ENOENT for a file written")
                return
            self.h2_local.pop(st[1], None)
            self.h2_since.setdefault(st[1], set()).add(None)
        elif op == "h2_sync":
            if self.h2 is None:
                return
            helpers.ckptfs_sync(self.h2)
            self.h2_committed = dict(self.h2_local)
            self.h2_since = {}
            self._wait_other(n, st, self.m.path, exact=True)
            return
        elif op == "s3_put":
            data = data_of(st[3], st[2])
            self.s3.put(self.bucket, f"{EXT}/{st[1]}", data)
            self._ext_replace(st[1], hashlib.sha256(data).hexdigest()[:16])
        elif op == "s3_delete":
            self.s3.client().delete_object(Bucket=self.bucket,
                                           Key=f"{EXT}/{st[1]}")
            self._ext_replace(st[1], None)
        self._check_other(n, st, self.m.path)

    def _ext_replace(self, key, value):
        """boto3 changed key: the old value may show while the mount's
        listing of ext/ is fresh (dir_timeout, up to 4 x 1 s)."""
        self.ext_gone.setdefault(key, []).append((time.monotonic(),
                                                  self.ext.get(key)))
        if value is None:
            self.ext.pop(key, None)
        else:
            self.ext[key] = value

    def _ext_allowed(self, key):
        now = time.monotonic()
        return {self.ext.get(key)} | {v for t, v in self.ext_gone.get(key, ())
                                      if now - t < 6}

    # ---------------------------------------------------------- checks
    def _other_ok(self, root, exact):
        """None when what root shows of h2/ and ext/ is allowed, else
        what differs."""
        h2 = files_view(root, H2)
        h2 = {} if h2 is None else h2
        if exact:
            if h2 != self.h2_committed:
                return f"h2: shows {h2}, committed {self.h2_committed}"
        else:
            for k in set(h2) | set(self.h2_committed) | set(self.h2_local):
                if h2.get(k) not in ({self.h2_committed.get(k),
                                      self.h2_local.get(k)} |
                                     self.h2_since.get(k, set())):
                    return (f"h2/{k}: shows {h2.get(k)}, committed "
                            f"{self.h2_committed.get(k)}, local "
                            f"{self.h2_local.get(k)}")
        ext = files_view(root, EXT)
        ext = {} if ext is None else ext
        if exact:
            if ext != self.ext:
                return f"ext: shows {ext}, bucket {self.ext}"
        else:
            for k in set(ext) | set(self.ext) | set(self.ext_gone):
                if ext.get(k) not in self._ext_allowed(k):
                    return (f"ext/{k}: shows {ext.get(k)}, bucket "
                            f"{self.ext.get(k)}, allowed "
                            f"{self._ext_allowed(k)}")
        return None

    def _check_other(self, n, st, root):
        bad = self._other_ok(root, exact=False)
        if bad:
            raise Divergence(n, st, f"other-host: {bad}")
        self.rules_used["other-host"] += 1

    def _wait_other(self, n, st, root, exact):
        box = []

        def ok():
            box[:] = [self._other_ok(root, exact)]
            return box[0] is None
        if not helpers.wait_until(ok, 10, 0.2):
            raise Divergence(n, st, f"other-host (after 10 s): {box[0]}")
        self.rules_used["other-host"] += 1

    def _compare(self, got, want, where):
        """Differences between a mount's snapshot and the oracle's, with
        the documented rules applied; returns a list of strings."""
        diffs = []
        for rel in sorted(set(got) | set(want)):
            g, w = got.get(rel), want.get(rel)
            if g is None or w is None:
                diffs.append(f"{rel}: {where} {'absent' if g is None else g}, "
                             f"local {'absent' if w is None else w}")
                continue
            for k in ("type", "mode", "uid", "gid", "size", "sha", "target",
                      "xattrs"):
                if g.get(k) != w.get(k):
                    diffs.append(f"{rel}: {k} {where} {g.get(k)!r}, "
                                 f"local {w.get(k)!r}")
            if "mtime" in w and "mtime" in g:
                if w["ino"] in self.explicit_mtime:
                    if g["mtime"] != w["mtime"]:
                        diffs.append(f"{rel}: mtime {where} {g['mtime']}, "
                                     f"local {w['mtime']} (set)"
                                     + (" [symlink]" if w["type"] == "l"
                                        else ""))
                elif abs(g["mtime"] - w["mtime"]) > 3 * 10**9:
                    diffs.append(f"{rel}: mtime {where} {g['mtime']}, "
                                 f"local {w['mtime']} (more than 3 s)")
        return diffs

    def _dump_bucket(self, diffs):
        """CKPTFS_MODEL_DUMP=PATH: at a divergence of the state, the
        differences and the bucket's keys (size, ETag, LastModified; the
        JSON ones' bodies) are written to PATH (a directory: to
        PATH/BUCKET.json), to read what the mount was shown."""
        path = os.environ.get("CKPTFS_MODEL_DUMP")
        if not path:
            return
        if os.path.isdir(path):
            path = os.path.join(path, f"{self.bucket}.json")
        import json
        c = self.s3.client()
        keys = {}
        for pg in c.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket):
            for o in pg.get("Contents", []):
                k = o["Key"]
                keys[k] = [o["Size"], o["ETag"],
                           o["LastModified"].isoformat()]
                if k.endswith(".json"):
                    keys[k].append(c.get_object(Bucket=self.bucket, Key=k)
                                   ["Body"].read().decode(errors="replace"))
        with open(path, "w") as f:
            json.dump({"diffs": diffs, "keys": keys}, f, indent=1)

    def check(self, n, st, observer=False):
        got = snapshot(self.mp)
        want = snapshot(self.oracle)
        diffs = self._compare(got, want, "mount")
        if diffs:
            self._dump_bucket(diffs)
            # whether the mount agrees a moment later tells a view that
            # was stale for a moment from a lasting one (the message says;
            # either is a divergence)
            time.sleep(2)
            later = self._compare(snapshot(self.mp), want, "mount")
            raise Divergence(n, st, "state: " + "; ".join(diffs[:6]) +
                             (" [2 s later: " + ("agrees" if not later
                                                 else "; ".join(later[:3]))
                              + "]"))
        self._check_other(n, st, self.mp)
        if not observer:
            return
        if self.obs is None:
            self.obs = self.mounter(self.bucket, options=helpers.observer_options(
                self.work / "cache-obs"))
        box = []

        def same():
            box[:] = [self._compare(snapshot(self.obs.path), want,
                                    "observer")]
            return not box[0]
        if not helpers.wait_until(same, 5, 0.2):
            raise Divergence(n, st, "observer: " + "; ".join(box[0][:6]))
        self._check_other(n, st, self.obs.path)


def run_steps(make_world, steps, check_every=1):
    """Runs steps on a fresh world; returns None or the Divergence (and
    the world's counters)."""
    w = make_world(check_every)
    try:
        for i, st in enumerate(steps):
            w.step(i, st)
        # the end: everything committed, every view agrees
        w.step(len(steps), ("sync",))
        return None, w
    except Divergence as d:
        return d, w
    except Exception as e:  # noqa: BLE001 - a crash of the run is a finding
        return Divergence(w.steps_run, steps[w.steps_run - 1]
                          if w.steps_run else None,
                          f"{type(e).__name__}: {e}"), w
    finally:
        probs = w.close()
        if probs:
            w.log(f"unmount problems: {probs}")


def generate_and_run(make_world, seed, n_steps, check_every=1,
                     others=True, crashes=True):
    """Generates steps from the oracle's state as it goes (so they are
    mostly valid) and runs them; returns (divergence or None, steps, world)."""
    w = make_world(check_every)
    g = Gen(seed, w.oracle, others, crashes)
    steps = []
    try:
        for i in range(n_steps):
            st = g.step()
            steps.append(st)
            w.step(i, st)
        steps.append(("sync",))
        w.step(n_steps, ("sync",))
        return None, steps, w
    except Divergence as d:
        return d, steps, w
    except Exception as e:  # noqa: BLE001
        return Divergence(len(steps) - 1, steps[-1] if steps else None,
                          f"{type(e).__name__}: {e}"), steps, w
    finally:
        probs = w.close()
        if probs:
            w.log(f"unmount problems: {probs}")


def shrink(make_world, steps, first, budget_s=120, log=print):
    """Delta debugging: drops chunks of steps while the sequence still
    diverges the same way (Divergence.kind); stops after budget_s.
    Returns (shortest steps, its divergence)."""
    steps = list(steps[:first.step_no + 1])
    best = first
    deadline = time.monotonic() + budget_s
    chunk = max(1, len(steps) // 2)
    while chunk >= 1 and time.monotonic() < deadline:
        i = 0
        progressed = False
        while i < len(steps) and time.monotonic() < deadline:
            cand = steps[:i] + steps[i + chunk:]
            if not cand:
                i += chunk
                continue
            d, _w = run_steps(make_world, cand)
            if d is not None and d.kind() == first.kind():
                steps, best, progressed = cand[:d.step_no + 1], d, True
                log(f"shrink: {len(steps)} steps")
            else:
                i += chunk
        if not progressed:
            chunk //= 2
    return steps, best


def format_steps(steps):
    return "[\n" + "".join(f"    {s!r},\n" for s in steps) + "]"
