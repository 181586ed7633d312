"""The credential chain against real processes: local IMDS, container and
STS servers (credservers.py, following AWS's documents) hand out real
temporary keys from the test RGW's STS; every S3 request of the mount goes
through a proxy that refuses, as AWS does, a request signed with a set past
the Expiration the server announced.  No static key reaches ckptfs except
where a test says so (the source profile of assume-role, which only signs
STS)."""

import json
import os
import re
import time
import uuid
from pathlib import Path

import pytest

import credservers
import helpers
from credservers import (ContainerServer, ExpiryGuard, IMDSServer, KeySource,
                         STSServer, make_jwt)
from faultproxy import FaultProxy
from helpers import CKPTFS_BIN, run
from netns import NetNS
from test_errors import expect_failure
from test_metrics import check_exposition, scrape, val

ROLE = "arn:aws:iam::123456789012:role/ckptfs-trainer"


@pytest.fixture(scope="session")
def s3server(sts_s3server):
    """In this module the S3 server (for `bucket` and `mount` too) is the
    RGW with STS enabled (conftest.py says why it is a second one)."""
    return sts_s3server


@pytest.fixture
def keys(s3server):
    """Temporary keys from RGW, announced as valid for 900 s."""
    return KeySource(s3server)


@pytest.fixture
def guard(keys):
    return ExpiryGuard(keys)


@pytest.fixture
def proxy(s3server, guard):
    p = FaultProxy(s3server.endpoint, inspect=guard)
    yield p
    p.close()


@pytest.fixture
def servers():
    """servers(cls, *args, **kw): a credential server stopped at teardown."""
    made = []

    def make(cls, *a, **kw):
        s = cls(*a, **kw)
        made.append(s)
        return s
    yield make
    for s in made:
        s.stop()


def env_for(s3server, **extra):
    """ckptfs's environment: no keys, IMDS off unless the test turns it on."""
    return s3server.env_without_keys(**extra)


def mount_via(mount, s3server, bucket, proxy, env, tmp_path, name="w",
              extra_args=()):
    mp = tmp_path / f"mnt-{name}"
    mp.mkdir(exist_ok=True)
    argv = mount.argv(bucket, "", mp, [f"cache_dir={tmp_path}/cache-{name}"],
                      endpoint=False, extra_args=extra_args)
    argv += ["--endpoint", proxy.endpoint, "--region", s3server.region]
    return mount(bucket, argv=argv, mountpoint=mp, env=env, timeout=60)


def failing_mount(mount, s3server, bucket, env, tmp_path, limit):
    mp = tmp_path / "mnt-fail"
    mp.mkdir(exist_ok=True)
    argv = mount.argv(bucket, "", mp, [f"cache_dir={tmp_path}/cache-f"],
                      foreground=False)
    return expect_failure(argv, env, mp, limit)


def save_and_read(s3server, bucket, m, i):
    """One step of a training job: load an object another host wrote
    (a remote GET), save a checkpoint (tmp dir, rename, sync) and check it
    landed in the bucket."""
    body = helpers.det_bytes(i, 300_000)
    s3server.put(bucket, f"in/obj-{i}", body)
    p = m.path / "in" / f"obj-{i}"
    # the mount's listing cache may still hold "no such name" for a moment
    assert helpers.wait_until(p.exists, 10), f"{p} never appeared"
    assert p.read_bytes() == body
    tmp = m.path / f"ckpt-{i}.tmp"
    tmp.mkdir()
    data = helpers.det_bytes(1000 + i, 1_500_000)
    (tmp / "model.bin").write_bytes(data)
    os.rename(tmp, m.path / f"ckpt-{i}")
    run([CKPTFS_BIN, "sync", str(m.path)], timeout=60)
    got = s3server.client().get_object(Bucket=bucket,
                                       Key=f"ckpt-{i}/model.bin")["Body"].read()
    assert got == data


def assert_no_secret(text, keys):
    for k in keys.issued:
        assert k["secret"] not in text and k["token"] not in text


# --------------------------------------------------------------------------
# Rotation: web identity with a 15 s announced expiry

