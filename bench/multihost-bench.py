#!/usr/bin/python3
"""Many hosts, one checkpoint (issue 16): HOSTS ckptfs mounts on this
machine, each with its own cache directory standing for a host, save one
torch.distributed.checkpoint-style directory together and restore it at
once; an observer mount watches; every mount's S3 traffic goes through its
own counting proxy (tests/integration/faultproxy.py, no faults) so requests
and bytes are counted per host and by type.

    bench/multihost-bench.py                       # 8 hosts x 4 x 32 MiB
    bench/multihost-bench.py --hosts 4 --file-mib 8 --poll-s 5   # smoke

Phases, each printed as rows of one table (and --json):
  save     every host mkdir -p's step-1, writes and fsyncs its FILES shards
           (__R_I.distcp), waits at a barrier (--barrier-s after the last
           close), then rank 0 writes .metadata (tmp, fsync, rename).  The
           observer must see nothing, then everything at once; the time from
           the last writer's close (.metadata) to visible on the observer and
           on every writer mount; requests per host by type, checked against
           files + parts + a constant per host.
  idle     every mount left alone: requests per host per minute.
  poll     every writer mount looks for the newest step-* and its .metadata
           once a second (a resumed job): requests per poll per host.
  marker   one pending transaction on a mount with lease=6: marker PUTs per
           minute (scaled to the default lease of 60 s).
  restore  fresh mounts (empty caches) on every host read every file at
           once, then only their own ranks' files; the same by HOSTS
           concurrent `aws s3 cp --recursive` processes through the same
           proxies (the reference); then the first set remounted on its
           cache reads everything again (GETs must be 0).

A report, never a test: it always exits 0 when the phases ran.  The
machine it was written on has 2 cores shared with other work: RGW, HOSTS
daemons, the proxies and the clients compete for them, so throughput
figures are noisy and meaningful only as ratios within one run.
"""

import argparse
import concurrent.futures as cf
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import lib_bench  # noqa: E402
from lib_bench import BenchMount, RGW, helpers  # noqa: E402
from faultproxy import FaultProxy  # noqa: E402

MiB = 1 << 20
TYPES = ("PUT", "CreateMPU", "UploadPart", "Complete", "LIST", "HEAD", "GET",
         "DELETE", "DeleteObjects", "COPY", "PartCopy", "Abort", "ListUploads")


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def total(n):
    return sum(v for k, v in n.items() if isinstance(k, str))


