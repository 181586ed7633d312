#!/usr/bin/python3
"""ckpt-writer.py SRC_DIR DST_DIR: save a checkpoint the way training code
does: mkdir DST_DIR, then for each file of SRC_DIR open(O_TRUNC), strictly
sequential 1 MiB writes, close; no fsync.  The source bytes are read into
memory first (a model's tensors are in memory when it saves), so only the
writes are timed.  Prints the seconds from the first mkdir until the last
close returned, and the wall-clock time (epoch seconds) of that mkdir."""
import os
import sys
import time


def main():
    src, dst = sys.argv[1], sys.argv[2]
    names = sorted(os.listdir(src))
    blobs = []
    for n in names:
        with open(os.path.join(src, n), "rb") as f:
            blobs.append(f.read())
    wall0, t0 = time.time(), time.monotonic()
    os.mkdir(dst)
    for n, b in zip(names, blobs):
        view = memoryview(b)
        with open(os.path.join(dst, n), "wb", buffering=0) as f:
            for i in range(0, len(view), 1 << 20):
                f.write(view[i:i + (1 << 20)])
    print(f"{time.monotonic() - t0:.6f} {wall0:.6f}")


if __name__ == "__main__":
    main()
