"""Reading through the mount with ordinary tools, compared byte for byte with
what the AWS CLI uploaded."""

import hashlib
import mmap
import os
import random
import stat
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from helpers import det_bytes, local_tree, parse_ls_la, run, sha256_bytes, sha256_file

BIG = 256 << 20  # the large file: 256 MiB


def _files():
    """The tree uploaded under data/: sizes around page and part boundaries,
    nested directories, text and binary."""
    f = {
        "empty.bin": b"",
        "one.bin": b"x",
        "page-1.bin": det_bytes(1, 4095),
        "page.bin": det_bytes(2, 4096),
        "page+1.bin": det_bytes(3, 4097),
        "text/hello.txt": b"hello, world\n",
        "text/lines.txt": b"".join(b"line %06d\n" % i for i in range(100000)),
        "mid/rand-5M.bin": det_bytes(4, (5 << 20) + 17),
        # > 8 MiB: the AWS CLI uploads it as a multipart object
        "mid/rand-20M.bin": det_bytes(5, (20 << 20) + 1),
        "deep/a/b/c/d/leaf.txt": b"deep leaf\n",
        "deep/a/b/sibling.txt": b"sibling\n",
    }
    return f


@pytest.fixture(scope="module")
def data(s3server, tmp_path_factory):
    """A bucket with data/ (uploaded by `aws s3 cp --recursive`) and
    big/rand-256M.bin; the local sources."""
    src = tmp_path_factory.mktemp("src")
    files = _files()
    for rel, body in files.items():
        p = src / "data" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(body)
    big = src / "big" / "rand-256M.bin"
    big.parent.mkdir()
    big.write_bytes(det_bytes(6, BIG))
    b = s3server.new_bucket("read")
    s3server.aws("s3", "cp", "--recursive", "--only-show-errors",
                 str(src / "data"), f"s3://{b}/data/")
    s3server.aws("s3", "cp", "--only-show-errors", str(big), f"s3://{b}/big/rand-256M.bin")
    yield {"bucket": b, "src": src, "files": files, "big": big,
           "big_sha": sha256_file(big)}
    big.unlink()  # pytest keeps the last runs' tmp dirs: do not keep 256 MiB


@pytest.fixture(scope="module")
def mnt(data, module_mounter):
    """One mount of the bucket shared by the tests of this module."""
    return module_mounter(data["bucket"])


def test_ls_la_shows_names_sizes_and_modes(data, mnt):
    out = run(["ls", "-la", "--time-style=+%s", "--quoting-style=literal",
               mnt / "data"]).stdout
    ent = parse_ls_la(out)
    top = {rel.split("/")[0] for rel in data["files"]}
    assert set(ent) - {".", ".."} == top, out
    for name in top:
        mode, _links, user, group, size, _mtime = ent[name]
        if name in data["files"]:
            assert mode.startswith("-rw-r--r--"), (name, mode)
            assert size == len(data["files"][name]), (name, size)
        else:
            assert mode.startswith("drwxr-xr-x"), (name, mode)
        assert user == "root" and group == "root", (name, user, group)
    assert ent["."][0].startswith("d")


def test_stat_of_every_file(data, mnt, s3server):
    for rel, body in data["files"].items():
        st = os.stat(mnt / "data" / rel)
        assert stat.S_ISREG(st.st_mode), rel
        assert stat.S_IMODE(st.st_mode) == 0o644, (rel, oct(st.st_mode))
        assert st.st_size == len(body), rel
        assert (st.st_uid, st.st_gid) == (0, 0), rel
        # du and tar use st_blocks: it must cover the size
        assert st.st_blocks * 512 >= st.st_size, (rel, st.st_blocks)
    # stat(1) agrees
    out = run(["stat", "-c", "%s %a %F", mnt / "data/mid/rand-20M.bin"]).stdout.split()
    assert out == [str((20 << 20) + 1), "644", "regular", "file"]
    out = run(["stat", "-c", "%a %F", mnt / "data/deep/a"]).stdout.strip()
    assert out == "755 directory"


def test_cat_each_file(data, mnt):
    for rel, body in data["files"].items():
        out = run(["cat", mnt / "data" / rel], text=False).stdout
        assert out == body, f"{rel}: {len(out)} bytes read, {len(body)} expected"


def test_sha256sum_of_all_files(data, mnt):
    rels = sorted(data["files"])
    out = run(["sha256sum", *rels], cwd=mnt / "data").stdout
    got = {}
    for line in out.splitlines():
        digest, name = line.split(None, 1)
        got[name.lstrip("*")] = digest
    assert got == {rel: sha256_bytes(data["files"][rel]) for rel in rels}


