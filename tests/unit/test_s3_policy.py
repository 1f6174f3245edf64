"""The job role's IAM policy and the bucket plan, derived from the configured paths (no server)."""

from __future__ import annotations

from pathlib import Path

import pytest

from medallion.ops.infra.policy import job_policy
from medallion.ops.infra.provision import ProvisionError, targets_of
from medallion.project import load_settings
from tests.s3_support import write_overlay

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("clean_medallion_env")


def test_dev_policy_grants_exactly_the_configured_prefixes() -> None:
    settings = load_settings(env="dev", conf_dir=REPO / "conf")
    assert job_policy(settings) == {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "ListMedallionDevLakehouse", "Effect": "Allow", "Action": ["s3:ListBucket"],
             "Resource": "arn:aws:s3:::medallion-dev-lakehouse",
             "Condition": {"StringLike": {"s3:prefix": ["lakehouse", "lakehouse/*"]}}},
            {"Sid": "ListMedallionDevLanding", "Effect": "Allow", "Action": ["s3:ListBucket"],
             "Resource": "arn:aws:s3:::medallion-dev-landing",
             "Condition": {"StringLike": {"s3:prefix": ["landing", "landing/*"]}}},
            {"Sid": "LocateBuckets", "Effect": "Allow",
             "Action": ["s3:GetBucketLocation", "s3:ListBucketMultipartUploads"],
             "Resource": ["arn:aws:s3:::medallion-dev-lakehouse",
                          "arn:aws:s3:::medallion-dev-landing"]},
            {"Sid": "ReadLanding", "Effect": "Allow", "Action": ["s3:GetObject"],
             "Resource": "arn:aws:s3:::medallion-dev-landing/landing/*"},
            {"Sid": "ReadWriteLakehouse", "Effect": "Allow",
             "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject",
                        "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
             "Resource": "arn:aws:s3:::medallion-dev-lakehouse/lakehouse/*"},
        ],
    }


def test_kms_key_is_granted_when_sse_kms(tmp_path: Path) -> None:
    conf = write_overlay(tmp_path / "conf", "kms", {
        "paths": {"landing": "s3a://b/in", "lakehouse": "s3a://b/out"},
        "s3": {"sse": "SSE-KMS", "kms_key_id": "arn:aws:kms:eu-west-1:111122223333:key/k"}})
    statements = job_policy(load_settings(env="kms", conf_dir=conf))["Statement"]
    assert statements[0]["Condition"] == {"StringLike": {"s3:prefix": ["in", "in/*", "out",
                                                                          "out/*"]}}
    assert statements[-1] == {"Sid": "UseLakehouseKey", "Effect": "Allow",
                              "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
                              "Resource": "arn:aws:kms:eu-west-1:111122223333:key/k"}


def test_one_bucket_holds_both_with_the_expiry_on_landing_only(tmp_path: Path) -> None:
    conf = write_overlay(tmp_path / "conf", "one", {
        "paths": {"landing": "s3a://b/in", "lakehouse": "s3a://b/out"}})
    [target] = targets_of(load_settings(env="one", conf_dir=conf))
    assert target.roles == (("landing", "s3a://b/in"), ("lakehouse", "s3a://b/out"),
                            ("checkpoints", "s3a://b/out/_checkpoints"))
    expiry = [r for r in target.lifecycle_rules if "Expiration" in r]
    assert expiry == [{"ID": "medallion-expire-landed-files", "Filter": {"Prefix": "in/"},
                       "Status": "Enabled", "Expiration": {"Days": 30}}]


@pytest.mark.parametrize("landing", ["s3a://b", "s3a://b/data"])
def test_lakehouse_inside_landing_is_refused(tmp_path: Path, landing: str) -> None:
    conf = write_overlay(tmp_path / "conf", "x", {
        "paths": {"landing": landing, "lakehouse": "s3a://b/data/lakehouse"}})
    with pytest.raises(ProvisionError, match="would delete tables"):
        targets_of(load_settings(env="x", conf_dir=conf))


def test_dynamodb_commit_table_is_pinned_and_never_created_by_the_job(tmp_path: Path) -> None:
    conf = write_overlay(tmp_path / "conf", "ddb", {
        "paths": {"landing": "s3a://in-bucket/landing", "lakehouse": "s3a://lake-bucket/lakehouse"},
        "s3": {"delta_log_store": "dynamodb", "dynamodb_table": "delta_log",
               "dynamodb_region": "eu-central-1", "region": "eu-west-1",
               "account_id": "111122223333"}})
    statements = job_policy(load_settings(env="ddb", conf_dir=conf))["Statement"]
    assert statements[-1] == {
        "Sid": "DeltaCommitTable", "Effect": "Allow",
        "Action": ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem",
                   "dynamodb:Query", "dynamodb:DescribeTable"],
        "Resource": "arn:aws:dynamodb:eu-central-1:111122223333:table/delta_log"}


@pytest.mark.parametrize(("landing", "lakehouse"), [
    ("s3a://b/landing", "s3a://b"),                 # lakehouse at the bucket root
    ("s3a://b/data/landing", "s3a://b/data"),       # landing inside the lakehouse prefix
])
def test_a_lakehouse_grant_covering_the_landing_files_is_refused(
        tmp_path: Path, landing: str, lakehouse: str) -> None:
    conf = write_overlay(tmp_path / "conf", "x", {"paths": {"landing": landing,
                                                            "lakehouse": lakehouse}})
    settings = load_settings(env="x", conf_dir=conf)
    with pytest.raises(ProvisionError, match="would cover the landed files"):
        job_policy(settings)
    with pytest.raises(ProvisionError, match="would cover the landed files"):
        targets_of(settings)
