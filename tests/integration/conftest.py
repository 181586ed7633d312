"""Fixtures for the ckptfs integration tests.

Run as root:  /usr/bin/python3 -m pytest tests/integration
Environment:
  CKPTFS_BIN            the binary under test (default /work/main/build/ckptfs)
  CKPTFS_TEST_TIMEOUT   default per-test watchdog, seconds (default 180)
  CKPTFS_TEST_SKIP_HUGE=1  skip the 4.1 GiB object test (test_large.py)
  RGW_*                 passed to tests/s3server/rgw.sh (see there)
  CKPTFS_S3_SERVER      rgw (default) or s3rver: which S3 implementation the
                        session starts (tests/s3server/<name>.sh); the
                        portability run (doc/portability.md) uses s3rver
  S3RVER_*              passed to tests/s3server/s3rver.sh (see there)

One throwaway S3 server serves the whole session: Ceph RGW
(tests/s3server/rgw.sh) unless CKPTFS_S3_SERVER says s3rver.  A test that
needs what only RGW has (bucket policies, STS, a capacity, UploadPartCopy,
multipart listings, an object replaced atomically under a running GET)
carries @pytest.mark.rgw_only and is skipped on s3rver.
Tests see it through the `s3server` fixture; `bucket` gives a fresh bucket;
`mount` mounts ckptfs in the foreground and checks at teardown that it
unmounts cleanly and did not crash.
"""

import atexit
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import helpers  # noqa: E402
from helpers import clean_env, file_tail, is_fuse_mount, mount_entry, run  # noqa: E402

HERE = Path(__file__).resolve().parent
S3_SERVER = os.environ.get("CKPTFS_S3_SERVER", "rgw")
if S3_SERVER not in ("rgw", "s3rver"):
    sys.exit(f"CKPTFS_S3_SERVER={S3_SERVER!r}: expected rgw or s3rver")
SERVER_SH = HERE.parent / "s3server" / f"{S3_SERVER}.sh"
CKPTFS_BIN = helpers.CKPTFS_BIN  # replaced by a private copy at session start
AWS_CLI = "/usr/bin/aws" if os.path.exists("/usr/bin/aws") else (shutil.which("aws") or "aws")
REGION = "us-east-1"
DEFAULT_TIMEOUT = float(os.environ.get("CKPTFS_TEST_TIMEOUT", "180"))
MOUNT_TIMEOUT = 30.0     # seconds for a mount to become live
UNMOUNT_TIMEOUT = 30.0   # seconds for ckptfs to exit after fusermount3 -u

# --------------------------------------------------------------------------
# Process-wide hygiene, done at import: no CA bundle / proxy / AWS variable of
# the machine, and no ~/.aws of the machine (config files point into a
# private directory, HOME too for the programs we start).

helpers.sanitize_process_env()
_SESSION_TMP = Path(tempfile.mkdtemp(prefix="ckptfs-it-"))
_AWS_DIR = _SESSION_TMP / "aws"
_AWS_DIR.mkdir()
(_AWS_DIR / "config").write_text(f"[default]\nregion = {REGION}\n")
(_AWS_DIR / "credentials").write_text("")
_HOME = _SESSION_TMP / "home"
_HOME.mkdir()
helpers.CACHE_DIR = _SESSION_TMP / "cache"
os.environ["AWS_CONFIG_FILE"] = str(_AWS_DIR / "config")
os.environ["AWS_SHARED_CREDENTIALS_FILE"] = str(_AWS_DIR / "credentials")
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
os.environ["AWS_REQUEST_CHECKSUM_CALCULATION"] = "when_required"
os.environ["AWS_RESPONSE_CHECKSUM_VALIDATION"] = "when_required"


def base_env(**extra):
    """Environment for programs started by the tests: clean, private HOME and
    AWS config files, no instance metadata lookups (no traffic off the
    machine), plus `extra`."""
    env = clean_env()
    env.update(
        HOME=str(_HOME),
        XDG_CACHE_HOME=str(_HOME / ".cache"),
        AWS_CONFIG_FILE=str(_AWS_DIR / "config"),
        AWS_SHARED_CREDENTIALS_FILE=str(_AWS_DIR / "credentials"),
        AWS_EC2_METADATA_DISABLED="true",
        AWS_REQUEST_CHECKSUM_CALCULATION="when_required",
        AWS_RESPONSE_CHECKSUM_VALIDATION="when_required",
        LC_ALL="C.UTF-8",
    )
    env.update({k: str(v) for k, v in extra.items()})
    return env


