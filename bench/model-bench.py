#!/usr/bin/python3
"""Model bench (issue 22 point 6): the long run of
tests/integration/test_model.py, the model-based random test of the
filesystem's semantics against a tmpfs oracle (doc/posix.md).  It runs
the test's random sequences with many more steps (default 10 000 in all:
20 seeds of 500 steps), every seed to its end even after a divergence,
shrinks each divergence (delta debugging) and prints the steps run and
every divergence with its shortest sequence.

Usage (as root; the test's fixtures start their own Ceph RGW):

    bench/model-bench.py [--steps 10000] [--seeds 20] [--base SEED]
                         [--shrink-s 120] [--jobs 1] [--ckptfs PATH]

--jobs N runs the seeds in N pytest processes at once (seeds base..,
split in N consecutive ranges; each process starts its own RGW), since
a step mostly waits on the server and on mounts (bench/README.md gives
the measured rates).  Each line a job prints starts with [jK]; the
summary adds the jobs' "model:" lines up.

Replay one seed: CKPTFS_MODEL_SEED=N CKPTFS_MODEL_STEPS=M with
tests/integration/test_model.py -k random.  Exit status 0 when no seed
diverged, 1 otherwise."""

import argparse
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=10000,
                    help="steps in all (default 10000)")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--base", type=int, default=int(time.time()) % 10**8,
                    help="first seed (default: from the clock, printed)")
    ap.add_argument("--shrink-s", type=float, default=120,
                    help="seconds of shrinking per divergence (0: none)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="pytest processes at once (default 1)")
    ap.add_argument("--ckptfs", default=str(REPO / "build" / "ckptfs"))
    ap.add_argument("--dump-dir", default=None,
                    help="where each divergence's bucket is written "
                         "(default /tmp/model-bench-BASE)")
    a = ap.parse_args()
    dump = Path(a.dump_dir or f"/tmp/model-bench-{a.base}")
    dump.mkdir(parents=True, exist_ok=True)
    per_seed = max(1, a.steps // a.seeds)
    jobs = max(1, min(a.jobs, a.seeds))
    print(f"model-bench: {a.seeds} seeds from {a.base}, {per_seed} steps "
          f"each, {jobs} job(s); buckets at divergences in {dump}",
          flush=True)
    t0 = time.monotonic()
    procs = []
    first = a.base
    for j in range(jobs):
        n = a.seeds // jobs + (1 if j < a.seeds % jobs else 0)
        env = dict(os.environ, CKPTFS_BIN=a.ckptfs,
                   CKPTFS_MODEL_KEEP_GOING="1",
                   CKPTFS_MODEL_SEEDS=str(n),
                   CKPTFS_MODEL_STEPS=str(per_seed),
                   CKPTFS_MODEL_BASE=str(first),
                   CKPTFS_MODEL_SHRINK_S=str(a.shrink_s),
                   CKPTFS_MODEL_TIMEOUT=str(24 * 3600),
                   CKPTFS_MODEL_DUMP=str(dump))
        first += n
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-s", "-p",
             "no:cacheprovider",
             str(REPO / "tests" / "integration" / "test_model.py"),
             "-k", "random"], env=env, cwd=REPO, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True))
    outs = [[] for _ in procs]
    lock = threading.Lock()

    def relay(j):
        for ln in procs[j].stdout:  # the seeds' lines as they come
            outs[j].append(ln)
            if ln.startswith(("seed ", "model: ", "  seed ", "shortest",
                              "    (", "]", "CKPTFS_MODEL_SEED",
                              "shrink:")):
                with lock:
                    print(f"[j{j}] {ln}", end="", flush=True)
        procs[j].wait()

    threads = [threading.Thread(target=relay, args=(j,))
               for j in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    steps = divs = known = 0
    for o in outs:
        for ln in o:
            m = re.match(r"model: (\d+) steps run over \d+ seeds, (\d+) "
                         r"divergences, (\d+) known", ln)
            if m:
                steps += int(m.group(1))
                divs += int(m.group(2))
                known += int(m.group(3))
    codes = [p.returncode for p in procs]
    print(f"model-bench: {time.monotonic() - t0:.0f} s, {steps} steps, "
          f"{divs} divergences, {known} known ones; pytest exit {codes}")
    bad = [j for j, c in enumerate(codes) if c not in (0, 1)]
    for j in bad:
        print(f"[j{j}] " + "".join(outs[j])[-4000:])
    if bad:
        return 2
    return 0 if all(c == 0 for c in codes) else 1


if __name__ == "__main__":
    sys.exit(main())
