"""Gold's aggregates on static frames, with events placed on window and session boundaries.

The transforms are compiled from ``conf/pipelines/events.yaml`` (the engine's own); the expected
rows are computed by hand.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from pyspark.sql import DataFrame, SparkSession
from pyspark.testing import assertDataFrameEqual

from medallion.engine.gold.compile import Transform, compile_gold
from medallion.pipeline.load import load_pipelines
from medallion.pipeline.validate import validate
from tests.conftest import REPO


def compiled(name: str) -> Transform:
    """The transform of ``gold/<name>`` as the engine compiles it from the events declaration."""
    events = next(p for p in load_pipelines(REPO / "conf", "local") if p.name == "events")
    validate(events)
    return compile_gold(events, next(g for g in events.gold if g.name == name))


def at(hms: str) -> datetime:
    """An instant on 2025-01-27, UTC, written ``HH:MM:SS.fff``."""
    return datetime.fromisoformat(f"2025-01-27T{hms}")


def events(spark: SparkSession, *rows: tuple[str, str, str, str | None, str]) -> DataFrame:
    """Silver events from ``(time, user_id, event_type, amount, segment)``."""
    return spark.createDataFrame(
        [(f"e{i}", user, kind, at(time), Decimal(amount) if amount else None, None, segment,
          "f.json", at("12:00:00"))
         for i, (time, user, kind, amount, segment) in enumerate(rows)],
        "event_id STRING, user_id STRING, event_type STRING, timestamp TIMESTAMP, "
        "amount DECIMAL(18,4), customer_name STRING, segment STRING, source_file STRING, "
        "ingested_at TIMESTAMP",
    )


def test_tumbling_5m_windows_are_closed_at_start_and_open_at_end(spark: SparkSession) -> None:
    silver = events(
        spark,
        ("10:00:00.000", "u1", "view", None, "smb"),
        ("10:04:59.999", "u2", "view", None, "smb"),
        ("10:05:00.000", "u1", "view", None, "smb"),
        ("10:04:00.000", "u1", "purchase", "10.25", "smb"),
        ("10:03:00.000", "u2", "purchase", "0.75", "smb"),
    )
    expected = spark.createDataFrame(
        [(at("10:00:00"), at("10:05:00"), "view", 2, Decimal("0")),
         (at("10:05:00"), at("10:10:00"), "view", 1, Decimal("0")),
         (at("10:00:00"), at("10:05:00"), "purchase", 2, Decimal("11.0000"))],
        "window_start TIMESTAMP, window_end TIMESTAMP, event_type STRING, event_count BIGINT, "
        "total_amount DECIMAL(28,4)",
    )
    assertDataFrameEqual(silver.transform(compiled("event_counts_5m")), expected)


def test_sliding_windows_count_each_event_twice(spark: SparkSession) -> None:
    silver = events(
        spark,
        ("10:02:00", "u1", "view", None, "smb"),
        ("10:05:00", "u1", "click", None, "smb"),
        ("10:09:59", "u2", "view", None, "smb"),
    )
    expected = spark.createDataFrame(
        [(at("09:55:00"), at("10:05:00"), "u1", 1),
         (at("10:00:00"), at("10:10:00"), "u1", 2),
         (at("10:05:00"), at("10:15:00"), "u1", 1),
         (at("10:00:00"), at("10:10:00"), "u2", 1),
         (at("10:05:00"), at("10:15:00"), "u2", 1)],
        "window_start TIMESTAMP, window_end TIMESTAMP, user_id STRING, event_count BIGINT",
    )
    assertDataFrameEqual(silver.transform(compiled("user_activity_sliding")), expected)


def test_sessions_end_at_the_last_event_plus_the_gap(spark: SparkSession) -> None:
    silver = events(
        spark,
        # u1: 10:00, then 10:05 exactly at the session's end (joins it), then 10:10:00.001 just
        # past the extended end 10:10 (a new session).
        ("10:00:00.000", "u1", "view", None, "smb"),
        ("10:05:00.000", "u1", "purchase", "5", "smb"),
        ("10:10:00.001", "u1", "view", None, "smb"),
        ("10:01:00.000", "u2", "view", None, "smb"),
    )
    expected = spark.createDataFrame(
        [("u1", at("10:00:00"), at("10:10:00"), 2, Decimal("5.0000")),
         ("u1", at("10:10:00.001"), at("10:15:00.001"), 1, Decimal("0")),
         ("u2", at("10:01:00"), at("10:06:00"), 1, Decimal("0"))],
        "user_id STRING, session_start TIMESTAMP, session_end TIMESTAMP, event_count BIGINT, "
        "total_amount DECIMAL(28,4)",
    )
    assertDataFrameEqual(silver.transform(compiled("user_sessions")), expected)


def test_segment_revenue_counts_purchases_only(spark: SparkSession) -> None:
    silver = events(
        spark,
        ("10:00:00", "u1", "purchase", "10", "smb"),
        ("10:59:59.999", "u2", "purchase", "2.5", "smb"),
        ("11:00:00", "u3", "purchase", "1", "unknown"),
        ("10:30:00", "u1", "view", None, "smb"),
        ("10:31:00", "u1", "add_to_cart", None, "enterprise"),
    )
    expected = spark.createDataFrame(
        [(at("10:00:00"), at("11:00:00"), "smb", 2, Decimal("12.5000")),
         (at("11:00:00"), at("12:00:00"), "unknown", 1, Decimal("1.0000"))],
        "window_start TIMESTAMP, window_end TIMESTAMP, segment STRING, purchase_count BIGINT, "
        "revenue DECIMAL(28,4)",
    )
    assertDataFrameEqual(silver.transform(compiled("segment_revenue_1h")), expected)
