"""Issue 12: a training loop saving tmp-checkpoint-N (4 shards of 1-3 MiB and
a .metadata written last), renaming it to checkpoint-N and rotating (keep
the newest 3, shutil.rmtree), while the writer's ckptfs is SIGKILLed at
random moments (seeded; the seed is logged, CKPTFS_CRASHLOOP_SEED replays
one) and remounted on the same cache directory.  The job dies with the
mount and is restarted after each remount; it removes its own half-written
tmp-* directories at start-up and continues after the newest complete
checkpoint.  Workload, observer and checks: crashloop_lib.py (the long
version: bench/crashloop.py).

Asserted:
  * another mount polling all along never lists a checkpoint-N empty or
    partial (an ENOENT for one deleted between the listings is fine),
    never shows a tmp-* name, and reads the job's bytes;
  * after the last remount the job finishes 3 more saves, `ckptfs sync`
    returns 0 within 2 minutes and `ckptfs status --json` lists nothing
    pending;
  * the bucket (boto3): the checkpoints the job's rotation kept are there
    byte for byte, the ones it rotated away are gone, no tmp-* key, no
    pending marker;
  * the job never failed while its mount was alive.
On failure the message carries the journal rows, `ckptfs status --json`
and the bucket listing (also in tmp_path/failure.txt); crashloop.log has
every job event and kill, the mount logs stay in the test's tmp_path
(CKPTFS_CRASHLOOP_DEBUG=1 mounts with -o debug).  CKPTFS_CRASHLOOP_KILLS
(default 20) and CKPTFS_CRASHLOOP_MORE (saves after the last remount, 3)
change the run; 20 kills take about 40 s.

Issue 21's variant (test_crash_loop_with_in_place_saves_and_latest, and
test_in_place_saves_and_latest_without_crashes): even steps are written in
place into checkpoint-N and followed by a `latest` file naming it, odd ones
go through tmp-checkpoint-N and a rename, the two newest are kept; the
observer also checks on every look that `latest` names a checkpoint that
lists complete or that a newer complete one is listed, and the bucket at
each sighting goes to tmp_path/latest-evidence.txt.

The other tests pin down, deterministically, what the loop can only hit
by chance: the start-up clean-up of a temp directory a kill left behind
(empty, or with some files), and two ways a rotation's rm -r reaches the
bucket as single-file deletes that an observer sees one by one (the
checkpoint removed is still committing; another write lands in the middle
of the rm -r)."""

import json
import os
import shutil
import time

import pytest

import crashloop_lib
import helpers
from crashloop_lib import (MiB, CrashLoop, Observer, bucket_tree, ckpt_files, final_checks,
                           journal_dump, save_checkpoint)
from helpers import (UploadThrottleProxy, ckptfs_status, ckptfs_sync, kill_ckptfs,
                     observer_options, observer_settle, run, s3_sizes, wait_until)

KILLS = int(os.environ.get("CKPTFS_CRASHLOOP_KILLS", "20"))
MORE = int(os.environ.get("CKPTFS_CRASHLOOP_MORE", "3"))  # saves after the last remount
SYNC_LIMIT = 120.0


@pytest.fixture(autouse=True)
def _stop_pollers(mount):
    """Observers and jobs of a test that failed midway stop before its
    mounts go."""
    yield
    crashloop_lib.stop_all()
    helpers.stop_all_pollers()


def _diagnostics(s3, bucket, w, cdir):
    out = []
    try:
        out.append("status: " + json.dumps(ckptfs_status(w.path, timeout=10).get("pending")))
    except Exception as e:  # noqa: BLE001 - diagnostics only
        out.append(f"status: {e}")
    out.append(journal_dump(cdir))
    keys = bucket_tree(s3, bucket, "")
    out.append(f"bucket ({len(keys)} keys): " + " ".join(sorted(keys)))
    out.append(f"writer log: {w.log}")
    return "\n".join(out)


@pytest.mark.timeout(420)
def test_crash_loop_of_a_rotating_training_job(s3server, bucket, mount, tmp_path):
    """Issue 12 end to end: KILLS SIGKILLs, the job restarted after each,
    an observer polling all along, then the checks of the module doc."""
    try:
        _crash_loop(s3server, bucket, mount, tmp_path)
    except (AssertionError, pytest.fail.Exception) as e:
        (tmp_path / "failure.txt").write_text(str(e))
        raise


