"""The whole events pipeline with landing, tables and checkpoints on a real S3-compatible server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from medallion.config.model import Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.io.s3 import parse_s3, s3_client
from medallion.io.tables import undeclared_tables
from medallion.ops.infra.s3proxy import S3ProxyServer
from medallion.ops.landing import land_files
from medallion.spark.session import build_session
from tests.events_tables import ALL_TABLES, BRONZE_EVENTS, GOLD_EVENT_COUNTS_5M, SILVER_EVENTS
from tests.lakehouse_views import csv_lines
from tests.s3_support import S3SettingsFactory, table_rows
from tests.spark_free import run_without_spark


def _lines(files: list[Path], suffix: str) -> list[str]:
    return [line for f in files if f.suffix == suffix
            for line in f.read_text(encoding="utf-8").splitlines()]


# Two whole pipeline runs (the shared local reference, then S3); slow on a loaded machine.
@pytest.mark.timeout(1800)
def test_pipeline_on_s3_matches_the_local_run(
    s3_spark: SparkSession, s3_server: S3ProxyServer, s3_settings_factory: S3SettingsFactory,
    local_reference: tuple[list[Path], dict[str, list[tuple[Any, ...]]]], tmp_path: Path,
) -> None:
    files, expected = local_reference
    settings = s3_settings_factory()
    spark = build_session(settings, register_tables=False)
    assert spark is s3_spark  # one session: the factory re-pointed it at this lakehouse

    land_files(settings, [f for f in files if f.suffix == ".json"])  # events: the one *.json source
    land_files(settings, [f for f in files if f.suffix != ".json"], entity="customers")
    runs = run_pipeline(spark, settings, RunTarget.ALL, Trigger())

    assert {run.table for run in runs} >= {BRONZE_EVENTS.key, SILVER_EVENTS.key}
    actual = table_rows(spark, settings)
    assert actual.keys() == expected.keys()
    for table in expected:
        assert actual[table] == expected[table], table

    # Independent of the local run: every landing line is in bronze, once.
    event_lines = _lines(files, ".json")
    assert len(event_lines) == 300
    assert sorted(row[0] for row in actual[BRONZE_EVENTS.key]) == sorted(event_lines)

    # Everything really is on the server: tables, checkpoints and landing files as objects.
    lakehouse = parse_s3(settings.paths.lakehouse)
    on_disk = s3_server.data_dir / lakehouse.bucket / lakehouse.prefix
    for spec in ALL_TABLES:
        if spec.key not in expected:
            continue  # a table this configuration does not create (Kafka's bronze)
        log_dir = on_disk / (spec.folder or spec.layer) / spec.name / "_delta_log"
        commits = sorted(log_dir.glob("*.json"))
        assert commits, spec.key
        for commit in commits:
            for line in commit.read_text(encoding="utf-8").splitlines():
                json.loads(line)
    assert (on_disk / "_checkpoints" / "silver" / "events" / "offsets").is_dir()

    # A table left by a declaration that renamed it (here a copy of user_sessions' objects) is
    # found by listing the bucket, and `status` below says what it holds and that it is not declared.
    client = s3_client(settings.s3)
    old_key, new_key = lakehouse.key("gold", "user_sessions"), lakehouse.key("gold", "sessions_v0")
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=lakehouse.bucket,
                                                                   Prefix=old_key + "/"):
        for item in page.get("Contents", ()):
            client.copy_object(Bucket=lakehouse.bucket, Key=new_key + item["Key"][len(old_key):],
                               CopySource={"Bucket": lakehouse.bucket, "Key": item["Key"]})
    assert undeclared_tables(settings) == ["gold/sessions_v0"]

    # `medallion status` reads the same tables on the server through delta-rs, without Spark,
    # with the keys from the environment (the AWS provider chain), printing none of them.
    conf_dir = tmp_path / f"conf-{lakehouse.bucket.removesuffix('-lakehouse')}"
    done = run_without_spark(["status", "--env", "s3test", "--conf-dir", str(conf_dir)], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.spark_modules == [] and done.children == [], done
    status = {line.split()[0]: line.split() for line in done.stdout.splitlines()[2:]}
    for table in expected:  # table, version, date, time, rows, ...
        assert status[table][4] == str(len(expected[table])), (table, status[table])
        assert status[table][-1] in ("ok", "-"), (table, status[table])
    assert status["gold/sessions_v0"][4] == str(len(expected["gold/user_sessions"]))
    assert status["gold/sessions_v0"][-2:] == ["not", "declared"], status["gold/sessions_v0"]
    assert s3_server.secret_key not in done.stdout + done.stderr

    # `medallion sql`'s fast path reads the same tables on the server (delta-rs's object store
    # with the configured endpoint and the environment's keys): the rows Spark reads, now and at
    # the table's first version.
    counts = GOLD_EVENT_COUNTS_5M.path(settings)
    for statement, frame in (
            ("SELECT * FROM gold.event_counts_5m", spark.read.format("delta").load(counts)),
            ("SELECT * FROM gold.event_counts_5m VERSION AS OF 1",
             spark.read.format("delta").option("versionAsOf", 1).load(counts))):
        asked = run_without_spark(["sql", "--env", "s3test", "--conf-dir", str(conf_dir),
                                   "--format", "csv", "--limit", "0", statement], tmp_path)
        assert asked.returncode == 0, asked.stderr[-3000:]
        assert asked.spark_modules == [] and asked.children == [], asked
        header, *lines = asked.stdout.splitlines()
        assert (header, sorted(lines)) == csv_lines(frame), statement
        assert lines, statement
        assert s3_server.secret_key not in asked.stdout + asked.stderr
