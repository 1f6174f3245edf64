"""The progress listener's side that needs no Spark: rows, the JSON log line, backpressure."""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

import pytest
from pyspark.sql.streaming.listener import QueryProgressEvent

from medallion.engine.monitoring import BACKPRESSURE_BATCHES, ProgressCollector
from medallion.project import Settings, load_settings
from tests.conftest import REPO

QUERY_ID, RUN_ID = str(uuid.uuid4()), str(uuid.uuid4())


def event(batch: int, rows: int, rate_in: float, rate_done: float,
          dropped: int = 0) -> QueryProgressEvent:
    """A progress event shaped as Spark reports one of a stateful query (its JSON, parsed)."""
    state = {"operatorName": "stateStoreSave", "numRowsTotal": 40, "numRowsUpdated": 5,
             "numRowsRemoved": 1, "allUpdatesTimeMs": 3, "allRemovalsTimeMs": 0,
             "commitTimeMs": 12, "memoryUsedBytes": 2048, "numRowsDroppedByWatermark": dropped,
             "numShufflePartitions": 2, "numStateStoreInstances": 2, "customMetrics": {}}
    progress: dict[str, Any] = {
        "id": QUERY_ID, "runId": RUN_ID, "name": "gold/event_counts_5m",
        "timestamp": f"2025-01-27T10:0{batch}:00.000Z", "batchId": batch, "batchDuration": 1500,
        "numInputRows": rows, "inputRowsPerSecond": rate_in, "processedRowsPerSecond": rate_done,
        "durationMs": {"addBatch": 900, "triggerExecution": 1500},
        "eventTime": {"max": "2025-01-27T10:20:00.000Z", "watermark": "2025-01-27T10:10:00.000Z"},
        "stateOperators": [state, {**state, "operatorName": "dedupe"}],
        "sources": [{"description": "DeltaSource", "startOffset": None, "endOffset": None,
                     "latestOffset": None, "numInputRows": rows, "inputRowsPerSecond": rate_in,
                     "processedRowsPerSecond": rate_done, "metrics": {}}],
        "sink": {"description": "ForeachBatchSink", "numOutputRows": -1, "metrics": {}},
    }
    return QueryProgressEvent.fromJson({"progress": progress})


def settings_counting_rows(count_rows: bool) -> Settings:
    settings = load_settings(env="local", conf_dir=REPO / "conf", landing="/tmp/l", lakehouse="/tmp/h")
    return replace(settings, state_store=replace(settings.state_store, count_rows=count_rows))


@pytest.fixture
def collector() -> ProgressCollector:
    """A collector whose state stores count their rows."""
    return ProgressCollector(None, settings_counting_rows(True))  # type: ignore[arg-type]  # no flush


def test_state_rows_are_unknown_when_the_stores_do_not_count_them() -> None:
    """The default (``state_store.count_rows: false``): Spark reports 0 rows for every store,
    which is not a count; the row says null, and ``status`` shows '-'."""
    settings = load_settings(env="local", conf_dir=REPO / "conf", landing="/tmp/l", lakehouse="/tmp/h")
    assert settings.state_store.count_rows is False
    quiet = ProgressCollector(None, settings)  # type: ignore[arg-type]
    quiet.onQueryProgress(event(0, rows=10, rate_in=1.0, rate_done=1.0))
    assert quiet._rows[0]["state_rows"] is None
    counted = ProgressCollector(None, settings_counting_rows(True))  # type: ignore[arg-type]
    counted.onQueryProgress(event(0, rows=10, rate_in=1.0, rate_done=1.0))
    assert counted._rows[0]["state_rows"] == 80


def test_a_progress_report_becomes_one_row_and_one_json_log_line(
        collector: ProgressCollector, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="medallion.progress"):
        collector.onQueryProgress(event(3, rows=120, rate_in=60.0, rate_done=80.0, dropped=2))
    row, = collector._rows
    assert row["query_name"] == "gold/event_counts_5m"
    assert (row["query_id"], row["run_id"], row["batch_id"]) == (QUERY_ID, RUN_ID, 3)
    assert row["batch_timestamp"] == datetime(2025, 1, 27, 10, 3, tzinfo=timezone.utc)
    assert (row["num_input_rows"], row["input_rows_per_second"],
            row["processed_rows_per_second"]) == (120, 60.0, 80.0)
    assert (row["batch_duration_ms"], row["add_batch_ms"]) == (1500, 900)
    assert row["watermark"] == datetime(2025, 1, 27, 10, 10, tzinfo=timezone.utc)
    assert row["max_event_time"] == datetime(2025, 1, 27, 10, 20, tzinfo=timezone.utc)
    # Summed over the query's stateful operators.
    assert (row["state_rows"], row["state_memory_bytes"], row["rows_dropped_by_watermark"]) == \
        (80, 4096, 4)
    assert json.loads(row["progress_json"])["batchId"] == 3

    line, = [r.getMessage() for r in caplog.records if r.name == "medallion.progress"]
    logged = json.loads(line)  # one line of JSON, ready for a log shipper
    assert logged["event"] == "batch_progress" and logged["batch_id"] == 3
    assert logged["watermark"] == "2025-01-27T10:10:00+00:00"
    assert "progress_json" not in logged


def test_backpressure_is_reported_when_input_outruns_processing_batch_after_batch(
        collector: ProgressCollector, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="medallion.engine.monitoring"):
        for batch in range(BACKPRESSURE_BATCHES - 1):
            collector.onQueryProgress(event(batch, rows=500, rate_in=200.0, rate_done=50.0))
        collector.onQueryProgress(event(5, rows=500, rate_in=40.0, rate_done=50.0))  # caught up
        collector.onQueryProgress(event(6, rows=500, rate_in=200.0, rate_done=50.0))
        assert collector.backpressure == set()
        assert not [r for r in caplog.records if "backpressure" in r.getMessage()]

        for batch in range(7, 7 + BACKPRESSURE_BATCHES - 1):
            collector.onQueryProgress(event(batch, rows=500, rate_in=200.0, rate_done=50.0))
    assert collector.backpressure == {"gold/event_counts_5m"}
    warning = [r.getMessage() for r in caplog.records if "backpressure" in r.getMessage()][-1]
    assert "gold/event_counts_5m" in warning and "200.0 rows/s in" in warning


def test_an_empty_batch_is_not_backpressure(collector: ProgressCollector) -> None:
    for batch in range(BACKPRESSURE_BATCHES + 2):
        collector.onQueryProgress(event(batch, rows=0, rate_in=10.0, rate_done=0.0))
    assert collector.backpressure == set()
