"""Bucket provisioning with boto3: plan what differs from the configuration, then apply it.

The buckets are the ones the configured paths name: the landing zone's, and the lakehouse's
(which also holds the checkpoints, under ``<lakehouse>/_checkpoints``). Each bucket gets:

- versioning (``s3.versioning``), and old versions expired after ``NONCURRENT_VERSION_DAYS``;
- default encryption: SSE-KMS with ``s3.kms_key_id`` when ``s3.sse`` is SSE-KMS, else SSE-S3;
- every public access blocked;
- a bucket policy denying requests without TLS and, when ``s3.sse`` is set, object uploads
  without the server-side encryption header of the configured algorithm (and key);
- a lifecycle rule aborting multipart uploads left incomplete, and, on the landing prefix only,
  one expiring landed files after ``s3.landing_expiry_days`` (bronze keeps every line of them).

:func:`plan` reads the current state and lists the changes; :func:`apply` makes exactly those
changes. Applying twice changes nothing the second time. A server that does not implement a call
(S3-compatible stores often lack some) is reported; ``allow_unsupported`` lets apply go on. A
change that would weaken what a bucket has (a KMS key replaced by SSE-S3, versioning suspended,
an enforcing policy statement dropped) is marked in the plan and refused unless forced.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from medallion.config.model import SseAlgorithm
from medallion.io.s3 import S3Location, error_code, is_s3, parse_s3
from medallion.project import Settings

log = logging.getLogger(__name__)

NONCURRENT_VERSION_DAYS = 30
RULE_EXPIRE_LANDING = "medallion-expire-landed-files"
RULE_ABORT_UPLOADS = "medallion-abort-incomplete-uploads"
RULE_NONCURRENT = "medallion-expire-noncurrent-versions"
OUR_RULES = (RULE_EXPIRE_LANDING, RULE_ABORT_UPLOADS, RULE_NONCURRENT)
BLOCK_ALL_PUBLIC = {"BlockPublicAcls": True, "IgnorePublicAcls": True,
                    "BlockPublicPolicy": True, "RestrictPublicBuckets": True}
NO_POLICY_CODES = {"NoSuchBucketPolicy", "NoSuchPolicy"}  # AWS's code; S3Proxy's
UNSUPPORTED_CODES = {"NotImplemented", "501", "NotSupported", "MethodNotAllowed"}
MISSING = "absent"
UNKNOWN = "unknown (the server does not implement reading it)"

SETTINGS = ("bucket", "versioning", "encryption", "public-access-block", "lifecycle",
            "bucket-policy")
# Statements of the bucket policy that this module owns (others in the policy are kept).
POLICY_SID_PREFIX = "Medallion"
SID_TLS_ONLY = "MedallionDenyInsecureTransport"
SID_WRONG_ENCRYPTION = "MedallionDenyWrongEncryptionHeader"
SID_NO_ENCRYPTION = "MedallionDenyUnencryptedUploads"
SID_OTHER_KMS_KEY = "MedallionDenyOtherKmsKey"


class ProvisionError(RuntimeError):
    """The configuration cannot be provisioned, or the server refused a change."""


@dataclass(frozen=True)
class BucketTarget:
    """What one bucket should look like."""

    name: str
    roles: tuple[tuple[str, str], ...]  # (role, s3a:// path) held in this bucket
    versioning: bool
    encryption: dict[str, Any]
    lifecycle_rules: tuple[dict[str, Any], ...]
    policy_statements: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class Change:
    """One setting of one bucket that differs from the configuration."""

    bucket: str
    setting: str
    current: str
    desired: str
    downgrade: str = ""  # what the change would weaken; empty when it weakens nothing

    def __str__(self) -> str:
        text = f"{self.bucket}: {self.setting}: {self.current} -> {self.desired}"
        return f"{text} [DOWNGRADE: {self.downgrade}]" if self.downgrade else text


@dataclass
class Plan:
    """The buckets, and the changes that would bring them to the configuration."""

    targets: list[BucketTarget]
    changes: list[Change]


@dataclass
class ApplyResult:
    """What apply did: changes made, and changes the server does not implement."""

    applied: list[Change] = field(default_factory=list)
    unsupported: list[Change] = field(default_factory=list)


def _region(settings: Settings) -> str:
    return settings.s3.region or "us-east-1"


def desired_encryption(settings: Settings) -> dict[str, Any]:
    """The bucket default encryption rule."""
    if settings.s3.sse is SseAlgorithm.SSE_KMS:
        return {"ApplyServerSideEncryptionByDefault": {
            "SSEAlgorithm": "aws:kms", "KMSMasterKeyID": settings.s3.kms_key_id},
            "BucketKeyEnabled": True}
    return {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"},
            "BucketKeyEnabled": False}


def check_layout(settings: Settings) -> tuple[S3Location, S3Location]:
    """The landing and lakehouse locations, refused when one lies inside the other."""
    for key, path in (("paths.landing", settings.paths.landing),
                      ("paths.lakehouse", settings.paths.lakehouse)):
        if not is_s3(path):
            raise ProvisionError(f"{key} is {path}, not an s3a:// path: nothing to provision")
    landing = parse_s3(settings.paths.landing)
    lakehouse = parse_s3(settings.paths.lakehouse)
    if landing.bucket != lakehouse.bucket:
        return landing, lakehouse
    if not landing.prefix or f"{lakehouse.prefix}/".startswith(f"{landing.prefix}/"):
        raise ProvisionError(
            f"the lakehouse {lakehouse.uri} lies inside the landing zone {landing.uri}: the rule "
            "expiring landed files would delete tables. Give the landing zone its own prefix.")
    if not lakehouse.prefix or f"{landing.prefix}/".startswith(f"{lakehouse.prefix}/"):
        raise ProvisionError(
            f"the landing zone {landing.uri} lies inside the lakehouse {lakehouse.uri}: the job "
            "role's read/write/delete grant on the lakehouse would cover the landed files, which "
            "the pipeline must only read. Give the lakehouse its own prefix (or bucket).")
    return landing, lakehouse


def policy_statements(settings: Settings, bucket: str) -> tuple[dict[str, Any], ...]:
    """The bucket policy statements this module keeps on ``bucket``."""
    s3 = settings.s3
    objects = f"arn:aws:s3:::{bucket}/*"
    statements: list[dict[str, Any]] = []
    if not (s3.endpoint or "").startswith("http://"):
        # Left out for a plain-http endpoint (a local S3-compatible server): it would deny all.
        statements.append({
            "Sid": SID_TLS_ONLY, "Effect": "Deny", "Principal": "*", "Action": "s3:*",
            "Resource": [f"arn:aws:s3:::{bucket}", objects],
            "Condition": {"Bool": {"aws:SecureTransport": "false"}}})
    if s3.sse is not SseAlgorithm.NONE:
        header = "s3:x-amz-server-side-encryption"
        algorithm = "aws:kms" if s3.sse is SseAlgorithm.SSE_KMS else "AES256"
        statements += [
            {"Sid": SID_WRONG_ENCRYPTION, "Effect": "Deny", "Principal": "*",
             "Action": "s3:PutObject", "Resource": objects,
             "Condition": {"StringNotEquals": {header: algorithm}}},
            {"Sid": SID_NO_ENCRYPTION, "Effect": "Deny", "Principal": "*",
             "Action": "s3:PutObject", "Resource": objects,
             "Condition": {"Null": {header: "true"}}},
        ]
        if s3.sse is SseAlgorithm.SSE_KMS and s3.kms_key_id:
            statements.append({
                "Sid": SID_OTHER_KMS_KEY, "Effect": "Deny", "Principal": "*",
                "Action": "s3:PutObject", "Resource": objects,
                "Condition": {"StringNotEqualsIfExists": {
                    f"{header}-aws-kms-key-id": s3.kms_key_id}}})
    return tuple(statements)


def targets_of(settings: Settings) -> list[BucketTarget]:
    """The buckets the configured paths name, each with the settings it should have."""
    landing, lakehouse = check_layout(settings)
    roles: dict[str, list[tuple[str, str]]] = {}
    roles.setdefault(landing.bucket, []).append(("landing", landing.uri))
    roles.setdefault(lakehouse.bucket, []).append(("lakehouse", lakehouse.uri))
    roles[lakehouse.bucket].append(("checkpoints", settings.checkpoint_path("").rstrip("/")))
    s3 = settings.s3
    targets = []
    for bucket, held in roles.items():
        rules: list[dict[str, Any]] = [{
            "ID": RULE_ABORT_UPLOADS, "Filter": {"Prefix": ""}, "Status": "Enabled",
            "AbortIncompleteMultipartUpload": {
                "DaysAfterInitiation": s3.abort_incomplete_uploads_days},
        }]
        if s3.versioning:
            rules.append({
                "ID": RULE_NONCURRENT, "Filter": {"Prefix": ""}, "Status": "Enabled",
                "NoncurrentVersionExpiration": {"NoncurrentDays": NONCURRENT_VERSION_DAYS}})
        if bucket == landing.bucket:
            rules.append({"ID": RULE_EXPIRE_LANDING,
                          "Filter": {"Prefix": f"{landing.prefix}/" if landing.prefix else ""},
                          "Status": "Enabled", "Expiration": {"Days": s3.landing_expiry_days}})
        targets.append(BucketTarget(bucket, tuple(held), s3.versioning,
                                    desired_encryption(settings), tuple(rules),
                                    policy_statements(settings, bucket)))
    return targets


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _read(call: Any, absent_codes: set[str]) -> Any:
    """A get call's result; ``MISSING`` for codes meaning "not set", ``UNKNOWN`` for 501."""
    try:
        return call()
    except Exception as exc:  # noqa: BLE001 - classified below, re-raised otherwise
        code = error_code(exc)
        if code in absent_codes:
            return MISSING
        if code in UNSUPPORTED_CODES:
            return UNKNOWN
        raise


