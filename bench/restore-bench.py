#!/usr/bin/python3
"""Restore benchmark (issue 13): reading whole checkpoint directories,
listing a large directory, warm and hot reads, through a ckptfs mount and
beside s3fs and rclone, against references measured in the same run.

    bench/restore-bench.py                       # both links, all shapes, 1 run
    bench/restore-bench.py --links wan --shapes small --tools ckptfs
    bench/restore-bench.py --big-mib 8 --ls-objects 1000   # smoke run, ~2 min

A report, never a test: it prints the table (ratios and the targets beside
them) and exits 0 when the measurements ran.  As root (FUSE, drop_caches);
needs Ceph RGW, /usr/bin/aws, python3-boto3, gcc (bench/latency-proxy.c),
s3fs and rclone for their rows (contrib/install-deps.sh).  See
bench/README.md, "Restore benchmark".
"""

import argparse
import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lib_bench  # noqa: E402

BUCKET = "restore"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def sh(argv, timeout, env=None, check=True, **kw):
    p = subprocess.run(argv, timeout=timeout, env=env, capture_output=True, **kw)
    if check and p.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed ({p.returncode}): {p.stderr[-2000:]!r}")
    return p


def drop_caches():
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def timed(argv, timeout, env=None):
    t = time.monotonic()
    sh(argv, timeout, env=env)
    return time.monotonic() - t


def proc_cpu(pid):
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / CLK_TCK
    except (OSError, IndexError):
        return 0.0


def proc_hwm_mib(pid):
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def reset_hwm(pid):
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5\n")
    except OSError:
        pass


class LatencyProxy:
    """bench/latency-proxy in front of RGW; requests() reads its counter."""

    def __init__(self, binary, target_port, work, ttfb_ms, rate_mbps):
        self.stats = work / "proxy.stats"
        self.port = _free_port()
        self.proc = subprocess.Popen(
            [str(binary), "--listen", f"127.0.0.1:{self.port}", "--target",
             f"127.0.0.1:{target_port}", "--ttfb-ms", str(ttfb_ms), "--rate-mbps",
             str(rate_mbps), "--stats", str(self.stats), "--quiet"],
            stdout=subprocess.DEVNULL, stderr=open(work / "proxy.log", "ab"))
        for _ in range(200):
            if self.stats.exists():
                break
            time.sleep(0.02)
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def requests(self):
        before = self.stats.read_text()
        self.proc.send_signal(signal.SIGUSR1)
        for _ in range(200):
            now = self.stats.read_text() if self.stats.exists() else before
            if now != before and "requests=" in now:
                break
            time.sleep(0.01)
        for kv in now.split():
            if kv.startswith("requests="):
                return int(kv.split("=")[1])
        return 0

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


def _free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Tool:
    """One mount of ckptfs, s3fs or rclone with an empty cache."""

    def __init__(self, name, a, rgw, endpoint, work, extra=""):
        self.name = name
        self.mnt = work / f"mnt-{name}"
        self.cache = work / f"cache-{name}"
        shutil.rmtree(self.cache, ignore_errors=True)
        self.mnt.mkdir(exist_ok=True)
        self.cache.mkdir(mode=0o700)
        log = work / f"{name}.log"
        env = dict(rgw.env)
        if name in ("ckptfs", "base"):
            opts = f"cache_dir={self.cache}" + (f",{a.ckptfs_opts}" if a.ckptfs_opts and
                                                name == "ckptfs" else "")
            opts += f",{extra}" if extra else ""
            argv = [a.ckptfs if name == "ckptfs" else a.base, "mount", f"s3://{BUCKET}", str(self.mnt), "-f",
                    "--endpoint", endpoint, "--region", rgw.region, "-o", opts]
        elif name == "s3fs":
            pw = work / "s3fs.passwd"
            pw.write_text(f"{rgw.access_key}:{rgw.secret_key}\n")
            pw.chmod(0o600)
            argv = ["s3fs", BUCKET, str(self.mnt), "-f", "-o",
                    f"url={endpoint},use_path_request_style,endpoint={rgw.region},"
                    f"passwd_file={pw},use_cache={self.cache},dbglevel=warn,"
                    "parallel_count=8,multipart_size=32"]
        else:
            conf = work / "rclone.conf"
            conf.write_text("")
            argv = ["rclone", "mount", f":s3:{BUCKET}", str(self.mnt), "--config", str(conf),
                    "--s3-provider", "Ceph", "--s3-endpoint", endpoint, "--s3-region",
                    rgw.region, "--s3-access-key-id", rgw.access_key,
                    "--s3-secret-access-key", rgw.secret_key, "--vfs-cache-mode", "full",
                    "--cache-dir", str(self.cache), "--log-level", "NOTICE"]
        self.m = lib_bench.BenchMount(argv, self.mnt, log, env, mount_timeout=60)
        self.pid = self.m.proc.pid

    def unmount(self):
        self.m.unmount(timeout=120)
        shutil.rmtree(self.cache, ignore_errors=True)