@pytest.mark.timeout(150)
def test_web_identity_rotates_without_a_failed_request(
        mount, s3server, bucket, keys, guard, proxy, servers, tmp_path):
    keys.announce = 15  # refreshed 5 s before expiry, every ~10 s
    sts = servers(STSServer, keys)
    tok = tmp_path / "token"
    tok.write_text(make_jwt(time.time() + 3600))
    env = env_for(s3server, AWS_ROLE_ARN=ROLE, AWS_WEB_IDENTITY_TOKEN_FILE=tok,
                  AWS_ROLE_SESSION_NAME="trainer-0",
                  AWS_ENDPOINT_URL_STS=sts.url)
    m = mount_via(mount, s3server, bucket, proxy, env, tmp_path)
    # STS is down for the first refresh (both attempts of it): the mount
    # keeps the current set, warns, and tries again before it expires
    sts.fail_next(2)
    t0 = time.monotonic()
    i = 0
    # Kubernetes rotates the projected token: so do we, every step
    while len(keys.issued) < 4 or guard.used.get(keys.issued[3]["id"], 0) < 5:
        assert time.monotonic() - t0 < 100, \
            f"only {len(keys.issued)} sets issued in 100 s\n{m.log_tail()}"
        tok.write_text(make_jwt(time.time() + 3600))
        save_and_read(s3server, bucket, m, i)
        i += 1
    assert guard.refused == [], f"requests signed with expired keys: {guard.refused}"
    assert guard.static == 0
    used = [k["id"] for k in keys.issued if guard.used.get(k["id"])]
    assert len(used) >= 4, f"sets used: {used} of {len(keys.issued)}"
    calls = [c for c in sts.calls if c["action"] == "AssumeRoleWithWebIdentity"
             and not c.get("failed")]
    assert sum(1 for c in sts.calls if c.get("failed")) == 2
    assert "refreshing the credentials from web identity failed" in m.log_text()
    assert {c["role"] for c in calls} == {ROLE}
    assert {c["session"] for c in calls} == {"trainer-0"}
    assert len({c["token"] for c in calls}) == len(calls), \
        "the token file was not read again on refresh"
    assert_no_secret(m.log_text(), keys)
    print(f"\n[rotation] {i} save/read steps in {time.monotonic() - t0:.1f}s, "
          f"{len(keys.issued)} sets issued, requests per set: "
          f"{[guard.used.get(k['id'], 0) for k in keys.issued]}, "
          f"refused: {len(guard.refused)}")


def test_web_identity_expired_token_is_a_clear_error(
        mount, s3server, bucket, keys, servers, tmp_path):
    sts = servers(STSServer, keys)
    tok = tmp_path / "token"
    tok.write_text(make_jwt(time.time() - 60))
    env = env_for(s3server, AWS_ROLE_ARN=ROLE, AWS_WEB_IDENTITY_TOKEN_FILE=tok,
                  AWS_ENDPOINT_URL_STS=sts.url)
    f = failing_mount(mount, s3server, bucket, env, tmp_path, 30)
    msg = "\n".join(f.message_lines())
    assert "web identity" in msg and str(tok) in msg
    assert "ExpiredTokenException" in msg and sts.url in msg
    assert tok.read_text() not in f.stderr


# --------------------------------------------------------------------------
# EC2 instance metadata

def test_imds_v2(mount, s3server, bucket, keys, guard, proxy, servers,
                 tmp_path):
    """IMDSv2 only (401 without a token); 6 s credentials, so the mount
    refreshes (a new token, then the role's document) while it works."""
    keys.announce = 6
    imds = servers(IMDSServer, keys, require_v2=True)
    env = env_for(s3server, AWS_EC2_METADATA_DISABLED="false",
                  AWS_EC2_METADATA_SERVICE_ENDPOINT=imds.url)
    m = mount_via(mount, s3server, bucket, proxy, env, tmp_path)
    i, t0 = 0, time.monotonic()
    while len([k for k in keys.issued if guard.used.get(k["id"])]) < 2:
        assert time.monotonic() - t0 < 30, "no refresh from IMDS"
        save_and_read(s3server, bucket, m, i)
        i += 1
    assert guard.refused == []
    assert imds.count("PUT") >= 2  # a token for each fetch
    puts = [r for r in imds.requests if r[0] == "PUT"]
    assert puts and all(p[1] == "/latest/api/token" and
                        p[2].get("X-aws-ec2-metadata-token-ttl-seconds") == "21600"
                        for p in puts)
    gets = [r for r in imds.requests if r[0] == "GET"]
    assert [g[1] for g in gets[:2]] == [
        "/latest/meta-data/iam/security-credentials/",
        "/latest/meta-data/iam/security-credentials/ckptfs-node-role"]
    assert all(g[2].get("X-aws-ec2-metadata-token") for g in gets)
    assert guard.static == 0 and guard.used and guard.refused == []


