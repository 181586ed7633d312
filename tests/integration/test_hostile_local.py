"""Hostile and careless local users (issue 23, points 5 and 6): one daemon
per mountpoint, a control socket that only its owner can reach or replace,
and control clients that connect and say nothing.

What users see: a second `ckptfs mount` on a mountpoint ckptfs already
serves is refused at once (with `nonempty` too) and the first mount's
`status` and `sync` go on working; a socket directory another user made or
can write is refused with its name; `ckptfs sync` never believes a socket
someone else listens on; a silent client is dropped after a few seconds
and never keeps the daemon from unmounting and exiting."""

import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

import helpers
from helpers import CKPTFS_BIN, run

NOBODY = 65534   # the victim: a user mounting without XDG_RUNTIME_DIR
OTHER = 65533    # another local user
REFUSED_WITHIN = 2.0   # seconds: a refusal needs no S3 request
REQUEST_TIMEOUT = 5    # ctl/ctl.h CTL_REQUEST_TIMEOUT_S


def _as(uid, cmd):
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
            *[str(c) for c in cmd]]


def _sock_name(mountpoint):
    real = os.path.realpath(mountpoint)
    return hashlib.sha256(real.encode()).hexdigest()[:32] + ".sock"


def _ckptfs_entries(mountpoint):
    real = os.path.realpath(mountpoint)
    n = 0
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            sep = parts.index("-")
            if (helpers._unescape_mountinfo(parts[4]) == real
                    and parts[sep + 1] == "fuse.ckptfs"):
                n += 1
    return n


def _refused(argv, env, mountpoint, timeout=15, within=REFUSED_WITHIN):
    """Runs a mount that must be refused: exit 1 within `within` s,
    a `ckptfs: ` line on stderr, and no further mount on mountpoint.  Cleans
    up what an old binary stacked there before failing."""
    before = _ckptfs_entries(mountpoint)
    t0 = time.monotonic()
    p = subprocess.Popen([str(a) for a in argv], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGTERM)
        out, err = p.communicate()
    elapsed = time.monotonic() - t0
    err = err.decode(errors="replace")
    stacked = _ckptfs_entries(mountpoint) - before
    for _ in range(max(stacked, 0)):
        subprocess.run(["fusermount3", "-u", str(mountpoint)], capture_output=True)
    assert stacked <= 0, (f"a second ckptfs mount was stacked on {mountpoint} "
                          f"(exit {p.returncode})\nstderr: {err}")
    assert p.returncode == 1, f"exit {p.returncode}, expected 1\nstderr: {err}"
    lines = [l for l in err.splitlines() if l.startswith("ckptfs: ")]
    assert lines, f"no 'ckptfs: ' line on stderr:\n{err}"
    assert elapsed < within, f"refused after {elapsed:.1f}s: {err}"
    return "\n".join(lines)


def _write_and_sync(s3server, bucket, m, name):
    d = m / name
    d.mkdir()
    (d / "w.bin").write_bytes(b"x" * 4096)
    helpers.ckptfs_sync(m, timeout=60)
    assert s3server.client().get_object(
        Bucket=bucket, Key=f"{name}/w.bin")["Body"].read() == b"x" * 4096


# --------------------------------------------------------------------------
# One daemon per mountpoint


def test_second_mount_on_a_served_mountpoint_is_refused(s3server, bucket, mount):
    """Before: the same URL mounted again on a served (empty) mountpoint
    stacked a second daemon; once it was unmounted, the first one's control
    socket was gone while it still served writes."""
    m = mount(bucket)
    for opts in ((), ("nonempty",)):
        argv = mount.argv(bucket, "", m.path, options=opts, foreground=False)
        msg = _refused(argv, s3server.env_for_ckptfs(), m.path)
        assert "already a ckptfs mount" in msg and f"s3://{bucket}" in msg, msg
        assert "fusermount3 -u" in msg, msg
    assert _ckptfs_entries(m.path) == 1
    st = helpers.ckptfs_status(m)
    assert st["pid"] == m.proc.pid
    _write_and_sync(s3server, bucket, m, "after-refusal")


def test_a_daemon_that_cannot_see_the_mount_is_refused_too(s3server, bucket, mount):
    """A daemon that does not find the first mount in its mount table (a
    mount namespace where it was detached) still finds it by the socket's
    lock: refused, naming the serving pid, and the first mount's socket
    survives its exit."""
    m = mount(bucket)
    argv = mount.argv(bucket, "", m.path)
    script = ('umount -l "$1" && shift && exec "$@"')
    cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
           "sh", str(m.path), *argv]
    # refused after waiting a second for a holder letting go (CLAIM_WAIT_S)
    msg = _refused(cmd, s3server.env_for_ckptfs(), m.path, within=REFUSED_WITHIN + 1)
    assert "already served by a ckptfs daemon" in msg, msg
    assert f"pid {m.proc.pid}" in msg, msg
    assert helpers.ckptfs_status(m)["pid"] == m.proc.pid
    _write_and_sync(s3server, bucket, m, "after-namespace")


