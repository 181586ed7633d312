"""Shared helpers for the ckptfs integration tests (imported by conftest.py
and the test modules).  Nothing here talks to pytest fixtures."""

import hashlib
import os
import random
import re
import subprocess
import time
from pathlib import Path

CKPTFS_BIN = os.environ.get("CKPTFS_BIN", "/work/main/build/ckptfs")
CACHE_DIR = None  # set by conftest: the session's private ckptfs cache


_supports = {}


def ckptfs_supports(option):
    """True if `ckptfs mount --help` lists the -o option (e.g. "cache_dir=")."""
    if option not in _supports:
        try:
            p = subprocess.run([CKPTFS_BIN, "mount", "--help"], capture_output=True,
                               text=True, timeout=30)
            _supports[option] = option in p.stdout + p.stderr
        except OSError:
            _supports[option] = False
    return _supports[option]


def default_options(options=()):
    """-o options every test mount gets unless it sets them itself: the
    cache goes to a private directory of the session, never the machine's
    /var/cache/ckptfs."""
    opts = list(options)
    if (CACHE_DIR is not None and ckptfs_supports("cache_dir=")
            and not any(o.startswith("cache_dir=") for o in opts)):
        opts.append(f"cache_dir={CACHE_DIR}")
    return opts

# --------------------------------------------------------------------------
# Environment hygiene.  The machine sets CA bundles, proxies and maybe AWS
# variables; none of them may influence a test.

_STRIP_EXACT = {
    "AWS_CA_BUNDLE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE",
    "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO",
    "NIX_SSL_CERT_FILE", "PIP_CERT", "HTTPLIB2_CA_CERTS",
    "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE",
    "http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy",
    "ALL_PROXY", "no_proxy", "NO_PROXY", "CEPH_CONF", "CEPH_ARGS",
}


def clean_env(base=None):
    """A copy of `base` (default os.environ) without CA/proxy settings and
    without any AWS_* variable."""
    env = dict(os.environ if base is None else base)
    for k in list(env):
        if (k in _STRIP_EXACT or k.startswith("AWS_")
                or "CA_BUNDLE" in k or k.endswith("_CA_CERTS")):
            del env[k]
    return env


def _sanitizer_build(path):
    """Whether the binary at path was built with a sanitizer (ASan, TSan):
    its code runs 2-15x slower, which tests that need a link slower than
    the daemon must allow for (SLOWDOWN)."""
    try:
        with open(path, "rb") as f:
            body = f.read()
    except OSError:
        return False
    return b"__asan_init" in body or b"__tsan_init" in body


SLOWDOWN = 4 if _sanitizer_build(CKPTFS_BIN) else 1


def sanitize_process_env():
    """Strip the same variables from this process (boto3 reads them)."""
    for k in list(os.environ):
        if k not in clean_env():
            del os.environ[k]


# --------------------------------------------------------------------------
# Processes

class CommandError(AssertionError):
    pass


def run(cmd, *, timeout=120, check=True, env=None, input=None, cwd=None,
        text=True):
    """Run cmd (list), capture output.  On a non-zero exit with check=True,
    fail with the command, status and output tails."""
    t0 = time.monotonic()
    try:
        p = subprocess.run(
            [str(c) for c in cmd], capture_output=True, timeout=timeout,
            env=clean_env() if env is None else env, input=input, cwd=cwd,
            text=text, errors="surrogateescape" if text else None)
    except subprocess.TimeoutExpired as e:
        raise CommandError(f"timed out after {timeout}s: {cmd_str(cmd)}\n"
                           f"stderr: {tail(e.stderr)}") from None
    p.elapsed = time.monotonic() - t0
    if check and p.returncode != 0:
        raise CommandError(
            f"exit {p.returncode}: {cmd_str(cmd)}\n"
            f"--- stdout ---\n{tail(p.stdout)}\n--- stderr ---\n{tail(p.stderr)}")
    return p