def _crash_loop(s3server, bucket, mount, tmp_path):
    s3 = s3server.client()
    s3server.put(bucket, "run/")
    seed = int(os.environ.get("CKPTFS_CRASHLOOP_SEED") or
               int.from_bytes(os.urandom(4), "little") & 0x7FFFFFFF)
    cdir = tmp_path / "cache-w"
    mp = tmp_path / "mnt-w"
    mp.mkdir()
    debug = ["debug"] if os.environ.get("CKPTFS_CRASHLOOP_DEBUG") else []
    o = mount(bucket, options=observer_options(tmp_path / "cache-o", *debug))
    log = open(tmp_path / "crashloop.log", "w")
    opts = [f"cache_dir={cdir}"] + debug

    def mount_writer():
        return mount(bucket, options=opts, mountpoint=mp)

    loop = CrashLoop(mount_writer, kill_ckptfs, o / "run", kills=KILLS, seed=seed,
                     step_sleep=0.3, log=log)
    print(f"crash loop seed {seed} (replay: CKPTFS_CRASHLOOP_SEED={seed})")
    t_start = time.monotonic()
    loop.run_kills()
    job = loop.run_final(more=MORE, timeout=90 + 3 * MORE)
    w = loop.writer
    first_failure = ""
    if loop.job_failures:
        i, rc, err, events = loop.job_failures[0]
        first_failure = (f"{len(loop.job_failures)} earlier incarnations failed by themselves, "
                         f"the first (#{i}, exit {rc}, after {events}):\n{err}\n")
    assert job.proc.returncode == 0 and job.has("done"), \
        f"seed {seed}: the job after the last remount did not finish: rc " \
        f"{job.proc.returncode}, events {job.events[-6:]}\n{job.stderr_tail}\n" \
        + first_failure + _diagnostics(s3, bucket, w, cdir)

    t0 = time.monotonic()
    try:
        p = run([helpers.CKPTFS_BIN, "sync", str(w.path)], timeout=SYNC_LIMIT, check=False)
        sync_s = time.monotonic() - t0
        sync_err = None if p.returncode == 0 else f"exit {p.returncode}: {p.stderr[-500:]}"
    except helpers.CommandError as e:
        sync_s = time.monotonic() - t0
        sync_err = f"did not return within {SYNC_LIMIT:.0f}s ({str(e).splitlines()[0]})"
    loop.note(f"sync after the last remount: {sync_s:.1f}s ({sync_err or 'ok'})")
    if sync_err:
        diag = _diagnostics(s3, bucket, w, cdir)
        loop.observer.stop()
        kill_ckptfs(w)  # its unmount would wait for the same queue
        pytest.fail(f"seed {seed}: ckptfs sync after the last remount {sync_err}\n"
                    f"observer: {loop.observer.summary()}\n"
                    f"partial sightings: {loop.observer.partial_report()}\n{diag}",
                    pytrace=False)
    pending = ckptfs_status(w.path)["pending"]
    observer_settle()
    kept, gone = loop.expected_after()
    # the observer, after the sync, shows exactly what the job kept
    wait_until(lambda: sorted(n for n in os.listdir(o / "run")) ==
               sorted(f"checkpoint-{n}" for n in kept), 5)
    shown = sorted(os.listdir(o / "run"))
    loop.observer.stop()
    summary = loop.observer.summary()
    problems = final_checks(s3, bucket, "run", kept, gone, job.saved())
    elapsed = time.monotonic() - t_start
    loop.note(f"observer: {summary}; run {elapsed:.0f}s")
    ctx = (f"seed {seed}; incarnations: {loop.incarnations}\nobserver: {summary}\n"
           f"partial sightings: {loop.observer.partial_report()}")
    assert pending == [], f"{ctx}\npending after sync: {pending}\n" + \
        _diagnostics(s3, bucket, w, cdir)
    assert not problems, f"{ctx}\n" + "\n".join(problems) + "\n" + \
        _diagnostics(s3, bucket, w, cdir)
    assert shown == sorted(f"checkpoint-{n}" for n in kept), \
        f"{ctx}\nthe observer shows {shown}, the job kept {sorted(kept)}"
    assert not loop.job_failures, f"{ctx}\njobs failed while their mount lived: " \
        f"{loop.job_failures}"
    ob = loop.observer
    assert not ob.partial, f"{ctx}\n{len(ob.partial)} partial sightings " \
        f"({len(ob.empty)} empty): {loop.observer.partial_report()}"
    assert not ob.temp_visible, f"{ctx}\ntemp names shown: {ob.temp_visible[:5]}"
    assert not ob.bad_bytes, f"{ctx}\nwrong bytes read: {ob.bad_bytes[:5]}"
    assert not ob.errors, f"{ctx}\nobserver errors: {ob.errors[:5]}"
    assert summary["checkpoints_seen_complete"] >= len(kept), ctx