def _bucket_exists(client: Any, bucket: str) -> bool:
    try:
        client.head_bucket(Bucket=bucket)
    except Exception as exc:  # noqa: BLE001
        if error_code(exc) in {"404", "NoSuchBucket", "NotFound"}:
            return False
        raise
    return True


def current_state(client: Any, bucket: str,
                  our_rules: tuple[str, ...] = OUR_RULES) -> dict[str, str]:
    """Each setting of ``bucket`` as text comparable with :func:`desired_state`."""
    if not _bucket_exists(client, bucket):
        return dict.fromkeys(SETTINGS, MISSING)
    state = {"bucket": "present"}
    versioning = _read(lambda: client.get_bucket_versioning(Bucket=bucket), set())
    state["versioning"] = versioning if isinstance(versioning, str) else str(
        versioning.get("Status", "never enabled"))
    encryption = _read(lambda: client.get_bucket_encryption(Bucket=bucket),
                       {"ServerSideEncryptionConfigurationNotFoundError"})
    state["encryption"] = encryption if isinstance(encryption, str) else _text(
        _normal_encryption(encryption["ServerSideEncryptionConfiguration"]["Rules"][0]))
    block = _read(lambda: client.get_public_access_block(Bucket=bucket),
                  {"NoSuchPublicAccessBlockConfiguration"})
    state["public-access-block"] = block if isinstance(block, str) else _text(
        block["PublicAccessBlockConfiguration"])
    lifecycle = _read(lambda: client.get_bucket_lifecycle_configuration(Bucket=bucket),
                      {"NoSuchLifecycleConfiguration"})
    if isinstance(lifecycle, str) and lifecycle == UNKNOWN:
        state["lifecycle"] = UNKNOWN
    else:
        rules = [] if isinstance(lifecycle, str) else lifecycle.get("Rules", [])
        ours = (_normal_rule(r) for r in rules if r.get("ID") in our_rules)
        state["lifecycle"] = _text(sorted(ours, key=lambda r: r["ID"]))
    policy = _read(lambda: client.get_bucket_policy(Bucket=bucket), NO_POLICY_CODES)
    if isinstance(policy, str) and policy == UNKNOWN:
        state["bucket-policy"] = UNKNOWN
    else:
        statements = [] if isinstance(policy, str) else json.loads(policy["Policy"]).get(
            "Statement", [])
        state["bucket-policy"] = _text(sorted(
            (s for s in statements if str(s.get("Sid", "")).startswith(POLICY_SID_PREFIX)),
            key=lambda s: s["Sid"]))
    return state


