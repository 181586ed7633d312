"""Recovery that converges and failures that stay local (issue 12; the rules
are in doc/commit.md, "Ordering", "Resume rules" and "Errors").

- A crash leaves a temp-named checkpoint behind; the resumed job removes it
  (as real jobs do) and goes on saving: every later checkpoint becomes
  visible and `ckptfs sync` returns.  A temp-named directory nobody renames
  blocks nothing.
- A directory transaction open at the crash (no commit trigger yet) commits
  after the restart by the same idle `commit_delay` trigger, with no
  command.
- A step that fails for good (the store refuses a key: a bucket policy
  denies it) holds back only the steps that depend on it: an independent
  checkpoint saved after it becomes visible, a `latest` file beside it
  waits; `ckptfs sync` returns non-zero in bounded time naming the step,
  its path and the server's error; `ckptfs status` shows it; `ckptfs drop`
  gives it up and the queue goes on.
"""

import json
import os
import shutil
import subprocess
import time

import pytest

import helpers
from helpers import (det_bytes, ckptfs_status, ckptfs_sync, kill_ckptfs,
                     observer_options, pending_markers, s3_get, s3_sizes, wait_for)

MiB = 1 << 20


def writer(mount, bucket, cdir, mp, *more):
    mp.mkdir(exist_ok=True)
    return mount(bucket, options=[f"cache_dir={cdir}", *more], mountpoint=mp)


def save(d, files):
    os.makedirs(d, exist_ok=True)
    for rel, body in files.items():
        with open(d / rel, "wb") as f:
            f.write(body)


def ckpt_files(n):
    return {f"shard-{i}.bin": det_bytes(1000 * n + i, 256 * 1024 + i) for i in range(3)}


def assert_in_bucket(s3, bucket, prefix, files):
    for rel, body in files.items():
        got = s3_get(s3, bucket, f"{prefix}/{rel}")
        assert got == body, f"{prefix}/{rel}: {None if got is None else len(got)} bytes"


@pytest.mark.timeout(150)
def test_removed_temp_checkpoint_of_a_crash_blocks_nothing(s3server, bucket, mount, tmp_path):
    s3 = s3server.client()
    cdir = tmp_path / "cache-w"
    mp = tmp_path / "mnt-w"
    w = writer(mount, bucket, cdir, mp, "commit_delay=600")
    save(w / "checkpoint-1", ckpt_files(1))
    ckptfs_sync(w)
    # the crash: half of tmp-checkpoint-2 written
    save(w / "tmp-checkpoint-2", dict(list(ckpt_files(2).items())[:2]))
    kill_ckptfs(w)

    w = writer(mount, bucket, cdir, mp, "commit_delay=600")
    # the restarted mount shows the half-written temp directory ...
    assert sorted(os.listdir(w / "tmp-checkpoint-2")) == ["shard-0.bin", "shard-1.bin"]
    # ... the resumed job removes it and saves again, with rotation
    shutil.rmtree(w / "tmp-checkpoint-2")
    assert not (w / "tmp-checkpoint-2").exists()
    for n in (2, 3):
        save(w / f"tmp-checkpoint-{n}", ckpt_files(n))
        os.rename(w / f"tmp-checkpoint-{n}", w / f"checkpoint-{n}")
    shutil.rmtree(w / "checkpoint-1")
    # a temp directory nobody will rename does not hold anything back
    save(w / "tmp-abandoned", {"x.bin": b"x" * 1000})
    t0 = time.monotonic()
    ckptfs_sync(w, timeout=60)
    took = time.monotonic() - t0
    for n in (2, 3):
        assert_in_bucket(s3, bucket, f"checkpoint-{n}", ckpt_files(n))
    keys = s3_sizes(s3, bucket)
    assert not [k for k in keys if k.startswith("checkpoint-1/")], "rotated away"
    assert not [k for k in keys if "tmp-" in k], [k for k in keys if "tmp-" in k]
    assert not pending_markers(s3, bucket), pending_markers(s3, bucket)
    st = ckptfs_status(w)
    pending = st.get("pending", [])
    assert [p["path"] for p in pending] == ["tmp-abandoned"], pending
    assert pending[0]["state"] == "waiting-for-rename", pending
    assert took < 60


@pytest.mark.timeout(120)
def test_open_transaction_of_a_crash_commits_by_idleness(s3server, bucket, mount, tmp_path):
    s3 = s3server.client()
    cdir = tmp_path / "cache-w"
    mp = tmp_path / "mnt-w"
    files = ckpt_files(7)
    # a long commit_delay: the crash comes before the idle trigger
    w = writer(mount, bucket, cdir, mp, "commit_delay=600")
    save(w / "checkpoint-7", files)
    kill_ckptfs(w)
    assert s3_get(s3, bucket, "checkpoint-7/shard-0.bin") is None or \
        pending_markers(s3, bucket), "visible before any trigger"
    # restarted with a short delay and no command at all
    w = writer(mount, bucket, cdir, mp, "commit_delay=2")
    wait_for(lambda: not pending_markers(s3, bucket)
             and s3_get(s3, bucket, "checkpoint-7/shard-2.bin") == files["shard-2.bin"],
             60, lambda: f"checkpoint-7 committed; status {ckptfs_status(w).get('pending')}")
    assert_in_bucket(s3, bucket, "checkpoint-7", files)
    o = mount(bucket, options=observer_options(tmp_path / "cache-o"))
    wait_for(lambda: sorted(os.listdir(o / "checkpoint-7")) == sorted(files), 10,
             "another mount sees checkpoint-7 whole")