def _writer_behind(mount, s3server, bucket, tmp_path, proxy):
    """A writer mount talking to S3 through proxy."""
    mp = tmp_path / "mnt-w"
    mp.mkdir()
    opts = [f"cache_dir={tmp_path / 'cache-w'}"]
    if os.environ.get("CKPTFS_CRASHLOOP_DEBUG"):
        opts.append("debug")
    argv = mount.argv(bucket, "", mp, opts, endpoint=False)
    argv += ["--endpoint", proxy.endpoint, "--region", s3server.region]
    return mount(bucket, argv=argv, mountpoint=mp)


def _committed(s3, bucket, prefix):
    """Whether the directory `prefix` has a manifest in the committed state
    in the bucket (the intent manifest, same key, says "pending")."""
    for k in s3_sizes(s3, bucket, prefix + ".ckptfs/"):
        if "/manifest." in k:
            try:
                body = s3.get_object(Bucket=bucket, Key=k)["Body"].read()
            except s3.exceptions.NoSuchKey:
                continue
            if json.loads(body).get("state") == "committed":
                return True
    return False


@pytest.mark.timeout(150)
def test_rotating_away_a_checkpoint_still_committing(s3server, bucket, mount, tmp_path):
    """What the crash loop produces whenever commits lag behind saves (a
    slow link, or the backlog a remount resumes): the rotation removes a
    checkpoint that is renamed (sealed) but not yet visible.  Its files
    are local nodes of a committing transaction, so each unlink becomes a
    delete of its own behind the commit, the rmdir another: an observer
    must still never list that checkpoint partial or empty.  The writer's
    link is slow (4 MiB/s up, 0.6 s per response) so the commit runs
    after the rotation and each queued step lasts long enough to be seen.
    The rotation comes right after checkpoint-1's rename, before the next
    save: saving checkpoint-2 first took about 12 s here (the writer's
    log: mostly LISTs of run/ at 0.6 s each while checkpoint-1 committed),
    and a loaded or sanitizer run then rotated after the commit point.  Checked by the manifest's state, not by a pending
    marker (the rotation's own delete puts one too)."""
    s3 = s3server.client()
    s3server.put(bucket, "run/")
    o = mount(bucket, options=observer_options(tmp_path / "cache-o"))
    hist = {}
    obs = Observer(o / "run", history=lambda n: hist.get(n, []), interval=0.02)
    # a sanitizer build's daemon is slower: the link's answers slow down
    # with it, by half its factor (by all of it, 2.4 s an answer, the ~40
    # requests of the commit and the deletes outlasted the test's 150 s);
    # the rate stays (slower, a PUT outlasts the stall timeout)
    with UploadThrottleProxy(s3server.endpoint,
                             ttfb=0.6 * max(1, helpers.SLOWDOWN / 2),
                             up_rate=4 * MiB) as proxy:
        w = _writer_behind(mount, s3server, bucket, tmp_path, proxy)
        t0 = time.monotonic()
        save_checkpoint(w / "run", 1)
        shutil.rmtree(w / "run" / "checkpoint-1")       # keep the newest one
        hist[1] = [(round(time.monotonic() - t0, 2), "deleted")]
        # no committed manifest yet: the rotation came before its commit point
        before_commit_point = not _committed(s3, bucket, "run/checkpoint-1/")
        save_checkpoint(w / "run", 2)
        t_sync = time.monotonic()
        ckptfs_sync(w)
        sync_s = time.monotonic() - t_sync
        observer_settle()
        obs.stop()
    keys = s3_sizes(s3, bucket, "run/")
    summary = obs.summary()
    print(f"observer {summary}; checkpoint-1 shown complete after its delete: "
          f"{1 in obs.first_complete}; sync {sync_s:.1f}s")
    assert before_commit_point, "checkpoint-1 was committed before the rotation: the " \
        "link is too fast for the test"
    assert _committed(s3, bucket, "run/checkpoint-2/"), \
        "the check of the commit point does not see a committed manifest"

    assert not obs.partial, f"{len(obs.partial)} partial sightings ({len(obs.empty)} empty) " \
        f"of the rotated-away checkpoint: {obs.partial_report()}"
    assert not [k for k in keys if k.startswith("run/checkpoint-1/")], sorted(keys)
    problems = final_checks(s3, bucket, "run", {2}, {1}, [2])
    assert not problems, problems


