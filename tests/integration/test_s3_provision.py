"""Bucket provisioning against the real S3-compatible server: plan, apply, apply again.

S3Proxy (filesystem backend) implements bucket creation but answers 501 Not Implemented to
versioning, default encryption, public access block and lifecycle calls. Those four are checked
here as a plan only: the plan lists them, apply reports them as unsupported, and changes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from medallion.cli.main import main
from medallion.io.s3 import s3_client
from medallion.ops.infra.provision import ProvisionError, apply, plan
from medallion.ops.infra.s3proxy import S3ProxyServer
from tests.s3_support import S3SettingsFactory

SETTINGS_S3PROXY_LACKS = ["versioning", "encryption", "public-access-block", "lifecycle"]


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*"))}


def test_apply_twice_changes_nothing_the_second_time(
    s3_server: S3ProxyServer, s3_settings_factory: S3SettingsFactory,
    capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    settings = s3_settings_factory(create_buckets=False, landing_expiry_days=14)
    landing_bucket = settings.paths.landing.split("/")[2]
    lakehouse_bucket = settings.paths.lakehouse.split("/")[2]
    client = s3_client(settings.s3)

    dry_run = plan(client, settings)
    expected = [(bucket, setting) for bucket in (landing_bucket, lakehouse_bucket)
                for setting in ["bucket", *SETTINGS_S3PROXY_LACKS]]
    assert [(c.bucket, c.setting) for c in dry_run.changes] == expected
    assert all(c.current == "absent" for c in dry_run.changes)
    lifecycle = next(c for c in dry_run.changes
                     if c.bucket == landing_bucket and c.setting == "lifecycle")
    rules = {rule["ID"]: rule for rule in json.loads(lifecycle.desired)}
    assert rules["medallion-expire-landed-files"]["Filter"] == {"Prefix": "landing/"}
    assert rules["medallion-expire-landed-files"]["Expiration"] == {"Days": 14}
    assert [r["ID"] for r in json.loads(next(
        c for c in dry_run.changes if c.bucket == lakehouse_bucket and c.setting == "lifecycle"
    ).desired)] == ["medallion-abort-incomplete-uploads", "medallion-expire-noncurrent-versions"]
    # The dry run changed nothing.
    assert landing_bucket not in {b["Name"] for b in client.list_buckets()["Buckets"]}

    first = apply(client, settings, dry_run, allow_unsupported=True)
    # What apply did is exactly what the dry run said.
    assert sorted(first.applied + first.unsupported, key=str) == sorted(dry_run.changes, key=str)
    assert [(c.bucket, c.setting) for c in first.applied] == [
        (landing_bucket, "bucket"), (lakehouse_bucket, "bucket")]
    assert [(c.bucket, c.setting) for c in first.unsupported] == [
        (b, s) for b in (landing_bucket, lakehouse_bucket) for s in SETTINGS_S3PROXY_LACKS]
    assert {landing_bucket, lakehouse_bucket} <= {
        b["Name"] for b in client.list_buckets()["Buckets"]}

    before = _snapshot(s3_server.data_dir)
    second_plan = plan(client, settings)
    assert [(c.bucket, c.setting) for c in second_plan.changes] == [
        (b, s) for b in (landing_bucket, lakehouse_bucket) for s in SETTINGS_S3PROXY_LACKS]
    second = apply(client, settings, second_plan, allow_unsupported=True)
    assert second.applied == []
    assert _snapshot(s3_server.data_dir) == before

    # Without --allow-unsupported a missing feature is a failure, named.
    with pytest.raises(ProvisionError, match="versioning"):
        apply(client, settings, second_plan)

    # The command line prints the same plan and the job's policy, and applies the same way.
    conf_dir = str(tmp_path / f"conf-{landing_bucket.removesuffix('-landing')}")
    assert main(["infra", "plan", "--env", "s3test", "--conf-dir", conf_dir]) == 0
    printed = capsys.readouterr().out
    assert f"{landing_bucket}: lifecycle" in printed and "s3:ListBucket" in printed
    assert f"{landing_bucket}: bucket" not in printed
    assert main(["infra", "apply", "--env", "s3test", "--conf-dir", conf_dir]) == 1
    assert main(["infra", "apply", "--allow-unsupported", "--env", "s3test",
                 "--conf-dir", conf_dir]) == 0
    assert "applied 0 change(s)" in capsys.readouterr().out
    assert _snapshot(s3_server.data_dir) == before
