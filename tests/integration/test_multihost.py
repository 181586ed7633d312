"""Many hosts, one checkpoint (issue 16, doc/scale.md, doc/commit.md
"Completion rules").

Every host is a writer mount with its own cache directory; together they
save one torch.distributed.checkpoint directory the way a multi-node job
does: every host `mkdir -p`s it, writes and fsyncs its ranks' `.distcp`
shards, waits at a barrier, and rank 0 writes `.metadata` last (as
`.metadata.tmp`, fsync, rename).  The barrier outlasts `commit_delay`, so
every host's transaction commits before `.metadata` exists: without the
completion rule another host then sees every shard and no `.metadata`, a
checkpoint DCP cannot load shown as complete.

An observer mount (no caching) is polled the whole time: the directory is
absent or empty until `.metadata` is there, then complete at once.  Then
every host restores the checkpoint at once.  The writers talk to RGW
through a counting proxy (faultproxy.py's Accounting), so the test also
checks the request counts of the save and of the restore against the
formula of doc/scale.md.

Sizes: CKPTFS_MULTIHOST_HOSTS (default 8), CKPTFS_BARRIER_S (default 30).
The failure paths (SIGKILL of rank 0's ckptfs while `.metadata` is on its
way, a lost reply and 503s on it) use 2 hosts and a short barrier.
"""

import concurrent.futures as cf
import os
import threading
import time

import pytest

import helpers
from faultproxy import FaultProxy
from helpers import (Poller, det_bytes, kill_ckptfs, observer_options,
                     pending_markers, s3_sizes, sha256_bytes, wait_for)

HOSTS = int(os.environ.get("CKPTFS_MULTIHOST_HOSTS", "8"))
BARRIER_S = float(os.environ.get("CKPTFS_BARRIER_S", "30"))
KiB = 1 << 10


@pytest.fixture(autouse=True)
def _stop_pollers(mount):
    yield
    helpers.stop_all_pollers()


@pytest.fixture
def proxies(s3server):
    made = []

    def make(seed=0):
        p = FaultProxy(s3server.endpoint, seed=seed)
        made.append(p)
        return p
    yield make
    for p in made:
        p.clear()
        p.reset_stalled()


def host(mount, s3server, bucket, tmp_path, name, proxy=None, *opts):
    """A writer mount standing for one host: its own cache directory, its
    S3 traffic through `proxy` when given."""
    mp = tmp_path / f"mnt-{name}"
    mp.mkdir(exist_ok=True)
    options = [f"cache_dir={tmp_path}/cache-{name}", *opts]
    if proxy is None:
        return mount(bucket, options=options, mountpoint=mp)
    argv = mount.argv(bucket, "", mp, options, endpoint=False)
    argv += ["--endpoint", proxy.endpoint, "--region", s3server.region]
    return mount(bucket, argv=argv, mountpoint=mp, timeout=60)


def shards(n_hosts, per_host=2, size=96 * KiB):
    """{rank: {name: bytes}}: each host's DCP shards."""
    return {r: {f"__{r}_{i}.distcp": det_bytes(1000 + r * 10 + i, size + r * 7 + i)
                for i in range(per_host)} for r in range(n_hosts)}


def write_fsync(path, body):
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    try:
        os.write(fd, body)
        os.fsync(fd)
    finally:
        os.close(fd)


def write_metadata(d, body):
    """DCP's coordinator: .metadata.tmp, fsync, rename over .metadata."""
    write_fsync(d / ".metadata.tmp", body)
    os.rename(d / ".metadata.tmp", d / ".metadata")


