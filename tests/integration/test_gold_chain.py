"""A gold table that reads another gold table (an append-mode one) as a stream.

The gold queries ran side by side, so the reader started before the table it reads had
committed the run's windows and got them only at the next run: a run did not carry new rows to
the end of a chain. And a range backfill of the table read replaced rows in place, which the
reader's stream cannot read past: every later run failed on it. Expected rows are written by
hand; the silver input is written directly.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual

from medallion.config.model import Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.io.tables import TableSpec
from medallion.ops.backfill import BackfillError, plan_backfill
from medallion.project import load_settings
from tests.conf_support import copy_base_conf

TAPS = """
sources:
  taps: {format: json_lines, path: taps, bronze: {table: taps}}
silver:
  taps:
    input: bronze/taps
    parse: json
    columns: {id: STRING, at: TIMESTAMP, n: INT}
    dedup: {key: [id]}
    event_time: at
gold:
  taps_5m:
    input: silver/taps
    window: {kind: tumbling, size: 5 minutes}
    aggregates: {taps: {function: count}, n: {function: sum, column: n}}
    mode: append
  taps_15m:
    input: gold/taps_5m
    window: {kind: tumbling, size: 15 minutes, column: window_start}
    aggregates: {windows: {function: count}, taps: {function: sum, column: taps}}
    mode: update
"""


def at(hms: str) -> datetime:
    return datetime.fromisoformat(f"2025-01-27T{hms}")


def test_one_run_carries_rows_down_a_chain_of_gold_tables_and_a_range_backfill_cannot_break_it(
        spark: SparkSession, tmp_path: Path) -> None:
    conf = copy_base_conf(tmp_path / "conf")
    (conf / "pipelines" / "taps.yaml").write_text(TAPS, encoding="utf-8")
    (conf / "local.yaml").write_text("catalog:\n  metastore: in-memory\n", encoding="utf-8")
    settings = load_settings(env="local", conf_dir=conf, landing=str(tmp_path / "landing"),
                             lakehouse=str(tmp_path / "lakehouse"))
    taps = settings.pipeline("taps")
    settings = dataclasses.replace(settings, pipelines=(taps,))
    silver = TableSpec.from_decl(taps.table("silver/taps"))
    spark.createDataFrame(
        [(f"t{i}", at(time), n, "f.json", at("13:00:00")) for i, (time, n) in enumerate(
            [("10:00:00", 1), ("10:04:59", 2), ("10:05:00", 3), ("10:12:00", 4), ("10:31:00", 5)])],
        silver.schema_ddl).write.format("delta").mode("append").save(silver.path(settings))

    runs = {run.table: run for run in run_pipeline(spark, settings, RunTarget.GOLD, Trigger(),
                                                    monitor=False)}

    # The watermark (10 minutes) stands at 10:21: the three windows before it are closed and
    # appended; the 10:30 one stays open. The 15-minute table, in the same run, sums them.
    five = TableSpec.from_decl(taps.table("gold/taps_5m"))
    assertDataFrameEqual(spark.read.format("delta").load(five.path(settings)),
                         spark.createDataFrame([(at("10:00:00"), at("10:05:00"), 2, 3),
                                                (at("10:05:00"), at("10:10:00"), 1, 3),
                                                (at("10:10:00"), at("10:15:00"), 1, 4)],
                                               five.schema_ddl))
    fifteen = TableSpec.from_decl(taps.table("gold/taps_15m"))
    assertDataFrameEqual(spark.read.format("delta").load(fifteen.path(settings)),
                         spark.createDataFrame([(at("10:00:00"), at("10:15:00"), 3, 4)],
                                               fifteen.schema_ddl))
    assert runs["gold/taps_15m"].rows_in == 3

    # A range of the table read is refused before anything changes, alone or with every gold
    # table; a range of the reader alone is planned, and a full refresh rebuilds both.
    for target in ("gold/taps_5m", "gold"):
        with pytest.raises(BackfillError, match=r"gold/taps_5m is read as a stream by "
                                                r"gold/taps_15m: a range backfill replaces rows "
                                                r"in place.*medallion backfill gold/taps_5m "
                                                r"--full-refresh"):
            plan_backfill(spark, settings, target, at("10:00:00"), at("10:15:00"))
    assert [s.key for s in plan_backfill(spark, settings, "gold/taps_15m", at("10:00:00"),
                                         at("10:15:00")).rewrites] == ["gold/taps_15m"]
    assert {s.key for s in plan_backfill(spark, settings, "gold/taps_5m", None, None,
                                         full_refresh=True).rewrites} >= {"gold/taps_15m"}
