"""A real batch function's failure, in a streaming query of the shared session, told in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession

from medallion.io.failures import describe_failure


def _raise_in_batch(frame: DataFrame, batch_id: int) -> None:
    raise ValueError(f"batch {batch_id}: column amount is not DECIMAL(12,2)")


def test_a_real_batch_function_failure_is_described_by_its_python_error(
        spark: SparkSession, tmp_path: Path) -> None:
    query = (spark.readStream.format("rate").option("rowsPerSecond", 1).load()
             .writeStream.foreachBatch(_raise_in_batch)
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    with pytest.raises(StreamingQueryException) as failure:
        query.awaitTermination()
    message = describe_failure(failure.value)
    assert message.startswith("ValueError: batch 0: column amount is not DECIMAL(12,2) (at ")
    assert "test_batch_failure.py:" in message and "in _raise_in_batch" in message
