#!/usr/bin/python3
"""Crash-loop bench (issue 12), the long version of
tests/integration/test_crashloop.py: a training job saves tmp-checkpoint-N
(4 shards of 1-3 MiB, then .metadata), renames it to checkpoint-N and keeps
the newest 3 (shutil.rmtree), while the writer's ckptfs is SIGKILLed at
random moments (seeded) and remounted on the same cache directory; the job
dies with the mount and is restarted each time (it removes its own tmp-*
directories at start-up and continues after the newest complete
checkpoint).  A second ckptfs mount (read-only, its own cache, no kernel
caching) polls all along.  After the last kill: remount, the job saves
--more checkpoints and exits, `ckptfs sync`, then the bucket is checked
with boto3.  Workload, observer and checks: tests/integration/crashloop_lib.py.

Usage (as root; starts its own Ceph RGW with tests/s3server/rgw.sh):

    bench/crashloop.py [--kills 20] [--seed N] [--ckptfs PATH] [--debug] [--keep]
    bench/crashloop.py --up-rate 8          # commits lag behind the saves
    bench/crashloop.py --ckptfs OLD --final-ckptfs NEW   # upgrade on a journal

Prints the figures: kills, seed, partial sightings (empty / with files) and
the first ones with the job's history of that checkpoint, `ckptfs sync` time
after the last remount, checkpoints finished vs visible (seen complete by
the observer, in the bucket at the end), problems of the final checks.
Exit status 0 when the run showed nothing wrong, 1 otherwise, 2 on a setup
error.  --keep keeps the scratch directory (mount logs ckptfs-*.log,
crashloop.log with every job event and kill, the caches with the journal).
Replay a run with the seed it printed.  Options: --help."""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "integration"))
sys.path.insert(0, str(REPO / "bench"))
import helpers  # noqa: E402
import crashloop_lib as cl  # noqa: E402
from lib_bench import REGION, RGW, BenchMount  # noqa: E402


