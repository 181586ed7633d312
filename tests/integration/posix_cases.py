#!/usr/bin/python3
"""The case table of the POSIX differential test (test_posix.py) and the
program that runs it on one directory tree.

    posix_cases.py [setup|run|all] ROOT USERS_JSON [SUBSET [STATE]]
        ->  (run, all) JSON {case name: observation}
    posix_cases.py look ROOT USERS_JSON SUBSET STATE
        ->  the same observation of another view of the tree "run" ran
            on (a second mount, a remount): STATE, written by "run",
            holds the results of the calls and the "before"

SUBSET is "all" (the default: every case) or "ci" (a representative
subset: every family of calls and every file type, fewer combinations of
caller and type; `representative`).

ROOT is an empty directory (on the mount, or on a local tmpfs).  USERS_JSON
maps the roles "owner", "group", "other" to {"uid", "gid", "groups"}; root
is root.  The program runs as root and:

1. builds every case's fixture: a directory ROOT/cN with the case's mode
   and owner, holding the case's objects (each file type, with an owner and
   a mode), as root;
2. takes an lstat of what each case watches (the "before");
3. runs the cases, one child process per role (setgroups, setresgid,
   setresuid, then every case of that role in order): the call's result
   (its return value or errno name) goes back through a pipe;
("setup" stops after 1, "run" starts at 2 on a tree "setup" built.)
4. takes the lstat again and reports, per case, the result and the fields
   a user sees: type, permission bits, owner, group, size, link count,
   device number, and whether mtime and ctime changed (exact times where
   the case set them).

Nothing here is specific to ckptfs: test_posix.py runs it on both trees and
compares the observations name by name.
"""
import ctypes
import errno
import json
import os
import socket
import stat
import sys
import time

ROLES = ("root", "owner", "group", "other")
TYPES = ("reg", "dir", "lnk", "fifo", "sock", "chr", "blk")
# a device number for the device nodes (major 1, minor 3: /dev/null's)
RDEV = os.makedev(1, 3)
T_SET = (1_000_000_000, 1_500_000_000)  # atime, mtime set by utimensat
T0 = 1_700_000_000_000_000_000  # the fixtures' atime and mtime

UTIME_NOW = (1 << 30) - 1
UTIME_OMIT = (1 << 30) - 2
AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100


# ---------------------------------------------------------------------------
# The table


def obj(name, type_, mode=None, own="owner", grp="g_owner"):
    if mode is None:
        mode = {"dir": 0o755, "dirne": 0o755, "lnk": 0o777}.get(type_, 0o644)
    return {"name": name, "type": type_, "mode": mode, "own": own, "grp": grp}


def case(name, user, op, objs=(), dmode=0o777, down="root", watch=None):
    w = watch if watch is not None else [o["name"] for o in objs]
    paths = op[1:3] if op[0] in ("rename", "rename_noreplace", "link") \
        else op[1:2]
    for a in paths:
        if a not in w and "/" not in a:
            w.append(a)
    return {"name": name, "user": user, "op": list(op), "objs": list(objs),
            "dmode": dmode, "down": down, "watch": w + ["."]}


