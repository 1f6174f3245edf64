"""Pure transformations of the bronze layer: what a source read, as its bronze table's rows."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from medallion.pipeline.kinds import INGESTED_AT
from medallion.pipeline.model import SourceSpec


def shape_bronze(source: SourceSpec) -> Callable[[DataFrame], DataFrame]:
    """Rows of ``source`` (with ``source_file``) as its bronze table's columns, with when they
    were ingested."""
    columns = [field.name for field in source.bronze_fields()]

    def transform(rows: DataFrame) -> DataFrame:
        return rows.withColumn(INGESTED_AT, F.current_timestamp()).select(*columns)

    return transform


def shape_bronze_kafka(source: SourceSpec) -> Callable[[DataFrame], DataFrame]:
    """Kafka records as bronze rows: the value as text in ``raw`` (what silver parses), the key,
    topic, partition, offset and Kafka timestamp, and ``source_file`` as
    ``kafka://topic/partition/offset`` so lineage reads the same as for files."""
    shape = shape_bronze(source)

    def transform(records: DataFrame) -> DataFrame:
        return records.select(
            F.col("value").cast("string").alias("raw"),
            F.col("key").cast("string").alias("key"),
            "topic",
            "partition",
            "offset",
            F.col("timestamp").alias("kafka_timestamp"),
        ).withColumn("source_file",
                     F.format_string("kafka://%s/%d/%d", "topic", "partition", "offset")
                     ).transform(shape)

    return transform
