"""Streaming and batch readers of the lakehouse's Delta tables, and what a Delta source's offset
in a checkpoint says it has read."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from medallion.io.hadoopfs import folder_names

# A Delta source's offset names a version and a file index inside it; this index stands before
# the version's first file, so the offset has read all of the version before and none of its own.
BASE_INDEX = -1
_COMMIT_FILE = re.compile(r"(\d{20})\.json")
# A file limit no version reaches: every batch of a stream so limited ends between versions.
ALL_FILES = 2**31 - 1


def read_table_stream(spark: SparkSession, path: str, max_files_per_trigger: int) -> DataFrame:
    """What is new in a Delta table since the reading query's checkpoint."""
    return (
        spark.readStream.format("delta")
        .option("maxFilesPerTrigger", max_files_per_trigger)
        .load(path)
    )


def read_table(spark: SparkSession, path: str, version: int | None = None) -> DataFrame:
    """The current snapshot of a Delta table, or the one as of ``version``."""
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return reader.load(path)


def version_read(offset: Mapping[str, Any]) -> int:
    """The newest version of its table a Delta source's end offset has read all of (-1: none)."""
    version = int(offset["reservoirVersion"])
    return version - 1 if int(offset["index"]) == BASE_INDEX else version


def between_versions(offset: Mapping[str, Any]) -> bool:
    """Whether a Delta source's end offset stands between two versions of its table, past the
    first snapshot it reads (not inside a version's files, not reading that snapshot)."""
    return offset.get("isStartingVersion") is False and offset.get("index") == BASE_INDEX


def newest_table_version(spark: SparkSession, path: str) -> int:
    """The newest commit of the Delta table at ``path`` (-1: none), from its log's file names."""
    return max((int(m.group(1)) for name in folder_names(spark, f"{path}/_delta_log")
                if (m := _COMMIT_FILE.fullmatch(name))), default=-1)
