"""The gold job runs a second pipeline's declared gold tables: it reads their declared input
(not silver/events), MERGEs update-mode windows on the declared keys and appends closed sessions;
the tables' declared expectations gate them, a ``drop`` sending rows to ``<table>_quarantine``.

The silver input is written directly (the silver job of a second pipeline is another step's);
expected rows are computed by hand.
"""

from __future__ import annotations

import dataclasses
import shutil
from datetime import datetime
from decimal import Decimal
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual

from medallion.config.model import Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.io.tables import QUALITY_RESULTS, TableSpec
from medallion.project import load_settings
from tests.conf_support import copy_base_conf

ORDERS = Path(__file__).resolve().parents[1] / "unit" / "pipeline_fixtures" / "pipelines" / "orders.yaml"


def at(hms: str) -> datetime:
    return datetime.fromisoformat(f"2025-01-27T{hms}")


def test_a_second_pipeline_gold_tables_are_run_from_their_declaration(
        spark: SparkSession, tmp_path: Path) -> None:
    conf = copy_base_conf(tmp_path / "conf")
    shutil.copy(ORDERS, conf / "pipelines" / "orders.yaml")
    (conf / "local.yaml").write_text("catalog:\n  metastore: in-memory\n", encoding="utf-8")
    # A pipeline overlay adds a drop to the sliding table: windows without a price (avg_price
    # null) are quarantined. store_visits keeps the fixture's own drop (orders_positive).
    (conf / "pipelines" / "orders.local.yaml").write_text("""
gold:
  category_revenue_sliding:
    expectations:
      priced:
        expectation: expect_column_values_to_not_be_null
        kwargs: {column: avg_price}
        severity: drop
""", encoding="utf-8")
    settings = load_settings(env="local", conf_dir=conf, landing=str(tmp_path / "landing"),
                             lakehouse=str(tmp_path / "lakehouse"))
    assert [p.name for p in settings.pipelines] == ["accounts", "events", "orders"]
    orders = settings.pipeline("orders")
    settings = dataclasses.replace(settings, pipelines=(orders,))  # its gold tables alone
    silver = TableSpec.from_decl(orders.table("silver/order_lines"))

    def land(*rows: tuple[str, int, str, int, str | None, str, str, str]) -> None:
        spark.createDataFrame(
            [(order, line, store, "k", quantity, Decimal(price) if price else None, at(time),
              "product", category, city, "f.csv", at("13:00:00"))
             for order, line, store, quantity, price, time, category, city in rows],
            silver.schema_ddl).write.format("delta").mode("append").save(silver.path(settings))

    land(("o1", 1, "s1", 2, "3.50", "10:00:00", "food", "Paris"),
         ("o1", 2, "s1", 1, "10.00", "10:14:59", "food", "Paris"),
         ("o3", 1, "s3", 5, None, "10:20:00", "toys", "closed"))
    first = {run.table: run for run in run_pipeline(spark, settings, RunTarget.GOLD, Trigger(),
                                                    monitor=False)}
    assert set(first) == {"gold/category_revenue_sliding", "gold/store_visits"}
    # 10:20 joins s1's open session and three of its open windows (MERGEd); 12:00 moves the
    # watermark to 11:40, which closes that session.
    land(("o1", 3, "s1", 1, "1.00", "10:20:00", "food", "Paris"),
         ("o2", 1, "s2", 1, "10.00", "12:00:00", "food", "Lyon"))
    run_pipeline(spark, settings, RunTarget.GOLD, Trigger(), monitor=False)

    def hour(start: str) -> tuple[datetime, datetime]:
        begin = at(start)
        return begin, begin.replace(hour=begin.hour + 1)

    food_before, food_with_3 = (2, 3, Decimal("13.50"), Decimal("6.750000"), Decimal("10.00"), 1), (
        3, 4, Decimal("14.50"), Decimal("4.833333"), Decimal("10.00"), 1)
    noon = (1, 1, Decimal("10.00"), Decimal("10.000000"), Decimal("10.00"), 1)
    toys = (1, 5, Decimal("0.00"), None, None, 1)
    expected = [
        (*hour("09:15:00"), "food", *food_before),
        *((*hour(s), "food", *food_with_3) for s in ("09:30:00", "09:45:00", "10:00:00")),
        (*hour("10:15:00"), "food", 1, 1, Decimal("1.00"), Decimal("1.000000"), Decimal("1.00"), 1),
        *((*hour(s), "food", *noon) for s in ("11:15:00", "11:30:00", "11:45:00", "12:00:00")),
    ]
    sliding = TableSpec.from_decl(orders.table("gold/category_revenue_sliding"))
    assertDataFrameEqual(spark.read.format("delta").load(sliding.path(settings)),
                         spark.createDataFrame(expected, sliding.schema_ddl))
    # The toys windows have no price (avg_price null): dropped by `priced`, once (run 2 did not
    # update them), to the quarantine, with their values, the reason and when.
    quarantined = spark.read.format("delta").load(
        f"{settings.paths.lakehouse}/gold/category_revenue_sliding_quarantine")
    assert {(*tuple(r)[:-2], tuple(r["reasons"])) for r in quarantined.collect()} == {
        (*hour(s), "toys", *toys, ("priced",)) for s in ("09:30:00", "09:45:00", "10:00:00",
                                                         "10:15:00")}
    assert quarantined.where("quarantined_at IS NULL").count() == 0
    # store_visits' own drop (orders_positive) rejected nothing: its quarantine is there, empty.
    assert spark.read.format("delta").load(
        f"{settings.paths.lakehouse}/gold/store_visits_quarantine").count() == 0
    # Run 1 gated the sliding table's 8 first windows (4 without a price), run 2 its 8 updated
    # ones; the closed s1 session was gated once it was emitted.
    gated = {(r["table"], r["expectation"], r["severity"], r["success"], r["unexpected_count"])
             for r in spark.read.format("delta").load(QUALITY_RESULTS.path(settings)).collect()}
    assert gated == {("gold/category_revenue_sliding", "priced", "drop", False, 4),
                     ("gold/category_revenue_sliding", "priced", "drop", True, 0),
                     ("gold/store_visits", "orders_positive", "drop", True, 0)}
    visits = TableSpec.from_decl(orders.table("gold/store_visits"))
    assertDataFrameEqual(spark.read.format("delta").load(visits.path(settings)),
                         spark.createDataFrame([("s1", "Paris", at("10:00:00"), at("10:40:00"), 1,
                                                 at("10:00:00"))], visits.schema_ddl))
