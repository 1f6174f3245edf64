"""A gold MERGE keeps one row per key, null keys included (a declared grouping column may be null)."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual

from medallion.sinks.delta import upsert_batch

SCHEMA = "window_start STRING, city STRING, orders BIGINT"


def test_a_null_key_is_updated_in_place_not_inserted_again(spark: SparkSession,
                                                          tmp_path: Path) -> None:
    path = str(tmp_path / "gold")
    spark.createDataFrame([("10:00", "Paris", 1), ("10:00", None, 1)], SCHEMA) \
        .write.format("delta").save(path)
    update = spark.createDataFrame([("10:00", "Paris", 2), ("10:00", None, 3), ("10:05", None, 1)],
                                   SCHEMA)
    upsert_batch(update, path, ("window_start", "city"), "test-null-keys", 1)
    expected = spark.createDataFrame(
        [("10:00", "Paris", 2), ("10:00", None, 3), ("10:05", None, 1)], SCHEMA)
    assertDataFrameEqual(spark.read.format("delta").load(path), expected)
