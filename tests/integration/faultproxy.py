#!/usr/bin/python3
"""A fault-injecting HTTP/1.1 proxy for the ckptfs tests and benchmarks.

FaultProxy listens on 127.0.0.1 in front of a real S3 server (the tests'
Ceph RGW) and understands HTTP/1.1 framing well enough to act on each
request of a keep-alive connection: request line and headers,
Content-Length and chunked request bodies, `Expect: 100-continue` (the
header is forwarded and the server's interim 100 relayed, so the server
decides), responses framed by Content-Length, chunked or the end of the
connection, HEAD responses and 1xx/204/304 without bodies.  Pure Python
3.11 stdlib, one thread per client connection, one server connection per
client connection (opened on its first forwarded request, reopened when the
server closes it).

Actions, per request:

  "503"           answered here with 503 SlowDown (S3 XML body), nothing
                  forwarded: the server did nothing.  A request body is
                  read and dropped first; after a request that waited for
                  100-continue the connection is closed (its body is not
                  coming).
  "reset_before"  the client connection is reset (SO_LINGER 0, close: a
                  TCP RST) when the request head has arrived; nothing
                  forwarded.
  "reset_mid"     forwarded; the status line, the headers and about half
                  of the body reach the client, then a reset (a reply
                  without a body: the headers, then the reset).
  "reset_after"   forwarded; the server's whole reply is read, then the
                  client is reset without any of it: the server acted, the
                  reply is lost.
  "stall_before"  not forwarded and never answered; the client socket stays
                  open until the proxy closes (or down()).
  "stall_after"   forwarded, the server acts, its reply is never delivered;
                  the client socket stays open (as above).

An `inspect` callable (constructor argument) sees every request first:
inspect(method, path, query, headers) returns None (carry on) or a
(status, code, message) triple that is answered here with an S3 error
XML body, nothing forwarded (tests/integration/credservers.py uses it to
refuse requests signed with credentials past their announced expiry, as
AWS does).

Faults come from one-shot rules (rule(): the next `count` requests matching
get the action; count=None: every one until unrule() or clear() removes the
rule) and, when no rule matches, from per-request probabilities
(set()) drawn from random.Random(seed).  down(seconds) resets every open
connection and refuses (accepts and resets) new ones for that long.
Request accounting: `acct` (Accounting) counts every request the server
answered by type (classify(): PUT, CreateMPU, UploadPart, Complete, Abort,
LIST, ListUploads, HEAD, GET, DELETE, DeleteObjects, COPY, PartCopy) and
key kind (data, marker, manifest), with request and response body bytes;
acct.snapshot() / acct.since(snap) measure one phase.  With no fault set
the proxy is a plain counting proxy (tests/integration/test_multihost.py,
bench/multihost-bench.py).
Every fault injected is logged in `events` (FaultEvent: method, path,
action, how, t); `stats` counts "requests", "connections" and each action
taken ("down" counts connections refused or reset by down()).

    with FaultProxy(s3server.endpoint, seed=1) as p:
        p.set(p503=0.05, reset_mid=0.05)
        p.rule("reset_after", method="POST", query_has="uploadId=")
        ... mount ckptfs with --endpoint p.endpoint ...

CLI (benchmarks):
    /usr/bin/python3 tests/integration/faultproxy.py --target URL [--port N]
        [--p503 F] [--reset-before F] [--reset-mid F] [--reset-after F]
        [--stall-before F] [--stall-after F] [--seed N]
prints `endpoint=http://127.0.0.1:PORT` and runs until killed.

Self-tests: selftest_local() (against a stdlib HTTP server, no S3) and
selftest_s3(endpoint, access_key, secret_key, region) (boto3 against a real
S3 server through the proxy); test_faults.py runs both.
"""

import collections
import random
import re
import socket
import struct
import sys
import threading
import time
from urllib.parse import unquote

ACTIONS = ("503", "reset_before", "reset_mid", "reset_after", "stall_before",
           "stall_after")

FaultEvent = collections.namedtuple("FaultEvent", "method path action how t")

SLOWDOWN_BODY = (b'<?xml version="1.0" encoding="UTF-8"?>\n'
                 b"<Error><Code>SlowDown</Code><Message>Please reduce your "
                 b"request rate.</Message></Error>")

_LINE_MAX = 65536
_HEAD_MAX = 256 * 1024


class _Killed(Exception):
    """The connection is to be reset (down(), close(), a broken peer)."""


class _Peer(Exception):
    """The server side broke (closed, reset) in the middle of an exchange."""


def _read_head(f):
    """Reads a request/status line and headers from binary file f.  Returns
    (raw bytes, first line, [(name, value)]) or None at a clean EOF before
    any byte.  Leading empty lines (allowed between messages) are skipped."""
    raw = bytearray()
    lines = []
    while True:
        line = f.readline(_LINE_MAX)
        if not line:
            if raw or lines:
                raise _Peer("connection closed inside a message head")
            return None
        if not lines and line in (b"\r\n", b"\n"):
            continue  # stray CRLF between messages
        raw += line
        if len(raw) > _HEAD_MAX:
            raise _Peer("message head too large")
        if line in (b"\r\n", b"\n"):
            break
        lines.append(line.decode("latin-1").rstrip("\r\n"))
    first = lines[0]
    hdrs = []
    for l in lines[1:]:
        k, _, v = l.partition(":")
        hdrs.append((k.strip().lower(), v.strip()))
    return bytes(raw), first, hdrs


