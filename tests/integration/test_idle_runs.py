"""A run with nothing new starts no query and writes nothing; anything pending makes it start.

``medallion.engine.idle`` decides from checkpoint files and the input's listing; each case here is
checked against what Spark then does (a run that finds work processes rows).
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from medallion.config.model import Trigger
from medallion.engine.gold.job import gold_flows
from medallion.engine.idle import DeltaInput, FolderInput, FolderLook, nothing_new, skippable
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.project import Settings
from medallion.samples.generate import GenerateSpec, generate_landing
from tests.events_tables import BRONZE_EVENTS, SILVER_EVENTS


def _versions(settings: Settings) -> dict[str, int]:
    """The newest Delta version of every table folder of the lakehouse (monitoring included)."""
    root = Path(settings.paths.lakehouse)
    return {str(log.parent.relative_to(root)): max(int(p.stem) for p in log.glob("*.json"))
            for log in root.rglob("_delta_log")}


Inputs = DeltaInput | FolderInput | tuple[DeltaInput, ...]


def _inputs(spark: SparkSession, settings: Settings) -> dict[str, tuple[str, Inputs]]:
    """Each query's checkpoint and what it reads (a join: both its inputs, in order), looked at
    afresh."""
    events = str(Path(settings.paths.landing) / "events")
    checkpoint = BRONZE_EVENTS.checkpoint(settings)
    found: dict[str, tuple[str, Inputs]] = {
        BRONZE_EVENTS.key: (checkpoint, FolderInput(
            FolderLook(spark, events, checkpoint, settings.s3), "*.json")),
        SILVER_EVENTS.key: (SILVER_EVENTS.checkpoint(settings),
                            DeltaInput(BRONZE_EVENTS.path(settings))),
    }
    for flow in gold_flows(settings):
        if flow.pipeline.name != "events":
            continue  # the orders pipeline has no data here: its flows never start (below)
        found[flow.spec.key] = (flow.spec.checkpoint(settings),
                                tuple(DeltaInput(table.path(settings)) for table in flow.inputs))
    return found


def _idle(spark: SparkSession, settings: Settings) -> dict[str, bool]:
    return {table: nothing_new(spark, checkpoint, source)
            for table, (checkpoint, source) in _inputs(spark, settings).items()}


def _run(spark: SparkSession, settings: Settings) -> dict[str, int]:
    """Rows each table's query read in one run of every layer."""
    return {run.table: run.rows_in for run in run_pipeline(spark, settings, RunTarget.ALL, Trigger())}


