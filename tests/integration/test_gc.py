"""`ckptfs gc s3://bucket/prefix` against a real server (no mount): it
removes exactly the abandoned transactions (expired pending markers, the
objects their transactions left that no committed manifest names, their
pending manifests) and old incomplete multipart uploads, and never a
committed file, a live marker or anything outside the prefix.  The
protocol objects are planted with boto3 as a writing mount lays them out
(doc/commit.md, src/proto/visibility.h)."""
import json
import time

import pytest

from helpers import CKPTFS_BIN, run

W_DEAD = "hosta-deadbeef"
W_DEAD2 = "hostd-0badf00d"
W_LIVE = "hostc-c0ffee00"
W_OK = "hostb-12345678"


def pending(writer):
    return json.dumps({"version": 1, "writer": writer, "state": "pending",
                       "txn": 1}).encode()


def committed(writer, files):
    return json.dumps({
        "version": 1, "writer": writer, "state": "committed", "txn": 1,
        "files": [{"path": p, "size": len(b)} for p, b in files.items()],
    }).encode()


def gc(s3server, bucket, prefix, *args, check=False, timeout=120):
    url = f"s3://{bucket}" + (f"/{prefix}" if prefix else "")
    return run([CKPTFS_BIN, "gc", url, "--endpoint", s3server.endpoint,
                "--region", s3server.region, *args],
               env=s3server.env_for_ckptfs(), check=check, timeout=timeout)


def uploads(s3, bucket):
    r = s3.list_multipart_uploads(Bucket=bucket)
    return sorted((u["Key"], u["UploadId"]) for u in r.get("Uploads", []))


@pytest.fixture
def planted(s3server, bucket):
    """A bucket holding every case gc must tell apart.  Returns (keys that
    gc must delete, keys it must keep, upload ids)."""
    s3 = s3server.client()
    doomed, kept = {}, {}

    def put(key, body=b"", doom=False):
        s3.put_object(Bucket=bucket, Key=key, Body=body)
        (doomed if doom else kept)[key] = body

    # 1. an abandoned transaction: expired marker (lease 1 s), its intent
    #    manifest, uploaded files and an empty-directory marker
    put(f"runs/.ckptfs-pending/ckpt-1/{W_DEAD}@1", doom=True)
    put(f"runs/ckpt-1/.ckptfs/manifest.{W_DEAD}.json", pending(W_DEAD), doom=True)
    put("runs/ckpt-1/model.pt", b"m" * 1000, doom=True)
    put("runs/ckpt-1/sub/optim.pt", b"o" * 500, doom=True)
    put("runs/ckpt-1/empty/", doom=True)
    # 2. a deeper .ckptfs-pending level, abandoned too
    put(f"runs/exp/.ckptfs-pending/step-9/{W_DEAD}@1", doom=True)
    put(f"runs/exp/step-9/.ckptfs/manifest.{W_DEAD}.json", pending(W_DEAD), doom=True)
    put("runs/exp/step-9/a.bin", b"a" * 10, doom=True)
    # 3. a committed transaction: untouched
    put(f"runs/ckpt-0/.ckptfs/manifest.{W_OK}.json",
        committed(W_OK, {"model.pt": b"x" * 100, "sub/meta.json": b"{}"}))
    put("runs/ckpt-0/model.pt", b"x" * 100)
    put("runs/ckpt-0/sub/meta.json", b"{}")
    # 4. two writers, one committed, one died: only the dead one's go
    put(f"runs/.ckptfs-pending/ckpt-2/{W_DEAD2}@1", doom=True)
    put(f"runs/ckpt-2/.ckptfs/manifest.{W_OK}.json",
        committed(W_OK, {"rank0.pt": b"r0"}))
    put(f"runs/ckpt-2/.ckptfs/manifest.{W_DEAD2}.json", pending(W_DEAD2), doom=True)
    put("runs/ckpt-2/rank0.pt", b"r0")
    put("runs/ckpt-2/rank1.pt", b"r1", doom=True)
    # 5. a live transaction (lease 1 h): untouched
    put(f"runs/.ckptfs-pending/ckpt-3/{W_LIVE}@3600")
    put(f"runs/ckpt-3/.ckptfs/manifest.{W_LIVE}.json", pending(W_LIVE))
    put("runs/ckpt-3/model.pt", b"live")
    # 6. ordinary files of other tools, and an abandoned transaction
    #    outside the prefix: untouched
    put("runs/notes.txt", b"hello")
    put("runs/tracker/latest", b"ckpt-0")
    put(f"other/.ckptfs-pending/z/{W_DEAD}@1")
    put("other/z/f.bin", b"f")
    # multipart uploads: one in the prefix, one inside the live
    # transaction, one outside the prefix
    ups = {}
    for key in ("runs/big.bin", "runs/ckpt-3/huge.pt", "other/big.bin"):
        u = s3.create_multipart_upload(Bucket=bucket, Key=key)
        s3.upload_part(Bucket=bucket, Key=key, UploadId=u["UploadId"],
                       PartNumber=1, Body=b"p" * 1024)
        ups[key] = u["UploadId"]
    time.sleep(2.5)  # the 1 s leases expire by the server's clock
    return doomed, kept, ups


