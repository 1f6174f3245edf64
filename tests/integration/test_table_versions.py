"""A table's newest version and the rows its later commits wrote, read from its log's files alone
(bronze reports the rows a run wrote from them, without a history query's Spark job)."""

from __future__ import annotations

from pathlib import Path

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from medallion.io.sinks.delta import never_written, rows_written_since
from medallion.io.sources.delta import newest_table_version


def test_version_and_rows_written_since_follow_the_commits(
        spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "table")
    assert newest_table_version(spark, path) == -1
    spark.range(3).write.format("delta").save(path)  # version 0: 3 rows
    spark.range(5).write.format("delta").mode("append").save(path)  # 1: 5 rows
    DeltaTable.forPath(spark, path).delete("id = 0")  # 2: writes no new row count of its own
    spark.range(2).write.format("delta").mode("append").save(path)  # 3: 2 rows

    assert newest_table_version(spark, path) == 3
    assert rows_written_since(spark, path, -1) == 3 + 5 + 2
    assert rows_written_since(spark, path, 0) == 5 + 2
    assert rows_written_since(spark, path, 2) == 2
    assert rows_written_since(spark, path, 3) == 0


def test_never_written_is_a_table_whose_one_commit_adds_no_file(
        spark: SparkSession, tmp_path: Path) -> None:
    """What lets a gold table's first batch be appended instead of MERGEd: only its creation."""
    created = str(tmp_path / "created")
    DeltaTable.createIfNotExists(spark).location(created).addColumn("id", "BIGINT").execute()
    assert never_written(spark, created)
    spark.range(2).write.format("delta").mode("append").save(created)
    assert not never_written(spark, created)

    born_full = str(tmp_path / "born_full")
    spark.range(3).write.format("delta").save(born_full)  # version 0 holds rows
    assert not never_written(spark, born_full)
    assert not never_written(spark, str(tmp_path / "missing"))
