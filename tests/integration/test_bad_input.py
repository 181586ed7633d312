"""Hostile and careless input (issue 23, point 9): the classes of the
bad-input suite that no other file covered.  The whole suite is the
`bad_input` marker (`pytest -m bad_input tests/integration`; the table of
classes and their tests is in tests/integration/README.md).

- Keys no path can be: control characters, a 300-byte segment, 200 levels
  of nesting: the mount lists and reads its neighbours, shows no name a
  path cannot hold, and a walk of it completes.
- Secrets: the secret key is in none of the daemon's argv, its log (debug
  level), `ckptfs status`, the metrics, nor any file under its cache
  directory (journal, index, cached data) after a save and a read.
- The control socket: another user cannot talk to it, and garbage on it
  (binary bytes, a line that is not JSON, an unknown command, a request of
  1 MiB) gets an error or a close, never a dead or stuck daemon.
- `allow_other`: the file modes decide what another user may read, the
  same before and after a remount.
- 1 000 files open at once, written, closed together and committed.
- A corrupted cache index: refused at mount with the file named, or
  rebuilt; never wrong bytes.
- A malformed server reply (an HTTP 200 whose body is not S3 XML): the
  mount fails within seconds with a message, nothing hangs or crashes.
"""

import http.server
import json
import os
import resource
import socket
import stat
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pytest

import helpers
from helpers import (CKPTFS_BIN, ckptfs_status, ckptfs_sync, det_bytes, run,
                     s3_sizes)

pytestmark = pytest.mark.bad_input

NOBODY = 65534


def _as(uid, cmd):
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
            *[str(c) for c in cmd]]


# --------------------------------------------------------------------------
# Keys no path can be

SEG300 = "s" * 300
DEEP = "/".join(["d"] * 200)
CONTROL = ["tab\tb", "nl\nc", "cr\rd", "del\x7fe"]


def test_control_characters_long_segments_and_deep_nesting(s3server, mount):
    b = s3server.new_bucket("hostile-keys")
    items = {f"k/{n}": n.encode() for n in CONTROL}
    items.update({
        f"k/{SEG300}": b"300-byte name",
        f"k/{SEG300}/f": b"under a 300-byte name",
        f"k/{'é' * 150}": b"300 bytes of UTF-8",
        f"k/deep/{DEEP}/leaf.txt": b"200 levels down",
        "k/ok.txt": b"ok",
    })
    s3server.put_many(b, items.items())
    m = mount(b)
    names = os.listdir(m / "k")
    assert "ok.txt" in names and "deep" in names, names
    for n in names:
        assert n and "/" not in n and "\0" not in n and len(n.encode()) <= 255, repr(n)
    assert SEG300 not in names and "é" * 150 not in names, names
    for n in CONTROL:  # shown as they are, or left out: never mangled
        if n in names:
            assert (m / "k" / n).read_bytes() == n.encode(), repr(n)
    assert (m / "k/ok.txt").read_bytes() == b"ok"
    leaf = m / "k/deep" / DEEP / "leaf.txt"
    assert leaf.read_bytes() == b"200 levels down"
    walked = run(["find", m / "k"], timeout=60).stdout
    assert walked.count("/d") >= 200 and "leaf.txt" in walked, walked[-300:]
    assert (m / "k/ok.txt").read_bytes() == b"ok", "the mount died on the walk"


def test_a_key_with_a_c0_control_character_leaves_the_bucket_mountable(s3server, mount):
    b = s3server.new_bucket("ctl-key")
    s3server.put_many(b, {"k/ctl\x01a": b"x", "k/ok.txt": b"ok"}.items())
    m = mount(b)
    assert (m / "k/ok.txt").read_bytes() == b"ok"


# --------------------------------------------------------------------------
# Secrets


def _secret_pieces(sk):
    return [sk[i:i + 12] for i in range(len(sk) - 11)]


def _has_secret(data, sk):
    if isinstance(data, str):
        data = data.encode(errors="replace")
    return any(p.encode() in data for p in _secret_pieces(sk))


