"""The least-privilege IAM policy of the job role, generated from the configured paths.

The job reads the landing zone and reads and writes the lakehouse (tables, checkpoints, catalog
folder, all under ``<lakehouse>``); it needs nothing else in those buckets and no other bucket.
Every resource is named in full: the KMS key by its ARN, the DynamoDB commit table by region and
account. The table is created beforehand by whoever owns the account, not by the job.
"""

from __future__ import annotations

from typing import Any

from medallion.config.model import DeltaLogStore, SseAlgorithm
from medallion.io.s3 import S3Location
from medallion.ops.infra.provision import check_layout
from medallion.project import Settings


def _object_arn(location: S3Location) -> str:
    return f"arn:aws:s3:::{location.bucket}/{location.key('*')}"


def _list_prefixes(location: S3Location) -> list[str]:
    return [location.prefix, f"{location.prefix}/*"] if location.prefix else ["*"]


def job_policy(settings: Settings) -> dict[str, Any]:
    """An IAM policy document (as a dict) granting the job exactly what its paths need."""
    landing, lakehouse = check_layout(settings)
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
        # The configuration accepts only a key ARN: an id or alias would need Resource "*".
        statements.append({
            "Sid": "UseLakehouseKey",
            "Effect": "Allow",
            "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
            "Resource": s3.kms_key_id,
        })
    if s3.delta_log_store is DeltaLogStore.DYNAMODB:
        # Region and account are required by the configuration when this log store is chosen.
        region = s3.dynamodb_region or s3.region
        statements.append({
            "Sid": "DeltaCommitTable",
            "Effect": "Allow",
            # No CreateTable: a runtime role that can create tables can create any table.
            "Action": ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem",
                       "dynamodb:Query", "dynamodb:DescribeTable"],
            "Resource": f"arn:aws:dynamodb:{region}:{s3.account_id}:table/{s3.dynamodb_table}",
        })
    return {"Version": "2012-10-17", "Statement": statements}


def _sid(bucket: str) -> str:
    return "".join(part.capitalize() for part in bucket.replace(".", "-").split("-"))
