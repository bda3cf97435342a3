"""Ordinary boto3 use of one bucket, for TestClientsConfig (e2e/clients_config_test.go).

Usage: python3 boto3_clients_config.py ENDPOINT BUCKET

Credentials and region come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
and AWS_DEFAULT_REGION. Each step reads back what it set and exits non-zero
naming the step whose answer was wrong. On success it prints one JSON object
on standard output: the boto3 and botocore versions, the keys it left in the
bucket and a presigned GET URL of one of them, which the Go test fetches.
"""

import json
import os
import sys

try:
    import boto3
    import botocore
    from botocore.config import Config
except ImportError as err:
    sys.exit(
        f"boto3 is not importable by {sys.executable} ({err}): install the Debian "
        "package python3-boto3, as .ci/run does"
    )


def check(step, got, want):
    if got != want:
        sys.exit(f"{step}: got {got!r}, want {want!r}")


def main():
    endpoint, bucket = sys.argv[1], sys.argv[2]
    # signature_version s3v4: without it botocore (1.29 as well as 1.43)
    # signs generate_presigned_url with Signature Version 2
    # (AWSAccessKeyId, Signature, Expires), which the gateway refuses as it
    # verifies only AWS4-HMAC-SHA256. Its other calls are V4 either way.
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=os.environ["AWS_DEFAULT_REGION"],
        config=Config(
            signature_version="s3v4",
            s3={"addressing_style": "path"},
            retries={"max_attempts": 1, "mode": "standard"},
        ),
    )

    s3.create_bucket(Bucket=bucket)

    tags = [{"Key": "team", "Value": "storage"}, {"Key": "client", "Value": "boto3"}]
    s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": tags})
    got = s3.get_bucket_tagging(Bucket=bucket)["TagSet"]
    check("get_bucket_tagging", sorted((t["Key"], t["Value"]) for t in got),
          sorted((t["Key"], t["Value"]) for t in tags))

    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    check("get_bucket_versioning", s3.get_bucket_versioning(Bucket=bucket).get("Status"), "Enabled")

    bodies = {
        "boto3/keep.txt": b"kept by boto3\n" * 40,
        "boto3/a.txt": b"first object\n",
        "boto3/dir/b.txt": b"second object\n" * 3,
    }
    for key, body in bodies.items():
        s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType="text/plain",
                      Metadata={"tool": "boto3"})
    got = s3.get_object(Bucket=bucket, Key="boto3/keep.txt")
    check("get_object body", got["Body"].read(), bodies["boto3/keep.txt"])
    check("get_object metadata", got["Metadata"], {"tool": "boto3"})
    check("get_object content type", got["ContentType"], "text/plain")

    listed = s3.list_objects_v2(Bucket=bucket, Prefix="boto3/", Delimiter="/")
    check("list_objects_v2 keys", [o["Key"] for o in listed.get("Contents", [])],
          ["boto3/a.txt", "boto3/keep.txt"])
    check("list_objects_v2 common prefixes",
          [p["Prefix"] for p in listed.get("CommonPrefixes", [])], ["boto3/dir/"])
    page = s3.list_objects_v2(Bucket=bucket, Prefix="boto3/", MaxKeys=1)
    check("list_objects_v2 MaxKeys=1 count", page["KeyCount"], 1)
    check("list_objects_v2 MaxKeys=1 truncated", page["IsTruncated"], True)
    rest = s3.list_objects_v2(Bucket=bucket, Prefix="boto3/",
                              ContinuationToken=page["NextContinuationToken"])
    check("list_objects_v2 continuation",
          [o["Key"] for o in page["Contents"] + rest["Contents"]], sorted(bodies))

    s3.put_object_acl(Bucket=bucket, Key="boto3/keep.txt", ACL="private")
    grants = s3.get_object_acl(Bucket=bucket, Key="boto3/keep.txt")["Grants"]
    check("get_object_acl permissions", [g["Permission"] for g in grants], ["FULL_CONTROL"])

    deleted = s3.delete_objects(
        Bucket=bucket,
        Delete={"Objects": [{"Key": "boto3/a.txt"}, {"Key": "boto3/dir/b.txt"}]},
    )
    check("delete_objects errors", deleted.get("Errors", []), [])
    check("delete_objects deleted", sorted(d["Key"] for d in deleted.get("Deleted", [])),
          ["boto3/a.txt", "boto3/dir/b.txt"])
    listed = s3.list_objects_v2(Bucket=bucket, Prefix="boto3/")
    check("list_objects_v2 after delete_objects",
          [o["Key"] for o in listed.get("Contents", [])], ["boto3/keep.txt"])

    url = s3.generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": "boto3/keep.txt"}, ExpiresIn=300
    )
    json.dump(
        {
            "boto3": boto3.__version__,
            "botocore": botocore.__version__,
            "keys": [o["Key"] for o in listed.get("Contents", [])],
            "presigned_get": url,
            "presigned_body": bodies["boto3/keep.txt"].decode(),
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
