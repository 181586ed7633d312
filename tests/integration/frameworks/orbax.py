"""Orbax (JAX) CheckpointManager: rmtree a leftover
`<step>.orbax-checkpoint-tmp-*`; mkdir a new one; per key: create
`<key>.__lock`, take an OFD byte-range lock, write, fsync,
rename(lock, key), fsync the parent directory; write commit_success.txt;
rename(tmpdir, <step>); keep the last 2 steps (rmtree).  Latest: iterdir,
max numeric step, skipping `*.orbax-checkpoint-tmp*`."""
import fcntl
import glob
import os
import shutil
import struct
import time

from _common import (check, fsync_dir, main, payload, read_private_mmap,
                     read_sequential)

KEEP = 2
KEYS = {"state/array_0": 400_000, "state/array_1": 150_000,
        "state/_METADATA": 900, "_CHECKPOINT_METADATA": 300}
F_OFD_SETLKW = getattr(fcntl, "F_OFD_SETLKW", 38)


def files_for(step, seed):
    out = {k: payload(seed, f"{step}/{k}", n + step % 97) for k, n in KEYS.items()}
    out["commit_success.txt"] = f"Checkpoint commit was successful to {step}".encode()
    return out


def ofd_lock(fd, start, length):
    # struct flock on x86-64/aarch64: short l_type, short l_whence,
    # off_t l_start, off_t l_len, pid_t l_pid (0 for OFD locks), padding.
    fcntl.fcntl(fd, F_OFD_SETLKW,
                struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, start, length, 0))


def write_key(tmpdir, key, data):
    final = os.path.join(tmpdir, key)
    parent = os.path.dirname(final)
    os.makedirs(parent, exist_ok=True)
    lock = final + ".__lock"
    fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        ofd_lock(fd, 0, len(data))
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(lock, final)
    fsync_dir(parent)


def save(root, steps, seed, _a):
    os.makedirs(root, exist_ok=True)
    for i, step in enumerate(steps):
        if i == len(steps) - 1:
            # what a crash in an earlier attempt at this step leaves behind
            crashed = os.path.join(root, f"{step}.orbax-checkpoint-tmp-1")
            os.makedirs(os.path.join(crashed, "state"), exist_ok=True)
            with open(os.path.join(crashed, "state", "array_0.__lock"), "wb") as f:
                f.write(b"half")
        for left in glob.glob(os.path.join(root, f"{step}.orbax-checkpoint-tmp*")):
            shutil.rmtree(left)
        tmpdir = os.path.join(root, f"{step}.orbax-checkpoint-tmp-{int(time.time() * 1e6)}")
        os.mkdir(tmpdir)
        files = files_for(step, seed)
        for key, data in files.items():
            if key != "commit_success.txt":
                write_key(tmpdir, key, data)
        with open(os.path.join(tmpdir, "commit_success.txt"), "wb") as f:
            f.write(files["commit_success.txt"])
        os.rename(tmpdir, os.path.join(root, str(step)))
        done = sorted(int(p.name) for p in os.scandir(root)
                      if p.is_dir() and p.name.isdigit())
        for old in done[:-KEEP]:
            shutil.rmtree(os.path.join(root, str(old)))
    return {"saved": steps}


def load(root, a):
    steps = [int(p.name) for p in os.scandir(root)
             if p.is_dir() and "orbax-checkpoint-tmp" not in p.name and p.name.isdigit()]
    if not steps:
        return {"latest": None}
    step = max(steps)
    d = os.path.join(root, str(step))
    read = {}
    for key, data in files_for(step, a.seed).items():
        p = os.path.join(d, key)
        got = read_private_mmap(p) if key.startswith("state/array") else read_sequential(p)
        read[key] = check(p, got, data)
    return {"latest": str(step), "read": read}


if __name__ == "__main__":
    main(save, load)
