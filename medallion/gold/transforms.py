"""Pure transformations of the gold layer: windowed aggregates of silver events.

Each function takes the event-time watermark and returns a ``DataFrame -> DataFrame`` transform,
so that the same code runs on a stream (the job) and on a static frame (tests, recomputation).
Window bounds follow Spark's ``window`` and ``session_window``: a window is ``[start, end)``, and a
session ends at its last event plus the gap.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from medallion.tables import TOTAL_TYPE

Transform = Callable[[DataFrame], DataFrame]

SESSION_GAP = "5 minutes"


def _total(column: str) -> F.Column:
    return F.coalesce(F.sum(column), F.lit(0)).cast(TOTAL_TYPE)


def aggregate_event_counts_5m(watermark: str) -> Transform:
    """Events and amount per ``event_type`` in tumbling 5-minute windows."""

    def transform(events: DataFrame) -> DataFrame:
        return (
            events.withWatermark("timestamp", watermark)
            .groupBy(F.window("timestamp", "5 minutes").alias("window"), "event_type")
            .agg(F.count(F.lit(1)).alias("event_count"), _total("amount").alias("total_amount"))
            .select(F.col("window.start").alias("window_start"),
                    F.col("window.end").alias("window_end"),
                    "event_type", "event_count", "total_amount")
        )

    return transform


def aggregate_user_activity_sliding(watermark: str) -> Transform:
    """Events per ``user_id`` in 10-minute windows sliding every 5 minutes."""

    def transform(events: DataFrame) -> DataFrame:
        return (
            events.withWatermark("timestamp", watermark)
            .groupBy(F.window("timestamp", "10 minutes", "5 minutes").alias("window"), "user_id")
            .agg(F.count(F.lit(1)).alias("event_count"))
            .select(F.col("window.start").alias("window_start"),
                    F.col("window.end").alias("window_end"),
                    "user_id", "event_count")
        )

    return transform


def aggregate_user_sessions(watermark: str) -> Transform:
    """Sessions per ``user_id``: events closer than 5 minutes apart belong to one session."""

    def transform(events: DataFrame) -> DataFrame:
        return (
            events.withWatermark("timestamp", watermark)
            .groupBy(F.session_window("timestamp", SESSION_GAP).alias("session"), "user_id")
            .agg(F.count(F.lit(1)).alias("event_count"), _total("amount").alias("total_amount"))
            .select("user_id",
                    F.col("session.start").alias("session_start"),
                    F.col("session.end").alias("session_end"),
                    "event_count", "total_amount")
        )

    return transform


def aggregate_segment_revenue_1h(watermark: str) -> Transform:
    """Purchases and revenue per customer ``segment`` in tumbling 1-hour windows."""

    def transform(events: DataFrame) -> DataFrame:
        return (
            events.withWatermark("timestamp", watermark)
            .where(F.col("event_type") == "purchase")
            .groupBy(F.window("timestamp", "1 hour").alias("window"), "segment")
            .agg(F.count(F.lit(1)).alias("purchase_count"), _total("amount").alias("revenue"))
            .select(F.col("window.start").alias("window_start"),
                    F.col("window.end").alias("window_end"),
                    "segment", "purchase_count", "revenue")
        )

    return transform
