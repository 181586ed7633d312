#!/usr/bin/python3
"""Local credential services for the ckptfs credential-chain tests, each
following AWS's documentation of the real service, handing out REAL
temporary keys that the tests' Ceph RGW accepts.

KeySource      asks RGW's STS for a fresh set (GetSessionToken with the
               test user's keys, 900 s, RGW's minimum) for every hand-out,
               and announces a much shorter Expiration (`announce` seconds)
               so clients must refresh quickly.  It remembers every set it
               gave and when it said the set expires.
ExpiryGuard    the `inspect` hook of faultproxy.FaultProxy in front of RGW:
               a request whose x-amz-security-token belongs to a set past
               its announced Expiration is refused with 400 ExpiredToken,
               as AWS refuses it; it also counts requests per set.
IMDSServer     EC2 instance metadata (IMDS): PUT /latest/api/token needs
               X-aws-ec2-metadata-token-ttl-seconds (1-21600, else 400) and
               is refused (403) with X-Forwarded-For; the token comes back
               with the TTL header.  GETs with X-aws-ec2-metadata-token must
               carry a live token (401 otherwise); GETs without one get
               401 when IMDSv2 is required, else IMDSv1 answers.
               /latest/meta-data/iam/security-credentials/ lists the role,
               .../ROLE is the JSON document (Code, LastUpdated, Type,
               AccessKeyId, SecretAccessKey, Token, Expiration).
ContainerServer the ECS / EKS Pod Identity endpoint: GET PATH with
               Authorization equal to the configured token (401/403
               otherwise, as the EKS Pod Identity Agent does), JSON
               {AccessKeyId, SecretAccessKey, Token, Expiration, RoleArn,
               AccountId}.
STSServer      STS's query API, POST / form-encoded:
               AssumeRoleWithWebIdentity (unsigned; the WebIdentityToken is
               a JWT whose "exp" claim is checked: ExpiredTokenException,
               InvalidIdentityToken otherwise) and AssumeRole (SigV4-signed
               with service "sts"; the signature is verified against the
               known source keys: SignatureDoesNotMatch, AccessDenied),
               with AWS's response and ErrorResponse XML shapes.

Each server can be told to misbehave: mode "garbage" (200 with a body that
is not the document), "hang" (accept, read the request, never answer) or
"slow" (answer as "ok" does, after `slow_s` seconds; a set it issues is
issued after the wait);
`plan`, a list of modes, gives the next requests theirs, one each, before
`mode` applies again; STSServer.fail_next(n) answers the next n calls with
503.  Every server records what it was asked in `requests`, and when and
in which mode in `log` ((time, mode) pairs).  `sock`: a listening socket
to serve (netns.py makes one inside a network namespace, e.g. on the ECS
address 169.254.170.2:80) instead of one on 127.0.0.1.
"""

import base64
import datetime
import hashlib
import hmac
import http.server
import json
import secrets
import ssl
import threading
import time
import urllib.parse
from xml.sax.saxutils import escape

STS_NS = "https://sts.amazonaws.com/doc/2011-06-15/"


def iso(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


class KeySource:
    """Real temporary keys from RGW's STS, announced with a short expiry."""

    def __init__(self, s3server, announce=900):
        import boto3
        self.announce = announce
        kw = dict(endpoint_url=s3server.endpoint,
                  aws_access_key_id=s3server.access_key,
                  aws_secret_access_key=s3server.secret_key,
                  region_name=s3server.region)
        self._sts = boto3.client("sts", **kw)
        self._iam = boto3.client("iam", **kw)
        self._lock = threading.Lock()
        self.issued = []  # dicts: id, secret, token, expires, t
        self._allow_session_tokens()

    def _allow_session_tokens(self):
        # RGW needs a user policy allowing sts:GetSessionToken (the user has
        # the user-policy cap from rgw.sh).  Idempotent.
        self._iam.put_user_policy(
            UserName="ckptfs-test", PolicyName="ckptfs-sts",
            PolicyDocument=json.dumps({
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow",
                               "Action": ["sts:GetSessionToken"],
                               "Resource": "*"}]}))

    def issue(self):
        c = self._sts.get_session_token(DurationSeconds=900)["Credentials"]
        now = time.time()
        k = dict(id=c["AccessKeyId"], secret=c["SecretAccessKey"],
                 token=c["SessionToken"], expires=int(now + self.announce),
                 t=now)
        with self._lock:
            self.issued.append(k)
        return k

    def _find(self, field, value):
        with self._lock:
            return next((k for k in self.issued if k[field] == value), None)

    def by_id(self, key_id):
        return self._find("id", key_id)

    def by_token(self, token):
        return self._find("token", token)


