"""A table's newest version and the rows its later commits wrote, read from its log's files alone
(bronze reports the rows a run wrote from them, without a history query's Spark job)."""

from __future__ import annotations

from pathlib import Path

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from medallion.idle import newest_table_version
from medallion.sinks.delta import (
    checksum_transactions,
    committed_txn_version,
    never_written,
    rows_written_since,
)


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


def test_committed_transaction_ids_read_from_the_checksum_or_else_from_the_snapshot(
        spark: SparkSession, tmp_path: Path) -> None:
    """What a query's start checks its checkpoint against: the newest ``txnVersion`` per app id,
    from the newest commit's checksum file (no Spark job), else from the table's snapshot."""
    path = str(tmp_path / "table")
    assert committed_txn_version(spark, path, "a") == -1  # no table
    spark.range(1).write.format("delta").save(path)  # version 0, no transaction id
    for app, version in (("a", 3), ("b", 9), ("a", 4)):  # versions 1-3
        (spark.range(1).write.format("delta").mode("append")
         .option("txnAppId", app).option("txnVersion", version).save(path))
    log = tmp_path / "table" / "_delta_log"
    checksum = log / f"{3:020d}.crc"
    assert checksum_transactions(checksum.read_text()) == {"a": 4, "b": 9}  # delta-spark wrote it
    read = {app: committed_txn_version(spark, path, app) for app in ("a", "b", "c")}
    assert read == {"a": 4, "b": 9, "c": -1}
    # The checksum is what is read: Delta's own record of the commit, believed as it stands.
    (log / f".{3:020d}.crc.crc").unlink()
    original = checksum.read_text()
    checksum.write_text(original.replace('"version":4', '"version":40'))
    assert committed_txn_version(spark, path, "a") == 40
    checksum.write_text(original)

    # Without the newest checksum (a commit another writer made), or with one that records no
    # ids, the snapshot gives the same answer: it is not taken as "no ids".
    checksum.unlink()
    for crc in log.glob(".*.crc.crc"):
        crc.unlink()
    assert {app: committed_txn_version(spark, path, app) for app in read} == read
    checksum.write_text('{"txnId": "x", "numFiles": 4}')
    assert checksum_transactions(checksum.read_text()) is None
    assert {app: committed_txn_version(spark, path, app) for app in read} == read
