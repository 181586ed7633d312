#!/usr/bin/python3
"""Verify bench (issue 14): how long `ckptfs verify` takes to re-read and
check a checkpoint, against the plain download of the same objects by
curl measured in the same run.

One run starts its own Ceph RGW (tests/s3server/rgw.sh, no compression),
saves a checkpoint of --files files (--size-mib in all) through a ckptfs
mount (tmp dir, rename, `ckptfs commit`: manifest with CRC-32C and block
CRCs), then, --reps times in alternating order:

  curl        `curl --parallel --parallel-max T --aws-sigv4` GETs of every
              object to /dev/null (the reference: bytes moved, nothing
              checked)
  verify-url  `ckptfs verify s3://BUCKET/ckpt --threads T` (this process)
  verify-path `ckptfs verify MNT/ckpt --threads T` (the mount's daemon)

and prints the median seconds of each and its ratio to curl's.  Every
verify must exit 0.  A report, never a test: timings on a shared machine
are noisy (the load average is printed with the table).

    bench/verify-bench.py                      # 1 GiB in 8 files, 3 reps
    bench/verify-bench.py --size-mib 256 --files 4 --reps 1   # smoke run
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lib_bench  # noqa: E402
from lib_bench import helpers  # noqa: E402


def timed(argv, env):
    t0 = time.monotonic()
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=3600)
    dt = time.monotonic() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:3])}... exit {p.returncode}:\n"
                           f"{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return dt


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ckptfs", default=str(lib_bench.REPO / "build" / "ckptfs"))
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="verify-bench-", dir="/var/tmp"))
    rgw = lib_bench.RGW.start(work / "rgw", work,
                              memstore_bytes=(a.size_mib + 512) * 3 << 20)
    m = None
    try:
        s3 = rgw.client()
        s3.create_bucket(Bucket="verify-bench")
        mp = work / "mnt"
        mp.mkdir()
        m = lib_bench.BenchMount([a.ckptfs, "mount", "s3://verify-bench", str(mp), "-f",
                                  "--endpoint", rgw.endpoint, "--region", rgw.region,
                                  "-o", f"cache_dir={work}/cache,commit_delay=600"],
                                 mp, work / "ckptfs.log", rgw.env)
        per = (a.size_mib << 20) // a.files
        (mp / "tmp-ckpt").mkdir()
        for i in range(a.files):
            with open(mp / "tmp-ckpt" / f"shard-{i}.bin", "wb") as f:
                left = per
                while left:
                    n = min(left, 8 << 20)
                    f.write(os.urandom(n))
                    left -= n
        os.rename(mp / "tmp-ckpt", mp / "ckpt")
        subprocess.run([a.ckptfs, "commit", str(mp / "ckpt")], check=True, env=rgw.env,
                       timeout=3600, capture_output=True)
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket="verify-bench", Prefix="ckpt/")["Contents"]
                if "/.ckptfs" not in o["Key"]]
        curl = ["curl", "-sSf", "--parallel", "--parallel-max", str(a.threads),
                "--aws-sigv4", f"aws:amz:{rgw.region}:s3",
                "--user", f"{rgw.access_key}:{rgw.secret_key}",
                "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"]
        for k in keys:
            curl += ["-o", "/dev/null", f"{rgw.endpoint}/verify-bench/{k}"]
        runs = {
            "curl": curl,
            "verify-url": [a.ckptfs, "verify", "s3://verify-bench/ckpt", "--threads", str(a.threads),
                           "--endpoint", rgw.endpoint, "--region", rgw.region],
            "verify-path": [a.ckptfs, "verify", str(mp / "ckpt"), "--threads",
                            str(a.threads)],
        }
        times = {k: [] for k in runs}
        order = list(runs)
        for rep in range(a.reps):
            for name in (order if rep % 2 == 0 else order[::-1]):
                times[name].append(timed(runs[name], rgw.env))
        ref = statistics.median(times["curl"])
        print(f"verify bench: {len(keys)} objects, {a.size_mib} MiB, threads {a.threads}, "
              f"{a.reps} reps, load average {os.getloadavg()[0]:.1f}")
        print(f"{'what':<12} {'median s':>9} {'MiB/s':>8} {'vs curl':>8}")
        for name, ts in times.items():
            med = statistics.median(ts)
            print(f"{name:<12} {med:9.2f} {a.size_mib / med:8.0f} {med / ref:7.2f}x")
    finally:
        if m:
            m.unmount()
        rgw.stop()
        subprocess.run(["rm", "-rf", str(work)])


if __name__ == "__main__":
    main()
