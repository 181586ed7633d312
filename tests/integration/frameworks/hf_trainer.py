"""Hugging Face Trainer._save_checkpoint (save_total_limit=2):
makedirs `checkpoint-N`; save_pretrained lists the directory and removes
stale shards, writes model.safetensors (safetensors: temp file + rename)
and config.json; optimizer.pt, scheduler.pt, rng_state_R.pth (torch.save),
trainer_state.json (open 'w'); rotation: glob `checkpoint-*`, sort by the
directory's mtime (by number when the mtimes span less than 1 s), rmtree
the oldest.  Load: get_last_checkpoint (listdir, `^checkpoint-(\\d+)$`,
isdir, max)."""
import json
import os
import re
import shutil
import time
from pathlib import Path

from _common import (check, main, payload, read_private_mmap, read_sequential,
                     read_torch_like, safetensors_save, write_sequential)

LIMIT = 2
WORLD = 2
_re_checkpoint = re.compile(r"^checkpoint\-(\d+)$")


def files_for(step, seed):
    out = {"model.safetensors": payload(seed, f"{step}/model", 1_500_000 + step),
           "config.json": json.dumps({"model_type": "toy", "hidden": 64}).encode(),
           "optimizer.pt": payload(seed, f"{step}/optim", 700_000 + step),
           "scheduler.pt": payload(seed, f"{step}/sched", 1_000 + step)}
    for r in range(WORLD):
        out[f"rng_state_{r}.pth"] = payload(seed, f"{step}/rng{r}", 14_000)
    out["trainer_state.json"] = json.dumps({"global_step": step, "log_history": []},
                                           indent=2).encode()
    return out


def sorted_checkpoints(output_dir):
    paths = [str(p) for p in Path(output_dir).glob("checkpoint-*") if os.path.isdir(p)]
    mtimes = {p: os.path.getmtime(p) for p in paths}
    if paths and max(mtimes.values()) - min(mtimes.values()) >= 1.0:
        return sorted(paths, key=lambda p: mtimes[p])
    return sorted(paths, key=lambda p: int(p.rsplit("-", 1)[1]))


def save(root, steps, seed, _a):
    os.makedirs(root, exist_ok=True)
    for step in steps:
        if any(Path(root).glob("checkpoint-*")):
            time.sleep(1.05)  # steps apart in time, so rotation orders by mtime
        d = os.path.join(root, f"checkpoint-{step}")
        os.makedirs(d, exist_ok=True)
        files = files_for(step, seed)
        # save_pretrained: remove stale shards of an earlier save
        for fn in os.listdir(d):
            if fn.startswith("model") and os.path.isfile(os.path.join(d, fn)) \
                    and fn != "model.safetensors":
                os.remove(os.path.join(d, fn))
        safetensors_save(os.path.join(d, "model.safetensors"), files["model.safetensors"])
        for name in ("config.json", "optimizer.pt", "scheduler.pt",
                     *[f"rng_state_{r}.pth" for r in range(WORLD)]):
            write_sequential(os.path.join(d, name), files[name])
        with open(os.path.join(d, "trainer_state.json"), "w", encoding="utf-8") as f:
            f.write(files["trainer_state.json"].decode())
        ckpts = sorted_checkpoints(root)
        for old in ckpts[:max(0, len(ckpts) - LIMIT)]:
            shutil.rmtree(old, ignore_errors=True)
    return {"saved": steps}


def get_last_checkpoint(folder):
    content = os.listdir(folder)
    checkpoints = [p for p in content
                   if _re_checkpoint.search(p) is not None and os.path.isdir(os.path.join(folder, p))]
    if not checkpoints:
        return None
    return os.path.join(folder, max(checkpoints, key=lambda x: int(_re_checkpoint.search(x).groups()[0])))


def load(root, a):
    last = get_last_checkpoint(root)
    if last is None:
        return {"latest": None}
    step = int(last.rsplit("-", 1)[1])
    read = {}
    for name, data in files_for(step, a.seed).items():
        p = os.path.join(last, name)
        try:
            if name.endswith(".safetensors"):
                got = read_private_mmap(p)
            elif name.endswith((".pt", ".pth")):
                got = read_torch_like(p)
            else:
                got = read_sequential(p)
        except FileNotFoundError:
            got = None
        read[name] = check(p, got, data)
    return {"latest": os.path.basename(last), "read": read}


if __name__ == "__main__":
    main(save, load)
