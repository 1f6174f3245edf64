"""A batch whose run died between its writes is replayed without writing anything twice.

A silver batch writes its metrics row, its quarantine rows and its quality results before its
table; a gold batch writes its quality results before its own write (an append of its first rows,
then MERGEs). Those earlier writes are blind
appends marked with the batch (``medallion.io.sinks.delta.BatchAppends``): the replay of the batch
finds the marks and skips them. Here a run dies right before the table's write (the write raises,
as a killed process would stop there), on a real session and real Delta tables; the next run
replays the batch, and every table equals those of one clean run over the same data.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

import medallion.engine.gold.job as gold_job
import medallion.engine.silver.job as silver_job
from medallion.config.model import Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.io.tables import QUALITY_RESULTS, SILVER_BATCH_METRICS
from medallion.project import Settings, load_settings
from medallion.samples.generate import GenerateSpec, generate_landing
from tests.conftest import REPO
from tests.events_tables import SILVER_EVENTS
from tests.lakehouse_views import rows, snapshot

pytestmark = pytest.mark.slow


def _lakehouse(root: Path, name: str) -> Settings:
    """A lakehouse of its own under ``root``, over the landing zone the tests share."""
    landing = root / "landing"
    if not landing.exists():
        # 200 events in one file: one batch per layer, with broken lines, duplicates, late events.
        generate_landing(landing, GenerateSpec(events=200, files=1, users=20, burst="replay",
                                               seconds_between_events=10, seed=11))
    return load_settings(env="local", conf_dir=REPO / "conf", landing=str(landing),
                         lakehouse=str(root / name))


def _run(spark: SparkSession, settings: Settings, layer: RunTarget) -> None:
    run_pipeline(spark, settings, layer, Trigger(), monitor=False)


def _dies(*_: Any, **__: Any) -> None:
    raise RuntimeError("the run died right before the table's write")


def _batch_records(spark: SparkSession, settings: Settings) -> dict[str, Counter]:
    """The per-batch records, without the columns a run makes its own (ids, times, JSON)."""
    return {
        "metrics": Counter(rows(spark, settings, SILVER_BATCH_METRICS, "table", "batch_id",
                                "rows_in", "quarantined", "duplicates_removed", "rows_out")),
        "results": Counter(rows(spark, settings, QUALITY_RESULTS, "table", "batch_id",
                                "expectation", "success", "unexpected_count", "element_count")),
    }


def test_batches_replayed_after_their_first_writes_landed_write_each_row_once(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reference = _lakehouse(tmp_path, "reference")
    _run(spark, reference, RunTarget.ALL)
    expected_tables, expected_records = snapshot(reference), _batch_records(spark, reference)
    assert expected_tables["silver/events_quarantine"], "the data has quarantined lines"
    assert {r[0] for r in expected_records["results"]} >= {"silver/events",
                                                           "gold/event_counts_5m"}

    settings = _lakehouse(tmp_path, "replayed")
    _run(spark, settings, RunTarget.BRONZE)
    with monkeypatch.context() as patch:
        patch.setattr(silver_job, "append_batch", _dies)
        with pytest.raises(Exception, match="silver/events: RuntimeError: the run died right before"):
            _run(spark, settings, RunTarget.SILVER)
    died = _batch_records(spark, settings)
    assert died["metrics"] == expected_records["metrics"], "the metrics row landed before"
    assert any(table == SILVER_EVENTS.key for table, *_ in died["results"]), (
        "silver's quality results landed before")
    assert not rows(spark, settings, SILVER_EVENTS), "the table's write did not"

    _run(spark, settings, RunTarget.SILVER)  # replays the batch
    with monkeypatch.context() as patch:
        # A gold table's first rows are appended, later ones MERGEd: both writes die.
        patch.setattr(gold_job, "upsert_batch", _dies)
        patch.setattr(gold_job, "append_batch", _dies)
        with pytest.raises(Exception, match="gold/[a-z_0-9]+: RuntimeError: the run died right before"):
            _run(spark, settings, RunTarget.GOLD)
    _run(spark, settings, RunTarget.GOLD)  # replays each table's batch

    assert snapshot(settings) == expected_tables
    assert _batch_records(spark, settings) == expected_records