def test_cp_r_copies_the_tree(data, mnt, tmp_path):
    dst = tmp_path / "copy"
    run(["cp", "-r", mnt / "data", dst])
    files, dirs = local_tree(dst)
    assert files.keys() == data["files"].keys()
    for rel, body in data["files"].items():
        assert files[rel] == body, rel
    assert dirs == {"text", "mid", "deep", "deep/a", "deep/a/b", "deep/a/b/c",
                    "deep/a/b/c/d"}


def test_find_lists_files_and_directories(data, mnt):
    root = mnt / "data"
    files = run(["find", root, "-type", "f"]).stdout.splitlines()
    assert sorted(os.path.relpath(p, root) for p in files) == sorted(data["files"])
    dirs = run(["find", root, "-mindepth", "1", "-type", "d"]).stdout.splitlines()
    assert sorted(os.path.relpath(p, root) for p in dirs) == sorted(
        ["text", "mid", "deep", "deep/a", "deep/a/b", "deep/a/b/c", "deep/a/b/c/d"])
    # find -size and -newer use stat: sizes must be consistent
    small = run(["find", root, "-type", "f", "-size", "-4097c"]).stdout.splitlines()
    assert sorted(os.path.relpath(p, root) for p in small) == sorted(
        rel for rel, b in data["files"].items() if len(b) < 4097)


def test_du_sb_counts_apparent_sizes(data, mnt):
    root = mnt / "data"
    out = run(["du", "-sb", root]).stdout.split()[0]
    expect = sum(len(b) for b in data["files"].values())
    # du -b adds the st_size of directories: take them from the mount
    for dirpath, dirnames, _ in os.walk(root):
        expect += os.lstat(dirpath).st_size
    assert int(out) == expect
    # and per file
    out = run(["du", "-b", root / "mid/rand-5M.bin"]).stdout.split()[0]
    assert int(out) == (5 << 20) + 17


def test_tar_c_archives_identical_content(data, mnt, tmp_path):
    tarball = tmp_path / "data.tar"
    p = run(["tar", "cf", tarball, "-C", mnt, "data"])
    assert p.stderr == "", p.stderr  # e.g. "file changed as we read it"
    out = tmp_path / "x"
    out.mkdir()
    run(["tar", "xf", tarball, "-C", out])
    files, _ = local_tree(out / "data")
    assert files == data["files"]


def test_pread_random_offsets(data, mnt):
    """os.pread at many offsets and lengths, near and past EOF."""
    src = data["files"]["mid/rand-20M.bin"]
    size = len(src)
    rng = random.Random(42)
    cases = [(0, 1), (0, 4096), (1, 4095), (4095, 2), (size - 1, 1),
             (size - 1, 100), (size - 4096, 4096), (size - 10, 1 << 20),
             (size, 1), (size, 4096), (size + 1, 10), (size + (1 << 30), 4096),
             (8 << 20, 1 << 20), ((8 << 20) - 1, 2)]  # part boundary at 8 MiB
    cases += [(rng.randrange(size), rng.choice([1, 7, 512, 4096, 65536, 1 << 20]))
              for _ in range(300)]
    fd = os.open(mnt / "data/mid/rand-20M.bin", os.O_RDONLY)
    try:
        for off, n in cases:
            got = os.pread(fd, n, off)
            assert got == src[off:off + n], f"pread(n={n}, off={off}) wrong"
    finally:
        os.close(fd)


def test_pread_random_offsets_large_file(data, mnt):
    big = data["big"].read_bytes()
    size = len(big)
    rng = random.Random(7)
    cases = [(size - 1, 1), (size - 3, 4096), (size, 1), (size + 5, 5),
             ((1 << 27) - 2, 4), (0, 1 << 20)]
    cases += [(rng.randrange(size), rng.choice([1, 4096, 100000, 1 << 20]))
              for _ in range(200)]
    rng.shuffle(cases)
    fd = os.open(mnt / "big/rand-256M.bin", os.O_RDONLY)
    try:
        for off, n in cases:
            assert os.pread(fd, n, off) == big[off:off + n], f"pread(n={n}, off={off})"
    finally:
        os.close(fd)


def test_parallel_preads_on_one_descriptor(data, mnt):
    """Threads reading disjoint and overlapping ranges through one fd."""
    src = data["files"]["mid/rand-20M.bin"]
    fd = os.open(mnt / "data/mid/rand-20M.bin", os.O_RDONLY)
    rng = random.Random(3)
    cases = [(rng.randrange(len(src)), rng.choice([4096, 131072, 1 << 20]))
             for _ in range(200)]
    try:
        with ThreadPoolExecutor(8) as ex:
            res = list(ex.map(lambda c: os.pread(fd, c[1], c[0]), cases))
    finally:
        os.close(fd)
    for (off, n), got in zip(cases, res):
        assert got == src[off:off + n], f"pread(n={n}, off={off})"


