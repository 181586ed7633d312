#!/usr/bin/python3
"""The shape of src/ (issue 17): layers that point one way, no cycle
between files, no file that does five jobs.

    tests/tools/layers.py [--build DIR] [--max-lines 900]

Checks, printing each violation:
  * includes: a file may include headers of its own folder and of folders
    lower in LAYERS, never of a higher one;
  * cycles between files, in the whole tree and inside each folder.  File
    A.c depends on file B.c when
      - A calls a function of B (or uses its data): the object files of
        libckptfs.a in DIR (default: build) are read with nm, A uses a
        symbol B defines;
      - A names B's header in an #include: B.h, or B-internal.h (a header
        is B's when it is named after B.c; the includes of A's own A.h
        count as A's; a header named after no .c file, like fs/ctx.h,
        holds shared types and belongs to no file).
    Every strongly connected component of more than one file is a cycle
    (cache.c <-> fetch.c, or a loop through a header that one file owns
    and many use); a cycle only through headers is printed as a header
    cycle;
  * size: no source file over --max-lines lines, no function over
    --max-function lines (from the line with its name to its closing
    brace).
Exit status 0 when there is none.  --order prints each folder's files in
layers, lowest first (a file depends only on files in lower layers)."""

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


INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"')


def owner(header):
    """The .c file a header (path relative to src/) belongs to, or None."""
    stem = re.sub(r"(-internal)?\.h$", "", header)
    c = SRC / (stem + ".c")
    return str(c.relative_to(REPO)) if c.exists() else None


def include_edges():
    """File -> files whose headers it includes (see the top)."""
    edges = {}
    for c in sorted(SRC.rglob("*.c")):
        me = str(c.relative_to(REPO))
        own = c.with_suffix(".h")
        deps = set()
        for f in (c, own) if own.exists() else (c,):
            for line in f.read_text(errors="replace").splitlines():
                m = INCLUDE.match(line)
                o = owner(m.group(1)) if m else None
                if o and o != me:
                    deps.add(o)
        if deps:
            edges[me] = deps
    return edges


def functions(f):
    """(name, first line, lines) of each function defined in C file f: in
    the project's style (.clang-format) a body opens with a '{' alone at
    column 0 and closes with a '}' at column 0; the function starts at the
    line above the '{' that names it."""
    out = []
    lines = f.read_text(errors="replace").splitlines()
    n = 0
    while n < len(lines):
        if lines[n].rstrip() != "{":
            n += 1
            continue
        start = n - 1
        while start > 0 and not re.match(r"[A-Za-z_].*\(", lines[start]):
            start -= 1
        m = re.search(r"([A-Za-z_]\w*)\s*\(", lines[start])
        end = n + 1
        while end < len(lines) and not lines[end].startswith("}"):
            end += 1
        out.append((m.group(1) if m else "?", start + 1, end - start + 1))
        n = end + 1
    return out


def order(edges):
    """Each folder's files in layers, lowest first (files in a cycle share
    a layer)."""
    files = sorted(str(c.relative_to(REPO)) for c in SRC.rglob("*.c"))
    level = {}

    def lvl(f, path=()):
        if f in level:
            return level[f]
        if f in path:
            return 0
        level[f] = max((lvl(d, path + (f,)) + 1 for d in edges.get(f, ())
                        if os.path.dirname(d) == os.path.dirname(f)), default=0)
        return level[f]
    out = []
    for d in sorted({os.path.dirname(f) for f in files}):
        mine = [f for f in files if os.path.dirname(f) == d]
        top = max(lvl(f) for f in mine)
        out.append(d + "/")
        for i in range(top + 1):
            out.append(f"  {i}: " + " ".join(os.path.basename(f) for f in mine
                                             if lvl(f) == i))
    return out


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
    ap.add_argument("--max-function", type=int, default=120)
    ap.add_argument("--order", action="store_true")
    a = ap.parse_args()
    problems = includes()
    calls, incl = objects(a.build), include_edges()
    both = {f: set(calls.get(f, ())) | set(incl.get(f, ())) for f in set(calls) | set(incl)}
    if a.order:
        print("\n".join(order(both)))
    call_cycles = {" <-> ".join(c) for c in sccs(calls)}
    for comp in sccs(both):
        text = " <-> ".join(comp)
        if text in call_cycles:
            problems.append("call cycle: " + text)
        else:
            problems.append("header cycle: " + text)
    for f in sorted(SRC.rglob("*.c")):
        for name, line, n in functions(f):
            if n > a.max_function:
                problems.append(f"{f.relative_to(REPO)}:{line}: {name}() {n} lines "
                                f"(more than {a.max_function})")
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