def cmd_str(cmd):
    return " ".join(str(c) for c in cmd)


def tail(s, n=40):
    if s is None:
        return ""
    if isinstance(s, bytes):
        s = s.decode("utf-8", "replace")
    lines = s.splitlines()
    return "\n".join(lines[-n:])


def file_tail(path, n=60):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return f"<cannot read {path}: {e}>"
    return tail(data, n)


# --------------------------------------------------------------------------
# Mount table

def _unescape_mountinfo(s):
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)


def mount_entry(path):
    """The last /proc/self/mountinfo entry whose mount point is `path`, as a
    dict (fstype, source, dev, options), or None."""
    real = os.path.realpath(path)
    found = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            try:
                sep = parts.index("-")
            except ValueError:
                continue
            if _unescape_mountinfo(parts[4]) == real:
                found = {
                    "dev": parts[2],
                    "options": parts[5],
                    "fstype": parts[sep + 1],
                    "source": _unescape_mountinfo(parts[sep + 2]),
                    "super_options": parts[sep + 3] if len(parts) > sep + 3 else "",
                }
    return found


def is_fuse_mount(path):
    e = mount_entry(path)
    return bool(e) and (e["fstype"] == "fuse" or e["fstype"].startswith("fuse."))


def ckptfs_pids_for(mountpoint):
    """Pids of processes whose argv contains the mount point (a ckptfs daemon
    serving it)."""
    real = os.path.realpath(mountpoint)
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{d}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if state in (b"Z", b"X"):
            continue
        if not argv or b"ckptfs" not in os.path.basename(argv[0]):
            continue
        if any(os.fsencode(real) == a or os.fsencode(str(mountpoint)) == a
               for a in argv[1:]):
            pids.append(int(d))
    return pids


def wait_until(pred, timeout, interval=0.05):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            return v
        time.sleep(interval)


# --------------------------------------------------------------------------
# Data

def det_bytes(seed, n):
    """n deterministic pseudo-random bytes."""
    r = random.Random(seed)
    chunk = 1 << 20
    if n <= chunk:
        return r.randbytes(n)
    return b"".join(r.randbytes(min(chunk, n - i)) for i in range(0, n, chunk))


def sha256_bytes(b):
    return hashlib.sha256(b).hexdigest()


def sha256_file(path, bufsize=1 << 20):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(bufsize)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def local_tree(root):
    """{relative posix path: bytes} of the regular files under root and the
    set of relative directories."""
    root = Path(root)
    files, dirs = {}, set()
    for dirpath, dirnames, filenames in os.walk(root):
        rel = Path(dirpath).relative_to(root)
        for d in dirnames:
            dirs.add((rel / d).as_posix())
        for fn in filenames:
            files[(rel / fn).as_posix()] = (Path(dirpath) / fn).read_bytes()
    return files, dirs


def parse_ls_la(out):
    """Parse `ls -la --time-style=+%s` into {name: (mode, links, user, group,
    size, mtime)}."""
    res = {}
    for line in out.splitlines():
        if not line or line.startswith("total "):
            continue
        parts = line.split(None, 6)
        if len(parts) < 7:
            continue
        mode, links, user, group, size, mtime, name = parts
        res[name] = (mode, int(links), user, group, int(size), int(mtime))
    return res


# --------------------------------------------------------------------------
# The read cache (tests/integration/test_cache*.py)

def ckptfs_status(mountpoint, timeout=30):
    """`ckptfs status MOUNTPOINT --json`, parsed."""
    import json
    p = run([CKPTFS_BIN, "status", str(mountpoint), "--json"], timeout=timeout)
    try:
        return json.loads(p.stdout)
    except ValueError as e:
        raise CommandError(f"ckptfs status --json printed no JSON ({e}):\n"
                           f"{tail(p.stdout)}") from None