def _normal_encryption(rule: dict[str, Any]) -> dict[str, Any]:
    default = dict(rule.get("ApplyServerSideEncryptionByDefault", {}))
    if default.get("SSEAlgorithm") != "aws:kms":
        default.pop("KMSMasterKeyID", None)
    return {"ApplyServerSideEncryptionByDefault": default,
            "BucketKeyEnabled": bool(rule.get("BucketKeyEnabled", False))}


def _normal_rule(rule: dict[str, Any]) -> dict[str, Any]:
    keep = ("ID", "Filter", "Status", "Expiration", "AbortIncompleteMultipartUpload",
            "NoncurrentVersionExpiration")
    normal = {k: rule[k] for k in keep if k in rule}
    if normal.get("Filter") == {}:  # some servers drop an empty prefix
        normal["Filter"] = {"Prefix": ""}
    return normal


def desired_state(target: BucketTarget) -> dict[str, str]:
    """Each setting of ``target`` as text."""
    return {
        "bucket": "present",
        "versioning": "Enabled" if target.versioning else "never enabled",
        "encryption": _text(_normal_encryption(target.encryption)),
        "public-access-block": _text(BLOCK_ALL_PUBLIC),
        "lifecycle": _text(sorted((_normal_rule(r) for r in target.lifecycle_rules),
                                  key=lambda r: r["ID"])),
        "bucket-policy": _text(sorted(target.policy_statements, key=lambda s: s["Sid"])),
    }