class DcpWatch:
    """Polls root/name through an observer mount: every look must find it
    absent, empty, or complete (every file, right sizes; the first complete
    look also compares bytes).  Shards without .metadata are a failure."""

    def __init__(self, root, name, files):
        self.root, self.name, self.files = root, name, files
        self.want = {k: len(v) for k, v in files.items()}
        self.complete_at = None
        self.empty_seen = 0
        self.absent_seen = 0
        self.poller = Poller(self.check, interval=0.05, name=f"dcp-{name}")

    def check(self):
        d = self.root / self.name
        try:
            names = os.listdir(d)
        except FileNotFoundError:
            if self.complete_at is not None:
                return f"{self.name} vanished after it was complete"
            self.absent_seen += 1
            return None
        if not names:
            if self.complete_at is not None:
                return f"{self.name} empty after it was complete"
            self.empty_seen += 1
            return None
        view = {}
        for n in names:
            try:
                view[n] = os.stat(d / n).st_size
            except FileNotFoundError:
                view[n] = "vanished"
        if view != self.want:
            return (f"partial {self.name}: {len(view)} of {len(self.want)} files, "
                    f".metadata {'in' if '.metadata' in view else 'NOT in'} it")
        if self.complete_at is None:
            for rel, body in self.files.items():
                if sha256_bytes((d / rel).read_bytes()) != sha256_bytes(body):
                    return f"{rel}: not the bytes written"
            self.complete_at = time.monotonic()
        return None

    def wait_complete(self, timeout):
        wait_for(lambda: self.complete_at is not None or self.poller.bad, timeout,
                 f"{self.name} complete on the observer ({self.poller.seen} looks)")
        assert not self.poller.bad, self.poller.bad[:3]


def all_committed(s3, bucket, prefix, keys):
    """Every key stored and no pending marker under prefix."""
    have = s3_sizes(s3, bucket, prefix)
    return all(k in have for k in keys) and not pending_markers(s3, bucket, prefix)


def restore(m, d, files, only=None):
    """Reads every file (or those in `only`) of d through mount m and
    checks the bytes; returns the bytes read."""
    n = 0
    for rel, body in files.items():
        if only is not None and rel not in only:
            continue
        got = (m / d / rel).read_bytes()
        assert sha256_bytes(got) == sha256_bytes(body), f"{m}: {rel} differs"
        n += len(got)
    return n


def get_retries(hosts):
    """GET attempts that repeated a failed one, over every host's daemon."""
    return sum(helpers.ckptfs_status(h)["metrics"]["s3"].get("get", {}).get("retries", 0)
               for h in hosts)


def fmt_counts(c):
    return ", ".join(f"{k} {v}" for k, v in sorted((k, v) for k, v in c.items()
                                                   if isinstance(k, str) and v))