def cache_names(bucket, key, etag):
    """The cache file names ckptfs may give key@etag (SHA-256 of
    bucket NUL key NUL etag), for the ETag with and without its quotes."""
    out = []
    e = etag.strip('"')
    for form in (e, f'"{e}"'):
        h = hashlib.sha256()
        h.update(bucket.encode() + b"\0" + key.encode() + b"\0" + form.encode())
        out.append(h.hexdigest())
    return out


def cache_files(cache_dir):
    """{name: path} of the files under cache_dir/objects."""
    res = {}
    root = Path(cache_dir) / "objects"
    if not root.is_dir():
        return res
    for sub in root.iterdir():
        if sub.is_dir():
            for f in sub.iterdir():
                res[f.name] = f
    return res


def cache_file_of(s3, cache_dir, bucket, key):
    """Path of the cache file of key's current version (s3: anything with
    a boto3-like head(bucket, key)), or None."""
    etag = s3.head(bucket, key)["ETag"]
    have = cache_files(cache_dir)
    for n in cache_names(bucket, key, etag):
        if n in have:
            return have[n]
    return None


class ThrottleProxy:
    """A TCP proxy on 127.0.0.1 in front of `target` ("host:port" or an
    http:// URL) that makes the link slow: each connection's bytes from the
    server are capped at `rate` bytes/s (None: unlimited) and each response
    waits `ttfb` seconds after its request's first byte.  `rate` may be
    changed while it runs.  Use as a context manager or call close()."""

    def __init__(self, target, rate=None, ttfb=0.0):
        import socket
        import threading
        t = re.sub(r"^https?://", "", target).rstrip("/")
        host, port = t.rsplit(":", 1)
        self.target = (host, int(port))
        self.rate = rate
        self.ttfb = ttfb
        self.connections = 0
        self.bytes_down = 0
        self._lock = threading.Lock()
        self._socks = []
        self._closed = False
        self._ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._ls.bind(("127.0.0.1", 0))
        self._ls.listen(256)
        self.port = self._ls.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._t = threading.Thread(target=self._accept, daemon=True)
        self._t.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _accept(self):
        import socket
        import threading
        while not self._closed:
            try:
                c, _ = self._ls.accept()
            except OSError:
                return
            try:
                s = socket.create_connection(self.target, timeout=10)
                s.settimeout(None)
            except OSError:
                c.close()
                continue
            for x in (c, s):
                x.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self.connections += 1
                self._socks += [c, s]
            state = {"req_t": None}
            threading.Thread(target=self._up, args=(c, s, state), daemon=True).start()
            threading.Thread(target=self._down, args=(s, c, state), daemon=True).start()

    def _up(self, src, dst, state):
        """Client to server, unthrottled; marks the start of a request."""
        import socket
        try:
            while True:
                b = src.recv(65536)
                if not b:
                    break
                if state["req_t"] is None:
                    state["req_t"] = time.monotonic()
                dst.sendall(b)
        except OSError:
            pass
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def _down(self, src, dst, state):
        """Server to client: TTFB per response, rate cap per connection."""
        import socket
        burst = 65536
        tokens, last = float(burst), time.monotonic()
        try:
            while True:
                b = src.recv(16384)
                if not b:
                    break
                rt = state["req_t"]
                if rt is not None:  # first bytes of a response
                    state["req_t"] = None
                    wait = rt + self.ttfb - time.monotonic()
                    if wait > 0:
                        time.sleep(wait)
                rate = self.rate
                now = time.monotonic()
                if rate:  # token bucket, burst 64 KiB
                    tokens = min(burst, tokens + (now - last) * rate)
                    last = now
                    if tokens < len(b):
                        time.sleep((len(b) - tokens) / rate)
                        last = time.monotonic()
                        tokens = 0.0
                    else:
                        tokens -= len(b)
                else:
                    tokens, last = float(burst), now
                dst.sendall(b)
                with self._lock:
                    self.bytes_down += len(b)
        except OSError:
            pass
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self):
        self._closed = True
        try:
            self._ls.close()
        except OSError:
            pass
        with self._lock:
            socks, self._socks = self._socks, []
        for x in socks:
            try:
                x.close()
            except OSError:
                pass


