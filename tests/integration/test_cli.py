"""The command line: --help/--version, daemon mode, option spellings,
credentials from profiles, debug logging without secrets, clean shutdown."""

import os
import re
import signal
import subprocess
import time

import pytest

import helpers
from helpers import CKPTFS_BIN, run


def test_version():
    p = run([CKPTFS_BIN, "--version"])
    assert p.stdout.strip() == "ckptfs 0.1.0"


def test_help():
    p = run([CKPTFS_BIN, "--help"])
    assert "mount" in p.stdout and "usage" in p.stdout.lower()


def test_mount_help_lists_options():
    p = run([CKPTFS_BIN, "mount", "--help"], check=False)
    assert p.returncode == 0, p.stderr
    text = p.stdout + p.stderr
    for word in ("-f", "-d", "--endpoint", "--region", "--profile", "-o",
                 "allow_other", "uid=", "gid=", "umask=", "addressing=",
                 "dir_timeout=", "nonempty"):
        assert word in text, word


# --------------------------------------------------------------------------
# daemon mode

def test_daemon_mode_returns_once_mounted(s3server, bucket, mount):
    s3server.put(bucket, "hello.txt", b"hello")
    res, m = mount.daemon(bucket)
    assert res.returncode == 0, res.stderr
    assert res.mounted_on_return, "ckptfs returned before the mount was live"
    assert m is not None
    # usable immediately
    assert (m / "hello.txt").read_bytes() == b"hello"
    pids = helpers.ckptfs_pids_for(m.path)
    assert pids, "no ckptfs daemon process serves the mount"
    problems = m.unmount()
    assert not problems, problems
    assert not helpers.is_fuse_mount(m.path)