def test_dry_run_deletes_nothing_and_says_what(s3server, bucket, planted):
    doomed, kept, ups = planted
    s3 = s3server.client()
    before = sorted(s3server.keys(bucket))
    up_before = uploads(s3, bucket)
    p = gc(s3server, bucket, "runs", "--dry-run")
    assert p.returncode == 0, p.stderr
    assert sorted(s3server.keys(bucket)) == before
    assert uploads(s3, bucket) == up_before
    lines = p.stdout.splitlines()
    for key in doomed:
        assert any(l.startswith("would delete") and l.endswith(f"s3://{bucket}/{key}")
                   for l in lines), (key, p.stdout)
    for key in kept:
        assert not any(l.endswith(f"s3://{bucket}/{key}") for l in lines), (key, p.stdout)
    # the default age (24h) spares the fresh upload
    assert not any("upload" in l and "big.bin" in l for l in lines), p.stdout
    summary = lines[-1]
    assert "dry run" in summary and "would be deleted" in summary, summary
    # markers are the last thing of each transaction
    idx = {l.split()[-1]: i for i, l in enumerate(lines)}
    assert (idx[f"s3://{bucket}/runs/.ckptfs-pending/ckpt-1/{W_DEAD}@1"]
            > idx[f"s3://{bucket}/runs/ckpt-1/model.pt"])
    assert (idx[f"s3://{bucket}/runs/.ckptfs-pending/ckpt-1/{W_DEAD}@1"]
            > idx[f"s3://{bucket}/runs/ckpt-1/.ckptfs/manifest.{W_DEAD}.json"])


def test_gc_removes_exactly_the_abandoned(s3server, bucket, planted):
    doomed, kept, ups = planted
    s3 = s3server.client()
    p = gc(s3server, bucket, "runs")
    print(p.stdout)
    assert p.returncode == 0, p.stderr
    left = set(s3server.keys(bucket))
    assert left == set(kept), (sorted(left - set(kept)), sorted(set(kept) - left))
    for key, body in kept.items():
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == body
    for key in doomed:
        assert any(l.startswith("deleted") and l.endswith(f"s3://{bucket}/{key}")
                   for l in p.stdout.splitlines()), (key, p.stdout)
    summary = p.stdout.splitlines()[-1]
    assert "3 abandoned transactions" in summary, summary
    assert "0 multipart uploads aborted" in summary, summary
    # nothing changed: a second run finds nothing
    p2 = gc(s3server, bucket, "runs")
    assert p2.returncode == 0, p2.stderr
    assert "0 abandoned transactions" in p2.stdout.splitlines()[-1], p2.stdout
    assert set(s3server.keys(bucket)) == set(kept)


def test_gc_aborts_old_multipart_uploads(s3server, bucket, planted):
    doomed, kept, ups = planted
    s3 = s3server.client()
    p = gc(s3server, bucket, "runs", "--older-than", "1s", "--dry-run")
    assert p.returncode == 0, p.stderr
    assert any(l.startswith("would abort") and f"s3://{bucket}/runs/big.bin" in l
               for l in p.stdout.splitlines()), p.stdout
    assert len(uploads(s3, bucket)) == 3
    p = gc(s3server, bucket, "runs", "--older-than", "1s")
    assert p.returncode == 0, p.stderr
    assert any(l.startswith("aborted") and f"s3://{bucket}/runs/big.bin" in l
               for l in p.stdout.splitlines()), p.stdout
    left = dict(uploads(s3, bucket))
    # the upload of the live transaction and the one outside the prefix stay
    assert set(left) == {"runs/ckpt-3/huge.pt", "other/big.bin"}, left
    assert "1 multipart upload aborted" in p.stdout.splitlines()[-1], p.stdout


def test_gc_of_the_bucket_root(s3server, bucket, planted):
    """Without a prefix every level is searched, other/ included."""
    doomed, kept, ups = planted
    p = gc(s3server, bucket, "")
    assert p.returncode == 0, p.stderr
    left = set(s3server.keys(bucket))
    want = set(kept) - {f"other/.ckptfs-pending/z/{W_DEAD}@1", "other/z/f.bin"}
    assert left == want, (sorted(left - want), sorted(want - left))


@pytest.mark.parametrize("dur", ["30s", "10m", "2h", "1d"])
def test_gc_duration_spellings(s3server, bucket, dur):
    p = gc(s3server, bucket, "", "--older-than", dur, "--dry-run")
    assert p.returncode == 0, p.stderr


def test_gc_bad_duration(s3server, bucket):
    p = gc(s3server, bucket, "", "--older-than", "3 weeks")
    assert p.returncode != 0
    assert p.stderr.startswith("ckptfs: "), p.stderr


@pytest.mark.parametrize("url", ["http://bucket/x", "s3://", "s3://b//x", "bucket"])
def test_gc_bad_url(s3server, url):
    p = run([CKPTFS_BIN, "gc", url, "--endpoint", s3server.endpoint],
            env=s3server.env_for_ckptfs(), check=False)
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert p.stderr.startswith("ckptfs: "), p.stderr
    assert p.stdout == ""


def test_gc_dead_endpoint(s3server):
    t0 = time.monotonic()
    p = run([CKPTFS_BIN, "gc", "s3://some-bucket/x", "--endpoint", "http://127.0.0.1:9",
             "--region", "us-east-1"], env=s3server.env_for_ckptfs(), check=False,
            timeout=90)
    assert p.returncode == 1, p.stderr
    assert p.stderr.startswith("ckptfs: "), p.stderr
    assert "cannot be reached" in p.stderr, p.stderr
    assert time.monotonic() - t0 < 60


def test_gc_missing_bucket(s3server):
    p = run([CKPTFS_BIN, "gc", "s3://no-such-bucket-for-gc", "--endpoint",
             s3server.endpoint, "--region", "us-east-1"],
            env=s3server.env_for_ckptfs(), check=False)
    assert p.returncode == 1, p.stderr
    assert "does not exist" in p.stderr, p.stderr


def test_gc_never_prints_credentials(s3server, bucket, planted):
    p = gc(s3server, bucket, "runs", "--dry-run")
    assert s3server.secret_key not in p.stdout + p.stderr
    assert s3server.access_key not in p.stdout + p.stderr
