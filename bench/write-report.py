#!/usr/bin/python3
"""Table of bench/write-bench.sh (reads the environment it exports)."""
import os

rows = {}
per_run = {}  # (tool, what) -> {run: seconds}
for line in open(os.environ["BENCH_RESULTS"]):
    tool, what, run, secs, status = (line.rstrip("\n").split("\t") + [""] * 5)[:5]
    r = rows.setdefault((tool, what), {"best": None, "status": []})
    if status == "ok" and secs:
        s = float(secs)
        r["best"] = s if r["best"] is None else min(r["best"], s)
        per_run.setdefault((tool, what), {})[run] = s
    else:
        r["status"].append(status)
total = int(os.environ["BENCH_TOTAL"])


def best(t, w):
    return rows.get((t, w), {}).get("best")


def row(label, t, w, ref, refname):
    r = rows.get((t, w))
    if r is None:
        return
    b = r["best"]
    if b is None:
        print(f"{label:<42} {'n/a':>9} {'':>7} {'':>7}  {'; '.join(sorted(set(r['status'])))}")
        return
    ratio = f"{ref / b:.2f}x" if ref and b > 0 else ""
    print(f"{label:<42} {b:9.3f} {total / b / 2**20:7.0f} {ratio:>7}  {refname}")


print(f"write benchmark: {os.environ['BENCH_DESC']}, best of {os.environ['BENCH_RUNS']} run(s)")
for line in open(os.environ["BENCH_VERSIONS"]):
    print("  " + line.strip())
print()
print(f"{'row':<42} {'seconds':>9} {'MiB/s':>7} {'ratio':>7}  ratio =")
ref_close, ref_raw = best("local", "close"), best("raw", "committed")
row("local disk: close returned", "local", "close", None, "(reference)")
row("local disk: close + sync", "local", "close+sync", None, "")
row("raw aws s3 cp --recursive: listed", "raw", "committed", None, "(reference)")
for t in ("ckptfs", "s3fs", "rclone"):
    row(f"{t}: close returned", t, "close", ref_close, "local close time / this")
    row(f"{t}: committed (all objects listed)", t, "committed", ref_raw, "raw upload time / this")
print()
# the machine's own write speed drifts between runs (dirty-page throttling,
# the server's memory): each run's ratio against the reference measured in
# that same run, and their median
print("per run (reference of the same run / this):")
for t in ("ckptfs", "s3fs", "rclone"):
    for w, ref in (("close", "local"), ("committed", "raw")):
        mine, refs = per_run.get((t, w), {}), per_run.get((ref, w if ref == "raw" else "close"), {})
        rs = [refs[k] / mine[k] for k in sorted(mine, key=int) if k in refs and mine[k] > 0]
        if rs:
            med = sorted(rs)[len(rs) // 2] if len(rs) % 2 else \
                sum(sorted(rs)[len(rs) // 2 - 1:len(rs) // 2 + 1]) / 2
            print(f"  {t + ' ' + w:<24} " + " ".join(f"{x:.2f}x" for x in rs) + f"   median {med:.2f}x")
print()
print("1.00x = as fast as the reference, below 1 = slower.  Targets (DESIGN.md):"
      " ckptfs close at local-disk speed; committed close to the raw upload.")
print(f"rclone: --vfs-cache-mode writes {os.environ['BENCH_RCLONE_ARGS']}")
