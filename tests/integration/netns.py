"""A network namespace owned by one test, for reaching link-local service
addresses the way a workload on AWS reaches them.

An ECS task fetches its role's credentials from http://169.254.170.2 +
AWS_CONTAINER_CREDENTIALS_RELATIVE_URI.  NetNS gives a test that address
without touching the host's network: `ip netns add` makes a namespace
with its loopback up, `add_address` puts an address on an interface
inside it (dummy, or veth), and `listen` opens a listening TCP socket *inside* the
namespace from this process (setns(2) on a short-lived thread: a socket
stays in the namespace it was made in, so the test's servers serve it
from their usual threads while their outgoing connections, to RGW on the
host's 127.0.0.1, stay in the host's namespace).  `argv` wraps a command
with `nsenter --net`, which, unlike `ip netns exec`, leaves the mount
namespace alone: a FUSE mount made inside is seen by the test.  Unix
sockets named by a path (ckptfs's control socket) work across network
namespaces.

Needs root and iproute2 (`ip`; contrib/install-deps.sh installs it).
"""

import ctypes
import os
import socket
import subprocess
import threading
import uuid

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _ip(*args):
    p = subprocess.run(["ip", *args], capture_output=True, text=True,
                       timeout=20)
    if p.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {p.stderr.strip()}")


class NetNS:
    def __init__(self):
        self.name = f"ckptfs-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.path = f"/run/netns/{self.name}"
        _ip("netns", "add", self.name)
        try:
            _ip("-n", self.name, "link", "set", "lo", "up")
        except Exception:
            self.close()
            raise
        self._ndev = 0
        self.cleanups = []  # run by close(), first

    def add_address(self, addr):
        """addr/32 on a new interface of the namespace, up: a dummy one,
        or where the kernel has no dummy driver (containers often lack
        it), one end of a veth pair whose both ends stay inside."""
        dev = f"svc{self._ndev}"
        self._ndev += 1
        try:
            _ip("-n", self.name, "link", "add", dev, "type", "dummy")
        except RuntimeError:
            _ip("-n", self.name, "link", "add", dev, "type", "veth",
                "peer", "name", f"{dev}p")
            _ip("-n", self.name, "link", "set", f"{dev}p", "up")
        _ip("-n", self.name, "addr", "add", f"{addr}/32", "dev", dev)
        _ip("-n", self.name, "link", "set", dev, "up")
        return dev

    def listen(self, host, port=0, backlog=128):
        """A TCP socket listening on host:port inside the namespace."""
        out = {}

        def inside():
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
                try:
                    if _libc.setns(fd, CLONE_NEWNET) != 0:
                        e = ctypes.get_errno()
                        raise OSError(e, f"setns {self.path}: "
                                         f"{os.strerror(e)}")
                finally:
                    os.close(fd)
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((host, port))
                s.listen(backlog)
                out["sock"] = s
            except Exception as e:  # handed to the caller
                out["error"] = e

        # the thread ends inside the namespace; this one never enters it
        t = threading.Thread(target=inside)
        t.start()
        t.join()
        if "error" in out:
            raise out["error"]
        return out["sock"]

    def argv(self, argv):
        return ["nsenter", f"--net={self.path}", "--", *map(str, argv)]

    def close(self):
        for f in self.cleanups:
            f()
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True,
                       timeout=20)
