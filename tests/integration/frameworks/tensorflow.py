"""TensorFlow 2 tf.train.CheckpointManager.save (local filesystem):
shards are written as `*.tempstate<rand>` files under `<prefix>_temp/` and
renamed to their names there; MergeV2Checkpoints renames the data file
across directories to `<prefix>.data-00000-of-00001` and writes
`<prefix>.index` (tempstate + rename), then removes `<prefix>_temp/`; the
`checkpoint` state file is written as `checkpoint.tmp<uuid>` and renamed
over the old one; max_to_keep=2 deletes the oldest prefix's files.
Load: read `checkpoint`, pread the index, pread the slices of the data."""
import json
import os
import random
import re
import shutil
import uuid

from _common import check, main, payload, write_sequential

KEEP = 2
VARS = {"model/dense/kernel": 600_000, "model/dense/bias": 4_000,
        "optimizer/iter": 8, "save_counter": 8}


def tensors_for(step, seed):
    return {v: payload(seed, f"{step}/{v}", n + step) for v, n in VARS.items()}


def tf_write_file(path, data):
    """tensorflow::WriteStringToFile on the local filesystem via
    AtomicWriteStringToFile: `<path>.tempstate<random>`, then rename."""
    tmp = f"{path}.tempstate{random.getrandbits(63)}"
    write_sequential(tmp, data)
    os.rename(tmp, path)


def atomic_write_string(path, text):
    """tf.io.atomic_write_string_to_file: `<path>.tmp<uuid hex>` + rename
    over the target."""
    tmp = path + ".tmp" + uuid.uuid4().hex
    with open(tmp, "wb") as f:
        f.write(text.encode())
    os.rename(tmp, path)


def index_and_data(step, seed):
    t = tensors_for(step, seed)
    index, data, off = {}, b"", 0
    for name, b in t.items():
        index[name] = {"offset": off, "length": len(b)}
        data += b
        off += len(b)
    return json.dumps(index, sort_keys=True).encode(), data


def state_text(kept):
    lines = [f'model_checkpoint_path: "ckpt-{kept[-1]}"']
    lines += [f'all_model_checkpoint_paths: "ckpt-{s}"' for s in kept]
    return "\n".join(lines) + "\n"


def read_state(root):
    try:
        with open(os.path.join(root, "checkpoint")) as f:
            text = f.read()
    except FileNotFoundError:
        return None, []
    latest = re.search(r'^model_checkpoint_path: "ckpt-(\d+)"$', text, re.M)
    every = [int(x) for x in re.findall(r'^all_model_checkpoint_paths: "ckpt-(\d+)"$', text, re.M)]
    if not latest:
        raise SystemExit(f"LOAD MISMATCH checkpoint state file: {text!r}")
    return int(latest.group(1)), every


def save(root, steps, seed, _a):
    os.makedirs(root, exist_ok=True)
    _, kept = read_state(root)
    for step in steps:
        prefix = os.path.join(root, f"ckpt-{step}")
        tmpdir = prefix + "_temp"
        os.makedirs(tmpdir, exist_ok=True)
        shard = os.path.join(tmpdir, "part-00000-of-00001")
        index, data = index_and_data(step, seed)
        tf_write_file(shard + ".data-00000-of-00001", data)
        tf_write_file(shard + ".index", index)
        # MergeV2Checkpoints
        os.rename(shard + ".data-00000-of-00001", prefix + ".data-00000-of-00001")
        tf_write_file(prefix + ".index", index)
        os.unlink(shard + ".index")
        shutil.rmtree(tmpdir)
        kept.append(step)
        while len(kept) > KEEP:
            old = os.path.join(root, f"ckpt-{kept.pop(0)}")
            for suffix in (".index", ".data-00000-of-00001"):
                os.remove(old + suffix)
        atomic_write_string(os.path.join(root, "checkpoint"), state_text(kept))
    return {"saved": steps}


def load(root, a):
    step, _ = read_state(root)
    if step is None:
        return {"latest": None}
    prefix = os.path.join(root, f"ckpt-{step}")
    want_index, _ = index_and_data(step, a.seed)
    want = tensors_for(step, a.seed)
    try:
        fd = os.open(prefix + ".index", os.O_RDONLY)
    except FileNotFoundError:
        raise SystemExit(f"LOAD MISMATCH {prefix}.index missing")
    try:
        index_bytes = os.pread(fd, 1 << 20, 0)
    finally:
        os.close(fd)
    check(prefix + ".index", index_bytes, want_index)
    read = {}
    fd = os.open(prefix + ".data-00000-of-00001", os.O_RDONLY)
    try:
        for name, e in sorted(json.loads(index_bytes).items(), reverse=True):
            read[name] = check(f"{prefix} {name}", os.pread(fd, e["length"], e["offset"]), want[name])
    finally:
        os.close(fd)
    return {"latest": f"ckpt-{step}", "read": read}


if __name__ == "__main__":
    main(save, load)
