"""A recomputed region replaces the table's rows of that region in one commit, exactly once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual

from medallion.io.sinks.delta import append_batch, replace_batch

SCHEMA = "window_start STRING, city STRING, orders BIGINT"
KEYS = ("window_start", "city")


def _table(spark: SparkSession, path: str, rows: list[tuple]) -> None:
    spark.createDataFrame(rows, SCHEMA).write.format("delta").save(path)


def _last(spark: SparkSession, path: str) -> tuple[int, str]:
    entry = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").first()
    assert entry is not None
    return entry["version"], entry["operation"]


def test_a_region_the_table_holds_nothing_of_is_appended_once(spark: SparkSession,
                                                               tmp_path: Path) -> None:
    path = str(tmp_path / "gold")
    _table(spark, path, [("10:00", "Paris", 1)])
    rows = spark.createDataFrame([("10:05", "Paris", 2), ("10:05", "Lyon", 1)], SCHEMA)
    region = spark.read.format("delta").load(path).where("window_start = '10:05'")
    assert replace_batch(rows, region, path, KEYS, "test-append", 1) == 0
    expected = spark.createDataFrame(
        [("10:00", "Paris", 1), ("10:05", "Paris", 2), ("10:05", "Lyon", 1)], SCHEMA)
    assertDataFrameEqual(spark.read.format("delta").load(path), expected)
    assert _last(spark, path) == (1, "WRITE")
    # The batch replayed (its commit in the checkpoint lost): Delta skips it by its transaction id.
    replace_batch(rows, spark.read.format("delta").load(path).where("window_start = '10:07'"),
                  path, KEYS, "test-append", 1)
    assert _last(spark, path) == (1, "WRITE")
    assertDataFrameEqual(spark.read.format("delta").load(path), expected)


def test_a_region_the_table_holds_is_merged_and_what_the_recomputation_lacks_deleted(
        spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "gold")
    _table(spark, path, [("10:00", "Paris", 1), ("10:00", "Lyon", 4), ("10:05", "Paris", 1)])
    rows = spark.createDataFrame([("10:00", "Paris", 3)], SCHEMA)
    region = spark.read.format("delta").load(path).where("window_start = '10:00'")
    assert replace_batch(rows, region, path, KEYS, "test-merge", 1) == 1
    expected = spark.createDataFrame([("10:00", "Paris", 3), ("10:05", "Paris", 1)], SCHEMA)
    assertDataFrameEqual(spark.read.format("delta").load(path), expected)
    assert _last(spark, path) == (1, "MERGE")
    replace_batch(rows, spark.read.format("delta").load(path).where("window_start = '10:00'"),
                  path, KEYS, "test-merge", 1)
    assert _last(spark, path) == (1, "MERGE")


def test_rows_appended_in_order_of_a_column_are_in_files_of_narrow_ranges(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A recomputed table's first batch (all of it) is written by window start: each file holds
    a narrow range, so a read of a few windows skips the others' files by their statistics."""
    monkeypatch.setattr("medallion.io.sinks.delta.SORTED_FILE_ROWS", 50)
    path = str(tmp_path / "gold")
    # 400 rows in 2 tasks, each task's rows spread over all of the range (as a hash-partitioned
    # aggregation leaves them).
    rows = spark.range(400).selectExpr("cast(id * 7919 % 400 as int) as start",
                                       "'x' as city").repartition(2, "city", "start")
    append_batch(rows, path, "test-sorted", 0, sorted_by="start")
    files = [json.loads(line)["add"] for log in sorted((tmp_path / "gold" / "_delta_log")
                                                        .glob("*.json"))
             for line in log.read_text().splitlines() if "add" in json.loads(line)]
    ranges = [(json.loads(f["stats"])["minValues"]["start"],
               json.loads(f["stats"])["maxValues"]["start"],
               json.loads(f["stats"])["numRecords"]) for f in files]
    assert sum(n for _, _, n in ranges) == 400 and max(n for _, _, n in ranges) <= 50
    assert len(ranges) >= 8
    # A window's start is in at most one file of each task.
    assert max(sum(1 for low, high, _ in ranges if low <= start <= high)
               for start in range(400)) <= 2
    assert spark.read.format("delta").load(path).count() == 400