def test_daemon_mode_does_not_hold_the_callers_pipes(s3server, bucket, mount):
    """`out=$(ckptfs mount ...)` in a script must return: the daemon may not
    keep the caller's stdout/stderr open."""
    res, m = mount.daemon(bucket, pipes=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.mounted_on_return
    assert os.listdir(m.path) == []


def test_daemon_mode_error_exits_1(s3server, mount):
    res, m = mount.daemon("no-such-bucket-for-daemon")
    assert m is None and not res.mounted_on_return
    assert res.returncode == 1
    assert any(l.startswith("ckptfs: ") for l in res.stderr.splitlines()), res.stderr


# --------------------------------------------------------------------------
# option spellings

def test_endpoint_and_region_as_mount_options(s3server, bucket, mount):
    s3server.put(bucket, "x", b"x")
    argv = [CKPTFS_BIN, "mount", f"s3://{bucket}", None, "-f",
            "-o", ",".join([f"endpoint={s3server.endpoint}", "region=us-east-1",
                            *helpers.default_options()])]
    mp = mount.workdir / "opt-mp"
    mp.mkdir(parents=True)
    argv[3] = str(mp)
    m = mount(bucket, mountpoint=mp, argv=argv)
    assert os.listdir(m.path) == ["x"]


@pytest.mark.parametrize("addressing", ["path", "auto"])
def test_addressing_option(s3server, bucket, mount, addressing):
    s3server.put(bucket, "x", b"x")
    m = mount(bucket, options=(f"addressing={addressing}",))
    assert (m / "x").read_bytes() == b"x"


def test_options_after_and_before_positionals(s3server, bucket, mount):
    s3server.put(bucket, "x", b"x")
    mp = mount.workdir / "order-mp"
    mp.mkdir(parents=True)
    argv = [CKPTFS_BIN, "mount", "-f", "--endpoint", s3server.endpoint,
            "-o", ",".join(["region=us-east-1", *helpers.default_options()]),
            f"s3://{bucket}", str(mp)]
    m = mount(bucket, mountpoint=mp, argv=argv)
    assert os.listdir(m.path) == ["x"]


def test_mount_table_entry(s3server, bucket, mount):
    m = mount(bucket, prefix="some/prefix")
    e = helpers.mount_entry(m.path)
    assert e["fstype"] in ("fuse.ckptfs", "fuse"), e
    assert bucket in e["source"], e
    # df / statvfs work on the mount
    run(["df", m.path])
    sv = os.statvfs(m.path)
    assert sv.f_namemax >= 255


@pytest.mark.parametrize("prefix", ["a,b", "sp ace,x=y\\z", "c,,d\\,e=f g"],
                         ids=["comma", "comma-space-equals-backslash", "mixed"])
def test_prefix_with_option_syntax_characters(s3server, bucket, mount, prefix):
    """The source is data, not part of an option string: a prefix holding
    ',' ' ' '=' '\\' (all legal in keys) mounts, reads, and takes writes."""
    s3server.put(bucket, f"{prefix}/f.txt", b"under the odd prefix")
    s3server.put(bucket, "a/outside.txt", b"not under it")
    m = mount(bucket, prefix=prefix)
    assert os.listdir(m.path) == ["f.txt"]
    with open(os.path.join(m.path, "f.txt"), "rb") as f:
        assert f.read() == b"under the odd prefix"
    e = helpers.mount_entry(m.path)
    assert e["source"] == f"s3://{bucket}/{prefix}/", e
    with open(os.path.join(m.path, "new.txt"), "wb") as f:
        f.write(b"written")
    run([CKPTFS_BIN, "sync", m.path])
    assert helpers.s3_get(s3server.client(), bucket, f"{prefix}/new.txt") == b"written"


# --------------------------------------------------------------------------
# credentials from profiles

def _profile_env(s3server, tmp_path, text):
    creds = tmp_path / "credentials"
    creds.write_text(text)
    conf = tmp_path / "config"
    conf.write_text("")
    # no AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY: only the files
    return s3server.env_without_keys(AWS_SHARED_CREDENTIALS_FILE=creds,
                                     AWS_CONFIG_FILE=conf)


def _creds(name, s3server):
    return (f"[{name}]\naws_access_key_id = {s3server.access_key}\n"
            f"aws_secret_access_key = {s3server.secret_key}\n")


def test_profile_flag(s3server, bucket, mount, tmp_path):
    s3server.put(bucket, "p", b"p")
    env = _profile_env(s3server, tmp_path, "[default]\naws_access_key_id = nope\n"
                       "aws_secret_access_key = nope\n\n" + _creds("ckpt", s3server))
    m = mount(bucket, extra_args=("--profile", "ckpt"), env=env)
    assert os.listdir(m.path) == ["p"]


def test_profile_option(s3server, bucket, mount, tmp_path):
    s3server.put(bucket, "p", b"p")
    env = _profile_env(s3server, tmp_path, _creds("other", s3server))
    m = mount(bucket, options=("profile=other",), env=env)
    assert os.listdir(m.path) == ["p"]


def test_default_profile_from_credentials_file(s3server, bucket, mount, tmp_path):
    s3server.put(bucket, "p", b"p")
    env = _profile_env(s3server, tmp_path, _creds("default", s3server))
    m = mount(bucket, env=env)
    assert os.listdir(m.path) == ["p"]


def test_aws_profile_variable(s3server, bucket, mount, tmp_path):
    s3server.put(bucket, "p", b"p")
    env = _profile_env(s3server, tmp_path, _creds("viaenv", s3server))
    env["AWS_PROFILE"] = "viaenv"
    m = mount(bucket, env=env)
    assert os.listdir(m.path) == ["p"]


# --------------------------------------------------------------------------
# logging

REQUEST_LINE = re.compile(r"\b(GET|HEAD)\b")


@pytest.mark.parametrize("how", ["-d", "-o debug"])
def test_debug_log_has_requests_but_no_secret(s3server, bucket, mount, how):
    s3server.put(bucket, "dir/file.bin", b"z" * 10000)
    extra = ("-d",) if how == "-d" else ()
    opts = ("debug",) if how != "-d" else ()
    m = mount(bucket, extra_args=extra, options=opts)
    os.listdir(m / "dir")
    assert (m / "dir/file.bin").read_bytes() == b"z" * 10000
    m.unmount()
    log = m.log_text()
    assert REQUEST_LINE.search(log), f"no request lines in the debug log:\n{m.log_tail()}"
    assert s3server.secret_key not in log, "the secret key appears in the debug log"
    # nor any long piece of it
    sk = s3server.secret_key
    assert not any(sk[i:i + 12] in log for i in range(len(sk) - 11)), \
        "part of the secret key appears in the debug log"


def test_quiet_by_default(s3server, bucket, mount):
    s3server.put(bucket, "f", b"f")
    m = mount(bucket)
    (m / "f").read_bytes()
    m.unmount()
    log = m.log_text()
    assert s3server.secret_key not in log
    assert len(log.splitlines()) < 50, m.log_tail()


# --------------------------------------------------------------------------
# shutdown

@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_unmounts_foreground_mount(s3server, bucket, mount, sig):
    """Ctrl-C, or `systemctl stop` of a foreground mount: unmount and exit 0
    (a non-zero status makes systemd report the unit as failed)."""
    s3server.put(bucket, "f", b"f")
    m = mount(bucket)
    m.expect_clean_exit = False  # checked here
    m.proc.send_signal(sig)
    try:
        rc = m.proc.wait(20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"ckptfs still running 20 s after {sig.name}")
    assert rc == 0, f"exit status {rc} after {sig.name}\n{m.log_tail()}"
    assert helpers.wait_until(lambda: not helpers.mount_entry(m.path), 10), \
        "still in the mount table"


def test_unmount_while_a_file_is_open_is_refused_then_works(s3server, bucket, mount):
    s3server.put(bucket, "f", b"f" * 1000)
    m = mount(bucket)
    f = open(m / "f", "rb")
    try:
        p = subprocess.run(["fusermount3", "-u", str(m.path)], capture_output=True, text=True)
        assert p.returncode != 0 and "busy" in p.stderr.lower(), p.stderr
        assert f.read() == b"f" * 1000
    finally:
        f.close()
    assert not m.unmount()


def test_remount_after_unmount(s3server, bucket, mount):
    s3server.put(bucket, "f", b"again")
    mp = mount.workdir / "re"
    mp.mkdir(parents=True)
    for _ in range(3):
        m = mount(bucket, mountpoint=mp)
        assert (m / "f").read_bytes() == b"again"
        assert not m.unmount()