def downgrade_of(setting: str, current: str, desired: str) -> str:
    """What changing ``setting`` from ``current`` to ``desired`` would weaken ("": nothing)."""
    if current in (MISSING, UNKNOWN):
        return ""
    if setting == "versioning" and current == "Enabled" and desired != "Enabled":
        return "versioning would be suspended: overwritten and deleted objects no longer kept"
    if setting == "encryption":
        now = json.loads(current)["ApplyServerSideEncryptionByDefault"]
        wanted = json.loads(desired)["ApplyServerSideEncryptionByDefault"]
        if now.get("SSEAlgorithm") == "aws:kms" and wanted.get("SSEAlgorithm") != "aws:kms":
            return (f"default encryption with KMS key {now.get('KMSMasterKeyID')} would become "
                    f"{wanted.get('SSEAlgorithm')} (SSE-S3)")
    if setting == "bucket-policy":
        dropped = sorted({s["Sid"] for s in json.loads(current)}
                         - {s["Sid"] for s in json.loads(desired)})
        if dropped:
            return f"policy statements {', '.join(dropped)} would be removed"
    return ""


def plan(client: Any, settings: Settings) -> Plan:
    """Compare every bucket with the configuration; list the changes apply would make."""
    targets = targets_of(settings)
    changes = []
    for target in targets:
        current = current_state(client, target.name)
        for setting, wanted in desired_state(target).items():
            if setting == "versioning" and not target.versioning and current[setting] != "Enabled":
                continue  # never enabled and suspended both mean "off"
            if setting == "bucket-policy" and wanted == "[]" and current[setting] == MISSING:
                continue  # a new bucket has no policy, and none is wanted
            if setting == "versioning" and not target.versioning:
                wanted = "Suspended"  # what apply sets: a bucket's versioning cannot be unset
            if current[setting] != wanted:
                changes.append(Change(target.name, setting, current[setting], wanted,
                                      downgrade_of(setting, current[setting], wanted)))
    return Plan(targets, changes)


