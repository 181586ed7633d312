"""safetensors >= 0.8 save_file: NamedTempFile `.tmpXXXXXX` in the same
directory (0600), ftruncate to the final size, sequential 1 MiB writes,
rename over the existing target.  Load: private read-only mmap, random
access.  Two files (a sharded model) rewritten at every step, plus the
index json written in place."""
import json
import os

from _common import check, main, payload, read_private_mmap, safetensors_save, write_sequential

SHARDS = {"model-00001-of-00002.safetensors": 2_500_000,
          "model-00002-of-00002.safetensors": 600_000}


def files_for(step, seed):
    out = {n: payload(seed, f"{step}/{n}", size + step) for n, size in SHARDS.items()}
    out["model.safetensors.index.json"] = json.dumps(
        {"metadata": {"step": step}, "weight_map": {n: n for n in SHARDS}}).encode()
    return out


def save(root, steps, seed, _a):
    os.makedirs(root, exist_ok=True)
    for step in steps:
        files = files_for(step, seed)
        for n in SHARDS:
            safetensors_save(os.path.join(root, n), files[n])
        write_sequential(os.path.join(root, "model.safetensors.index.json"),
                         files["model.safetensors.index.json"])
    return {"saved": steps}


def load(root, a):
    idx = os.path.join(root, "model.safetensors.index.json")
    try:
        with open(idx, "rb") as f:
            meta = json.loads(f.read())
    except FileNotFoundError:
        return {"latest": None}
    step = meta["metadata"]["step"]
    read = {}
    for n in meta["weight_map"]:
        # Each shard is replaced atomically on its own; while a save runs a
        # reader may pair a new index with an old shard (on any filesystem),
        # but never see a torn shard: its size tells which step wrote it.
        got = read_private_mmap(os.path.join(root, n))
        read[n] = check(n, got, files_for(len(got) - SHARDS[n], a.seed)[n])
    return {"latest": step, "read": read}


if __name__ == "__main__":
    main(save, load)