def _interrupted(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--kills", type=int, default=20, help="SIGKILLs of the writer (20)")
    ap.add_argument("--seed", type=int, default=None, help="random seed (default: random, printed)")
    ap.add_argument("--ckptfs", default=os.environ.get("CKPTFS_BIN", str(REPO / "build" / "ckptfs")),
                    help="binary (default $CKPTFS_BIN, else build/ckptfs)")
    ap.add_argument("--final-ckptfs", default=None,
                    help="binary of the remount after the last kill (default --ckptfs): "
                         "an upgrade finding the journal the old one left")
    ap.add_argument("--more", type=int, default=5, help="saves after the last remount (5)")
    ap.add_argument("--step-sleep", type=float, default=0.3,
                    help="the job's pause between saves, seconds (0.3)")
    ap.add_argument("--max-delay", type=float, default=3.5,
                    help="longest run of the job before a kill, seconds (3.5)")
    ap.add_argument("--sync-timeout", type=float, default=120.0,
                    help="limit for `ckptfs sync` after the last remount (120 s)")
    ap.add_argument("--writer-opts", default="", help="extra -o options of the writer")
    ap.add_argument("--up-rate", type=float, default=0,
                    help="the writer's uploads through a proxy capped at this many MiB/s "
                         "(0: direct): commits then lag behind the saves")
    ap.add_argument("--ttfb", type=float, default=0,
                    help="seconds the proxy delays each response to the writer (0)")
    ap.add_argument("--debug", action="store_true", help="mount with -o debug (the logs are in the scratch directory)")
    ap.add_argument("--workdir", default=os.environ.get("TMPDIR", "/var/tmp"),
                    help="parent of the scratch directory (/var/tmp)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    ap.add_argument("--json", action="store_true", help="also print the figures as JSON")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("crashloop: run as root (FUSE mounts, the Ceph RGW)")
    for b in (a.ckptfs, a.final_ckptfs or a.ckptfs):
        if not os.access(b, os.X_OK):
            sys.exit(f"crashloop: no ckptfs binary at {b}")
    helpers.CKPTFS_BIN = a.ckptfs
    signal.signal(signal.SIGTERM, _interrupted)
    work = Path(tempfile.mkdtemp(prefix="ckptfs-crashloop-", dir=a.workdir))
    rgw = work / "rgw"
    mounts = []
    rc = 2
    try:
        rc = run(a, work, rgw, mounts)
    finally:
        for m in mounts:
            if not m.unmounted:
                m.expect_clean_exit = False
                m.unmount(timeout=30)
        RGW.stop_dir(rgw)
        if a.keep or rc != 0:
            print(f"scratch directory kept: {work}")
        else:
            subprocess.run(["rm", "-rf", "--one-file-system", str(work)])
    sys.exit(rc)


def run(a, work, rgw, mounts):
    t_setup = time.monotonic()
    try:
        server = RGW.start(rgw, work)
    except RuntimeError as e:
        print(f"crashloop: {e}", file=sys.stderr)
        return 2
    s3env = {"S3_ENDPOINT": server.endpoint}
    cenv = server.env
    s3 = server.client(max_pool_connections=10, connect_timeout=60, read_timeout=60)
    bucket = f"crashloop-{os.getpid()}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="run/", Body=b"")
    n_mounts = [0]

    proxy = None
    if a.up_rate or a.ttfb:
        proxy = helpers.UploadThrottleProxy(s3env["S3_ENDPOINT"], ttfb=a.ttfb,
                                            up_rate=int(a.up_rate * cl.MiB) or None)

    binary = [a.ckptfs]

    def mount(mp, opts, endpoint=s3env["S3_ENDPOINT"]):
        n_mounts[0] += 1
        mp.mkdir(exist_ok=True)
        if a.debug:
            opts = opts + ["debug"]
        argv = [binary[0], "mount", f"s3://{bucket}", str(mp), "-f", "--endpoint",
                endpoint, "--region", REGION, "-o", ",".join(opts)]
        m = BenchMount(argv, mp, work / f"ckptfs-{n_mounts[0]}.log", cenv)
        mounts.append(m)
        return m

    o = mount(work / "mnt-o", helpers.observer_options(work / "cache-o"))
    wopts = [f"cache_dir={work / 'cache-w'}"] + [x for x in a.writer_opts.split(",") if x]
    log = open(work / "crashloop.log", "w")
    wend = proxy.endpoint if proxy else s3env["S3_ENDPOINT"]
    loop = cl.CrashLoop(lambda: mount(work / "mnt-w", wopts, wend), helpers.kill_ckptfs,
                        o / "run", kills=a.kills, seed=a.seed, step_sleep=a.step_sleep,
                        log=log, delays=(0.2, a.max_delay))
    setup_s = time.monotonic() - t_setup
    print(f"crashloop: seed {loop.seed}, {a.kills} kills, ckptfs {a.ckptfs}, "
          f"scratch {work} (setup {setup_s:.0f}s)", flush=True)
    t0 = time.monotonic()
    loop.run_kills()
    if a.final_ckptfs:
        binary[0] = helpers.CKPTFS_BIN = a.final_ckptfs
        loop.note(f"remounting with {a.final_ckptfs}")
    job = loop.run_final(more=a.more, timeout=90 + 3 * a.more)
    w = loop.writer
    t_sync = time.monotonic()
    try:
        p = helpers.run([a.ckptfs, "sync", str(w.path)], timeout=a.sync_timeout, check=False)
        sync_s = time.monotonic() - t_sync
        sync = "ok" if p.returncode == 0 else f"exit {p.returncode}: {p.stderr.strip()[-300:]}"
    except helpers.CommandError:
        sync_s = time.monotonic() - t_sync
        sync = f"did not return within {a.sync_timeout:.0f}s"
    try:
        pending = helpers.ckptfs_status(w.path, timeout=10).get("pending")
    except Exception as e:  # noqa: BLE001 - a figure
        pending = f"status failed: {e}"
    time.sleep(2 * helpers.OBSERVER_LISTING_S + 0.05)
    shown = sorted(os.listdir(o / "run"))
    loop.observer.stop()
    kept, gone = loop.expected_after() if job.has("final") else (set(), set())
    problems = cl.final_checks(s3, bucket, "run", kept, gone, job.saved()) \
        if job.has("final") else ["the job after the last remount did not finish: "
                                  f"{job.events[-5:]} {job.stderr_tail.strip().splitlines()[-1:]}"]
    if sync != "ok":
        problems.insert(0, f"ckptfs sync after the last remount: {sync}")
        problems.append("journal:\n" + cl.journal_dump(work / "cache-w"))
    if pending:
        problems.append(f"pending after sync: {pending}")
    if sorted(f"checkpoint-{n}" for n in kept) != shown and job.has("final"):
        problems.append(f"the observer shows {shown}, the job kept {sorted(kept)}")
    elapsed = time.monotonic() - t0

    ob = loop.observer
    finished = sorted({n for j in loop.jobs for n in j.saved()})
    visible = sorted(ob.first_complete)
    never = [n for n in finished if n not in ob.first_complete]
    with_files = [r for r in ob.partial if r[2]]
    fig = {
        "seed": loop.seed, "kills": a.kills, "run_seconds": round(elapsed, 1),
        "saves_total": sum(len(j.saved()) for j in loop.jobs),
        "checkpoints_finished": len(finished),
        "checkpoints_seen_complete": len(visible),
        "finished_never_seen": len(never),
        "kept_at_end": sorted(kept), "in_bucket_ok": not problems,
        "partial_sightings": len(ob.partial), "empty_sightings": len(ob.empty),
        "partial_with_files": len(with_files),
        "checkpoints_partial": sorted({r[1] for r in ob.partial}),
        "temp_visible": len(ob.temp_visible), "bad_bytes": len(ob.bad_bytes),
        "observer_errors": len(ob.errors), "observer_looks": ob.looks,
        "gone_then_back": len(ob.flicker),
        "sync_seconds": round(sync_s, 2), "sync": sync,
        "job_failures": len(loop.job_failures),
    }
    print(f"\nkills                {a.kills} (seed {loop.seed}), {elapsed:.0f} s")
    print(f"saves                {fig['saves_total']} ({len(finished)} distinct checkpoints "
          f"finished, {len(never)} rotated away before the observer saw them)")
    print(f"visible              {len(visible)} seen complete by the observer; at the end "
          f"kept {sorted(kept)}, observer shows {shown}")
    print(f"partial sightings    {len(ob.partial)} ({len(ob.empty)} empty, "
          f"{len(with_files)} with some files) of {fig['checkpoints_partial']}; "
          f"{ob.looks} looks, {ob.complete} complete sightings, {ob.gone} gone (ENOENT)")
    for g in ob.partial_report(8):
        print(f"    checkpoint-{g['n']}: {g['count']}x at {g['first']}-{g['last']} s, "
              f"listed {g['views'][:2]}; job: {g['history']}")
    print(f"sync after remount   {sync_s:.2f} s ({sync})")
    print(f"gone, then back      {len(ob.flicker)} (checkpoints listed complete, missing "
          f"from a later listing, complete again) {ob.flicker[:5]}")
    print(f"temp names shown     {len(ob.temp_visible)}; wrong bytes {len(ob.bad_bytes)}; "
          f"observer errors {len(ob.errors)} {ob.errors[:3]}")
    jf = loop.job_failures
    print(f"job failures         {len(jf)} (incarnations whose job died while the mount lived)"
          + (f"; the first, #{jf[0][0]}: {jf[0][2].strip().splitlines()[-1:]}" if jf else ""))
    print("final checks         " + ("ok" if not problems else "\n    ".join([""] + problems)))
    if a.json:
        print(json.dumps(fig))
    bad = problems or ob.partial or ob.temp_visible or ob.bad_bytes or ob.errors \
        or loop.job_failures
    # the writer: unmount cleanly when the queue is empty, else kill it
    if sync == "ok":
        rcw = w.unmount()
        if rcw != 0:
            print(f"writer unmount: exit {rcw}")
            bad = True
    else:
        helpers.kill_ckptfs(w)
    o.unmount()
    if proxy:
        proxy.close()
    return 1 if bad else 0


if __name__ == "__main__":
    main()