class ExpiryGuard:
    """faultproxy inspect hook: refuses requests signed with a set of
    KeySource's past its announced Expiration; counts requests per set."""

    def __init__(self, keys):
        self.keys = keys
        self.lock = threading.Lock()
        self.used = {}     # access key id -> requests
        self.last = {}     # access key id -> time of its last request
        self.refused = []  # (t, method, path, id)
        self.static = 0    # requests not signed with a temporary set

    def __call__(self, method, path, query, hdrs):
        tok = ""
        for k, v in hdrs:
            if k == "x-amz-security-token":
                tok = v
        k = self.keys.by_token(tok) if tok else None
        with self.lock:
            if k is None:
                self.static += 1
                return None
            if time.time() >= k["expires"]:
                self.refused.append((time.time(), method, path, k["id"]))
                return (400, "ExpiredToken", "The provided token has expired.")
            self.used[k["id"]] = self.used.get(k["id"], 0) + 1
            self.last[k["id"]] = time.time()
        return None


class _Server:
    """A ThreadingHTTPServer on 127.0.0.1 with a handler class bound to
    this object; stop() closes it and releases hung handlers."""

    def __init__(self, mode="ok", tls=None, sock=None):
        """tls: (certificate file, key file) to serve https://; sock: a
        listening socket to serve."""
        self.mode = mode
        self.slow_s = 3.0
        self.plan = []
        self.log = []
        self.requests = []
        self.lock = threading.Lock()
        self.released = threading.Event()
        owner = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _go(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                with owner.lock:
                    owner.requests.append((self.command, self.path,
                                           dict(self.headers.items()), body))
                    mode = owner.plan.pop(0) if owner.plan else owner.mode
                    owner.log.append((time.time(), mode))
                if mode == "hang":
                    owner.released.wait(120)
                    self.close_connection = True
                    return
                if mode == "slow":
                    time.sleep(owner.slow_s)
                if mode == "garbage":  # nothing issued, nothing checked
                    status, headers = 200, [("Content-Type", "text/html")]
                    out = b"<html><body>Service temporarily moved</body>"
                else:
                    status, headers, out = owner.handle(
                        self.command, self.path, self.headers, body)
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_GET = do_PUT = do_POST = _go

        self.httpd = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), H, bind_and_activate=sock is None)
        if sock is not None:
            self.httpd.socket.close()
            self.httpd.socket = sock
            self.httpd.server_address = sock.getsockname()
        self.httpd.daemon_threads = True
        host, self.port = self.httpd.server_address[:2]
        self.url = f"http://{host}:{self.port}"
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*map(str, tls))
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket,
                                                server_side=True)
            self.url = f"https://{host}:{self.port}"
        self._t = threading.Thread(target=self.httpd.serve_forever,
                                   daemon=True)
        self._t.start()

    def stop(self):
        self.released.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def count(self, method=None, path_prefix=""):
        with self.lock:
            return sum(1 for m, p, _, _ in self.requests
                       if (method is None or m == method)
                       and p.startswith(path_prefix))


def _json(status, doc):
    return status, [("Content-Type", "application/json")], \
        json.dumps(doc, indent=2).encode()


def _text(status, s, headers=()):
    return status, [("Content-Type", "text/plain"), *headers], s.encode()


class IMDSServer(_Server):
    TOKEN_PATH = "/latest/api/token"
    CREDS_DIR = "/latest/meta-data/iam/security-credentials/"

    def __init__(self, keys, role="ckptfs-node-role", require_v2=True,
                 tokens=True, mode="ok"):
        """tokens=False: an IMDS without IMDSv2 (token PUTs get 404)."""
        self.keys, self.role, self.require_v2 = keys, role, require_v2
        self.with_tokens = tokens
        self.tokens = {}  # token -> expiry (monotonic)
        super().__init__(mode)

    def _put_token(self, headers):
        if headers.get("X-Forwarded-For"):
            return _text(403, "Forbidden")
        ttl = headers.get("X-aws-ec2-metadata-token-ttl-seconds")
        if ttl is None or not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
            return _text(400, "Bad Request")
        tok = base64.b64encode(secrets.token_bytes(40)).decode()
        with self.lock:
            self.tokens[tok] = time.monotonic() + int(ttl)
        return _text(200, tok, [("X-aws-ec2-metadata-token-ttl-seconds", ttl)])

    def handle(self, method, path, headers, body):
        if method == "PUT":
            if path == self.TOKEN_PATH and self.with_tokens:
                return self._put_token(headers)
            return _text(404 if path == self.TOKEN_PATH else 405,
                         "Not Found" if path == self.TOKEN_PATH
                         else "Method Not Allowed")
        if method != "GET":
            return _text(405, "Method Not Allowed")
        tok = headers.get("X-aws-ec2-metadata-token")
        if tok is not None:
            with self.lock:
                exp = self.tokens.get(tok)
            if exp is None or exp < time.monotonic():
                return _text(401, "Unauthorized")
        elif self.require_v2:
            return _text(401, "Unauthorized")
        if path in (self.CREDS_DIR, self.CREDS_DIR.rstrip("/")):
            return _text(200, self.role)
        if path == self.CREDS_DIR + self.role:
            k = self.keys.issue()
            return _json(200, {
                "Code": "Success", "LastUpdated": iso(k["t"]),
                "Type": "AWS-HMAC", "AccessKeyId": k["id"],
                "SecretAccessKey": k["secret"], "Token": k["token"],
                "Expiration": iso(k["expires"])})
        return _text(404, "Not Found")


