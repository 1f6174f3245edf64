"""What the one session factory sets up, seen from the running session."""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession


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
