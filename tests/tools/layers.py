#!/usr/bin/python3
"""The shape of src/ (issue 17): layers that point one way, no cycle
between files, no file that does five jobs.

    tests/tools/layers.py [--build DIR] [--max-lines 900]

Checks, printing each violation:
  * includes: a file may include headers of its own folder and of folders
    lower in LAYERS, never of a higher one;
  * calls: the object files of libckptfs.a in DIR (default: build) are
    read with nm; file A depends on file B when A uses a symbol B defines.
    Every strongly connected component of more than one file is a cycle
    (cache.c <-> fetch.c, or a five-file loop through the write path);
  * size: no source file over --max-lines lines.
Exit status 0 when there is none."""

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
# lowest first; folders on one line are peers that may not include each other
LAYERS = [["util"], ["http"], ["s3"], ["proto"], ["verify"], ["cache"], ["commit"], ["fs"],
          ["ctl"], ["daemon"], ["cli"]]
RANK = {d: i for i, ds in enumerate(LAYERS) for d in ds}


def includes():
    bad = []
    for f in sorted(SRC.rglob("*.[ch]")):
        me = f.relative_to(SRC).parts[0]
        for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            m = re.match(r'\s*#\s*include\s+"([^/"]+)/', line)
            if not m:
                continue
            other = m.group(1)
            if other == me or other not in RANK or me not in RANK:
                continue
            if RANK[other] >= RANK[me]:
                bad.append(f"{f.relative_to(REPO)}:{n}: {me} includes {line.strip()} "
                           f"({other} is not below {me})")
    return bad


def objects(build):
    """File -> files whose symbols it uses, from the object files under
    BUILD/src (not the archive: two files may share a basename)."""
    objs = sorted((Path(build) / "src").rglob("*.o"))
    if not objs:
        sys.exit(f"layers.py: no object files under {build}/src (build first, or --build DIR)")
    rel = {str(o): str(o.relative_to(Path(build)))[:-2] + ".c" for o in objs}
    out = subprocess.run(["nm", "-A", "--defined-only", "-g", *rel], capture_output=True,
                         text=True, check=True).stdout
    defined = {}
    for line in out.splitlines():
        m = re.match(r"(.+\.o):\s*[0-9a-f]*\s+[A-Z]\s+(\S+)$", line)
        if m:
            defined.setdefault(m.group(2), rel[m.group(1)])
    out = subprocess.run(["nm", "-A", "-u", *rel], capture_output=True, text=True,
                         check=True).stdout
    edges = {}
    for line in out.splitlines():
        m = re.match(r"(.+\.o):\s+U\s+(\S+)$", line)
        if not m:
            continue
        me, d = rel[m.group(1)], defined.get(m.group(2))
        if d and d != me:
            edges.setdefault(me, set()).add(d)
    return edges


def sccs(edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    nodes = set(edges) | {d for v in edges.values() for d in v}
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=str(REPO / "build"))
    ap.add_argument("--max-lines", type=int, default=900)
    a = ap.parse_args()
    problems = includes()
    for comp in sccs(objects(a.build)):
        problems.append("call cycle: " + " <-> ".join(comp))
    for f in sorted(SRC.rglob("*.[ch]")):
        n = sum(1 for _ in f.open(errors="replace"))
        if n > a.max_lines:
            problems.append(f"{f.relative_to(REPO)}: {n} lines (more than {a.max_lines})")
    for p in problems:
        print(p)
    print(f"layers.py: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