# --------------------------------------------------------------------------
# The write path (test_write*.py, test_commit.py, test_crash.py)

def ckptfs_sync(mountpoint, timeout=120):
    """`ckptfs sync MOUNT`: returns once everything written through the
    mount is visible in the bucket."""
    return run([CKPTFS_BIN, "sync", str(mountpoint)], timeout=timeout)


def ckptfs_commit(path, timeout=120):
    """`ckptfs commit PATH`: returns once the transaction at PATH is
    visible."""
    return run([CKPTFS_BIN, "commit", str(path)], timeout=timeout)


def observer_options(cache_dir, *more):
    """-o options of a mount that shows what another host sees right now:
    read-only, its own cache directory, no kernel caching of names and
    attributes, listings reused for 0.1 s only (one look at a directory's
    files sees one listing; dir_timeout=0 makes every lstat a new listing,
    ten times slower)."""
    return ["ro", f"cache_dir={cache_dir}", f"dir_timeout={OBSERVER_LISTING_S}",
            "entry_timeout=0",
            "attr_timeout=0", *more]


def wait_for(pred, timeout, what, interval=0.05):
    """Polls pred() until it returns a true value (returned) or fails the
    test after `timeout` seconds; `what` (a string, or a callable giving
    one) says what was awaited."""
    v = wait_until(pred, timeout, interval)
    if not v:
        raise AssertionError(f"not after {timeout}s: "
                             f"{what() if callable(what) else what}")
    return v


def s3_get(client, bucket, key):
    """The bytes of bucket/key, or None when there is no such object."""
    try:
        return client.get_object(Bucket=bucket, Key=key)["Body"].read()
    except client.exceptions.NoSuchKey:
        return None


def s3_sizes(client, bucket, prefix=""):
    """{key: size} of the objects under prefix (one listing pass)."""
    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=prefix):
        for o in page.get("Contents", []):
            out[o["Key"]] = o["Size"]
    return out


def is_protocol_key(key):
    """Keys that belong to ckptfs itself (markers, manifests)."""
    return any(c.startswith(".ckptfs") for c in key.split("/"))


def pending_markers(client, bucket, prefix=""):
    """Keys of pending markers anywhere under prefix."""
    return [k for k in s3_sizes(client, bucket, prefix)
            if "/.ckptfs-pending/" in "/" + k]


def tree_view(root):
    """{relative path: size} of the regular files under root, as a mount
    shows them (lstat of each name listed), or None when root is absent."""
    import stat as _stat
    root = Path(root)
    out = {}
    try:
        names = os.listdir(root)
    except (FileNotFoundError, NotADirectoryError):
        return None
    stack = [(root, names)]
    while stack:
        d, names = stack.pop()
        for n in names:
            p = d / n
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                out[p.relative_to(root).as_posix()] = "vanished"
                continue
            if _stat.S_ISDIR(st.st_mode):
                try:
                    stack.append((p, os.listdir(p)))
                except FileNotFoundError:
                    out[p.relative_to(root).as_posix() + "/"] = "vanished"
            else:
                out[p.relative_to(root).as_posix()] = st.st_size
    return out


