"""The ``s3`` settings: endpoint, region, encryption, the Delta log store, bucket lifecycle."""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import Enum
from typing import Any

from medallion.config.model import DeltaLogStore, S3Settings, SseAlgorithm
from medallion.config.reader import SettingsReader, boolean, shown
from medallion.config.yamlfiles import Origins
from medallion.errors import ConfigError

_KMS_KEY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]+$")

def _s3_optional_string(section: Mapping[str, Any], key: str, source: Origins) -> str | None:
    value = section.get(key.rpartition(".")[2])
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(key, source.of(key),
                          f"must be a non-empty string or null, got {shown(key, value)}")
    return value.strip()

def _s3_choice(section: Mapping[str, Any], key: str, enum: type[Enum], default: Enum,
            source: Origins) -> Any:
    value = section.get(key.rpartition(".")[2], default.value)
    try:
        return enum(value)
    except ValueError:
        choices = ", ".join(str(member.value) for member in enum)
        raise ConfigError(key, source.of(key), f"{value!r} is not one of {choices}") from None

def read_s3(reader: SettingsReader, source: Origins) -> S3Settings:
    section = reader.section("s3", {
        "endpoint", "path_style_access", "region", "sse", "kms_key_id", "delta_log_store",
        "dynamodb_table", "dynamodb_region", "account_id", "versioning", "landing_expiry_days",
        "abort_incomplete_uploads_days",
    })
    endpoint = _s3_optional_string(section, "s3.endpoint", source)
    if endpoint is not None and not re.match(r"^https?://[^/\s]+/?$", endpoint):
        raise ConfigError("s3.endpoint", source.of("s3.endpoint"),
                          f"{endpoint!r} is not an http(s)://host[:port] URL")
    sse = _s3_choice(section, "s3.sse", SseAlgorithm, SseAlgorithm.NONE, source)
    kms_key_id = _s3_optional_string(section, "s3.kms_key_id", source)
    if sse is SseAlgorithm.SSE_KMS and kms_key_id is None:
        raise ConfigError("s3.kms_key_id", source.of("s3.sse"), "SSE-KMS needs the key's ARN")
    if kms_key_id is not None and not _KMS_KEY_ARN.match(kms_key_id):
        # An id or alias cannot be an IAM policy's Resource: the grant would be on every key ("*").
        raise ConfigError("s3.kms_key_id", source.of("s3.kms_key_id"),
                          f"{kms_key_id!r} is not a key ARN like "
                          "arn:aws:kms:eu-west-1:111122223333:key/<key id> (an id or an alias "
                          "cannot be named in the job role's IAM policy)")
    if sse is not SseAlgorithm.SSE_KMS and kms_key_id is not None:
        raise ConfigError("s3.kms_key_id", source.of("s3.kms_key_id"),
                          f"a KMS key is only used with sse: SSE-KMS (sse is {sse.value})")
    delta_log_store = _s3_choice(section, "s3.delta_log_store", DeltaLogStore,
                                 DeltaLogStore.SINGLE_DRIVER, source)
    region = _s3_optional_string(section, "s3.region", source)
    dynamodb_region = _s3_optional_string(section, "s3.dynamodb_region", source)
    account = section.get("account_id")
    if account is not None and (not isinstance(account, str) or not re.match(r"^\d{12}$", account)):
        raise ConfigError("s3.account_id", source.of("s3.account_id"),
                          f"must be the 12-digit AWS account id as a quoted string, got {account!r}")
    if delta_log_store is DeltaLogStore.DYNAMODB:
        # The job role's policy names the commit table by its full ARN: region and account.
        if not (dynamodb_region or region):
            raise ConfigError("s3.dynamodb_region", source.of("s3.delta_log_store"),
                              "the DynamoDB log store needs s3.dynamodb_region or s3.region")
        if account is None:
            raise ConfigError("s3.account_id", source.of("s3.delta_log_store"),
                              "the DynamoDB log store needs the table's AWS account id, so that "
                              "the IAM policy grants that one table and no other")
    return S3Settings(
        endpoint=endpoint.rstrip("/") if endpoint else None,
        path_style_access=boolean(section, "s3.path_style_access", False, source),
        region=region,
        sse=sse,
        kms_key_id=kms_key_id,
        delta_log_store=delta_log_store,
        dynamodb_table=reader.string(section, "s3.dynamodb_table", "delta_log"),
        dynamodb_region=dynamodb_region,
        account_id=account,
        versioning=boolean(section, "s3.versioning", True, source),
        landing_expiry_days=reader.positive_int(section, "s3.landing_expiry_days", 30),
        abort_incomplete_uploads_days=reader.positive_int(
            section, "s3.abort_incomplete_uploads_days", 7),
    )