def _hget(hdrs, name, default=""):
    """Last value of header `name` (lower case), or default."""
    v = default
    for k, x in hdrs:
        if k == name:
            v = x
    return v


def _has_token(hdrs, name, token):
    return any(k == name and token in [t.strip().lower() for t in v.split(",")]
               for k, v in hdrs)


def _copy_body(f, out, hdrs, keep=None):
    """Copies a message body framed by hdrs (chunked or Content-Length) from
    binary file f to socket `out` (None: drop it), raw, framing included.
    keep: a bytearray that gets the raw bytes too.  Returns False when the
    message has no such framing (caller decides), True when copied."""
    def emit(b):
        if out is not None:
            out.sendall(b)
        if keep is not None:
            keep.extend(b)
    if "chunked" in _hget(hdrs, "transfer-encoding").lower():
        while True:
            size_line = f.readline(_LINE_MAX)
            if not size_line:
                raise _Peer("connection closed in a chunked body")
            emit(size_line)
            try:
                n = int(size_line.split(b";")[0].strip() or b"0", 16)
            except ValueError:
                raise _Peer(f"bad chunk size line {size_line[:40]!r}") from None
            if n == 0:
                while True:  # trailers, then the empty line
                    t = f.readline(_LINE_MAX)
                    if not t:
                        raise _Peer("connection closed in chunked trailers")
                    emit(t)
                    if t in (b"\r\n", b"\n"):
                        return True
            _copy_n(f, emit, n)
            crlf = f.readline(_LINE_MAX)
            if not crlf:
                raise _Peer("connection closed after a chunk")
            emit(crlf)
    cl = _hget(hdrs, "content-length", None)
    if cl is not None:
        try:
            n = int(cl)
        except ValueError:
            raise _Peer(f"bad Content-Length {cl!r}") from None
        _copy_n(f, emit, n)
        return True
    return False


def _copy_n(f, emit, n):
    while n > 0:
        b = f.read1(min(n, 262144))
        if not b:
            raise _Peer(f"connection closed with {n} body bytes to go")
        emit(b)
        n -= len(b)


def _rst(sock, *files):
    """Closes sock with a TCP RST (SO_LINGER 0).  The makefile() objects of
    the socket must be closed too or the descriptor stays open."""
    if sock is None:
        return
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    for f in files:
        try:
            f.close()
        except OSError:
            pass
    try:
        sock.close()
    except OSError:
        pass


def _close(sock, *files):
    """Orderly close (FIN)."""
    if sock is None:
        return
    for f in files:
        try:
            f.close()
        except OSError:
            pass
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


REQUEST_TYPES = ("PUT", "CreateMPU", "UploadPart", "Complete", "Abort", "LIST",
                 "ListUploads", "HEAD", "GET", "DELETE", "DeleteObjects", "COPY",
                 "PartCopy", "other")


def classify(method, path, query, copy=False):
    """(request type, key kind) of one S3 request, path-style: the type is
    one of REQUEST_TYPES; the kind says whose key it is: "marker" (under
    .ckptfs-pending/), "manifest" (under .ckptfs/), "bucket" (no key: LIST,
    DeleteObjects) or "data"."""
    q = set(k.split("=", 1)[0] for k in query.split("&") if k)
    key = path.lstrip("/").partition("/")[2]
    kind = ("bucket" if not key else
            "marker" if ".ckptfs-pending/" in key else
            "manifest" if "/.ckptfs/" in "/" + key else "data")
    if method == "PUT":
        if "partNumber" in q:
            t = "PartCopy" if copy else "UploadPart"
        else:
            t = "COPY" if copy else "PUT"
    elif method == "POST":
        t = ("CreateMPU" if "uploads" in q else "Complete" if "uploadId" in q
             else "DeleteObjects" if "delete" in q else "other")
    elif method == "GET":
        t = ("ListUploads" if "uploads" in q else
             "LIST" if not key or "list-type" in q else "GET")
    elif method == "HEAD":
        t = "HEAD"
    elif method == "DELETE":
        t = "Abort" if "uploadId" in q else "DELETE"
    else:
        t = "other"
    return t, kind


