"""Megatron-LM save_checkpoint (legacy format, 2 tensor-parallel ranks):
`iter_0000100/mp_rank_0X/model_optim_rng.pt` (makedirs + torch.save); rank
0 rewrites `latest_checkpointed_iteration.txt` in place and appends a line
to `progress.txt` (open 'a+'); old iterations removed with rmtree, skipped
when they are symlinks.  Load: read the tracker, load each rank's file."""
import os
import time
import re
import shutil

from _common import check, main, payload, read_torch_like, write_sequential

TP = 2
KEEP = 2
TRACKER = "latest_checkpointed_iteration.txt"


def files_for(step, seed):
    return {f"mp_rank_{r:02d}/model_optim_rng.pt": payload(seed, f"{step}/{r}", 800_000 + step)
            for r in range(TP)}


def save(root, steps, seed, _a):
    os.makedirs(root, exist_ok=True)
    for step in steps:
        d = os.path.join(root, f"iter_{step:07d}")
        for name, data in files_for(step, seed).items():
            p = os.path.join(d, name)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            write_sequential(p, data)
        with open(os.path.join(root, TRACKER), "w") as f:
            f.write(str(step))
        with open(os.path.join(root, "progress.txt"), "a+") as f:
            f.write(f"job 1\tsaved checkpoint at iteration {step}\n")
        iters = sorted(n for n in os.listdir(root) if re.match(r"^iter_\d{7}$", n))
        for old in iters[:-KEEP]:
            p = os.path.join(root, old)
            if not os.path.islink(p):
                shutil.rmtree(p)
    return {"saved": steps}


def read_tracker(root):
    try:
        with open(os.path.join(root, TRACKER)) as f:
            return f.read().strip()
    except FileNotFoundError:
        return None


def load(root, a, attempts=5):
    text = read_tracker(root)
    if text is None:
        return {"latest": None}
    if not text.isdigit():
        raise SystemExit(f"LOAD MISMATCH tracker: {text!r}")
    step = int(text)
    read = {}
    for name, data in files_for(step, a.seed).items():
        p = os.path.join(root, f"iter_{step:07d}", name)
        try:
            got = read_torch_like(p)
        except FileNotFoundError:
            got = None
            # the race every filesystem has: the tracker was read, then a
            # newer checkpoint was saved and this one rotated away.  Not a
            # partial checkpoint if the tracker has moved on since.
            # (another host sees the tracker no staler than its mount's
            # cache lifetimes, 1 s by default: look again after that)
            if attempts > 1:
                time.sleep(1.2)
                if read_tracker(root) != text:
                    return load(root, a, attempts - 1)
        read[name] = check(p, got, data)
    # progress.txt is appended after the tracker: not checked against it
    return {"latest": f"iter_{step:07d}", "read": read}


if __name__ == "__main__":
    main(save, load)
