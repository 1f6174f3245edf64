"""The bucket policy and downgrade protection of provisioning, against a hand-made S3 stand-in."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from medallion.ops.infra.provision import ProvisionError, apply, format_plan, plan, policy_statements
from medallion.project import Settings, load_settings
from tests.s3_support import write_overlay

pytestmark = pytest.mark.usefixtures("clean_medallion_env")
KEY = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
ALL_BLOCKED = {"BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True,
               "RestrictPublicBuckets": True}


def _missing(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, "Get")


class FakeS3:
    """One existing bucket's settings, and a record of every change made to it."""

    def __init__(self, versioning: str, encryption: dict[str, Any] | None,
                 policy: list[dict[str, Any]] | None) -> None:
        self.versioning = versioning
        self.encryption = encryption
        self.policy = policy
        self.puts: list[tuple[str, dict[str, Any]]] = []

    def head_bucket(self, Bucket: str) -> None:  # noqa: N803 - boto3's names
        return None

    def get_bucket_versioning(self, Bucket: str) -> dict[str, Any]:  # noqa: N803
        return {"Status": self.versioning}

    def get_bucket_encryption(self, Bucket: str) -> dict[str, Any]:  # noqa: N803
        if self.encryption is None:
            raise _missing("ServerSideEncryptionConfigurationNotFoundError")
        return {"ServerSideEncryptionConfiguration": {"Rules": [self.encryption]}}

    def get_public_access_block(self, Bucket: str) -> dict[str, Any]:  # noqa: N803
        return {"PublicAccessBlockConfiguration": ALL_BLOCKED}

    def get_bucket_lifecycle_configuration(self, Bucket: str) -> dict[str, Any]:  # noqa: N803
        raise _missing("NoSuchLifecycleConfiguration")

    def get_bucket_policy(self, Bucket: str) -> dict[str, Any]:  # noqa: N803
        if self.policy is None:
            raise _missing("NoSuchBucketPolicy")
        return {"Policy": json.dumps({"Version": "2012-10-17", "Statement": self.policy})}

    def __getattr__(self, name: str) -> Any:
        if name.startswith(("put_", "delete_", "create_")):
            return lambda **kwargs: self.puts.append((name, kwargs))
        raise AttributeError(name)


def _settings(tmp_path: Path, s3: dict[str, Any]) -> Settings:
    conf = write_overlay(tmp_path / "conf", "p", {
        "paths": {"landing": "s3a://lake/landing", "lakehouse": "s3a://lake/lakehouse"}, "s3": s3})
    return load_settings(env="p", conf_dir=conf)


def test_the_bucket_policy_denies_plain_http_and_unencrypted_uploads(tmp_path: Path) -> None:
    settings = _settings(tmp_path, {"sse": "SSE-KMS", "kms_key_id": KEY})
    assert list(policy_statements(settings, "lake")) == [
        {"Sid": "MedallionDenyInsecureTransport", "Effect": "Deny", "Principal": "*",
         "Action": "s3:*", "Resource": ["arn:aws:s3:::lake", "arn:aws:s3:::lake/*"],
         "Condition": {"Bool": {"aws:SecureTransport": "false"}}},
        {"Sid": "MedallionDenyWrongEncryptionHeader", "Effect": "Deny", "Principal": "*",
         "Action": "s3:PutObject", "Resource": "arn:aws:s3:::lake/*",
         "Condition": {"StringNotEquals": {"s3:x-amz-server-side-encryption": "aws:kms"}}},
        {"Sid": "MedallionDenyUnencryptedUploads", "Effect": "Deny", "Principal": "*",
         "Action": "s3:PutObject", "Resource": "arn:aws:s3:::lake/*",
         "Condition": {"Null": {"s3:x-amz-server-side-encryption": "true"}}},
        {"Sid": "MedallionDenyOtherKmsKey", "Effect": "Deny", "Principal": "*",
         "Action": "s3:PutObject", "Resource": "arn:aws:s3:::lake/*",
         "Condition": {"StringNotEqualsIfExists": {
             "s3:x-amz-server-side-encryption-aws-kms-key-id": KEY}}},
    ]
    sse_s3 = policy_statements(_settings(tmp_path / "s", {"sse": "SSE-S3"}), "lake")
    assert sse_s3[1]["Condition"] == {"StringNotEquals": {"s3:x-amz-server-side-encryption": "AES256"}}
    assert [s["Sid"] for s in sse_s3] == ["MedallionDenyInsecureTransport",
                                          "MedallionDenyWrongEncryptionHeader",
                                          "MedallionDenyUnencryptedUploads"]


def test_apply_adds_our_statements_and_keeps_the_others(tmp_path: Path) -> None:
    settings = _settings(tmp_path, {"sse": "SSE-S3"})
    theirs = {"Sid": "AuditorRead", "Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::1:root"},
              "Action": "s3:GetObject", "Resource": "arn:aws:s3:::lake/*"}
    client = FakeS3("Enabled", None, [theirs])
    planned = plan(client, settings)
    assert [c.setting for c in planned.changes] == ["encryption", "lifecycle", "bucket-policy"]
    assert not any(c.downgrade for c in planned.changes)
    apply(client, settings, planned)
    [(_, put)] = [p for p in client.puts if p[0] == "put_bucket_policy"]
    statements = json.loads(put["Policy"])["Statement"]
    assert statements == [theirs, *policy_statements(settings, "lake")]


def test_a_downgrade_is_shown_and_refused_without_force(tmp_path: Path) -> None:
    kms = {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": KEY},
           "BucketKeyEnabled": True}
    settings = _settings(tmp_path, {"sse": "SSE-S3", "versioning": False})
    enforcing = list(policy_statements(_settings(tmp_path / "k", {"sse": "SSE-KMS",
                                                                  "kms_key_id": KEY}), "lake"))
    client = FakeS3("Enabled", kms, enforcing)
    planned = plan(client, settings)
    downgrades = {c.setting: c.downgrade for c in planned.changes if c.downgrade}
    assert set(downgrades) == {"versioning", "encryption", "bucket-policy"}
    assert KEY in downgrades["encryption"]
    assert "MedallionDenyOtherKmsKey" in downgrades["bucket-policy"]
    printed = format_plan(planned)
    assert "lake: versioning: Enabled -> Suspended [DOWNGRADE:" in printed
    assert "--force" in printed
    with pytest.raises(ProvisionError, match="would weaken"):
        apply(client, settings, planned)
    assert client.puts == []  # refused before anything changed
    apply(client, settings, planned, force=True)
    assert ("put_bucket_versioning", {"Bucket": "lake", "VersioningConfiguration": {
        "Status": "Suspended"}}) in client.puts
