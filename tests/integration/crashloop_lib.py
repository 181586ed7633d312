"""Issue 12's crash loop: the workload, the observer and the loop, shared by
tests/integration/test_crashloop.py (CI, ~2 minutes) and bench/crashloop.py
(long runs with figures).  Nothing here uses pytest fixtures.

The job (run as `python3 crashloop_lib.py job ROOT --until N`) is a training
loop's checkpointing as issue 12 describes it:

  start-up   remove its own half-written `tmp-checkpoint-*` directories
             (shutil.rmtree), find the newest complete `checkpoint-N`
             (all files with their sizes), continue with N+1;
  each save  mkdir tmp-checkpoint-N, write 4 shards of 1-3 MiB and then a
             small `.metadata`, rename to checkpoint-N, then rotate: keep
             the newest KEEP=3 checkpoint-* (shutil.rmtree the others).

With --inplace-even (issue 21) even steps are saved in place instead
(mkdir checkpoint-N, the files written into it) and followed by a `latest`
file holding "checkpoint-N"; --keep K changes KEEP, --for-s S stops
starting saves after S seconds.

It prints one line per event (`resume N`, `cleaned NAME`, `incomplete NAME`,
`saved N`, `latest N`, `deleted N`, `final N,N,N`, `done`) and dies with the
mount (ENOTCONN/EIO) when ckptfs is SIGKILLed.  Bytes are deterministic per
N (ckpt_files), so every checker can recompute them.

CrashLoop drives it: mount the writer, start the job, SIGKILL the writer's
ckptfs after a seeded random delay, detach, remount on the same cache
directory, restart the job; meanwhile an Observer thread polls a second
(read-only, observer_options) mount: every listed checkpoint-N must be
complete (5 files, their sizes; bytes checked at the first complete
sighting); empty or partial listings are recorded with what the job had
done to N by then.  After the last kill: remount, run the job to its end,
`ckptfs sync`, and judge the bucket (final_checks)."""

import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

MiB = 1 << 20
SHARDS = 4
KEEP = 3
LATEST = "latest"
PY = "/usr/bin/python3"
CKPT_RE = re.compile(r"checkpoint-(\d+)")


# --------------------------------------------------------------------------
# The checkpoint of step n: deterministic names, sizes and bytes.

def _shard_size(n, i):
    h = (n * 2654435761 + i * 40503 + 12345) & 0xFFFFFFFF
    return MiB + h % (2 * MiB + 1)          # 1 MiB .. 3 MiB


def ckpt_sizes(n):
    """{name: size} of checkpoint n (the shards, then .metadata)."""
    out = {f"shard-{i}.bin": _shard_size(n, i) for i in range(SHARDS)}
    out[".metadata"] = len(_metadata(n))
    return out


def _metadata(n):
    return json.dumps({"step": n, "shards": {f"shard-{i}.bin": _shard_size(n, i)
                                              for i in range(SHARDS)}},
                      sort_keys=True).encode()


def ckpt_file(n, name):
    """The bytes of file `name` of checkpoint n."""
    if name == ".metadata":
        return _metadata(n)
    i = int(name[len("shard-"):-len(".bin")])
    return random.Random(f"crashloop-{n}-{i}").randbytes(_shard_size(n, i))


def ckpt_files(n):
    """{name: bytes} in the order the job writes them (.metadata last)."""
    return {name: ckpt_file(n, name) for name in ckpt_sizes(n)}


def _sha(b):
    import hashlib
    return hashlib.sha256(b).hexdigest()


_SHA_CACHE = {}


def ckpt_sha(n, name):
    k = (n, name)
    if k not in _SHA_CACHE:
        _SHA_CACHE[k] = _sha(ckpt_file(n, name))
    return _SHA_CACHE[k]


def dir_view(d):
    """{name: size} of directory d (lstat of each listed name; a name gone
    by its lstat has size "vanished"), or None when d does not exist."""
    try:
        names = os.listdir(d)
    except (FileNotFoundError, NotADirectoryError):
        return None
    out = {}
    for name in names:
        try:
            out[name] = os.lstat(os.path.join(d, name)).st_size
        except FileNotFoundError:
            out[name] = "vanished"
    return out


# --------------------------------------------------------------------------
# The job (a separate process; dies with the mount).