def test_idle_run_starts_nothing_and_each_kind_of_pending_work_starts_its_query(
        spark: SparkSession, settings: Settings, tmp_path: Path) -> None:
    staging = tmp_path / "staging"
    generate_landing(staging, GenerateSpec(events=120, files=2, users=10, burst="i1", seed=4,
                                           seconds_between_events=20))
    landing = Path(settings.paths.landing)
    shutil.copytree(staging / "customers", landing / "customers")
    (landing / "events").mkdir(parents=True)
    shutil.copy(staging / "events" / "i1-0000.json", landing / "events")
    first = run_pipeline(spark, settings, RunTarget.ALL, Trigger())
    assert {run.table: run.rows_in for run in first}[BRONZE_EVENTS.key] > 0
    # A pipeline whose sources have landed nothing starts no query and creates no table.
    orders = [run for run in first if run.table.endswith(("orders", "products", "stores",
                                                          "order_lines", "category_revenue_1h",
                                                          "store_sessions"))]
    assert len(orders) == 6 and all(run.batches == 0 for run in orders), orders
    assert not (Path(settings.paths.lakehouse) / "bronze" / "orders").exists()
    assert not (Path(settings.paths.lakehouse) / "silver" / "order_lines").exists()

    # Nothing landed since: every query is idle, and a run writes no table at all (its record
    # included: the monitoring tables get no commit either).
    assert _idle(spark, settings) == dict.fromkeys(_inputs(spark, settings), True)
    before = _versions(settings)
    assert set(_run(spark, settings).values()) == {0}
    assert _versions(settings) == before

    # A new landing file: bronze has work; the layers below do not know it yet.
    shutil.copy(staging / "events" / "i1-0001.json", landing / "events")
    idle = _idle(spark, settings)
    assert idle[BRONZE_EVENTS.key] is False
    assert idle[SILVER_EVENTS.key] is True
    # bronze alone: now silver's input has a version silver has not read
    bronze_only = {run.table: run.rows_in for run in
                   run_pipeline(spark, settings, RunTarget.BRONZE, Trigger())}
    assert bronze_only[BRONZE_EVENTS.key] > 0
    assert _idle(spark, settings)[SILVER_EVENTS.key] is False
    after = _run(spark, settings)
    assert after[SILVER_EVENTS.key] == bronze_only[BRONZE_EVENTS.key]
    assert _idle(spark, settings) == dict.fromkeys(_inputs(spark, settings), True)

    # A batch planned and not committed (a run killed mid-batch) is replayed: not idle.
    silver_checkpoint = Path(SILVER_EVENTS.checkpoint(settings))
    commit = max((p for p in (silver_checkpoint / "commits").iterdir() if p.name.isdigit()),
                 key=lambda p: int(p.name))
    kept = commit.read_bytes()
    commit.unlink()
    assert _idle(spark, settings)[SILVER_EVENTS.key] is False
    commit.write_bytes(kept)
    assert _idle(spark, settings)[SILVER_EVENTS.key] is True

    # A watermark the last batch moved on but no batch has run with yet (a run killed between a
    # batch and the batch without data that closes windows): not idle.
    gold = gold_flows(settings)[0].spec
    commits = Path(gold.checkpoint(settings)) / "commits"
    last = max((p for p in commits.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    version, entry = last.read_text().split("\n", 1)
    moved = {**json.loads(entry), "nextBatchWatermarkMs": json.loads(entry)
             ["nextBatchWatermarkMs"] + 60_000}
    last.write_text(f"{version}\n{json.dumps(moved)}")
    (last.parent / f".{last.name}.crc").unlink(missing_ok=True)
    assert _idle(spark, settings)[gold.key] is False

    # A table that is not there (deleted, or never created) is not skipped, whatever the
    # checkpoint says: its query's start creates it or fails loudly.
    checkpoint, source = _inputs(spark, settings)[SILVER_EVENTS.key]
    assert skippable(spark, Trigger(), SILVER_EVENTS.path(settings), checkpoint, source)
    assert not skippable(spark, Trigger(), str(tmp_path / "nowhere"), checkpoint, source)
    # A service (processing-time trigger) always starts its queries.
    assert not skippable(spark, Trigger.parse("processing-time=1 minute"),
                         SILVER_EVENTS.path(settings), checkpoint, source)


def test_a_landing_zone_that_does_not_exist_is_warned_of(
        spark: SparkSession, settings: Settings, caplog: pytest.LogCaptureFixture) -> None:
    """A landing path given wrong (a typo in --landing) gave a summary of zeros at every run and
    no word: one source's folder may be missing before its first data, the whole zone not."""
    assert not Path(settings.paths.landing).exists()
    with caplog.at_level(logging.WARNING, logger="medallion.engine.bronze.job"):
        runs = run_pipeline(spark, settings, RunTarget.BRONZE, Trigger())
    assert all(run.batches == 0 for run in runs)
    assert [r.getMessage() for r in caplog.records] == [
        f"the landing zone {settings.paths.landing} does not exist: the file sources have nothing "
        f"to ingest (paths.landing in {settings.conf_dir}/<env>.yaml, --landing or "
        "$MEDALLION_LANDING)"]
    caplog.clear()
    (Path(settings.paths.landing) / "events").mkdir(parents=True)  # the zone, no data yet
    with caplog.at_level(logging.WARNING, logger="medallion.engine.bronze.job"):
        run_pipeline(spark, settings, RunTarget.BRONZE, Trigger())
    assert caplog.records == []