@pytest.mark.timeout(150)
def test_rotation_interleaved_with_another_write(s3server, bucket, mount, tmp_path):
    """The rotation's rm -r of a committed checkpoint reaches the bucket as
    one directory delete (marker, objects, manifests, marker) because the
    unlinks are held until the rmdir.  Another write through the mount in
    the middle of it (a `latest` file, a log: any other thread of the job)
    must not split it into single-file deletes that an observer sees one
    by one (and that a SIGKILL right then would leave for good).  The
    writer's link answers in 0.4 s so each step can be seen."""
    s3 = s3server.client()
    s3server.put(bucket, "run/")
    o = mount(bucket, options=observer_options(tmp_path / "cache-o"))
    with UploadThrottleProxy(s3server.endpoint, ttfb=0.4) as proxy:
        w = _writer_behind(mount, s3server, bucket, tmp_path, proxy)
        save_checkpoint(w / "run", 1)
        save_checkpoint(w / "run", 2)
        ckptfs_sync(w)
        obs = Observer(o / "run", interval=0.02)
        wait_until(lambda: len(obs.first_complete) == 2, 10)
        d = w / "run" / "checkpoint-1"
        names = sorted(os.listdir(d))
        for name in names[:2]:
            os.unlink(d / name)
        (w / "run" / "latest").write_text("checkpoint-2")
        for name in names[2:]:
            os.unlink(d / name)
        os.rmdir(d)
        ckptfs_sync(w)
        observer_settle()
        obs.stop()
    print(f"observer {obs.summary()}")
    assert len(obs.first_complete) == 2, "the observer never saw both checkpoints"
    assert not obs.partial, f"{len(obs.partial)} partial sightings ({len(obs.empty)} empty) " \
        f"of the checkpoint being deleted: {obs.partial_report()}"
    problems = final_checks(s3, bucket, "run", {2}, {1}, [])
    assert not problems, problems


@pytest.mark.timeout(120)
@pytest.mark.parametrize("files", [0, 2])
def test_restart_cleanup_of_a_temp_dir_left_by_a_kill(s3server, bucket, mount, tmp_path, files):
    """The crash loop's start-up step, pinned down: ckptfs is killed right
    after the job made tmp-checkpoint-1 (files=0: before any file was
    closed; files=2: two closed, a third open), the mount is restarted on
    the same cache, and the job's start-up does what real jobs do: list the
    run directory and shutil.rmtree its own tmp-* directories.  That must
    work (the recovered directory is listed, so it must open), nothing may
    stay pending, and the job then saves checkpoint-1."""
    s3 = s3server.client()
    s3server.put(bucket, "run/")
    cdir = tmp_path / "cache-w"
    mp = tmp_path / "mnt-w"
    mp.mkdir()
    opts = [f"cache_dir={cdir}"] + (["debug"] if os.environ.get("CKPTFS_CRASHLOOP_DEBUG") else [])
    w = mount(bucket, options=opts, mountpoint=mp)
    tmp = w / "run" / "tmp-checkpoint-1"
    os.mkdir(tmp)
    bodies = list(ckpt_files(1).items())
    for name, body in bodies[:files]:
        (tmp / name).write_bytes(body)
    held = open(tmp / bodies[files][0], "wb") if files else None
    kill_ckptfs(w)
    if held:
        try:
            held.close()
        except OSError:
            pass
    w = mount(bucket, options=opts, mountpoint=mp)
    listed = sorted(os.listdir(w / "run"))
    assert listed == ["tmp-checkpoint-1"], listed
    try:
        shutil.rmtree(w / "run" / "tmp-checkpoint-1")
    except OSError as e:
        pytest.fail(f"the recovered tmp-checkpoint-1 is listed but cannot be removed: {e!r}\n"
                    f"status: {ckptfs_status(w.path)['pending']}\n{journal_dump(cdir)}",
                    pytrace=False)
    assert sorted(os.listdir(w / "run")) == []
    save_checkpoint(w / "run", 1)
    ckptfs_sync(w)
    assert ckptfs_status(w.path)["pending"] == []
    problems = final_checks(s3, bucket, "run", {1}, set(), [1])
    assert not problems, problems


# --------------------------------------------------------------------------
# Issue 21: even steps saved in place (mkdir checkpoint-N, files written
# straight into it) and followed by a `latest` file naming it, odd steps
# through tmp-checkpoint-N and a rename, the two newest kept.

INPLACE_ARGS = ("--inplace-even", "--keep", "2")
NOCRASH_S = float(os.environ.get("CKPTFS_CRASHLOOP_NOCRASH_S", "45"))


