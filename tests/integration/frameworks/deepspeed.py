"""DeepSpeed engine.save_checkpoint: makedirs `global_stepN`; torch.save of
the model states and of each rank's ZeRO optimizer partition; copy
zero_to_fp32.py into the save dir and chmod +x; rank 0 rewrites `latest`
in place (open 'w': O_TRUNC).  Load: read `latest`, load the named files."""
import os
import shutil
import stat
import tempfile

from _common import check, main, payload, read_torch_like, write_sequential

WORLD = 2
SCRIPT = b"#!/usr/bin/env python\n# zero_to_fp32.py (stand-in)\n" + b"# pad\n" * 2000


def files_for(step, seed):
    out = {"mp_rank_00_model_states.pt": payload(seed, f"{step}/model", 900_000 + step)}
    for r in range(WORLD):
        out[f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt"] = payload(
            seed, f"{step}/optim{r}", 450_000 + step)
    return out


def save(root, steps, seed, _a):
    # the recovery script ships inside the deepspeed package: a local file
    src_dir = tempfile.mkdtemp()
    src = os.path.join(src_dir, "zero_to_fp32.py")
    with open(src, "wb") as f:
        f.write(SCRIPT)
    try:
        for step in steps:
            tag = f"global_step{step}"
            d = os.path.join(root, tag)
            os.makedirs(d, exist_ok=True)
            for name, data in files_for(step, seed).items():
                write_sequential(os.path.join(d, name), data)   # torch.save
            dst = os.path.join(root, "zero_to_fp32.py")
            shutil.copyfile(src, dst)
            os.chmod(dst, os.stat(dst).st_mode | stat.S_IEXEC)
            with open(os.path.join(root, "latest"), "w") as fd:
                fd.write(tag)
    finally:
        shutil.rmtree(src_dir)
    return {"saved": steps}


def load(root, a):
    try:
        with open(os.path.join(root, "latest")) as fd:
            tag = fd.read().strip()
    except FileNotFoundError:
        return {"latest": None}
    if not tag.startswith("global_step"):
        raise SystemExit(f"LOAD MISMATCH latest: {tag!r}")
    step = int(tag[len("global_step"):])
    read = {}
    for name, data in files_for(step, a.seed).items():
        p = os.path.join(root, tag, name)
        try:
            got = read_torch_like(p)
        except FileNotFoundError:
            got = None
        read[name] = check(p, got, data)
    return {"latest": tag, "read": read}


if __name__ == "__main__":
    main(save, load)