class ContainerServer(_Server):
    def __init__(self, keys, path="/v1/credentials", auth_token=None,
                 mode="ok", sock=None):
        self.keys, self.path, self.auth_token = keys, path, auth_token
        super().__init__(mode, sock=sock)

    def handle(self, method, path, headers, body):
        if method != "GET":
            return _json(405, {"code": "MethodNotAllowed", "message": "GET only"})
        if self.auth_token is not None:
            got = headers.get("Authorization")
            if got is None:
                return _json(401, {"code": "AccessDeniedException",
                                   "message": "missing authorization token"})
            if got != self.auth_token:
                return _json(403, {"code": "AccessDeniedException",
                                   "message": "invalid authorization token"})
        if path != self.path:
            return _json(404, {"code": "NotFound", "message": "no such path"})
        k = self.keys.issue()
        return _json(200, {
            "AccessKeyId": k["id"], "SecretAccessKey": k["secret"],
            "Token": k["token"], "Expiration": iso(k["expires"]),
            "RoleArn": "arn:aws:iam::123456789012:role/ckptfs-pod-role",
            "AccountId": "123456789012"})


def make_jwt(exp, sub="system:serviceaccount:ml:trainer"):
    """A JWT-shaped web identity token (unsigned: the test STS checks the
    claims, not a key)."""
    def b64(d):
        return base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()
    return ".".join([b64({"alg": "RS256", "kid": "test"}),
                     b64({"iss": "https://oidc.test", "sub": sub,
                          "aud": "sts.amazonaws.com", "exp": int(exp),
                          "iat": int(time.time()),
                          "jti": secrets.token_hex(8)}),
                     base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()])


def jwt_claims(tok):
    try:
        p = tok.split(".")[1]
        return json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4)))
    except (IndexError, ValueError):
        return None