def test_unmount_then_mount_again_at_once(s3server, bucket, mount):
    """`fusermount3 -u M` and at once `ckptfs mount ... M` again: the new
    mount comes up while the old daemon still drains what was written, and
    its control socket answers after the old daemon has exited."""
    m = mount(bucket, options=("commit_delay=600",))
    (m / "old").mkdir()
    (m / "old" / "a").write_bytes(b"old")
    run(["fusermount3", "-u", m.path])
    m2 = mount(bucket, mountpoint=m.path)
    assert m.proc.wait(30) == 0
    assert helpers.ckptfs_status(m2)["pid"] == m2.proc.pid
    _write_and_sync(s3server, bucket, m2, "new")
    assert (m2 / "old" / "a").read_bytes() == b"old"


# --------------------------------------------------------------------------
# Silent clients


def test_silent_client_is_dropped_and_never_holds_the_unmount(s3server, bucket, mount):
    m = mount(bucket, options=("commit_delay=600",))
    sock = Path("/run/ckptfs") / _sock_name(m.path)
    # a pending write the unmount must drain
    (m / "ck").mkdir()
    (m / "ck" / "a.bin").write_bytes(b"pending" * 1000)

    # a client that says nothing is closed after the request timeout,
    # with a line saying why
    quiet = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    quiet.connect(str(sock))
    quiet.settimeout(REQUEST_TIMEOUT + 10)
    t0 = time.monotonic()
    got = b""
    while True:
        b = quiet.recv(4096)
        if not b:
            break
        got += b
    waited = time.monotonic() - t0
    quiet.close()
    assert REQUEST_TIMEOUT - 1 <= waited <= REQUEST_TIMEOUT + 3, waited
    assert "no request within" in json.loads(got.splitlines()[0])["error"], got

    # meanwhile the mount answered others
    assert helpers.ckptfs_status(m)["pid"] == m.proc.pid

    # silent clients at unmount time: the daemon drains and exits at once
    silent = []
    for _ in range(3):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(str(sock))
        silent.append(s)
    t0 = time.monotonic()
    run(["fusermount3", "-u", m.path])
    try:
        rc = m.proc.wait(REQUEST_TIMEOUT - 1)
    except subprocess.TimeoutExpired:
        rc = None
    exited = time.monotonic() - t0
    for s in silent:
        s.close()
    assert rc == 0, (f"ckptfs still running {exited:.1f}s after the unmount "
                     f"with silent control clients\n{m.log_tail()}")
    body = s3server.client().get_object(Bucket=bucket, Key="ck/a.bin")["Body"].read()
    assert body == b"pending" * 1000
    assert not sock.exists()


# --------------------------------------------------------------------------
# The control socket's directory and peer (a user without XDG_RUNTIME_DIR)