# Everything that must be undone even if pytest dies: RGW dirs, mount points.
_RGW_DIRS = []
_LIVE_MOUNTS = {}  # mountpoint -> Popen or None
_cleanup_lock = threading.Lock()


def _emergency_cleanup():
    with _cleanup_lock:
        for mp in list(_LIVE_MOUNTS):
            _force_unmount(mp)
            _LIVE_MOUNTS.pop(mp, None)
        for d in list(_RGW_DIRS):
            # the session's server or the STS RGW: a Ceph dir has ceph.conf
            sh = "rgw.sh" if (Path(d) / "ceph.conf").exists() else SERVER_SH.name
            subprocess.run([str(HERE.parent / "s3server" / sh), "stop", str(d)],
                           env=clean_env(), capture_output=True, timeout=60)
            _RGW_DIRS.remove(d)
        shutil.rmtree(_SESSION_TMP, ignore_errors=True)


atexit.register(_emergency_cleanup)


def _sigterm(signum, frame):
    # Like Ctrl-C: pytest stops the session and runs every finalizer (mounts,
    # RGW); atexit is the backstop.
    raise KeyboardInterrupt(f"signal {signum}")


def _default_interrupts():
    """In a mount's child process: SIGINT and SIGQUIT as a terminal would
    deliver them.  A suite started as a background job of a shell without
    job control (`cmd &` in a script) inherits both ignored, and ckptfs
    rightly keeps an inherited SIG_IGN (as nohup expects), so the SIGINT
    test would wait for nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
    signal.signal(signal.SIGTERM, _sigterm)


def _force_unmount(mp):
    """Best effort: unmount mp, kill what serves it."""
    for cmd in (["fusermount3", "-u", "-z", mp], ["umount", "-l", mp]):
        if not mount_entry(mp):
            break
        subprocess.run(cmd, capture_output=True, timeout=30)
    p = _LIVE_MOUNTS.get(mp)
    if p is not None and p.poll() is None:
        p.kill()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            pass


def pytest_sessionstart(session):
    global CKPTFS_BIN
    if not os.access(CKPTFS_BIN, os.X_OK):
        pytest.exit(f"ckptfs binary {CKPTFS_BIN} not found or not executable: "
                    "build it (cd build && make) or set CKPTFS_BIN", returncode=4)
    # Test a private copy: a rebuild of the tree's binary during the run
    # (another `make`) must not change or break the binary under test.
    copy = _SESSION_TMP / "bin" / "ckptfs"
    copy.parent.mkdir()
    shutil.copy2(CKPTFS_BIN, copy)
    sys.stderr.write(f"ckptfs under test: {CKPTFS_BIN} (copied to {copy})\n")
    CKPTFS_BIN = helpers.CKPTFS_BIN = str(copy)
    if os.geteuid() != 0:
        pytest.exit("the integration tests run as root (FUSE mounts, setpriv)",
                    returncode=4)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "timeout(seconds): watchdog for this test (default "
        f"{DEFAULT_TIMEOUT:.0f}s); on expiry the test's ckptfs processes are "
        "killed so that a hung FUSE call fails instead of hanging the suite")
    config.addinivalue_line(
        "markers", "rgw_only: needs what only Ceph RGW offers among the test "
        "servers (bucket policies, STS, objects replaced atomically under a "
        "running GET, ...); skipped when CKPTFS_S3_SERVER=s3rver")
    config.addinivalue_line(
        "markers", "bad_input: the bad-input suite (issue 23): hostile keys and "
        "metadata, corrupted caches, full disks, secrets, sockets, permissions, "
        "many open files, malformed replies, bad options; `pytest -m bad_input` "
        "(conftest.BAD_INPUT, tests/integration/README.md)")


# The bad-input suite (issue 23 point 9; its classes and tests are the
# table in tests/integration/README.md): `pytest -m bad_input
# tests/integration` runs it.  Files wholly about bad input set
# `pytestmark = pytest.mark.bad_input` or are listed with None; in the other
# files the tests named here get the marker.  A name here that its file does
# not define fails the collection, so a rename cannot drop a test from the
# suite unnoticed.
BAD_INPUT = {
    "test_bad_input.py": None,
    "test_bad_names.py": None,
    "test_hostile_local.py": None,
    "test_errors.py": None,
    "test_write_diskfull.py": None,
    "test_cache_diskfull.py": None,
    "test_namespace.py": [
        "test_special_characters_in_names",
        "test_keys_with_control_characters_list_under_their_names",
        "test_invalid_keys_are_skipped_and_the_mount_works",
        "test_object_and_prefix_with_same_name_shows_directory",
        "test_marker_with_contents_is_one_directory",
        "test_ckptfs_names_are_hidden",
        "test_allow_other_lets_other_users_read",
        "test_another_users_write_drops_the_set_id_bits",
    ],
    "test_visibility.py": [
        "test_invalid_manifest_is_ignored_not_fatal",
        "test_expired_marker_leaves_only_what_a_manifest_committed",
        "test_directory_with_only_pending_manifests_answers_enoent",
    ],
    "test_cache.py": [
        "test_cache_permissions_and_names",
        "test_corrupted_cache_file_is_detected_and_refetched",
        "test_corrupted_cache_file_read_by_concurrent_readers",
        "test_deleted_or_truncated_cache_file_is_refetched",
        "test_cache_file_corrupted_while_mounted_is_not_served",
        "test_etag_change_old_handle_old_bytes_new_open_new_bytes",
        "test_remote_delete_while_reading_completes_the_read",
        "test_replaced_between_listing_and_first_read_reads_the_new_version",
        "test_replaced_file_open_twice_before_first_read_reads_the_new_version",
    ],
    "test_meta_committed.py": ["test_times_of_a_file_just_written"],
    "test_cli.py": [
        "test_prefix_with_option_syntax_characters",
        "test_debug_log_has_requests_but_no_secret",
    ],
    "test_recovery.py": [
        "test_a_step_that_fails_for_good_holds_back_only_what_depends_on_it",
        "test_drop_gives_a_failed_step_up",
        "test_a_step_failing_transiently_past_the_limit_holds_back_only_what_depends_on_it",
        "test_transient_limit_must_be_seconds_above_0",
    ],
    "test_credentials.py": [
        "test_sts_garbage_is_a_clear_error",
        "test_container_credentials_errors",
        "test_refresh_survives_a_provider_that_answers_garbage_or_hangs",
    ],
    "test_s3_client.py": [
        "test_odd_keys_everywhere",
        "test_invalid_metadata_is_refused_before_sending",
        "test_complete_error_body_is_not_success",
    ],
    "test_metrics.py": ["test_bad_option_value"],
}


def _mark_bad_input(items):
    checked = set()
    for item in items:
        mod = getattr(item, "module", None)
        name = os.path.basename(str(item.fspath))
        if mod is None or name not in BAD_INPUT:
            continue
        wanted = BAD_INPUT[name]
        if name not in checked:
            checked.add(name)
            missing = [t for t in wanted or () if not hasattr(mod, t)]
            if missing:
                raise pytest.UsageError(f"conftest.BAD_INPUT names tests {name} does "
                                        f"not define: {missing}")
        if wanted is None or item.originalname in wanted:
            item.add_marker(pytest.mark.bad_input)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    _mark_bad_input(items)
    if S3_SERVER == "rgw":
        return
    skip = pytest.mark.skip(reason=f"needs Ceph RGW (CKPTFS_S3_SERVER={S3_SERVER})")
    for item in items:
        if item.get_closest_marker("rgw_only"):
            item.add_marker(skip)


# --------------------------------------------------------------------------
# S3 server

class S3Server:
    def __init__(self, dir_, env):
        self.dir = Path(dir_)
        self.endpoint = env["S3_ENDPOINT"]
        self.access_key = env["S3_ACCESS_KEY"]
        self.secret_key = env["S3_SECRET_KEY"]
        self.region = env.get("S3_REGION", REGION)
        self.capacity = int(env.get("S3_CAPACITY_BYTES", "0"))
        self.compression = env.get("S3_COMPRESSION", "none")
        self.kind = env.get("S3_SERVER", "rgw")        # rgw or s3rver
        self.version = env.get("S3_SERVER_VERSION", "")
        self._client = None
        self._lock = threading.Lock()

    # boto3 -----------------------------------------------------------------
    def client(self, **config):
        """A boto3 S3 client for this server (path-style, us-east-1).  The
        default one (no arguments) is shared and thread safe."""
        import boto3
        import botocore.config
        if not config and self._client is not None:
            return self._client
        cfg = dict(
            s3={"addressing_style": "path"},
            retries={"max_attempts": 5, "mode": "standard"},
            max_pool_connections=64,
            connect_timeout=10,
            read_timeout=300,
        )
        cfg.update(config)
        try:
            bc = botocore.config.Config(
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required", **cfg)
        except TypeError:  # older botocore: the env variables do it
            bc = botocore.config.Config(**cfg)
        session = boto3.session.Session(
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=self.region)
        c = session.client("s3", endpoint_url=self.endpoint, config=bc)
        if not config:
            with self._lock:
                if self._client is None:
                    self._client = c
                return self._client
        return c

    # AWS CLI -----------------------------------------------------------------
    @property
    def aws_env(self):
        """Environment for `aws --endpoint-url ENDPOINT s3 ...`."""
        return base_env(AWS_ACCESS_KEY_ID=self.access_key,
                        AWS_SECRET_ACCESS_KEY=self.secret_key,
                        AWS_DEFAULT_REGION=self.region)

    def aws(self, *args, timeout=300, check=True):
        return run([AWS_CLI, "--endpoint-url", self.endpoint, *args],
                   env=self.aws_env, timeout=timeout, check=check)

    # buckets -------------------------------------------------------------------
    def new_bucket(self, hint="b"):
        hint = re.sub(r"[^a-z0-9-]+", "-", hint.lower()).strip("-")[:40] or "b"
        name = f"t-{hint}-{uuid.uuid4().hex[:8]}"
        self.client().create_bucket(Bucket=name)
        return name

    def put(self, bucket, key, body=b""):
        return self.client().put_object(Bucket=bucket, Key=key, Body=body)

    def put_many(self, bucket, items, threads=32):
        """items: iterable of (key, bytes).  Uploaded in parallel."""
        from concurrent.futures import ThreadPoolExecutor
        c = self.client()

        def one(kv):
            c.put_object(Bucket=bucket, Key=kv[0], Body=kv[1])
        with ThreadPoolExecutor(threads) as ex:
            for _ in ex.map(one, items):
                pass

    def put_many_small(self, bucket, items, threads=32):
        """Like put_many, for thousands of small objects.  boto3 spends
        about 2 ms of CPU on each request, as much as RGW and its OSD
        together need to store the object; on 2 cores that doubles the
        time.  Here each of `threads` workers sends plain PUTs over its own
        keep-alive connection, SigV4-signed by _sigv4_put_headers (a
        quarter of boto3's CPU).  Retries connection errors and 5xx like
        boto3's standard mode; any other answer than 200 fails."""
        import http.client
        import queue
        from urllib.parse import quote, urlsplit
        u = urlsplit(self.endpoint)
        todo = queue.Queue()
        for kv in items:
            todo.put(kv)
        errors = []

        def worker():
            conn = None
            try:
                while not errors:
                    try:
                        key, body = todo.get_nowait()
                    except queue.Empty:
                        return
                    path = f"/{quote(bucket, safe='')}/{quote(key, safe='/~')}"
                    for attempt in range(5):
                        if conn is None:
                            conn = http.client.HTTPConnection(u.hostname, u.port,
                                                              timeout=60)
                        try:
                            conn.request("PUT", path, body=body,
                                         headers=self._sigv4_put_headers(
                                             u.netloc, path, body))
                            r = conn.getresponse()
                            data = r.read()
                        except (OSError, http.client.HTTPException) as e:
                            conn.close()
                            conn = None
                            if attempt == 4:
                                errors.append(f"PUT {key!r}: {e!r}")
                                return
                            time.sleep(0.1 * (attempt + 1))
                            continue
                        if r.status == 200:
                            break
                        if r.status < 500 or attempt == 4:
                            errors.append(f"PUT {key!r}: HTTP {r.status} {data[:300]!r}")
                            return
                        time.sleep(0.1 * (attempt + 1))
            finally:
                if conn is not None:
                    conn.close()
        ts = [threading.Thread(target=worker) for _ in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not errors, errors[:5]

    def _sigv4_put_headers(self, host, path, body):
        """Headers of an AWS SigV4-signed PUT of `body` to `path` (already
        percent-encoded, path-style)."""
        import datetime
        import hashlib
        import hmac
        amzdate = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        day = amzdate[:8]
        scope = f"{day}/{self.region}/s3/aws4_request"
        key = self.__dict__.get("_sigv4_key")
        if key is None or key[0] != day:
            k = ("AWS4" + self.secret_key).encode()
            for part in (day, self.region, "s3", "aws4_request"):
                k = hmac.new(k, part.encode(), hashlib.sha256).digest()
            key = self._sigv4_key = (day, k)
        payload = hashlib.sha256(body).hexdigest()
        signed = "host;x-amz-content-sha256;x-amz-date"
        canonical = (f"PUT\n{path}\n\nhost:{host}\nx-amz-content-sha256:{payload}\n"
                     f"x-amz-date:{amzdate}\n\n{signed}\n{payload}")
        to_sign = (f"AWS4-HMAC-SHA256\n{amzdate}\n{scope}\n"
                   + hashlib.sha256(canonical.encode()).hexdigest())
        sig = hmac.new(key[1], to_sign.encode(), hashlib.sha256).hexdigest()
        return {"Host": host, "x-amz-date": amzdate, "x-amz-content-sha256": payload,
                "Content-Length": str(len(body)),
                "Authorization": f"AWS4-HMAC-SHA256 Credential={self.access_key}/"
                                 f"{scope}, SignedHeaders={signed}, Signature={sig}"}

    def keys(self, bucket, prefix=""):
        out = []
        for page in self.client().get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=prefix):
            out += [o["Key"] for o in page.get("Contents", [])]
        return out

    def head(self, bucket, key):
        return self.client().head_object(Bucket=bucket, Key=key)

    def env_without_keys(self, **extra):
        """Clean environment with private HOME/AWS files and no keys."""
        return base_env(**extra)

    def env_for_ckptfs(self, **extra):
        """Environment for ckptfs: the test keys (overridable) in
        AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY."""
        keys = dict(AWS_ACCESS_KEY_ID=self.access_key,
                    AWS_SECRET_ACCESS_KEY=self.secret_key)
        keys.update(extra)
        return base_env(**keys)


@pytest.fixture(scope="session")
def s3server():
    """The session's S3 server on 127.0.0.1: Ceph RGW, or s3rver when
    CKPTFS_S3_SERVER=s3rver."""
    d = _SESSION_TMP / S3_SERVER
    _RGW_DIRS.append(d)
    try:
        t0 = time.monotonic()
        p = subprocess.run([str(SERVER_SH), "start", str(d)], env=clean_env(),
                           capture_output=True, text=True, timeout=180)
        if p.returncode != 0:
            pytest.exit(f"{SERVER_SH.name} start failed (exit {p.returncode}):\n"
                        f"{p.stdout}\n{p.stderr}", returncode=3)
        env = dict(line.split("=", 1) for line in p.stdout.splitlines()
                   if "=" in line)
        srv = S3Server(d, env)
        srv.start_seconds = time.monotonic() - t0
        sys.stderr.write(f"\n[s3server] {srv.kind} {srv.version} at {srv.endpoint} ready in "
                         f"{srv.start_seconds:.1f}s\n")
        yield srv
    finally:
        if d in _RGW_DIRS:
            subprocess.run([str(SERVER_SH), "stop", str(d)], env=clean_env(),
                           capture_output=True, timeout=60)
            _RGW_DIRS.remove(d)


@pytest.fixture(scope="session")
def sts_s3server():
    """A second Ceph RGW, with its STS enabled (rgw.sh RGW_STS=1), for the
    credential tests (test_credentials.py).  Not the session's server: with
    STS on, RGW answers a wrong key or secret with AccessDenied instead of
    InvalidAccessKeyId/SignatureDoesNotMatch, which test_errors.py checks."""
    d = _SESSION_TMP / "rgw-sts"
    rgw_sh = HERE.parent / "s3server" / "rgw.sh"
    _RGW_DIRS.append(d)
    try:
        t0 = time.monotonic()
        p = subprocess.run([str(rgw_sh), "start", str(d)],
                           env={**clean_env(), "RGW_STS": "1"},
                           capture_output=True, text=True, timeout=180)
        if p.returncode != 0:
            pytest.exit(f"rgw.sh start (RGW_STS=1) failed (exit "
                        f"{p.returncode}):\n{p.stdout}\n{p.stderr}",
                        returncode=3)
        env = dict(line.split("=", 1) for line in p.stdout.splitlines()
                   if "=" in line)
        srv = S3Server(d, env)
        srv.start_seconds = time.monotonic() - t0
        sys.stderr.write(f"\n[sts_s3server] {srv.endpoint} ready in "
                         f"{srv.start_seconds:.1f}s\n")
        yield srv
    finally:
        if d in _RGW_DIRS:
            subprocess.run([str(rgw_sh), "stop", str(d)], env=clean_env(),
                           capture_output=True, timeout=60)
            _RGW_DIRS.remove(d)


def _test_hint(request):
    return re.sub(r"\[.*", "", request.node.name).replace("test_", "")


@pytest.fixture
def bucket(s3server, request):
    """A fresh, empty bucket for this test."""
    return s3server.new_bucket(_test_hint(request))


# --------------------------------------------------------------------------
# Mounts

class Mount:
    """A running ckptfs mount."""

    def __init__(self, path, proc, log, argv, daemon=False):
        self.path = Path(path)
        self.proc = proc          # Popen in foreground mode, None for daemon
        self.log = Path(log)
        self.argv = argv
        self.daemon = daemon
        self.expect_clean_exit = True
        self.returncode = None
        self.unmounted = False

    def __truediv__(self, other):
        return self.path / other

    def __fspath__(self):
        return str(self.path)

    def __str__(self):
        return str(self.path)

    def log_text(self):
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, n=60):
        return file_tail(self.log, n)

    def pids(self):
        if self.proc is not None:
            return [self.proc.pid] if self.proc.poll() is None else []
        return helpers.ckptfs_pids_for(self.path)

    def unmount(self):
        """Unmount and wait for ckptfs to exit.  Returns a list of problems
        (empty when it went cleanly)."""
        if self.unmounted:
            return []
        self.unmounted = True
        problems = []
        if self.proc is not None and self.proc.poll() is not None and is_fuse_mount(self.path):
            problems.append(f"ckptfs exited (status {self.proc.returncode}) "
                            "while the mount was still in the mount table")
        if mount_entry(self.path):
            p = subprocess.run(["fusermount3", "-u", str(self.path)],
                               capture_output=True, text=True, timeout=30)
            if p.returncode != 0:
                if self.proc is None or self.proc.poll() is None:
                    problems.append(f"fusermount3 -u failed: {p.stderr.strip()}")
                # stale or busy: detach it anyway
                subprocess.run(["fusermount3", "-u", "-z", str(self.path)],
                               capture_output=True, timeout=30)
                if mount_entry(self.path):
                    subprocess.run(["umount", "-l", str(self.path)],
                                   capture_output=True, timeout=30)
        if self.proc is not None:
            try:
                self.returncode = self.proc.wait(UNMOUNT_TIMEOUT)
            except subprocess.TimeoutExpired:
                problems.append(f"ckptfs did not exit within {UNMOUNT_TIMEOUT:.0f}s "
                                "of the unmount; killed")
                self.proc.kill()
                self.returncode = self.proc.wait(10)
            if self.returncode != 0 and self.expect_clean_exit:
                problems.append(_describe_status(self.returncode))
        else:
            left = helpers.wait_until(lambda: not helpers.ckptfs_pids_for(self.path),
                                      UNMOUNT_TIMEOUT)
            if not left:
                pids = helpers.ckptfs_pids_for(self.path)
                problems.append(f"ckptfs daemon {pids} still running "
                                f"{UNMOUNT_TIMEOUT:.0f}s after unmount; killed")
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
        _LIVE_MOUNTS.pop(str(self.path), None)
        return problems


