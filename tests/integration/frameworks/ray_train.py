"""Ray Train / Tune (2.x) persisting checkpoints to a shared storage path:
the driver writes `.validate_storage_marker` into the experiment dir and the
workers check it; a checkpoint is first built in a temp dir
`checkpoint_tmp<uuid>` (with `.temp_marker`, and `.null_marker` standing for
an empty directory), copied file by file into `checkpoint_00000N/`,
`.metadata.json` is written and then overwritten (set_metadata +
update_metadata); the temp dir is removed; checkpoints beyond
num_to_keep=2 are deleted recursively.  Latest: listing.

`read` is Checkpoint.as_directory() of a checkpoint in remote storage, with
its per-reader deletion locks: each reader creates
`<tmpdir>.del_lock_<pid>`, downloads the checkpoint into `<tmpdir>` unless
another reader already did, uses it, removes its own lock and, if no other
`<tmpdir>.del_lock_*` is left, rmtrees `<tmpdir>`."""
import glob
import hashlib
import json
import os
import re
import shutil
import sys
import time
import uuid

from _common import check, main, payload, read_sequential, write_sequential

KEEP = 2
EXP = "exp"
TRIAL = "TorchTrainer_0_lr=0.1"


def files_for(step, seed):
    return {"model.pt": payload(seed, f"{step}/model", 800_000 + step),
            "optim.pt": payload(seed, f"{step}/optim", 200_000 + step),
            "extra/vocab.txt": payload(seed, f"{step}/vocab", 5_000)}


def metadata_for(step, final):
    m = {"step": step}
    if final:
        m["epoch"] = 0
    return json.dumps(m).encode()


def save(root, steps, seed, _a):
    exp = os.path.join(root, EXP)
    os.makedirs(exp, exist_ok=True)
    marker = os.path.join(exp, ".validate_storage_marker")
    with open(marker, "wb"):
        pass
    if not os.path.exists(marker):              # the worker's check
        raise SystemExit("storage not shared: marker missing")
    trial = os.path.join(exp, TRIAL)
    os.makedirs(trial, exist_ok=True)
    for step in steps:
        tmp = os.path.join(trial, "checkpoint_tmp" + uuid.uuid4().hex)
        os.makedirs(tmp)
        with open(os.path.join(tmp, ".temp_marker"), "wb"):
            pass
        os.makedirs(os.path.join(tmp, "empty"))
        with open(os.path.join(tmp, "empty", ".null_marker"), "wb"):
            pass
        files = files_for(step, seed)
        for name, data in files.items():
            os.makedirs(os.path.dirname(os.path.join(tmp, name)), exist_ok=True)
            write_sequential(os.path.join(tmp, name), data)
        dest = os.path.join(trial, f"checkpoint_{step:06d}")
        os.makedirs(dest, exist_ok=True)                    # pyarrow copy_files
        for name in files:
            os.makedirs(os.path.dirname(os.path.join(dest, name)), exist_ok=True)
            write_sequential(os.path.join(dest, name), read_sequential(os.path.join(tmp, name)))
        write_sequential(os.path.join(dest, ".metadata.json"), metadata_for(step, False))
        write_sequential(os.path.join(dest, ".metadata.json"), metadata_for(step, True))
        shutil.rmtree(tmp)
        done = sorted(n for n in os.listdir(trial) if re.match(r"^checkpoint_\d{6}$", n))
        for old in done[:-KEEP]:
            shutil.rmtree(os.path.join(trial, old))
    return {"saved": steps}


def latest(root):
    trial = os.path.join(root, EXP, TRIAL)
    try:
        names = [n for n in os.listdir(trial) if re.match(r"^checkpoint_\d{6}$", n)]
    except FileNotFoundError:
        return None
    return max(names) if names else None


def verify_dir(d, step, seed):
    read = {}
    for name, data in files_for(step, seed).items():
        p = os.path.join(d, name)
        try:
            got = read_sequential(p)
        except FileNotFoundError:
            got = None
        read[name] = check(p, got, data)
    read[".metadata.json"] = check(d + "/.metadata.json",
                                   read_sequential(os.path.join(d, ".metadata.json")),
                                   metadata_for(step, True))
    return read


def load(root, a):
    name = latest(root)
    if name is None:
        return {"latest": None}
    step = int(name.split("_")[1])
    return {"latest": name,
            "read": verify_dir(os.path.join(root, EXP, TRIAL, name), step, a.seed)}


def as_directory_read(root, tmp_parent, hold, seed):
    """One reader process: Checkpoint.as_directory() with deletion locks."""
    name = latest(root)
    src = os.path.join(root, EXP, TRIAL, name)
    step = int(name.split("_")[1])
    tmp = os.path.join(tmp_parent, "checkpoint_tmp_" + hashlib.sha256(src.encode()).hexdigest()[:16])
    lock = f"{tmp.rstrip('/')}.del_lock_{os.getpid()}"
    open(lock, "a").close()
    if not os.path.exists(os.path.join(tmp, ".metadata.json")):
        os.makedirs(tmp, exist_ok=True)      # to_directory: download
        for fn in [*files_for(step, seed), ".metadata.json"]:
            os.makedirs(os.path.dirname(os.path.join(tmp, fn)), exist_ok=True)
            write_sequential(os.path.join(tmp, fn), read_sequential(os.path.join(src, fn)))
    print(json.dumps({"ready": tmp, "lock": lock}), flush=True)
    time.sleep(hold)                          # the user's code uses the directory
    read = verify_dir(tmp, step, seed)
    os.remove(lock)
    remaining = glob.glob(f"{tmp.rstrip('/')}.del_lock_*")
    if not remaining:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps({"read": read, "removed": not remaining, "remaining": remaining}), flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "read":
        # ray_train.py read ROOT TMP_PARENT HOLD_SECONDS [SEED]
        as_directory_read(sys.argv[2], sys.argv[3], float(sys.argv[4]),
                          sys.argv[5] if len(sys.argv) > 5 else "s")
    else:
        main(save, load)