def attr_tree(root):
    """{relative path: attributes} of root and everything under it, as a
    mount shows them (lstat, listxattr): type, mode, uid, gid, mtime_ns,
    user xattrs ({name: value as latin-1 text}) and, per type, the md5 of
    a file's bytes or a symlink's target; None when root is absent.  The
    entry of root itself is ".".  JSON-serializable (compat fixtures
    record it, tests/integration/test_compat_v2.py compares it)."""
    import hashlib
    import stat as _stat
    root = Path(root)
    if not os.path.lexists(root):
        return None
    out = {}
    stack = [root]
    while stack:
        p = stack.pop()
        st = os.lstat(p)
        rel = p.relative_to(root).as_posix() if p != root else "."
        e = {"mode": oct(st.st_mode & 0o7777), "uid": st.st_uid, "gid": st.st_gid,
             "mtime_ns": st.st_mtime_ns}
        if _stat.S_ISLNK(st.st_mode):
            e["type"], e["target"] = "symlink", os.readlink(p)
        else:
            e["xattrs"] = {n: os.getxattr(p, n).decode("latin-1")
                           for n in sorted(os.listxattr(p)) if n.startswith("user.")}
            if _stat.S_ISDIR(st.st_mode):
                e["type"] = "dir"
                stack += [p / n for n in sorted(os.listdir(p))]
            else:
                e["type"] = "file"
                e["md5"] = hashlib.md5(p.read_bytes()).hexdigest()
        out[rel] = dict(sorted(e.items()))
    return dict(sorted(out.items()))


class Poller:
    """Runs check() in a thread again and again (every `interval` seconds)
    until stop().  check returns None when what it saw is allowed, else a
    description; descriptions and exceptions are collected in `bad`.
    `seen` counts the checks."""

    def __init__(self, check, interval=0.0, name="poller"):
        import threading
        self.check = check
        self.interval = interval
        self.bad = []
        self.seen = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, name=name, daemon=True)
        _POLLERS.append(self)
        self._t.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                r = self.check()
            except Exception as e:  # noqa: BLE001 - reported by stop()
                r = f"{type(e).__name__}: {e}"
            self.seen += 1
            if r is not None:
                self.bad.append(r)
                if len(self.bad) > 20:
                    return
            if self.interval:
                self._stop.wait(self.interval)

    def stop(self, timeout=60):
        self._stop.set()
        self._t.join(timeout)
        assert not self._t.is_alive(), "poller thread hung (a FUSE call?)"
        return self

    def assert_clean(self, min_seen=1):
        self.stop()
        assert not self.bad, f"{len(self.bad)} bad observations, first: " \
            f"{self.bad[:3]}"
        assert self.seen >= min_seen, f"only {self.seen} observations made"


class SlowNth:
    """A FaultProxy inspect hook: the `nth` request for which
    match(method, path, query) is true waits `secs` before it is
    forwarded; `seen` lists the matching paths."""

    def __init__(self, match, nth=2, secs=3.0):
        self.match, self.nth, self.secs, self.seen = match, nth, secs, []

    def __call__(self, method, path, query, headers):
        if self.match(method, path, query or ""):
            self.seen.append(path)
            if len(self.seen) == self.nth:
                time.sleep(self.secs)
        return None


def kill_ckptfs(m):
    """SIGKILL the ckptfs process serving mount m (a conftest Mount), wait
    for it to die, then detach the dead mount (fusermount3 -uz) so that the
    mount point can be mounted again."""
    import signal
    m.expect_clean_exit = False
    pids = m.pids()
    assert pids, f"no ckptfs process serves {m.path}"
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    if m.proc is not None:
        m.proc.wait(30)
    else:
        wait_until(lambda: not ckptfs_pids_for(m.path), 30)
    subprocess.run(["fusermount3", "-uz", str(m.path)], capture_output=True,
                   timeout=30)
    m.unmount()  # bookkeeping only: the mount is gone, problems expected


