"""The whole ``events`` pipeline over two bursts of landing files, against an independent model,
with Spark's code generation on as in production (the rest of the suite evaluates interpreted)."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from medallion.config.model import Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.engine.streaming import TableRun
from medallion.io.tables import RUN_RECORDS
from medallion.project import Settings
from medallion.samples.generate import GenerateSpec, generate_landing, write_atomically
from tests.events_tables import ALL_TABLES
from tests.lakehouse_views import assert_matches_model, snapshot
from tests.reference import Lakehouse, read_lines, read_segments

START = datetime(2025, 1, 27, 10, 0, tzinfo=timezone.utc)


def table_versions(spark: SparkSession, settings: Settings) -> dict[str, int]:
    """The latest version of every table of the lakehouse (-1 for one that does not exist).

    The run records are left out: every run appends its own progress and outcome rows.
    """
    versions = {}
    for spec in ALL_TABLES:
        if spec in RUN_RECORDS:
            continue
        path = spec.path(settings)
        versions[spec.key] = (DeltaTable.forPath(spark, path).history(1).first()["version"]
                              if DeltaTable.isDeltaTable(spark, path) else -1)
    return versions


def state_stores(lakehouse: Path) -> dict[Path, int]:
    """Every RocksDB state store of the gold queries' checkpoints, with its newest version."""
    versions: dict[Path, set[int]] = {}
    for file in (lakehouse / "_checkpoints" / "gold").glob("*/state/**/*"):
        found = re.fullmatch(r"(\d+)\.(zip|changelog)", file.name)
        if found:
            versions.setdefault(file.parent, set()).add(int(found[1]))
    return {store: max(numbers) for store, numbers in versions.items()}


def by_table(runs: list[TableRun]) -> dict[str, TableRun]:
    return {run.table: run for run in runs}


# The gold tables that a run MERGEs into (their windows are updated in place).
MERGED = ("event_counts_5m", "user_activity_sliding", "segment_revenue_1h", "purchase_attribution")


def operations(spark: SparkSession, settings: Settings, name: str) -> list[str]:
    """The operation of each commit of ``gold/<name>`` after its creation, oldest first."""
    path = f"{settings.paths.lakehouse}/gold/{name}"
    history = DeltaTable.forPath(spark, path).history().where("version > 0").orderBy("version")
    return [row["operation"] for row in history.collect()]


def test_two_bursts_then_an_idle_run(codegen: SparkSession, settings: Settings) -> None:
    spark = codegen  # the independent check runs Spark's code generation, as production does
    landing = Path(settings.paths.landing)
    model = Lakehouse()

    # Burst 1: 20 minutes of events with duplicates, broken lines, late events and drift.
    first = GenerateSpec(events=400, files=2, users=25, burst="b1", start=START,
                         seconds_between_events=3, seed=11)
    written = generate_landing(landing, first)
    runs = by_table(run_pipeline(spark, settings, RunTarget.ALL, Trigger()))
    model.run(read_lines(p for p in written if p.suffix == ".json"),
              read_segments(p for p in written if p.suffix == ".csv"))
    assert model.quarantined > 0 and model.duplicates > 0  # the data exercises both paths
    assert_matches_model(spark, settings, model)
    assert runs["bronze/events"].rows_in == 400
    # A table's first rows are appended (a MERGE into an empty table inserts them all anyway).
    assert {name: operations(spark, settings, name)[0] for name in MERGED} == dict.fromkeys(
        MERGED, "WRITE")
    assert runs["silver/events"].quarantined == model.quarantined
    assert runs["silver/events"].duplicates_removed == model.duplicates

    # Burst 2: the next 20 minutes, plus re-deliveries of burst 1 and events far behind the
    # watermark: the recomputed windows count them, the sessions' stateful query drops them.
    second = GenerateSpec(events=400, files=2, users=25, burst="b2",
                          start=START + timedelta(minutes=20), seconds_between_events=3, seed=12)
    written2 = generate_landing(landing, second, with_customers=False)
    stragglers = [*read_lines(p for p in written if p.suffix == ".json")[:5]] + [
        json.dumps({"event_id": f"late-{i}", "user_id": "u0001", "event_type": "purchase",
                    "timestamp": (START + timedelta(minutes=1, seconds=i)).isoformat(),
                    "amount": 7.5})
        for i in range(3)
    ]
    write_atomically(landing / "events" / "b2-stragglers.json", stragglers)
    runs = by_table(run_pipeline(spark, settings, RunTarget.ALL, Trigger()))
    model.run(read_lines([*[p for p in written2 if p.suffix == ".json"],
                          landing / "events" / "b2-stragglers.json"]), {})
    assert model.late_dropped >= 3  # the stragglers, at least
    assert model.exact_event_counts_5m() != model.event_counts_5m()  # which change the windows
    assert_matches_model(spark, settings, model)
    assert runs["bronze/events"].rows_in == 408
    assert {name: operations(spark, settings, name)[-1] for name in MERGED} == dict.fromkeys(
        MERGED, "MERGE")

    # The stateful query's newest state is a snapshot, so the next run loads it as it is rather
    # than replaying a changelog per batch ever run (a cost that would grow with the history).
    # The recomputed windows and the join keep none: they read silver.
    stores = state_stores(Path(settings.paths.lakehouse))
    stateful = {store.relative_to(settings.paths.lakehouse).parts[2] for store in stores}
    assert stateful == {"user_sessions"}
    assert [store for store, newest in stores.items() if not (store / f"{newest}.zip").exists()] == []

    # The catalog names the tables for analysts.
    total = spark.sql("SELECT sum(event_count) AS n FROM gold.event_counts_5m").first()["n"]
    assert total == sum(count for *_, count, _ in model.exact_event_counts_5m())

    # A run with nothing new commits nothing anywhere.
    before = table_versions(spark, settings)
    frozen = snapshot(settings)
    runs = by_table(run_pipeline(spark, settings, RunTarget.ALL, Trigger()))
    assert table_versions(spark, settings) == before
    assert snapshot(settings) == frozen
    assert all(run.rows_in == 0 for run in runs.values())
