"""gold/purchase_attribution, the stream-stream join, on its boundaries: the real gold job over
silver rows written by hand, in two runs (the second one's rows arrive after the watermark moved).

Each purchase gets the user's latest click or add_to_cart in the 30 minutes before it, both ends
included; a purchase without one gets nulls, but only once the watermark has passed it. Expected
rows are written out by hand.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from pyspark.sql import SparkSession

from medallion.config import Settings, Trigger
from medallion.runner import Layer, run_pipeline
from tests.events_tables import SILVER_EVENTS

TABLE = "gold/purchase_attribution"


def at(hms: str) -> datetime:
    return datetime.fromisoformat(f"2025-01-27T{hms}")


def land_silver(spark: SparkSession, settings: Settings,
                events: list[tuple[str, str, str, str]]) -> None:
    """Append (event_id, user_id, event_type, time) rows to silver/events, as one commit."""
    rows = [(event_id, user, kind, at(time), Decimal("10.5") if kind == "purchase" else None,
             None, "unknown", "hand", at("12:00:00")) for event_id, user, kind, time in events]
    (spark.createDataFrame(rows, SILVER_EVENTS.schema).write.format("delta").mode("append")
     .save(SILVER_EVENTS.path(settings)))


def attribution(spark: SparkSession, settings: Settings) -> dict[str, tuple[object, ...]]:
    run_pipeline(spark, settings, Layer.GOLD, Trigger(), monitor=False)
    rows = spark.read.format("delta").load(settings.table_path("gold", "purchase_attribution"))
    return {row["event_id"]: (row["attributed_event_id"], row["attributed_event_type"],
                              row["attributed_time"], row["delay_seconds"])
            for row in rows.collect()}


def matched(event_id: str, kind: str, time: str, delay: str) -> tuple[object, ...]:
    return (event_id, kind, at(time), Decimal(delay))


NONE = (None, None, None, None)


def test_each_purchase_gets_the_latest_event_of_the_30_minutes_before_it(
        spark: SparkSession, settings: Settings) -> None:
    land_silver(spark, settings, [
        ("a1", "a", "click", "10:00:00"), ("ap", "a", "purchase", "10:30:00"),  # exactly 30 min
        ("b1", "b", "click", "09:59:59.999"), ("bp", "b", "purchase", "10:30:00"),  # 1 ms early
        ("c1", "c", "click", "10:10:00"), ("c2", "c", "click", "10:20:00"),  # two: latest wins
        ("cp", "c", "purchase", "10:25:00"),
        ("dp", "d", "purchase", "10:05:00"), ("d1", "d", "click", "10:06:00"),  # click after it
        ("e1", "e", "add_to_cart", "10:35:00"), ("e2", "e", "view", "10:36:00"),  # views don't
        ("ep", "e", "purchase", "10:37:00"),
        ("gp", "g", "purchase", "10:40:00"),  # nothing at all
        ("x1", "x", "click", "10:30:00"),  # another user's click in range does not count
        ("fp", "f", "purchase", "10:55:00"),  # after the watermark (10:50): no row yet
        ("h1", "h", "click", "10:40:00"), ("hp", "h", "purchase", "10:58:00"),
        ("i2", "i", "click", "10:58:00"), ("ip", "i", "purchase", "10:59:00"),
        ("z1", "z", "view", "11:00:00"),  # the newest event: the watermark becomes 10:50
    ])
    first = attribution(spark, settings)
    assert first == {
        "ap": matched("a1", "click", "10:00:00", "1800"),
        "bp": NONE,
        "cp": matched("c2", "click", "10:20:00", "300"),
        "dp": NONE,
        "ep": matched("e1", "add_to_cart", "10:35:00", "120"),
        "gp": NONE,
        "hp": matched("h1", "click", "10:40:00", "1080"),
        "ip": matched("i2", "click", "10:58:00", "60"),
    }

    land_silver(spark, settings, [
        ("f1", "f", "click", "10:52:00"),  # late, but not behind the watermark: joins fp
        ("c3", "c", "click", "10:24:00"),  # behind the watermark: dropped, cp keeps c2
        ("h2", "h", "click", "10:57:00"),  # a later candidate for an open purchase: replaces h1
        ("i1", "i", "click", "10:51:00"),  # an earlier one: ip keeps i2
        ("z2", "z", "view", "11:30:00"),
    ])
    second = attribution(spark, settings)
    assert second == {
        **first,
        "fp": matched("f1", "click", "10:52:00", "180"),
        "hp": matched("h2", "click", "10:57:00", "60"),
    }