def test_a_request_in_the_last_second_waits_for_a_slow_refresh(
        mount, s3server, bucket, keys, guard, proxy, servers, tmp_path):
    """6 s IMDS credentials; the refresh's credentials document comes 3 s
    late (within the 5 s AWS_METADATA_SERVICE_TIMEOUT), so for about two
    seconds the old set is in its last second, which is never used to
    sign, and the new one has not come.  A read of an object the mount
    never saw (lookup and GET) and a save started in that window wait for
    the new set; they do not fail with EACCES."""
    keys.announce = 6
    imds = servers(IMDSServer, keys, require_v2=True)
    env = env_for(s3server, AWS_EC2_METADATA_DISABLED="false",
                  AWS_EC2_METADATA_SERVICE_ENDPOINT=imds.url,
                  AWS_METADATA_SERVICE_TIMEOUT="5")
    m = mount_via(mount, s3server, bucket, proxy, env, tmp_path)
    first = keys.issued[0]
    body = helpers.det_bytes(7, 300_000)
    s3server.put(bucket, "in/late", body)
    # the refresh: a token, the role's name, then its document, late
    imds.plan = ["ok", "ok", "slow"]
    assert helpers.wait_until(
        lambda: any(mode == "slow" for _, mode in imds.log), 15), \
        f"no refresh began: {imds.log}\n{m.log_tail()}"
    while time.time() < first["expires"] - 1 + 0.2:
        time.sleep(0.02)
    t_op = time.time()
    assert len(keys.issued) == 1, \
        f"the slow document came before the window: {imds.log}"
    assert (m.path / "in" / "late").read_bytes() == body
    data = helpers.det_bytes(8, 1_000_000)
    (m.path / "saved.bin").write_bytes(data)
    run([CKPTFS_BIN, "sync", str(m.path)], timeout=60)
    got = s3server.client().get_object(Bucket=bucket,
                                       Key="saved.bin")["Body"].read()
    assert got == data
    # the read had to wait: the new set came after it began
    assert len(keys.issued) >= 2 and keys.issued[1]["t"] > t_op, \
        (keys.issued, t_op)
    assert guard.refused == [], f"expired keys used: {guard.refused}"
    assert guard.used.get(keys.issued[1]["id"])
    assert "refreshing the credentials from" not in m.log_text(), \
        "the slow refresh counted as a failure"


def test_imds_v1_fallback_only_when_allowed(mount, s3server, bucket, keys,
                                           guard, proxy, servers, tmp_path):
    imds = servers(IMDSServer, keys, require_v2=False, tokens=False)
    env = env_for(s3server, AWS_EC2_METADATA_DISABLED="false",
                  AWS_EC2_METADATA_SERVICE_ENDPOINT=imds.url,
                  AWS_EC2_METADATA_V1_DISABLED="true")
    f = failing_mount(mount, s3server, bucket, env, tmp_path, 30)
    assert "IMDSv1 is disabled" in "\n".join(f.message_lines())
    env["AWS_EC2_METADATA_V1_DISABLED"] = "false"
    m = mount_via(mount, s3server, bucket, proxy, env, tmp_path)
    save_and_read(s3server, bucket, m, 0)
    gets = [r for r in imds.requests if r[0] == "GET"]
    assert gets and not any("X-aws-ec2-metadata-token" in g[2] for g in gets)