def measure(tool, argv, timeout, proxy, env=None):
    """Seconds, daemon CPU s, peak RSS MiB, requests (proxy) of argv."""
    reset_hwm(tool.pid)
    cpu0, req0 = proc_cpu(tool.pid), proxy.requests() if proxy else 0
    secs = timed(argv, timeout, env=env)
    cpu = proc_cpu(tool.pid) - cpu0
    reqs = proxy.requests() - req0 if proxy else None
    return secs, cpu, proc_hwm_mib(tool.pid), reqs


def cat_all(d):
    return ["sh", "-c", f'cat "{d}"/* > /dev/null']


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--links", default="loopback,wan")
    ap.add_argument("--shapes", default="big,small,ls")
    ap.add_argument("--tools", default="ckptfs,s3fs,rclone")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--big-files", type=int, default=16)
    ap.add_argument("--big-mib", type=int, default=64)
    ap.add_argument("--small-files", type=int, default=400)
    ap.add_argument("--small-kib", type=int, default=256)
    ap.add_argument("--ls-objects", type=int, default=10000)
    ap.add_argument("--ttfb-ms", type=float, default=30)
    ap.add_argument("--rate-mbps", type=float, default=90)
    ap.add_argument("--ckptfs", default=os.environ.get(
        "CKPTFS_BIN", str(lib_bench.REPO / "build" / "ckptfs")))
    ap.add_argument("--ckptfs-opts", default="")
    ap.add_argument("--base", help="another ckptfs binary measured beside it as tool "
                    "'base' (before/after a change; its rows are named base)")
    ap.add_argument("--op-timeout", type=float, default=900)
    ap.add_argument("--workdir", default=os.environ.get("TMPDIR", "/var/tmp"))
    ap.add_argument("--json")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("restore-bench: run as root (FUSE mounts, drop_caches)")
    tools = [t for t in a.tools.split(",") if t == "ckptfs" or shutil.which(t)]
    if a.base:
        tools.insert(1, "base")
    shapes = a.shapes.split(",")
    work = Path(tempfile.mkdtemp(prefix="restore-bench.", dir=a.workdir))
    ck = work / "ckptfs"
    shutil.copy(a.ckptfs, ck)  # a rebuild meanwhile does not matter
    a.ckptfs = str(ck)
    if a.base:
        shutil.copy(a.base, work / "ckptfs-base")
        a.base = str(work / "ckptfs-base")
    sh(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread", "-o",
        str(work / "latency-proxy"), str(lib_bench.REPO / "bench" / "latency-proxy.c")], 120)
    load0 = os.getloadavg()
    rows, started = [], []
    rgw = proxy = None
    try:
        data = work / "data"
        sets = {}
        if "big" in shapes:
            sets["big"] = (a.big_files, a.big_mib << 20)
        if "small" in shapes:
            sets["small"] = (a.small_files, a.small_kib << 10)
        total = sum(n * s for n, s in sets.values())
        rgw = lib_bench.RGW.start(work / "rgw", work, memstore_bytes=total * 2 + (1 << 30))
        s3 = rgw.client()
        s3.create_bucket(Bucket=BUCKET)
        cp_env = dict(rgw.env)
        cfg16 = work / "aws-config-16"
        cfg16.write_text("[default]\nregion = us-east-1\ns3 =\n"
                         "  max_concurrent_requests = 16\n")
        cp_env["AWS_CONFIG_FILE"] = str(cfg16)
        for shape, (n, size) in sets.items():
            d = data / shape
            d.mkdir(parents=True)
            for i in range(n):
                (d / f"shard-{i:05d}.bin").write_bytes(os.urandom(size))
            sh(["/usr/bin/aws", "--endpoint-url", rgw.endpoint, "s3", "cp", "--recursive",
                "--only-show-errors", str(d), f"s3://{BUCKET}/{shape}/"], a.op_timeout,
               env=cp_env)
        if "ls" in shapes:  # written by another tool: no ckptfs metadata
            with concurrent.futures.ThreadPoolExecutor(32) as ex:
                list(ex.map(lambda i: s3.put_object(Bucket=BUCKET, Key=f"many/obj-{i:06d}",
                                                    Body=b"x"), range(a.ls_objects)))
        print(f"# data in place ({total >> 20} MiB, {a.ls_objects if 'ls' in shapes else 0} "
              "small objects)", file=sys.stderr)
        for link in a.links.split(","):
            if link == "wan":
                proxy = LatencyProxy(work / "latency-proxy", rgw.endpoint.rsplit(":", 1)[1],
                                     work, a.ttfb_ms, a.rate_mbps)
                ep = proxy.endpoint
            else:
                proxy, ep = None, rgw.endpoint
            for run in range(a.runs):
                for shape in [s for s in shapes if s in sets]:
                    # each run starts with another tool: the first after the
                    # CLI's 1 GiB of writes reads slower from this VM's disk
                    k = run % len(tools)
                    bench_dir(a, link, shape, sets[shape], rgw, ep, proxy, cp_env,
                              tools[k:] + tools[:k], work, rows)
                if "ls" in shapes:
                    bench_ls(a, link, rgw, ep, proxy, tools, work, rows)
            if proxy:
                proxy.stop()
                proxy = None
    finally:
        if proxy:
            proxy.stop()
        for t in started:
            t.unmount()
        if rgw:
            rgw.stop()
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    report(rows, a, load0, os.getloadavg(), tools)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


