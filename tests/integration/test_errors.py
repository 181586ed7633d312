"""Mount failures: each exits 1 within a bounded time, says what is wrong on
stderr in a line beginning "ckptfs: ", never prints the secret, and leaves
no mount or process behind."""

import os
import socket
import subprocess
import time

import pytest

import helpers
from helpers import CKPTFS_BIN

FAST = 15        # seconds: errors found without talking to S3
NETWORK = 60     # seconds: errors reported by (or about) the server


def _closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    return port


class Failure:
    def __init__(self, rc, out, err, elapsed):
        self.rc, self.stdout, self.stderr, self.elapsed = rc, out, err, elapsed

    def message_lines(self):
        return [l for l in self.stderr.splitlines() if l.startswith("ckptfs: ")]


def expect_failure(argv, env, mountpoint, limit):
    """Run ckptfs, expect exit 1 with a "ckptfs: " message within `limit`
    seconds and nothing mounted or running afterwards."""
    t0 = time.monotonic()
    p = subprocess.Popen([str(a) for a in argv], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        out, err = p.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        _cleanup(mountpoint)
        pytest.fail(f"`{helpers.cmd_str(argv)}` still running after {limit}s\n"
                    f"stderr: {helpers.tail(err)}", pytrace=False)
    elapsed = time.monotonic() - t0
    mounted = mountpoint is not None and helpers.mount_entry(mountpoint)
    left = helpers.ckptfs_pids_for(mountpoint) if mountpoint is not None else []
    if mounted or left:
        _cleanup(mountpoint)
    f = Failure(p.returncode, out.decode(errors="replace"),
                err.decode(errors="replace"), elapsed)
    assert not mounted, f"a mount was left behind on {mountpoint}: {mounted}"
    assert not left, f"ckptfs processes left behind: {left}"
    assert f.rc == 1, f"exit status {f.rc}, expected 1\nstderr: {f.stderr}"
    assert f.message_lines(), f"no line beginning 'ckptfs: ' on stderr:\n{f.stderr!r}"
    return f


def _cleanup(mp):
    if mp is None:
        return
    subprocess.run(["fusermount3", "-u", "-z", str(mp)], capture_output=True)
    for pid in helpers.ckptfs_pids_for(mp):
        try:
            os.kill(pid, 9)
        except OSError:
            pass


@pytest.fixture(params=["foreground", "daemon"])
def mode(request):
    return request.param


def _argv(url, mp, endpoint, mode, *extra):
    argv = [CKPTFS_BIN, "mount", url, str(mp), "--endpoint", endpoint,
            "--region", "us-east-1", *extra]
    if "-o" not in extra and helpers.default_options():
        argv += ["-o", ",".join(helpers.default_options())]
    if mode == "foreground":
        argv.append("-f")
    return argv


@pytest.fixture
def mp(tmp_path):
    d = tmp_path / "mnt"
    d.mkdir()
    return d


# --------------------------------------------------------------------------

def test_missing_bucket(s3server, mp, mode):
    name = "no-such-bucket-ckptfs-test"
    f = expect_failure(_argv(f"s3://{name}", mp, s3server.endpoint, mode),
                       s3server.env_for_ckptfs(), mp, NETWORK)
    assert "NoSuchBucket" in f.stderr or name in f.stderr, f.stderr


def test_wrong_secret_key(s3server, bucket, mp, mode):
    wrong = "WRONG-secret-0123456789-abcdefghijkl"
    env = s3server.env_for_ckptfs(AWS_SECRET_ACCESS_KEY=wrong)
    f = expect_failure(_argv(f"s3://{bucket}", mp, s3server.endpoint, mode),
                       env, mp, NETWORK)
    assert "SignatureDoesNotMatch" in f.stderr, f.stderr
    assert wrong not in f.stderr and wrong not in f.stdout
    assert s3server.secret_key not in f.stderr


def test_wrong_access_key(s3server, bucket, mp):
    env = s3server.env_for_ckptfs(AWS_ACCESS_KEY_ID="NOSUCHACCESSKEY")
    f = expect_failure(_argv(f"s3://{bucket}", mp, s3server.endpoint, "foreground"),
                       env, mp, NETWORK)
    assert "InvalidAccessKeyId" in f.stderr, f.stderr
    assert s3server.secret_key not in f.stderr


def test_unreachable_endpoint(s3server, bucket, mp, mode):
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    f = expect_failure(_argv(f"s3://{bucket}", mp, endpoint, mode),
                       s3server.env_for_ckptfs(), mp, NETWORK)
    assert s3server.secret_key not in f.stderr


def test_mountpoint_missing(s3server, bucket, tmp_path, mode):
    missing = tmp_path / "does-not-exist"
    f = expect_failure(_argv(f"s3://{bucket}", missing, s3server.endpoint, mode),
                       s3server.env_for_ckptfs(), None, FAST)
    assert str(missing) in f.stderr or "No such file" in f.stderr, f.stderr
    assert not missing.exists()


def test_mountpoint_is_a_file(s3server, bucket, tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    expect_failure(_argv(f"s3://{bucket}", target, s3server.endpoint, "foreground"),
                   s3server.env_for_ckptfs(), target, FAST)
    assert target.read_text() == "x"


def test_mountpoint_not_empty(s3server, bucket, mp, mode):
    (mp / "existing").write_text("keep me")
    f = expect_failure(_argv(f"s3://{bucket}", mp, s3server.endpoint, mode),
                       s3server.env_for_ckptfs(), mp, FAST)
    assert "empty" in f.stderr.lower(), f.stderr
    assert (mp / "existing").read_text() == "keep me"


def test_mountpoint_not_empty_with_nonempty_option(s3server, bucket, mount, tmp_path):
    s3server.put(bucket, "remote.txt", b"remote")
    mp = tmp_path / "busy"
    mp.mkdir()
    (mp / "existing").write_text("hidden while mounted")
    m = mount(bucket, mountpoint=mp, options=("nonempty",))
    assert os.listdir(m.path) == ["remote.txt"]
    m.unmount()
    assert (mp / "existing").read_text() == "hidden while mounted"


@pytest.mark.parametrize("url", ["s3:/x", "http://b", "s3://", "s3:///prefix",
                                 "bucket-without-scheme", "s3//b", "", "S3:",
                                 "s3://ab", "s3://Bad_Bucket"])
def test_malformed_url(s3server, mp, url):
    f = expect_failure(_argv(url, mp, s3server.endpoint, "foreground"),
                       s3server.env_for_ckptfs(), mp, FAST)
    assert f.elapsed < FAST


@pytest.mark.parametrize("opts", ["no_such_option", "umask=999", "umask=abc",
                                  "uid=-5x", "addressing=sideways",
                                  "entry_timeout=soon", "log=printer"])
def test_bad_mount_option(s3server, bucket, mp, opts):
    f = expect_failure(_argv(f"s3://{bucket}", mp, s3server.endpoint, "foreground",
                             "-o", opts), s3server.env_for_ckptfs(), mp, FAST)
    assert opts.split("=")[0] in f.stderr, f.stderr


def test_bad_endpoint_url(s3server, bucket, mp):
    expect_failure(_argv(f"s3://{bucket}", mp, "not a url", "foreground"),
                   s3server.env_for_ckptfs(), mp, FAST)


def test_missing_mountpoint_argument(s3server, bucket):
    expect_failure([CKPTFS_BIN, "mount", f"s3://{bucket}"],
                   s3server.env_for_ckptfs(), None, FAST)


def test_unknown_command():
    expect_failure([CKPTFS_BIN, "frobnicate"], helpers.clean_env(), None, FAST)


def test_debug_output_of_a_failure_has_no_secret(s3server, bucket, mp):
    wrong = "WRONG-secret-for-debug-0123456789abcd"
    env = s3server.env_for_ckptfs(AWS_SECRET_ACCESS_KEY=wrong)
    f = expect_failure(_argv(f"s3://{bucket}", mp, s3server.endpoint, "foreground", "-d"),
                       env, mp, NETWORK)
    assert wrong not in f.stderr and wrong not in f.stdout


# --------------------------------------------------------------------------
# every mount option, from the option table (`ckptfs mount --list-options`:
# NAME KIND MIN MAX CHOICES FLAGS), with values it must refuse

def _option_table():
    try:
        p = subprocess.run([str(CKPTFS_BIN), "mount", "--list-options"],
                           capture_output=True, text=True, timeout=30)
    except OSError:
        return []
    rows = []
    for line in p.stdout.splitlines():
        name, kind, lo, hi, choices, flags = line.split("\t")
        rows.append({"name": name, "kind": kind,
                     "min": None if lo == "-" else float(lo),
                     "max": None if hi == "-" else float(hi),
                     "choices": [] if choices == "-" else choices.split("|"),
                     "above_min": flags == "above_min"})
    return rows


OPTION_TABLE = _option_table()
NOT_NUMBERS = ["nan", "NaN", "inf", "-inf", "infinity", "-1", "-5", "1e400",
               "99999999999999999999", "10x", "abc", " 1", "1 ", "0x", "--1", "."]


def _out_of_range(row):
    lo, hi = row["min"], row["max"]
    if row["kind"] == "octal":
        return [oct(int(hi) + 1)[2:], "8", "999"]
    if row["kind"] == "seconds":
        out = [repr(hi + 1), repr(hi * 1000)]
    else:
        out = [str(int(hi) + 1), str(int(hi) * 2)]
    if row["above_min"]:
        out.append(repr(lo) if row["kind"] == "seconds" else str(int(lo)))
    elif lo > 0:
        out.append(str(int(lo) - 1))
    return out


def bad_values(row):
    """Values the row's option must refuse; None: the name without '='."""
    kind = row["kind"]
    if kind in ("flag", "ignored"):
        return ["1", "", "yes"]
    vals = [None, ""]
    if kind in ("seconds", "integer", "octal", "size"):
        vals += NOT_NUMBERS + _out_of_range(row)
    if row["choices"]:
        c = row["choices"][0]
        vals += ["sideways", c.upper() if c.upper() != c else c + "x", c + " ", "nan"]
    if row["name"] == "metrics":
        vals += ["9464", "127.0.0.1:http", "127.0.0.1:70000"]
    if row["name"] == "complete":
        vals += ["a", "/x", "x/"]
    return vals


def test_option_table_is_what_help_shows():
    assert len(OPTION_TABLE) > 40, "ckptfs mount --list-options lists too little"
    help_text = run_help()
    for row in OPTION_TABLE:
        takes = row["kind"] not in ("flag", "ignored")
        word = row["name"] + ("=" if takes else "")
        assert word in help_text, f"--help lacks {word}"


def run_help():
    p = subprocess.run([str(CKPTFS_BIN), "mount", "--help"], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.mark.timeout(600)
@pytest.mark.parametrize("row", OPTION_TABLE or [None],
                         ids=[r["name"] for r in OPTION_TABLE] or ["no-table"])
def test_every_option_refuses_bad_values(s3server, bucket, mp, row):
    """Each bad value: exit 1 within two seconds, one "ckptfs: " line naming
    the option, nothing mounted."""
    assert row is not None, "ckptfs mount --list-options gave nothing"
    name = row["name"]
    for v in bad_values(row):
        item = name if v is None else f"{name}={v}"
        argv = _argv(f"s3://{bucket}", mp, s3server.endpoint, "foreground",
                     "-o", ",".join(helpers.default_options()), "-o", item)
        f = expect_failure(argv, s3server.env_for_ckptfs(), mp, FAST)
        # within a second or two (a sanitizer build starts slower)
        assert f.elapsed < 2 * helpers.SLOWDOWN, f"-o {item!r}: {f.elapsed:.1f}s"
        lines = f.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("ckptfs: "), \
            f"-o {item!r}: {f.stderr!r}"
        assert name in lines[0], f"-o {item!r}: {lines[0]!r}"


@pytest.mark.parametrize("item,says", [
    ("lease=0", "lease=0: must be a whole number of seconds from 1 to 86400"),
    ("lease=-5", "lease=-5: must be a whole number of seconds from 1 to 86400"),
    ("cache_size=nan", "cache_size=nan: must be a size from 0 to"),
    ("cache_size=1e400", "cache_size=1e400: must be a size"),
    ("cache_min_free=nan", "cache_min_free=nan: must be a size"),
    ("entry_timeout=1e400", "entry_timeout=1e400: must be a number of seconds from 0"),
    ("uid=-1", "uid=-1: must be a whole number from 0 to 4294967294"),
])
def test_issue_23_values_refused_with_their_range(s3server, bucket, mp, mode, item, says):
    f = expect_failure(_argv(f"s3://{bucket}", mp, s3server.endpoint, mode, "-o", item),
                       s3server.env_for_ckptfs(), mp, FAST)
    assert f.elapsed < 2, f.elapsed
    assert f"ckptfs: invalid value for mount option {says}" in f.stderr, f.stderr


# --------------------------------------------------------------------------
# cache_dir: ckptfs never changes the mode or owner of a directory it did
# not create; an existing one is used as it is only when it is safe (owned
# by the mounting user, not writable by group or others), else refused

def _mode(p):
    return os.stat(p).st_mode & 0o7777


@pytest.mark.parametrize("dmode", [0o1777, 0o777, 0o770, 0o720],
                         ids=["sticky-1777", "0777", "group-0770", "group-w-0720"])
def test_cache_dir_writable_by_others_is_refused_untouched(s3server, bucket, mp, tmp_path, dmode):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, dmode)
    (shared / "someone-elses").write_text("x")
    f = expect_failure(_argv(f"s3://{bucket}", mp, s3server.endpoint, "foreground",
                             "-o", f"cache_dir={shared}"),
                       s3server.env_for_ckptfs(), mp, FAST)
    assert f.elapsed < 5, f.elapsed
    assert _mode(shared) == dmode, oct(_mode(shared))
    assert sorted(os.listdir(shared)) == ["someone-elses"]
    msg = "\n".join(f.message_lines())
    assert str(shared) in msg and "writable by other users" in msg, f.stderr
    assert f"mode {dmode:04o}" in msg, f.stderr


def test_cache_dir_of_another_user_is_refused_untouched(s3server, bucket, mp, tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chmod(theirs, 0o700)
    os.chown(theirs, 65534, 65534)
    f = expect_failure(_argv(f"s3://{bucket}", mp, s3server.endpoint, "foreground",
                             "-o", f"cache_dir={theirs}"),
                       s3server.env_for_ckptfs(), mp, FAST)
    st = os.stat(theirs)
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (65534, 65534, 0o700)
    assert os.listdir(theirs) == []
    msg = "\n".join(f.message_lines())
    assert str(theirs) in msg and "owned by uid 65534" in msg, f.stderr


def test_safe_existing_cache_dir_is_used_as_it_is(s3server, bucket, mount, tmp_path):
    s3server.put(bucket, "f.txt", b"cached")
    mine = tmp_path / "mine"
    mine.mkdir()
    os.chmod(mine, 0o755)
    m = mount(bucket, options=(f"cache_dir={mine}",))
    with open(os.path.join(m.path, "f.txt"), "rb") as fh:
        assert fh.read() == b"cached"
    assert _mode(mine) == 0o755, oct(_mode(mine))
    assert (mine / "index.db").exists()
    for sub in ("objects", "owners"):  # created by ckptfs: its own, 0700
        assert _mode(mine / sub) == 0o700, (sub, oct(_mode(mine / sub)))


def test_damaged_cache_index_says_what_to_remove(s3server, bucket, mp, mount, tmp_path):
    """An index.db that is not a database (issue 23 point 7): the mount
    fails at once naming the file and saying what to do, and doing it
    makes the next mount work."""
    s3server.put(bucket, "f.txt", b"back")
    mine = tmp_path / "cache"
    mine.mkdir(mode=0o700)
    (mine / "index.db").write_bytes(b"\x5a" * 8192)
    f = expect_failure(_argv(f"s3://{bucket}", mp, s3server.endpoint, "foreground",
                             "-o", f"cache_dir={mine}"),
                       s3server.env_for_ckptfs(), mp, FAST)
    msg = "\n".join(f.message_lines())
    assert f"{mine}/index.db" in msg and "remove" in msg, f.stderr
    assert (mine / "index.db").read_bytes() == b"\x5a" * 8192  # left as it was
    for p in mine.glob("index.db*"):
        p.unlink()
    m = mount(bucket, options=(f"cache_dir={mine}",))
    with open(os.path.join(m.path, "f.txt"), "rb") as fh:
        assert fh.read() == b"back"


def test_missing_cache_dir_is_created_private(s3server, bucket, mount, tmp_path):
    s3server.put(bucket, "f.txt", b"x")
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    m = mount(bucket, options=(f"cache_dir={shared}/ckptfs-{os.geteuid()}/c",))
    assert os.listdir(m.path) == ["f.txt"]
    assert _mode(shared) == 0o1777
    assert _mode(shared / f"ckptfs-{os.geteuid()}") == 0o700
    assert _mode(shared / f"ckptfs-{os.geteuid()}" / "c") == 0o700