def _bucket_snapshot(s3, bucket):
    """Every key under run/ (markers included) with its LastModified and
    size, and the body of run/latest: what the store held at a sighting."""
    out = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="run/"):
        for o in page.get("Contents", []):
            out.append(f"  {o['LastModified'].isoformat()} {o['Size']:>8} {o['Key']}")
    try:
        latest = s3.get_object(Bucket=bucket, Key="run/latest")["Body"].read().decode()
    except Exception as e:  # noqa: BLE001 - evidence only
        latest = repr(e)
    return f"run/latest = {latest!r}\n" + "\n".join(sorted(out))


class _Evidence:
    """The observer's callback at a `latest` sighting: the bucket as it is
    right then (the first few sightings of each run of them), written to
    tmp_path/latest-evidence.txt."""

    def __init__(self, s3, bucket, path, t0_of, kill_times):
        self.s3, self.bucket, self.path = s3, bucket, path
        self.t0_of, self.kill_times = t0_of, kill_times
        self.last = {}
        self.written = 0

    def partial(self, rec):
        """A partial or empty sighting: (t, n, view, history)."""
        self(rec[:3] + ("(partial sighting)",) + rec[3:])

    def __call__(self, rec):
        t, n = rec[0], rec[1]
        if self.written >= 40 or (n in self.last and t - self.last[n] < 0.3):
            return
        self.last[n] = t
        self.written += 1
        now = time.monotonic()
        since = [round(now - k, 2) for k in self.kill_times if k <= now]
        with open(self.path, "a") as f:
            f.write(f"== {time.time():.3f} t={t}s "
                    f"{'sighting of' if rec[3] == '(partial sighting)' else 'latest names'} "
                    f"checkpoint-{n}: view {rec[2]}, listing "
                    f"after {rec[3]}, {since[-1] if since else '-'}s after the last kill "
                    f"(kills so far {len(since)}); job history {rec[4]}\n"
                    f"{_bucket_snapshot(self.s3, self.bucket)}\n")


def _latest_checks(s3, bucket, kept, ob, ctx, job=None):
    """After the sync: the bucket's `latest` names the newest checkpoint
    saved in place (an even one; the rotation keeps two consecutive ones),
    and the observer never saw `latest` name a checkpoint that was missing
    while no newer one existed, nor any checkpoint partial or empty.

    A look that read a `latest` naming a checkpoint the job had already
    removed (its rm -r returned before the look) read an older `latest`:
    the reader's listings are up to a few dir_timeouts old by design
    (doc/architecture.md), and a rotation faster than that (a save every
    0.7 s, two kept, on a loaded machine) removes N within that window.
    Such a look shows no later effect without its cause, so it is not
    counted; every other one is."""
    body = s3.get_object(Bucket=bucket, Key="run/latest")["Body"].read().decode()
    want = f"checkpoint-{max(n for n in kept if n % 2 == 0)}"
    assert body == want, f"{ctx}\nrun/latest holds {body!r}, the job last wrote {want!r}"
    bad = ob.latest_bad
    if job is not None:
        removed = {int(a): t for t, v, a in job.events if v == "deleted"}
        bad = [r for r in bad if r[1] is None or r[1] not in removed or
               removed[r[1]] > ob.t0 + r[0]]
    assert not bad, \
        f"{ctx}\n{len(bad)} looks read `latest` naming a checkpoint that did " \
        f"not list complete while no newer complete one was listed: {ob.latest_report()}"
    assert not ob.partial, f"{ctx}\n{len(ob.partial)} partial sightings " \
        f"({len(ob.empty)} empty): {ob.partial_report()}"
    assert ob.latest_ok > 0, f"{ctx}\nthe observer never read `latest`"


