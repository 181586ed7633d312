"""The Prometheus endpoint (issue 14; doc/metrics.md): `-o
metrics=HOST:PORT` serves the text exposition at /metrics, off by
default.  Scraped over HTTP while a checkpoint is saved and while a file
is read; the counters a user would watch move, and the exposition parses
(prometheus_client's own parser, plus the rules a scraper relies on: a
TYPE line before each family's samples, histogram buckets that never
decrease and end with +Inf equal to _count).  `ckptfs status --json`
shows the same numbers."""
import json
import os
import socket
import subprocess
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from helpers import (CKPTFS_BIN, ckptfs_commit, ckptfs_status, det_bytes, is_fuse_mount,
                     run)

MiB = 1 << 20


def scrape(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return r.read().decode()


def check_exposition(text):
    """{(name, frozenset(labels)): value} of every sample, after checking
    the format."""
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert fams, text[:500]
    typed = {}
    samples = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            assert name not in typed, f"two TYPE lines for {name}"
            typed[name] = kind
            continue
        if not line or line.startswith("#"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        base = next((name[:-len(s)] for s in ("_bucket", "_sum", "_count")
                     if name.endswith(s) and name[:-len(s)] in typed), name)
        assert base in typed, f"sample {name} before its TYPE line"
        assert name.startswith("ckptfs_")
    for f in fams.values():
        for s in f.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
        if f.type != "histogram":
            continue
        series = {}
        for s in f.samples:
            key = frozenset((k, v) for k, v in s.labels.items() if k != "le")
            series.setdefault(key, {"buckets": []})
            if s.name.endswith("_bucket"):
                series[key]["buckets"].append((float(s.labels["le"]), s.value))
            elif s.name.endswith("_count"):
                series[key]["count"] = s.value
        for key, v in series.items():
            b = v["buckets"]
            assert b and b[-1][0] == float("inf"), (f.name, key)
            assert [le for le, _ in b] == sorted(le for le, _ in b)
            counts = [c for _, c in b]
            assert counts == sorted(counts), f"{f.name}{dict(key)} buckets decrease: {counts}"
            assert counts[-1] == v["count"]
    return samples


def val(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples, name, **labels):
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= set(ls))


def endpoint(mnt):
    st = ckptfs_status(mnt)
    url = st.get("metrics_endpoint")
    assert url and url.startswith("http://127.0.0.1:") and url.endswith("/metrics")
    return url, st


@pytest.mark.timeout(150)
def test_scrape_during_save_and_read(s3server, bucket, mount):
    blob = det_bytes(2, 6 * MiB)  # written by another tool, read below
    s3server.client().put_object(Bucket=bucket, Key="pfx/other/blob.bin", Body=blob)
    m = mount(bucket, "pfx", options=["metrics=127.0.0.1:0", "commit_delay=600"])
    url, _ = endpoint(m)
    s0 = check_exposition(scrape(url))
    assert val(s0, "ckptfs_mount_info", mountpoint=str(m.path), bucket=bucket,
               prefix="pfx/", writable="1") == 1
    assert val(s0, "ckptfs_commit_pending_transactions") == 0

    # a save: pending while it waits for its final name
    os.mkdir(m / "tmp-ckpt-1")
    big = det_bytes(1, 20 * MiB)  # multipart
    (m / "tmp-ckpt-1" / "model.bin").write_bytes(big)
    (m / "tmp-ckpt-1" / "meta.json").write_bytes(b"{}")
    s1 = check_exposition(scrape(url))
    assert val(s1, "ckptfs_commit_pending_transactions") == 1
    assert val(s1, "ckptfs_commit_pending_bytes") == len(big) + 2
    assert val(s1, "ckptfs_commit_oldest_pending_age_seconds") > 0
    os.rename(m / "tmp-ckpt-1", m / "ckpt-1")
    ckptfs_commit(m / "ckpt-1")
    s2 = check_exposition(scrape(url))
    assert val(s2, "ckptfs_commit_pending_transactions") == 0
    assert val(s2, "ckptfs_commits_total") == val(s0, "ckptfs_commits_total") + 1
    assert val(s2, "ckptfs_commit_duration_seconds_count") == \
        val(s0, "ckptfs_commit_duration_seconds_count") + 1
    sent = total(s2, "ckptfs_s3_sent_bytes_total") - total(s0, "ckptfs_s3_sent_bytes_total")
    assert sent >= len(big)
    assert val(s2, "ckptfs_s3_requests_total", op="upload_part", status="2xx") >= 2
    assert val(s2, "ckptfs_s3_requests_total", op="complete_multipart_upload",
               status="2xx") >= 1
    assert val(s2, "ckptfs_s3_request_duration_seconds_count", op="upload_part") >= 2

    # a read of an object another tool wrote: a cache miss, then a hit
    assert (m / "other" / "blob.bin").read_bytes() == blob
    s3 = check_exposition(scrape(url))
    assert val(s3, "ckptfs_cache_misses_total") == val(s2, "ckptfs_cache_misses_total") + 1
    got = val(s3, "ckptfs_s3_received_bytes_total", op="get") - \
        val(s2, "ckptfs_s3_received_bytes_total", op="get")
    assert got >= len(blob)
    assert val(s3, "ckptfs_cache_used_bytes") >= len(blob)
    assert val(s3, "ckptfs_s3_requests_total", op="list", status="2xx") > \
        val(s0, "ckptfs_s3_requests_total", op="list", status="2xx")
    assert (m / "other" / "blob.bin").read_bytes() == blob
    s4 = check_exposition(scrape(url))
    assert val(s4, "ckptfs_cache_hits_total") >= val(s3, "ckptfs_cache_hits_total") + 1

    # a missing key: a 4xx HEAD or GET is counted as such
    assert not os.path.exists(m / "other" / "nothing-here")

    # `ckptfs status --json`: the same numbers
    st = ckptfs_status(m)
    s5 = check_exposition(scrape(url))
    mj = st["metrics"]
    assert mj["commit"]["commits"] == val(s5, "ckptfs_commits_total")
    assert mj["commit"]["duration_seconds"]["count"] == \
        val(s5, "ckptfs_commit_duration_seconds_count")
    up = mj["s3"]["upload_part"]
    assert up["requests"]["2xx"] == val(s5, "ckptfs_s3_requests_total", op="upload_part",
                                        status="2xx")
    assert up["sent_bytes"] == val(s5, "ckptfs_s3_sent_bytes_total", op="upload_part")
    assert st["cache"]["hits"] == val(s5, "ckptfs_cache_hits_total")

    # only GET /metrics
    base = url.rsplit("/", 1)[0]
    with pytest.raises(urllib.error.HTTPError) as ei:
        urllib.request.urlopen(base + "/other", timeout=10)
    assert ei.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as ei:
        urllib.request.urlopen(urllib.request.Request(url, data=b"x", method="POST"),
                               timeout=10)
    assert ei.value.code == 405


def listening_ports(pid):
    """TCP ports pid listens on (its socket inodes in /proc/net/tcp*)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            t = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if t.startswith("socket:["):
            inodes.add(t[8:-1])
    ports = []
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(f) as fh:
            for line in list(fh)[1:]:
                p = line.split()
                if p[3] == "0A" and p[9] in inodes:
                    ports.append(int(p[1].rsplit(":", 1)[1], 16))
    return ports


def test_off_by_default(s3server, bucket, mount):
    m = mount(bucket, "")
    st = ckptfs_status(m)
    assert "metrics_endpoint" not in st
    assert "metrics" in st  # the numbers are there all the same
    assert listening_ports(m.proc.pid) == []
    m2 = mount(bucket, "", options=["metrics=127.0.0.1:0"])
    url, _ = endpoint(m2)
    assert int(url.split(":")[2].split("/")[0]) in listening_ports(m2.proc.pid)
    assert f"metrics {url}\n" in run([CKPTFS_BIN, "status", str(m2)]).stdout
    assert "metrics " not in run([CKPTFS_BIN, "status", str(m)]).stdout


@pytest.mark.parametrize("value,message", [
    ("9464", "expected HOST:PORT"),
    ("127.0.0.1:http", "the port must be a number"),
    ("127.0.0.1:70000", "the port must be a number"),
    ("", "expected HOST:PORT"),
])
def test_bad_option_value(s3server, bucket, tmp_path, value, message):
    mp = tmp_path / "mnt"
    mp.mkdir()
    p = run([CKPTFS_BIN, "mount", f"s3://{bucket}", str(mp), "-f",
             "--endpoint", s3server.endpoint, "-o", f"metrics={value}"],
            check=False, timeout=30, env=s3server.env_for_ckptfs())
    assert p.returncode != 0
    assert "ckptfs: invalid value for mount option metrics" in p.stderr
    assert message in p.stderr
    assert not is_fuse_mount(mp)


def test_port_in_use(s3server, bucket, tmp_path):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = busy.getsockname()[1]
    mp = tmp_path / "mnt"
    mp.mkdir()
    try:
        p = run([CKPTFS_BIN, "mount", f"s3://{bucket}", str(mp), "-f",
                 "--endpoint", s3server.endpoint, "-o", f"metrics=127.0.0.1:{port}"],
                check=False, timeout=60, env=s3server.env_for_ckptfs())
    finally:
        busy.close()
    assert p.returncode == 1
    assert f"ckptfs: metrics endpoint 127.0.0.1:{port}: Address already in use" in p.stderr
    assert not is_fuse_mount(mp)


@pytest.mark.timeout(120)
def test_retries_and_throttles_counted(s3server, bucket, mount, tmp_path):
    """503 SlowDown answers to two PUTs (faultproxy.py): the throttles, the
    5xx replies and the retries that followed show on the endpoint, and
    the file still commits."""
    from faultproxy import FaultProxy
    with FaultProxy(s3server.endpoint, seed=7) as px:
        mp = tmp_path / "mnt-px"
        mp.mkdir()
        argv = mount.argv(bucket, "", mp, ["metrics=127.0.0.1:0"], endpoint=False)
        argv += ["--endpoint", px.endpoint, "--region", s3server.region]
        m = mount(bucket, argv=argv, mountpoint=mp)
        url, _ = endpoint(m)
        px.rule("503", method="PUT", path_re=r"/data\.bin$", count=2)
        (m / "data.bin").write_bytes(det_bytes(9, 100000))
        ckptfs_commit(m / "data.bin")
        s = check_exposition(scrape(url))
    assert val(s, "ckptfs_s3_throttles_total", op="put") == 2
    assert val(s, "ckptfs_s3_requests_total", op="put", status="5xx") == 2
    assert val(s, "ckptfs_s3_retries_total", op="put") >= 2
    assert val(s, "ckptfs_s3_requests_total", op="put", status="2xx") >= 1
    body = s3server.client().get_object(Bucket=bucket, Key="data.bin")["Body"].read()
    assert body == det_bytes(9, 100000)