class UploadThrottleProxy(ThrottleProxy):
    """A ThrottleProxy that can also slow or stop what the client sends
    (uploads): `up_rate` bytes/s shared by all connections (None:
    unlimited); while `held` is true no byte goes to the server (requests
    stall, connections stay open).  `bytes_up` counts what was forwarded."""

    def __init__(self, target, rate=None, ttfb=0.0, up_rate=None):
        self.up_rate = up_rate
        self.held = False
        self.bytes_up = 0
        self._up_tokens = 0.0
        self._up_last = time.monotonic()
        import threading
        self._up_lock = threading.Lock()
        super().__init__(target, rate, ttfb)

    def _take(self, n):
        """Waits until n bytes may go up."""
        while True:
            if self._closed:
                raise OSError("proxy closed")
            if self.held:
                time.sleep(0.01)
                continue
            rate = self.up_rate
            if not rate:
                return
            with self._up_lock:
                now = time.monotonic()
                self._up_tokens = min(max(rate / 4, 65536.0), self._up_tokens
                                      + (now - self._up_last) * rate)
                self._up_last = now
                if self._up_tokens >= n:
                    self._up_tokens -= n
                    return
                need = (n - self._up_tokens) / rate
            time.sleep(min(need, 0.05))

    def _up(self, src, dst, state):
        import socket
        try:
            while True:
                b = src.recv(16384)
                if not b:
                    break
                if state["req_t"] is None:
                    state["req_t"] = time.monotonic()
                self._take(len(b))
                dst.sendall(b)
                with self._lock:
                    self.bytes_up += len(b)
        except OSError:
            pass
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


_POLLERS = []


def stop_all_pollers():
    """Stops every Poller still running (a test that failed midway): their
    FUSE calls would keep the mounts busy at unmount."""
    while _POLLERS:
        p = _POLLERS.pop()
        p._stop.set()
        p._t.join(60)


OBSERVER_LISTING_S = 0.1  # dir_timeout of observer_options


def observer_settle():
    """After a call that returns once something is visible (fsync of a
    directory, ckptfs commit/sync, unmount): an observing mount may still
    answer from a listing it made just before, for OBSERVER_LISTING_S;
    wait that out before looking."""
    time.sleep(2 * OBSERVER_LISTING_S + 0.05)


