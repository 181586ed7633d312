"""Shared by the framework replay scripts (tests/integration/frameworks/*.py).

Each replay script performs, with plain os/shutil calls, the exact sequence
of filesystem calls one training framework makes when it saves a checkpoint
(FRAMEWORKS.md), and the framework's own "find the latest checkpoint and
load it" logic.  A script is a program of its own, like a training job:

    python3 SCRIPT.py save ROOT --steps 100,200 [--seed S]
        saves those steps under ROOT (rotation included); prints JSON
    python3 SCRIPT.py load ROOT [--seed S]
        finds the latest checkpoint the framework's way and reads it the
        framework's way (sequential, pread slices, private mmap); prints
        {"latest": ..., "read": {file: sha256}} as JSON, or {"latest": null}
        when there is none yet; exits 1 ("LOAD MISMATCH ...") when what it
        finds is incomplete or differs from what was saved

Payloads are deterministic (seeded by step and name), so running the same
save on a local directory gives the reference tree a mount must show.
Names that are random in the frameworks (temp files) are random here too:
they never survive a save.
"""

import argparse
import hashlib
import json
import mmap
import os
import random
import stat
import sys

CHUNK = 1 << 20


def payload(seed, name, size):
    """size deterministic pseudo-random bytes for (seed, name)."""
    r = random.Random(f"{seed}/{name}")
    return r.randbytes(size)


def sha(b):
    return hashlib.sha256(b).hexdigest()


def write_sequential(path, data, chunk=64 * 1024):
    """What torch.save and most writers do: open(O_WRONLY|O_CREAT|O_TRUNC),
    strictly sequential writes, close; no fsync."""
    with open(path, "wb") as f:
        for i in range(0, len(data), chunk):
            f.write(data[i:i + chunk])


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_sequential(path):
    with open(path, "rb") as f:
        return f.read()


def read_torch_like(path):
    """torch.load's access pattern on a zip: the magic at the start, the
    central directory at the end, then the records (here: the whole body in
    1 MiB preads at shuffled offsets).  Returns the file's bytes."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        head = os.pread(fd, 4, 0)
        tail = os.pread(fd, min(size, 65536), max(0, size - 65536))
        offs = list(range(0, size, CHUNK))
        random.Random(path).shuffle(offs)
        parts = {}
        for o in offs:
            b = os.pread(fd, min(CHUNK, size - o), o)
            if len(b) != min(CHUNK, size - o):
                raise IOError(f"{path}: short pread at {o}: {len(b)} bytes")
            parts[o] = b
        data = b"".join(parts[o] for o in sorted(parts))
        assert data[:4] == head and data[max(0, size - 65536):] == tail, path
        return data
    finally:
        os.close(fd)


def read_private_mmap(path):
    """safetensors / torch.load(mmap=True): MAP_PRIVATE read-only mmap of the
    whole file, random access (4 KiB pages touched in shuffled order)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return b""
        m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
        try:
            pages = list(range(0, size, 4096))
            random.Random(path).shuffle(pages)
            for p in pages:
                m[p]  # fault the page in, in random order
            return m[:]
        finally:
            m.close()


def tree(root):
    """{relative path: description} of everything under root: sha256 of
    regular files (with their owner-exec bit), symlink targets, directories."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for d in dirnames:
            p = os.path.join(dirpath, d)
            r = os.path.normpath(os.path.join(rel, d))
            out[r] = ("link:" + os.readlink(p)) if os.path.islink(p) else "dir"
        for fn in filenames:
            p = os.path.join(dirpath, fn)
            r = os.path.normpath(os.path.join(rel, fn))
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[r] = "link:" + os.readlink(p)
            else:
                x = "x" if st.st_mode & stat.S_IXUSR else "-"
                out[r] = f"{x}{st.st_size}:{sha(read_sequential(p))}"
    return out


def main(save, load, extra_args=None):
    """save(root, steps, seed, args) -> dict; load(root, args) -> dict."""
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("save")
    s.add_argument("root")
    s.add_argument("--steps", required=True)
    l_ = sub.add_parser("load")
    l_.add_argument("root")
    for p in (s, l_):
        p.add_argument("--seed", default="s")
        if extra_args:
            extra_args(p)
    a = ap.parse_args()
    if a.cmd == "save":
        steps = [int(x) for x in a.steps.split(",") if x]
        res = save(a.root, steps, a.seed, a) or {}
    else:
        res = load(a.root, a) or {}
    json.dump(res, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")


def safetensors_save(path, data, chunk=CHUNK):
    """safetensors >= 0.8 (Rust tempfile::NamedTempFile + persist): a temp
    file `.tmpXXXXXX` in the target's directory, O_CREAT|O_EXCL, mode 0600;
    ftruncate to the final size; sequential 1 MiB writes; rename over the
    target."""
    d = os.path.dirname(path) or "."
    alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    while True:
        tmp = os.path.join(d, ".tmp" + "".join(random.choice(alnum) for _ in range(6)))
        try:
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            break
        except FileExistsError:
            continue
    try:
        os.ftruncate(fd, len(data))
        for i in range(0, len(data), chunk):
            view = memoryview(data)[i:i + chunk]
            while view:
                n = os.write(fd, view)
                view = view[n:]
    finally:
        os.close(fd)
    os.rename(tmp, path)


def check(what, got, want):
    """Fail (exit status 1, message on stderr) when a loaded file differs
    from what was saved."""
    if got != want:
        dump = os.environ.get("CKPTFS_FW_DUMP")
        if dump and got is not None:  # for diagnosis: what the reader got
            with open(os.path.join(dump, f"{what}.{os.getpid()}.got"), "wb") as f:
                f.write(got)
        detail = (f"{len(got)} bytes, sha256 {sha(got)[:16]}" if got is not None else "missing")
        raise SystemExit(f"LOAD MISMATCH {what}: got {detail}; saved {len(want)} bytes, "
                         f"sha256 {sha(want)[:16]}")
    return sha(got)