def _describe_status(rc):
    if rc is None:
        return "ckptfs still running"
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = str(-rc)
        return f"ckptfs was killed by signal {name} (crash)"
    return f"ckptfs exited with status {rc} after unmount (expected 0)"


class MountError(AssertionError):
    pass


class Mounter:
    """Factory behind the `mount` fixtures."""

    def __init__(self, s3, workdir, label):
        self.s3 = s3
        self.workdir = Path(workdir)
        self.label = label
        self.mounts = []
        self.n = 0

    def _paths(self, mountpoint):
        self.n += 1
        self.workdir.mkdir(parents=True, exist_ok=True)
        if mountpoint is None:
            mountpoint = self.workdir / f"mnt{self.n}"
            mountpoint.mkdir(parents=True, exist_ok=True)
        log = self.workdir / f"ckptfs-{self.n}.log"
        return Path(mountpoint), log

    def argv(self, bucket, prefix, mountpoint, options=(), extra_args=(),
             foreground=True, endpoint=True):
        url = f"s3://{bucket}" + (f"/{prefix}" if prefix else "")
        argv = [CKPTFS_BIN, "mount", url, str(mountpoint)]
        if foreground:
            argv.append("-d" if os.environ.get("CKPTFS_TEST_DEBUG") else "-f")
        if endpoint:
            argv += ["--endpoint", self.s3.endpoint, "--region", self.s3.region]
        options = helpers.default_options(options)
        if options:
            argv += ["-o", ",".join(options)]
        argv += list(extra_args)
        return argv

    def __call__(self, bucket, prefix="", options=(), extra_args=(), env=None,
                 mountpoint=None, timeout=MOUNT_TIMEOUT, argv=None):
        """Start `ckptfs mount ... -f` in the background and return a Mount
        once the mount point is a FUSE mount.  If ckptfs exits first, or
        nothing is mounted within `timeout`, the test fails with the log."""
        mp, log = self._paths(mountpoint)
        if argv is None:
            argv = self.argv(bucket, prefix, mp, options, extra_args)
        env = self.s3.env_for_ckptfs() if env is None else env
        logf = open(log, "wb")
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf,
                                    stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True,
                                    preexec_fn=_default_interrupts)
        finally:
            logf.close()
        m = Mount(mp, proc, log, argv)
        self.mounts.append(m)
        _LIVE_MOUNTS[str(mp)] = proc
        deadline = time.monotonic() + timeout
        while True:
            if is_fuse_mount(mp):
                m.entry = mount_entry(mp)
                return m
            if proc.poll() is not None:
                m.unmounted = True
                _LIVE_MOUNTS.pop(str(mp), None)
                raise MountError(
                    f"ckptfs exited with status {proc.returncode} before the "
                    f"mount was live\nargv: {helpers.cmd_str(argv)}\n"
                    f"--- log tail ({log}) ---\n{m.log_tail()}")
            if time.monotonic() > deadline:
                problems = m.unmount()
                raise MountError(
                    f"{mp} not mounted {timeout:.0f}s after starting ckptfs "
                    f"({problems})\nargv: {helpers.cmd_str(argv)}\n"
                    f"--- log tail ({log}) ---\n{m.log_tail()}")
            time.sleep(0.02)

    def daemon(self, bucket, prefix="", options=(), extra_args=(), env=None,
               mountpoint=None, timeout=60, argv=None, pipes=False):
        """Run `ckptfs mount` without -f.  Returns (CompletedProcess-like,
        Mount or None).  The Mount is registered for unmount at teardown
        when the mount point is mounted after ckptfs returned.  With
        pipes=True stdout/stderr are pipes (a daemon that keeps them open
        makes this time out) instead of files."""
        mp, log = self._paths(mountpoint)
        if argv is None:
            argv = self.argv(bucket, prefix, mp, options, extra_args, foreground=False)
        env = self.s3.env_for_ckptfs() if env is None else env
        t0 = time.monotonic()
        if pipes:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    env=env)
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                self._register_daemon(mp, log, argv)
                raise MountError(f"`{helpers.cmd_str(argv)}` did not return (with "
                                 f"its stdout/stderr on pipes) within {timeout}s")
            rc = proc.returncode
            out = out.decode(errors="replace")
            err = err.decode(errors="replace")
        else:
            outp, errp = log.with_suffix(".out"), log
            with open(outp, "wb") as o, open(errp, "wb") as e:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=o,
                                        stderr=e, env=env)
            try:
                rc = proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                self._register_daemon(mp, log, argv)
                raise MountError(f"`{helpers.cmd_str(argv)}` did not return within "
                                 f"{timeout}s\n{file_tail(errp)}")
            out = outp.read_text(errors="replace")
            err = errp.read_text(errors="replace")
        res = subprocess.CompletedProcess(argv, rc, out, err)
        res.elapsed = time.monotonic() - t0
        res.mounted_on_return = is_fuse_mount(mp)
        m = None
        if res.mounted_on_return or mount_entry(mp):
            m = self._register_daemon(mp, log, argv)
        return res, m

    def _register_daemon(self, mp, log, argv):
        m = Mount(mp, None, log, argv, daemon=True)
        self.mounts.append(m)
        _LIVE_MOUNTS[str(mp)] = None
        return m

    def cleanup(self):
        problems = []
        for m in reversed(self.mounts):
            ps = m.unmount()
            if ps:
                problems.append(f"{m.path}: {'; '.join(ps)}\n"
                                f"argv: {helpers.cmd_str(m.argv)}\n"
                                f"--- log tail ({m.log}) ---\n{m.log_tail()}")
        self.mounts = []
        return problems