@pytest.fixture
def victim(s3server):
    """A working area for NOBODY: a traversable directory with a
    mountpoint and a cache of its own, and an environment without
    XDG_RUNTIME_DIR.  /tmp/ckptfs-NOBODY is removed before and after,
    and is this test's alone while it runs: another test session on the
    machine (a second run beside this one) waits on a lock."""
    lock = open("/tmp/ckptfs-hostile-victim.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    top = Path(tempfile.mkdtemp(prefix="ckptfs-hostile-", dir="/tmp"))
    os.chmod(top, 0o755)
    for d in ("mnt", "cache", "home"):
        (top / d).mkdir(mode=0o700)
        os.chown(top / d, NOBODY, NOBODY)
    tmpdir = Path(f"/tmp/ckptfs-{NOBODY}")
    shutil.rmtree(tmpdir, ignore_errors=True)
    if tmpdir.is_symlink():
        tmpdir.unlink()
    home = top / "home"
    env = s3server.env_for_ckptfs(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"),
                                  AWS_CONFIG_FILE=str(home / "config"),
                                  AWS_SHARED_CREDENTIALS_FILE=str(home / "credentials"))
    env.pop("XDG_RUNTIME_DIR", None)
    yield top, env, tmpdir
    if tmpdir.is_symlink():
        tmpdir.unlink()
    shutil.rmtree(tmpdir, ignore_errors=True)
    shutil.rmtree(top, ignore_errors=True)
    lock.close()


def _victim_argv(mount, bucket, top, foreground=True):
    argv = mount.argv(bucket, "", top / "mnt",
                      options=(f"cache_dir={top / 'cache'}", "commit_delay=600"),
                      foreground=foreground)
    return _as(NOBODY, argv)


@pytest.mark.parametrize("case", ["other_owner", "open_mode", "symlink"])
def test_unsafe_socket_directory_is_refused(s3server, bucket, mount, victim, case):
    """Before: another user who made /tmp/ckptfs-UID first (0777) could
    move the victim's socket aside and listen in its place."""
    top, env, tmpdir = victim
    if case == "other_owner":
        tmpdir.mkdir()
        os.chown(tmpdir, OTHER, OTHER)
        os.chmod(tmpdir, 0o777)
        want = f"owned by uid {OTHER}"
    elif case == "open_mode":
        tmpdir.mkdir()
        os.chown(tmpdir, NOBODY, NOBODY)
        os.chmod(tmpdir, 0o777)
        want = "mode 0777"
    else:
        (top / "elsewhere").mkdir(mode=0o700)
        os.chown(top / "elsewhere", NOBODY, NOBODY)
        tmpdir.symlink_to(top / "elsewhere")
        want = "symbolic link"
    before = (os.lstat(tmpdir).st_uid, os.lstat(tmpdir).st_mode)
    msg = _refused(_victim_argv(mount, bucket, top, foreground=False), env, top / "mnt")
    assert str(tmpdir) in msg and want in msg, msg
    assert "XDG_RUNTIME_DIR" in msg, msg
    # refused, not repaired
    assert (os.lstat(tmpdir).st_uid, os.lstat(tmpdir).st_mode) == before


@pytest.fixture
def run_dir():
    """A directory beside /run/ckptfs (one file system: a socket can be
    linked and renamed between them) that every user can write."""
    d = Path(tempfile.mkdtemp(prefix="ckptfs-hostile-", dir="/run"))
    os.chmod(d, 0o777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_client_never_believes_another_users_socket(s3server, bucket, mount, run_dir):
    """Another user's listener in the place of a mount's socket (the old
    hijack moved the socket aside; here root puts it there): `ckptfs sync`
    refuses it, naming the uid, instead of printing success for a
    checkpoint still pending.  And a client of another uid that reaches
    the daemon's socket gets no answer."""
    m = mount(bucket, options=("commit_delay=600",))
    sock = Path("/run/ckptfs") / _sock_name(m.path)
    (m / "ck").mkdir()
    (m / "ck" / "a").write_bytes(b"data\n")

    # another user's client, through a link to the socket: closed unanswered
    os.link(sock, run_dir / "link.sock")
    os.chmod(run_dir / "link.sock", 0o666)  # the socket inode: both names
    probe = ("import socket,sys\n"
             "s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
             "try:\n"
             "    s.sendall(b'{\"cmd\":\"status\"}\\n'); s.settimeout(10)\n"
             "    got=s.recv(4096)\n"
             "except (BrokenPipeError, ConnectionResetError):\n"
             "    got=b''\n"
             "sys.stdout.write(repr(got))\n")
    p = run(_as(OTHER, ["/usr/bin/python3", "-c", probe, run_dir / "link.sock"]))
    assert p.stdout == "b''", p.stdout
    os.chmod(sock, 0o600)
    assert helpers.ckptfs_status(m)["pid"] == m.proc.pid

    # another user's listener in the socket's place
    fake = ("import socket,sys,os\n"
            "s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); "
            "os.chmod(sys.argv[1], 0o777); s.listen(4)\n"
            "print('ready', flush=True)\n"
            "while True:\n"
            "    c,_=s.accept()\n"
            "    try:\n"
            "        c.recv(4096)\n"
            "        c.sendall(b'{\"bytes_done\":0,\"bytes_total\":0,"
            "\"writable\":true,\"pid\":1,\"done\":true}\\n')\n"
            "    except OSError:\n"
            "        pass\n"
            "    c.close()\n")
    evil = subprocess.Popen(_as(OTHER, ["/usr/bin/python3", "-c", fake,
                                        run_dir / "evil.sock"]),
                            stdout=subprocess.PIPE, text=True)
    try:
        assert evil.stdout.readline().strip() == "ready"
        os.rename(run_dir / "evil.sock", sock)
        p = run([CKPTFS_BIN, "sync", m.path], check=False, timeout=30)
        assert p.returncode != 0, f"sync believed another user's socket: {p.stdout}"
        assert f"uid {OTHER}" in p.stderr and "not trusting" in p.stderr, p.stderr
        p = run([CKPTFS_BIN, "status", m.path], check=False, timeout=30)
        assert p.returncode != 0 and f"uid {OTHER}" in p.stderr, p.stderr
        # and the checkpoint is still pending (its marker is there)
        assert any(k.startswith(".ckptfs-pending/ck/") for k in s3server.keys(bucket))
    finally:
        evil.kill()
        evil.wait()
    # the daemon is unharmed: its unmount commits what was pending, and it
    # leaves the socket in its place alone
    try:
        assert not m.unmount()
        assert sock.exists()
    finally:
        sock.unlink(missing_ok=True)
    body = s3server.client().get_object(Bucket=bucket, Key="ck/a")["Body"].read()
    assert body == b"data\n"
