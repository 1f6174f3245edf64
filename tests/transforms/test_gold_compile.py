"""Gold compiled from declarations: window kinds, filter, aggregates, the Python step, a second
pipeline, and the proof that ``events``' compiled tables equal the hand-written transforms they
replace.

Expected rows are written out by hand, with events on window and session boundaries.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual, assertSchemaEqual

from medallion.engine.gold.compile import compile_gold
from medallion.pipeline.kinds import AggregateFunction, OutputMode, WindowKind
from medallion.pipeline.load import load_pipelines
from medallion.pipeline.model import AggregateSpec, Field, GoldSpec, WindowSpec
from medallion.pipeline.spec import PipelineSpec
from medallion.pipeline.types import parse_type
from medallion.pipeline.validate import validate
from tests.conftest import REPO
from tests.events_tables import (
    GOLD_EVENT_COUNTS_5M,
    GOLD_SEGMENT_REVENUE_1H,
    GOLD_USER_ACTIVITY_SLIDING,
    GOLD_USER_SESSIONS,
)

FIXTURES = Path(__file__).resolve().parents[1] / "unit" / "pipeline_fixtures"
SILVER_DDL = ("event_id STRING, user_id STRING, event_type STRING, timestamp TIMESTAMP, "
              "amount DECIMAL(18,4), customer_name STRING, segment STRING, source_file STRING, "
              "ingested_at TIMESTAMP")


@pytest.fixture(scope="module")
def events() -> PipelineSpec:
    spec = next(p for p in load_pipelines(REPO / "conf", "local") if p.name == "events")
    validate(spec)
    return spec


@pytest.fixture(scope="module")
def orders() -> PipelineSpec:
    (spec,) = load_pipelines(FIXTURES, "local")
    validate(spec)
    return spec


def at(hms: str) -> datetime:
    """An instant on 2025-01-27, UTC, written ``HH:MM:SS.fff``."""
    return datetime.fromisoformat(f"2025-01-27T{hms}")


def silver(spark: SparkSession, *rows: tuple[str, str, str, str | None, str | None]) -> DataFrame:
    """silver/events rows from ``(time, user_id, event_type, amount, segment)``."""
    return spark.createDataFrame(
        [(f"e{i}", user, kind, at(time), Decimal(amount) if amount else None, None, segment,
          "f.json", at("12:00:00")) for i, (time, user, kind, amount, segment) in enumerate(rows)],
        SILVER_DDL)


def order_lines(spark: SparkSession,
                *rows: tuple[str, int, str, int, str | None, str, str, str]) -> DataFrame:
    """silver/order_lines rows of the orders fixture from
    ``(order_id, line_no, store_id, quantity, unit_price, time, category, city)``."""
    return spark.createDataFrame(
        [(order, line, store, f"k{line}", quantity, Decimal(price) if price else None, at(time),
          "product", category, city, "f.csv", at("12:00:00"))
         for order, line, store, quantity, price, time, category, city in rows],
        "order_id STRING, line_no INT, store_id STRING, sku STRING, quantity INT, "
        "unit_price DECIMAL(10,2), ordered_at TIMESTAMP, product_name STRING, category STRING, "
        "city STRING, source_file STRING, ingested_at TIMESTAMP")


def gold(pipeline: PipelineSpec, name: str) -> GoldSpec:
    return next(g for g in pipeline.gold if g.name == name)


def with_gold(pipeline: PipelineSpec, changed: GoldSpec) -> PipelineSpec:
    """``pipeline`` with one gold table replaced, checked again (derived columns and types)."""
    spec = dataclasses.replace(
        pipeline, gold=tuple(changed if g.name == changed.name else g for g in pipeline.gold))
    validate(spec)
    return spec


# --- hand-written gold transforms, the independent reference of the equality proof below ---

def _total(column: str) -> F.Column:
    return F.coalesce(F.sum(column), F.lit(0)).cast("DECIMAL(28,4)")


def handwritten_event_counts_5m(events: DataFrame) -> DataFrame:
    return (events.withWatermark("timestamp", "10 minutes")
            .groupBy(F.window("timestamp", "5 minutes").alias("window"), "event_type")
            .agg(F.count(F.lit(1)).alias("event_count"), _total("amount").alias("total_amount"))
            .select(F.col("window.start").alias("window_start"),
                    F.col("window.end").alias("window_end"),
                    "event_type", "event_count", "total_amount"))


def handwritten_user_activity_sliding(events: DataFrame) -> DataFrame:
    return (events.withWatermark("timestamp", "10 minutes")
            .groupBy(F.window("timestamp", "10 minutes", "5 minutes").alias("window"), "user_id")
            .agg(F.count(F.lit(1)).alias("event_count"))
            .select(F.col("window.start").alias("window_start"),
                    F.col("window.end").alias("window_end"),
                    "user_id", "event_count"))


def handwritten_user_sessions(events: DataFrame) -> DataFrame:
    return (events.withWatermark("timestamp", "10 minutes")
            .groupBy(F.session_window("timestamp", "5 minutes").alias("session"), "user_id")
            .agg(F.count(F.lit(1)).alias("event_count"), _total("amount").alias("total_amount"))
            .select("user_id",
                    F.col("session.start").alias("session_start"),
                    F.col("session.end").alias("session_end"),
                    "event_count", "total_amount"))


def handwritten_segment_revenue_1h(events: DataFrame) -> DataFrame:
    return (events.withWatermark("timestamp", "10 minutes")
            .where(F.col("event_type") == "purchase")
            .groupBy(F.window("timestamp", "1 hour").alias("window"), "segment")
            .agg(F.count(F.lit(1)).alias("purchase_count"), _total("amount").alias("revenue"))
            .select(F.col("window.start").alias("window_start"),
                    F.col("window.end").alias("window_end"),
                    "segment", "purchase_count", "revenue"))


HANDWRITTEN = {
    "event_counts_5m": (handwritten_event_counts_5m, GOLD_EVENT_COUNTS_5M),
    "user_activity_sliding": (handwritten_user_activity_sliding, GOLD_USER_ACTIVITY_SLIDING),
    "user_sessions": (handwritten_user_sessions, GOLD_USER_SESSIONS),
    "segment_revenue_1h": (handwritten_segment_revenue_1h, GOLD_SEGMENT_REVENUE_1H),
}


@pytest.mark.parametrize("name", list(HANDWRITTEN))
def test_events_compiled_gold_equals_the_handwritten_transform(
        spark: SparkSession, events: PipelineSpec, name: str) -> None:
    rows = silver(
        spark,
        ("10:00:00.000", "u1", "view", None, "smb"),
        ("10:04:59.999", "u1", "purchase", "10.25", "smb"),
        ("10:05:00.000", "u1", "purchase", "0.0001", "smb"),
        ("10:09:59.999", "u2", "click", None, "enterprise"),
        ("10:10:00.000", "u2", "purchase", "99999999999999.9999", "enterprise"),
        ("10:14:59.999", "u2", "add_to_cart", None, "enterprise"),
        ("10:59:59.999", "u3", "purchase", "2.5", "unknown"),
        ("11:00:00.000", "u3", "purchase", None, "unknown"),
        ("11:00:00.000", "u1", "view", None, "smb"),
        ("11:05:00.000", "u1", "view", "3", "smb"),
        ("09:58:00.000", "u4", "purchase", "1", None),
    )
    handwritten, table = HANDWRITTEN[name]
    expected = rows.transform(handwritten)
    compiled = rows.transform(compile_gold(events, gold(events, name)))
    assertSchemaEqual(compiled.schema, expected.schema)
    assert compiled.schema.simpleString() == expected.schema.simpleString()
    assert [f.name for f in compiled.schema] == table.column_names  # the table's own order
    assertDataFrameEqual(compiled, expected)
    assert compiled.count() > 3  # the data reaches several windows, not one


def test_tumbling_window_over_another_column_with_count_of_values(
        spark: SparkSession, events: PipelineSpec) -> None:
    changed = dataclasses.replace(
        gold(events, "event_counts_5m"),
        window=WindowSpec(WindowKind.TUMBLING, "ingested_at", size="1 hour"),
        group_by=("segment",),
        aggregates=(AggregateSpec("rows", AggregateFunction.COUNT),
                    AggregateSpec("with_amount", AggregateFunction.COUNT, "amount")),
        doc=dataclasses.replace(gold(events, "event_counts_5m").doc, column_comments={},
                                expectations=()))
    spec = with_gold(events, changed)
    rows = silver(spark, ("10:00:00", "u1", "view", None, "smb"),
                  ("10:01:00", "u1", "purchase", "1", "smb"),
                  ("10:02:00", "u2", "purchase", "2", "enterprise"))
    expected = spark.createDataFrame(
        [(at("12:00:00"), at("13:00:00"), "smb", 2, 1),
         (at("12:00:00"), at("13:00:00"), "enterprise", 1, 1)],
        "window_start TIMESTAMP, window_end TIMESTAMP, segment STRING, rows BIGINT, "
        "with_amount BIGINT")
    assertDataFrameEqual(rows.transform(compile_gold(spec, changed)), expected)


def _doc_free(spec: GoldSpec, **changes: object) -> GoldSpec:
    """``spec`` changed, without the comments and expectations that name its former columns."""
    return dataclasses.replace(spec, doc=dataclasses.replace(spec.doc, column_comments={},
                                                             expectations=()), **changes)


def test_each_aggregate_with_and_without_default(spark: SparkSession, events: PipelineSpec) -> None:
    changed = _doc_free(
        gold(events, "event_counts_5m"),
        filter="user_id <> 'u9'",
        aggregates=(
            AggregateSpec("total", AggregateFunction.SUM, "amount"),
            AggregateSpec("total_or_zero", AggregateFunction.SUM, "amount", default=0),
            AggregateSpec("smallest", AggregateFunction.MIN, "amount", default=-1),
            AggregateSpec("largest", AggregateFunction.MAX, "amount"),
            AggregateSpec("first_seen", AggregateFunction.MIN, "timestamp"),
            AggregateSpec("mean", AggregateFunction.AVG, "amount"),
            AggregateSpec("users", AggregateFunction.COUNT_DISTINCT, "user_id"),
            AggregateSpec("users_approx", AggregateFunction.APPROX_COUNT_DISTINCT, "user_id"),
            AggregateSpec("segments", AggregateFunction.COUNT_DISTINCT, "segment"),
        ))
    spec = with_gold(events, changed)
    rows = silver(spark,
                  ("10:00:00", "u1", "view", "1.5", "smb"),
                  ("10:01:00", "u1", "view", "2", None),
                  ("10:02:00", "u2", "view", None, "smb"),
                  ("10:03:00", "u9", "view", "1000", "vip"),  # filtered out
                  ("10:05:00", "u3", "click", None, None))  # a window with no amount
    expected = spark.createDataFrame(
        [(at("10:00:00"), at("10:05:00"), "view", Decimal("3.5"), Decimal("3.5"), Decimal("1.5"),
          Decimal("2"), at("10:00:00"), Decimal("1.75"), 2, 2, 1),
         (at("10:05:00"), at("10:10:00"), "click", None, Decimal("0"), Decimal("-1"), None,
          at("10:05:00"), None, 1, 1, 0)],
        "window_start TIMESTAMP, window_end TIMESTAMP, event_type STRING, total DECIMAL(28,4), "
        "total_or_zero DECIMAL(28,4), smallest DECIMAL(18,4), largest DECIMAL(18,4), "
        "first_seen TIMESTAMP, mean DECIMAL(22,8), users BIGINT, users_approx BIGINT, "
        "segments BIGINT")
    actual = rows.transform(compile_gold(spec, changed))
    assert actual.schema.simpleString() == expected.schema.simpleString()
    assertDataFrameEqual(actual, expected)


def test_sliding_windows_in_append_mode_and_a_filter(spark: SparkSession, events: PipelineSpec) -> None:
    changed = _doc_free(gold(events, "user_activity_sliding"), mode=OutputMode.APPEND,
                        filter="event_type IN ('view', 'click')",
                        window=WindowSpec(WindowKind.SLIDING, "timestamp", size="10 minutes",
                                          slide="5 minutes"))
    spec = with_gold(events, changed)
    rows = silver(spark, ("10:04:59.999", "u1", "view", None, "smb"),
                  ("10:05:00.000", "u1", "click", None, "smb"),
                  ("10:06:00.000", "u1", "purchase", "1", "smb"))
    expected = spark.createDataFrame(
        [(at("09:55:00"), at("10:05:00"), "u1", 1),
         (at("10:00:00"), at("10:10:00"), "u1", 2),
         (at("10:05:00"), at("10:15:00"), "u1", 1)],
        "window_start TIMESTAMP, window_end TIMESTAMP, user_id STRING, event_count BIGINT")
    assertDataFrameEqual(rows.transform(compile_gold(spec, changed)), expected)


def test_session_windows_group_by_several_columns(spark: SparkSession, events: PipelineSpec) -> None:
    changed = _doc_free(gold(events, "user_sessions"), group_by=("user_id", "segment"),
                        window=WindowSpec(WindowKind.SESSION, "timestamp", gap="10 minutes"),
                        aggregates=(AggregateSpec("events", AggregateFunction.COUNT),))
    spec = with_gold(events, changed)
    rows = silver(spark, ("10:00:00", "u1", "view", None, "smb"),
                  ("10:10:00", "u1", "view", None, "smb"),  # exactly at the end: same session
                  ("10:20:00.001", "u1", "view", None, "smb"),  # past 10:20: a new one
                  ("10:05:00", "u1", "view", None, "vip"))  # another segment: its own session
    expected = spark.createDataFrame(
        [("u1", "smb", at("10:00:00"), at("10:20:00"), 2),
         ("u1", "smb", at("10:20:00.001"), at("10:30:00.001"), 1),
         ("u1", "vip", at("10:05:00"), at("10:15:00"), 1)],
        "user_id STRING, segment STRING, session_start TIMESTAMP, session_end TIMESTAMP, "
        "events BIGINT")
    assertDataFrameEqual(rows.transform(compile_gold(spec, changed)), expected)


def test_a_python_step_gets_the_filtered_input_and_gives_the_declared_columns(
        spark: SparkSession, events: PipelineSpec) -> None:
    step = GoldSpec(name="daily_buyers", input="silver/events", mode=OutputMode.UPDATE,
                    python="tests.unit.pipeline_steps:daily_buyers",
                    filter="event_type = 'purchase'",
                    columns=(Field("day", parse_type("DATE")), Field("buyers", parse_type("BIGINT"))),
                    keys=("day",))
    spec = dataclasses.replace(events, gold=(*events.gold, step))
    validate(spec)
    rows = silver(spark, ("10:00:00", "u1", "purchase", "1", "smb"),
                  ("11:00:00", "u2", "purchase", "1", "smb"),
                  ("11:30:00", "u2", "purchase", "1", "smb"),
                  ("12:00:00", "u3", "view", None, "smb"))  # filtered out before the step
    expected = spark.createDataFrame([(datetime(2025, 1, 27).date(), 2)], "day DATE, buyers BIGINT")
    actual = rows.transform(compile_gold(spec, step))
    assert actual.schema.simpleString() == "struct<day:date,buyers:bigint>"  # INT cast to BIGINT
    assertDataFrameEqual(actual, expected)

    missing = dataclasses.replace(step, columns=(*step.columns, Field("revenue", parse_type("DOUBLE"))))
    with pytest.raises(ValueError, match=r"gold/daily_buyers: .* returned no column revenue"):
        rows.transform(compile_gold(dataclasses.replace(spec, gold=(*events.gold, missing)), missing))


def test_a_second_pipeline_gold_tables(spark: SparkSession, orders: PipelineSpec) -> None:
    lines = order_lines(spark, ("o1", 1, "s1", 2, "3.50", "10:00:00", "food", "Paris"),
                        ("o1", 2, "s1", 1, "10.00", "10:14:59", "food", "Paris"),
                        ("o2", 1, "s2", 1, "10.00", "10:15:00", "food", "Lyon"),
                        ("o3", 1, "s3", 5, None, "10:20:00", "toys", "closed"))
    sliding = lines.transform(compile_gold(orders, gold(orders, "category_revenue_sliding")))
    food = (sliding.where("category = 'food' AND window_start = '2025-01-27 10:00:00'")
            .select("lines", "units", "revenue", "avg_price", "max_price", "stores"))
    assertDataFrameEqual(food, spark.createDataFrame(
        [(3, 4, Decimal("23.50"), Decimal("7.833333"), Decimal("10.00"), 2)],
        "lines BIGINT, units BIGINT, revenue DECIMAL(20,2), avg_price DECIMAL(14,6), "
        "max_price DECIMAL(10,2), stores BIGINT"))
    assert sliding.where("category = 'food'").count() == 5  # 1 hour sliding every 15 minutes
    toys = sliding.where("category = 'toys' AND window_start = '2025-01-27 10:00:00'")
    assert toys.select("revenue", "avg_price").collect() == [(Decimal("0.00"), None)]  # default

    visits = lines.transform(compile_gold(orders, gold(orders, "store_visits")))
    expected = spark.createDataFrame(
        [("s1", "Paris", at("10:00:00"), at("10:34:59"), 1, at("10:00:00")),
         ("s2", "Lyon", at("10:15:00"), at("10:35:00"), 1, at("10:15:00"))],
        "store_id STRING, city STRING, session_start TIMESTAMP, session_end TIMESTAMP, "
        "orders BIGINT, first_order TIMESTAMP")
    assertDataFrameEqual(visits, expected)  # the closed store is filtered out


def test_every_aggregate_runs_in_a_streaming_aggregation(
        spark: SparkSession, orders: PipelineSpec, tmp_path: Path) -> None:
    """Spark refuses distinct aggregates on streams: what the compiler emits must run there."""
    rows = order_lines(spark, ("o1", 1, "s1", 2, "3.50", "10:00:00", "food", "Paris"),
                       ("o1", 2, "s1", 1, "10.00", "10:05:00", "food", "Paris"),
                       ("o2", 1, "s1", 1, "10.00", "12:00:00", "food", "Paris"))
    rows.write.parquet(str(tmp_path / "in"))
    stream = spark.readStream.schema(rows.schema).parquet(str(tmp_path / "in"))
    for name, mode in (("category_revenue_sliding", "update"), ("store_visits", "append")):
        query = (stream.transform(compile_gold(orders, gold(orders, name))).writeStream
                 .format("memory").queryName(f"compiled_{name}").outputMode(mode)
                 .option("checkpointLocation", str(tmp_path / name)).trigger(availableNow=True)
                 .start())
        query.awaitTermination()
        assert query.exception() is None
    # Update mode: every window touched (4 sliding windows per instant, 10:00 and 10:05 share theirs).
    assert spark.table("compiled_category_revenue_sliding").where("category = 'food'").count() == 8
    # Append mode: available-now ends with a batch that moves the watermark to 12:00 - 20 minutes,
    # which closes the morning session (ended 10:25) and keeps the noon one open.
    assertDataFrameEqual(spark.table("compiled_store_visits"), spark.createDataFrame(
        [("s1", "Paris", at("10:00:00"), at("10:25:00"), 1, at("10:00:00"))],
        "store_id STRING, city STRING, session_start TIMESTAMP, session_end TIMESTAMP, "
        "orders BIGINT, first_order TIMESTAMP"))