def test_imds_that_hangs_fails_within_its_deadline(mount, s3server, bucket,
                                                   keys, servers, tmp_path):
    imds = servers(IMDSServer, keys, mode="hang")
    env = env_for(s3server, AWS_EC2_METADATA_DISABLED="false",
                  AWS_EC2_METADATA_SERVICE_ENDPOINT=imds.url)
    f = failing_mount(mount, s3server, bucket, env, tmp_path, 20)
    msg = "\n".join(f.message_lines())
    assert "no AWS credentials found" in msg
    assert "EC2 instance metadata" in msg and "no reply within 1000 ms" in msg
    # token PUT (1 s) and the IMDSv1 GET (1 s), plus start-up
    assert f.elapsed < 10, f"took {f.elapsed:.1f}s"


# --------------------------------------------------------------------------
# Container credentials (EKS Pod Identity shape: full URI + token file)

def test_container_credentials_with_token_file(mount, s3server, bucket, keys,
                                               guard, proxy, servers,
                                               tmp_path):
    c = servers(ContainerServer, keys, auth_token="pod-identity-jwt-1")
    tokf = tmp_path / "eks-pod-identity-token"
    tokf.write_text("pod-identity-jwt-1\n")
    env = env_for(s3server,
                  AWS_CONTAINER_CREDENTIALS_FULL_URI=c.url + "/v1/credentials",
                  AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=tokf)
    m = mount_via(mount, s3server, bucket, proxy, env, tmp_path)
    save_and_read(s3server, bucket, m, 0)
    assert c.requests and all(r[2].get("Authorization") == "pod-identity-jwt-1"
                              for r in c.requests)
    assert guard.static == 0 and guard.used


@pytest.mark.parametrize("case", ["wrong-token", "garbage"])
def test_container_credentials_errors(mount, s3server, bucket, keys, servers,
                                      tmp_path, case):
    c = servers(ContainerServer, keys, auth_token="right",
                mode="garbage" if case == "garbage" else "ok")
    env = env_for(s3server,
                  AWS_CONTAINER_CREDENTIALS_FULL_URI=c.url + "/v1/credentials",
                  AWS_CONTAINER_AUTHORIZATION_TOKEN="right" if case == "garbage"
                  else "wrong")
    f = failing_mount(mount, s3server, bucket, env, tmp_path, 20)
    msg = "\n".join(f.message_lines())
    assert "the container credentials endpoint " + c.url in msg
    assert ("answered HTTP 403" if case == "wrong-token" else "not JSON") in msg
    assert "tried before: environment" in msg


# --------------------------------------------------------------------------
# Shared files: assume role from a source profile, credential_process

def test_assume_role_signed_with_the_source_profile(
        mount, s3server, bucket, keys, guard, proxy, servers, tmp_path):
    sts = servers(STSServer, keys,
                  source_keys={s3server.access_key: s3server.secret_key})
    cfg = tmp_path / "config"
    cfg.write_text(f"[profile train]\nrole_arn = {ROLE}\nsource_profile = base\n"
                   "role_session_name = job-7\nduration_seconds = 900\n"
                   "[profile base]\nregion = us-east-1\n")
    cred = tmp_path / "credentials"
    cred.write_text(f"[base]\naws_access_key_id = {s3server.access_key}\n"
                    f"aws_secret_access_key = {s3server.secret_key}\n")
    env = env_for(s3server, AWS_CONFIG_FILE=cfg, AWS_SHARED_CREDENTIALS_FILE=cred,
                  AWS_PROFILE="train", AWS_ENDPOINT_URL_STS=sts.url)
    m = mount_via(mount, s3server, bucket, proxy, env, tmp_path)
    save_and_read(s3server, bucket, m, 0)
    assert [(c["action"], c["signer"], c["session"]) for c in sts.calls] == [
        ("AssumeRole", s3server.access_key, "job-7")]
    assert guard.static == 0 and guard.used  # S3 saw only the role's keys


def test_credential_process(mount, s3server, bucket, keys, guard, proxy,
                            tmp_path):
    k = keys.issue()
    doc = tmp_path / "creds.json"
    doc.write_text(f'{{"Version": 1, "AccessKeyId": "{k["id"]}", '
                   f'"SecretAccessKey": "{k["secret"]}", '
                   f'"SessionToken": "{k["token"]}", '
                   f'"Expiration": "{credservers.iso(k["expires"])}"}}')
    cfg = tmp_path / "config"
    cfg.write_text(f"[default]\ncredential_process = /bin/cat '{doc}'\n")
    env = env_for(s3server, AWS_CONFIG_FILE=cfg)
    m = mount_via(mount, s3server, bucket, proxy, env, tmp_path)
    save_and_read(s3server, bucket, m, 0)
    assert guard.used.get(k["id"]) and guard.static == 0


