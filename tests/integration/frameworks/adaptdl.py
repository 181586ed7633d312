"""adaptdl: every state file is written into `_checkpoint/`, then
rename(_checkpoint, checkpoint-N) and rmtree of every other checkpoint-*.
Latest: listdir, max N.  (See _common.py for the command line.)"""
import os
import re
import shutil

from _common import check, main, payload, read_sequential, write_sequential

STATES = {"adaptdl-state": 3000, "model-state": 700_000, "optimizer-state": 300_000}


def files_for(step, seed):
    return {n: payload(seed, f"{step}/{n}", size + step) for n, size in STATES.items()}


def save(root, steps, seed, _a):
    for step in steps:
        tmp = os.path.join(root, "_checkpoint")
        if os.path.isdir(tmp):
            shutil.rmtree(tmp)
        os.makedirs(tmp, exist_ok=True)
        for name, data in files_for(step, seed).items():
            write_sequential(os.path.join(tmp, name), data)
        os.rename(tmp, os.path.join(root, f"checkpoint-{step}"))
        for name in os.listdir(root):
            if re.match(r"^checkpoint-\d+$", name) and name != f"checkpoint-{step}":
                shutil.rmtree(os.path.join(root, name))
    return {"saved": steps}


def latest(root):
    steps = [int(m.group(1)) for m in
             (re.match(r"^checkpoint-(\d+)$", n) for n in os.listdir(root)) if m]
    return max(steps) if steps else None


def load(root, a):
    step = latest(root)
    if step is None:
        return {"latest": None}
    d = os.path.join(root, f"checkpoint-{step}")
    read = {n: check(f"{d}/{n}", read_sequential(os.path.join(d, n)), data)
            for n, data in files_for(step, a.seed).items()}
    return {"latest": f"checkpoint-{step}", "read": read}


if __name__ == "__main__":
    main(save, load)
