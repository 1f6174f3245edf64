"""Quality gates inside the streaming writes: each severity, a fail and its rerun, the accounting.

The gates are the expectations the tables declare, set here by pipeline overlays
(``conf/pipelines/events.<env>.yaml``) as a user would. Landing lines are written by hand, so every
expected count below is counted by hand too.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from medallion.config.model import Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.engine.streaming import JobError
from medallion.io.sinks.delta import path_exists
from medallion.io.sources.delta import newest_table_version
from medallion.io.tables import QUALITY_RESULTS, SILVER_BATCH_METRICS, quarantine_of
from medallion.project import Settings, load_settings
from medallion.samples.generate import write_atomically
from tests.conf_support import REPO_CONF, copy_base_conf
from tests.conftest import make_settings
from tests.events_tables import (
    BRONZE_EVENTS,
    GOLD_EVENT_COUNTS_5M,
    GOLD_USER_SESSIONS,
    SILVER_EVENTS,
    SILVER_QUARANTINE,
)

NOW = Trigger.parse("available-now")


def _event(event_id: str, user: str, kind: str, ts: str, amount: float | None = None) -> str:
    return json.dumps({"event_id": event_id, "user_id": user, "event_type": kind,
                       "timestamp": ts, "amount": amount}, separators=(",", ":"))


def _land(settings: Settings, lines: list[str]) -> None:
    write_atomically(Path(settings.paths.landing) / "events" / "part-0000.json", lines)
    write_atomically(Path(settings.paths.landing) / "customers" / "customers.csv",
                     ["customer_id,customer_name,segment", "u0001,Ann,smb", "u0002,Bob,consumer"])


def _conf_with(tmp_path: Path, overlays: dict[str, str], pipeline_overlays: dict[str, str]) -> Path:
    """The repo's configuration with settings overlays ``<env>.yaml`` and events' pipeline
    overlays ``pipelines/events.<env>.yaml``."""
    conf = tmp_path / "conf"
    copy_base_conf(conf)
    for env, text in overlays.items():
        (conf / f"{env}.yaml").write_text(text, encoding="utf-8")
    for env, text in pipeline_overlays.items():
        (conf / "pipelines" / f"events.{env}.yaml").write_text(text, encoding="utf-8")
    return conf


def _rows(spark: SparkSession, path: str) -> int:
    return spark.read.format("delta").load(path).count()


def _results(spark: SparkSession, settings: Settings) -> set[tuple]:
    frame = spark.read.format("delta").load(QUALITY_RESULTS.path(settings))
    return {(r["table"], r["batch_id"], r["expectation"], r["severity"], r["success"],
             r["unexpected_count"]) for r in frame.collect()}


ONLY_THREE = """
silver:
  events:
    expectations:
      event_id_not_null: {enabled: false}
      event_id_unique: {enabled: false}
      user_id_not_null: {enabled: false}
      user_id_not_blank: {enabled: false}
      event_type_in_set: {enabled: false}
      timestamp_not_null: {enabled: false}
      amount_not_negative: {enabled: false}
      segment_not_null: {enabled: false}
      batch_size: {enabled: false}
      fresh_events: {enabled: false}
      user_format:
        expectation: expect_column_values_to_match_regex
        kwargs: {column: user_id, regex: '^u\\d{4}$'}
        severity: drop
      big_amount:
        expectation: expect_column_values_to_be_between
        kwargs: {column: amount, max_value: 1000}
        severity: warn
      unique_ids:
        expectation: expect_column_values_to_be_unique
        kwargs: {column: event_id}
        severity: fail
