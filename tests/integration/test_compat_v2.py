"""Buckets written by the previous landed format 2 (ckptfs at commit
2408fb3, before committed directories' attribute changes were stored as
step kind 5; doc/commit.md "Format versions") keep working.

tests/data/bucket-v2 is a bucket the old binary wrote
(tests/tools/make-compat-fixture.py --v2): run/ckpt-d, a directory
transaction whose root ("dir"), nested and empty directories ("dirs") got
modes, owners, xattrs and ns mtimes before the commit, and four committed
files changed after it (addenda with parent records); run/latest; an
`rm -r` (ckpt-del) and a `mv` (ckpt-ren-src -> ckpt-ren-dst) SIGKILLed past
their commit points (delete records, a "renamed_from" manifest), a `mv`
SIGKILLed while copying (ckpt-cp-src -> ckpt-cp-dst), an abandoned
transaction.  index.json's "expect" is every visible checkpoint's tree as
the old binary showed it (helpers.attr_tree: type, mode, owner, mtime to
the ns, user xattrs, file md5, symlink target).  Each test replays it into
a fresh bucket (in the order of its millisecond LastModified), waits past
its markers' 2 s lease and runs the NEW binary (CKPTFS_BIN) on it.

test_v2_old_reader_of_new_dir_changes runs the OLD binary too
(CKPTFS_OLD_BIN, built at 2408fb3); without it, it is skipped (CI)."""

import copy
import json
import os
import time
from pathlib import Path

import pytest

import helpers
from helpers import attr_tree, ckptfs_sync, run
from test_compat import files_of, gc, keys_under, load

FIX = Path(__file__).resolve().parent.parent / "data" / "bucket-v2"
INDEX = json.loads((FIX / "index.json").read_text())
P = INDEX["prefix"]  # "run/", as bucket-v1's (test_compat.gc)
EXPECT = INDEX["expect"]
VISIBLE = ["ckpt-cp-src", "ckpt-d", "ckpt-ren-dst", "latest"]
HIDDEN = ["ckpt-del", "ckpt-ren-src", "ckpt-cp-dst", "ckpt-abandoned"]
OLD_BIN = os.environ.get("CKPTFS_OLD_BIN")
T_DIR = 1_650_000_000_987_654_321  # an explicit directory mtime (ns)


def test_fixture_holds_what_it_says():
    """The fixture holds the records this file tests (a regenerated one
    that lost them would make the other tests pass vacuously)."""
    docs = {e["key"]: json.loads((FIX / e["file"]).read_bytes())
            for e in INDEX["objects"] if "/.ckptfs/manifest." in e["key"]}
    d = [v for k, v in docs.items() if k.startswith(P + "ckpt-d/")]
    root = [v for v in d if v.get("dir") and not v["dir"].get("parent")]
    assert len(root) == 1 and {x["path"] for x in root[0]["dirs"]} == \
        {"emptydir", "sub", "sub/deeper", "sub/deeper/empty2"}
    assert all(x.get("mtime") for x in root[0]["dirs"]) and root[0]["dir"]["xattrs"]
    assert len([v for v in d if v is not root[0] and v["files"]]) >= 4  # addenda
    assert any(v.get("renamed_from") for k, v in docs.items()
               if k.startswith(P + "ckpt-ren-dst/"))
    keys = [e["key"] for e in INDEX["objects"]]
    assert any(k.startswith(P + ".ckptfs-pending/ckpt-del/") and ".gone@" in k for k in keys)
    assert any(k.startswith(P + ".ckptfs-pending/ckpt-ren-src/") and ".gone@" in k
               for k in keys)
    assert sorted(EXPECT) == VISIBLE
    assert EXPECT["ckpt-d"]["sub"]["mode"] == "0o700"
    assert EXPECT["ckpt-d"]["model.bin"]["mode"] == "0o640"  # changed after commit


def replayed(s3, bucket, expect=EXPECT, fresh=()):
    """expect as a replay shows it.  A directory's recorded mtime stands
    until an object directly in it is newer than the "time" of the
    manifest that recorded it (doc/posix.md, "Directory attributes"); a
    replay gives every object a LastModified later than the old writer's
    manifests' times, so such a directory shows the newest LastModified of
    its objects (ms) instead, except those in `fresh` ((name, rel) pairs),
    recorded again since the replay.  The others, with no object directly
    in them, keep the recorded mtime to the ns."""
    out = copy.deepcopy(expect)
    for name, tree in out.items():
        for rel, e in tree.items():
            if e["type"] != "dir" or (name, rel) in fresh:
                continue
            pre = f"{P}{name}/" + ("" if rel == "." else rel + "/")
            objs = s3.list_objects_v2(Bucket=bucket, Prefix=pre,
                                      Delimiter="/").get("Contents", [])
            if objs:
                lm = max(o["LastModified"] for o in objs)
                e["mtime_ns"] = int(lm.timestamp() * 1000) * 1_000_000
    return out