@pytest.mark.timeout(120)
def test_secret_key_is_in_no_argv_log_status_metrics_or_cache_file(
        s3server, bucket, mount, tmp_path):
    sk = s3server.secret_key
    s3server.put(bucket, "in/read.bin", det_bytes(1, 300 * 1024))
    cdir = tmp_path / "cache"
    m = mount(bucket, extra_args=("-d",),
              options=(f"cache_dir={cdir}", "metrics=127.0.0.1:0", "commit_delay=600"))
    os.makedirs(m / "out/ckpt")
    (m / "out/ckpt/w.bin").write_bytes(det_bytes(2, 200 * 1024))
    assert (m / "in/read.bin").read_bytes() == det_bytes(1, 300 * 1024)
    ckptfs_sync(m)
    for pid in m.pids():
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            assert not _has_secret(f.read(), sk), f"the secret key in argv of {pid}"
    st = run([CKPTFS_BIN, "status", m.path]).stdout
    st_json = run([CKPTFS_BIN, "status", m.path, "--json"]).stdout
    assert not _has_secret(st + st_json, sk), "the secret key in ckptfs status"
    url = json.loads(st_json)["metrics_endpoint"]
    with urllib.request.urlopen(url, timeout=10) as r:
        assert not _has_secret(r.read(), sk), "the secret key in the metrics"
    files = [p for p in cdir.rglob("*") if p.is_file()]
    assert files, "no cache files"
    for p in files:
        assert not _has_secret(p.read_bytes(), sk), f"the secret key in {p}"
    assert not m.unmount()
    assert not _has_secret(m.log_text(), sk), "the secret key in the log"


# --------------------------------------------------------------------------
# The control socket


def _sock_of(m):
    st = ckptfs_status(m)
    return st.get("socket") or str(_default_sock(m.path))


def _default_sock(mountpoint):
    import hashlib
    real = os.path.realpath(mountpoint)
    return Path("/run/ckptfs") / (hashlib.sha256(real.encode()).hexdigest()[:32] + ".sock")