@pytest.mark.timeout(420)
def test_crash_loop_with_in_place_saves_and_latest(s3server, bucket, mount, tmp_path):
    """Issue 21: the crash loop with odd steps saved as tmp-checkpoint-N +
    rename and even steps written in place into checkpoint-N followed by
    `latest` = "checkpoint-N", the two newest kept, the writer SIGKILLed
    KILLS times.  The observer (0.1 s timeouts) checks on every look that
    `latest` names a checkpoint that lists complete, or that a newer
    complete checkpoint is listed (the rotation removes N only after N+2
    is saved), and that no checkpoint lists empty or partial (ENOENT is
    fine); the existing checks of the bucket and the job hold too.  The
    bucket at each sighting is in tmp_path/latest-evidence.txt."""
    s3 = s3server.client()
    s3server.put(bucket, "run/")
    seed = int(os.environ.get("CKPTFS_CRASHLOOP_SEED") or
               int.from_bytes(os.urandom(4), "little") & 0x7FFFFFFF)
    cdir = tmp_path / "cache-w"
    mp = tmp_path / "mnt-w"
    mp.mkdir()
    debug = ["debug"] if os.environ.get("CKPTFS_CRASHLOOP_DEBUG") else []
    o = mount(bucket, options=observer_options(tmp_path / "cache-o", *debug))
    log = open(tmp_path / "crashloop.log", "w")
    opts = [f"cache_dir={cdir}"] + debug
    kill_times = []
    ev = _Evidence(s3, bucket, tmp_path / "latest-evidence.txt", None, kill_times)
    loop = CrashLoop(lambda: mount(bucket, options=opts, mountpoint=mp), kill_ckptfs,
                     o / "run", kills=KILLS, seed=seed, step_sleep=0.3, log=log,
                     job_args=INPLACE_ARGS,
                     observer_kw={"check_latest": True, "on_latest_bad": ev,
                                  "on_partial": ev.partial})
    ev.kill_times = loop.kill_times
    print(f"crash loop (in place + latest) seed {seed} (replay: CKPTFS_CRASHLOOP_SEED={seed})")
    loop.run_kills()
    job = loop.run_final(more=MORE, timeout=90 + 3 * MORE)
    w = loop.writer
    ctx = f"seed {seed}; incarnations: {loop.incarnations}"
    assert job.proc.returncode == 0 and job.has("done"), \
        f"{ctx}\nthe job after the last remount did not finish: rc {job.proc.returncode}, " \
        f"events {job.events[-6:]}\n{job.stderr_tail}\n" + _diagnostics(s3, bucket, w, cdir)
    p = run([helpers.CKPTFS_BIN, "sync", str(w.path)], timeout=SYNC_LIMIT, check=False)
    assert p.returncode == 0, f"{ctx}\nckptfs sync: exit {p.returncode}: {p.stderr[-500:]}"
    pending = ckptfs_status(w.path)["pending"]
    observer_settle()
    kept, gone = loop.expected_after()
    want = sorted(f"checkpoint-{n}" for n in kept)
    wait_until(lambda: sorted(n for n in os.listdir(o / "run") if n != "latest") == want, 5)
    shown = sorted(n for n in os.listdir(o / "run") if n != "latest")
    # After the sync `latest` is in the bucket and names a kept checkpoint:
    # the observer must read it (a job that saved little before its last
    # kill writes `latest` only just before the sync, so give the observer
    # its looks; it still counts every bad one).
    wait_until(lambda: loop.observer.latest_ok > 0, 10)
    loop.observer.stop()
    ob = loop.observer
    summary = ob.summary()
    since_kill = [round(ob.t0 + t - max([k for k in loop.kill_times if k <= ob.t0 + t],
                                         default=ob.t0), 2)
                  for t, *_ in ob.latest_bad]
    loop.note(f"observer: {summary}; latest sightings {ob.latest_report()}; "
              f"seconds after the last kill: {since_kill}")
    print(f"observer {summary}; latest sightings at {since_kill} s after a kill")
    problems = final_checks(s3, bucket, "run", kept, gone, job.saved())
    ctx += f"\nobserver: {summary}\nseconds after the last kill: {since_kill}"
    assert pending == [], f"{ctx}\npending after sync: {pending}"
    assert not problems, f"{ctx}\n" + "\n".join(problems)
    assert shown == want, f"{ctx}\nthe observer shows {shown}, the job kept {sorted(kept)}"
    assert not loop.job_failures, f"{ctx}\njobs failed while their mount lived: " \
        f"{loop.job_failures}"
    _latest_checks(s3, bucket, kept, ob, ctx)
    assert not ob.temp_visible, f"{ctx}\ntemp names shown: {ob.temp_visible[:5]}"
    assert not ob.bad_bytes, f"{ctx}\nwrong bytes read: {ob.bad_bytes[:5]}"
    assert not ob.errors, f"{ctx}\nobserver errors: {ob.errors[:5]}"