@pytest.fixture
def mount(s3server, tmp_path, request):
    """mount(bucket, prefix="", options=(), extra_args=()) -> Mount.

    Runs `ckptfs mount s3://BUCKET[/PREFIX] MP -f --endpoint URL --region
    us-east-1 [-o ...]` with the test keys in the environment; waits for the
    mount.  At teardown: fusermount3 -u, wait for exit; a crash or non-zero
    exit fails the test.  mount.daemon(...) runs it without -f."""
    mounter = Mounter(s3server, tmp_path / "mounts", _test_hint(request))
    request.node._ckptfs_mounter = mounter
    yield mounter
    problems = mounter.cleanup()
    if problems:
        pytest.fail("ckptfs did not shut down cleanly:\n" + "\n".join(problems),
                    pytrace=False)


@pytest.fixture(scope="module")
def module_mounter(s3server, tmp_path_factory, request):
    """Like `mount`, for module-scoped mounts (one mount shared by the tests
    of a module)."""
    mounter = Mounter(s3server, tmp_path_factory.mktemp("mounts"),
                      request.module.__name__)
    request.module._ckptfs_mounter = mounter
    yield mounter
    problems = mounter.cleanup()
    if problems:
        pytest.fail("ckptfs did not shut down cleanly:\n" + "\n".join(problems),
                    pytrace=False)