def check_all(root, expect):
    """Every visible checkpoint shows exactly its recorded tree; the
    hidden ones answer ENOENT and are not listed."""
    assert sorted(os.listdir(root)) == sorted(expect)
    for n, tree in expect.items():
        assert attr_tree(Path(root) / n) == tree, n
    for n in HIDDEN:
        assert files_of(Path(root) / n) == "GONE", n


def _same(root, expect):
    try:
        check_all(root, expect)
        return True
    except AssertionError:
        return False


def observer(mount, bucket, tmp_path, tag):
    return mount(bucket, P.rstrip("/"), options=helpers.observer_options(tmp_path / tag))


def writer(mount, bucket, tmp_path, tag="w"):
    return mount(bucket, P.rstrip("/"), options=[f"cache_dir={tmp_path / tag}", "lease=2"])


@pytest.mark.timeout(90)
def test_v2_new_binary_shows_attributes_and_gc_finishes(s3server, bucket, mount,
                                                        tmp_path):
    s3 = s3server.client()
    load(s3, bucket, FIX, INDEX)
    m = observer(mount, bucket, tmp_path, "o")
    want = replayed(s3, bucket)
    # directories' and files' mode, owner, ns mtime, xattrs as recorded;
    # the half-done rm -r and mv past their commit points show their new
    # state, the mv before it and the abandoned transaction nothing
    check_all(m.path, want)
    r = gc(s3server, bucket)
    assert r.returncode == 0, r.stdout + r.stderr
    for gone in ("ckpt-del/", "ckpt-ren-src/", "ckpt-cp-dst/", "ckpt-abandoned/",
                 ".ckptfs-pending/"):
        assert keys_under(s3server, bucket, P + gone) == [], (gone, r.stdout)
    for name in ("ckpt-ren-dst", "ckpt-cp-src", "ckpt-d"):
        assert keys_under(s3server, bucket, f"{P}{name}/"), name
    time.sleep(0.3)  # the observer's listings expire (dir_timeout 0.1 s)
    check_all(m.path, want)
    check_all(observer(mount, bucket, tmp_path, "f").path, want)
    r = gc(s3server, bucket)
    assert r.returncode == 0 and "0 abandoned" in r.stdout, r.stdout


@pytest.mark.timeout(120)
def test_v2_new_binary_deletes_and_renames_old_checkpoints(s3server, bucket, mount,
                                                           tmp_path):
    s3 = s3server.client()
    load(s3, bucket, FIX, INDEX)
    w = writer(mount, bucket, tmp_path)
    obs = observer(mount, bucket, tmp_path, "o")
    os.rename(w.path / "ckpt-d", w.path / "ckpt-e")       # dirs, addenda
    os.rename(w.path / "ckpt-cp-src", w.path / "ckpt-cp-dst")  # over a dead mv's copies
    run(["rm", "-r", str(w.path / "ckpt-ren-dst")], timeout=60)  # a renamed_from one
    assert ckptfs_sync(w.path).returncode == 0
    time.sleep(0.3)
    # a rename records the directories it moves anew, as the writer
    # showed them: their recorded mtimes stand again
    was = replayed(s3, bucket, fresh=[("ckpt-d", r) for r in EXPECT["ckpt-d"]] +
                   [("ckpt-cp-src", r) for r in EXPECT["ckpt-cp-src"]])
    want = {"ckpt-cp-dst": was["ckpt-cp-src"], "ckpt-e": was["ckpt-d"],
            "latest": was["latest"]}
    fresh = observer(mount, bucket, tmp_path, "f")
    for v in (obs, fresh):
        assert sorted(os.listdir(v.path)) == sorted(want), v.path
        for n, tree in want.items():
            assert attr_tree(v.path / n) == tree, (v.path, n)
        for n in ("ckpt-d", "ckpt-cp-src", "ckpt-ren-dst", "ckpt-ren-src", "ckpt-del"):
            assert files_of(v.path / n) == "GONE", (v.path, n)
    for gone in ("ckpt-d/", "ckpt-cp-src/", "ckpt-ren-dst/"):
        assert keys_under(s3server, bucket, P + gone) == [], gone
    # no marker or delete record of the new binary's left behind
    old = {e["key"] for e in INDEX["objects"]}
    pend = set(keys_under(s3server, bucket, P + ".ckptfs-pending/")) - old
    assert not pend, pend
    # what the dead old writers left elsewhere, gc finishes
    r = gc(s3server, bucket)
    assert r.returncode == 0, r.stdout + r.stderr
    assert keys_under(s3server, bucket, P + ".ckptfs-pending/") == []
    assert keys_under(s3server, bucket, P + "ckpt-ren-src/") == []
    assert keys_under(s3server, bucket, P + "ckpt-del/") == []
    for n, tree in want.items():
        assert attr_tree(fresh.path / n) == tree, n