class Accounting:
    """Requests and bytes by type (classify()), thread-safe: `n[type]`,
    `n[type, kind]`, `up[type]` (request body bytes), `down[type]`
    (response body bytes)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.n = collections.Counter()
        self.up = collections.Counter()
        self.down = collections.Counter()

    def add(self, t, kind, up=0, down=0):
        with self._lock:
            self.n[t] += 1
            self.n[t, kind] += 1
            self.up[t] += up
            self.down[t] += down

    def snapshot(self):
        """A copy ({"n": Counter, "up": ..., "down": ...}) to subtract."""
        with self._lock:
            return {"n": collections.Counter(self.n),
                    "up": collections.Counter(self.up),
                    "down": collections.Counter(self.down)}

    def since(self, snap):
        """What was counted after snapshot snap, same shape."""
        now = self.snapshot()
        return {k: now[k] - snap[k] for k in now}

    def reset(self):
        with self._lock:
            self.n.clear()
            self.up.clear()
            self.down.clear()


class _Rule:
    def __init__(self, action, method, query_has, path_re, count):
        self.action = action
        self.method = method.upper() if method else None
        self.query_has = query_has
        self.path_re = re.compile(path_re) if path_re is not None else None
        self.left = count

    def matches(self, method, path, query):
        if self.method is not None and method != self.method:
            return False
        if self.query_has is not None and self.query_has not in query:
            return False
        if self.path_re is not None and not self.path_re.search(path):
            return False
        return True

    def __repr__(self):
        return (f"rule({self.action!r}, method={self.method!r}, query_has="
                f"{self.query_has!r}, path_re="
                f"{self.path_re.pattern if self.path_re else None!r}, left={self.left})")


class _Conn:
    """One client connection and its server connection."""

    def __init__(self, proxy, csock):
        self.p = proxy
        self.c = csock
        self.cf = csock.makefile("rb", buffering=262144)
        self.s = None
        self.sf = None
        self.killed = threading.Event()
        self.stalled = False

    def kill(self):
        """From any thread: make the serving thread reset the connection.
        shutdown(SHUT_RD) wakes a thread blocked reading either socket
        without sending anything to the peers; the serving thread then
        closes with RST."""
        self.killed.set()
        for s in (self.c, self.s):
            if s is not None:
                try:
                    s.shutdown(socket.SHUT_RD)
                except OSError:
                    pass

    # the server side --------------------------------------------------------
    def _upstream(self):
        if self.s is None:
            s = socket.create_connection(self.p.target, timeout=10)
            s.settimeout(None)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.s, self.sf = s, s.makefile("rb", buffering=262144)
            if self.killed.is_set():
                self.kill()
        return self.s

    def _drop_upstream(self):
        _close(self.s, self.sf)
        self.s = self.sf = None

    # the loop -------------------------------------------------------------
    def serve(self):
        try:
            while True:
                if self.killed.is_set():
                    raise _Killed()
                h = _read_head(self.cf)
                if h is None:
                    if self.killed.is_set():
                        raise _Killed()
                    _close(self.c, self.cf)  # the client closed: so do we
                    self._drop_upstream()
                    return
                if self.killed.is_set() or self.p._is_down():
                    self.p._count("down")
                    raise _Killed()
                if not self._one(*h):
                    return
        except (_Killed, _Peer, OSError, ValueError, IndexError):
            _rst(self.c, self.cf)
            _close(self.s, self.sf)  # the server side just ends
        except Exception as e:  # noqa: BLE001 - a bug here: kept for the tests
            self.p.errors.append(repr(e))
            _rst(self.c, self.cf)
            _close(self.s, self.sf)  # the server side just ends
        finally:
            self.p._forget(self)

    def _stall(self):
        """Never answers: waits until down(), reset_stalled() or close()
        kills the connection."""
        self.stalled = True
        while not self.killed.wait(1.0):
            if self.p._closed:
                break
        raise _Killed()

    def _one(self, raw, first, hdrs):
        """Handles one request.  True: the connection may carry another."""
        parts = first.split(" ")
        if len(parts) < 3:
            raise _Peer(f"bad request line {first[:80]!r}")
        method, target = parts[0], parts[1]
        path, _, query = target.partition("?")
        path = unquote(path)
        match_q = query
        if any(k == "x-amz-copy-source" for k, _ in hdrs):
            match_q += "&x-amz-copy-source"
        refusal = self.p.inspect(method, path, query, hdrs) if self.p.inspect else None
        action = "refuse" if refusal else self.p._decide(method, path, match_q)
        rtype, rkind = classify(method, path, query,
                                any(k == "x-amz-copy-source" for k, _ in hdrs))
        try:
            up_bytes = int(_hget(hdrs, "x-amz-decoded-content-length", "") or
                           _hget(hdrs, "content-length", "0") or 0)
        except ValueError:
            up_bytes = 0
        expect = _has_token(hdrs, "expect", "100-continue")
        chunked_req = "chunked" in _hget(hdrs, "transfer-encoding").lower()
        has_body = chunked_req or int(_hget(hdrs, "content-length", "0") or 0) > 0
        client_close = _has_token(hdrs, "connection", "close")

        if action == "reset_before":
            raise _Killed()
        if action == "stall_before":
            self._stall()
        if action in ("503", "refuse"):
            if has_body and not expect:
                _copy_body(self.cf, None, hdrs)
            closing = client_close or (has_body and expect)
            if refusal:
                self._answer_error(method, closing, *refusal)
            else:
                self._answer_503(method, closing)
            if closing:
                self._finish_close()
                return False
            return True

        # forward the request
        try:
            s = self._upstream()
            s.sendall(raw)
        except OSError as e:
            raise _Peer(f"server: {e}") from None
        body_t = None
        body_err = []
        if has_body:
            if expect:
                def relay_body():
                    try:
                        _copy_body(self.cf, s, hdrs)
                    except Exception as e:  # noqa: BLE001
                        body_err.append(e)
                        self.kill()
                body_t = threading.Thread(target=relay_body, daemon=True,
                                          name="faultproxy-body")
                body_t.start()
            else:
                _copy_body(self.cf, s, hdrs)

        # the server's reply: interim 1xx relayed, then the final head
        while True:
            sh = _read_head(self.sf)
            if sh is None:
                if self.killed.is_set():
                    raise _Killed()
                raise _Peer("server closed the connection without a reply")
            sraw, sfirst, shdrs = sh
            try:
                status = int(sfirst.split(" ")[1])
            except (IndexError, ValueError):
                raise _Peer(f"bad status line {sfirst[:80]!r}") from None
            if 100 <= status < 200 and status != 101:
                self.c.sendall(sraw)  # 100 Continue: the client sends its body
                continue
            break
        body_pending = False
        if body_t is not None:
            body_t.join(0 if status >= 300 else 600)
            body_pending = body_t.is_alive()
            if body_err:
                raise _Killed()
        no_body = method == "HEAD" or status in (204, 304) or 100 <= status < 200
        server_close = _has_token(shdrs, "connection", "close")
        try:
            down_bytes = 0 if no_body else int(_hget(shdrs, "content-length", "0") or 0)
        except ValueError:
            down_bytes = 0
        self.p.acct.add(rtype, rkind, up_bytes, down_bytes)

        if action is None:
            self.c.sendall(sraw)
            framed = True
            if not no_body:
                framed = _copy_body(self.sf, self.c, shdrs)
                if not framed:  # delimited by the server closing
                    while True:
                        b = self.sf.read1(262144)
                        if not b:
                            break
                        self.c.sendall(b)
            if not framed or server_close:
                self._drop_upstream()
            if not framed or client_close or body_pending:
                self._finish_close()
                return False
            return True

        # a fault after forwarding: the whole reply is read first
        body = bytearray()
        if not no_body and not _copy_body(self.sf, None, shdrs, keep=body):
            while True:
                b = self.sf.read1(262144)
                if not b:
                    break
                body += b
            server_close = True
        if server_close:
            self._drop_upstream()
        if action == "reset_mid":
            self.c.sendall(sraw + bytes(body[:len(body) // 2]))
            time.sleep(0.05)  # let the bytes leave before the RST
            raise _Killed()
        if action == "reset_after":
            raise _Killed()
        if action == "stall_after":
            self._stall()
        raise AssertionError(f"unknown action {action!r}")

    def _answer_503(self, method, closing):
        date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime())
        head = ("HTTP/1.1 503 Service Unavailable\r\n"
                f"Date: {date}\r\n"
                "Content-Type: application/xml\r\n"
                f"Content-Length: {len(SLOWDOWN_BODY)}\r\n"
                "x-amz-request-id: faultproxy-503\r\n"
                + ("Connection: close\r\n" if closing else "")
                + "\r\n").encode("latin-1")
        self.c.sendall(head if method == "HEAD" else head + SLOWDOWN_BODY)

    def _answer_error(self, method, closing, status, code, message):
        body = ('<?xml version="1.0" encoding="UTF-8"?>\n'
                f"<Error><Code>{code}</Code><Message>{message}</Message>"
                "</Error>").encode()
        head = (f"HTTP/1.1 {status} Refused\r\n"
                "Content-Type: application/xml\r\n"
                f"Content-Length: {len(body)}\r\n"
                + ("Connection: close\r\n" if closing else "")
                + "\r\n").encode("latin-1")
        self.c.sendall(head if method == "HEAD" else head + body)

    def _finish_close(self):
        """Orderly close of the client side after a complete reply: FIN,
        then drain what the client still sends (a body it was about to
        send) for a moment so the reply is not destroyed by a RST."""
        try:
            self.c.shutdown(socket.SHUT_WR)
            self.c.settimeout(2.0)
            end = time.monotonic() + 2.0
            while time.monotonic() < end and not self.killed.is_set():
                if not self.c.recv(65536):
                    break
        except OSError:
            pass
        _close(self.c, self.cf)
        self._drop_upstream()


class FaultProxy:
    """See the module docstring."""

    def __init__(self, target: str, seed: int = 0, port: int = 0,
                 inspect=None, listen_sock=None):
        """listen_sock: a listening socket to serve instead of a new one
        on 127.0.0.1:port (netns.py: one inside a network namespace)."""
        self.inspect = inspect
        t = re.sub(r"^https?://", "", target).rstrip("/")
        host, _, p = t.rpartition(":")
        self.target = (host or "127.0.0.1", int(p))
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._probs = {a: 0.0 for a in ACTIONS}
        self._rules = []
        self._down_until = 0.0
        self._conns = set()
        self._closed = False
        self.stats = collections.Counter()
        self.stats["requests"] = 0
        # requests the server answered, by type and kind (classify())
        self.acct = Accounting()
        self.events = []
        # every request seen, in order: (method, path, query), for tests
        # that count requests (oplog(), e.g. HEADs per open)
        self.requests_log = []
        self.errors = []  # unexpected exceptions in connection threads (bugs)
        self._ls = listen_sock
        if self._ls is None:
            self._ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self._ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._ls.bind(("127.0.0.1", port))
            self._ls.listen(512)
        self.port = self._ls.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._t = threading.Thread(target=self._accept, daemon=True,
                                   name="faultproxy-accept")
        self._t.start()

    # public interface --------------------------------------------------------
    def set(self, p503=0.0, reset_before=0.0, reset_mid=0.0, reset_after=0.0,
            stall_before=0.0, stall_after=0.0):
        """Per-request probabilities of each action (their sum at most 1)."""
        probs = {"503": p503, "reset_before": reset_before, "reset_mid": reset_mid,
                 "reset_after": reset_after, "stall_before": stall_before,
                 "stall_after": stall_after}
        if any(v < 0 for v in probs.values()) or sum(probs.values()) > 1.0 + 1e-9:
            raise ValueError(f"bad probabilities {probs}")
        with self._lock:
            self._probs = {k: float(v) for k, v in probs.items()}

    def rule(self, action, method=None, query_has=None, path_re=None, count=1):
        """The next `count` requests matching every criterion given get
        `action`, before any random fault.  method: exact ("PUT");
        query_has: substring of the query string ("uploadId=", "delete",
        "partNumber="; a request carrying x-amz-copy-source also matches
        "copy-source"); path_re: re.search in the decoded path
        ("/bucket/key").  count=None: every matching request until the
        rule is removed (unrule(), clear()).  Returns the rule."""
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r} (one of {ACTIONS})")
        if count is not None and count < 1:
            raise ValueError("count must be at least 1 (None: until removed)")
        r = _Rule(action, method, query_has, path_re, count)
        with self._lock:
            self._rules.append(r)
        return r

    def unrule(self, r):
        """Removes rule r (returned by rule()) if it is still there."""
        with self._lock:
            if r in self._rules:
                self._rules.remove(r)

    @property
    def rules(self):
        """The rules not used up yet (for diagnostics)."""
        with self._lock:
            return list(self._rules)

    def down(self, seconds):
        """For `seconds` from now: every open connection is reset and new
        ones are accepted and reset at once (the client sees a connection
        reset, as from a restarting load balancer)."""
        with self._lock:
            self._down_until = time.monotonic() + seconds
            conns = list(self._conns)
            self.events.append(FaultEvent("-", "-", f"down {seconds}s", "down",
                                          time.monotonic()))
        for c in conns:
            self._count("down")
            c.kill()

    def reset_stalled(self):
        """Resets the connections stalled so far (their clients see a reset
        now); for tests that end with requests still stalled."""
        with self._lock:
            conns = [c for c in self._conns if c.stalled]
        for c in conns:
            c.kill()
        return len(conns)

    def is_down(self):
        return self._is_down()

    def clear(self):
        """No more faults: probabilities 0, rules dropped, down() ended.
        Connections already stalled stay stalled (their requests are lost)."""
        with self._lock:
            self._probs = {a: 0.0 for a in ACTIONS}
            self._rules = []
            self._down_until = 0.0

    def close(self):
        """Stops accepting and resets every connection (stalled ones too)."""
        self._closed = True
        try:
            self._ls.close()
        except OSError:
            pass
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            c.kill()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def describe(self):
        """One text for assertion messages: stats, rules left, last events."""
        ev = "\n".join(f"  {e.t:.2f} {e.method} {e.path} {e.action} ({e.how})"
                       for e in self.events[-30:])
        return (f"proxy stats {dict(self.stats)}; rules left {self.rules}; "
                f"{len(self.events)} faults, last:\n{ev}")

    # internals -----------------------------------------------------------------
    def oplog(self, since=0):
        """The requests seen from index `since` on, each named by its S3
        operation: "LIST" (GET with list-type=), "GET", "HEAD", "PUT",
        "DELETE", "POST"; with their paths: [(op, path), ...]."""
        with self._lock:
            v = self.requests_log[since:]
        return [("LIST" if m == "GET" and "list-type=" in q else m, p)
                for m, p, q in v]

    def _is_down(self):
        return time.monotonic() < self._down_until

    def _count(self, what):
        with self._lock:
            self.stats[what] += 1

    def _decide(self, method, path, query):
        """The action for this request (None: forward untouched)."""
        with self._lock:
            self.stats["requests"] += 1
            self.requests_log.append((method, path, query))
            action = how = None
            for r in self._rules:
                if r.matches(method, path, query):
                    action, how = r.action, "rule"
                    if r.left is not None:
                        r.left -= 1
                        if r.left <= 0:
                            self._rules.remove(r)
                    break
            x = self._rng.random()  # one draw per request, rule or not
            if action is None:
                acc = 0.0
                for a in ACTIONS:
                    acc += self._probs[a]
                    if x < acc:
                        action, how = a, "random"
                        break
            if action is not None:
                self.stats[action] += 1
                self.events.append(FaultEvent(method, path, action, how,
                                              time.monotonic()))
            return action

    def _forget(self, conn):
        with self._lock:
            self._conns.discard(conn)

    def _accept(self):
        while not self._closed:
            try:
                c, _ = self._ls.accept()
            except OSError:
                return
            if self._closed or self._is_down():
                self._count("down")
                _rst(c)
                continue
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Conn(self, c)
            with self._lock:
                self.stats["connections"] += 1
                self._conns.add(conn)
            threading.Thread(target=conn.serve, daemon=True,
                             name="faultproxy-conn").start()


# --------------------------------------------------------------------------
# Self-tests

def selftest_local():
    """Framing and every action against a local stdlib HTTP/1.1 server (no
    S3): keep-alive reuse across requests, Content-Length and chunked
    replies, HEAD, 204, request bodies with and without Expect:
    100-continue, and what the client sees for each fault.  Raises
    AssertionError on a mismatch."""
    import http.client
    import http.server

    store = {}
    hits = collections.Counter()

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def _send(self, code, body=b"", chunked=False, head=False):
            self.send_response(code)
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
            elif code not in (204, 304):
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if head or code in (204, 304):
                return
            if chunked:
                for i in range(0, len(body), 1000):
                    piece = body[i:i + 1000]
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.write(b"0\r\n\r\n")
            else:
                self.wfile.write(body)

        def do_GET(self):
            hits["GET " + self.path] += 1
            body = store.get(self.path, b"x" * 10000)
            self._send(200, body, chunked=self.path.startswith("/chunked"))

        def do_HEAD(self):
            hits["HEAD " + self.path] += 1
            self._send(200, store.get(self.path, b"x" * 10000), head=True)

        def do_PUT(self):
            hits["PUT " + self.path] += 1
            n = int(self.headers.get("Content-Length", "0"))
            store[self.path] = self.rfile.read(n)
            self._send(200, b"stored")

        def do_DELETE(self):
            hits["DELETE " + self.path] += 1
            store.pop(self.path, None)
            self._send(204)

    class S(http.server.ThreadingHTTPServer):
        def handle_error(self, request, client_address):
            pass  # resets by the proxy are the point

    srv = S(("127.0.0.1", 0), H)
    srv.daemon_threads = True
    st = threading.Thread(target=srv.serve_forever, daemon=True)
    st.start()
    try:
        with FaultProxy(f"127.0.0.1:{srv.server_address[1]}", seed=7) as p:
            conn = http.client.HTTPConnection("127.0.0.1", p.port, timeout=10)

            def req(method, path, body=None, headers=None):
                conn.request(method, path, body=body, headers=headers or {})
                r = conn.getresponse()
                return r.status, r.read()

            # keep-alive: several requests on one client connection
            big = bytes(range(256)) * 4096  # 1 MiB
            assert req("PUT", "/a", big) == (200, b"stored")
            assert req("GET", "/a") == (200, big)
            assert req("HEAD", "/a")[0] == 200
            assert req("GET", "/chunked")[1] == b"x" * 10000
            assert req("DELETE", "/a") == (204, b"")
            assert req("GET", "/nothing-special?x=1") == (200, b"x" * 10000)
            assert p.stats["connections"] == 1, dict(p.stats)

            # Expect: 100-continue, the interim reply relayed
            raw = socket.create_connection(("127.0.0.1", p.port), timeout=10)
            raw.sendall(b"PUT /e HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                        b"Expect: 100-continue\r\n\r\n")
            got = raw.recv(100)
            assert got.startswith(b"HTTP/1.1 100"), got
            raw.sendall(b"hello")
            rf = raw.makefile("rb")
            h = _read_head(rf)
            assert h[1].split(" ")[1] == "200", h
            assert store["/e"] == b"hello"
            rf.close()
            raw.close()

            # 503: answered here, not forwarded; the connection goes on
            p.rule("503", method="PUT", path_re=r"^/b$")
            n0 = hits["PUT /b"]
            st_, body = req("PUT", "/b", b"12345")
            assert st_ == 503 and b"<Code>SlowDown</Code>" in body, (st_, body)
            assert hits["PUT /b"] == n0 and "/b" not in store
            assert req("PUT", "/b", b"12345") == (200, b"stored")
            # HEAD answered 503 has no body (next request still framed right)
            p.rule("503", method="HEAD")
            assert req("HEAD", "/b") == (503, b"")
            assert req("GET", "/b") == (200, b"12345")

            def fails(method, path, body=None):
                c2 = http.client.HTTPConnection("127.0.0.1", p.port, timeout=2)
                try:
                    c2.request(method, path, body=body)
                    r = c2.getresponse()
                    r.read()
                except (OSError, http.client.HTTPException) as e:
                    return e
                finally:
                    c2.close()
                return None

            # reset_before: nothing forwarded
            p.rule("reset_before", method="PUT", query_has="partNumber=")
            assert fails("PUT", "/c?partNumber=1&uploadId=2", b"abc") is not None
            assert "/c?partNumber=1&uploadId=2" not in store
            # reset_after: the server acted, the reply is lost
            p.rule("reset_after", method="PUT")
            e = fails("PUT", "/d", b"stored-anyway")
            assert e is not None and store.get("/d") == b"stored-anyway", (e, store)
            # reset_mid: headers and half the body, then a reset
            p.rule("reset_mid", method="GET", path_re="^/mid")
            c2 = socket.create_connection(("127.0.0.1", p.port), timeout=10)
            c2.sendall(b"GET /mid HTTP/1.1\r\nHost: x\r\n\r\n")
            got = b""
            try:
                while True:
                    b = c2.recv(65536)
                    if not b:
                        break
                    got += b
            except ConnectionResetError:
                pass
            c2.close()
            head, _, rest = got.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.0 200") or head.startswith(b"HTTP/1.1 200"), got[:100]
            assert len(rest) == 5000, len(rest)
            # reset_mid on a chunked reply, and on a reply without a body
            p.rule("reset_mid", path_re="^/chunked")
            assert fails("GET", "/chunked") is not None
            # (a 204 is whole with its headers: the client has its reply)
            p.rule("reset_mid", method="DELETE")
            assert fails("DELETE", "/gone") is None
            assert hits["DELETE /gone"] == 1
            # copy-source matching by header
            p.rule("reset_after", method="PUT", query_has="copy-source")
            assert fails("PUT", "/nocopy", b"1") is None
            c2 = http.client.HTTPConnection("127.0.0.1", p.port, timeout=3)
            try:
                c2.request("PUT", "/copy", body=b"1",
                           headers={"x-amz-copy-source": "/b/x"})
                c2.getresponse().read()
                raise AssertionError("copy-source rule did not fire")
            except (OSError, http.client.HTTPException):
                pass
            c2.close()
            assert store.get("/copy") == b"1"
            # stalls: no answer within the client's timeout
            p.rule("stall_before", method="GET", path_re="^/stall1")
            t0 = time.monotonic()
            e = fails("GET", "/stall1")
            assert isinstance(e, (socket.timeout, TimeoutError)), e
            assert hits["GET /stall1"] == 0 and time.monotonic() - t0 >= 1.5
            p.rule("stall_after", method="PUT", path_re="^/stall2")
            e = fails("PUT", "/stall2", b"acted")
            assert isinstance(e, (socket.timeout, TimeoutError)), e
            assert store.get("/stall2") == b"acted"
            # random faults: p503=1 answers everything with 503
            p.set(p503=1.0)
            assert req("GET", "/r")[0] == 503
            p.clear()
            assert req("GET", "/r")[0] == 200
            # down: the open connection is reset, new ones refused, then back
            p.down(1.0)
            try:
                req("GET", "/x")
                raise AssertionError("request got through a down proxy")
            except (OSError, http.client.HTTPException):
                conn.close()
            assert fails("GET", "/x") is not None
            time.sleep(1.1)
            assert req("GET", "/x")[0] == 200
            conn.close()
            want = {"503": 3, "reset_before": 1, "reset_mid": 3, "reset_after": 2,
                    "stall_before": 1, "stall_after": 1}
            got = {k: p.stats[k] for k in want}
            assert got == want, (got, dict(p.stats), p.events)
            assert len([e for e in p.events if e.how != "down"]) == sum(want.values())
            # a rule without a count holds until it is removed
            conn = http.client.HTTPConnection("127.0.0.1", p.port, timeout=5)
            r = p.rule("503", method="PUT", path_re=r"^/b$", count=None)
            for _ in range(3):
                assert req("PUT", "/b", b"67890")[0] == 503
            p.unrule(r)
            assert req("PUT", "/b", b"12345") == (200, b"stored")
            assert p.stats["503"] == want["503"] + 3 and not p.rules
            conn.close()
    finally:
        srv.shutdown()
        srv.server_close()


def selftest_s3(endpoint, access_key, secret_key, region="us-east-1", bucket=None):
    """boto3 through the proxy against a real S3 server: a 503 is retried,
    a PUT whose reply is lost (reset_after) is stored anyway, a reset_before
    PUT is not, a reset_mid GET gives a short body, a stall times out, a
    multipart upload (Expect: 100-continue bodies, a part's reply lost)
    completes, chunked listings pass, down() refuses then recovers.
    Creates `bucket` (default: a fresh name) and leaves it."""
    import uuid

    import boto3
    import botocore.config
    import botocore.exceptions

    def client(ep, attempts=5, read_timeout=30):
        kw = dict(s3={"addressing_style": "path"},
                  retries={"total_max_attempts": attempts, "mode": "standard"},
                  connect_timeout=5, read_timeout=read_timeout)
        try:
            cfg = botocore.config.Config(request_checksum_calculation="when_required",
                                         response_checksum_validation="when_required",
                                         **kw)
        except TypeError:
            cfg = botocore.config.Config(**kw)
        return boto3.session.Session(aws_access_key_id=access_key,
                                     aws_secret_access_key=secret_key,
                                     region_name=region).client(
            "s3", endpoint_url=ep, config=cfg)

    direct = client(endpoint)
    bucket = bucket or f"faultproxy-{uuid.uuid4().hex[:8]}"
    direct.create_bucket(Bucket=bucket)

    def stored(key):
        try:
            return direct.get_object(Bucket=bucket, Key=key)["Body"].read()
        except direct.exceptions.NoSuchKey:
            return None

    with FaultProxy(endpoint, seed=3) as p:
        retrying = client(p.endpoint)
        once = client(p.endpoint, attempts=1, read_timeout=2)
        # 503 SlowDown: boto3 retries and succeeds
        p.rule("503", method="PUT")
        retrying.put_object(Bucket=bucket, Key="a", Body=b"A" * 3000)
        assert p.stats["503"] == 1 and stored("a") == b"A" * 3000, p.describe()
        p.rule("503", method="HEAD")
        assert retrying.head_object(Bucket=bucket, Key="a")["ContentLength"] == 3000
        # reset_after on a PUT: the client fails, the object is stored
        p.rule("reset_after", method="PUT")
        try:
            once.put_object(Bucket=bucket, Key="b", Body=b"lost reply")
            raise AssertionError("PUT with a lost reply succeeded")
        except botocore.exceptions.BotoCoreError:
            pass
        assert stored("b") == b"lost reply"
        # reset_before: nothing stored
        p.rule("reset_before", method="PUT")
        try:
            once.put_object(Bucket=bucket, Key="c", Body=b"never")
            raise AssertionError("PUT through reset_before succeeded")
        except botocore.exceptions.BotoCoreError:
            pass
        assert stored("c") is None
        # reset_mid on a GET: headers arrive, the body is cut short
        body = bytes(range(256)) * 8192  # 2 MiB
        retrying.put_object(Bucket=bucket, Key="big", Body=body)  # Expect: 100-continue
        p.rule("reset_mid", method="GET", path_re="/big$")
        try:
            r = once.get_object(Bucket=bucket, Key="big")
            got = r["Body"].read()
            raise AssertionError(f"reset_mid GET read {len(got)} bytes whole")
        except (botocore.exceptions.BotoCoreError, OSError):
            pass
        assert retrying.get_object(Bucket=bucket, Key="big")["Body"].read() == body
        # stall_before: the client times out; with retries it gets through
        p.rule("stall_before", method="GET")
        t0 = time.monotonic()
        try:
            once.get_object(Bucket=bucket, Key="a")["Body"].read()
            raise AssertionError("stalled GET answered")
        except botocore.exceptions.BotoCoreError:
            assert time.monotonic() - t0 >= 1.5
        # stall_after on a DELETE: the server deleted, no reply came
        p.rule("stall_after", method="DELETE")
        try:
            once.delete_object(Bucket=bucket, Key="b")
            raise AssertionError("stalled DELETE answered")
        except botocore.exceptions.BotoCoreError:
            pass
        assert stored("b") is None
        # multipart: a part's reply lost once (retried), completion's too
        mp = retrying.create_multipart_upload(Bucket=bucket, Key="mp")
        uid = mp["UploadId"]
        p.rule("reset_after", method="PUT", query_has="partNumber=")
        parts = []
        for n, piece in ((1, body * 3), (2, b"tail")):
            r = retrying.upload_part(Bucket=bucket, Key="mp", UploadId=uid,
                                     PartNumber=n, Body=piece)
            parts.append({"PartNumber": n, "ETag": r["ETag"]})
        retrying.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=uid,
                                           MultipartUpload={"Parts": parts})
        assert stored("mp") == body * 3 + b"tail"
        # listings (RGW answers them chunked) and a copy matched by header
        keys = {o["Key"] for o in retrying.list_objects_v2(Bucket=bucket)["Contents"]}
        assert keys == {"a", "big", "mp"}, keys
        p.rule("reset_after", method="PUT", query_has="copy-source")
        try:
            once.copy_object(Bucket=bucket, Key="copy",
                             CopySource={"Bucket": bucket, "Key": "a"})
            raise AssertionError("copy with a lost reply succeeded")
        except botocore.exceptions.BotoCoreError:
            pass
        assert stored("copy") == b"A" * 3000
        # down: refused while down, fine afterwards
        p.down(1.5)
        try:
            once.head_object(Bucket=bucket, Key="a")
            raise AssertionError("HEAD got through a down proxy")
        except botocore.exceptions.BotoCoreError:
            pass
        time.sleep(1.6)
        assert once.head_object(Bucket=bucket, Key="a")["ContentLength"] == 3000
        assert not p.rules, p.describe()
        return dict(p.stats)


# --------------------------------------------------------------------------
# CLI

def main(argv=None):
    import argparse
    import signal
    ap = argparse.ArgumentParser(description="Fault-injecting HTTP/1.1 proxy "
                                 "in front of an S3 endpoint.")
    ap.add_argument("--target", help="http://HOST:PORT of the server")
    ap.add_argument("--port", type=int, default=0, help="listen port (default: any)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--p503", type=float, default=0.0)
    ap.add_argument("--reset-before", type=float, default=0.0)
    ap.add_argument("--reset-mid", type=float, default=0.0)
    ap.add_argument("--reset-after", type=float, default=0.0)
    ap.add_argument("--stall-before", type=float, default=0.0)
    ap.add_argument("--stall-after", type=float, default=0.0)
    ap.add_argument("--selftest", action="store_true",
                    help="run selftest_local() and exit")
    a = ap.parse_args(argv)
    if a.selftest:
        selftest_local()
        print("selftest ok")
        return 0
    if not a.target:
        ap.error("--target is required")
    p = FaultProxy(a.target, seed=a.seed, port=a.port)
    p.set(p503=a.p503, reset_before=a.reset_before, reset_mid=a.reset_mid,
          reset_after=a.reset_after, stall_before=a.stall_before,
          stall_after=a.stall_after)
    print(f"endpoint={p.endpoint}", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(1.0):
        pass
    p.close()
    sys.stderr.write(f"faultproxy: {dict(p.stats)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
