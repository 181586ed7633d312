"""A model-based random test of the filesystem's semantics (issue 22 point
6, doc/posix.md).

Random sequences of calls through a mount (create, writes at random
offsets and sizes, truncate, renames of files and directories over
existing targets, unlink, mkdir, rmdir, chmod, chown, utimensat, setxattr,
removexattr, symlink), mixed with another host's writes and removals (a
second writable mount, in its own subtree), boto3 PUTs and DELETEs (in
another subtree), `ckptfs sync`, unmount + remount and SIGKILL + remount.
Every call is replayed on a local tmpfs (the oracle): the errno must be
the same, and after every step the mount must show the tmpfs's tree
(names, types, sizes, content hashes, mode, owner, mtime to the
nanosecond when set by utimensat (else within 3 s), symlink targets, user
xattrs); after every sync an observer mount (its own cache, read-only)
must show it too.  The differences doc/posix.md documents are applied by
named rules (model_lib.RULES) and nothing else.

Seeds: CKPTFS_MODEL_SEED=N replays one seed; CKPTFS_MODEL_SEEDS (default
3) seeds of CKPTFS_MODEL_STEPS (default 60) steps otherwise.  A failure
prints the seed and the steps, then shrinks them (delta debugging, at most
CKPTFS_MODEL_SHRINK_S seconds, default 120) and prints the shortest
sequence; paste it into REGRESSIONS.  The long run: bench/model-bench.py.

Why a seeded generator and not hypothesis.stateful: every example costs a
bucket, three FUSE mounts and a tmpfs, so hypothesis's many small
examples and its shrinker's hundreds of replays do not fit the CI budget;
the steps need the oracle's state to be mostly valid; and a plain
generator needs no new dependency.
"""
import os
import random

import pytest

import model_lib as ml

SEEDS = int(os.environ.get("CKPTFS_MODEL_SEEDS", "3"))
STEPS = int(os.environ.get("CKPTFS_MODEL_STEPS", "60"))
SHRINK_S = float(os.environ.get("CKPTFS_MODEL_SHRINK_S", "120"))
ONE_SEED = os.environ.get("CKPTFS_MODEL_SEED")


@pytest.fixture
def make_world(s3server, mount, tmp_path):
    n = [0]

    def make(check_every=1):
        n[0] += 1
        return ml.World(s3server, s3server.new_bucket("model"), mount,
                        tmp_path / f"w{n[0]}", check_every=check_every,
                        log=print)
    return make


def _seeds():
    if ONE_SEED is not None:
        return [int(ONE_SEED)]
    base = int(os.environ.get("CKPTFS_MODEL_BASE", "20261130"))
    return [base + i for i in range(SEEDS)]


def _report(seed, d, steps, make_world):
    print(f"\nCKPTFS_MODEL_SEED={seed} diverged: {d}")
    print("steps:", ml.format_steps(steps[:d.step_no + 1]))
    short, sd = ml.shrink(make_world, steps, d, SHRINK_S)
    print(f"shortest ({len(short)} steps): {sd}\n{ml.format_steps(short)}")
    return short, sd


@pytest.mark.timeout(900)
def test_random_sequences(make_world):
    seeds = _seeds()
    total = 0
    for seed in seeds:
        d, steps, w = ml.generate_and_run(make_world, seed, STEPS)
        total += w.steps_run
        print(f"seed {seed}: {w.steps_run} steps, rules used "
              f"{ {k: v for k, v in w.rules_used.items() if v} }")
        if d is not None:
            short, sd = _report(seed, d, steps, make_world)
            pytest.fail(f"seed {seed}: {d}\nshortest ({len(short)} steps): "
                        f"{sd}\n{ml.format_steps(short)}")
    assert total >= len(seeds) * STEPS


# Sequences the random test found, shrunk; each one diverged once.
REGRESSIONS = {
}

XFAIL = {
}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", sorted(REGRESSIONS) or [None])
def test_regression(name, make_world):
    if name is None:
        pytest.skip("no regression sequences")
    if name in XFAIL:
        pytest.xfail(XFAIL[name])
    d, _w = ml.run_steps(make_world, REGRESSIONS[name])
    assert d is None, f"{name}: {d}"


def test_generator_is_reproducible(tmp_path):
    """One seed gives one sequence: the seed printed on failure replays
    it (the generator reads the oracle's names, so an empty one here)."""
    (tmp_path / "o").mkdir()
    a = ml.Gen(7, tmp_path / "o")
    b = ml.Gen(7, tmp_path / "o")
    assert [a.step() for _ in range(50)] == [b.step() for _ in range(50)]
    assert random.Random(7).random() == random.Random(7).random()
