"""The boto3 side of S3: clients built from the typed ``s3`` settings, and S3 URIs.

Credentials come from boto3's own provider chain (environment, shared profile, SSO, container
or instance role); nothing here reads or logs a key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from medallion.config.model import S3Settings

S3_SCHEMES = ("s3a://", "s3://", "s3n://")


@dataclass(frozen=True)
class S3Location:
    """A bucket and a key prefix (no leading or trailing slash; empty for the whole bucket)."""

    bucket: str
    prefix: str

    def key(self, *parts: str) -> str:
        """The key of ``parts`` under this prefix."""
        return "/".join(p.strip("/") for p in (self.prefix, *parts) if p.strip("/"))

    @property
    def uri(self) -> str:
        """``s3a://bucket/prefix``."""
        return f"s3a://{self.bucket}/{self.prefix}".rstrip("/")


def is_s3(path: str) -> bool:
    """Whether ``path`` is an S3 URI (``s3a://``, ``s3://`` or ``s3n://``)."""
    return path.startswith(S3_SCHEMES)


def parse_s3(path: str) -> S3Location:
    """Split ``s3a://bucket/some/prefix`` into bucket and prefix."""
    if not is_s3(path):
        raise ValueError(f"{path!r} is not an s3a:// URI")
    rest = path.split("://", 1)[1]
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise ValueError(f"{path!r} names no bucket")
    return S3Location(bucket, prefix.strip("/"))


def s3_client(s3: S3Settings) -> Any:
    """A boto3 S3 client for the configured endpoint, region and addressing style."""
    import boto3
    from botocore.config import Config

    region = s3.region or ("us-east-1" if s3.endpoint else None)
    config = Config(
        s3={"addressing_style": "path" if s3.path_style_access else "auto"},
        retries={"mode": "standard", "max_attempts": 3},
        connect_timeout=10,
        read_timeout=60,
    )
    return boto3.session.Session().client(
        "s3", endpoint_url=s3.endpoint, region_name=region, config=config)


def error_code(exc: BaseException) -> str:
    """The S3 error code of a botocore ``ClientError`` (``""`` for anything else)."""
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def sse_arguments(s3: S3Settings) -> dict[str, str]:
    """Per-request server-side encryption arguments for put/upload calls."""
    from medallion.config.model import SseAlgorithm

    if s3.sse is SseAlgorithm.SSE_S3:
        return {"ServerSideEncryption": "AES256"}
    if s3.sse is SseAlgorithm.SSE_KMS:
        return {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": s3.kms_key_id or ""}
    return {}
