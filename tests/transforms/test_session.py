"""What the one session factory sets up, seen from the running session."""

from __future__ import annotations

import sys
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from medallion.engine.streaming import BATCH_CACHE_COMPRESSED, cache_batch


def _worker_python(_: object) -> str:
    import sys as worker_sys

    return worker_sys.executable


def test_python_workers_run_the_drivers_interpreter(spark: SparkSession) -> None:
    # Not the first python3 on the PATH: that one may be another version, or lack the packages.
    # (tests/conftest.py removes an inherited PYSPARK_PYTHON, so the factory chose this.)
    seen = spark.sparkContext.parallelize(range(2), 2).map(_worker_python).collect()
    assert set(seen) == {sys.executable}


def test_stateful_queries_keep_state_in_rocksdb_with_a_snapshot_per_commit(
        spark: SparkSession) -> None:
    assert spark.conf.get("spark.sql.streaming.stateStore.providerClass") == \
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    prefix = "spark.sql.streaming.stateStore.rocksdb"
    assert spark.conf.get(f"{prefix}.changelogCheckpointing.enabled") == "false"
    assert spark.conf.get(f"{prefix}.boundedMemoryUsage") == "true"
    assert int(spark.conf.get(f"{prefix}.maxMemoryUsageMB")) > 0
    # No read before every write to count the rows (state_store.count_rows, off by default).
    assert spark.conf.get(f"{prefix}.trackTotalNumberOfRows") == "false"


def _cached_bytes(spark: SparkSession) -> int:
    return sum(info.memSize() + info.diskSize()
               for info in spark.sparkContext._jsc.sc().getRDDStorageInfo())  # type: ignore[union-attr]


def _same_text(session: SparkSession) -> DataFrame:
    return session.range(20_000).select(F.lit("x" * 100).alias("same"))


def test_a_batch_is_cached_uncompressed_in_its_querys_session_only(
        spark: SparkSession, tmp_path: Path) -> None:
    # 20,000 copies of one text: compressed, the cache holds it once per column batch;
    # uncompressed, about 2 MB.
    grew: dict[str, int] = {}

    def cache_in_batch(frame: DataFrame, batch_id: int) -> None:
        before = _cached_bytes(spark)
        cached = cache_batch(_same_text(frame.sparkSession))
        assert cached.count() == 20_000
        grew["batch"] = _cached_bytes(spark) - before
        cached.unpersist(blocking=True)

    query = (spark.readStream.format("rate").option("rowsPerSecond", 1).load()
             .writeStream.foreachBatch(cache_in_batch)
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    assert spark.conf.get(BATCH_CACHE_COMPRESSED) == "true"  # the session that started it: Spark's

    before = _cached_bytes(spark)
    same = _same_text(spark).persist()
    assert same.count() == 20_000
    grew["session"] = _cached_bytes(spark) - before
    same.unpersist(blocking=True)
    assert grew["batch"] > 2_000_000 > 20 * grew["session"] > 0, grew