"""


def test_warn_records_drop_quarantines_and_the_accounting_holds(
        spark: SparkSession, settings: Settings, tmp_path: Path) -> None:
    line_e3 = _event("e3", "guest", "click", "2025-01-27T10:02:00Z")
    _land(settings, [
        _event("e1", "u0001", "view", "2025-01-27T10:00:00Z"),
        _event("e2", "u0002", "purchase", "2025-01-27T10:01:00Z", 10.5),
        _event("e2", "u0002", "purchase", "2025-01-27T10:01:00Z", 10.5),  # re-delivered
        line_e3,  # user_format: dropped
        _event("e4", "u0001", "purchase", "2025-01-27T10:03:00Z", 2000.0),  # big_amount: warned
        "not json at all",  # quarantined by parsing
    ])
    # silver/events gated by these three alone: its declared ones off, by name, and three added.
    conf = _conf_with(tmp_path, {}, {"local": ONLY_THREE})
    shutil.copy(REPO_CONF / "local.yaml", conf / "local.yaml")
    gated = load_settings(env="local", conf_dir=conf, landing=settings.paths.landing,
                          lakehouse=settings.paths.lakehouse)
    assert [e.name for e in gated.expectations_of("silver/events")] == [
        "user_format", "big_amount", "unique_ids"]
    run_pipeline(spark, gated, RunTarget.BRONZE, NOW)
    runs = run_pipeline(spark, gated, RunTarget.SILVER, NOW)

    silver = spark.read.format("delta").load(SILVER_EVENTS.path(gated))
    assert sorted(r["event_id"] for r in silver.collect()) == ["e1", "e2", "e4"]
    quarantine = {(r["raw"], tuple(r["reasons"])) for r in
                  spark.read.format("delta").load(SILVER_QUARANTINE.path(gated)).collect()}
    assert quarantine == {(line_e3, ("user_format",)), ("not json at all", ("invalid_json",))}
    assert _results(spark, gated) == {
        ("silver/events", 0, "user_format", "drop", False, 1),
        ("silver/events", 0, "big_amount", "warn", False, 1),
        ("silver/events", 0, "unique_ids", "fail", True, 0),
    }
    metrics = spark.read.format("delta").load(SILVER_BATCH_METRICS.path(gated)).first()
    assert metrics is not None
    assert (metrics["rows_in"], metrics["quarantined"], metrics["duplicates_removed"],
            metrics["rows_out"]) == (6, 2, 1, 3)
    # The invariant: bronze = silver + quarantine + duplicates removed.
    assert _rows(spark, BRONZE_EVENTS.path(gated)) == 6 == 3 + 2 + 1
    events = {run.table: run for run in runs}["silver/events"]
    assert events.quarantined == 2 and events.duplicates_removed == 1


AMOUNT_RULE = """
silver:
  events:
    expectations:
      amount_at_most:
        expectation: expect_column_values_to_be_between
        kwargs: {{column: amount, max_value: {limit}}}
        severity: fail
gold:
  event_counts_5m:
    expectations:
      few_events:
        expectation: expect_column_values_to_be_between
        kwargs: {{column: event_count, max_value: {gold_limit}}}
        severity: fail
  user_sessions:
    expectations:
      short_sessions:
        expectation: expect_column_values_to_be_between
        kwargs: {{column: event_count, max_value: 1}}
        severity: drop