def deny_bin_under(s3, bucket, prefix):
    s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Deny", "Principal": "*", "Action": "s3:PutObject",
                       "Resource": f"arn:aws:s3:::{bucket}/{prefix}*/*.bin"}]}))


@pytest.mark.timeout(150)
def test_a_step_that_fails_for_good_holds_back_only_what_depends_on_it(
        s3server, bucket, mount, tmp_path):
    s3 = s3server.client()
    cdir = tmp_path / "cache-w"
    mp = tmp_path / "mnt-w"
    old = ckpt_files(1)
    s3server.put(bucket, "run/checkpoint-1/shard-0.bin", old["shard-0.bin"])
    deny_bin_under(s3, bucket, "run/checkpoint-2")
    w = writer(mount, bucket, cdir, mp, "commit_delay=1")
    run = w / "run"
    save(run / "checkpoint-2", ckpt_files(2))          # the store refuses these
    save(run / "checkpoint-3", ckpt_files(3))          # independent: goes on
    (run / "latest").write_text("checkpoint-2")        # names the failed one: waits
    shutil.rmtree(run / "checkpoint-1")                # rotation: waits

    wait_for(lambda: s3_get(s3, bucket, "run/checkpoint-3/shard-2.bin") is not None
             and not [m for m in pending_markers(s3, bucket) if "checkpoint-3" in m],
             60, "the independent checkpoint-3 committed")
    assert_in_bucket(s3, bucket, "run/checkpoint-3", ckpt_files(3))
    # sync returns, non-zero, naming the failed step, its path and the error
    t0 = time.monotonic()
    r = subprocess.run([helpers.CKPTFS_BIN, "sync", str(w)], capture_output=True, text=True,
                       timeout=90)
    assert r.returncode != 0, r.stdout
    assert time.monotonic() - t0 < 60
    assert "run/checkpoint-2" in r.stderr and "AccessDenied" in r.stderr, r.stderr
    assert "step" in r.stderr, r.stderr
    # status shows the failed step and what it holds back
    pending = {p["path"]: p for p in ckptfs_status(w)["pending"]}
    assert pending["run/checkpoint-2"]["state"] == "failed", pending
    assert pending["run/latest"]["state"] == "blocked", pending
    assert pending["run/checkpoint-1"]["state"] == "blocked", pending
    assert s3_get(s3, bucket, "run/latest") is None, "latest named a checkpoint not there"
    assert s3_get(s3, bucket, "run/checkpoint-1/shard-0.bin") == old["shard-0.bin"], \
        "the rotation deleted an old checkpoint while the new one failed"

    # the operator fixes the permission and retries: everything lands
    s3.delete_bucket_policy(Bucket=bucket)
    r = subprocess.run([helpers.CKPTFS_BIN, "retry", str(w)], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    ckptfs_sync(w, timeout=60)
    assert_in_bucket(s3, bucket, "run/checkpoint-2", ckpt_files(2))
    assert s3_get(s3, bucket, "run/latest") == b"checkpoint-2"
    assert s3_get(s3, bucket, "run/checkpoint-1/shard-0.bin") is None
    assert not pending_markers(s3, bucket)


@pytest.mark.timeout(120)
def test_drop_gives_a_failed_step_up(s3server, bucket, mount, tmp_path):
    s3 = s3server.client()
    deny_bin_under(s3, bucket, "bad")
    w = writer(mount, bucket, tmp_path / "cache-w", tmp_path / "mnt-w", "commit_delay=1")
    save(w / "bad-ckpt", ckpt_files(4))
    (w / "latest").write_text("bad-ckpt")
    wait_for(lambda: any(p["state"] == "failed" for p in ckptfs_status(w)["pending"]), 60,
             "the commit of bad-ckpt failed")
    failed = [p for p in ckptfs_status(w)["pending"] if p["state"] == "failed"]
    assert [p["path"] for p in failed] == ["bad-ckpt"], failed
    r = subprocess.run([helpers.CKPTFS_BIN, "drop", str(w), str(failed[0]["id"])],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "bad-ckpt" in r.stdout, r.stdout
    ckptfs_sync(w, timeout=60)
    assert s3_get(s3, bucket, "latest") == b"bad-ckpt"
    keys = s3_sizes(s3, bucket)
    assert not [k for k in keys if k.startswith("bad-ckpt/")], keys
    assert not pending_markers(s3, bucket)
    wait_for(lambda: not (w / "bad-ckpt").exists(), 10,
             "the dropped transaction left the mount")
