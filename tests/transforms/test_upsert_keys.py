"""A gold MERGE keeps one row per key, null keys included (a declared grouping column may be null)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual

from medallion.io.sinks.delta import BatchRange, batch_range, upsert_batch

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


def _one_file_per_day(spark: SparkSession, path: str) -> dict[str, str]:
    """A target table of one file per day of windows; {day: that file's path}."""
    files = {}
    for day in ("2025-01-01", "2025-01-02", "2025-01-03"):
        spark.sql(f"SELECT TIMESTAMP'{day} 10:00:00' AS window_start, 'Paris' AS city, "
                  "CAST(1 AS BIGINT) AS orders").write.format("delta").mode("append").save(path)
        added = set(spark.read.format("delta").load(path).inputFiles())
        files[day] = next(f for f in added if f not in files.values())
    return files


def test_the_merge_reads_only_the_files_the_batch_range_reaches(spark: SparkSession,
                                                                tmp_path: Path) -> None:
    path = str(tmp_path / "gold")
    files = _one_file_per_day(spark, path)
    # The file of Jan 1 disappears from storage: a MERGE that opened it would fail.
    Path(files["2025-01-01"].removeprefix("file:")).unlink()
    update = spark.sql("SELECT * FROM VALUES (TIMESTAMP'2025-01-03 10:00:00', 'Paris', 5L), "
                       "(TIMESTAMP'2025-01-03 11:00:00', 'Paris', 1L) AS t(window_start, city, orders)")
    upsert_batch(update, path, ("window_start", "city"), "test-prune", 1, prune_by="window_start")
    got = (spark.read.format("delta").load(path)
           .where("window_start >= TIMESTAMP'2025-01-02 00:00:00'"))
    expected = spark.sql(
        "SELECT * FROM VALUES (TIMESTAMP'2025-01-02 10:00:00', 'Paris', 1L), "
        "(TIMESTAMP'2025-01-03 10:00:00', 'Paris', 5L), (TIMESTAMP'2025-01-03 11:00:00', 'Paris', 1L) "
        "AS t(window_start, city, orders)")
    assertDataFrameEqual(got, expected)


def test_without_the_range_the_merge_reads_every_file(spark: SparkSession, tmp_path: Path) -> None:
    """The control of the test above: the same MERGE unbounded opens the missing file and fails."""
    path = str(tmp_path / "gold")
    files = _one_file_per_day(spark, path)
    Path(files["2025-01-01"].removeprefix("file:")).unlink()
    update = spark.sql("SELECT TIMESTAMP'2025-01-03 10:00:00' AS window_start, 'Paris' AS city, "
                       "5L AS orders")
    with pytest.raises(Exception, match="(?i)not exist|not found|FileNotFound"):
        upsert_batch(update, path, ("window_start", "city"), "test-no-prune", 1)


def test_a_null_window_start_in_the_batch_still_matches_its_row(spark: SparkSession,
                                                                 tmp_path: Path) -> None:
    path = str(tmp_path / "gold")
    spark.sql("SELECT * FROM VALUES (CAST(NULL AS TIMESTAMP), 'Paris', 1L), "
              "(TIMESTAMP'2025-01-01 10:00:00', 'Paris', 1L) AS t(window_start, city, orders)") \
        .write.format("delta").save(path)
    update = spark.sql("SELECT * FROM VALUES (CAST(NULL AS TIMESTAMP), 'Paris', 4L), "
                       "(TIMESTAMP'2025-01-01 10:00:00', 'Paris', 2L) AS t(window_start, city, orders)")
    upsert_batch(update, path, ("window_start", "city"), "test-prune-null", 1, prune_by="window_start")
    assertDataFrameEqual(spark.read.format("delta").load(path), update)


def test_the_batch_is_counted_and_its_range_taken_in_one_measure(spark: SparkSession) -> None:
    frame = spark.sql("SELECT * FROM VALUES (TIMESTAMP'2025-01-02 10:00:00', 'Paris'), "
                      "(CAST(NULL AS TIMESTAMP), 'Lyon'), (TIMESTAMP'2025-01-01 09:00:00', 'Nice') "
                      "AS t(window_start, city)")
    measured = batch_range(frame, "window_start")
    assert (measured.rows, measured.nulls) == (3, True)
    assert (str(measured.low), str(measured.high)) == ("2025-01-01 09:00:00", "2025-01-02 10:00:00")
    assert batch_range(frame.where("window_start IS NOT NULL"), "window_start").nulls is False
    assert batch_range(frame, None) == BatchRange(3)


def test_a_range_measured_before_the_gate_bounds_the_merge_of_what_it_kept(
        spark: SparkSession, tmp_path: Path) -> None:
    """The writer measures the batch before its gate drops rows: that wider range still bounds
    the MERGE of the kept rows, and the file it does not reach is never opened."""
    path = str(tmp_path / "gold")
    files = _one_file_per_day(spark, path)
    Path(files["2025-01-01"].removeprefix("file:")).unlink()
    batch = spark.sql("SELECT * FROM VALUES (TIMESTAMP'2025-01-02 10:00:00', 'Paris', -1L), "
                      "(TIMESTAMP'2025-01-03 10:00:00', 'Paris', 5L) AS t(window_start, city, orders)")
    measured = batch_range(batch, "window_start")
    upsert_batch(batch.where("orders > 0"), path, ("window_start", "city"), "test-measured", 1,
                 prune_by="window_start", within=measured)
    got = (spark.read.format("delta").load(path)
           .where("window_start >= TIMESTAMP'2025-01-02 00:00:00'"))
    expected = spark.sql(
        "SELECT * FROM VALUES (TIMESTAMP'2025-01-02 10:00:00', 'Paris', 1L), "
        "(TIMESTAMP'2025-01-03 10:00:00', 'Paris', 5L) AS t(window_start, city, orders)")
    assertDataFrameEqual(got, expected)