class CorruptProxy:
    """An HTTP/1.1 proxy on 127.0.0.1 in front of `target` ("host:port" or
    an http:// URL) that damages downloads: in the body of a successful GET
    whose URL path contains `key`, one byte is flipped (the byte at
    `at` within the body, the last one if the body is shorter).  `mode`
    decides which GETs (it may be changed while it runs):
      "off"   none;
      "first" the first GET starting at each offset (Range start), so a
              retry of the same piece gets the right bytes;
      "all"   every one.
    `gets` counts the GETs of `key`, `corrupted` the damaged ones.
    Requests and responses are parsed only as far as framing needs
    (Content-Length, chunked, HEAD, 1xx/204/304): meant for a reading
    mount (an upload's "Expect: 100-continue" would wait for curl's
    timeout).  Use as a context manager or call close()."""

    def __init__(self, target, key, mode="off", at=4096):
        import socket
        import threading
        t = re.sub(r"^https?://", "", target).rstrip("/")
        host, port = t.rsplit(":", 1)
        self.target = (host, int(port))
        self.key = key
        self.mode = mode
        self.at = at
        self.gets = 0
        self.corrupted = 0
        self._seen = set()
        self._lock = threading.Lock()
        self._socks = []
        self._closed = False
        self._ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._ls.bind(("127.0.0.1", 0))
        self._ls.listen(256)
        self.port = self._ls.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._t = threading.Thread(target=self._accept, daemon=True)
        self._t.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _accept(self):
        import socket
        import threading
        while not self._closed:
            try:
                c, _ = self._ls.accept()
            except OSError:
                return
            try:
                s = socket.create_connection(self.target, timeout=10)
                s.settimeout(None)
            except OSError:
                c.close()
                continue
            for x in (c, s):
                x.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._socks += [c, s]
            threading.Thread(target=self._serve, args=(c, s), daemon=True).start()

    @staticmethod
    def _head(f):
        """Reads a request or status line and its headers: (lines, raw)."""
        raw = b""
        lines = []
        while True:
            line = f.readline(65537)
            if not line:
                return None, raw
            raw += line
            if line in (b"\r\n", b"\n"):
                return lines, raw
            lines.append(line.decode("latin-1").rstrip("\r\n"))

    @staticmethod
    def _headers(lines):
        h = {}
        for l in lines[1:]:
            k, _, v = l.partition(":")
            h[k.strip().lower()] = v.strip()
        return h

    def _body(self, f, out, h, flip=None):
        """Forwards a body framed by headers h from f to socket out; flip is
        None or a callable(offset, bytes) -> bytes applied to each piece."""
        pos = 0

        def send(b):
            nonlocal pos
            if flip is not None:
                b = flip(pos, b)
            pos += len(b)
            out.sendall(b)
        if "chunked" in h.get("transfer-encoding", "").lower():
            while True:
                size_line = f.readline(65537)
                if not size_line:
                    raise OSError("connection closed in a chunked body")
                out.sendall(size_line)
                n = int(size_line.split(b";")[0].strip() or b"0", 16)
                if n == 0:
                    while True:  # trailers, then the empty line
                        t = f.readline(65537)
                        out.sendall(t)
                        if t in (b"\r\n", b"\n", b""):
                            return True
                left = n
                while left:
                    b = f.read(min(left, 65536))
                    if not b:
                        raise OSError("connection closed in a chunk")
                    send(b)
                    left -= len(b)
                out.sendall(f.readline(65537))  # CRLF after the chunk
        elif "content-length" in h:
            left = int(h["content-length"])
            while left:
                b = f.read(min(left, 65536))
                if not b:
                    raise OSError("connection closed in a body")
                send(b)
                left -= len(b)
        else:
            return False  # delimited by the end of the connection
        return True

    def _decide(self, method, path, h):
        """Whether this request's response body gets a flipped byte."""
        from urllib.parse import unquote
        if method != "GET" or self.key not in unquote(path.split("?", 1)[0]):
            return False
        m = re.match(r"bytes=(\d+)-", h.get("range", ""))
        start = int(m.group(1)) if m else 0
        with self._lock:
            self.gets += 1
            mode = self.mode
            if mode == "all":
                return True
            if mode == "first" and start not in self._seen:
                self._seen.add(start)
                return True
        return False

    def _serve(self, c, s):
        import socket
        cf = c.makefile("rb")
        sf = s.makefile("rb")
        try:
            while not self._closed:
                lines, raw = self._head(cf)
                if not lines:
                    break
                method, path = (lines[0].split(" ") + ["", ""])[:2]
                rh = self._headers(lines)
                s.sendall(raw)
                if not self._body(cf, s, rh):
                    if method not in ("GET", "HEAD", "DELETE"):
                        break  # a body up to the close: not spoken here
                corrupt = self._decide(method, path, rh)
                while True:
                    slines, sraw = self._head(sf)
                    if not slines:
                        raise OSError("server closed the connection")
                    c.sendall(sraw)
                    status = int(slines[0].split(" ")[1])
                    if status >= 200:
                        break
                sh = self._headers(slines)
                if method == "HEAD" or status in (204, 304):
                    continue
                flip = None
                if corrupt and status in (200, 206):
                    length = int(sh.get("content-length", "0") or 0)
                    at = min(self.at, length - 1) if length else self.at

                    def flip(off, b, at=at):
                        if off <= at < off + len(b):
                            i = at - off
                            b = b[:i] + bytes([b[i] ^ 0xFF]) + b[i + 1:]
                            with self._lock:
                                self.corrupted += 1
                        return b
                if not self._body(sf, c, sh, flip):
                    pos = 0
                    while True:  # until the server closes
                        b = sf.read1(65536)
                        if not b:
                            break
                        c.sendall(flip(pos, b) if flip else b)
                        pos += len(b)
                    break
        except (OSError, ValueError, IndexError):
            pass
        for x in (c, s):
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                x.close()
            except OSError:
                pass

    def close(self):
        self._closed = True
        try:
            self._ls.close()
        except OSError:
            pass
        with self._lock:
            socks, self._socks = self._socks, []
        for x in socks:
            try:
                x.close()
            except OSError:
                pass


def read_pty(master):
    """Everything a pty's other side wrote (it has closed), then closes
    master."""
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return out
