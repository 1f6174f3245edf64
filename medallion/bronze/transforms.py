"""Pure transformations of the bronze layer."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from medallion.tables import BRONZE_CUSTOMERS, BRONZE_EVENTS, BRONZE_EVENTS_KAFKA


def _with_ingestion_time(df: DataFrame) -> DataFrame:
    return df.withColumn("ingested_at", F.current_timestamp())


def shape_bronze_events(lines: DataFrame) -> DataFrame:
    """Landing lines (``raw, source_file``) as bronze rows: the raw text, its file, when ingested."""
    return lines.transform(_with_ingestion_time).select(*BRONZE_EVENTS.schema.fieldNames())


def shape_bronze_customers(rows: DataFrame) -> DataFrame:
    """Customer CSV rows as bronze rows, malformed lines kept in ``_corrupt_record``."""
    return rows.transform(_with_ingestion_time).select(*BRONZE_CUSTOMERS.schema.fieldNames())


def shape_bronze_kafka_events(records: DataFrame) -> DataFrame:
    """Kafka records as bronze rows: the value as text in ``raw`` (what silver parses), the key,
    topic, partition, offset and Kafka timestamp, and ``source_file`` as
    ``kafka://topic/partition/offset`` so lineage reads the same as for files."""
    return (
        records.select(
            F.col("value").cast("string").alias("raw"),
            F.col("key").cast("string").alias("key"),
            "topic",
            "partition",
            "offset",
            F.col("timestamp").alias("kafka_timestamp"),
        )
        .withColumn("source_file",
                    F.format_string("kafka://%s/%d/%d", "topic", "partition", "offset"))
        .transform(_with_ingestion_time)
        .select(*BRONZE_EVENTS_KAFKA.schema.fieldNames())
    )
