"""Monitoring rows for every micro-batch, ``medallion status``, and ``medallion maintain``."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from medallion.cli.main import main
from medallion.config.model import Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.io.tables import QUERY_PROGRESS, RUN_OUTCOMES
from medallion.ops.maintenance import RetentionError, check_retention, maintain
from medallion.ops.status import collect_status
from medallion.project import Settings, load_settings
from medallion.samples.generate import GenerateSpec, generate_landing
from tests.conf_support import copy_base_conf
from tests.conftest import REPO
from tests.events_tables import ALL_TABLES, SILVER_QUARANTINE
from tests.reference import Lakehouse, read_lines, read_segments

START = datetime(2025, 1, 27, 10, 0, tzinfo=timezone.utc)
STREAMED = ("bronze/events", "bronze/customers", "silver/events", "gold/event_counts_5m",
            "gold/user_activity_sliding", "gold/user_sessions", "gold/segment_revenue_1h",
            "gold/purchase_attribution")
# Declared after tables.py stopped naming tables: status lists it from the declaration.
# The second shipped pipeline (conf/pipelines/orders.yaml): no data here, so its flows are idle
# (a run records them) and its tables are not created.
ORDERS = ("bronze/orders", "bronze/products", "bronze/stores", "silver/order_lines",
          "gold/category_revenue_1h", "gold/store_sessions")
# The third (conf/pipelines/accounts.yaml): two change flows, each with its applied changes.
ACCOUNTS = ("bronze/account_changes", "silver/accounts", "silver/account_history")
DECLARED_ONLY = {"gold/purchase_attribution", *ORDERS, "silver/order_lines_quarantine", *ACCOUNTS,
                 *(f"silver/{name}_{part}" for name in ("accounts", "account_history")
                   for part in ("quarantine", "changes"))}


def committed_batches(settings: Settings, table: str) -> set[int]:
    """Batch ids the query's checkpoint says it committed (read from its files, not from Spark)."""
    commits = Path(settings.checkpoint_path(table)) / "commits"
    return {int(name) for name in os.listdir(commits) if name.isdigit()}


def test_every_batch_is_monitored_and_status_tells_where_tables_stand(
        spark: SparkSession, settings: Settings) -> None:
    # One file per micro-batch, so the queries run several batches.
    settings = dataclasses.replace(
        settings, streaming=dataclasses.replace(settings.streaming, max_files_per_trigger=1))
    written = generate_landing(Path(settings.paths.landing),
                               GenerateSpec(events=60, files=2, users=8, burst="m1", start=START,
                                            seconds_between_events=10, seed=3))
    lines = read_lines(p for p in written if p.suffix == ".json")
    model = Lakehouse()
    model.run(lines, read_segments(p for p in written if p.suffix == ".csv"))

    # One shuffle partition: silver writes a file per batch, so gold's one-file batches are few.
    shared = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    try:
        runs = {run.table: run for run in run_pipeline(spark, settings, RunTarget.ALL, Trigger())}
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", shared)

    progress = spark.read.format("delta").load(QUERY_PROGRESS.path(settings))
    recorded: dict[str, set[int]] = {}
    for row in progress.select("query_name", "batch_id").collect():
        recorded.setdefault(row["query_name"], set()).add(row["batch_id"])
    for table in STREAMED:
        expected = committed_batches(settings, table)
        assert len(expected) >= (2 if table == "bronze/events" else 1), table  # one file a batch
        assert recorded.get(table) == expected, table
    # One row per batch, not more, and the rows add up to the landing lines.
    assert progress.count() == sum(len(committed_batches(settings, t)) for t in STREAMED)
    bronze_in = progress.where("query_name = 'bronze/events'").agg({"num_input_rows": "sum"}).first()
    assert bronze_in[0] == len(lines)
    for table in STREAMED[3:]:
        dropped = progress.where(f"query_name = '{table}'").agg(
            {"rows_dropped_by_watermark": "sum"}).first()[0]
        assert dropped == runs[table].late_rows_dropped, table

    outcomes = spark.read.format("delta").load(RUN_OUTCOMES.path(settings)).collect()
    assert sorted(r["table"] for r in outcomes) == sorted(STREAMED + ORDERS + ACCOUNTS)
    assert all(r["succeeded"] and r["error"] is None for r in outcomes)
    assert {r["table"]: r["rows_in"] for r in outcomes}["bronze/events"] == len(lines)

    now = datetime(2025, 1, 27, 12, 0, tzinfo=timezone.utc)
    status = {s.table: s for s in collect_status(settings, now=now)}
    silver = status["silver/events"]
    newest = max(e.timestamp for e in model.silver.values()).replace(tzinfo=timezone.utc)
    assert silver.rows == len(model.silver)
    assert silver.newest_event == newest
    assert silver.lag_seconds == (now - newest).total_seconds()
    assert silver.last_run_succeeded is True
    counts = status["gold/event_counts_5m"]
    assert counts.rows == spark.read.format("delta").load(
        settings.table_path("gold", "event_counts_5m")).count()
    # The newest event is never behind the watermark: its 5-minute window is the newest one.
    assert counts.newest_event == newest - timedelta(minutes=newest.minute % 5,
                                                     seconds=newest.second,
                                                     microseconds=newest.microsecond) + timedelta(
        minutes=5)
    assert counts.state_bytes is None  # recomputed: no state
    sessions = status["gold/user_sessions"]
    assert sessions.state_rows is None  # the stores do not count their rows (state_store.count_rows)
    # Its state's size: what RocksDB holds after the last batch, so more than nothing and no more
    # than every SST file its checkpoint keeps (those of earlier versions too).
    kept = sum(f.stat().st_size for f in
               Path(settings.checkpoint_path("gold/user_sessions"), "state").rglob("*.sst"))
    assert 0 < sessions.state_bytes <= kept
    assert status["bronze/events"].state_bytes is None  # a query without state
    assert status["bronze/events"].rows == len(lines)
    # Every streamed table: versions as its Delta log says, the last run recorded.
    for table in STREAMED:
        log = Path(settings.table_path(*table.split("/"))) / "_delta_log"
        newest_version = max(int(p.stem) for p in log.glob("*.json"))
        assert status[table].version == newest_version, table
        assert status[table].last_run_succeeded is True, table
    assert {s.table for s in status.values()} == {spec.key for spec in ALL_TABLES} | DECLARED_ONLY