def test_sts_garbage_is_a_clear_error(mount, s3server, bucket, keys, servers,
                                      tmp_path):
    sts = servers(STSServer, keys, mode="garbage")
    tok = tmp_path / "token"
    tok.write_text(make_jwt(time.time() + 3600))
    env = env_for(s3server, AWS_ROLE_ARN=ROLE, AWS_WEB_IDENTITY_TOKEN_FILE=tok,
                  AWS_ENDPOINT_URL_STS=sts.url)
    f = failing_mount(mount, s3server, bucket, env, tmp_path, 20)
    msg = "\n".join(f.message_lines())
    assert "AssumeRoleWithWebIdentity at " + sts.url in msg
    assert "answered HTTP 200" in msg
    assert_no_secret(f.stderr, keys)


def test_explicit_profile_beats_environment_keys(mount, s3server, bucket,
                                                 tmp_path):
    """`--profile` skips AWS_ACCESS_KEY_ID as `aws --profile` does;
    AWS_PROFILE does not (the wrong environment keys then fail)."""
    cred = tmp_path / "credentials"
    cred.write_text(f"[ckpt]\naws_access_key_id = {s3server.access_key}\n"
                    f"aws_secret_access_key = {s3server.secret_key}\n")
    env = env_for(s3server, AWS_SHARED_CREDENTIALS_FILE=cred,
                  AWS_ACCESS_KEY_ID="AKIAWRONGWRONGWRONG",
                  AWS_SECRET_ACCESS_KEY="wrong-secret")
    m = mount(bucket, extra_args=("--profile", "ckpt"), env=env)
    (m.path / "f").write_bytes(b"profile keys")
    run([CKPTFS_BIN, "sync", str(m.path)], timeout=60)
    assert s3server.client().get_object(
        Bucket=bucket, Key="f")["Body"].read() == b"profile keys"
    env["AWS_PROFILE"] = "ckpt"
    f = failing_mount(mount, s3server, bucket, env, tmp_path, 30)
    assert "credentials were refused" in "\n".join(f.message_lines())


def test_sts_over_https_checks_the_certificate(mount, s3server, bucket, keys,
                                              guard, proxy, servers,
                                              tmp_path):
    """An https:// STS endpoint is verified against the mount's CA bundle
    (AWS_CA_BUNDLE here): refused without it, used with it."""
    cert, key = tmp_path / "sts.pem", tmp_path / "sts.key"
    run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
         "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"])
    sts = servers(STSServer, keys, tls=(cert, key))
    tok = tmp_path / "token"
    tok.write_text(make_jwt(time.time() + 3600))
    env = env_for(s3server, AWS_ROLE_ARN=ROLE, AWS_WEB_IDENTITY_TOKEN_FILE=tok,
                  AWS_ENDPOINT_URL_STS=sts.url)
    f = failing_mount(mount, s3server, bucket, env, tmp_path, 30)
    msg = "\n".join(f.message_lines())
    assert "AssumeRoleWithWebIdentity" in msg and "certificate" in msg, msg
    env["AWS_CA_BUNDLE"] = str(cert)
    m = mount_via(mount, s3server, bucket, proxy, env, tmp_path)
    save_and_read(s3server, bucket, m, 0)
    assert guard.used and guard.static == 0


# --------------------------------------------------------------------------
# Where tasks get credentials: ECS's 169.254.170.2 in a network namespace,
# credential_source profiles, a provider failing during a refresh

ECS_HOST = "169.254.170.2"


@pytest.fixture
def task_netns():
    """A network namespace holding ECS's credentials address (netns.py):
    ckptfs runs inside it as a task would, the test's servers listen in
    it, and nothing of the host's network changes."""
    ns = NetNS()
    try:
        ns.add_address(ECS_HOST)
        yield ns
    finally:
        ns.close()  # with the proxies of mount_in