def cases():
    c = []
    perms = ("root", "owner", "group", "other")
    # -- chmod, chown, utimensat, truncate, open, xattrs on every type
    for t in TYPES:
        for u in perms:
            c.append(case(f"chmod/{t}/{u}", u, ["chmod", "x", 0o600],
                          [obj("x", t)]))
            c.append(case(f"lchown-uid/{t}/{u}", u,
                          ["lchown", "x", "other", None], [obj("x", t)]))
            c.append(case(f"lchown-gid-member/{t}/{u}", u,
                          ["lchown", "x", None, "g_shared"], [obj("x", t)]))
            c.append(case(f"utimensat-set/{t}/{u}", u,
                          ["utimensat", "x", "set"], [obj("x", t)]))
            c.append(case(f"utimensat-now/{t}/{u}", u,
                          ["utimensat", "x", "now"],
                          [obj("x", t, mode=0o666 if t != "dir" else 0o777)]))
            c.append(case(f"utimensat-omit-now/{t}/{u}", u,
                          ["utimensat", "x", "omit_now"],
                          [obj("x", t, mode=0o646 if t != "dir" else 0o757)]))
            c.append(case(f"truncate/{t}/{u}", u, ["truncate", "x", 3],
                          [obj("x", t, mode=0o664)]))
            c.append(case(f"open-rdonly/{t}/{u}", u,
                          ["open", "x", ["O_RDONLY", "O_NONBLOCK"]],
                          [obj("x", t, mode=0o640)]))
            c.append(case(f"open-wronly/{t}/{u}", u,
                          ["open", "x", ["O_WRONLY", "O_NONBLOCK"]],
                          [obj("x", t, mode=0o664)]))
            c.append(case(f"unlink/{t}/{u}", u, ["unlink", "x"],
                          [obj("x", t)]))
            c.append(case(f"unlink-sticky/{t}/{u}", u, ["unlink", "x"],
                          [obj("x", t)], dmode=0o1777))
            c.append(case(f"rmdir-sticky/{t}/{u}", u, ["rmdir", "x"],
                          [obj("x", t)], dmode=0o1777))
            c.append(case(f"rename/{t}/{u}", u, ["rename", "x", "y"],
                          [obj("x", t)]))
            c.append(case(f"rename-sticky/{t}/{u}", u, ["rename", "x", "y"],
                          [obj("x", t)], dmode=0o1777))
            c.append(case(f"link/{t}/{u}", u, ["link", "x", "y"],
                          [obj("x", t)]))
            c.append(case(f"setxattr/{t}/{u}", u,
                          ["setxattr", "x", "user.k", "v"],
                          [obj("x", t, mode=0o666 if t != "dir" else 0o777)]))
        for verb in ("mkdir", "mkfifo", "mknod-chr", "symlink", "create-excl",
                     "bind", "link-to"):
            c.append(case(f"{verb}-exists/{t}", "owner", [verb, "x"],
                          [obj("x", t), obj("r", "reg")]))
        c.append(case(f"lookup-through/{t}", "owner", ["lstat", "x/a"],
                      [obj("x", t)]))
        c.append(case(f"rmdir/{t}", "owner", ["rmdir", "x"], [obj("x", t)]))
        c.append(case(f"chmod-setgid-nonmember/{t}", "owner",
                      ["chmod", "x", 0o2755], [obj("x", t, grp="g_other")]))
        c.append(case(f"chmod-sticky-file/{t}", "owner",
                      ["chmod", "x", 0o1755], [obj("x", t)]))
        c.append(case(f"chown-kills-setid/{t}", "root",
                      ["lchown", "x", "owner", "g_shared"],
                      [obj("x", t, mode=0o6755)]))
        c.append(case(f"chown-owner-kills-setid/{t}", "owner",
                      ["lchown", "x", None, "g_shared"],
                      [obj("x", t, mode=0o6755)]))
        c.append(case(f"getxattr-missing/{t}", "owner",
                      ["getxattr", "x", "user.none"], [obj("x", t)]))
        # rename over every other type
        for t2 in TYPES + ("dirne",):
            c.append(case(f"rename-over/{t}/{t2}", "root",
                          ["rename", "x", "y"],
                          [obj("x", t), obj("y", t2)]))
            c.append(case(f"rename-noreplace/{t}/{t2}", "owner",
                          ["rename_noreplace", "x", "y"],
                          [obj("x", t), obj("y", t2)]))
    # -- making each type: as each role, in a writable, a read-only and a
    # sticky directory, and names too long
    for verb in ("mkdir", "mkfifo", "mknod-chr", "mknod-blk", "symlink",
                 "create-excl", "bind"):
        for u in perms:
            c.append(case(f"{verb}/{u}", u, [verb, "x"]))
            c.append(case(f"{verb}-nowrite/{u}", u, [verb, "x"],
                          dmode=0o755, down="owner"))
            c.append(case(f"{verb}-sticky/{u}", u, [verb, "x"], dmode=0o1777))
        if verb != "bind":  # a socket's path must fit in sun_path
            c.append(case(f"{verb}-nametoolong", "owner", [verb, "n" * 256]))
            c.append(case(f"{verb}-name255", "owner", [verb, "n" * 255]))
        c.append(case(f"{verb}-setgid-dir", "other", [verb, "x"],
                      dmode=0o2777, down="owner"))
    # -- set-id bits on write and truncate, by each role
    for u in perms:
        for mode in (0o6777, 0o2777, 0o2767, 0o4777):
            c.append(case(f"write-setid-{mode:o}/{u}", u,
                          ["write", "x", "abc"], [obj("x", "reg", mode)]))
            c.append(case(f"truncate-setid-{mode:o}/{u}", u,
                          ["truncate", "x", 1], [obj("x", "reg", mode)]))
        c.append(case(f"open-trunc-setid/{u}", u,
                      ["open", "x", ["O_WRONLY", "O_TRUNC"]],
                      [obj("x", "reg", 0o6777)]))
        c.append(case(f"chmod-other-setid/{u}", u, ["chmod", "x", 0o4755],
                      [obj("x", "reg", 0o755)]))
    # -- errors of path walks
    c.append(case("eloop", "owner", ["open", "l1", ["O_RDONLY"]],
                  [{"name": "l1", "type": "lnk", "target": "l2"},
                   {"name": "l2", "type": "lnk", "target": "l1"}]))
    c.append(case("eloop-nofollow", "owner",
                  ["open", "l", ["O_RDONLY", "O_NOFOLLOW"]],
                  [{"name": "l", "type": "lnk", "target": "x"},
                   obj("x", "reg")]))
    c.append(case("enotdir-trailing-slash", "owner", ["lstat", "x/"],
                  [obj("x", "reg")]))
    c.append(case("eisdir-open-write", "owner", ["open", "x", ["O_WRONLY"]],
                  [obj("x", "dir", 0o777)]))
    c.append(case("enotempty-rmdir", "owner", ["rmdir", "x"],
                  [obj("x", "dirne")]))
    c.append(case("einval-rename-into-self", "owner",
                  ["rename", "x", "x/sub"], [obj("x", "dir", 0o777)]))
    c.append(case("symlink-target-kept", "owner", ["readlink", "l"],
                  [{"name": "l", "type": "lnk", "target": "a/../b c%"}]))
    c.append(case("access-searchless-dir", "other", ["lstat", "x/f"],
                  [obj("x", "dirne", 0o700)]))
    return c