def test_vacuum_refuses_an_unsafe_retention(spark: SparkSession, settings: Settings,
                                            tmp_path: Path) -> None:
    with pytest.raises(RetentionError, match="7 days"):
        check_retention(167, allow_short=False)
    check_retention(168, allow_short=False)
    check_retention(0, allow_short=True)
    # The command refuses before Spark starts, even when the configuration asks for it.
    conf = tmp_path / "conf"
    copy_base_conf(conf)
    (conf / "local.yaml").write_text("maintenance:\n  vacuum_retention: 1 day\n")
    assert main(["maintain", "--conf-dir", str(conf), "--lakehouse", str(tmp_path / "lh")]) == 2
    assert main(["maintain", "--conf-dir", str(conf), "--lakehouse", str(tmp_path / "lh"),
                 "--retain-hours", "0"]) == 2

    # Three small appends: three small files.
    path = SILVER_QUARANTINE.path(settings)
    row = [("{", None, ["invalid_json"], "f.json", START)]
    for _ in range(3):
        spark.createDataFrame(row, SILVER_QUARANTINE.schema).coalesce(1).write.format(
            "delta").mode("append").save(path)
    folder = Path(path)
    assert len(list(folder.glob("*.parquet"))) == 3

    with pytest.raises(RetentionError):
        maintain(spark, settings, [SILVER_QUARANTINE.key], retention_hours=0)
    assert len(list(folder.glob("*.parquet"))) == 3  # nothing was touched

    tracker = spark.sparkContext.statusTracker()
    jobs_before = set(tracker.getJobIdsForGroup(None))
    result, = maintain(spark, settings, [SILVER_QUARANTINE.key], retention_hours=0,
                       allow_short_retention=True)
    stages = [tracker.getStageInfo(stage) for job in tracker.getJobIdsForGroup(None)
              if job not in jobs_before for stage in tracker.getJobInfo(job).stageIds]
    # Spark's listing parallelism of 10,000 made this VACUUM run 170,000 tasks (20-30 s).
    assert 0 < sum(stage.numTasks for stage in stages if stage) < 2_000
    assert (result.before.files, result.before.small_files) == (3, 3)
    assert (result.after.files, result.after.small_files) == (1, 1)
    assert result.files_deleted_by_vacuum == 3
    assert len(list(folder.glob("*.parquet"))) == 1
    assert spark.read.format("delta").load(path).count() == 3


def test_status_of_an_empty_lakehouse_says_not_created(settings: Settings) -> None:
    statuses = collect_status(settings, now=START + timedelta(hours=1))
    assert [s.exists for s in statuses] == [False] * (len(ALL_TABLES) + len(DECLARED_ONLY))