class Bench:
    def __init__(self, a):
        self.a = a
        self.work = Path(tempfile.mkdtemp(prefix="mhbench-", dir=a.workdir))
        self.mounts = []
        self.proxies = []
        self.rgw = None
        self.rows = []       # (section, what, value, note)
        self.json = {}

    # ---- set-up -----------------------------------------------------------
    def start(self):
        log(f"scratch {self.work}")
        self.rgw = RGW.start(self.work / "rgw", self.work,
                             memstore_bytes=max(3 << 30, 3 * self.data_bytes()))
        self.s3 = self.rgw.client()
        self.bucket = "multihost"
        self.s3.create_bucket(Bucket=self.bucket)
        self.s3.put_object(Bucket=self.bucket, Key="ckpt/", Body=b"")
        self.hp = [FaultProxy(self.rgw.endpoint) for _ in range(self.a.hosts)]
        self.op = FaultProxy(self.rgw.endpoint)
        self.proxies = self.hp + [self.op]

    def data_bytes(self):
        return self.a.hosts * self.a.files * self.a.file_mib * MiB

    def mount(self, name, proxy, *opts, ro=False):
        mp = self.work / f"mnt-{name}"
        mp.mkdir(exist_ok=True)
        o = list(opts)
        if ro:
            o = helpers.observer_options(self.work / f"cache-{name}", *o)
        else:
            o = [f"cache_dir={self.work}/cache-{name}", *o]
        argv = [self.a.ckptfs, "mount", f"s3://{self.bucket}", str(mp), "-f",
                "--endpoint", proxy.endpoint, "--region", lib_bench.REGION,
                "-o", ",".join(o)]
        m = BenchMount(argv, mp, self.work / f"ckptfs-{name}.log", self.rgw.env)
        self.mounts.append(m)
        return m

    def unmount(self, ms):
        with cf.ThreadPoolExecutor(len(ms)) as ex:
            list(ex.map(lambda m: m.unmount(), ms))

    def stop(self):
        for m in reversed(self.mounts):
            if not m.unmounted:
                try:
                    m.unmount(60)
                except Exception as e:  # noqa: BLE001
                    log(f"unmount {m.path}: {e}")
        for p in self.proxies:
            p.close()
        if self.rgw:
            self.rgw.stop()
        if not self.a.keep:
            shutil.rmtree(self.work, ignore_errors=True)

    def snap(self):
        return [p.acct.snapshot() for p in self.proxies]

    def since(self, s):
        return [p.acct.since(x) for p, x in zip(self.proxies, s)]

    def row(self, section, what, value, note=""):
        self.rows.append((section, what, value, note))
        log(f"{section}: {what} = {value} {note}")

    # ---- data -------------------------------------------------------------
    def shard(self, r, i):
        """File i of rank r: distinct incompressible bytes."""
        n = self.a.file_mib * MiB
        off = ((r * 131 + i * 17) * 4096 + 1) % n
        return self.base[off:] + self.base[:off]

    # ---- phases -----------------------------------------------------------
    def save(self):
        a = self.a
        self.base = os.urandom(a.file_mib * MiB)
        self.writers = [self.mount(f"w{r}", self.hp[r], f"commit_delay={a.commit_delay}")
                        for r in range(a.hosts)]
        self.obs = self.mount("obs", self.op, ro=True)
        names = {r: [f"__{r}_{i}.distcp" for i in range(a.files)] for r in range(a.hosts)}
        self.names = names
        want = {n: a.file_mib * MiB for r in names for n in names[r]}
        meta = b"dcp metadata " * 1000
        want[".metadata"] = len(meta)
        self.want = want
        seen = {"partial": [], "first": None, "complete": None, "looks": 0}
        stop = threading.Event()

        def watch():
            d = self.obs / "ckpt/step-1"
            while not stop.is_set():
                try:
                    view = {n: os.stat(d / n).st_size for n in os.listdir(d)}
                except FileNotFoundError:
                    view = {}
                seen["looks"] += 1
                if view and view != want:
                    seen["partial"].append(len(view))
                elif view and seen["complete"] is None:
                    seen["complete"] = time.monotonic()
                time.sleep(0.05)

        wt = threading.Thread(target=watch, daemon=True)
        wt.start()
        snap = self.snap()
        closes = [0.0] * a.hosts
        t0 = time.monotonic()

        def host(r):
            d = self.writers[r] / "ckpt/step-1"
            os.makedirs(d, exist_ok=True)
            for i, n in enumerate(names[r]):
                fd = os.open(d / n, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
                body = self.shard(r, i)
                for k in range(0, len(body), 4 * MiB):
                    os.write(fd, body[k:k + 4 * MiB])
                os.fsync(fd)
                os.close(fd)
            closes[r] = time.monotonic()

        with cf.ThreadPoolExecutor(a.hosts) as ex:
            list(ex.map(host, range(a.hosts)))
        t_shards = max(closes)
        time.sleep(a.barrier_s)
        d0 = self.writers[0] / "ckpt/step-1"
        fd = os.open(d0 / ".metadata.tmp", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        os.write(fd, meta)
        os.fsync(fd)
        os.close(fd)
        os.rename(d0 / ".metadata.tmp", d0 / ".metadata")
        t_last = time.monotonic()
        visible = [None] * a.hosts
        deadline = t_last + a.timeout

        def until_visible(r):
            """One poller per mount: each host finds out on its own."""
            while time.monotonic() < deadline:
                try:
                    if sorted(os.listdir(self.writers[r] / "ckpt/step-1")) == sorted(want):
                        visible[r] = time.monotonic()
                        return
                except FileNotFoundError:
                    pass
                time.sleep(0.05)

        with cf.ThreadPoolExecutor(a.hosts) as ex:
            list(ex.map(until_visible, range(a.hosts)))
        while time.monotonic() < deadline and seen["complete"] is None:
            time.sleep(0.05)
        stop.set()
        wt.join(10)
        cnt = self.since(snap)
        hosts = cnt[:a.hosts]
        n_files = len(want)
        parts_per_file = -(-a.file_mib // a.part_mib) if a.file_mib > a.part_mib else 0
        n_parts = a.hosts * a.files * parts_per_file
        self.row("save", "data", f"{a.hosts} hosts x {a.files} x {a.file_mib} MiB",
                 f"{self.data_bytes() / MiB:.0f} MiB, barrier {a.barrier_s:.0f} s, "
                 f"commit_delay {a.commit_delay:g} s")
        self.row("save", "writes (first open to last shard close)", f"{t_shards - t0:.1f} s",
                 f"{self.data_bytes() / MiB / (t_shards - t0):.0f} MiB/s")
        self.row("save", "observer looks / partial views", f"{seen['looks']} / "
                 f"{len(seen['partial'])}", "must be 0 partial" +
                 (f" (sizes seen {sorted(set(seen['partial']))[:5]})" if seen["partial"] else ""))
        if seen["complete"]:
            self.row("save", ".metadata close -> visible on observer",
                     f"{seen['complete'] - t_last:.2f} s")
        if None not in visible:
            self.row("save", ".metadata close -> visible on every writer mount",
                     f"{max(visible) - t_last:.2f} s",
                     f"first {min(visible) - t_last:.2f} s")
            self.row("save", "last shard close -> visible on every writer mount",
                     f"{max(visible) - t_shards:.2f} s",
                     f"barrier {a.barrier_s:g} s, commit_delay {a.commit_delay:g} s")
        else:
            self.row("save", "visible on every writer mount", "NOT within timeout",
                     f"{visible.count(None)} mounts never saw it")
        tot = sum((h["n"] for h in hosts), start=__import__("collections").Counter())
        ty = {t: tot[t] for t in TYPES if tot[t]}
        kinds = {f"{t}:{k}": tot[t, k] for t in ("PUT", "DELETE", "GET", "LIST")
                 for k in ("data", "marker", "manifest", "bucket") if tot[t, k]}
        self.row("save", "requests (all writers, save + until visible)", total(tot),
                 json.dumps(ty))
        self.row("save", "by key kind", "", json.dumps(kinds))
        n_mpu = tot["CreateMPU"] + tot["Complete"]
        data_req = tot["PUT", "data"] + n_mpu + tot["UploadPart"]
        beyond = (total(tot) - data_req) / a.hosts
        self.row("save", "files + parts + Create/Complete", f"{n_files} + {n_parts} + {n_mpu}",
                 f"parts of {a.part_mib} MiB; beyond the data requests: {beyond:.1f} "
                 f"per host (of which GET manifest {tot['GET', 'manifest'] / a.hosts:.1f}, "
                 f"LIST {tot['LIST'] / a.hosts:.1f})")
        self.row("save", "GET manifest (all writers)", tot["GET", "manifest"],
                 f"with the manifest index: hosts by the last committer + about 2 per "
                 f"host = {a.hosts + 2 * a.hosts}; without: hosts x (hosts + 1) = "
                 f"{a.hosts * (a.hosts + 1)}")
        up = sum(sum(h["up"].values()) for h in hosts)
        self.row("save", "bytes up / data", f"{up / self.data_bytes():.4f}")
        o = cnt[-1]["n"]
        self.row("save", "observer requests while polling", total(o),
                 json.dumps({t: o[t] for t in TYPES if o[t]}) +
                 f" over {seen['looks']} looks")
        self.json["save"] = {"hosts": [{str(k): v for k, v in h["n"].items()} for h in hosts],
                             "visible_s": [v - t_last if v else None for v in visible],
                             "observer_s": seen["complete"] - t_last if seen["complete"] else None,
                             "partial": len(seen["partial"])}

    def idle_and_poll(self):
        a = self.a
        snap = self.snap()
        time.sleep(a.idle_s)
        cnt = self.since(snap)
        per = [total(c["n"]) for c in cnt[:a.hosts]]
        self.row("idle", "requests per host per minute, nothing happening",
                 f"{60 * max(per) / a.idle_s:.1f}", f"max over hosts, {a.idle_s:.0f} s")
        # a resumed job: newest step-* and its .metadata, once a second
        snap = self.snap()
        polls = 0
        t_end = time.monotonic() + a.poll_s
        while time.monotonic() < t_end:
            for w in self.writers:
                steps = sorted(n for n in os.listdir(w / "ckpt") if n.startswith("step-"))
                assert steps and os.path.exists(w / "ckpt" / steps[-1] / ".metadata")
            polls += 1
            time.sleep(1.0)
        cnt = self.since(snap)
        per = [c["n"] for c in cnt[:a.hosts]]
        tot = sum(total(c) for c in per)
        mix = sum(per, start=__import__("collections").Counter())
        self.row("poll", "requests per poll per host (1 s interval, dir_timeout 1 s)",
                 f"{tot / polls / a.hosts:.2f}",
                 json.dumps({t: mix[t] for t in TYPES if mix[t]}) + f", {polls} polls")

    def marker(self):
        """Marker renewals of one pending transaction (lease=6 s: every 2 s)."""
        a = self.a
        lease = 6
        m = self.mount("mk", self.hp[0], f"lease={lease}", "commit_delay=600")
        os.makedirs(m / "ckpt/pending-x", exist_ok=True)
        (m / "ckpt/pending-x/f").write_bytes(b"x")
        time.sleep(1)
        snap = self.snap()
        time.sleep(a.marker_s)
        cnt = self.since(snap)[0]["n"]
        per_min = 60 * cnt["PUT", "marker"] / a.marker_s
        self.row("marker", f"marker PUTs per minute, lease {lease} s", f"{per_min:.1f}",
                 f"-> {per_min * lease / 60:.1f} per minute at lease 60 s (3 expected); "
                 f"other requests {total(cnt) - cnt['PUT', 'marker']}")
        subprocess.run([self.a.ckptfs, "sync", str(m.path)], capture_output=True, timeout=120)
        m.unmount()

    def read_all(self, ms, only=None):
        """Every mount in ms reads its files (all, or only[r]) at once;
        returns (seconds, bytes)."""
        def one(r):
            n = 0
            d = ms[r] / "ckpt/step-1"
            for name in (only[r] if only else sorted(self.want)):
                with open(d / name, "rb", buffering=0) as f:
                    while True:
                        b = f.read(4 * MiB)
                        if not b:
                            break
                        n += len(b)
            return n
        t0 = time.monotonic()
        with cf.ThreadPoolExecutor(len(ms)) as ex:
            nb = sum(ex.map(one, range(len(ms))))
        return time.monotonic() - t0, nb

    def aws_all(self, only=None, tag="all"):
        procs = []
        t0 = time.monotonic()
        for r in range(self.a.hosts):
            out = self.work / f"aws-{tag}-{r}"
            cmd = ["/usr/bin/aws", "s3", "cp", "--recursive", "--only-show-errors",
                   "--endpoint-url", self.hp[r].endpoint,
                   f"s3://{self.bucket}/ckpt/step-1/", str(out)]
            if only:
                cmd += ["--exclude", "*"] + sum((["--include", n] for n in only[r]), [])
            cmd += ["--exclude", ".ckptfs*", "--exclude", "*/.ckptfs*"]
            procs.append(subprocess.Popen(cmd, env=self.rgw.env, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.PIPE))
        for p in procs:
            _, err = p.communicate(timeout=self.a.timeout)
            if p.returncode:
                log(f"aws s3 cp failed: {err.decode()[-400:]}")
        dt = time.monotonic() - t0
        nb = sum(f.stat().st_size for r in range(self.a.hosts)
                 for f in (self.work / f"aws-{tag}-{r}").rglob("*") if f.is_file())
        for r in range(self.a.hosts):
            shutil.rmtree(self.work / f"aws-{tag}-{r}", ignore_errors=True)
        return dt, nb

    def restore(self):
        a = self.a
        self.unmount(self.writers + [self.obs])
        own = {r: list(self.names[r]) + ([".metadata"] if r == 0 else [])
               for r in range(a.hosts)}
        res = {}
        for run in range(a.runs):
            for shape, only in (("all", None), ("own", own)):
                # the reference first, then ckptfs on fresh caches
                sync_drop()
                dt_aws, nb_aws = self.aws_all(only, f"{shape}{run}")
                sync_drop()
                ms = [self.mount(f"r{shape}{run}-{r}", self.hp[r]) for r in range(a.hosts)]
                snap = self.snap()
                dt, nb = self.read_all(ms, only)
                cnt = self.since(snap)
                tot = sum((c["n"] for c in cnt[:a.hosts]), start=__import__("collections").Counter())
                res.setdefault(shape, []).append((dt, nb, dt_aws, nb_aws, tot))
                if shape == "all" and run == a.runs - 1:
                    self.unmount(ms)
                    ms2 = [self.mount(f"r{shape}{run}-{r}", self.hp[r]) for r in range(a.hosts)]
                    snap = self.snap()
                    dt2, nb2 = self.read_all(ms2, None)
                    c2 = sum((c["n"] for c in self.since(snap)[:a.hosts]),
                             start=__import__("collections").Counter())
                    self.row("restore", "all, remounted on the same caches: GETs",
                             c2["GET", "data"], f"{nb2 / MiB / dt2:.0f} MiB/s, "
                             f"requests {json.dumps({t: c2[t] for t in TYPES if c2[t]})}")
                    self.unmount(ms2)
                else:
                    self.unmount(ms)
        for shape, runs in res.items():
            best = min(runs, key=lambda x: x[0])
            best_aws = min(runs, key=lambda x: x[2])
            dt, nb, _, _, tot = best
            dta, nba = best_aws[2], best_aws[3]
            thr, thr_aws = nb / MiB / dt, nba / MiB / dta
            self.row("restore", f"{shape}: ckptfs aggregate", f"{thr:.0f} MiB/s",
                     f"{nb / MiB:.0f} MiB in {dt:.1f} s")
            self.row("restore", f"{shape}: {a.hosts} x aws s3 cp --recursive", f"{thr_aws:.0f} MiB/s",
                     f"{nba / MiB:.0f} MiB in {dta:.1f} s")
            self.row("restore", f"{shape}: ratio ckptfs / aws", f"{thr / thr_aws:.2f}",
                     "target >= 0.9")
            chunks = sum(chunks_of(self.want[n]) for r in range(a.hosts)
                         for n in (own[r] if shape == "own" else self.want))
            self.row("restore", f"{shape}: requests", total(tot),
                     json.dumps({t: tot[t] for t in TYPES if tot[t]}) +
                     f"; GET data {tot['GET', 'data']} for {chunks} 8 MiB chunks read")
        self.json["restore"] = {k: [(x[0], x[1], x[2], x[3]) for x in v] for k, v in res.items()}

    def print_table(self):
        load = os.getloadavg()
        print(f"\nmultihost-bench: {self.a.hosts} hosts, load average "
              f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores "
              "(shared machine: throughput is noisy, compare ratios)")
        w = max([len(r[1]) for r in self.rows] or [1])
        sec = None
        for s, what, v, note in self.rows:
            if s != sec:
                print(f"\n[{s}]")
                sec = s
            print(f"  {what:<{w}}  {str(v):>14}  {note}")
        if self.a.json:
            self.json["rows"] = self.rows
            Path(self.a.json).write_text(json.dumps(self.json, indent=1, default=str))


def chunks_of(size):
    """8 MiB read-cache chunks of a file of size bytes (doc/cache.md)."""
    return max(1, -(-size // (8 * MiB)))


def sync_drop():
    subprocess.run(["sync"], timeout=300)
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=8)
    ap.add_argument("--files", type=int, default=4, help="shards per host")
    ap.add_argument("--file-mib", type=int, default=32)
    ap.add_argument("--part-mib", type=int, default=8, help="ckptfs part_size (default 8)")
    ap.add_argument("--barrier-s", type=float, default=8.0,
                    help="between the last shard's close and .metadata (default 8, "
                         "past the default commit_delay)")
    ap.add_argument("--commit-delay", type=float, default=5.0)
    ap.add_argument("--idle-s", type=float, default=10.0)
    ap.add_argument("--poll-s", type=float, default=15.0)
    ap.add_argument("--marker-s", type=float, default=10.0)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--ckptfs", default=str(HERE.parent / "build" / "ckptfs"))
    ap.add_argument("--workdir", default=os.environ.get("TMPDIR", "/var/tmp"))
    ap.add_argument("--save-only", action="store_true",
                    help="only the save phase (e.g. to compare --barrier-s 0 and "
                         "--commit-delay values)")
    ap.add_argument("--json")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    b = Bench(a)
    try:
        b.start()
        b.save()
        if not a.save_only:
            b.idle_and_poll()
            b.marker()
            b.restore()
    finally:
        b.print_table()
        b.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