def save_checkpoint(root, n):
    """One save: mkdir tmp-checkpoint-n, the files (.metadata last), rename
    to checkpoint-n.  A leftover checkpoint-n (damaged: a complete one
    would not be saved again) is removed first, as a real job would;
    returns what it held, or None."""
    root = Path(root)
    tmp = root / f"tmp-checkpoint-{n}"
    os.mkdir(tmp)
    for name, body in ckpt_files(n).items():
        fd = os.open(tmp / name, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        try:
            for i in range(0, len(body), MiB):
                os.write(fd, body[i:i + MiB])
        finally:
            os.close(fd)
    final = root / f"checkpoint-{n}"
    replaced = None
    if os.path.lexists(final):
        replaced = dir_view(final)
        shutil.rmtree(final)
    os.rename(tmp, final)
    return replaced


def save_in_place(root, n):
    """Issue 21's other save: mkdir checkpoint-n and write its files
    directly into it (.metadata last), no temp name, then write `latest`
    (content "checkpoint-n") at the top.  A leftover checkpoint-n (damaged
    by a kill) is removed first; returns what it held, or None."""
    root = Path(root)
    final = root / f"checkpoint-{n}"
    replaced = None
    if os.path.lexists(final):
        replaced = dir_view(final)
        shutil.rmtree(final)
    os.mkdir(final)
    for name, body in ckpt_files(n).items():
        fd = os.open(final / name, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        try:
            for i in range(0, len(body), MiB):
                os.write(fd, body[i:i + MiB])
        finally:
            os.close(fd)
    return replaced


def write_latest(root, n):
    with open(Path(root) / LATEST, "w") as f:
        f.write(f"checkpoint-{n}")


def job_main(root, until, step_sleep, inplace_even=False, keep=KEEP, for_s=None,
             min_saves=0):
    """inplace_even: even steps are saved in place and followed by `latest`
    (issue 21), odd ones through tmp-checkpoint-N and a rename; for_s: no
    new save starts after that many seconds, unless fewer than min_saves
    were made (a loaded host): then up to twice that long."""
    root = Path(root)
    t0 = time.monotonic()
    t_end = t0 + for_s if for_s else None
    saves = 0

    def go_on():
        if t_end is None:
            return True
        now = time.monotonic()
        return now < t_end or (saves < min_saves and now < t_end + for_s)

    def out(*a):
        print(*a, flush=True)

    # start-up: a real job removes its own half-written temp directories
    for name in sorted(os.listdir(root)):
        if name.startswith("tmp-checkpoint-"):
            shutil.rmtree(root / name)
            out("cleaned", name)
    complete = []
    for name in os.listdir(root):
        m = CKPT_RE.fullmatch(name)
        if not m:
            continue
        n = int(m.group(1))
        if dir_view(root / name) == ckpt_sizes(n):
            complete.append(n)
        else:
            out("incomplete", name, json.dumps(dir_view(root / name), sort_keys=True))
    n = max(complete) + 1 if complete else 1
    out("resume", n)
    while n <= until and go_on():
        in_place = inplace_even and n % 2 == 0
        replaced = save_in_place(root, n) if in_place else save_checkpoint(root, n)
        if replaced is not None:
            out("replacing", f"checkpoint-{n}", json.dumps(replaced, sort_keys=True))
        out("saved", n)
        saves += 1
        if in_place:
            write_latest(root, n)
            out("latest", n)
        have = sorted(int(m.group(1)) for m in map(CKPT_RE.fullmatch, os.listdir(root)) if m)
        for old in have[:-keep]:
            shutil.rmtree(root / f"checkpoint-{old}")
            out("deleted", old)
        n += 1
        if step_sleep:
            time.sleep(step_sleep)
    have = sorted(int(m.group(1)) for m in map(CKPT_RE.fullmatch, os.listdir(root)) if m)
    out("final", ",".join(map(str, have)))
    out("done")


class Job:
    """The job process on the writer mount, its stdout parsed by a thread:
    `events` is a list of (monotonic time, verb, arg)."""

    def __init__(self, root, until, step_sleep, env=None, log=None, args=()):
        self.events = []
        self.stderr_tail = ""
        self.log = log
        self.proc = subprocess.Popen(
            [PY, os.path.abspath(__file__), "job", str(root), "--until", str(until),
             "--step-sleep", str(step_sleep), *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
            start_new_session=True)
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()
        self._e = threading.Thread(target=self._read_err, daemon=True)
        self._e.start()
        _JOBS.append(self)

    def _read(self):
        for line in self.proc.stdout:
            verb, _, arg = line.strip().partition(" ")
            self.events.append((time.monotonic(), verb, arg))
            if self.log:
                self.log.write(f"{time.time():.3f} job {line}")
                self.log.flush()

    def _read_err(self):
        data = self.proc.stderr.read()
        self.stderr_tail = "\n".join(data.splitlines()[-8:])

    def wait(self, timeout):
        """Exit status, or None when it still runs after timeout."""
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        if self in _JOBS:
            _JOBS.remove(self)
        self._t.join(10)
        self._e.join(10)
        return rc

    def kill(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
        self.wait(30)

    def saved(self):
        return [int(a) for _, v, a in self.events if v == "saved"]

    def deleted(self):
        return [int(a) for _, v, a in self.events if v == "deleted"]

    def has(self, verb):
        return any(v == verb for _, v, _ in self.events)

    def arg(self, verb):
        for _, v, a in reversed(self.events):
            if v == verb:
                return a
        return None


# --------------------------------------------------------------------------
# The observer (another host, polling through its own read-only mount).

_OBSERVERS = []
_JOBS = []


def stop_all():
    """Stops every Observer and kills every Job still running (a test that
    failed midway: their FUSE calls would keep the mounts busy)."""
    while _OBSERVERS:
        o = _OBSERVERS.pop()
        o._stop.set()
        o._t.join(60)
        o._v.join(60)
    while _JOBS:
        _JOBS.pop().kill()


class Observer:
    """Polls root (the run directory on an observer mount) in a thread.
    Every look lists root, then each listed checkpoint-N: complete (every
    file with its size) is fine, so is a directory gone by the time it is
    listed (ENOENT); an empty or partial listing is a *partial sighting*
    (kept with what the job had done to N by then, from `history`: a
    callable n -> list of (seconds since start, event)).  The first
    complete sighting of each N reads the files and checks their bytes.
    A temp name showing is recorded too."""

    def __init__(self, root, history=None, interval=0.05, verify_bytes=True, note=None,
                 check_latest=False, on_latest_bad=None, on_partial=None):
        self.root = Path(root)
        # issue 21: `latest` never names a checkpoint that cannot be listed
        # complete while no newer complete one exists
        self.check_latest = check_latest
        self.on_latest_bad = on_latest_bad
        self.on_partial = on_partial  # called with each partial sighting (evidence)
        self.latest_ok = 0
        self.latest_rescued = 0  # named N missing, a newer complete one listed
        self.latest_never_shown = []  # (t, n): ... and N never seen complete
        self.latest_bad = []     # (t, n, view of checkpoint-n, newer listing, history)
        self.note = note
        self.history = history or (lambda n: [])
        self.interval = interval
        self.verify_bytes = verify_bytes
        self.looks = 0
        self.complete = 0
        self.gone = 0
        self.partial = []        # (t, n, view, history)
        self.empty = []          # the subset of partial with nothing listed
        self.temp_visible = []
        self.bad_bytes = []
        self.errors = []
        self.first_complete = {}  # n -> time
        self.verified = set()
        self.flicker = []         # (n, t gone from the listing, t back complete)
        self._absent_since = {}   # n seen complete, then not listed: since when
        self._noted = set()
        self._stop = threading.Event()
        self.t0 = time.monotonic()
        self._t = threading.Thread(target=self._run, name="observer", daemon=True)
        self._t.start()
        # the bytes are read by a second thread: a look (one LIST per
        # directory, each a few tens of ms) must not wait for downloads
        self._v = threading.Thread(target=self._run_verify, name="observer-bytes",
                                   daemon=True)
        self._v.start()
        _OBSERVERS.append(self)

    def _err(self, e):
        if len(self.errors) < 200:
            self.errors.append((round(time.monotonic() - self.t0, 2), repr(e)))

    def _run(self):
        while not self._stop.is_set():
            try:
                self.look()
            except OSError as e:
                self._err(e)
            self.looks += 1
            self._stop.wait(self.interval)

    def _run_verify(self):
        while not self._stop.is_set():
            todo = [n for n in sorted(self.first_complete) if n not in self.verified]
            for n in todo:
                d = self.root / f"checkpoint-{n}"
                try:
                    self._verify(d, n)
                except OSError as e:
                    # an error is fine only for a checkpoint on its way out
                    if dir_view(d) == ckpt_sizes(n):
                        self._err(e)
                    self.verified.add(n)
            self._stop.wait(0.2)

    def look(self):
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return
        now = round(time.monotonic() - self.t0, 2)
        listed = {int(m.group(1)) for m in map(CKPT_RE.fullmatch, names) if m}
        if self.check_latest and LATEST in names:
            self._look_latest()
        for n in self.first_complete:
            if n not in listed and n not in self._absent_since:
                self._absent_since[n] = now
        for name in names:
            if name.startswith("tmp-"):
                if len(self.temp_visible) < 200:
                    self.temp_visible.append((round(time.monotonic() - self.t0, 2), name))
                continue
            m = CKPT_RE.fullmatch(name)
            if not m:
                continue
            n = int(m.group(1))
            d = self.root / name
            view = dir_view(d)
            if view is None:
                self.gone += 1
                continue
            want = ckpt_sizes(n)
            if view == want:
                self.complete += 1
                self.first_complete.setdefault(n, time.monotonic())
                if n in self._absent_since:
                    # listed complete, then not listed, now complete again
                    self.flicker.append((n, self._absent_since.pop(n), now))
                    if self.note:
                        self.note(f"observer: checkpoint-{n} complete again after it "
                                  f"was gone from the listing at {self.flicker[-1][1]}s; "
                                  f"job history {self.history(n)}")
                continue
            if "vanished" in view.values() and dir_view(d) is None:
                self.gone += 1      # deleted between its listing and the lstat
                continue
            t = round(time.monotonic() - self.t0, 2)
            rec = (t, n, sorted(view.items()), self.history(n))
            self.partial.append(rec)
            if not view:
                self.empty.append(rec)
            if self.on_partial:
                try:
                    self.on_partial(rec)
                except Exception as e:  # noqa: BLE001 - evidence only
                    self._err(e)
            if self.note and (n, tuple(rec[2])) not in self._noted:
                self._noted.add((n, tuple(rec[2])))
                self.note(f"observer: partial {name}: {rec[2]}; job history {rec[3]}")

    def _look_latest(self):
        """Reads `latest`, then lists the checkpoint it names.  Complete is
        fine.  Otherwise (ENOENT, empty, partial) the run directory is
        listed again, after that look: a checkpoint the rotation removed
        was removed after a newer one was saved (and the newer `latest`
        written), so a newer complete checkpoint must be listed now.  If
        none is, `latest` names a checkpoint that is missing while no
        newer one exists: a violation (what a framework's find-latest
        would fail on)."""
        try:
            with open(self.root / LATEST) as f:
                text = f.read()
        except FileNotFoundError:
            return
        t = round(time.monotonic() - self.t0, 2)
        m = CKPT_RE.fullmatch(text.strip())
        if not m:
            self.latest_bad.append((t, None, text[:80], [], []))
            return
        n = int(m.group(1))
        view = dir_view(self.root / f"checkpoint-{n}")
        if view == ckpt_sizes(n):
            self.latest_ok += 1
            return
        try:
            again = os.listdir(self.root)
        except FileNotFoundError:
            again = []
        newer = {}
        for name in again:
            mm = CKPT_RE.fullmatch(name)
            if mm and int(mm.group(1)) > n:
                newer[name] = dir_view(self.root / name)
        if any(v == ckpt_sizes(int(CKPT_RE.fullmatch(k).group(1)))
               for k, v in newer.items()):
            self.latest_ok += 1
            self.latest_rescued += 1
            if n not in self.first_complete and len(self.latest_never_shown) < 1000:
                self.latest_never_shown.append((t, n))
            return
        rec = (t, n, None if view is None else sorted(view.items()),
               sorted(again), self.history(n))
        self.latest_bad.append(rec)
        if self.on_latest_bad:
            try:
                self.on_latest_bad(rec)
            except Exception as e:  # noqa: BLE001 - evidence only
                self._err(e)
        if self.note:
            self.note(f"observer: latest names checkpoint-{n}, which lists as "
                      f"{rec[2]}, and the run directory then lists {rec[3]}; "
                      f"job history {rec[4]}")

    def latest_report(self, limit=12):
        """The latest sightings grouped into runs (looks less than 0.5 s
        apart naming the same N): first/last time, count."""
        runs = []
        for t, n, view, again, hist in self.latest_bad:
            if runs and runs[-1]["n"] == n and t - runs[-1]["last"] < 0.5:
                runs[-1]["count"] += 1
                runs[-1]["last"] = t
                continue
            runs.append({"n": n, "first": t, "last": t, "count": 1, "view": view,
                         "listing_after": again, "history": hist})
        return runs[:limit]

    def _verify(self, d, n):
        """Reads checkpoint n's files (the first complete sighting); a file
        gone meanwhile (rotated away) ends the check without a verdict."""
        if not self.verify_bytes:
            self.verified.add(n)
            return
        for name in ckpt_sizes(n):
            try:
                with open(d / name, "rb") as f:
                    got = f.read()
            except FileNotFoundError:
                self.verified.add(n)
                return
            if _sha(got) != ckpt_sha(n, name):
                self.bad_bytes.append((round(time.monotonic() - self.t0, 2), n, name, len(got)))
                break
        self.verified.add(n)

    def stop(self):
        self._stop.set()
        if self in _OBSERVERS:
            _OBSERVERS.remove(self)
        self._t.join(120)
        self._v.join(120)
        assert not self._t.is_alive() and not self._v.is_alive(), \
            "observer thread hung (a FUSE call?)"

    def summary(self):
        return {"looks": self.looks, "complete_sightings": self.complete,
                "gone": self.gone, "partial_sightings": len(self.partial),
                "empty_sightings": len(self.empty),
                "partial_with_files": len(self.partial) - len(self.empty),
                "temp_visible": len(self.temp_visible),
                "bad_bytes": len(self.bad_bytes), "errors": len(self.errors),
                "checkpoints_seen_complete": len(self.first_complete),
                "gone_then_back": len(self.flicker),
                "latest_ok": self.latest_ok, "latest_bad": len(self.latest_bad),
                "latest_missing_newer_shown": self.latest_rescued,
                "latest_names_never_shown": len(self.latest_never_shown),
                "verified": len(self.verified)}

    def partial_report(self, limit=12):
        """The partial sightings grouped by N: first/last time, count, what
        was listed, the job's history of N."""
        by = {}
        for t, n, view, hist in self.partial:
            g = by.setdefault(n, {"n": n, "count": 0, "first": t, "last": t,
                                  "views": [], "history": hist})
            g["count"] += 1
            g["last"] = t
            g["history"] = hist
            if view not in g["views"] and len(g["views"]) < 3:
                g["views"].append(view)
        return sorted(by.values(), key=lambda g: g["first"])[:limit]


# --------------------------------------------------------------------------
# Evidence: the journal, ckptfs status, the bucket.

def journal_dbs(cache_dir):
    return sorted(Path(cache_dir).glob("writes/*/journal.db"))


def journal_dump(cache_dir):
    """The txns/files/garbage rows of every journal under cache_dir, as
    text (read-only; the WAL is read too)."""
    out = []
    for db in journal_dbs(cache_dir):
        out.append(f"== {db}")
        try:
            c = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
            for row in c.execute("SELECT id, kind, root, dest, is_dir, state, "
                                 "manifest_root, error FROM txns ORDER BY id"):
                out.append(f"txn {row}")
            for row in c.execute("SELECT txn, path, sid, size, state, key FROM files "
                                 "ORDER BY txn, path"):
                out.append(f"  file {row}")
            for row in c.execute("SELECT txn, key FROM garbage ORDER BY txn"):
                out.append(f"  garbage {row}")
            c.close()
        except sqlite3.Error as e:
            out.append(f"  ({e})")
    return "\n".join(out)


def bucket_tree(client, bucket, prefix):
    """{key: size} under prefix."""
    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for o in page.get("Contents", []):
            out[o["Key"]] = o["Size"]
    return out


def bucket_by_dir(keys, run):
    """{top directory under run/: [rest of key]} of a key listing."""
    out = {}
    for k in keys:
        if not k.startswith(run + "/"):
            continue
        rest = k[len(run) + 1:]
        top, _, sub = rest.partition("/")
        out.setdefault(top, []).append(sub)
    return out


# --------------------------------------------------------------------------
# The loop.

class CrashLoop:
    """One crash-loop run.

    mount_writer()  -> a mount object (path, pids(), log) of the writer,
                       always the same mount point and cache directory;
    kill_writer(m)  SIGKILLs its ckptfs and detaches the dead mount;
    run_dir         path of the run directory relative to a mount root.
    """

    def __init__(self, mount_writer, kill_writer, observer_root, run_dir="run",
                 kills=10, seed=None, step_sleep=0.3, job_env=None, log=None,
                 delays=(0.2, 3.5), job_args=(), observer_kw=None):
        self.mount_writer = mount_writer
        self.kill_writer = kill_writer
        self.run_dir = run_dir
        self.kills = kills
        self.seed = seed if seed is not None else random.SystemRandom().randrange(1 << 31)
        self.rng = random.Random(self.seed)
        self.step_sleep = step_sleep
        self.job_env = job_env
        self.log = log
        self.delays = delays
        self.t0 = time.monotonic()
        self.hist = {}          # n -> [(t, event)]
        self.jobs = []
        self.incarnations = []  # dicts: kill delay, what the job did
        self.job_failures = []  # jobs that died while the mount lived
        self.writer = None
        self.job_args = tuple(job_args)
        self.kill_times = []    # monotonic time of each SIGKILL
        self.observer = Observer(observer_root, history=self._history, note=self.note,
                                 **(observer_kw or {}))

    def note(self, msg):
        line = f"[crashloop {time.monotonic() - self.t0:7.2f}s] {msg}"
        if self.log:
            self.log.write(f"{time.time():.3f} {line}\n")
            self.log.flush()
        sys.stderr.write(line + "\n")

    def _history(self, n):
        return list(self.hist.get(n, []))

    def _record(self, job, inc):
        """Folds the events of job (incarnation inc) into hist."""
        for t, verb, arg in job.events:
            if verb in ("saved", "deleted", "latest"):
                n = int(arg)
                ev = (round(t - self.t0, 2), f"{verb}#{inc}")
            elif verb in ("cleaned", "incomplete", "replacing"):
                m = re.search(r"checkpoint-(\d+)", arg)
                if not m:
                    continue
                n = int(m.group(1))
                ev = (round(t - self.t0, 2), f"{verb}#{inc}:{arg.split(' ')[0]}")
            else:
                continue
            if ev not in self.hist.setdefault(n, []):
                self.hist[n].append(ev)

    def _start_job(self, until):
        root = Path(self.writer.path) / self.run_dir
        job = Job(root, until, self.step_sleep, env=self.job_env, log=self.log,
                  args=self.job_args)
        self.jobs.append(job)
        return job

    def run_kills(self, until=10**6):
        """Mounts, runs the job, kills ckptfs `kills` times at random moments
        (seeded).  Returns with the writer dead and detached."""
        self.note(f"seed {self.seed}, {self.kills} kills")
        for i in range(self.kills):
            self.writer = self.mount_writer()
            job = self._start_job(until)
            # a third of the kills land early (start-up clean-up, first
            # mkdir, first files), the rest anywhere in a save or rotation
            if self.rng.random() < 0.3:
                delay = self.rng.uniform(0.0, 0.6)
            else:
                delay = self.rng.uniform(*self.delays)
            t_end = time.monotonic() + delay
            while time.monotonic() < t_end:
                self._record(job, i)
                if job.proc.poll() is not None:
                    break
                time.sleep(0.01)
            rc_before = job.proc.poll()
            if rc_before is not None:
                job.wait(10)  # its output read to the end
                self.job_failures.append((i, rc_before, job.stderr_tail, job.events[-5:]))
                self.note(f"job #{i} exited by itself ({rc_before}) before the kill: "
                          f"{job.stderr_tail[-300:]}")
            self.kill_times.append(time.monotonic())
            self.note(f"SIGKILL {i + 1}")
            self.kill_writer(self.writer)
            rc = job.wait(30)
            if rc is None:
                self.note(f"job #{i} still running 30 s after the kill; killing it")
                job.kill()
                rc = "hung"
            self._record(job, i)
            self.incarnations.append({
                "i": i, "delay": round(delay, 2), "job_rc": rc,
                "saved": job.saved(), "deleted": job.deleted(),
                "cleaned": [a for _, v, a in job.events if v == "cleaned"],
                "incomplete": [a for _, v, a in job.events if v == "incomplete"],
                "replacing": [a for _, v, a in job.events if v == "replacing"],
                "resume": job.arg("resume")})
            self.note(f"kill {i + 1}/{self.kills} after {delay:.2f}s: job resumed at "
                      f"{job.arg('resume')}, saved {job.saved()}, deleted {job.deleted()}, "
                      f"exit {rc}")

    def run_final(self, more=3, timeout=120):
        """Remounts after the last kill and runs the job until it saved
        `more` further checkpoints and exited.  Returns the job."""
        self.writer = self.mount_writer()
        done = [n for inc in self.incarnations for n in inc["saved"]]
        # resume picks max(complete)+1; `more` saves past the newest known
        until = (max(done) if done else 0) + more
        job = self._start_job(until)
        deadline = time.monotonic() + timeout
        rc = None
        while time.monotonic() < deadline:
            self._record(job, "final")
            rc = job.proc.poll()
            if rc is not None:
                break
            time.sleep(0.05)
        rc = job.wait(5)
        self._record(job, "final")
        self.final_job = job
        self.note(f"final job: rc {rc}, resumed at {job.arg('resume')}, saved {job.saved()}, "
                  f"deleted {job.deleted()}, final {job.arg('final')}")
        return job

    def expected_after(self):
        """What the bucket must hold after the final job and a sync:
        (kept: set of N, gone: set of N rotated away and not kept)."""
        fin = self.final_job
        kept = set(int(x) for x in (fin.arg("final") or "").split(",") if x)
        ever_deleted = set()
        for j in self.jobs:
            ever_deleted |= set(j.deleted())
        return kept, ever_deleted - kept


def final_checks(client, bucket, run, kept, gone, finished_after_crash):
    """The bucket after the final job and sync: problems found (a list of
    strings; empty when all is well).  kept: the checkpoints the job's
    rotation kept (all must be there, byte for byte, nothing else in
    them but protocol keys); gone: rotated away (no key left);
    finished_after_crash: saved by the final job (must be in kept or gone)."""
    problems = []
    keys = bucket_tree(client, bucket, run + "/")
    by = bucket_by_dir(keys, run)
    for n in sorted(kept):
        name = f"checkpoint-{n}"
        files = sorted(k for k in by.get(name, []) if not k.startswith(".ckptfs"))
        if files != sorted(ckpt_sizes(n)):
            problems.append(f"{name} kept by the job, the bucket holds {files}")
            continue
        for f in files:
            body = client.get_object(Bucket=bucket, Key=f"{run}/{name}/{f}")["Body"].read()
            if _sha(body) != ckpt_sha(n, f):
                problems.append(f"{name}/{f}: {len(body)} bytes in the bucket, not the job's")
    for n in sorted(gone):
        left = by.get(f"checkpoint-{n}")
        if left:
            problems.append(f"checkpoint-{n} rotated away, the bucket still holds {sorted(left)}")
    for top, rest in sorted(by.items()):
        if top.startswith("tmp-"):
            problems.append(f"temp directory {top} in the bucket: {sorted(rest)}")
        m = CKPT_RE.fullmatch(top)
        if m and int(m.group(1)) not in kept and int(m.group(1)) not in gone:
            problems.append(f"{top} in the bucket, neither kept nor deleted by the job: "
                            f"{sorted(rest)}")
    for n in finished_after_crash:
        if n not in kept and n not in gone:
            problems.append(f"checkpoint-{n} finished after the last crash, unaccounted")
    markers = [k for k in keys if "/.ckptfs-pending/" in "/" + k]
    markers += [k for k in bucket_tree(client, bucket, ".ckptfs-pending/")]
    if markers:
        problems.append(f"pending markers left: {markers}")
    return problems


def _cli():
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    j = sub.add_parser("job", help="run the checkpointing job in ROOT")
    j.add_argument("root")
    j.add_argument("--until", type=int, default=10**6)
    j.add_argument("--step-sleep", type=float, default=0.3)
    j.add_argument("--inplace-even", action="store_true",
                   help="even steps in place, then `latest` (issue 21)")
    j.add_argument("--keep", type=int, default=KEEP)
    j.add_argument("--for-s", type=float, default=None)
    j.add_argument("--min-saves", type=int, default=0,
                   help="with --for-s: go on up to twice as long until this many saves")
    a = ap.parse_args()
    if a.cmd == "job":
        job_main(a.root, a.until, a.step_sleep, a.inplace_even, a.keep, a.for_s,
                 a.min_saves)


if __name__ == "__main__":
    _cli()