def test_sequential_reads_with_odd_buffer_sizes(data, mnt):
    src = data["files"]["mid/rand-5M.bin"]
    for bufsize in (1, 4097, 131071, 1 << 20, 3 << 20):
        if bufsize == 1:
            with open(mnt / "data/mid/rand-5M.bin", "rb", buffering=0) as f:
                head = b"".join(f.read(1) for _ in range(10000))
            assert head == src[:10000]
            continue
        h = hashlib.sha256()
        with open(mnt / "data/mid/rand-5M.bin", "rb", buffering=0) as f:
            while True:
                b = f.read(bufsize)
                if not b:
                    break
                h.update(b)
        assert h.hexdigest() == sha256_bytes(src), bufsize


def test_seek_and_read(data, mnt):
    src = data["files"]["text/lines.txt"]
    with open(mnt / "data/text/lines.txt", "rb") as f:
        f.seek(-11, os.SEEK_END)
        assert f.read() == src[-11:]
        f.seek(123457)
        assert f.read(20) == src[123457:123477]
        f.seek(0)
        assert f.readline() == b"line 000000\n"


def test_dd_reads_whole_file(data, mnt):
    p = run(["sh", "-c", f"dd if='{mnt}/data/mid/rand-20M.bin' bs=1M status=none | sha256sum"])
    assert p.stdout.split()[0] == sha256_bytes(data["files"]["mid/rand-20M.bin"])


def test_mmap_reads(data, mnt):
    """safetensors-style loading: mmap and slice."""
    src = data["files"]["mid/rand-20M.bin"]
    with open(mnt / "data/mid/rand-20M.bin", "rb") as f:
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            assert len(mm) == len(src)
            rng = random.Random(5)
            for _ in range(100):
                off = rng.randrange(len(src))
                assert mm[off:off + 8192] == src[off:off + 8192], off
            assert mm[-100:] == src[-100:]
            assert sha256_bytes(mm[:]) == sha256_bytes(src)


def test_empty_and_tiny_files(data, mnt):
    assert (mnt / "data/empty.bin").read_bytes() == b""
    assert os.stat(mnt / "data/empty.bin").st_size == 0
    assert (mnt / "data/one.bin").read_bytes() == b"x"
    with open(mnt / "data/one.bin", "rb") as f:
        assert f.read(100) == b"x"
        assert f.read(100) == b""


@pytest.mark.timeout(240)
def test_two_processes_read_large_file_concurrently(data, mnt):
    """Two processes read the 256 MiB file whole at the same time (a cold
    read for at least the first); both see exactly the source."""
    path = str(mnt / "big/rand-256M.bin")
    procs = [subprocess.Popen(["sha256sum", path], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=200)
        assert p.returncode == 0, err
        outs.append(out.split()[0])
    assert outs == [data["big_sha"]] * 2
    assert os.stat(path).st_size == BIG


def test_whole_large_file_read_after_partial_reads(data, mnt):
    """After random reads, a full sequential read (cp) is still exact."""
    fd = os.open(mnt / "big/rand-256M.bin", os.O_RDONLY)
    try:
        os.pread(fd, 4096, BIG - 4096)
        os.pread(fd, 4096, BIG // 2)
    finally:
        os.close(fd)
    out = run(["sha256sum", mnt / "big/rand-256M.bin"], timeout=200).stdout.split()[0]
    assert out == data["big_sha"]


def test_mtime_equals_last_modified(data, mnt, s3server):
    for rel in ("one.bin", "mid/rand-20M.bin", "deep/a/b/c/d/leaf.txt"):
        lm = s3server.head(data["bucket"], f"data/{rel}")["LastModified"].timestamp()
        st = os.stat(mnt / "data" / rel)
        assert abs(st.st_mtime - lm) <= 1.0, (rel, st.st_mtime, lm)


def test_mount_of_a_prefix(data, mount):
    """s3://bucket/data/mid shows that prefix's contents at the root."""
    for prefix in ("data/mid", "data/mid/"):
        m = mount(data["bucket"], prefix=prefix)
        assert sorted(os.listdir(m.path)) == ["rand-20M.bin", "rand-5M.bin"]
        assert (m / "rand-5M.bin").read_bytes() == data["files"]["mid/rand-5M.bin"]
        assert not (m / "data").exists()


def test_mount_of_a_deep_prefix(data, mount):
    m = mount(data["bucket"], prefix="data/deep/a/b")
    assert sorted(os.listdir(m.path)) == ["c", "sibling.txt"]
    assert (m / "c/d/leaf.txt").read_bytes() == b"deep leaf\n"