def mount_in(ns, mount, s3server, bucket, guard, env, tmp_path,
             extra_args=()):
    """ckptfs mounted from inside ns, its S3 requests through an
    ExpiryGuard proxy listening on the namespace's 127.0.0.1."""
    p = FaultProxy(s3server.endpoint, inspect=guard,
                   listen_sock=ns.listen("127.0.0.1"))
    mp = tmp_path / "mnt-ns"
    mp.mkdir(exist_ok=True)
    argv = mount.argv(bucket, "", mp, [f"cache_dir={tmp_path}/cache-ns"],
                      endpoint=False, extra_args=extra_args)
    argv += ["--endpoint", p.endpoint, "--region", s3server.region]
    ns.cleanups.append(p.close)
    return mount(bucket, argv=ns.argv(argv), mountpoint=mp, env=env,
                 timeout=60)


def test_ecs_task_role_from_169_254_170_2(mount, s3server, bucket, keys,
                                          guard, servers, task_netns,
                                          tmp_path):
    """AWS_CONTAINER_CREDENTIALS_RELATIVE_URI alone, as ECS sets it: the
    credentials come from http://169.254.170.2 + the URI, with no
    Authorization header, and the URI (a capability) is never printed."""
    rel = f"/v2/credentials/{uuid.uuid4()}"
    c = servers(ContainerServer, keys, path=rel,
                sock=task_netns.listen(ECS_HOST, 80))
    env = env_for(s3server, AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=rel)
    m = mount_in(task_netns, mount, s3server, bucket, guard, env, tmp_path)
    save_and_read(s3server, bucket, m, 0)
    st = helpers.ckptfs_status(m.path)["metrics"]["credentials"]
    assert [(r[0], r[1]) for r in c.requests] == [("GET", rel)]
    assert "Authorization" not in c.requests[0][2]
    assert guard.used.get(keys.issued[0]["id"]) and guard.static == 0
    assert guard.refused == []
    assert st["source"] == "container credentials"
    assert 800 < st["expires_in_seconds"] <= 900, st
    assert rel not in m.log_text()


@pytest.mark.parametrize("source", ["Environment", "EcsContainer"])
def test_credential_source_assumes_the_role(mount, s3server, bucket, keys,
                                            guard, proxy, servers,
                                            task_netns, tmp_path, source):
    """A profile with role_arn and credential_source: the source's
    temporary keys (a CI job's environment; an ECS task role) sign STS
    AssumeRole, whose server checks the signature, and only the role's
    keys reach S3."""
    cfg = tmp_path / "config"
    cfg.write_text(f"[profile train]\nrole_arn = {ROLE}\n"
                   f"credential_source = {source}\n"
                   "role_session_name = job-8\nduration_seconds = 900\n")
    if source == "Environment":
        src = keys.issue()
        sts = servers(STSServer, keys, issued_may_sign=True)
        # --profile: the environment provider is skipped (as `aws
        # --profile`), so the keys there only sign AssumeRole
        env = env_for(s3server, AWS_CONFIG_FILE=cfg,
                      AWS_ACCESS_KEY_ID=src["id"],
                      AWS_SECRET_ACCESS_KEY=src["secret"],
                      AWS_SESSION_TOKEN=src["token"],
                      AWS_ENDPOINT_URL_STS=sts.url)
        m = mount_via(mount, s3server, bucket, proxy, env, tmp_path,
                      extra_args=("--profile", "train"))
        save_and_read(s3server, bucket, m, 0)
    else:
        rel = "/v2/credentials/task-role"
        c = servers(ContainerServer, keys, path=rel,
                    sock=task_netns.listen(ECS_HOST, 80))
        sts = servers(STSServer, keys, issued_may_sign=True,
                      sock=task_netns.listen("127.0.0.1"))
        env = env_for(s3server, AWS_CONFIG_FILE=cfg, AWS_PROFILE="train",
                      AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=rel,
                      AWS_ENDPOINT_URL_STS=sts.url)
        m = mount_in(task_netns, mount, s3server, bucket, guard, env,
                     tmp_path)
        save_and_read(s3server, bucket, m, 0)
        assert [r[1] for r in c.requests] == [rel]
        src = keys.issued[0]
    role = keys.issued[-1]
    assert role["id"] != src["id"]
    assert [(c["action"], c["signer"], c["session"], c["role"])
            for c in sts.calls] == [("AssumeRole", src["id"], "job-8", ROLE)]
    assert guard.used.get(role["id"]), "S3 never saw the role's keys"
    assert not guard.used.get(src["id"]), "the source's keys reached S3"
    assert guard.static == 0 and guard.refused == []


