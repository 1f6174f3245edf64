"""Streaming and batch readers of the lakehouse's Delta tables."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession


def read_table_stream(spark: SparkSession, path: str, max_files_per_trigger: int) -> DataFrame:
    """What is new in a Delta table since the reading query's checkpoint."""
    return (
        spark.readStream.format("delta")
        .option("maxFilesPerTrigger", max_files_per_trigger)
        .load(path)
    )


def read_table(spark: SparkSession, path: str) -> DataFrame:
    """The current snapshot of a Delta table."""
    return spark.read.format("delta").load(path)
