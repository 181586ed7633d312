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
- A step the store keeps answering 503 (a transient error) for longer than
  `transient_limit` is set aside the same way (an independent checkpoint
  commits, `latest` and the rotation wait, `sync` returns non-zero naming
  it, `status` shows it failed and still retried), and it keeps being
  retried: once the store answers again it lands, then what waited for it.
"""

import json
import os
import shutil
import subprocess
import time

import pytest

import helpers
from faultproxy import FaultProxy
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
    s3server.put(bucket, "run/")
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


@pytest.fixture
def store_proxy(s3server):
    """A FaultProxy in front of RGW.  Ask for it before `mount`: it is then
    closed after the mounts are gone, and their unmount (faults cleared
    first) runs over a healthy link."""
    p = FaultProxy(s3server.endpoint)
    yield p
    p.clear()
    p.close()


def writer_via(mount, s3server, bucket, proxy, cdir, mp, *more):
    """writer(), with its S3 traffic through proxy."""
    mp.mkdir(exist_ok=True)
    argv = mount.argv(bucket, "", mp, [f"cache_dir={cdir}", *more], endpoint=False)
    argv += ["--endpoint", proxy.endpoint, "--region", s3server.region]
    return mount(bucket, argv=argv, mountpoint=mp, timeout=60)


TRANSIENT_LIMIT_S = 5
# what the store answers 503 for ever (until the test lifts it): the file
# uploads of checkpoint-2, or its commit point (its manifest PUT)
TRANSIENT_FAULTS = {
    "data": r"/run/checkpoint-2/[^/]+\.bin$",
    "manifest": r"/run/checkpoint-2/\.ckptfs/manifest\.",
}


@pytest.mark.timeout(240)
@pytest.mark.parametrize("what", list(TRANSIENT_FAULTS))
def test_a_step_failing_transiently_past_the_limit_holds_back_only_what_depends_on_it(
        s3server, bucket, store_proxy, mount, tmp_path, what):
    s3 = s3server.client()
    p = store_proxy
    old = ckpt_files(1)
    s3server.put(bucket, "run/checkpoint-1/shard-0.bin", old["shard-0.bin"])
    # short request budgets: each upload or step attempt gives up after
    # about 3 s of 503s, so the engine sees the failures (and retries them
    # at most 1 s apart)
    w = writer_via(mount, s3server, bucket, p, tmp_path / "cache-w", tmp_path / "mnt-w",
                   "commit_delay=1", f"transient_limit={TRANSIENT_LIMIT_S}",
                   "retry_timeout=3", "retry_max_delay=1")
    o = mount(bucket, options=observer_options(tmp_path / "cache-o"))
    run = w / "run"
    # the directory first: its marker and intent manifest go out at mkdir
    os.makedirs(run / "checkpoint-2")
    fault = p.rule("503", method="PUT", path_re=TRANSIENT_FAULTS[what], count=None)
    t0 = time.monotonic()
    save(run / "checkpoint-2", ckpt_files(2))          # the store answers 503
    save(run / "checkpoint-3", ckpt_files(3))          # independent: goes on
    (run / "latest").write_text("checkpoint-2")        # names the failing one: waits
    shutil.rmtree(run / "checkpoint-1")                # rotation: waits

    def seen(d, files):
        try:
            return all((d / rel).read_bytes() == body for rel, body in files.items())
        except OSError:
            return False

    # another host sees checkpoint-3 while checkpoint-2 still gets 503s
    wait_for(lambda: seen(o / "run" / "checkpoint-3", ckpt_files(3)), 60,
             lambda: f"checkpoint-3 visible; status {ckptfs_status(w).get('pending')}")
    assert time.monotonic() - t0 < 60
    # ... but not before checkpoint-2 had been failing for transient_limit:
    # until then it held the queue
    assert time.monotonic() - p.events[0].t >= TRANSIENT_LIMIT_S - 0.5, p.events[:3]
    assert_in_bucket(s3, bucket, "run/checkpoint-3", ckpt_files(3))
    assert p.events, "no 503 was answered"

    # sync returns, non-zero, naming the step that keeps failing
    t1 = time.monotonic()
    r = subprocess.run([helpers.CKPTFS_BIN, "sync", str(w)], capture_output=True, text=True,
                       timeout=90)
    assert r.returncode != 0, r.stdout
    assert time.monotonic() - t1 < 30
    assert "run/checkpoint-2" in r.stderr and "step" in r.stderr, r.stderr
    assert "still retried" in r.stderr, r.stderr
    # status shows it failed (and still retried), and what it holds back
    st = ckptfs_status(w)
    pending = {q["path"]: q for q in st["pending"]}
    assert pending["run/checkpoint-2"]["state"] == "failed", pending
    assert pending["run/checkpoint-2"]["retrying"] is True, pending
    assert "still retried" in pending["run/checkpoint-2"]["error"], pending
    assert pending["run/latest"]["state"] == "blocked", pending
    assert pending["run/checkpoint-1"]["state"] == "blocked", pending
    assert "checkpoint-2" in pending["run/latest"]["error"], pending
    assert "run/checkpoint-3" not in pending, pending
    assert st["metrics"]["commit"]["failed_transactions"] == 1, st["metrics"]["commit"]
    text = subprocess.run([helpers.CKPTFS_BIN, "status", str(w)], capture_output=True,
                          text=True, timeout=30).stdout
    assert "failed" in text and "still retried" in text, text
    assert s3_get(s3, bucket, "run/latest") is None, "latest named a checkpoint not there"
    assert s3_get(s3, bucket, "run/checkpoint-1/shard-0.bin") == old["shard-0.bin"], \
        "the rotation deleted an old checkpoint while the new one was failing"
    assert [m for m in pending_markers(s3, bucket) if "checkpoint-2" in m], \
        "checkpoint-2 lost its pending marker while failing"
    if what == "data":
        assert s3_get(s3, bucket, "run/checkpoint-2/shard-0.bin") is None
    # ... and it is still being tried in the background
    n = len(p.events)
    wait_for(lambda: len(p.events) > n, 20, "another attempt at checkpoint-2")

    # the store answers again: it lands by itself (no command), then what
    # waited for it; sync no longer fails
    p.unrule(fault)
    wait_for(lambda: s3_get(s3, bucket, "run/latest") == b"checkpoint-2", 30,
             lambda: f"checkpoint-2 and latest landed; status {ckptfs_status(w)['pending']}")
    ckptfs_sync(w, timeout=60)
    assert_in_bucket(s3, bucket, "run/checkpoint-2", ckpt_files(2))
    assert s3_get(s3, bucket, "run/latest") == b"checkpoint-2"
    assert s3_get(s3, bucket, "run/checkpoint-1/shard-0.bin") is None
    assert not pending_markers(s3, bucket)
    assert ckptfs_status(w)["pending"] == [], ckptfs_status(w)["pending"]
    wait_for(lambda: seen(o / "run" / "checkpoint-2", ckpt_files(2))
             and (o / "run" / "latest").read_bytes() == b"checkpoint-2", 10,
             "another host sees checkpoint-2 and latest")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "abc", ""])
def test_transient_limit_must_be_seconds_above_0(s3server, bucket, tmp_path, value):
    mp = tmp_path / "mnt"
    mp.mkdir()
    p = helpers.run([helpers.CKPTFS_BIN, "mount", f"s3://{bucket}", str(mp), "-f",
                     "--endpoint", s3server.endpoint, "-o", f"transient_limit={value}"],
                    check=False, timeout=30, env=s3server.env_for_ckptfs())
    assert p.returncode != 0
    assert "mount option transient_limit" in p.stderr, p.stderr
    assert not helpers.is_fuse_mount(mp)


# --------------------------------------------------------------------------
# issue 21 point 7: unmount while a step has failed for good, and while the
# link is faulty: fusermount3 -u returns, ckptfs exits in bounded time
# naming what is left, and the journal keeps it for the next mount

UNMOUNT_BOUND_S = 60   # fusermount3 -u returning plus ckptfs exiting


def unmount_bounded(m, bound=UNMOUNT_BOUND_S):
    """fusermount3 -u of m (a foreground conftest Mount), then waits for its
    ckptfs to exit, all within `bound` seconds.  Returns (seconds taken,
    exit status, the log).  Fails (and kills ckptfs) when it takes longer."""
    t0 = time.monotonic()
    try:
        r = subprocess.run(["fusermount3", "-u", str(m.path)], capture_output=True,
                           text=True, timeout=bound)
    except subprocess.TimeoutExpired:
        m.expect_clean_exit = False
        raise AssertionError(f"fusermount3 -u did not return within {bound}s\n"
                             f"{m.log_tail(30)}") from None
    assert r.returncode == 0, f"fusermount3 -u: {r.stderr}"
    try:
        rc = m.proc.wait(max(1.0, bound - (time.monotonic() - t0)))
    except subprocess.TimeoutExpired:
        m.expect_clean_exit = False
        m.proc.kill()
        m.proc.wait(10)
        raise AssertionError(f"ckptfs still running {bound}s after fusermount3 -u "
                             f"(killed)\n{m.log_tail(30)}") from None
    took = time.monotonic() - t0
    m.unmounted = True
    m.returncode = rc
    return took, rc, m.log_text()


def unmount_log(log):
    """The log lines from the unmount on."""
    i = log.find("unmount: committing")
    return log[i:] if i >= 0 else ""


def unmount_error_line(log):
    """The unmount's own report of what it leaves (doc/commit.md, "Errors":
    unmount logs what `ckptfs sync` prints), or ""."""
    return next((ln for ln in log.splitlines()
                 if "unmount: pending commits failed" in ln), "")


@pytest.mark.timeout(180)
def test_unmount_with_a_step_failed_for_good_leaves_it_to_the_next_mount(
        s3server, bucket, mount, tmp_path):
    s3 = s3server.client()
    cdir, mp = tmp_path / "cache-w", tmp_path / "mnt-w"
    s3server.put(bucket, "run/")
    deny_bin_under(s3, bucket, "run/checkpoint-2")
    w = writer(mount, bucket, cdir, mp, "commit_delay=1")
    run = w / "run"
    save(run / "checkpoint-2", ckpt_files(2))          # refused for good
    save(run / "checkpoint-3", ckpt_files(3))          # independent
    wait_for(lambda: any(p["state"] == "failed" and p["path"] == "run/checkpoint-2"
                         for p in ckptfs_status(w)["pending"]), 60,
             "the commit of run/checkpoint-2 failed")

    took, rc, log = unmount_bounded(w)
    tail = unmount_log(log)
    assert rc >= 0, f"ckptfs killed by signal {-rc} at unmount\n{tail}"
    # the unmount's report names what is left: the step, its path, the error
    line = unmount_error_line(tail)
    assert "run/checkpoint-2" in line and "AccessDenied" in line, \
        f"the unmount's report does not name the failed step:\n{tail}"
    assert "next mount" in line, line
    assert s3_get(s3, bucket, "run/checkpoint-2/shard-0.bin") is None
    assert_in_bucket(s3, bucket, "run/checkpoint-3", ckpt_files(3))

    # the policy lifted, the next mount of the same cache lands it
    s3.delete_bucket_policy(Bucket=bucket)
    w = writer(mount, bucket, cdir, mp, "commit_delay=1")
    wait_for(lambda: s3_get(s3, bucket, "run/checkpoint-2/shard-2.bin") is not None
             and not pending_markers(s3, bucket), 60,
             lambda: f"checkpoint-2 landed after the remount; status "
                     f"{ckptfs_status(w).get('pending')}")
    ckptfs_sync(w, timeout=60)
    assert_in_bucket(s3, bucket, "run/checkpoint-2", ckpt_files(2))
    assert_in_bucket(s3, bucket, "run/checkpoint-3", ckpt_files(3))
    o = mount(bucket, options=observer_options(tmp_path / "cache-o"))
    assert {r: (o / "run/checkpoint-2" / r).read_bytes() for r in ckpt_files(2)} == \
        ckpt_files(2)
    print(f"\n[failed for good] unmount took {took:.1f}s, exit {rc}; log:\n{tail}")


@pytest.mark.timeout(240)
@pytest.mark.parametrize("link", ["503", "down"])
def test_unmount_over_a_dead_link_is_bounded_and_loses_nothing(
        s3server, bucket, store_proxy, mount, tmp_path, link):
    s3 = s3server.client()
    p = store_proxy
    cdir, mp = tmp_path / "cache-w", tmp_path / "mnt-w"
    s3server.put(bucket, "run/")
    w = writer_via(mount, s3server, bucket, p, cdir, mp, "commit_delay=600",
                   f"transient_limit={TRANSIENT_LIMIT_S}", "retry_timeout=3",
                   "retry_max_delay=1")
    save(w / "run" / "checkpoint-1", ckpt_files(1))
    ckptfs_sync(w, timeout=60)
    # checkpoint-2 written while the link still works, then it fails for
    # every request: nothing of it can commit before the unmount
    save(w / "run" / "checkpoint-2", ckpt_files(2))
    (w / "run" / "latest").write_text("checkpoint-2")
    if link == "503":
        p.set(p503=1.0)
    else:
        # the link drops: open connections reset, new ones refused
        p.down(3600)
    n0 = len(p.events) + p.stats["down"]

    took, rc, log = unmount_bounded(w)
    tail = unmount_log(log)
    assert len(p.events) + p.stats["down"] > n0, "the unmount never met the faulty link"
    assert rc >= 0, f"ckptfs killed by signal {-rc} at unmount\n{tail}"
    line = unmount_error_line(tail)
    assert "run/checkpoint-2" in line and "still retried" in line, \
        f"the unmount's report does not name what is left:\n{tail}"
    assert "next mount" in line, line
    assert s3_get(s3, bucket, "run/latest") is None

    # nothing journaled is lost: a mount of the same cache straight to RGW
    p.clear()
    w = writer(mount, bucket, cdir, mp, "commit_delay=1")
    wait_for(lambda: s3_get(s3, bucket, "run/latest") == b"checkpoint-2", 60,
             lambda: f"checkpoint-2 and latest landed after the remount; status "
                     f"{ckptfs_status(w).get('pending')}")
    ckptfs_sync(w, timeout=60)
    assert_in_bucket(s3, bucket, "run/checkpoint-1", ckpt_files(1))
    assert_in_bucket(s3, bucket, "run/checkpoint-2", ckpt_files(2))
    assert not pending_markers(s3, bucket)
    print(f"\n[{link}] unmount took {took:.1f}s, exit {rc}; log:\n{tail}")
