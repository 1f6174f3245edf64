"""The least-privilege IAM policy of the job role, generated from the configured paths.

The job reads the landing zone and reads and writes the lakehouse (tables, checkpoints, catalog
folder, all under ``<lakehouse>``); it needs nothing else in those buckets and no other bucket.
"""

from __future__ import annotations

from typing import Any

from medallion.config import DeltaLogStore, Settings, SseAlgorithm
from medallion.s3 import S3Location, parse_s3


def _object_arn(location: S3Location) -> str:
    return f"arn:aws:s3:::{location.bucket}/{location.key('*')}"


def _list_prefixes(location: S3Location) -> list[str]:
    return [location.prefix, f"{location.prefix}/*"] if location.prefix else ["*"]


def job_policy(settings: Settings) -> dict[str, Any]:
    """An IAM policy document (as a dict) granting the job exactly what its paths need."""
    landing = parse_s3(settings.paths.landing)
    lakehouse = parse_s3(settings.paths.lakehouse)
    listing: dict[str, list[str]] = {}
    for location in (landing, lakehouse):
        listing.setdefault(location.bucket, []).extend(_list_prefixes(location))
    statements: list[dict[str, Any]] = [
        {
            "Sid": f"List{_sid(bucket)}",
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": f"arn:aws:s3:::{bucket}",
            "Condition": {"StringLike": {"s3:prefix": sorted(set(prefixes))}},
        }
        for bucket, prefixes in sorted(listing.items())
    ]
    statements += [
        {
            "Sid": "LocateBuckets",
            "Effect": "Allow",
            "Action": ["s3:GetBucketLocation", "s3:ListBucketMultipartUploads"],
            "Resource": sorted({f"arn:aws:s3:::{b}" for b in listing}),
        },
        {
            "Sid": "ReadLanding",
            "Effect": "Allow",
            "Action": ["s3:GetObject"],
            "Resource": _object_arn(landing),
        },
        {
            "Sid": "ReadWriteLakehouse",
            "Effect": "Allow",
            "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject",
                       "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
            "Resource": _object_arn(lakehouse),
        },
    ]
    s3 = settings.s3
    if s3.sse is SseAlgorithm.SSE_KMS and s3.kms_key_id:
        key = s3.kms_key_id
        statement: dict[str, Any] = {
            "Sid": "UseLakehouseKey",
            "Effect": "Allow",
            "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
            "Resource": key if key.startswith("arn:") else "*",
        }
        if not key.startswith("arn:"):
            # A bare key id or alias cannot name the resource; limit the grant to use through S3.
            statement["Condition"] = {"StringLike": {"kms:ViaService": "s3.*.amazonaws.com"}}
        statements.append(statement)
    if s3.delta_log_store is DeltaLogStore.DYNAMODB:
        region = s3.dynamodb_region or s3.region or "*"
        statements.append({
            "Sid": "DeltaCommitTable",
            "Effect": "Allow",
            "Action": ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem",
                       "dynamodb:Query", "dynamodb:DescribeTable", "dynamodb:CreateTable"],
            "Resource": f"arn:aws:dynamodb:{region}:*:table/{s3.dynamodb_table}",
        })
    return {"Version": "2012-10-17", "Statement": statements}


def _sid(bucket: str) -> str:
    return "".join(part.capitalize() for part in bucket.replace(".", "-").split("-"))
