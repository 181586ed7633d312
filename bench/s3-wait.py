#!/usr/bin/python3
"""s3-wait.py ENDPOINT BUCKET PREFIX SRC_DIR TIMEOUT: poll ListObjectsV2
until every file of SRC_DIR is listed under PREFIX with its size.  Prints
`already` when the first listing shows them all (the caller then takes its
own start time: they were there before this program had started), else the
wall-clock time (epoch seconds) of the listing that first showed them all.
Exit 1 on timeout.  Keys come from the environment
(AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)."""
import os
import sys
import time

import boto3
import botocore.config


def main():
    ep, bucket, prefix, src, timeout = sys.argv[1:6]
    want = {f"{prefix}/{n}": os.path.getsize(os.path.join(src, n)) for n in os.listdir(src)}
    s3 = boto3.client("s3", endpoint_url=ep, region_name="us-east-1",
                      config=botocore.config.Config(s3={"addressing_style": "path"}))
    t0 = time.monotonic()
    first = True
    while True:
        got = {}
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
            got.update({o["Key"]: o["Size"] for o in page.get("Contents", [])})
        if all(got.get(k) == v for k, v in want.items()):
            print("already" if first else f"{time.time():.6f}")
            return 0
        first = False
        if time.monotonic() - t0 > float(timeout):
            missing = [k for k, v in want.items() if got.get(k) != v]
            print(f"timeout; not listed with the right size: {missing[:5]}", file=sys.stderr)
            return 1
        time.sleep(0.1)


if __name__ == "__main__":
    sys.exit(main())