@pytest.mark.timeout(300)
def test_hosts_save_with_barrier_longer_than_commit_delay(s3server, bucket, mount,
                                                          tmp_path, proxies):
    """HOSTS writer mounts save one DCP checkpoint with a BARRIER_S barrier
    (longer than the default commit_delay of 5 s) before rank 0 writes
    .metadata: every host has committed its shards, and the observer sees
    nothing of them until .metadata is there, then everything at once.
    Then every host restores it (each reading every file), with no
    re-download of what a host wrote or already read."""
    s3 = s3server.client()
    s3server.put(bucket, "job/")
    proxy = proxies()
    hosts = [host(mount, s3server, bucket, tmp_path, f"h{r}", proxy)
             for r in range(HOSTS)]
    obs = mount(bucket, options=observer_options(tmp_path / "cache-obs"))
    per_rank = shards(HOSTS)
    meta = b"dcp metadata " * 300
    files = {k: v for r in per_rank.values() for k, v in r.items()}
    files[".metadata"] = meta
    watch = DcpWatch(obs / "job", "step-100", files)

    snap = proxy.acct.snapshot()
    t0 = time.monotonic()
    for h in hosts:
        os.makedirs(h / "job/step-100", exist_ok=True)
    with cf.ThreadPoolExecutor(HOSTS) as ex:
        list(ex.map(lambda r: [write_fsync(hosts[r] / "job/step-100" / n, b)
                               for n, b in per_rank[r].items()], range(HOSTS)))
    t_written = time.monotonic()
    keys = [f"job/step-100/{n}" for r in per_rank.values() for n in r]
    # the barrier: every host's idle commit fires during it
    wait_for(lambda: all_committed(s3, bucket, "job/", keys), BARRIER_S + 60,
             lambda: f"every host committed its shards: markers "
                     f"{pending_markers(s3, bucket, 'job/')}")
    t_committed = time.monotonic()
    time.sleep(max(0.0, BARRIER_S - (time.monotonic() - t_written)))
    assert watch.complete_at is None and not watch.poller.bad, watch.poller.bad[:3]
    assert os.listdir(obs / "job/step-100") == [], "shards shown without .metadata"
    seen_empty = watch.empty_seen

    write_metadata(hosts[0] / "job/step-100", meta)
    t_meta = time.monotonic()
    watch.wait_complete(60)
    t_obs = watch.complete_at
    # the save's requests: until the observer saw it whole (what follows
    # is the hosts' own polling, which costs by the second)
    save = proxy.acct.since(snap)

    # every host sees it complete (its listing cache: dir_timeout, 1 s)
    def everywhere():
        return all(sorted(os.listdir(h / "job/step-100")) == sorted(files) for h in hosts)
    wait_for(everywhere, 60, "every host sees the whole checkpoint")
    t_all = time.monotonic()
    watch.poller.assert_clean()
    assert seen_empty > 0, "the observer never looked while the shards were hidden"

    # restore: every host reads every file at once
    snap = proxy.acct.snapshot()
    retried0 = get_retries(hosts)
    t1 = time.monotonic()
    with cf.ThreadPoolExecutor(HOSTS) as ex:
        nbytes = sum(ex.map(lambda h: restore(h, "job/step-100", files), hosts))
    t_restore = time.monotonic() - t1
    rest = proxy.acct.since(snap)
    # a GET repeated after a stalled or failed attempt (first_byte_timeout
    # on a busy machine) is the same download, not a second one
    retried = get_retries(hosts) - retried0

    n_files = len(files)
    print(f"\n{HOSTS} hosts x {len(per_rank[0])} shards, barrier {BARRIER_S:.0f} s: "
          f"written {t_written - t0:.1f} s, all committed +{t_committed - t_written:.1f} s, "
          f".metadata close -> observer {t_obs - t_meta:.2f} s, -> every host "
          f"{t_all - t_meta:.2f} s; restore {nbytes} bytes in {t_restore:.2f} s")
    print(f"save requests: {fmt_counts(save['n'])}")
    print(f"restore requests: {fmt_counts(rest['n'])}")
    # the save: each file stored once; the rest a constant per host
    assert save["n"]["PUT", "data"] == n_files, save["n"]
    assert save["n"]["GET", "data"] == 0, save["n"]
    per_host = (sum(v for k, v in save["n"].items() if isinstance(k, str))
                - n_files) / HOSTS
    assert per_host <= 25, f"{per_host:.1f} requests per host beyond the files: " \
        f"{fmt_counts(save['n'])}"
    # the restore: nothing a host wrote is downloaded again, the rest once
    own = {r: set(per_rank[r]) | ({".metadata"} if r == 0 else set())
           for r in range(HOSTS)}
    most = sum(n_files - len(own[r]) for r in range(HOSTS))
    assert rest["n"]["GET", "data"] - retried <= most, \
        f"{fmt_counts(rest['n'])} ({retried} GETs repeated a failed attempt)"
    assert rest["n"]["HEAD"] <= HOSTS * 2, fmt_counts(rest["n"])
    # a second restore on every host is served from its cache
    snap = proxy.acct.snapshot()
    with cf.ThreadPoolExecutor(HOSTS) as ex:
        list(ex.map(lambda h: restore(h, "job/step-100", files), hosts))
    again = proxy.acct.since(snap)
    assert again["n"]["GET", "data"] == 0, fmt_counts(again["n"])

    # a host that comes later reads the manifest index (written by the
    # last host to commit its shards) and the .metadata addendum, not
    # one manifest per host (doc/scale.md)
    keys = s3_sizes(s3, bucket, "job/step-100/.ckptfs/")
    assert [k for k in keys if "/index." in k], f"no manifest index: {sorted(keys)}"
    late = host(mount, s3server, bucket, tmp_path, "late", proxy)
    snap = proxy.acct.snapshot()
    assert sorted(os.listdir(late / "job/step-100")) == sorted(files)
    seen = proxy.acct.since(snap)["n"]
    print(f"a later host's first look: {fmt_counts(seen)}")
    assert seen["GET", "manifest"] <= 2, fmt_counts(seen)
    restore(late, "job/step-100", files)


def small_job(mount, s3server, bucket, tmp_path, proxy0, *opts0):
    """Two hosts (host 0 through proxy0) with commit_delay=1 saving their
    shards into job/step-7 and committing them; an observer polling it.
    Returns (hosts, observer, files, watch)."""
    s3 = s3server.client()
    s3server.put(bucket, "job/")
    h0 = host(mount, s3server, bucket, tmp_path, "h0", proxy0, "commit_delay=1", *opts0)
    h1 = host(mount, s3server, bucket, tmp_path, "h1", None, "commit_delay=1")
    obs = mount(bucket, options=observer_options(tmp_path / "cache-obs"))
    per_rank = shards(2, per_host=2)
    files = {**per_rank[0], **per_rank[1], ".metadata": b"m" * 777}
    watch = DcpWatch(obs / "job", "step-7", files)
    for r, h in enumerate((h0, h1)):
        os.makedirs(h / "job/step-7", exist_ok=True)
        for n, b in per_rank[r].items():
            write_fsync(h / "job/step-7" / n, b)
    keys = [f"job/step-7/{n}" for r in per_rank.values() for n in r]
    wait_for(lambda: all_committed(s3, bucket, "job/", keys), 60,
             "both hosts committed their shards")
    wait_for(lambda: watch.empty_seen >= 3, 30, "the observer looked at the shards")
    return (h0, h1), obs, files, watch


