"""The monitoring tables' writes against a real session: a flush retried after a failure adds every
row once, however far its first attempt got."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from medallion.engine.monitoring import ProgressCollector, RunOutcome, _Flush
from medallion.io.tables import QUERY_PROGRESS, RUN_OUTCOMES
from tests.conftest import make_settings
from tests.unit.test_monitoring_listener import event

STARTED = datetime(2025, 1, 27, 10, 0, tzinfo=timezone.utc)


def outcome(table: str) -> RunOutcome:
    return RunOutcome(table, STARTED, STARTED, succeeded=True, rows_in=120, rows_out=40)


def test_a_flush_retried_after_its_first_table_landed_writes_each_row_once(
        spark: SparkSession, tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    progress, runs = QUERY_PROGRESS.path(settings), RUN_OUTCOMES.path(settings)
    collector = ProgressCollector(spark, settings, "availableNow")
    collector.onQueryProgress(event(0, rows=120, rate_in=60.0, rate_done=80.0))
    collector.onQueryProgress(event(1, rows=30, rate_in=60.0, rate_done=80.0))
    collector.record_outcome(outcome("gold/event_counts_5m"))

    # The runs table cannot be created (a file is where its folder goes): the flush fails after
    # the progress rows' commit has landed.
    Path(runs).parent.mkdir(parents=True)
    Path(runs).write_text("in the way")
    with pytest.raises(Exception):  # noqa: B017 (Delta's error, whatever its class)
        collector.flush()
    assert spark.read.format("delta").load(progress).count() == 2
    assert collector.pending() == 3  # kept for the retry

    Path(runs).unlink()
    assert collector.flush() == 2
    assert collector.pending() == 0
    rows = spark.read.format("delta").load(progress)
    assert sorted(r["batch_id"] for r in rows.collect()) == [0, 1]  # not appended again
    outcomes = spark.read.format("delta").load(runs).collect()
    assert [(r["pipeline_run"], r["table"], r["rows_in"]) for r in outcomes] == [
        (collector.pipeline_run, "gold/event_counts_5m", 120)]

    # The next flush is a new one: its rows are appended, under its own mark.
    collector.onQueryProgress(event(2, rows=10, rate_in=60.0, rate_done=80.0))
    collector.record_outcome(outcome("silver/events"))
    assert collector.flush() == 1
    assert sorted(r["batch_id"] for r in spark.read.format("delta").load(progress).collect()) == [
        0, 1, 2]
    assert spark.read.format("delta").load(runs).count() == 2


def test_a_flush_retried_after_all_its_commits_landed_adds_nothing(
        spark: SparkSession, tmp_path: Path) -> None:
    """The failure came after the last commit (say, the process lost the answer): the retry finds
    both marks and writes nothing, and the rows are not kept any longer."""
    settings = make_settings(tmp_path)
    progress, runs = QUERY_PROGRESS.path(settings), RUN_OUTCOMES.path(settings)
    collector = ProgressCollector(spark, settings, "availableNow")
    collector.onQueryProgress(event(0, rows=120, rate_in=60.0, rate_done=80.0))
    collector.record_outcome(outcome("gold/event_counts_5m"))
    rows, outcomes = list(collector._rows), list(collector._outcomes)
    assert collector.flush() == 1
    versions = [spark.sql(f"DESCRIBE HISTORY delta.`{path}`").count() for path in (progress, runs)]

    # The same flush again, as kept for a retry once it had failed after both commits (the
    # tables held no version before its first attempt).
    collector._unsent = _Flush(0, rows, outcomes, before={progress: -1, runs: -1})
    assert collector.flush() == 1
    assert [spark.sql(f"DESCRIBE HISTORY delta.`{path}`").count()
            for path in (progress, runs)] == versions  # no commit at all
    assert spark.read.format("delta").load(progress).count() == 1
    assert spark.read.format("delta").load(runs).count() == 1
    assert collector.pending() == 0
