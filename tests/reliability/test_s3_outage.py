"""The S3 server stops in the middle of a run: a clear failure, no torn commit, a clean rerun."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from medallion.config.model import Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.engine.streaming import JobError
from medallion.io.s3 import parse_s3, s3_client
from medallion.io.tables import lakehouse_tables
from medallion.ops.infra.s3proxy import S3ProxyServer
from medallion.ops.landing import land_files
from medallion.spark.session import build_session
from tests.events_tables import BRONZE_EVENTS
from tests.s3_support import S3SettingsFactory, table_rows


def _assert_commits_whole(client: Any, bucket: str, prefix: str) -> int:
    """Every ``_delta_log`` commit an S3 client sees is whole JSON (a torn line does not parse)
    holding its commitInfo, and each table's versions run from 0 without a gap."""
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/")
    keys = [obj["Key"] for page in pages for obj in page.get("Contents", [])]
    commits: dict[str, list[int]] = {}
    for key in keys:
        folder, _, name = key.rpartition("/")
        if folder.endswith("/_delta_log") and re.fullmatch(r"\d{20}\.json", name):
            commits.setdefault(folder, []).append(int(name[:20]))
    checked = 0
    for folder, versions in commits.items():
        assert sorted(versions) == list(range(len(versions))), f"{folder}: versions {versions}"
        for version in versions:
            body = client.get_object(Bucket=bucket, Key=f"{folder}/{version:020d}.json")["Body"]
            actions = [json.loads(line) for line in body.read().decode("utf-8").splitlines()]
            assert any("commitInfo" in action for action in actions), f"{folder} v{version}"
            checked += 1
    return checked


@pytest.mark.slow
@pytest.mark.timeout(1800)  # two runs on S3 (one cut short); slow on a loaded machine
def test_server_stopped_mid_run_then_restarted(
    s3_spark: SparkSession, s3_server: S3ProxyServer, s3_settings_factory: S3SettingsFactory,
    local_reference: tuple[list[Path], dict[str, list[tuple[Any, ...]]]],
) -> None:
    files, expected = local_reference
    settings = s3_settings_factory()
    spark = build_session(settings, register_tables=False)
    land_files(settings, [f for f in files if f.suffix == ".json"])  # events: the one *.json source
    land_files(settings, [f for f in files if f.suffix != ".json"], entity="customers")
    lakehouse = parse_s3(settings.paths.lakehouse)
    lakehouse_dir = s3_server.data_dir / lakehouse.bucket / lakehouse.prefix
    first_bronze_commit = lakehouse_dir / "bronze" / "events" / "_delta_log" / f"{1:020d}.json"

    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["runs"] = run_pipeline(spark, settings, RunTarget.ALL, Trigger())
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            outcome["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    deadline = time.monotonic() + 600
    while not first_bronze_commit.exists() and worker.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert first_bronze_commit.exists(), "bronze never committed"
    s3_server.stop(kill=True)  # the store disappears while the run goes on
    worker.join(timeout=600)
    assert not worker.is_alive(), "the run hung instead of failing"

    error = outcome.get("error")
    assert isinstance(error, JobError), f"expected a JobError, got {outcome}"
    message = str(error)
    print(f"failure reported: {message}")  # shown by pytest -rP
    assert message.split(":")[0] in {spec.key for spec in lakehouse_tables(settings)} | {
        "bronze layer", "silver layer", "gold layer"}
    assert f"127.0.0.1:{s3_server.port}" in message or "Connection refused" in message, message

    s3_server.start()  # same port, same folder: the store is back with what it had
    client = s3_client(settings.s3)
    committed_before_rerun = _assert_commits_whole(client, lakehouse.bucket, lakehouse.prefix)
    assert committed_before_rerun >= 2  # bronze/events' creation and its first batch at least
    run_pipeline(spark, settings, RunTarget.ALL, Trigger())

    assert _assert_commits_whole(client, lakehouse.bucket, lakehouse.prefix) > \
        committed_before_rerun
    actual = table_rows(spark, settings)
    assert actual.keys() == expected.keys()
    for table in expected:
        assert actual[table] == expected[table], table
    lines = [line for f in files if f.suffix == ".json"
             for line in f.read_text(encoding="utf-8").splitlines()]
    assert sorted(row[0] for row in actual[BRONZE_EVENTS.key]) == sorted(lines)