@pytest.mark.timeout(240)
def test_in_place_saves_and_latest_without_crashes(s3server, bucket, mount, tmp_path):
    """Issue 21 without a kill (the reporter saw sightings then too): the
    same job (in place + `latest` on even steps, tmp + rename on odd
    ones, keep two) runs NOCRASH_S seconds (on a loaded host up to twice
    that, until it made the 20 saves asserted below) on one writer mount while the
    observer looks; then `ckptfs sync` and the same checks."""
    s3 = s3server.client()
    s3server.put(bucket, "run/")
    debug = ["debug"] if os.environ.get("CKPTFS_CRASHLOOP_DEBUG") else []
    o = mount(bucket, options=observer_options(tmp_path / "cache-o", *debug))
    w = mount(bucket, options=[f"cache_dir={tmp_path / 'cache-w'}"] + debug)
    log = open(tmp_path / "crashloop.log", "w")
    ev = _Evidence(s3, bucket, tmp_path / "latest-evidence.txt", None, [])
    hist = {}
    obs = Observer(o / "run", history=lambda n: hist.get(n, []), check_latest=True,
                   on_latest_bad=ev, on_partial=ev.partial,
                   note=lambda m: log.write(m + "\n"))
    job = crashloop_lib.Job(w / "run", 10**6, 0.3, log=log,
                            args=INPLACE_ARGS + ("--for-s", str(NOCRASH_S),
                                                 "--min-saves", "20"))
    rc = job.wait(2 * NOCRASH_S + 60)
    for t, verb, arg in job.events:
        if verb in ("saved", "deleted", "latest"):
            hist.setdefault(int(arg), []).append((round(t - obs.t0, 2), verb))
    assert rc == 0 and job.has("done"), f"job: rc {rc}, {job.events[-6:]}\n{job.stderr_tail}"
    ckptfs_sync(w)
    observer_settle()
    kept = {int(x) for x in job.arg("final").split(",")}
    gone = set(job.deleted()) - kept
    want = sorted(f"checkpoint-{n}" for n in kept)
    wait_until(lambda: sorted(n for n in os.listdir(o / "run") if n != "latest") == want, 5)
    wait_until(lambda: obs.latest_ok > 0, 10)
    obs.stop()
    summary = obs.summary()
    print(f"{len(job.saved())} saves; observer {summary}; latest sightings "
          f"{obs.latest_report()}")
    ctx = f"{len(job.saved())} saves in {NOCRASH_S:.0f}s; observer {summary}"
    assert len(job.saved()) >= 20, ctx
    assert ckptfs_status(w.path)["pending"] == [], ctx
    problems = final_checks(s3, bucket, "run", kept, gone, job.saved())
    assert not problems, f"{ctx}\n" + "\n".join(problems)
    _latest_checks(s3, bucket, kept, obs, ctx, job)
    # without a crash every save finishes, so a checkpoint `latest` names
    # was visible before `latest` was: a reader never finds `latest`
    # naming a checkpoint it could never list (rotation removes N only
    # after N+2 is saved, so N stays visible well over a second)
    # (looks whose `latest` named a checkpoint the job had removed already
    # read an older `latest`: see _latest_checks)
    removed = {int(a): t for t, v, a in job.events if v == "deleted"}
    never = sorted({n for t, n in obs.latest_never_shown
                    if n not in removed or removed[n] > obs.t0 + t})
    assert not never, f"{ctx}\n`latest` named checkpoints this observer never saw " \
        f"complete ({len(obs.latest_never_shown)} looks): {never[:20]}"
    assert not obs.temp_visible, f"{ctx}\ntemp names shown: {obs.temp_visible[:5]}"
    assert not obs.bad_bytes, f"{ctx}\nwrong bytes read: {obs.bad_bytes[:5]}"
    assert not obs.errors, f"{ctx}\nobserver errors: {obs.errors[:5]}"


