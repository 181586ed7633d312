"""Readiness for a service manager (issue 14): with $NOTIFY_SOCKET set, as
systemd sets it for a unit of Type=notify, a mount sends READY=1 once it
answers, STATUS= lines with its pending transactions, and STOPPING=1 when
the unmount starts draining them (doc/ckptfs.1, "SERVICE MANAGERS").

The test binds its own datagram socket (an abstract one, "@name", as
systemd uses) and reads what arrives.  systemd-notify(1), where installed,
is the reference for the protocol: the same socket must understand what it
sends."""
import os
import shutil
import socket
import subprocess
import threading
import time
import uuid

import pytest

from helpers import ckptfs_commit, det_bytes, is_fuse_mount

MiB = 1 << 20


class NotifySocket:
    """An abstract AF_UNIX datagram socket collecting (time, message)
    pairs; with `watch`, also whether that path was a FUSE mount when each
    message had just arrived."""

    def __init__(self, watch=None):
        self.name = "ckptfs-test-" + uuid.uuid4().hex[:12]
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + self.name)
        self.sock.settimeout(0.1)
        self.msgs = []
        self.mounted_on_receipt = {}
        self.watch = watch
        self.stop = False
        self.lock = threading.Lock()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    @property
    def env_value(self):
        return "@" + self.name

    def _run(self):
        while not self.stop:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            t = time.monotonic()
            with self.lock:
                if self.watch:
                    self.mounted_on_receipt[t] = is_fuse_mount(self.watch)
                self.msgs.append((t, data.decode()))

    def lines(self):
        with self.lock:
            return [(t, l) for t, m in self.msgs for l in m.split("\n") if l]

    def wait_for(self, pred, timeout, what, since=0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for t, l in self.lines():
                if t >= since and pred(l):
                    return t, l
            time.sleep(0.05)
        raise AssertionError(f"no {what} within {timeout}s; got {self.lines()}")

    def close(self):
        self.stop = True
        self.t.join(5)
        self.sock.close()


@pytest.mark.skipif(not shutil.which("systemd-notify"), reason="no systemd-notify")
def test_reference_systemd_notify_reaches_the_test_socket():
    """The harness reads what systemd's own client sends."""
    ns = NotifySocket()
    try:
        env = dict(os.environ, NOTIFY_SOCKET=ns.env_value)
        subprocess.run(["systemd-notify", "--ready", "--status=reference"],
                       env=env, check=True, timeout=30)
        ns.wait_for(lambda l: l == "READY=1", 10, "READY=1 from systemd-notify")
        ns.wait_for(lambda l: l == "STATUS=reference", 10, "STATUS= from systemd-notify")
    finally:
        ns.close()


@pytest.mark.timeout(150)
def test_ready_status_and_stopping(s3server, bucket, mount, tmp_path):
    mp = tmp_path / "mnt"
    mp.mkdir()
    ns = NotifySocket(watch=mp)
    try:
        env = s3server.env_for_ckptfs(NOTIFY_SOCKET=ns.env_value)
        m = mount(bucket, "pfx", options=["commit_delay=600"], env=env, mountpoint=mp)
        t_ready, _ = ns.wait_for(lambda l: l == "READY=1", 60, "READY=1")
        # READY=1 came once the mount existed, and the mount answers now
        assert ns.mounted_on_receipt[t_ready] is True
        st = os.stat(mp)
        assert st.st_dev != os.stat(tmp_path).st_dev
        assert os.listdir(mp) == []
        first = [l for _, l in ns.lines() if l.startswith("STATUS=")]
        assert first and first[0] == "STATUS=serving; 0 pending transactions, 0 B to upload"

        # a checkpoint waiting for its final name: pending, nothing uploaded
        os.mkdir(m / "tmp-ckpt")
        (m / "tmp-ckpt" / "model.bin").write_bytes(det_bytes(1, 2 * MiB))
        ns.wait_for(lambda l: l == "STATUS=serving; 1 pending transaction, 2.0 MiB to upload",
                    30, "STATUS with the pending checkpoint")
        os.rename(m / "tmp-ckpt", m / "ckpt")
        ckptfs_commit(m / "ckpt")
        ns.wait_for(lambda l: l == "STATUS=serving; 0 pending transactions, 0 B to upload",
                    30, "STATUS after the commit", since=time.monotonic())

        # pending at unmount: STOPPING=1 while it drains, then the commit
        os.mkdir(m / "late")
        (m / "late" / "opt.bin").write_bytes(det_bytes(2, 1 * MiB))
        assert [l for _, l in ns.lines() if l == "STOPPING=1"] == []
        t_unmount = time.monotonic()
        problems = m.unmount()
        assert problems == []
        t_stop, _ = ns.wait_for(lambda l: l == "STOPPING=1", 10, "STOPPING=1")
        assert t_unmount <= t_stop
        stops = [l for _, l in ns.lines() if l.startswith("STATUS=unmounting: ")]
        assert stops and stops[0].startswith("STATUS=unmounting: 1 pending transaction")
        body = s3server.client().get_object(Bucket=bucket, Key="pfx/late/opt.bin")["Body"].read()
        assert body == det_bytes(2, 1 * MiB)
        assert [l for _, l in ns.lines() if l == "READY=1"] == ["READY=1"]
    finally:
        ns.close()


def test_no_socket_no_notification(s3server, bucket, mount, tmp_path):
    """Without $NOTIFY_SOCKET the mount neither sends nor complains."""
    m = mount(bucket, "")
    assert os.listdir(m) == []
    assert m.unmount() == []
    assert "NOTIFY_SOCKET" not in m.log_text() and "READY" not in m.log_text()


def test_read_only_mount(s3server, bucket, mount, tmp_path):
    """-o ro: ready, nothing to upload, stopping at unmount."""
    ns = NotifySocket(watch=tmp_path / "mnt")
    (tmp_path / "mnt").mkdir()
    try:
        env = s3server.env_for_ckptfs(NOTIFY_SOCKET=ns.env_value)
        m = mount(bucket, "", options=["ro"], env=env, mountpoint=tmp_path / "mnt")
        t_ready, _ = ns.wait_for(lambda l: l == "READY=1", 60, "READY=1")
        assert ns.mounted_on_receipt[t_ready] is True
        ns.wait_for(lambda l: l == "STATUS=serving; read-only", 10, "read-only STATUS")
        assert m.unmount() == []
        ns.wait_for(lambda l: l == "STOPPING=1", 10, "STOPPING=1")
    finally:
        ns.close()
