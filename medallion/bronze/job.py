"""The bronze job: landing files into append-only Delta tables, exactly once."""

from __future__ import annotations

import logging
from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession

from medallion.bronze.transforms import shape_bronze_customers, shape_bronze_events
from medallion.config import Settings, Trigger
from medallion.sinks.delta import (
    ensure_table,
    guard_checkpoint,
    path_exists,
    rows_written_since,
    table_version,
    with_trigger,
)
from medallion.sources.files import read_customer_csv, read_json_lines
from medallion.streaming import RunningQuery, failing_as
from medallion.tables import BRONZE_CUSTOMERS, BRONZE_EVENTS, TableSpec

log = logging.getLogger(__name__)

Reader = Callable[[SparkSession, str, int], DataFrame]
INGESTIONS: tuple[tuple[TableSpec, str, Reader, Callable[[DataFrame], DataFrame]], ...] = (
    (BRONZE_EVENTS, "events", read_json_lines, shape_bronze_events),
    (BRONZE_CUSTOMERS, "customers", read_customer_csv, shape_bronze_customers),
)


def _start_ingestion(spark: SparkSession, settings: Settings, trigger: Trigger, spec: TableSpec,
                     folder: str, read: Reader, shape: Callable[[DataFrame], DataFrame]) -> RunningQuery:
    path = spec.path(settings)
    ensure_table(spark, spec, path, settings.catalog.tables.get(spec.qualified_name))
    if not path_exists(spark, folder):
        log.warning("%s: landing folder %s does not exist; nothing to ingest", spec.key, folder)
        return RunningQuery(spec.key, None, note=f"no landing folder {folder}")
    checkpoint = spec.checkpoint(settings)
    guard_checkpoint(spark, path, checkpoint, spec.key)
    stream = read(spark, folder, settings.streaming.max_files_per_trigger).transform(shape)
    writer = (
        stream.writeStream.format("delta")
        .outputMode("append")
        .queryName(spec.key)
        .option("checkpointLocation", checkpoint)
    )
    log.info("%s: ingesting %s", spec.key, folder)
    before = table_version(spark, path)
    query = with_trigger(writer, trigger).start(path)
    return RunningQuery(spec.key, query, rows_out=lambda: rows_written_since(spark, path, before))


def start_bronze(spark: SparkSession, settings: Settings, trigger: Trigger) -> list[RunningQuery]:
    """Start ingesting what is new in the landing zone; a missing landing folder is skipped."""
    queries: list[RunningQuery] = []
    for spec, source, read, shape in INGESTIONS:
        with failing_as(spec.key):
            folder = settings.landing_path(settings.sources[source])
            queries.append(_start_ingestion(spark, settings, trigger, spec, folder, read, shape))
    return queries