@pytest.mark.timeout(120)
def test_refresh_survives_a_provider_that_answers_garbage_or_hangs(
        mount, s3server, bucket, keys, guard, proxy, servers, tmp_path):
    """30 s container credentials (refreshed 10 s before expiry); the
    refresh meets garbage, then a hang (2 s per attempt) and garbage
    again.  The mount keeps signing with the current set, retries after
    1 s each time, takes the next set when the endpoint recovers, never
    sends a request with an expired set, and `ckptfs status` (text and
    --json) and the metrics show the time left and the failures."""
    keys.announce = 30
    c = servers(ContainerServer, keys, auth_token="t")
    env = env_for(s3server,
                  AWS_CONTAINER_CREDENTIALS_FULL_URI=c.url + "/v1/credentials",
                  AWS_CONTAINER_AUTHORIZATION_TOKEN="t")
    mp = tmp_path / "mnt-w"
    mp.mkdir()
    argv = mount.argv(bucket, "", mp, [f"cache_dir={tmp_path}/cache-w",
                                       "metrics=127.0.0.1:0"], endpoint=False)
    argv += ["--endpoint", proxy.endpoint, "--region", s3server.region]
    m = mount(bucket, argv=argv, mountpoint=mp, env=env, timeout=60)
    c.plan = ["garbage", "hang", "garbage"]
    first = keys.issued[0]
    seen_failing, i, t0 = None, 0, time.monotonic()
    while len(keys.issued) < 2 or not guard.used.get(keys.issued[1]["id"]):
        # (a garbage or hung answer issues no set: issued[1] is the next)
        assert time.monotonic() - t0 < 60, \
            f"no new set in 60 s; requests {c.log}\n{m.log_tail()}"
        save_and_read(s3server, bucket, m, i)
        i += 1
        cr = helpers.ckptfs_status(m.path)["metrics"]["credentials"]
        if cr["failing"] and seen_failing is None:
            seen_failing = cr
            text = run([CKPTFS_BIN, "status", str(m.path)]).stdout
    assert guard.refused == [], f"expired keys used: {guard.refused}"
    assert [mode for _, mode in c.log] == ["ok", "garbage", "hang",
                                           "garbage", "ok"], c.log
    times = [t for t, _ in c.log]
    assert times[2] - times[1] >= 0.9 and times[4] - times[3] >= 0.9, \
        f"retried without waiting: {c.log}"
    # the first set signed requests until close to its expiry
    assert guard.last[first["id"]] >= first["expires"] - 8, \
        (guard.last[first["id"]] - first["expires"])
    assert seen_failing, "status never showed a failing refresh"
    assert 0 < seen_failing["expires_in_seconds"] <= 10, seen_failing
    assert "not JSON" in seen_failing["last_error"] or \
        "no reply" in seen_failing["last_error"], seen_failing
    assert "refresh failures" in text and "in a row; next try in" in text
    assert re.search(r"expires +in \d+ s", text) and "last failure" in text
    st = helpers.ckptfs_status(m.path)
    cr = st["metrics"]["credentials"]
    assert (cr["refreshes"], cr["refresh_failures"], cr["failing"]) == \
        (1, 2, 0), cr
    assert cr["expires_in_seconds"] > 10 and cr["last_error"], cr
    samples = check_exposition(scrape(st["metrics_endpoint"]))
    assert val(samples, "ckptfs_credentials_info",
               source="container credentials") == 1
    assert val(samples, "ckptfs_credentials_refresh_failures_total") == 2
    assert val(samples, "ckptfs_credentials_refreshes_total") == 1
    assert val(samples, "ckptfs_credentials_refresh_failing") == 0
    assert 10 < val(samples, "ckptfs_credentials_expiry_seconds") <= 30
    log = m.log_text()
    assert "refreshing the credentials from container credentials failed " \
        "(2 in a row)" in log
    assert_no_secret(log + text + json.dumps(st), keys)
