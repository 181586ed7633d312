"""Real PyTorch (Debian's python3-torch, run with /usr/bin/python3): checks
a run directory written by contrib/examples/train_resume.py.

    torch_save.py check RUN_DIR

Finds the latest complete checkpoint by listing (the example's own logic),
loads it with torch.load and with torch.load(mmap=True) -- torch 1.13 has no
mmap=: then the file is mmapped privately (MAP_PRIVATE, read-only) with
Python's mmap and torch.load reads a BytesIO of the mapping -- and compares
every tensor (model and optimizer state) with a model trained from scratch
to the same step on this host, without interruption.  Prints JSON; exits 1
on any difference."""
import importlib.util
import inspect
import io
import json
import mmap
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "..", "contrib", "examples", "train_resume.py")


def example():
    spec = importlib.util.spec_from_file_location("train_resume", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def flatten(obj, prefix=""):
    """{path: tensor-or-value} of a nested state dict."""
    out = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}{k}/"))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            out.update(flatten(v, f"{prefix}{i}/"))
    else:
        out[prefix.rstrip("/")] = obj
    return out


def same(a, b):
    fa, fb = flatten(a), flatten(b)
    if fa.keys() != fb.keys():
        return f"keys differ: {sorted(fa.keys() ^ fb.keys())[:5]}"
    for k in fa:
        x, y = fa[k], fb[k]
        if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)
                    and x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y)):
                return f"tensor {k} differs"
        elif x != y:
            return f"{k}: {x!r} != {y!r}"
    return None


def load_mmap(path):
    if "mmap" in inspect.signature(torch.load).parameters:
        return torch.load(path, map_location="cpu", mmap=True), "torch.load(mmap=True)"
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
        try:
            state = torch.load(io.BytesIO(m), map_location="cpu")
        finally:
            m.close()
    return state, (f"torch {torch.__version__} has no torch.load(mmap=): "
                   "MAP_PRIVATE mmap + torch.load(BytesIO)")


def main():
    if len(sys.argv) != 3 or sys.argv[1] != "check":
        raise SystemExit("usage: torch_save.py check RUN_DIR")
    run_dir = sys.argv[2]
    ex = example()
    torch.set_num_threads(1)
    step, path = ex.latest_complete(run_dir)
    if step is None:
        raise SystemExit(f"no complete checkpoint in {run_dir}: {os.listdir(run_dir)}")
    f = os.path.join(path, "model.pt")
    plain = torch.load(f, map_location="cpu")
    mapped, how = load_mmap(f)
    model, opt = ex.build()
    for s in range(1, step + 1):
        ex.train_step(model, opt, s)
    want = {"step": step, "model": model.state_dict(), "optimizer": opt.state_dict()}
    errors = {}
    for name, got in (("torch.load", plain), ("mmap", mapped)):
        err = same(got, want)
        if err:
            errors[name] = err
    res = {"latest": os.path.basename(path), "step": step, "mmap_load": how,
           "checkpoints": [[s, os.path.basename(p), c] for s, p, c in ex.checkpoints(run_dir)],
           "tensors": len([v for v in flatten(want).values() if isinstance(v, torch.Tensor)])}
    print(json.dumps(res), flush=True)
    if errors:
        raise SystemExit(f"LOAD MISMATCH {path}: {errors}")


if __name__ == "__main__":
    main()
