import os, time
import helpers
from helpers import ckptfs_sync

def test_repro(s3server, bucket, mount, tmp_path):
    m = mount(bucket, options=(f"cache_dir={tmp_path/'c'}", "commit_delay=3600"))
    os.mkdir(m / "f0", 0o700)
    ckptfs_sync(m)
    m.unmount(); m = mount(bucket, options=(f"cache_dir={tmp_path/'c'}", "commit_delay=3600"))
    os.setxattr(m / "f0", "user.m", b"x")
    (m / "f0" / "a").write_bytes(b"a" * 1000)
    os.chmod(m / "f0", 0o755)
    print("before rename", oct(os.stat(m / "f0").st_mode))
    os.rename(m / "f0", m / "f1")
    print("after rename", oct(os.stat(m / "f1").st_mode))
    c = s3server.client()
    for key in s3server.keys(bucket, ""):
        body = c.get_object(Bucket=bucket, Key=key)["Body"].read()
        print(key, body[:400] if ".ckptfs/" in key else len(body))
    assert os.stat(m / "f1").st_mode == 0o40755