@pytest.mark.timeout(180)
def test_rank0_killed_while_metadata_commits(s3server, bucket, mount, tmp_path, proxies):
    """Rank 0's ckptfs is SIGKILLed after the shards of both hosts
    committed, while its .metadata cannot reach the store (every PUT of it
    stalls): the observer still sees nothing.  The remounted host (same
    cache directory) resumes from its journal and the checkpoint appears
    whole."""
    proxy = proxies()
    proxy.rule("stall_before", method="PUT", path_re=r"/\.metadata$", count=1000)
    (h0, h1), obs, files, watch = small_job(mount, s3server, bucket, tmp_path, proxy)
    write_metadata(h0 / "job/step-7", files[".metadata"])
    wait_for(lambda: any(e.path.endswith("/.metadata") for e in proxy.events), 30,
             "the .metadata PUT reached the proxy")
    kill_ckptfs(h0)
    time.sleep(1.5)
    assert watch.complete_at is None and not watch.poller.bad, watch.poller.bad[:3]
    assert os.listdir(obs / "job/step-7") == []
    proxy.clear()
    proxy.reset_stalled()
    host(mount, s3server, bucket, tmp_path, "h0", None, "commit_delay=1")
    watch.wait_complete(60)
    watch.poller.assert_clean()
    s3 = s3server.client()
    wait_for(lambda: not pending_markers(s3, bucket), 30, "no marker left")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("fault", ["503", "reset_after"])
def test_metadata_commit_through_faults(s3server, bucket, mount, tmp_path, proxies, fault):
    """The requests that make the checkpoint complete fail: the .metadata
    PUT and the manifest that names it get a 503 twice (or their reply is
    lost after the server acted).  The observer sees nothing until both
    landed, then the whole checkpoint."""
    proxy = proxies()
    (h0, h1), obs, files, watch = small_job(mount, s3server, bucket, tmp_path, proxy)
    n = 2 if fault == "503" else 1
    proxy.rule(fault, method="PUT", path_re=r"/\.metadata$", count=n)
    proxy.rule(fault, method="PUT", path_re=r"/step-7/\.ckptfs/manifest\.", count=n)
    write_metadata(h0 / "job/step-7", files[".metadata"])
    watch.wait_complete(60)
    watch.poller.assert_clean()
    hit = [e for e in proxy.events if e.action == fault]
    assert len(hit) == 2 * n, proxy.describe()


@pytest.mark.timeout(120)
def test_completion_rule_option(s3server, bucket, mount, tmp_path):
    """complete=none shows the shards at once (the old behaviour, for jobs
    whose loaders do not need .metadata); a custom rule hides a TensorFlow
    checkpoint until its index is there; `ckptfs prefetch` follows the
    rules; a bad rule is refused."""
    s3server.put(bucket, "a/x.distcp", b"1")
    s3server.put(bucket, "b/ckpt-1.data-00000-of-00001", b"2")
    plain = mount(bucket, options=observer_options(tmp_path / "c1", "complete=none"))
    assert os.listdir(plain / "a") == ["x.distcp"]
    tf = mount(bucket, options=observer_options(
        tmp_path / "c2", "complete=*.distcp/.metadata:*.data-*-of-*/*.index"))
    assert os.listdir(tf / "a") == [] and os.listdir(tf / "b") == []
    # prefetch sees what the mount shows: nothing of an incomplete one
    # (a directory with no file to fetch is "No such file or directory")
    r = helpers.run([helpers.CKPTFS_BIN, "prefetch", str(tf / "a")], check=False)
    assert r.returncode != 0 and "No such file" in r.stderr, r.stderr
    assert helpers.ckptfs_status(tf)["cache"]["entries"] == 0
    helpers.run([helpers.CKPTFS_BIN, "prefetch", str(plain / "a")])
    assert helpers.ckptfs_status(plain)["cache"]["entries"] == 1
    s3server.put(bucket, "b/ckpt-1.index", b"3")
    wait_for(lambda: len(os.listdir(tf / "b")) == 2, 10, "TF checkpoint with its index")
    r = helpers.run([helpers.CKPTFS_BIN, "mount", f"s3://{bucket}", str(tmp_path),
                     "-o", "complete=*.distcp"], check=False, timeout=30)
    assert r.returncode != 0 and "bad completion rule" in r.stderr, r.stderr


