"""Streaming readers of the landing zone (Structured Streaming file source)."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

JSON_SUFFIX = ".json"  # the files each reader takes from its folder
CSV_SUFFIX = ".csv"
CUSTOMER_CSV_SCHEMA = "customer_id STRING, customer_name STRING, segment STRING, _corrupt_record STRING"


def read_json_lines(spark: SparkSession, folder: str, max_files_per_trigger: int) -> DataFrame:
    """Each line of the ``*.json`` files in ``folder``, as text, with its file: ``raw, source_file``.

    Lines are read as text, not parsed, so that a broken line is kept exactly as it arrived;
    parsing is silver's job.
    """
    return (
        spark.readStream.format("text")
        .option("pathGlobFilter", f"*{JSON_SUFFIX}")
        .option("maxFilesPerTrigger", max_files_per_trigger)
        .load(folder)
        .select(F.col("value").alias("raw"), F.col("_metadata.file_path").alias("source_file"))
    )


def read_customer_csv(spark: SparkSession, folder: str, max_files_per_trigger: int) -> DataFrame:
    """Rows of the ``*.csv`` files in ``folder``; a malformed line lands in ``_corrupt_record``."""
    return (
        spark.readStream.format("csv")
        .schema(CUSTOMER_CSV_SCHEMA)
        .option("header", "true")
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", "_corrupt_record")
        .option("pathGlobFilter", f"*{CSV_SUFFIX}")
        .option("maxFilesPerTrigger", max_files_per_trigger)
        .load(folder)
        .withColumn("source_file", F.col("_metadata.file_path"))
    )