def change_dirs(root, base):
    """chmod, chown, utimensat, setxattr, removexattr of ckpt-d's
    directories (its root's "dir", nested and empty "dirs") and of the
    renamed checkpoint's; returns the trees every mount must show then:
    `base` (what root showed before) with these changes.  A change records
    the directory with all its attributes as the writer shows them, its
    mtime included (after a replay, see replayed(), the LastModified it
    showed), which then stands on every mount."""
    d, r = Path(root) / "ckpt-d", Path(root) / "ckpt-ren-dst"
    # the mtimes the writer shows at the calls (a stat, no listing: a
    # replayed empty directory's own newer object moves it only once its
    # prefix was listed, see replayed())
    shown = {("ckpt-d", rel): os.stat(d / rel).st_mtime_ns
             for rel in (".", "sub", "emptydir", "sub/deeper/empty2")}
    shown["ckpt-ren-dst", "inner"] = os.stat(r / "inner").st_mtime_ns
    os.chmod(d, 0o770)
    os.setxattr(d / "sub", "user.added", b"by the new binary")
    os.chown(d / "emptydir", 6001, 6002)
    os.utime(d / "sub" / "deeper", ns=(T_DIR, T_DIR))
    os.removexattr(d / "sub" / "deeper" / "empty2", "user.e2")
    os.chmod(r / "inner", 0o700)
    want = copy.deepcopy(base)
    for (name, rel), t in shown.items():
        want[name][rel]["mtime_ns"] = t
    wd, wr = want["ckpt-d"], want["ckpt-ren-dst"]
    wd["."]["mode"] = "0o770"
    wd["sub"]["xattrs"]["user.added"] = "by the new binary"
    wd["emptydir"]["uid"], wd["emptydir"]["gid"] = 6001, 6002
    wd["sub/deeper"]["mtime_ns"] = T_DIR
    del wd["sub/deeper/empty2"]["xattrs"]["user.e2"]
    wr["inner"]["mode"] = "0o700"
    return want


def dir_records(s3, bucket, name, old_keys):
    """The manifests under checkpoint `name` not in the fixture: the new
    binary's step-kind-5 addenda (one directory entry, no files)."""
    out = []
    for k in s3.list_objects_v2(Bucket=bucket, Prefix=f"{P}{name}/.ckptfs/")["Contents"]:
        if k["Key"] not in old_keys:
            out.append(json.loads(s3.get_object(Bucket=bucket, Key=k["Key"])["Body"].read()))
    return out


@pytest.mark.timeout(120)
def test_v2_dir_changes_of_old_checkpoints(s3server, bucket, mount, tmp_path):
    s3 = s3server.client()
    load(s3, bucket, FIX, INDEX)
    w = writer(mount, bucket, tmp_path)
    obs = observer(mount, bucket, tmp_path, "o")
    check_all(obs.path, replayed(s3, bucket))
    want = change_dirs(w.path, replayed(s3, bucket))
    assert ckptfs_sync(w.path).returncode == 0
    # stored as addenda with one directory entry and no files
    old_keys = {e["key"] for e in INDEX["objects"]}
    recs = dir_records(s3, bucket, "ckpt-d", old_keys)
    assert len(recs) >= 4 and all(not x.get("files") for x in recs), recs
    assert any(x.get("dir", {}).get("mode") == 0o770 for x in recs), recs
    assert [x for x in dir_records(s3, bucket, "ckpt-ren-dst", old_keys)
            if [e for e in x.get("dirs", []) if e["path"] == "inner" and
                e["mode"] == 0o700]]
    check_all(observer(mount, bucket, tmp_path, "f").path, want)
    time.sleep(0.3)  # the observer's listings expire (dir_timeout 0.1 s)
    t0 = time.monotonic()
    helpers.wait_for(lambda: _same(obs.path, want), 15, "the observer shows the changes")
    print(f"observer converged after {time.monotonic() - t0:.2f} s")
    check_all(obs.path, want)
    w.unmount()
    w = writer(mount, bucket, tmp_path, "w2")  # remount of a writer
    check_all(w.path, want)


@pytest.mark.timeout(120)
@pytest.mark.skipif(not OLD_BIN, reason="CKPTFS_OLD_BIN (a ckptfs built at 2408fb3) "
                    "not set: the old reader test needs the old binary")
def test_v2_old_reader_of_new_dir_changes(s3server, bucket, mount, tmp_path):
    """The previous main reads a bucket where the new binary stored
    directory changes (step kind 5: addenda with one "dirs" entry or a
    "dir" and no files): no error, every file as before, and, since
    readers from issue 22 on take the newest record of a directory, the
    directories with their NEW mode, owner, mtime and xattrs, as the new
    binary shows them (doc/commit.md, "Directory attribute records")."""
    s3 = s3server.client()
    load(s3, bucket, FIX, INDEX)
    w = writer(mount, bucket, tmp_path)
    want = change_dirs(w.path, replayed(s3, bucket))
    assert ckptfs_sync(w.path).returncode == 0
    mp = mount.workdir / "old-r"
    mp.mkdir(parents=True, exist_ok=True)
    argv = mount.argv(bucket, P.rstrip("/"), mp, helpers.observer_options(tmp_path / "or"))
    argv[0] = OLD_BIN
    old = mount(bucket, argv=argv, mountpoint=mp)
    check_all(old.path, want)
    check_all(observer(mount, bucket, tmp_path, "nr").path, want)
