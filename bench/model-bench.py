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
                         [--shrink-s 120] [--ckptfs PATH]

Replay one seed: CKPTFS_MODEL_SEED=N CKPTFS_MODEL_STEPS=M with
tests/integration/test_model.py -k random.  Exit status 0 when no seed
diverged, 1 otherwise."""

import argparse
import os
import subprocess
import sys
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
    ap.add_argument("--ckptfs", default=str(REPO / "build" / "ckptfs"))
    a = ap.parse_args()
    per_seed = max(1, a.steps // a.seeds)
    env = dict(os.environ, CKPTFS_BIN=a.ckptfs,
               CKPTFS_MODEL_KEEP_GOING="1",
               CKPTFS_MODEL_SEEDS=str(a.seeds),
               CKPTFS_MODEL_STEPS=str(per_seed),
               CKPTFS_MODEL_BASE=str(a.base),
               CKPTFS_MODEL_SHRINK_S=str(a.shrink_s),
               CKPTFS_MODEL_TIMEOUT=str(24 * 3600))
    print(f"model-bench: {a.seeds} seeds from {a.base}, {per_seed} steps "
          f"each", flush=True)
    t0 = time.monotonic()
    p = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
         str(REPO / "tests" / "integration" / "test_model.py"),
         "-k", "random"], env=env, cwd=REPO, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    out = []
    for ln in p.stdout:        # the seeds' lines as they come
        out.append(ln)
        if ln.startswith(("seed ", "model: ", "  seed ", "shortest",
                          "    (", "]", "CKPTFS_MODEL_SEED", "shrink:")):
            print(ln, end="", flush=True)
    p.wait()
    out = "".join(out)
    print(f"model-bench: {time.monotonic() - t0:.0f} s, pytest exit "
          f"{p.returncode}")
    if p.returncode not in (0, 1):
        print(out[-4000:])
        return 2
    return 0 if p.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