@pytest.mark.timeout(120)
def test_metadata_seals_without_waiting_for_commit_delay(s3server, bucket, mount, tmp_path):
    """Rank 0 writes its shard and .metadata with no barrier (its directory
    transaction is still open): .metadata says the checkpoint is done, so
    the transaction commits once the application is quiet, not after
    commit_delay (600 s here); host 1 committed with `ckptfs sync`."""
    s3server.put(bucket, "job/")
    h0 = host(mount, s3server, bucket, tmp_path, "h0", None, "commit_delay=600")
    h1 = host(mount, s3server, bucket, tmp_path, "h1", None, "commit_delay=600")
    obs = mount(bucket, options=observer_options(tmp_path / "cache-obs"))
    per_rank = shards(2, per_host=1)
    files = {**per_rank[0], **per_rank[1], ".metadata": b"x" * 999}
    watch = DcpWatch(obs / "job", "step-9", files)
    for h in (h0, h1):
        os.makedirs(h / "job/step-9", exist_ok=True)
    for n, b in per_rank[1].items():
        write_fsync(h1 / "job/step-9" / n, b)
    helpers.ckptfs_sync(h1)
    for n, b in per_rank[0].items():
        write_fsync(h0 / "job/step-9" / n, b)
    time.sleep(2)
    assert watch.complete_at is None, "visible before .metadata"
    write_metadata(h0 / "job/step-9", files[".metadata"])
    watch.wait_complete(30)
    watch.poller.assert_clean()


@pytest.mark.timeout(120)
def test_upload_part_size_and_conns_options(s3server, bucket, mount, tmp_path, proxies):
    """upload_part_size sets the multipart part (fewer, larger requests per
    file at scale, doc/scale.md): a 17 MiB file in 5 MiB parts is 4
    UploadParts; out-of-range values are refused.  `ckptfs status --json`
    (its metrics) counts the requests the mount sent as the proxy in front
    of the server counted them."""
    proxy = proxies()
    w = host(mount, s3server, bucket, tmp_path, "w", proxy, "upload_part_size=5M",
             "upload_conns=4")
    body = det_bytes(77, 17 << 20)
    write_fsync(w / "big.bin", body)
    helpers.ckptfs_sync(w)
    n = proxy.acct.n
    assert (n["CreateMPU"], n["UploadPart"], n["Complete"]) == (1, 4, 1), fmt_counts(n)
    assert helpers.s3_get(s3server.client(), bucket, "big.bin") == body
    # `ckptfs status --json` (its metrics) counts what the proxy saw; the
    # proxy counts a request when it comes, the mount when its reply does,
    # so a listing on its way (a refresh ahead of expiry) is waited for
    kinds = (("PUT", "put"), ("CreateMPU", "create_multipart_upload"),
             ("UploadPart", "upload_part"), ("Complete", "complete_multipart_upload"),
             ("LIST", "list"), ("GET", "get"), ("HEAD", "head"), ("DELETE", "delete"))

    def differences():
        s3m = helpers.ckptfs_status(w)["metrics"]["s3"]
        out = []
        for kind, op in kinds:
            got = sum(s3m.get(op, {}).get("requests", {}).values())
            if got != proxy.acct.n[kind]:
                out.append((kind, op, got, s3m.get(op), fmt_counts(proxy.acct.n)))
        return out

    deadline = time.monotonic() + 5
    diff = differences()
    while diff and time.monotonic() < deadline:
        time.sleep(0.2)
        diff = differences()
    assert not diff, diff
    for bad in ("upload_part_size=1M", "upload_part_size=6G", "upload_conns=0"):
        r = helpers.run([helpers.CKPTFS_BIN, "mount", f"s3://{bucket}", str(tmp_path),
                         "-o", bad], check=False, timeout=30)
        assert r.returncode != 0 and "must be" in r.stderr, (bad, r.stderr)