def _apply_change(client: Any, settings: Settings, target: BucketTarget, change: Change) -> None:
    bucket = target.name
    if change.setting == "bucket":
        arguments: dict[str, Any] = {"Bucket": bucket}
        if _region(settings) != "us-east-1":
            arguments["CreateBucketConfiguration"] = {"LocationConstraint": _region(settings)}
        client.create_bucket(**arguments)
    elif change.setting == "versioning":
        client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={
            "Status": "Enabled" if target.versioning else "Suspended"})
    elif change.setting == "encryption":
        client.put_bucket_encryption(Bucket=bucket, ServerSideEncryptionConfiguration={
            "Rules": [target.encryption]})
    elif change.setting == "public-access-block":
        client.put_public_access_block(Bucket=bucket,
                                       PublicAccessBlockConfiguration=dict(BLOCK_ALL_PUBLIC))
    elif change.setting == "lifecycle":
        existing = _read(lambda: client.get_bucket_lifecycle_configuration(Bucket=bucket),
                         {"NoSuchLifecycleConfiguration"})
        others = [] if isinstance(existing, str) else [
            r for r in existing.get("Rules", []) if r.get("ID") not in OUR_RULES]
        client.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={
            "Rules": others + [dict(r) for r in target.lifecycle_rules]})
    elif change.setting == "bucket-policy":
        found = _read(lambda: client.get_bucket_policy(Bucket=bucket), NO_POLICY_CODES)
        document: dict[str, Any] = ({"Version": "2012-10-17", "Statement": []}
                                    if isinstance(found, str) else json.loads(found["Policy"]))
        kept = [s for s in document.get("Statement", [])
                if not str(s.get("Sid", "")).startswith(POLICY_SID_PREFIX)]
        document["Statement"] = kept + [dict(s) for s in target.policy_statements]
        if document["Statement"]:
            client.put_bucket_policy(Bucket=bucket, Policy=json.dumps(document))
        elif not isinstance(found, str):  # only our statements were there, and none is wanted
            client.delete_bucket_policy(Bucket=bucket)
    else:  # pragma: no cover - SETTINGS is closed
        raise ProvisionError(f"unknown setting {change.setting}")


def apply(client: Any, settings: Settings, planned: Plan,
          allow_unsupported: bool = False, force: bool = False) -> ApplyResult:
    """Make the planned changes, in order; report those the server does not implement.

    A plan with downgrades is refused before anything changes, unless ``force``.
    """
    downgrades = [c for c in planned.changes if c.downgrade]
    if downgrades and not force:
        listed = "; ".join(f"{c.bucket} {c.setting}: {c.downgrade}" for c in downgrades)
        raise ProvisionError(f"apply would weaken what the buckets have: {listed}. Nothing was "
                             "changed; change the configuration, or --force to apply anyway")
    result = ApplyResult()
    targets = {t.name: t for t in planned.targets}
    for change in planned.changes:
        try:
            _apply_change(client, settings, targets[change.bucket], change)
        except Exception as exc:  # noqa: BLE001 - unsupported calls are collected, others raised
            if error_code(exc) not in UNSUPPORTED_CODES:
                raise ProvisionError(f"{change}: {exc}") from exc
            log.warning("%s: not implemented by this server", change)
            result.unsupported.append(change)
            continue
        log.info("applied %s", change)
        result.applied.append(change)
    if result.unsupported and not allow_unsupported:
        listed = "; ".join(f"{c.bucket} {c.setting}" for c in result.unsupported)
        raise ProvisionError(f"the server does not implement: {listed} (the other changes were "
                             "applied; --allow-unsupported accepts this for S3-compatible stores)")
    return result


def format_plan(planned: Plan) -> str:
    """The plan as a person reads it: buckets and what they hold, then each change."""
    lines = []
    for target in planned.targets:
        held = ", ".join(f"{role} {path}" for role, path in target.roles)
        lines.append(f"bucket {target.name}: {held}")
    if not planned.changes:
        lines.append("no changes: every bucket matches the configuration")
    for change in planned.changes:
        lines.append(f"  change {change}")
    if any(change.downgrade for change in planned.changes):
        lines.append("apply refuses the changes marked DOWNGRADE unless given --force")
    return "\n".join(lines)
