#!/usr/bin/python3
"""Train a small PyTorch model, checkpoint it to a ckptfs mount, resume
after a crash -- on this host or another one -- from the latest complete
checkpoint.  Nothing in it knows about ckptfs: it is ordinary training code
pointed at a directory on the mount.

    ckptfs mount s3://BUCKET/runs /mnt/ckpt
    python3 train_resume.py /mnt/ckpt/run1 --steps 200 --save-every 20 --keep 3
    # kill it (Ctrl-C, kill -9, a lost host), then run the same command,
    # here or on another host with its own mount: it resumes.

Layout: RUN_DIR/checkpoint-N/{model.pt, meta.json}.  model.pt (torch.save)
holds the model, the optimizer and the step; meta.json is written last, so
a checkpoint without it was interrupted and is skipped.  After each save
the oldest checkpoints beyond --keep are deleted.

Training is deterministic (fixed seed, one thread, the batch of step s is
drawn from a generator seeded with s), so a run that was killed and resumed
ends with exactly the same weights as one that never stopped.
"""
import argparse
import json
import os
import re
import shutil
import sys
import time

import torch

CKPT_RE = re.compile(r"^checkpoint-(\d+)$")


def build():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return model, opt


def batch(step):
    g = torch.Generator().manual_seed(step)
    x = torch.randn(32, 16, generator=g)
    y = x.sum(dim=1, keepdim=True).sin()
    return x, y


def train_step(model, opt, step):
    x, y = batch(step)
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()


def checkpoints(run_dir):
    """[(step, path, complete)] of RUN_DIR, newest first."""
    try:
        names = os.listdir(run_dir)
    except FileNotFoundError:
        return []
    out = []
    for n in names:
        m = CKPT_RE.match(n)
        if m:
            p = os.path.join(run_dir, n)
            out.append((int(m.group(1)), p, os.path.isfile(os.path.join(p, "meta.json"))))
    return sorted(out, reverse=True)


def latest_complete(run_dir):
    for step, path, complete in checkpoints(run_dir):
        if complete:
            with open(os.path.join(path, "meta.json")) as f:
                if json.load(f).get("step") == step:
                    return step, path
    return None, None


def save(run_dir, step, model, opt, keep):
    path = os.path.join(run_dir, f"checkpoint-{step}")
    os.makedirs(path, exist_ok=True)
    torch.save({"step": step, "model": model.state_dict(),
                "optimizer": opt.state_dict()}, os.path.join(path, "model.pt"))
    with open(os.path.join(path, "meta.json"), "w") as f:
        json.dump({"step": step, "time": time.time()}, f)
    # keep the newest `keep` complete checkpoints; older ones (complete or
    # not) go
    kept = 0
    for s, p, complete in checkpoints(run_dir):
        if s > step:
            continue
        if complete and kept < keep:
            kept += 1
            continue
        shutil.rmtree(p)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--save-every", type=int, default=20)
    ap.add_argument("--keep", type=int, default=3)
    ap.add_argument("--step-sleep", type=float, default=0.0,
                    help="seconds to sleep per step (to have time to kill it)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    model, opt = build()
    start = 0
    step, path = latest_complete(a.run_dir)
    if step is not None:
        state = torch.load(os.path.join(path, "model.pt"), map_location="cpu")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start = state["step"]
        print(f"resumed from {os.path.basename(path)}", flush=True)
    else:
        print("starting from scratch", flush=True)
    for s in range(start + 1, a.steps + 1):
        loss = train_step(model, opt, s)
        if s % a.save_every == 0 or s == a.steps:
            save(a.run_dir, s, model, opt, a.keep)
            print(f"saved checkpoint-{s} loss {loss:.6f}", flush=True)
        if a.step_sleep:
            time.sleep(a.step_sleep)
    print(f"done at step {a.steps}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