def test_maintain_prints_its_table_and_nothing_else(spark: SparkSession, settings: Settings) -> None:
    """``medallion maintain`` as a user runs it, without -v: its table on stdout, nothing on
    stderr (not Delta's line per VACUUMed table, nor the JVM's start-up notice)."""
    path = SILVER_QUARANTINE.path(settings)
    row = [("{", None, ["invalid_json"], "f.json", START)]
    for _ in range(2):
        spark.createDataFrame(row, SILVER_QUARANTINE.schema).coalesce(1).write.format(
            "delta").mode("append").save(path)
    done = subprocess.run(
        [sys.executable, "-m", "medallion.cli.main", "--landing", settings.paths.landing,
         "--lakehouse", settings.paths.lakehouse, "maintain", "--table", SILVER_QUARANTINE.key],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.splitlines() == []
    header, _, line = done.stdout.splitlines()
    assert header.split()[:2] == ["table", "files"]
    # files before, small before, files after, small after, vacuumed (the first files kept: the
    # default retention is 7 days)
    assert line.split()[:6] == [SILVER_QUARANTINE.key, "2", "2", "1", "1", "0"]


def _logged_clustering(table: Path) -> list[list[str]] | None:
    """The clustering columns the table's Delta log records last (its ``delta.clustering``
    domain), read from the commit files themselves; None when no commit records any."""
    found = None
    for commit in sorted((table / "_delta_log").glob("*.json")):
        for line in commit.read_text(encoding="utf-8").splitlines():
            action = json.loads(line)
            domain = action.get("domainMetadata")
            if domain and domain["domain"] == "delta.clustering":
                found = [] if domain.get("removed") else \
                    json.loads(domain["configuration"])["clusteringColumns"]
    return found


@pytest.mark.timeout(900)
def test_maintain_clusters_a_table_by_its_declared_columns_and_streams_carry_on(
        spark: SparkSession, tmp_path: Path) -> None:
    conf = copy_base_conf(tmp_path / "conf")
    (conf / "pipelines" / "events.yaml").unlink()
    (conf / "local.yaml").write_text("catalog:\n  metastore: in-memory\n", encoding="utf-8")
    overlay = conf / "pipelines" / "orders.local.yaml"
    landing, lakehouse = tmp_path / "landing", tmp_path / "lakehouse"
    shutil.copytree(REPO / "samples" / "landing", landing)

    def settings_now(cluster_by: str) -> Settings:
        overlay.write_text(f"silver:\n  order_lines:\n    cluster_by: {cluster_by}\n"
                           if cluster_by else "{}\n", encoding="utf-8")
        return load_settings(env="local", conf_dir=conf, landing=str(landing),
                             lakehouse=str(lakehouse))

    settings = settings_now("[store_id, ordered_at]")
    run_pipeline(spark, settings, RunTarget.ALL, Trigger(), monitor=False)
    table = lakehouse / "silver" / "order_lines"
    rows = sorted(spark.read.format("delta").load(str(table)).collect())
    assert _logged_clustering(table) is None  # a run does not cluster: maintenance does

    result, = maintain(spark, settings, ["silver/order_lines"])
    assert result.layout == "cluster by store_id,ordered_at"
    assert _logged_clustering(table) == [["store_id"], ["ordered_at"]]
    assert sorted(spark.read.format("delta").load(str(table)).collect()) == rows

    # The gold queries streaming from it carry on over the change of its layout.
    (landing / "orders" / "2026-03-05.csv").write_text(
        "order_id,line_no,store_id,sku,quantity,unit_price,order_date,order_time\n"
        "o50,1,s1,p1,2,10.00,2026-03-05,09:00:00\n", encoding="utf-8")
    runs = {run.table: run for run in run_pipeline(spark, settings, RunTarget.ALL, Trigger(),
                                                   monitor=False)}
    assert runs["gold/category_revenue_1h"].batches >= 1 and runs["gold/store_sessions"].batches
    assert spark.read.format("delta").load(str(table)).where("order_id = 'o50'").count() == 1

    # Other columns declared: reclustered by them; none: clustering taken off.
    result, = maintain(spark, settings_now("[city]"), ["silver/order_lines"])
    assert result.layout == "cluster by city"
    assert _logged_clustering(table) == [["city"]]
    result, = maintain(spark, settings_now(""), ["silver/order_lines"])
    assert result.layout == "-"
    assert _logged_clustering(table) == []
    assert spark.read.format("delta").load(str(table)).count() == len(rows) + 1
