"""``medallion report``: the page from hand-written monitoring rows, rendered in headless Chromium."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

from pyspark.sql import SparkSession

from medallion.io.tables import QUERY_PROGRESS, SILVER_BATCH_METRICS, TableSpec
from medallion.ops.report import write_report
from medallion.ops.report_check import find_chromium, render
from medallion.project import Settings
from tests.events_tables import GOLD_EVENT_COUNTS_5M

T0 = datetime(2025, 1, 27, 10, 0, tzinfo=timezone.utc)


def progress(name: str, batch: int, rows: int, rate: float, ms: int, dropped: int) -> dict:
    return {"query_name": name, "query_id": f"q-{name}", "run_id": f"r-{name}", "batch_id": batch,
            "batch_timestamp": T0 + timedelta(minutes=batch), "num_input_rows": rows,
            "input_rows_per_second": rate, "processed_rows_per_second": rate,
            "batch_duration_ms": ms, "add_batch_ms": ms // 2, "watermark": None,
            "max_event_time": None, "state_rows": 0, "state_memory_bytes": 0,
            "rows_dropped_by_watermark": dropped, "progress_json": "{}", "recorded_at": T0}


def test_report_shows_the_monitoring_tables_and_renders_in_chromium(
        spark: SparkSession, settings: Settings, tmp_path: Path) -> None:
    rows = [progress("bronze/events", 0, 100, 50.0, 2000, 0),
            progress("bronze/events", 1, 40, 20.0, 2000, 0),
            progress("bronze/events", 2, 0, 0.0, 10, 0),  # an empty batch is not plotted
            progress("gold/event_counts_5m", 0, 90, 30.0, 3000, 0),
            progress("gold/event_counts_5m", 1, 30, 10.0, 3000, 7)]
    spark.createDataFrame(rows, QUERY_PROGRESS.schema).write.format("delta").save(
        QUERY_PROGRESS.path(settings))
    spark.createDataFrame([("silver/events", "q", 0, 100, 5, 10, 85, T0),
                           ("silver/events", "q", 1, 40, 2, 0, 38, T0 + timedelta(minutes=1))],
                          SILVER_BATCH_METRICS.schema).write.format("delta").save(
        SILVER_BATCH_METRICS.path(settings))
    spark.createDataFrame([(T0, T0 + timedelta(minutes=5), "view", 12, Decimal("0")),
                           (T0 + timedelta(minutes=5), T0 + timedelta(minutes=10), "view", 8,
                            Decimal("0"))],
                          GOLD_EVENT_COUNTS_5M.schema).write.format("delta").save(
        GOLD_EVENT_COUNTS_5M.path(settings))
    # A gold table of the second pipeline (orders): charted from its declaration alone.
    revenue = TableSpec.from_decl(settings.declared_table("gold/category_revenue_1h")[1])
    spark.createDataFrame([(T0, T0 + timedelta(hours=1), "bakery", 3, 4, Decimal("9.50")),
                           (T0 + timedelta(minutes=30), T0 + timedelta(minutes=90), "bakery", 5, 6,
                            Decimal("12.00"))],
                          revenue.schema).write.format("delta").save(revenue.path(settings))

    page = write_report(settings, tmp_path / "report.html")
    text = page.read_text()
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "<script" not in text and "https://" not in text  # self-contained
    points = re.findall(r"<title>([^<]+)</title></circle>", text)
    # 2+2 throughput, 2+2 durations, 2+2 rates, 2 dropped, 2+2 gold windows
    assert len(points) == 18
    assert points.count("bronze/events: 50") == 1 and points.count("bronze/events: 20") == 1
    assert points.count("gold/event_counts_5m: 7") == 1  # rows dropped behind the watermark
    assert points.count("quarantined %: 5") == 2  # 5/100 and 2/40
    assert points.count("duplicates %: 10") == 1
    assert points.count("view: 12") == 1 and points.count("view: 8") == 1
    assert points.count("bakery: 3") == 1 and points.count("bakery: 5") == 1  # lines per window
    assert "gold/category_revenue_1h: lines per 1 hour windows every 30 minutes" in text

    assert find_chromium() is not None, "chromium is not installed: `make chromium` installs it"
    rendering = render(page, tmp_path / "report.png")
    assert rendering.page_errors == []
    assert rendering.dom.count("<svg") == 6  # the session table (orders) has no window axis
    assert "Rows dropped behind the watermark" in rendering.dom
    assert rendering.screenshot.stat().st_size > 10_000  # a picture, not an empty page
