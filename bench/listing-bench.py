#!/usr/bin/python3
"""Listing bench: what -o listing=flat (doc/portability.md: the mode ckptfs
falls back to on servers whose delimiter listings miss deep directories,
s3rver) costs against listing=delimiter, measured in one run on one Ceph
RGW (tests/s3server/rgw.sh, which lists right either way).

The bucket holds --ckpts checkpoints run/ckpt-N/, each with --files files
in a nested layout (model/, optim/shard-K/...) of empty objects: the cost
is the listing alone.  For each mode, --runs times on a fresh read-only
mount:

  ls run        one directory listing of the checkpoints' parent
  find run      every directory of the tree (ls -R)

Prints one table: best seconds per mode and the ratio flat/delimiter.  A
report, never a test: it exits 0 when the measurements ran.  Timings on a
shared 2-core machine are noisy; the ratio is what to read.

    bench/listing-bench.py --ckpts 50 --files 40 --runs 3
    CKPTFS_BIN=build/ckptfs bench/listing-bench.py
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lib_bench  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def keys(ckpts, files):
    out = []
    for c in range(ckpts):
        for f in range(files):
            if f < files // 2:
                out.append(f"run/ckpt-{c:04d}/model/part-{f:03d}.bin")
            else:
                out.append(f"run/ckpt-{c:04d}/optim/shard-{f % 4}/s-{f:03d}.bin")
    return out


def timed(argv, timeout):
    t0 = time.monotonic()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, timeout=timeout)
    return time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ckpts", type=int, default=50)
    ap.add_argument("--files", type=int, default=40)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--op-timeout", type=float, default=300)
    a = ap.parse_args()
    ckptfs = os.environ.get("CKPTFS_BIN", str(REPO / "build" / "ckptfs"))
    work = Path(tempfile.mkdtemp(prefix="listing-bench-"))
    rgw = None
    try:
        rgw = lib_bench.RGW.start(work / "rgw", work)
        s3 = rgw.client()
        s3.create_bucket(Bucket="listing-bench")
        ks = keys(a.ckpts, a.files)
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(16) as ex:
            list(ex.map(lambda k: s3.put_object(Bucket="listing-bench", Key=k, Body=b""), ks))
        print(f"{len(ks)} objects in {a.ckpts} checkpoints", file=sys.stderr)
        best = {}
        for mode in ("delimiter", "flat"):
            for op in ("ls", "find"):
                best[(mode, op)] = float("inf")
            for r in range(a.runs):
                for op in ("ls", "find"):
                    mp = work / f"mnt-{mode}-{op}-{r}"
                    mp.mkdir()
                    argv = [ckptfs, "mount", "s3://listing-bench", str(mp), "-f",
                            "--endpoint", rgw.endpoint, "--region", rgw.region,
                            "-o", f"ro,listing={mode},cache_dir={work / 'cache'}"]
                    m = lib_bench.BenchMount(argv, mp, work / f"{mode}.log", rgw.env)
                    try:
                        cmd = ["ls", str(mp / "run")] if op == "ls" else \
                              ["find", str(mp / "run"), "-type", "d"]
                        t = timed(cmd, a.op_timeout)
                        best[(mode, op)] = min(best[(mode, op)], t)
                    finally:
                        m.unmount()
        print(f"listing bench: {len(ks)} objects, {a.ckpts} checkpoints of "
              f"{a.files} files, best of {a.runs} (s)")
        print(f"{'operation':<10} {'delimiter':>10} {'flat':>10} {'flat/delim':>11}")
        for op in ("ls", "find"):
            d, f = best[("delimiter", op)], best[("flat", op)]
            print(f"{op:<10} {d:>10.3f} {f:>10.3f} {f / d:>11.2f}")
    finally:
        if rgw:
            rgw.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
