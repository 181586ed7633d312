#!/usr/bin/python3
"""Turns bench/read-bench.sh's raw results (results.tsv) into the table of
ratios and targets it prints, and the same as JSON (--json).

Input columns (tab-separated, one line per measurement run):
  link object item run seconds bytes cpu_s hwm_kib requests connections status
status is ok, na:REASON or error:REASON.  Settings come from BENCH_* variables.
"""
import json
import os
import sys
from collections import OrderedDict, defaultdict

MIB = 1 << 20
GIB = 1 << 30

TARGETS = {
    "cold": (">=", 0.95),
    "cpu": ("<=", 0.70),
    "warm": (">=", 0.90),
    "hot": (">=", 0.90),
    "rss": ("<=", 100.0),
}
TOOLS = ("ckptfs", "s3fs", "rclone")


def fnum(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def load(path):
    runs = defaultdict(list)
    with open(path) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if len(p) < 11:
                continue
            link, obj, item, run, secs, nbytes, cpu, hwm, reqs, conns, status = p[:11]
            srv = p[11] if len(p) > 11 else ""
            runs[(link, obj, item)].append({
                "run": run,
                "seconds": fnum(secs),
                "bytes": int(nbytes) if nbytes else None,
                "cpu_s": fnum(cpu),
                "peak_rss_kib": int(hwm) if hwm else None,
                "requests": int(reqs) if reqs else None,
                "connections": int(conns) if conns else None,
                "server_cpu_s": fnum(srv),
                "status": status,
            })
    return runs


class Agg:
    """Aggregate of the runs of one measurement: best time, mean CPU, max RSS."""

    def __init__(self, runs):
        self.runs = runs or []
        ok = [r for r in self.runs if r["status"] == "ok" and r["seconds"] is not None]
        self.ok = bool(ok)
        if ok:
            best = min(ok, key=lambda r: r["seconds"])
            self.seconds = best["seconds"]
            self.bytes = best["bytes"]
            self.requests = best["requests"]
            self.connections = best["connections"]
            self.server_cpu = best["server_cpu_s"]
            cpus = [r["cpu_s"] for r in ok if r["cpu_s"] is not None]
            self.cpu = sum(cpus) / len(cpus) if cpus else None
            rss = [r["peak_rss_kib"] for r in ok if r["peak_rss_kib"]]
            self.rss_mib = max(rss) / 1024 if rss else None
            self.status = "ok"
        else:
            self.seconds = self.cpu = self.rss_mib = self.requests = self.connections = None
            self.server_cpu = None
            self.bytes = self.runs[0]["bytes"] if self.runs else None
            st = [r["status"] for r in self.runs if r["status"] != "ok"]
            self.status = st[0] if st else "na:not measured"

    @property
    def mibs(self):
        if self.ok and self.bytes and self.seconds:
            return self.bytes / MIB / self.seconds
        return None

    @property
    def cpu_per_gib(self):
        if self.ok and self.cpu is not None and self.bytes:
            return self.cpu / (self.bytes / GIB)
        return None

    def why(self):
        s = self.status
        if s.startswith("na:"):
            return "n/a (%s)" % s[3:]
        if s.startswith("error:"):
            return "error (%s)" % s[6:]
        return "n/a"


def verdict(kind, value):
    if kind not in TARGETS:
        return "", "-"
    op, t = TARGETS[kind]
    tgt = "%s %s" % ("≥" if op == ">=" else "≤", ("%.0f MiB" % t) if kind == "rss" else ("%.2f×" % t))
    if value is None:
        return tgt, "n/a"
    ok = value >= t if op == ">=" else value <= t
    return tgt, "PASS" if ok else "MISS"


def main():
    env = os.environ
    runs = load(env["BENCH_RESULTS"])
    links = env.get("BENCH_LINKS", "loopback wan").split()
    dir_key = env.get("BENCH_DIR_KEY", "ckpt")
    objs = []
    for (link, obj, item) in runs:
        if obj not in objs and obj != dir_key:
            objs.append(obj)
    size = {}
    for (link, obj, item), rs in runs.items():
        if rs and rs[0]["bytes"]:
            size[obj] = rs[0]["bytes"]
    objs.sort(key=lambda o: size.get(o, 0))

    def A(link, obj, item):
        return Agg(runs.get((link, obj, item)))

    rows = []

    def row(link, obj, meas, agg=None, *, tool=None, kind=None, ratio=None, ref="",
            value=None, unit="s", mibs=None, note=None, info=False):
        timed = unit == "s"
        if agg is not None and value is None and unit == "s":
            value = agg.seconds
        if agg is not None and mibs is None and unit == "s":
            mibs = agg.mibs
        tgt, res = verdict(kind, ratio if kind != "rss" else value) if kind else ("", "-")
        if info:
            tgt, res = "", "-"
        if agg is not None and not agg.ok:
            res = "n/a" if kind and not info else "-"
        text_note = note
        if agg is not None and not agg.ok:
            text_note = agg.why()
        rows.append(OrderedDict(
            link=link, object=obj, measurement=meas, tool=tool, value=value, unit=unit,
            mib_s=mibs, ratio=ratio, reference=ref, target=tgt, result=res,
            requests=agg.requests if agg is not None and timed else None,
            connections=agg.connections if agg is not None and timed else None,
            server_cpu_s=agg.server_cpu if agg is not None and timed else None,
            note=text_note,
            runs=agg.runs if agg is not None else [],
        ))

    def ratio_of(ref_secs, agg):
        if ref_secs and agg.ok and agg.seconds:
            return ref_secs / agg.seconds
        return None

    # local references
    for obj in objs:
        row("local", obj, "disk cat, page cache dropped (local copy)", A("local", obj, "ref:disk-cat"))
        row("local", obj, "page-cache cat (local copy)", A("local", obj, "ref:pagecache-cat"))

    for link in links:
        for obj in objs + [dir_key]:
            label = obj if obj != dir_key else "%s/ (%s)" % (dir_key, env.get("BENCH_DIR_DESC", ""))
            # raw references
            raws = [(k.split(":N")[1], A(link, obj, k)) for (l, o, k) in runs
                    if l == link and o == obj and k.startswith("raw:N")]
            raws.sort(key=lambda x: int(x[0]))
            best = min((a for _, a in raws if a.ok), key=lambda a: a.seconds, default=None)
            best_s = best.seconds if best else None
            what = "ranged GETs" if obj != dir_key else "objects at a time"
            for n, a in raws:
                row(link, label, "raw curl, %s parallel %s" % (n, what), a,
                    ratio=ratio_of(best_s, a), ref="best raw")
            # cold reads
            for tool in TOOLS:
                items = [("cold-cat", "cold cat")] if obj == dir_key else \
                        [("cold-cat", "cold cat"), ("cold-dd", "cold dd bs=1M")]
                for item, what in items:
                    a = A(link, obj, "%s:%s" % (tool, item))
                    if not a.runs:
                        continue
                    row(link, label, "%s %s" % (tool, what), a, tool=tool, kind="cold",
                        ratio=ratio_of(best_s, a), ref="best raw", info=tool != "ckptfs")
            if obj == dir_key:
                continue
            # CPU per GiB of the cold cat, vs s3fs
            s3 = A(link, obj, "s3fs:cold-cat").cpu_per_gib
            for tool in TOOLS:
                a = A(link, obj, "%s:cold-cat" % tool)
                if not a.runs:
                    continue
                c = a.cpu_per_gib
                r = c / s3 if c is not None and s3 else None
                row(link, label, "%s daemon CPU per GiB (cold cat)" % tool, a, tool=tool,
                    kind="cpu", value=c, unit="CPU s/GiB", ratio=r, ref="s3fs CPU/GiB",
                    info=tool != "ckptfs")
            for tool in TOOLS:
                a = A(link, obj, "%s:cold-cat" % tool)
                if not a.runs:
                    continue
                row(link, label, "%s peak RSS (cold cat)" % tool, a, tool=tool, kind="rss",
                    value=a.rss_mib, unit="MiB", info=tool != "ckptfs")
            # warm: page cache dropped, from the tool's own cache
            cf = A(link, obj, "ckptfs:cachefile-cat")
            disk = A("local", obj, "ref:disk-cat")
            if cf.runs:
                row(link, label, "ckptfs cache file cat (warm reference)", cf)
            for tool in TOOLS:
                a = A(link, obj, "%s:warm-cat" % tool)
                if not a.runs:
                    continue
                if tool == "ckptfs":
                    row(link, label, "ckptfs warm cat", a, tool=tool, kind="warm",
                        ratio=ratio_of(cf.seconds if cf.ok else None, a), ref="cache file cat")
                else:
                    row(link, label, "%s warm cat" % tool, a, tool=tool, kind="warm",
                        ratio=ratio_of(disk.seconds if disk.ok else None, a),
                        ref="local disk cat", info=True)
            # hot: page cache kept
            pc = A("local", obj, "ref:pagecache-cat")
            for tool in TOOLS:
                a = A(link, obj, "%s:hot-cat" % tool)
                if not a.runs:
                    continue
                row(link, label, "%s hot cat (page cache kept)" % tool, a, tool=tool, kind="hot",
                    ratio=ratio_of(pc.seconds if pc.ok else None, a), ref="page-cache cat",
                    info=tool != "ckptfs")

    # ---- print
    def fmt(v, nd=2):
        return "" if v is None else ("%.*f" % (nd, v))

    hdr = ["link", "object", "measurement", "value", "unit", "MiB/s", "ratio", "vs", "target",
           "result", "reqs", "srv CPU"]
    table = []
    for r in rows:
        val = fmt(r["value"], 0 if r["unit"] == "MiB" else (3 if r["unit"] == "s" else 2))
        if r["note"] and r["value"] is None:
            val = r["note"]
        table.append([r["link"], r["object"], r["measurement"], val,
                      r["unit"] if r["value"] is not None else "", fmt(r["mib_s"], 0),
                      fmt(r["ratio"]) + ("×" if r["ratio"] is not None else ""),
                      r["reference"] if r["ratio"] is not None else "", r["target"], r["result"],
                      "" if r["requests"] is None else str(r["requests"]),
                      fmt(r["server_cpu_s"])])
    widths = [max(len(hdr[i]), *(len(t[i]) for t in table)) if table else len(hdr[i])
              for i in range(len(hdr))]
    right = {3, 5, 6, 10, 11}

    def line(cells):
        out = []
        for i, c in enumerate(cells):
            out.append(c.rjust(widths[i]) if i in right else c.ljust(widths[i]))
        return "  ".join(out).rstrip()

    versions = {}
    try:
        with open(env.get("BENCH_VERSIONS", "")) as f:
            for l in f:
                k, _, v = l.strip().partition("=")
                if k:
                    versions[k] = v
    except OSError:
        pass

    print()
    print("ckptfs read benchmark — %s runs per row (best time, mean CPU, highest RSS); "
          "wan = proxy with %s ms TTFB per request, %s MB/s per connection"
          % (env.get("BENCH_RUNS"), env.get("BENCH_TTFB"), env.get("BENCH_RATE")))
    print("versions: " + ", ".join("%s %s" % kv for kv in versions.items()))
    print("load average at start %s, at end %s; ckptfs cache_dir: %s; s3fs -o %s; took %s s"
          % (env.get("BENCH_LOAD_START"), env.get("BENCH_LOAD_END"),
             env.get("BENCH_CKPTFS_CACHE"), env.get("BENCH_S3FS_OPTS"),
             env.get("BENCH_ELAPSED")))
    print("ratio: cold = best raw curl time / time; CPU = per GiB / s3fs's; warm = cache-file "
          "cat time / time; hot = page-cache cat time / time;")
    print("reqs = HTTP requests seen by the WAN proxy during the read; srv CPU = CPU seconds of "
          "radosgw + OSD + monitor during the read")
    print()
    print(line(hdr))
    print(line(["-" * w for w in widths]))
    prev = None
    for r, t in zip(rows, table):
        key = (r["link"], r["object"])
        if prev is not None and key != prev:
            print()
        prev = key
        print(line(t))
    print()
    misses = [r for r in rows if r["result"] == "MISS"]
    if misses:
        print("missed targets:")
        for r in misses:
            if r["unit"] == "MiB":
                print("  %s %s %s: %.0f MiB, target %s" % (r["link"], r["object"],
                                                          r["measurement"], r["value"], r["target"]))
            else:
                print("  %s %s %s: %.2f×, target %s" % (r["link"], r["object"],
                                                       r["measurement"], r["ratio"], r["target"]))
        print()

    out = env.get("BENCH_JSON")
    if out:
        doc = OrderedDict(
            benchmark="ckptfs read",
            settings=OrderedDict(
                runs=int(env.get("BENCH_RUNS", "0")), ttfb_ms=float(env.get("BENCH_TTFB", "0")),
                rate_MBps=float(env.get("BENCH_RATE", "0")), links=links,
                ckptfs_cache_dir=env.get("BENCH_CKPTFS_CACHE"),
                s3fs_opts=env.get("BENCH_S3FS_OPTS"), directory=env.get("BENCH_DIR_DESC"),
                load_start=env.get("BENCH_LOAD_START"), load_end=env.get("BENCH_LOAD_END"),
                elapsed_s=int(env.get("BENCH_ELAPSED", "0"))),
            versions=versions,
            targets={k: {"op": op, "value": v} for k, (op, v) in TARGETS.items()},
            rows=rows,
        )
        with open(out, "w") as f:
            json.dump(doc, f, indent=1, ensure_ascii=False)
            f.write("\n")
        print("JSON written to %s" % out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