@pytest.mark.timeout(150)
def test_rotating_away_an_in_place_checkpoint_named_by_latest(s3server, bucket, mount,
                                                              tmp_path):
    """What the issue-21 loop hits by chance, pinned down: checkpoint-2 is
    written in place and `latest` names it, checkpoint-3 is saved through
    a temp name, checkpoint-4 in place with `latest` naming it, and the
    rotation (keep two) removes checkpoint-1 and checkpoint-2 while
    checkpoint-2 has not committed yet (commit_delay=30: no idle commit).
    Its rm -r must not make it vanish out of order: `latest` =
    "checkpoint-2" must never be visible while checkpoint-2 is not and no
    newer checkpoint is (before the fix the rm -r aborted checkpoint-2,
    the queue skipped it, and `latest` naming it went out with only
    checkpoint-1 visible).  The writer's link answers in 0.4 s, so each
    step lasts long enough for the observer (every 20 ms) to see it."""
    s3 = s3server.client()
    s3server.put(bucket, "run/")
    o = mount(bucket, options=observer_options(tmp_path / "cache-o"))
    hist = {}
    obs = Observer(o / "run", history=lambda n: hist.get(n, []), interval=0.02,
                   check_latest=True)
    with UploadThrottleProxy(s3server.endpoint, ttfb=0.4) as proxy:
        mp = tmp_path / "mnt-w"
        mp.mkdir()
        opts = [f"cache_dir={tmp_path / 'cache-w'}", "commit_delay=30"]
        if os.environ.get("CKPTFS_CRASHLOOP_DEBUG"):
            opts.append("debug")
        argv = mount.argv(bucket, "", mp, opts, endpoint=False)
        argv += ["--endpoint", proxy.endpoint, "--region", s3server.region]
        w = mount(bucket, argv=argv, mountpoint=mp)
        run_dir = w / "run"
        save_checkpoint(run_dir, 1)
        crashloop_lib.save_in_place(run_dir, 2)
        crashloop_lib.write_latest(run_dir, 2)
        save_checkpoint(run_dir, 3)
        crashloop_lib.save_in_place(run_dir, 4)
        crashloop_lib.write_latest(run_dir, 4)
        shutil.rmtree(run_dir / "checkpoint-1")
        shutil.rmtree(run_dir / "checkpoint-2")
        ckptfs_sync(w)
        observer_settle()
        wait_until(lambda: len(obs.first_complete) >= 2, 5)
        obs.stop()
    print(f"observer {obs.summary()}; latest sightings {obs.latest_report()}")
    assert obs.latest_ok > 0, "the observer never read `latest`"
    assert not obs.latest_bad, \
        f"{len(obs.latest_bad)} looks read `latest` naming a checkpoint missing while no " \
        f"newer one was listed: {obs.latest_report()}"
    assert not obs.partial, f"partial sightings: {obs.partial_report()}"
    assert 2 not in {n for _, n in obs.latest_never_shown}, \
        f"`latest` named checkpoint-2, which was never visible: {obs.summary()}"
    problems = final_checks(s3, bucket, "run", {3, 4}, {1, 2}, [])
    assert not problems, problems
    body = s3.get_object(Bucket=bucket, Key="run/latest")["Body"].read().decode()
    assert body == "checkpoint-4", body


@pytest.mark.timeout(150)
def test_in_place_checkpoint_redone_after_a_kill_at_its_mkdir(s3server, bucket, mount, tmp_path):
    """Issue 21's empty sighting, pinned down: the writer is SIGKILLed
    right after the job's mkdir of checkpoint-4 (an in-place save), the
    mount restarts on the same cache, and the job's start-up finds
    checkpoint-4 empty (incomplete), removes it and saves it in place
    again, then writes `latest`.  Another mount must never list
    checkpoint-4 empty (ENOENT until it is complete, then complete)."""
    s3 = s3server.client()
    s3server.put(bucket, "run/")
    debug = ["debug"] if os.environ.get("CKPTFS_CRASHLOOP_DEBUG") else []
    o = mount(bucket, options=observer_options(tmp_path / "cache-o", *debug))
    cdir = tmp_path / "cache-w"
    mp = tmp_path / "mnt-w"
    mp.mkdir()
    opts = [f"cache_dir={cdir}"] + debug
    w = mount(bucket, options=opts, mountpoint=mp)
    save_checkpoint(w / "run", 3)
    ckptfs_sync(w)
    ev = _Evidence(s3, bucket, tmp_path / "latest-evidence.txt", None, [])
    obs = Observer(o / "run", interval=0.02, check_latest=True, on_latest_bad=ev,
                   on_partial=ev.partial)
    os.mkdir(w / "run" / "checkpoint-4")
    kill_ckptfs(w)
    w = mount(bucket, options=opts, mountpoint=mp)
    d = w / "run" / "checkpoint-4"
    assert crashloop_lib.dir_view(d) == {}
    shutil.rmtree(d)
    crashloop_lib.save_in_place(w / "run", 4)
    crashloop_lib.write_latest(w / "run", 4)
    time.sleep(3)
    ckptfs_sync(w)
    observer_settle()
    wait_until(lambda: 4 in obs.first_complete, 5)
    obs.stop()
    print(f"observer {obs.summary()}")
    assert not obs.partial, f"{len(obs.partial)} partial sightings ({len(obs.empty)} " \
        f"empty): {obs.partial_report()}"
    assert not obs.latest_bad, obs.latest_report()
    assert 4 in obs.first_complete
    problems = final_checks(s3, bucket, "run", {3, 4}, set(), [])
    assert not problems, problems