def _sigv4_ok(secret, method, path, headers, body, auth, region):
    """Verifies a SigV4 Authorization header (service sts)."""
    try:
        algo, rest = auth.split(" ", 1)
        parts = dict(p.strip().split("=", 1) for p in rest.split(","))
        cred = parts["Credential"].split("/")
        signed = parts["SignedHeaders"].split(";")
    except (ValueError, KeyError):
        return False
    if algo != "AWS4-HMAC-SHA256" or len(cred) != 5 or cred[3] != "sts":
        return False
    day, amz_date = cred[1], headers.get("X-Amz-Date", "")
    lower = {k.lower(): " ".join(v.split()) for k, v in headers.items()}
    canon_headers = "".join(f"{h}:{lower.get(h, '')}\n" for h in signed)
    canonical = "\n".join([method, path, "", canon_headers, ";".join(signed),
                           hashlib.sha256(body).hexdigest()])
    scope = "/".join(cred[1:])
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                     hashlib.sha256(canonical.encode()).hexdigest()])
    k = ("AWS4" + secret).encode()
    for part in (day, cred[2], "sts", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    want = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    return hmac.compare_digest(want, parts.get("Signature", ""))


class STSServer(_Server):
    def __init__(self, keys, source_keys=None, region="us-east-1", mode="ok",
                 tls=None, sock=None, issued_may_sign=False):
        """source_keys: {access key id: secret} allowed to sign AssumeRole;
        issued_may_sign: so may every temporary set `keys` issued (with its
        session token), as a task role or a pod's role may call STS."""
        self.keys, self.region = keys, region
        self.source_keys = dict(source_keys or {})
        self.issued_may_sign = issued_may_sign
        self.calls = []  # dicts: action, role, session, token, signer
        self.failures = 0  # the next this many calls answer 503
        super().__init__(mode, tls, sock)

    def fail_next(self, n):
        """The next n calls get 503 ServiceUnavailable (STS's Receiver
        error for an outage)."""
        with self.lock:
            self.failures = n

    def _error(self, status, code, message, typ="Sender"):
        xml = (f'<ErrorResponse xmlns="{STS_NS}">\n'
               f"  <Error>\n    <Type>{typ}</Type>\n"
               f"    <Code>{code}</Code>\n"
               f"    <Message>{escape(message)}</Message>\n  </Error>\n"
               f"  <RequestId>{secrets.token_hex(8)}</RequestId>\n"
               "</ErrorResponse>\n")
        return status, [("Content-Type", "text/xml")], xml.encode()

    def _ok(self, action, k, extra=""):
        xml = (f'<{action}Response xmlns="{STS_NS}">\n'
               f"  <{action}Result>\n{extra}"
               "    <AssumedRoleUser>\n"
               "      <AssumedRoleId>AROATEST:ckptfs</AssumedRoleId>\n"
               "      <Arn>arn:aws:sts::123456789012:assumed-role/r/ckptfs</Arn>\n"
               "    </AssumedRoleUser>\n"
               "    <Credentials>\n"
               f"      <SessionToken>{escape(k['token'])}</SessionToken>\n"
               f"      <SecretAccessKey>{escape(k['secret'])}</SecretAccessKey>\n"
               f"      <Expiration>{iso(k['expires'])}</Expiration>\n"
               f"      <AccessKeyId>{escape(k['id'])}</AccessKeyId>\n"
               "    </Credentials>\n"
               f"  </{action}Result>\n"
               "  <ResponseMetadata>\n"
               f"    <RequestId>{secrets.token_hex(8)}</RequestId>\n"
               "  </ResponseMetadata>\n"
               f"</{action}Response>\n")
        return 200, [("Content-Type", "text/xml")], xml.encode()

    def handle(self, method, path, headers, body):
        if method != "POST" or path != "/":
            return self._error(400, "InvalidAction", "POST / expected")
        form = dict(urllib.parse.parse_qsl(body.decode(), keep_blank_values=True))
        action = form.get("Action")
        if form.get("Version") != "2011-06-15":
            return self._error(400, "InvalidParameterValue", "bad Version")
        if not form.get("RoleArn", "").startswith("arn:aws:iam::"):
            return self._error(400, "ValidationError", "RoleArn is invalid")
        if not form.get("RoleSessionName"):
            return self._error(400, "ValidationError",
                               "RoleSessionName is required")
        call = dict(action=action, role=form["RoleArn"],
                    session=form["RoleSessionName"],
                    token=form.get("WebIdentityToken"), signer=None)
        with self.lock:
            self.calls.append(call)
            fail = self.failures > 0
            self.failures -= fail
        if fail:
            call["failed"] = True
            return self._error(503, "ServiceUnavailable",
                               "Service is unable to handle request.",
                               "Receiver")
        if action == "AssumeRoleWithWebIdentity":
            claims = jwt_claims(form.get("WebIdentityToken", ""))
            if not claims:
                return self._error(400, "InvalidIdentityToken",
                                   "Couldn't parse the web identity token")
            if claims.get("exp", 0) <= time.time():
                return self._error(
                    400, "ExpiredTokenException",
                    f"Token expired: current date/time {int(time.time())} must "
                    f"be before the expiration date/time {claims.get('exp')}")
            extra = (f"    <SubjectFromWebIdentityToken>{escape(claims['sub'])}"
                     "</SubjectFromWebIdentityToken>\n"
                     "    <Audience>sts.amazonaws.com</Audience>\n"
                     "    <Provider>oidc.test</Provider>\n")
            return self._ok(action, self.keys.issue(), extra)
        if action == "AssumeRole":
            auth = headers.get("Authorization", "")
            kid = auth.split("Credential=")[-1].split("/")[0] if auth else ""
            call["signer"] = kid
            secret = self.source_keys.get(kid)
            k = self.keys.by_id(kid) if self.issued_may_sign else None
            if k is not None and headers.get("X-Amz-Security-Token") == \
                    k["token"] and time.time() < k["expires"]:
                secret = k["secret"]
            if secret is None:
                return self._error(403, "InvalidClientTokenId",
                                   "The security token included in the "
                                   "request is invalid.")
            if not _sigv4_ok(secret, method, path, headers, body, auth,
                             self.region):
                return self._error(403, "SignatureDoesNotMatch",
                                   "The request signature we calculated does "
                                   "not match the signature you provided.")
            return self._ok(action, self.keys.issue())
        return self._error(400, "InvalidAction", f"unknown action {action}")