def representative(cs):
    """A subset of cs that keeps every family of calls (the name's first
    component) and, within the families made of call x type x caller or
    type x type, every type and every caller at least once: a rotating
    diagonal of each family's grid.  About a third of the table."""
    out = []
    for k in cs:
        parts = k["name"].split("/")
        fam = parts[0]
        off = sum(map(ord, fam)) % 4
        if len(parts) == 3 and parts[2] in ROLES:
            # call x type x caller: one caller per type, rotating
            keep = ROLES.index(parts[2]) == (TYPES.index(parts[1]) + off) % 4
        elif len(parts) == 3:
            # rename over: each type over itself and over one other
            t, t2 = TYPES.index(parts[1]), (TYPES + ("dirne",)).index(parts[2])
            keep = t2 in (t, (t + 3 + off) % 8)
        elif len(parts) == 2 and parts[1] in ROLES:
            # making a name, set-id bits: two callers of four
            keep = ROLES.index(parts[1]) in (off, (off + 2) % 4)
        else:
            keep = True
        if keep:
            out.append(k)
    return out


# ---------------------------------------------------------------------------
# Running it

libc = ctypes.CDLL(None, use_errno=True)


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def utimensat(path, spec):
    if spec == "set":
        ts = (Timespec(T_SET[0] // 10**9, T_SET[0] % 10**9),
              Timespec(T_SET[1] // 10**9, T_SET[1] % 10**9))
    elif spec == "now":
        ts = (Timespec(0, UTIME_NOW), Timespec(0, UTIME_NOW))
    else:  # omit_now: atime untouched, mtime now
        ts = (Timespec(0, UTIME_OMIT), Timespec(0, UTIME_NOW))
    arr = (Timespec * 2)(*ts)
    if libc.utimensat(AT_FDCWD, os.fsencode(path), arr,
                      AT_SYMLINK_NOFOLLOW) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def make(name, type_, target=None):
    if type_ == "reg":
        with open(name, "wb") as f:
            f.write(b"0123456789")
    elif type_ in ("dir", "dirne"):
        os.mkdir(name)
        if type_ == "dirne":
            with open(os.path.join(name, "f"), "wb") as f:
                f.write(b"f")
    elif type_ == "lnk":
        os.symlink(target or "nowhere", name)
    elif type_ == "fifo":
        os.mkfifo(name)
    elif type_ == "sock":
        s = socket.socket(socket.AF_UNIX)
        try:
            s.bind(name)
        finally:
            s.close()
    elif type_ == "chr":
        os.mknod(name, stat.S_IFCHR | 0o644, RDEV)
    elif type_ == "blk":
        os.mknod(name, stat.S_IFBLK | 0o644, RDEV)


def setup(root, cs, ids):
    for i, k in enumerate(cs):
        d = os.path.join(root, f"c{i}")
        os.mkdir(d)
        for o in k["objs"]:
            p = os.path.join(d, o["name"])
            try:
                make(p, o["type"], o.get("target"))
            except OSError:
                continue  # shows as a missing name in the observation
            os.lchown(p, ids[o.get("own", "owner")]["uid"],
                      ids[o.get("grp", "g_owner")])
            if o["type"] != "lnk":
                os.chmod(p, o["mode"])
            # one mtime for every fixture: "changed" means the call did it
            os.utime(p, ns=(T0, T0), follow_symlinks=False)
        os.chown(d, ids[k["down"]]["uid"], ids[k["down"]]["gid"])
        os.chmod(d, k["dmode"])


def snap(path, names):
    out = {}
    try:
        st = os.lstat(path)
    except OSError as e:
        return {"err": errno.errorcode.get(e.errno, str(e.errno))}
    t = stat.S_IFMT(st.st_mode)
    kind = {stat.S_IFREG: "reg", stat.S_IFDIR: "dir", stat.S_IFLNK: "lnk",
            stat.S_IFIFO: "fifo", stat.S_IFSOCK: "sock", stat.S_IFCHR: "chr",
            stat.S_IFBLK: "blk"}.get(t, oct(t))
    out["type"] = kind
    out["perm"] = oct(stat.S_IMODE(st.st_mode)) if kind != "lnk" else "-"
    out["uid"] = names["uids"].get(st.st_uid, st.st_uid)
    out["gid"] = names["gids"].get(st.st_gid, st.st_gid)
    if kind in ("reg", "lnk"):
        out["size"] = st.st_size
    if kind != "dir":
        out["nlink"] = st.st_nlink
    if kind in ("chr", "blk"):
        out["rdev"] = [os.major(st.st_rdev), os.minor(st.st_rdev)]
    out["_t"] = [st.st_atime_ns, st.st_mtime_ns, st.st_ctime_ns]
    return out


FLAGS = {n: getattr(os, n) for n in ("O_RDONLY", "O_WRONLY", "O_RDWR",
                                     "O_NONBLOCK", "O_TRUNC", "O_CREAT",
                                     "O_EXCL", "O_NOFOLLOW", "O_DIRECTORY")}


def run_op(op, ids):
    """One case's call, in the case directory; returns a short string."""
    v, a = op[0], op[1:]
    if v == "chmod":
        os.chmod(a[0], a[1])
    elif v == "lchown":
        uid = ids[a[1]]["uid"] if a[1] else -1
        gid = ids[a[2]] if a[2] else -1
        os.lchown(a[0], uid, gid)
    elif v == "utimensat":
        utimensat(a[0], a[1])
    elif v == "truncate":
        os.truncate(a[0], a[1])
    elif v == "open":
        fl = 0
        for f in a[1]:
            fl |= FLAGS[f]
        os.close(os.open(a[0], fl))
    elif v == "write":
        fd = os.open(a[0], os.O_WRONLY)
        try:
            os.write(fd, a[1].encode())
        finally:
            os.close(fd)
    elif v == "unlink":
        os.unlink(a[0])
    elif v == "rmdir":
        os.rmdir(a[0])
    elif v == "rename":
        os.rename(a[0], a[1])
    elif v == "rename_noreplace":
        if libc.renameat2(AT_FDCWD, os.fsencode(a[0]), AT_FDCWD,
                          os.fsencode(a[1]), 1) != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
    elif v == "link":
        os.link(a[0], a[1], follow_symlinks=False)
    elif v == "link-to":
        os.link("r", a[0])
    elif v == "mkdir":
        os.mkdir(a[0], 0o750)
    elif v == "mkfifo":
        os.mkfifo(a[0], 0o640)
    elif v == "mknod-chr":
        os.mknod(a[0], stat.S_IFCHR | 0o640, RDEV)
    elif v == "mknod-blk":
        os.mknod(a[0], stat.S_IFBLK | 0o640, RDEV)
    elif v == "symlink":
        os.symlink("some/target", a[0])
    elif v == "create-excl":
        os.close(os.open(a[0], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640))
    elif v == "bind":
        s = socket.socket(socket.AF_UNIX)
        try:
            s.bind(a[0])
        finally:
            s.close()
    elif v == "lstat":
        os.lstat(a[0])
    elif v == "readlink":
        return "ok:" + os.readlink(a[0])
    elif v == "setxattr":
        os.setxattr(a[0], a[1], a[2].encode(), follow_symlinks=False)
    elif v == "getxattr":
        return "ok:" + os.getxattr(a[0], a[1], follow_symlinks=False).hex()
    else:
        raise ValueError(v)
    return "ok"


def as_role(role, ids, work):
    """Runs work() in a child with role's credentials; returns its JSON."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.umask(0o022)
            if role != "root":
                u = ids[role]
                os.setgroups(u["groups"])
                os.setresgid(u["gid"], u["gid"], u["gid"])
                os.setresuid(u["uid"], u["uid"], u["uid"])
            data = json.dumps(work()).encode()
            with os.fdopen(w, "wb") as f:
                f.write(data)
            os._exit(0)
        except BaseException as e:  # noqa
            sys.stderr.write(f"{role}: {e!r}\n")
            os._exit(1)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    _, st = os.waitpid(pid, 0)
    if st != 0:
        raise RuntimeError(f"role {role} failed")
    return json.loads(data)


def observe(root, cs, names, before, results):
    """Per case: the call's result and the "after" lstat of what it
    watches, against the "before"."""
    report = {}
    for i, k in enumerate(cs):
        d = os.path.join(root, f"c{i}")
        obs = {"ret": results[k["name"]]}
        for w in k["watch"]:
            a = snap(os.path.join(d, w), names)
            b = before[k["name"]][w]
            if "_t" in a:
                ta = a.pop("_t")
                if "_t" in b:
                    tb = b["_t"]
                    a["mtime"] = ("set" if ta[1] == T_SET[1] else
                                  "changed" if ta[1] != tb[1] else "same")
                    a["ctime"] = "changed" if ta[2] != tb[2] else "same"
                    if k["op"][0] == "utimensat":
                        a["atime"] = ("set" if ta[0] == T_SET[0] else
                                      "changed" if ta[0] != tb[0] else "same")
            obs[w] = a
        report[k["name"]] = obs
    return report


def main():
    phase, root, ids = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    subset = sys.argv[4] if len(sys.argv) > 4 else "all"
    state = sys.argv[5] if len(sys.argv) > 5 else None
    ids["root"] = {"uid": 0, "gid": 0, "groups": []}
    for g in ("g_owner", "g_other", "g_shared"):
        ids[g] = ids["groups"][g]
    cs = cases()
    if subset == "ci":
        cs = representative(cs)
    names = {"uids": {ids[r]["uid"]: r for r in ROLES},
             "gids": {v: k for k, v in ids["groups"].items()}}
    names["gids"][0] = "root"
    names = {"uids": {int(k): v for k, v in names["uids"].items()},
             "gids": {int(k): v for k, v in names["gids"].items()}}
    if phase == "look":
        with open(state) as f:
            st = json.load(f)
        json.dump(observe(root, cs, names, st["before"], st["results"]),
                  sys.stdout, indent=0, sort_keys=True)
        return
    if phase in ("setup", "all"):
        setup(root, cs, ids)
    if phase == "setup":
        return
    time.sleep(0.05)  # ctimes of the calls differ from the set-up's
    t_before = time.monotonic()
    before = {}
    for i, k in enumerate(cs):
        d = os.path.join(root, f"c{i}")
        before[k["name"]] = {w: snap(os.path.join(d, w), names)
                             for w in k["watch"]}
    t_run = time.monotonic()
    results, took = {}, {}
    for role in ROLES:
        mine = [(i, k) for i, k in enumerate(cs) if k["user"] == role]

        def work(mine=mine):
            out = {}
            for i, k in mine:
                os.chdir(os.path.join(root, f"c{i}"))
                t = time.monotonic()
                try:
                    out[k["name"]] = run_op(k["op"], ids)
                except OSError as e:
                    out[k["name"]] = errno.errorcode.get(e.errno, str(e.errno))
                took[k["name"]] = time.monotonic() - t
            return [out, took]
        out, t = as_role(role, ids, work)
        results.update(out)
        took.update(t)
    per = {}
    for k, v in took.items():
        per[k.split("/")[0]] = per.get(k.split("/")[0], 0.0) + v
    slow = sorted(per.items(), key=lambda kv: -kv[1])[:6]
    sys.stderr.write("slowest calls: " + ", ".join(
        f"{k} {v:.1f}s" for k, v in slow) + "\n")
    t_after = time.monotonic()
    report = observe(root, cs, names, before, results)
    if state:
        with open(state, "w") as f:
            json.dump({"before": before, "results": results}, f)
    sys.stderr.write(f"lstat before {t_run - t_before:.1f}s, calls "
                     f"{t_after - t_run:.1f}s, lstat after "
                     f"{time.monotonic() - t_after:.1f}s\n")
    json.dump(report, sys.stdout, indent=0, sort_keys=True)


if __name__ == "__main__":
    main()