"""


@pytest.mark.slow
def test_fail_commits_nothing_and_the_rerun_after_the_fix_commits_once(
        spark: SparkSession, tmp_path: Path) -> None:
    # Spark's in-memory catalog for the failing run's process: a catalog is not what it shows
    conf = _conf_with(tmp_path, {"failing": "catalog:\n  metastore: in-memory\n", "fixed": ""}, {
        "failing": AMOUNT_RULE.format(limit=1000, gold_limit=1),
        "fixed": AMOUNT_RULE.format(limit=100000, gold_limit=1000),
    })
    root = tmp_path / "data"
    base = make_settings(root)

    def settings_of(env: str) -> Settings:
        return load_settings(env=env, conf_dir=conf, landing=base.paths.landing,
                             lakehouse=base.paths.lakehouse)

    _land(base, [
        _event("e1", "u0001", "view", "2025-01-27T10:00:00Z"),
        _event("e2", "u0002", "purchase", "2025-01-27T10:01:00Z", 5000.0),
        _event("e3", "u0002", "view", "2025-01-27T10:02:00Z"),
        _event("e9", "u0001", "view", "2025-01-27T11:00:00Z"),  # moves the watermark on
    ])
    run_pipeline(spark, settings_of("failing"), RunTarget.BRONZE, NOW)

    # The failing rule, through the command line: non-zero exit, a message naming the table,
    # the expectation and what was observed, and no progress bars in the job's output.
    env = {**os.environ, "MEDALLION_ENV": "failing", "MEDALLION_CONF_DIR": str(conf),
           "MEDALLION_LANDING": base.paths.landing, "MEDALLION_LAKEHOUSE": base.paths.lakehouse,
           "SPARK_LOCAL_IP": "127.0.0.1"}
    command = [str(Path(sys.executable).parent / "medallion"), "run", "silver"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600,
                          cwd=tmp_path)
    assert done.returncode == 1, done.stderr[-3000:]
    message = next(line for line in done.stderr.splitlines()
                   if line.startswith("medallion: failed:"))
    assert message.startswith("medallion: failed: silver/events: quality gate failed on batch 0")
    assert "'amount_at_most'" in message and "1 of 4 rows unexpected (e.g. 5000.0)" in message
    for bar in ("Calculating Metrics", "it/s]", "[Stage "):
        assert bar not in done.stderr + done.stdout
    # Said once, in medallion's words: not followed by py4j's traceback of the batch function and
    # the JVM's stack traces of the failed query (about 90 lines; -v shows them).
    noise = [line for line in done.stderr.splitlines() if line.strip() and not re.match(
        r"\d{4}-\d\d-\d\d [\d:,]+ WARNING medallion[.\w]*: |medallion: failed: ", line)]
    assert noise == [], done.stderr[-3000:]

    silver_path = SILVER_EVENTS.path(base)
    checkpoint = SILVER_EVENTS.checkpoint(base)
    assert newest_table_version(spark, silver_path) == 0  # created empty, nothing committed
    assert newest_table_version(spark, SILVER_QUARANTINE.path(base)) == 0
    assert newest_table_version(spark, SILVER_BATCH_METRICS.path(base)) == 0
    assert not path_exists(spark, f"{checkpoint}/commits/0")
    assert ("silver/events", 0, "amount_at_most", "fail", False, 1) in _results(spark, base)

    # The rule is fixed: the same batch runs again and is committed once.
    fixed = settings_of("fixed")
    run_pipeline(spark, fixed, RunTarget.SILVER, NOW)
    assert _rows(spark, silver_path) == 4
    assert newest_table_version(spark, silver_path) == 1
    assert path_exists(spark, f"{checkpoint}/commits/0")
    passes = {r for r in _results(spark, base) if r[2] == "amount_at_most"}
    assert passes == {("silver/events", 0, "amount_at_most", "fail", False, 1),
                      ("silver/events", 0, "amount_at_most", "fail", True, 0)}
    run_pipeline(spark, fixed, RunTarget.SILVER, NOW)  # nothing new: nothing committed
    assert newest_table_version(spark, silver_path) == 1

    # Gold: the failing rule stops gold/event_counts_5m before its MERGE.
    with pytest.raises(JobError) as error:
        run_pipeline(spark, settings_of("failing"), RunTarget.GOLD, NOW)
    assert error.value.table == "gold/event_counts_5m"
    assert "'few_events'" in str(error.value) and "rows unexpected" in str(error.value)
    counts_path = GOLD_EVENT_COUNTS_5M.path(base)
    assert newest_table_version(spark, counts_path) == 0
    # Fixed: the windows are written once; sessions of more than one event go to quarantine.
    run_pipeline(spark, fixed, RunTarget.GOLD, NOW)
    counts = {(r["event_type"], r["event_count"]) for r in
              spark.read.format("delta").load(counts_path).collect()}
    assert counts == {("view", 2), ("purchase", 1), ("view", 1)}
    sessions = {(r["user_id"], r["event_count"]) for r in
                spark.read.format("delta").load(GOLD_USER_SESSIONS.path(base)).collect()}
    dropped = {(r["user_id"], r["event_count"], tuple(r["reasons"])) for r in spark.read.format(
        "delta").load(quarantine_of(GOLD_USER_SESSIONS).path(base)).collect()}
    # u0001: e1 (10:00) alone; u0002: e2 + e3 (10:01, 10:02) in one session of 2 events.
    assert sessions == {("u0001", 1)}
    assert dropped == {("u0002", 2, ("short_sessions",))}
