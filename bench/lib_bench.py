"""What the Python benchmarks (bench/crashloop.py, bench/fault-bench.py)
share: a foreground ckptfs mount (BenchMount) and a private Ceph RGW with
its credentials, an environment for ckptfs and a boto3 client (RGW).

    rgw = lib_bench.RGW.start(work / "rgw", work)   # no compression
    s3 = rgw.client()
    m = lib_bench.BenchMount([ckptfs, "mount", ...], mp, log, rgw.env)
    ...
    m.unmount(); rgw.stop()

Nothing here uses pytest; tests/integration/helpers.py is imported from
the tests' directory (is_fuse_mount, mount_entry, clean_env, ...)."""

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "integration"))
import helpers  # noqa: E402

RGW_SH = REPO / "tests" / "s3server" / "rgw.sh"
REGION = "us-east-1"


class BenchMount:
    """A foreground `ckptfs mount` (the interface helpers.kill_ckptfs
    needs: path, proc, pids(), unmount(), expect_clean_exit).  The
    constructor returns once the mount is there (RuntimeError with the log
    tail when it is not within mount_timeout seconds)."""

    def __init__(self, argv, path, log, env, mount_timeout=30):
        self.path = Path(path)
        self.log = Path(log)
        self.argv = argv
        self.expect_clean_exit = True
        self.unmounted = False
        with open(log, "ab") as f:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f,
                                         stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)
        deadline = time.monotonic() + mount_timeout
        while not helpers.is_fuse_mount(self.path):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait(10)
                subprocess.run(["fusermount3", "-uz", str(self.path)], capture_output=True,
                               timeout=30)
                self.unmounted = True
                raise RuntimeError(f"ckptfs did not mount {path}:\n"
                                   f"{helpers.file_tail(log, 20)}")
            time.sleep(0.02)

    def __truediv__(self, other):
        return self.path / other

    def pids(self):
        return [self.proc.pid] if self.proc.poll() is None else []

    def unmount(self, timeout=300):
        """Clean unmount (waits for ckptfs to commit what is pending);
        returns its exit status, or None when it had to be killed."""
        if self.unmounted:
            return self.proc.poll()
        self.unmounted = True
        if helpers.mount_entry(self.path):
            subprocess.run(["fusermount3", "-u", str(self.path)], capture_output=True,
                           timeout=30)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            subprocess.run(["fusermount3", "-uz", str(self.path)], capture_output=True,
                           timeout=30)
            return None


class RGW:
    """A private Ceph RGW (tests/s3server/rgw.sh) in directory `dir`.
    endpoint, access_key, secret_key; env: a clean environment for ckptfs
    and other clients (private HOME and AWS config files under `work`, the
    keys in AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY; the AWS_* variables
    are also set in this process, for boto3)."""

    def __init__(self, dir, endpoint, access_key, secret_key, env):
        self.dir = Path(dir)
        self.endpoint = endpoint
        self.access_key = access_key
        self.secret_key = secret_key
        self.env = env
        self.region = REGION

    @classmethod
    def start(cls, dir, work, compression="none", memstore_bytes=None, timeout=300):
        """Starts it; RuntimeError with rgw.sh's output when it does not
        come up."""
        env = helpers.clean_env()
        env["RGW_COMPRESSION"] = compression
        if memstore_bytes:
            env["RGW_MEMSTORE_BYTES"] = str(int(memstore_bytes))
        p = subprocess.run(["bash", str(RGW_SH), "start", str(dir)], env=env,
                           capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            raise RuntimeError(f"the S3 server did not start:\n{p.stdout}\n{p.stderr}")
        s3env = dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)
        work = Path(work)
        home = work / "home"
        (home / ".aws").mkdir(parents=True, exist_ok=True)
        (work / "aws-config").write_text(f"[default]\nregion = {REGION}\n")
        (work / "aws-creds").write_text("")
        cenv = helpers.clean_env()
        cenv.update(HOME=str(home), AWS_CONFIG_FILE=str(work / "aws-config"),
                    AWS_SHARED_CREDENTIALS_FILE=str(work / "aws-creds"),
                    AWS_EC2_METADATA_DISABLED="true", LC_ALL="C.UTF-8",
                    AWS_ACCESS_KEY_ID=s3env["S3_ACCESS_KEY"],
                    AWS_SECRET_ACCESS_KEY=s3env["S3_SECRET_KEY"])
        for k, v in cenv.items():
            if k.startswith("AWS_"):
                os.environ[k] = v
        return cls(dir, s3env["S3_ENDPOINT"], s3env["S3_ACCESS_KEY"],
                   s3env["S3_SECRET_KEY"], cenv)

    def client(self, **config):
        """A boto3 S3 client talking to RGW directly (path style)."""
        import boto3
        import botocore.config
        cfg = dict(s3={"addressing_style": "path"},
                   retries={"max_attempts": 5, "mode": "standard"},
                   max_pool_connections=32, connect_timeout=10, read_timeout=300)
        cfg.update(config)
        try:
            bc = botocore.config.Config(request_checksum_calculation="when_required",
                                        response_checksum_validation="when_required", **cfg)
        except TypeError:  # older botocore
            bc = botocore.config.Config(**cfg)
        return boto3.session.Session(
            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key,
            region_name=REGION).client("s3", endpoint_url=self.endpoint, config=bc)

    @staticmethod
    def stop_dir(dir, timeout=120):
        """Stops the RGW of directory `dir` (also when start() failed)."""
        subprocess.run(["bash", str(RGW_SH), "stop", str(dir)], env=helpers.clean_env(),
                       capture_output=True, timeout=timeout)

    def stop(self, timeout=120):
        self.stop_dir(self.dir, timeout)