@pytest.mark.timeout(120)
def test_incomplete_checkpoint_can_be_removed(s3server, bucket, mount, tmp_path):
    """A rotation removing a checkpoint that never got its .metadata (the
    job died at the barrier): `rm -r` of the empty-looking directory
    removes its hidden shards too, and the name goes."""
    s3 = s3server.client()
    s3server.put(bucket, "run/")
    h0 = host(mount, s3server, bucket, tmp_path, "h0", None, "commit_delay=1")
    os.makedirs(h0 / "run/step-3")
    for n, b in shards(1, per_host=2)[0].items():
        write_fsync(h0 / "run/step-3" / n, b)
    wait_for(lambda: all_committed(s3, bucket, "run/", ["run/step-3/__0_0.distcp"]), 60,
             "the shards committed")
    wait_for(lambda: os.listdir(h0 / "run/step-3") == [], 10, "the shards hidden")
    helpers.run(["rm", "-r", str(h0 / "run/step-3")])
    helpers.ckptfs_sync(h0)
    left = [k for k in s3_sizes(s3, bucket, "run/") if k != "run/"]
    assert not left, left
    assert "step-3" not in os.listdir(h0 / "run")


@pytest.mark.timeout(150)
def test_manifest_index_is_checked(s3server, bucket, mount, tmp_path, proxies):
    """The manifest index is only a copy: a body in it that is not the
    listed manifest (MD5 against the listed ETag) is ignored and that
    manifest read from the store, so a damaged or stale index never
    changes what a reader sees; a lost reply of the index PUT is retried."""
    s3 = s3server.client()
    s3server.put(bucket, "job/")
    proxy = proxies()
    proxy.rule("reset_after", method="PUT", path_re=r"/\.ckptfs/index\.", count=1)
    per_rank = shards(4, per_host=1)
    hosts = [host(mount, s3server, bucket, tmp_path, f"h{r}", proxy, "commit_delay=1")
             for r in range(4)]
    for h in hosts:
        os.makedirs(h / "job/step-5", exist_ok=True)
    for r, h in enumerate(hosts):
        for n, b in per_rank[r].items():
            write_fsync(h / "job/step-5" / n, b)
    write_metadata(hosts[0] / "job/step-5", b"meta")
    files = {n: b for r in per_rank.values() for n, b in r.items()}
    files[".metadata"] = b"meta"

    def index_keys():
        return [k for k in s3_sizes(s3, bucket, "job/step-5/.ckptfs/") if "/index." in k]
    wait_for(index_keys, 60, "a manifest index")
    assert any(e.action == "reset_after" for e in proxy.events), proxy.describe()
    assert len(index_keys()) == 1, index_keys()
    wait_for(lambda: not [k for k in s3_sizes(s3, bucket, "job/") if "/claim." in k], 30,
             "the index writer's claim deleted")
    key = index_keys()[0]
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    # every manifest body in it now names one more file (a well-formed
    # index whose bodies are not the manifests the listing shows)
    magic = b"ckptfs-manifest-index 1\n"
    assert body.startswith(magic)
    i, bad, n = len(magic), magic, 0
    while i < len(body):
        nl = body.index(b"\n", i)
        name, etag, ln = body[i:nl].split(b" ")
        rec = body[nl + 1:nl + 1 + int(ln)]
        i = nl + 1 + int(ln) + 1
        rec = rec.replace(b'"files":[', b'"files":[{"path":"evil.distcp","size":1},')
        bad += b"%s %s %d\n%s\n" % (name, etag, len(rec), rec)
        n += 1
    assert n >= 4 and bad != body
    s3.put_object(Bucket=bucket, Key=key, Body=bad)
    s3server.put(bucket, "job/step-5/evil.distcp", b"x")
    obs = host(mount, s3server, bucket, tmp_path, "obs", proxy)
    snap = proxy.acct.snapshot()
    assert sorted(os.listdir(obs / "job/step-5")) == sorted(files)
    seen = proxy.acct.since(snap)["n"]
    # the index was read, and every manifest again (none matched)
    manifests = [k for k in s3_sizes(s3, bucket, "job/step-5/.ckptfs/") if "/manifest." in k]
    assert seen["GET", "manifest"] == 1 + len(manifests), (fmt_counts(seen), manifests)
    for n, b in files.items():
        assert (obs / "job/step-5" / n).read_bytes() == b