def best(rows, **k):
    v = [r for r in rows if all(r.get(x) == y for x, y in k.items())]
    return min(v, key=lambda r: r["secs"]) if v else None


def add(rows, **r):
    rows.append(r)
    print("# " + " ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}"
                          for k, v in r.items()), file=sys.stderr)


def bench_dir(a, link, shape, nsize, rgw, ep, proxy, cp_env, tools, work, rows):
    n, size = nsize
    dest = work / "dest" / shape
    # reference: aws s3 cp --recursive, 16 concurrent requests, to local disk
    shutil.rmtree(dest, ignore_errors=True)
    drop_caches()
    r0 = proxy.requests() if proxy else 0
    secs = timed(["/usr/bin/aws", "--endpoint-url", ep, "s3", "cp", "--recursive",
                  "--only-show-errors", f"s3://{BUCKET}/{shape}/", str(dest)], a.op_timeout,
                 env=cp_env)
    add(rows, link=link, shape=shape, item="aws s3 cp --recursive (16)", secs=secs,
        bytes=n * size, reqs=proxy.requests() - r0 if proxy else None)
    for name in tools:
        t = Tool(name, a, rgw, ep, work)
        try:
            d = t.mnt / shape
            drop_caches()
            # warm and hot twice: the first warm read follows the cold one,
            # whose 2 GiB of freed pages this VM's disk and memory are
            # still catching up with (bench/README.md)
            for item in ("cold", "warm", "hot", "warm", "hot"):
                if item == "warm":
                    drop_caches()
                secs, cpu, hwm, reqs = measure(t, cat_all(d), a.op_timeout, proxy)
                add(rows, link=link, shape=shape, item=f"{name} {item} cat", secs=secs,
                    cpu=cpu, rss=hwm, bytes=n * size, reqs=reqs)
        finally:
            t.unmount()
        # the references as many times, right after each tool's reads and
        # in the same position (just after a drop_caches), so that both
        # sides meet the same state of the machine
        for _ in range(2):
            local_reference(rows, link, shape, dest, n * size)


def local_reference(rows, link, shape, dest, nbytes):
    drop_caches()
    add(rows, link=link, shape=shape, item="local disk cat", secs=timed(cat_all(dest), 300),
        bytes=nbytes)
    add(rows, link=link, shape=shape, item="page cache cat", secs=timed(cat_all(dest), 300),
        bytes=nbytes)


