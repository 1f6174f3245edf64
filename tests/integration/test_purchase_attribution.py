"""gold/purchase_attribution, the stream-stream join, on its boundaries: the real gold job over
silver rows written by hand, in two runs (the second one's rows arrive after the watermark moved).

Each purchase gets the user's latest click or add_to_cart in the 30 minutes before it, both ends
included; a purchase without one gets nulls, but only once the watermark has passed it. A click
that arrives behind the watermark still counts for a purchase the watermark has not passed. And a
checkpoint that Spark's own stream-stream join wrote (the engine's join until 2026-11-28) carries
on. Expected rows are written out by hand.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from pathlib import Path

from pyspark.sql import SparkSession

from medallion.config.model import Trigger
from medallion.engine.gold.job import UpsertWriter, flow_tables, gold_flows
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.io.sinks.delta import ensure_table
from medallion.io.sources.delta import read_table_stream
from medallion.project import Settings
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
    run_pipeline(spark, settings, RunTarget.GOLD, Trigger(), monitor=False)
    rows = spark.read.format("delta").load(settings.table_path("gold", "purchase_attribution"))
    return {row["event_id"]: (row["attributed_event_id"], row["attributed_event_type"],
                              row["attributed_time"], row["delay_seconds"])
            for row in rows.collect()}


def matched(event_id: str, kind: str, time: str, delay: str) -> tuple[object, ...]:
    return (event_id, kind, at(time), Decimal(delay))


NONE = (None, None, None, None)


FIRST_RUN = [
    ("a1", "a", "click", "10:00:00"), ("ap", "a", "purchase", "10:30:00"),  # exactly 30 min
    ("b1", "b", "click", "09:59:59.999"), ("bp", "b", "purchase", "10:30:00"),  # 1 ms early
    ("c1", "c", "click", "10:10:00"), ("c2", "c", "click", "10:20:00"),  # two: latest wins
    ("cp", "c", "purchase", "10:25:00"),
    ("dp", "d", "purchase", "10:05:00"), ("d1", "d", "click", "10:06:00"),  # click after it
    ("e1", "e", "add_to_cart", "10:35:00"), ("e2", "e", "view", "10:36:00"),  # views don't
    ("ep", "e", "purchase", "10:37:00"),
    ("gp", "g", "purchase", "10:40:00"),  # nothing at all
    ("x1", "x", "click", "10:30:00"),  # another user's click in range does not count
    ("fp", "f", "purchase", "10:55:00"),  # after the watermark (10:48): no row yet
    ("qp", "q", "purchase", "10:50:00"),  # after it too
    ("h1", "h", "click", "10:40:00"), ("hp", "h", "purchase", "10:58:00"),
    ("i2", "i", "click", "10:58:00"), ("ip", "i", "purchase", "10:59:00"),
    ("z1", "z", "view", "11:00:00"),  # views are filtered out before the watermarks
]
AFTER_FIRST = {
    "ap": matched("a1", "click", "10:00:00", "1800"),
    "bp": NONE,
    "cp": matched("c2", "click", "10:20:00", "300"),
    "dp": NONE,
    "ep": matched("e1", "add_to_cart", "10:35:00", "120"),
    "gp": NONE,
    "hp": matched("h1", "click", "10:40:00", "1080"),
    "ip": matched("i2", "click", "10:58:00", "60"),
}
SECOND_RUN = [
    ("f1", "f", "click", "10:52:00"),  # late, but not behind the watermark: joins fp
    ("c3", "c", "click", "10:24:00"),  # behind the watermark, as cp is: cp keeps c2
    ("q1", "q", "click", "10:30:00"),  # behind the watermark, qp is not: joins qp
    ("h2", "h", "click", "10:57:00"),  # a later candidate for an open purchase: replaces h1
    ("i1", "i", "click", "10:51:00"),  # an earlier one: ip keeps i2
    ("z2", "z", "view", "11:30:00"),
]
AFTER_SECOND = {
    **AFTER_FIRST,
    "fp": matched("f1", "click", "10:52:00", "180"),
    "hp": matched("h2", "click", "10:57:00", "60"),
    "qp": matched("q1", "click", "10:30:00", "1200"),
}


def test_each_purchase_gets_the_latest_event_of_the_30_minutes_before_it(
        spark: SparkSession, settings: Settings) -> None:
    land_silver(spark, settings, FIRST_RUN)
    assert attribution(spark, settings) == AFTER_FIRST
    land_silver(spark, settings, SECOND_RUN)
    assert attribution(spark, settings) == AFTER_SECOND


def _run_as_spark_joined(spark: SparkSession, settings: Settings) -> str:
    """One available-now run of the table as the engine ran it before 2026-11-28: Spark's
    stream-stream join of the two inputs, each watermarked, into the same writer; its checkpoint."""
    (flow,) = [flow for flow in gold_flows(settings) if flow.gold.join is not None]
    for table in flow_tables(settings, flow):
        ensure_table(spark, *table)
    checkpoint = flow.spec.checkpoint(settings)
    streams = [read_table_stream(spark, table.path(settings), 1000).withWatermark("timestamp",
                                                                                  "10 minutes")
               for table in flow.inputs]
    writer = UpsertWriter(flow.spec, flow.spec.path(settings), flow.merge_keys, checkpoint,
                          latest_by=flow.gold.latest_by, prune_by=flow.gold.prune_by)
    query = (flow.transform(*streams).writeStream.option("checkpointLocation", checkpoint)
             .outputMode("append").foreachBatch(writer).trigger(availableNow=True).start())
    query.awaitTermination()
    return checkpoint


def test_a_checkpoint_of_sparks_stream_stream_join_carries_on(
        spark: SparkSession, settings: Settings) -> None:
    land_silver(spark, settings, FIRST_RUN)
    checkpoint = _run_as_spark_joined(spark, settings)
    assert Path(checkpoint, "state", "0", "0", "left-keyToNumValues").is_dir()  # Spark's join state
    land_silver(spark, settings, SECOND_RUN)
    # The engine's batch starts from the watermark Spark's join had reached (10:48): c3 is
    # behind it, as cp is, and q1 joins qp, which Spark's join had kept open.
    assert attribution(spark, settings) == AFTER_SECOND
    assert Path(checkpoint, "join_clock").is_dir()


def test_matches_across_the_joins_time_buckets(spark: SparkSession, settings: Settings) -> None:
    """The join's state is keyed by user and a 2-hour time bucket (4 x 30 minutes, from the
    epoch: 12:00 starts one). A click before 12:00 still matches a purchase after it."""
    land_silver(spark, settings, [
        ("j1", "j", "click", "11:45:00"), ("jp", "j", "purchase", "12:05:00"),
        ("k1", "k", "click", "11:30:00"), ("kp", "k", "purchase", "12:00:00"),  # exactly 30 min
        ("l1", "l", "click", "11:29:59.999"), ("lp", "l", "purchase", "12:00:00"),  # 1 ms early
        ("m1", "m", "click", "11:50:00"),  # one click, a purchase in each bucket
        ("mp1", "m", "purchase", "11:55:00"), ("mp2", "m", "purchase", "12:10:00"),
        ("n1", "n", "add_to_cart", "12:00:00"), ("np", "n", "purchase", "12:00:00"),  # same instant
        ("o1", "o", "click", "09:59:00"), ("op", "o", "purchase", "10:01:00"),  # the 10:00 edge
        ("z1", "z", "click", "12:40:00"), ("zp", "z", "purchase", "12:41:00"),  # watermark 12:30
    ])
    assert attribution(spark, settings) == {
        "jp": matched("j1", "click", "11:45:00", "1200"),
        "kp": matched("k1", "click", "11:30:00", "1800"),
        "lp": NONE,
        "mp1": matched("m1", "click", "11:50:00", "300"),
        "mp2": matched("m1", "click", "11:50:00", "1200"),
        "np": matched("n1", "add_to_cart", "12:00:00", "0"),
        "op": matched("o1", "click", "09:59:00", "120"),
        "zp": matched("z1", "click", "12:40:00", "60"),
    }