# --------------------------------------------------------------------------
# Watchdog: a hung FUSE request would hang the test process forever.  After
# the test's timeout, kill the ckptfs processes of the test (and of its
# module): pending requests then fail with ENOTCONN and the test fails.

@pytest.fixture(autouse=True)
def _watchdog(request):
    marker = request.node.get_closest_marker("timeout")
    limit = float(marker.args[0]) if marker else DEFAULT_TIMEOUT
    fired = []

    def fire():
        fired.append(True)
        sys.stderr.write(f"\n[watchdog] {request.node.nodeid} exceeded {limit:.0f}s; "
                         "killing its ckptfs processes\n")
        for holder in (request.node, request.module):
            mounter = getattr(holder, "_ckptfs_mounter", None)
            if not mounter:
                continue
            for m in mounter.mounts:
                m.expect_clean_exit = False
                for pid in m.pids():
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                e = m.__dict__.get("entry") or mount_entry(m.path)
                if e:
                    major, minor = e["dev"].split(":")
                    try:
                        with open(f"/sys/fs/fuse/connections/{minor}/abort", "w") as f:
                            f.write("1")
                    except OSError:
                        pass
    t = threading.Timer(limit, fire)
    t.daemon = True
    t.start()
    yield
    t.cancel()
    if fired:
        pytest.fail(f"test exceeded its {limit:.0f}s watchdog (ckptfs hung?)",
                    pytrace=False)


def pytest_report_header(config):
    return [f"aws cli: {AWS_CLI}", f"S3 server: {S3_SERVER}"]