def _talk(path, data, timeout=10):
    """Sends data on a new connection to the socket at path; returns what
    came back before the daemon closed it (or the timeout)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(str(path))
    got = b""
    try:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        s.close()
    return got


@pytest.mark.timeout(90)
def test_control_socket_refuses_other_users_and_survives_garbage(s3server, bucket, mount):
    m = mount(bucket)
    pid = ckptfs_status(m)["pid"]
    sock = _default_sock(m.path)
    assert sock.exists(), sock
    # another user cannot connect (or is answered with a refusal only)
    p = run(_as(NOBODY, ["/usr/bin/python3", "-c",
                         "import socket,sys\n"
                         "s=socket.socket(socket.AF_UNIX)\n"
                         "try:\n"
                         "    s.connect(sys.argv[1])\n"
                         "except OSError as e:\n"
                         "    print('refused', e); sys.exit(0)\n"
                         "s.sendall(b'{\"cmd\":\"status\"}\\n'); s.settimeout(10)\n"
                         "print(s.recv(65536).decode(errors='replace'))\n",
                         sock]), check=False)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("refused") or '"error"' in p.stdout, p.stdout
    assert '"pid"' not in p.stdout and "bytes" not in p.stdout, p.stdout
    # garbage: each gets an error or a close, the daemon answers after
    for junk in (b"\x00\xff\xfe garbage \x01\x02\n",
                 b"{not json\n",
                 b'{"cmd":"no-such-command"}\n',
                 b'["status"]\n',
                 b'{"cmd":"drop","id":"x"}\n',
                 b"x" * (1 << 20)):
        got = _talk(sock, junk)
        for line in got.splitlines():
            assert "error" in json.loads(line), (junk[:40], got[:200])
        assert ckptfs_status(m)["pid"] == pid, f"after {junk[:40]!r}"
    assert m.proc.poll() is None, m.log_tail()


# --------------------------------------------------------------------------
# allow_other


@pytest.fixture
def public_dir():
    d = tempfile.mkdtemp(prefix="ckptfs-pub-", dir="/tmp")
    os.chmod(d, 0o755)
    yield Path(d)
    subprocess.run(["rm", "-rf", d], check=False)


@pytest.mark.timeout(90)
def test_allow_other_keeps_file_modes_across_a_remount(public_dir, s3server, bucket, mount):
    mp = public_dir / "m"
    mp.mkdir()
    opts = ("allow_other", f"cache_dir={public_dir / 'cache'}")
    m = mount(bucket, mountpoint=mp, options=opts)
    (m / "private.bin").write_bytes(b"root only")
    (m / "shared.bin").write_bytes(b"for everyone")
    os.chmod(m / "private.bin", 0o600)
    os.chmod(m / "shared.bin", 0o644)

    def seen_by_nobody():
        out = {}
        for n in ("private.bin", "shared.bin"):
            p = run(_as(NOBODY, ["cat", m.path / n]), check=False)
            out[n] = p.stdout if p.returncode == 0 else "denied"
        return out

    want = {"private.bin": "denied", "shared.bin": "for everyone"}
    assert seen_by_nobody() == want
    ckptfs_sync(m)
    assert not m.unmount()
    m = mount(bucket, mountpoint=mp, options=opts)
    assert stat.S_IMODE(os.stat(m / "private.bin").st_mode) == 0o600
    assert seen_by_nobody() == want, "another user's access changed at the remount"
    p = run(_as(NOBODY, ["sh", "-c", f"echo x > {m.path / 'shared.bin'}"]), check=False)
    assert p.returncode != 0, "another user wrote a 0644 file of root's"
    assert (m / "shared.bin").read_bytes() == b"for everyone"


# --------------------------------------------------------------------------
# Many open files

N_OPEN = 1000


@pytest.mark.timeout(180)
def test_a_thousand_files_open_at_once(s3server, bucket, mount):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < N_OPEN + 100:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    try:
        m = mount(bucket, options=("commit_delay=600",))
        d = m / "many"
        d.mkdir()
        fds = [os.open(d / f"f{i:04d}", os.O_CREAT | os.O_WRONLY, 0o644)
               for i in range(N_OPEN)]
        try:
            for i, fd in enumerate(fds):
                os.write(fd, f"file {i}\n".encode())
        finally:
            for fd in fds:
                os.close(fd)
        ckptfs_sync(m, timeout=150)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    keys = s3_sizes(s3server.client(), bucket, "many/")
    got = sorted(k for k in keys if not helpers.is_protocol_key(k))
    assert got == [f"many/f{i:04d}" for i in range(N_OPEN)], (len(got), got[:3])
    assert (m / "many/f0999").read_bytes() == b"file 999\n"


# --------------------------------------------------------------------------
# A corrupted cache index


@pytest.mark.timeout(90)
def test_corrupted_cache_index_is_refused_by_name_or_rebuilt(s3server, bucket, mount, tmp_path):
    body = det_bytes(3, 200 * 1024)
    s3server.put(bucket, "c.bin", body)
    cdir = tmp_path / "cache"
    m = mount(bucket, options=(f"cache_dir={cdir}",))
    assert (m / "c.bin").read_bytes() == body
    assert not m.unmount()
    idx = cdir / "index.db"
    assert idx.exists(), sorted(os.listdir(cdir))
    for extra in ("index.db-wal", "index.db-shm"):
        if (cdir / extra).exists():
            (cdir / extra).unlink()
    idx.write_bytes(b"this is not an SQLite database\n" * 100)
    mp = tmp_path / "mnt2"
    mp.mkdir()
    argv = mount.argv(bucket, "", mp, [f"cache_dir={cdir}"])
    t0 = time.monotonic()
    try:
        p = subprocess.Popen(argv, env=s3server.env_for_ckptfs(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        deadline = t0 + 15
        while time.monotonic() < deadline and p.poll() is None \
                and not helpers.is_fuse_mount(mp):
            time.sleep(0.1)
        if p.poll() is not None:  # refused: with the file named, quickly
            err = p.stderr.read()
            assert p.returncode != 0
            assert "index.db" in err or str(cdir) in err, err
            assert time.monotonic() - t0 < 10
        else:  # or rebuilt: the right bytes
            assert helpers.is_fuse_mount(mp), "neither mounted nor refused in 15 s"
            assert (mp / "c.bin").read_bytes() == body
    finally:
        if helpers.is_fuse_mount(mp):
            run(["fusermount3", "-u", mp], check=False)
        if p.poll() is None:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


# --------------------------------------------------------------------------
# A malformed server reply


class _Garbage(http.server.BaseHTTPRequestHandler):
    bodies = [b"\x00\xffnot XML at all\x01",
              b"<?xml version='1.0'?><ListBucketResult><Contents><Key>a",
              b"<Error><Code>",
              b""]
    n = 0

    def _answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        body = _Garbage.bodies[_Garbage.n % len(_Garbage.bodies)]
        _Garbage.n += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _answer

    def log_message(self, *args):
        pass


@pytest.mark.timeout(90)
def test_malformed_server_replies_fail_the_mount_with_a_message(s3server, bucket, tmp_path):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Garbage)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    mp = tmp_path / "mnt"
    mp.mkdir()
    try:
        t0 = time.monotonic()
        p = run([CKPTFS_BIN, "mount", f"s3://{bucket}", mp, "-f",
                 "--endpoint", f"http://127.0.0.1:{srv.server_address[1]}",
                 "--region", s3server.region, "-o", f"cache_dir={tmp_path / 'cache'}"],
                check=False, timeout=60, env=s3server.env_for_ckptfs())
        took = time.monotonic() - t0
    finally:
        if helpers.is_fuse_mount(mp):
            run(["fusermount3", "-u", mp], check=False)
        srv.shutdown()
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert p.stderr.startswith("ckptfs: ") or "\nckptfs: " in p.stderr, p.stderr
    assert took < 30, took
    assert _Garbage.n >= 1, "the server was never asked"
