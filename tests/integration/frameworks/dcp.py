"""torch.distributed.checkpoint FileSystemWriter (world size 2): every
rank `mkdir -p` the checkpoint dir and writes `__{rank}_0.distcp`
sequentially, then fsyncs it; after all ranks finished, the coordinator
writes `.metadata.tmp`, fsyncs it, unlinks `.metadata` if it exists and
renames `.metadata.tmp` to `.metadata`.  Load: read `.metadata`, then pread
each tensor's slice of each `.distcp`.  Latest: the highest `step-N`
directory with a `.metadata` (the user's own listing; DCP has none).

Besides save/load (all ranks in one process), the multi-host test runs the
ranks as separate programs on separate mounts:
    dcp.py rank ROOT STEP RANK [SEED]     one rank's file
    dcp.py finish ROOT STEP [SEED]        the coordinator's .metadata
"""
import json
import os
import re
import sys

from _common import check, main, payload

WORLD = 2
TENSORS = {"model.layer0.weight": 500_000, "model.layer1.weight": 300_000,
           "optim.state.exp_avg": 200_000}


def items_for(step, rank, seed):
    return {t: payload(seed, f"{step}/{rank}/{t}", n + step) for t, n in TENSORS.items()}


def ckpt_dir(root, step):
    return os.path.join(root, f"step-{step}")


def write_rank(root, step, rank, seed):
    d = ckpt_dir(root, step)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"__{rank}_0.distcp"), "wb") as f:
        for data in items_for(step, rank, seed).values():
            f.write(data)
        f.flush()
        os.fsync(f.fileno())


def metadata_for(step, seed):
    meta = {"step": step, "storage": {}}
    for rank in range(WORLD):
        off = 0
        for t, data in items_for(step, rank, seed).items():
            meta["storage"][f"{t}@{rank}"] = {"file": f"__{rank}_0.distcp",
                                              "offset": off, "length": len(data)}
            off += len(data)
    return json.dumps(meta, sort_keys=True).encode()


def finish(root, step, seed):
    d = ckpt_dir(root, step)
    tmp = os.path.join(d, ".metadata.tmp")
    with open(tmp, "wb") as f:
        f.write(metadata_for(step, seed))
        os.fsync(f.fileno())
    final = os.path.join(d, ".metadata")
    if os.path.exists(final):
        os.unlink(final)
    os.rename(tmp, final)


def save(root, steps, seed, _a):
    for step in steps:
        for rank in range(WORLD):
            write_rank(root, step, rank, seed)
        finish(root, step, seed)
    return {"saved": steps}


def load(root, a):
    steps = []
    for n in os.listdir(root):
        m = re.match(r"^step-(\d+)$", n)
        if m and os.path.exists(os.path.join(root, n, ".metadata")):
            steps.append(int(m.group(1)))
    if not steps:
        return {"latest": None}
    step = max(steps)
    d = ckpt_dir(root, step)
    with open(os.path.join(d, ".metadata"), "rb") as f:
        meta_bytes = f.read()
    check(d + "/.metadata", meta_bytes, metadata_for(step, a.seed))
    meta = json.loads(meta_bytes)
    read, fds = {}, {}
    try:
        for key, e in sorted(meta["storage"].items(), reverse=True):
            t, rank = key.rsplit("@", 1)
            p = os.path.join(d, e["file"])
            if p not in fds:
                fds[p] = os.open(p, os.O_RDONLY)
            got = os.pread(fds[p], e["length"], e["offset"])
            read[key] = check(f"{p} {key}", got, items_for(step, int(rank), a.seed)[t])
    finally:
        for fd in fds.values():
            os.close(fd)
    return {"latest": f"step-{step}", "read": read}


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "rank":
        write_rank(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                   sys.argv[5] if len(sys.argv) > 5 else "s")
    elif len(sys.argv) > 1 and sys.argv[1] == "finish":
        finish(sys.argv[2], int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else "s")
    else:
        main(save, load)