def bench_ls(a, link, rgw, ep, proxy, tools, work, rows):
    s3 = lib_bench.RGW(rgw.dir, ep, rgw.access_key, rgw.secret_key, rgw.env).client()
    for _ in range(3):  # raw ListObjectsV2 loop (delimiter, 1000 per page)
        t = time.monotonic()
        n = 0
        for page in s3.get_paginator("list_objects_v2").paginate(
                Bucket=BUCKET, Prefix="many/", Delimiter="/"):
            n += len(page.get("Contents", []))
        add(rows, link=link, shape="ls", item="raw ListObjectsV2 loop",
            secs=time.monotonic() - t, bytes=0, reqs=None, objects=n)
    variants = []
    for name in tools:
        variants.append((name, ""))
        if name in ("ckptfs", "base"):  # before/after for both
            variants.append((name, "object_meta=off"))
    # the default is object_meta=auto (metadata hints); without --base, a
    # row that HEADs every object, as before hints (a base binary does)
    if "ckptfs" in tools and not a.base:
        variants.insert(2, ("ckptfs", "object_meta=on"))
    for name, extra in variants:
        t = Tool(name, a, rgw, ep, work, extra)
        try:
            secs, cpu, hwm, reqs = measure(t, ["sh", "-c", f'ls -l "{t.mnt}/many" > /dev/null'],
                                           a.op_timeout, proxy)
            label = f"{name} first ls -l" + (f" ({extra})" if extra else "")
            add(rows, link=link, shape="ls", item=label, secs=secs, cpu=cpu,
                rss=hwm, bytes=0, reqs=reqs)
        finally:
            t.unmount()


TARGETS = {"cold cat": ("aws s3 cp --recursive (16)", 0.9),
           "warm cat": ("local disk cat", 0.9),
           "hot cat": ("page cache cat", 0.9)}


def report(rows, a, load0, load1, tools):
    print(f"# restore-bench: load average {load0[0]:.2f} at start, {load1[0]:.2f} at end; "
          f"{os.cpu_count()} CPUs; best of {a.runs} run(s); wan = {a.ttfb_ms:g} ms to first "
          f"byte, {a.rate_mbps:g} MB/s per connection")
    print("| link | case | row | time | MiB/s | ratio (reference / time) | target | reqs "
          "| daemon CPU s/GiB | peak RSS MiB |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    seen = []
    for r in rows:
        key = (r["link"], r["shape"], r["item"])
        if key not in seen:
            seen.append(key)
    s3fs_cpu = {}
    for link, shape, item in seen:
        b = best(rows, link=link, shape=shape, item=item)
        ref, target = None, ""
        for suffix, (refname, tgt) in TARGETS.items():
            if item.endswith(suffix):
                ref = best(rows, link=link, shape=shape, item=refname)
                target = f"≥ {tgt}×" if item.startswith("ckptfs") else ""
        if "first ls -l" in item:
            ref = best(rows, link=link, shape=shape, item="raw ListObjectsV2 loop")
            target = "≥ 0.83× (≤ 1.2× the time)" if item.startswith("ckptfs") else ""
        ratio = f"{ref['secs'] / b['secs']:.2f}×" if ref else ""
        mibs = f"{b['bytes'] / b['secs'] / 2**20:.0f}" if b.get("bytes") else ""
        gib = b.get("bytes", 0) / 2**30
        cpu = ""
        if b.get("cpu") is not None and gib > 0:
            per = b["cpu"] / gib
            cpu = f"{per:.2f}"
            if item.endswith("cold cat"):
                s3fs_cpu.setdefault((link, shape), {})[item.split()[0]] = per
        rss = f"{b['rss']:.0f}" if b.get("rss") else ""
        reqs = "" if b.get("reqs") is None else str(b["reqs"])
        shape_name = {"big": f"{a.big_files} × {a.big_mib} MiB",
                      "small": f"{a.small_files} × {a.small_kib} KiB",
                      "ls": f"ls -l of {a.ls_objects}"}[shape]
        print(f"| {link} | {shape_name} | {item} | {b['secs']:.2f} s | {mibs} | {ratio} | "
              f"{target} | {reqs} | {cpu} | {rss} |")
    for (link, shape), v in s3fs_cpu.items():
        if "ckptfs" in v and "s3fs" in v and v["s3fs"] > 0:
            print(f"# {link} {shape}: ckptfs daemon CPU per GiB / s3fs's = "
                  f"{v['ckptfs'] / v['s3fs']:.2f} (target ≤ 0.70)")


if __name__ == "__main__":
    main()
