"""The bronze job: landing files into append-only Delta tables, exactly once."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from medallion.bronze.transforms import (
    shape_bronze_customers,
    shape_bronze_events,
    shape_bronze_kafka_events,
)
from medallion.config import EventsKind, Settings, Trigger
from medallion.hadoopfs import path_exists
from medallion.idle import FolderInput, skippable
from medallion.sinks.delta import (
    ensure_table,
    guard_checkpoint,
    rows_written_since,
    table_version,
    with_trigger,
)
from medallion.sources.files import CSV_SUFFIX, JSON_SUFFIX, read_customer_csv, read_json_lines
from medallion.sources.kafka import read_kafka_stream
from medallion.streaming import RunningQuery, TableRun, failing_as
from medallion.tables import BRONZE_CUSTOMERS, BRONZE_EVENTS, BRONZE_EVENTS_KAFKA, TableSpec

log = logging.getLogger(__name__)

Reader = Callable[[SparkSession, str, int], DataFrame]
# Each landing source: its bronze table, its sources.* key, its reader, the suffix of the files
# the reader takes, and the shaping of what it read.
INGESTIONS: tuple[tuple[TableSpec, str, Reader, str, Callable[[DataFrame], DataFrame]], ...] = (
    (BRONZE_EVENTS, "events", read_json_lines, JSON_SUFFIX, shape_bronze_events),
    (BRONZE_CUSTOMERS, "customers", read_customer_csv, CSV_SUFFIX, shape_bronze_customers),
)


def _start_ingestion(spark: SparkSession, settings: Settings, trigger: Trigger, spec: TableSpec,
                     folder: str, read: Reader, suffix: str,
                     shape: Callable[[DataFrame], DataFrame]) -> RunningQuery:
    path = spec.path(settings)
    if skippable(spark, trigger, path, spec.checkpoint(settings), FolderInput(folder, suffix)):
        return RunningQuery(spec.key, None, idle=True)  # every landed file is in bronze already
    ensure_table(spark, spec, path, settings.table_doc(spec.key))
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
    kafka_events = settings.events_kind is EventsKind.KAFKA
    for spec, source, read, suffix, shape in INGESTIONS:
        if kafka_events and spec is BRONZE_EVENTS:
            continue  # events come from Kafka (bronze/events_kafka) in this configuration
        with failing_as(spec.key):
            folder = settings.landing_path(settings.sources[source])
            queries.append(_start_ingestion(spark, settings, trigger, spec, folder, read, suffix,
                                            shape))
    if kafka_events:
        with failing_as(BRONZE_EVENTS_KAFKA.key):
            queries.append(start_bronze_kafka(spark, settings, trigger))
    return queries


def start_bronze_kafka(spark: SparkSession, settings: Settings, trigger: Trigger) -> RunningQuery:
    """Start ingesting the events topics into bronze/events_kafka, exactly once.

    The streaming Delta sink records each batch's id in the table's log and the checkpoint keeps
    the Kafka offsets of each batch, so a restarted query re-reads a batch that did not commit
    and skips one that did. Offsets missing from Kafka are counted at the end of the run.
    """
    spec = BRONZE_EVENTS_KAFKA
    path, checkpoint = spec.path(settings), spec.checkpoint(settings)
    ensure_table(spark, spec, path)
    guard_checkpoint(spark, path, checkpoint, spec.key)
    stream = read_kafka_stream(spark, settings.kafka).transform(shape_bronze_kafka_events)
    writer = (
        stream.writeStream.format("delta")
        .outputMode("append")
        .queryName(spec.key)
        .option("checkpointLocation", checkpoint)
    )
    before = table_version(spark, path)
    query = with_trigger(writer, trigger).start(path)
    running = RunningQuery(spec.key, query, rows_out=lambda: rows_written_since(spark, path, before))
    running.extra = lambda run: _count_missing_offsets(spark, path, running, run)
    return running


def _offset_ranges(running: RunningQuery) -> dict[tuple[str, int], tuple[int, int]]:
    """``(topic, partition) -> (first offset asked for, end offset)`` over this run's batches."""
    ranges: dict[tuple[str, int], tuple[int, int]] = {}
    if running.query is None:
        return ranges
    for progress in running.query.recentProgress:
        for source in json.loads(progress.json).get("sources", []):
            start, end = source.get("startOffset"), source.get("endOffset")
            start = json.loads(start) if isinstance(start, str) else start or {}
            if not isinstance(end, dict) or not isinstance(start, dict):
                continue
            for topic, partitions in end.items():
                for partition, end_offset in partitions.items():
                    first = (start.get(topic) or {}).get(partition)
                    if first is None or first < 0 or end_offset <= first:
                        continue  # a new partition: read from its earliest, nothing to compare
                    key = (topic, int(partition))
                    low, high = ranges.get(key, (first, end_offset))
                    ranges[key] = (min(low, first), max(high, end_offset))
    return ranges


def _count_missing_offsets(spark: SparkSession, path: str, running: RunningQuery,
                           run: TableRun) -> None:
    """Count offsets this run was asked to read that never reached bronze, and log each gap.

    With ``failOnDataLoss=false`` Kafka's aged-out (or deleted) records are skipped by the
    connector; here they are counted. Transaction markers of transactional producers also take
    offsets without being records, and are counted too: the log line tells which is which.
    """
    ranges = _offset_ranges(running)
    if not ranges:
        return
    table = spark.read.format("delta").load(path)
    condition = " OR ".join(
        f"(topic = '{topic}' AND partition = {partition} AND offset >= {low} AND offset < {high})"
        for (topic, partition), (low, high) in ranges.items()
    )
    present = {
        (row["topic"], row["partition"]): (row["n"], row["first"])
        for row in table.where(condition).groupBy("topic", "partition")
        .agg(F.count(F.lit(1)).alias("n"), F.min("offset").alias("first")).collect()
    }
    missing_total = 0
    for (topic, partition), (low, high) in sorted(ranges.items()):
        count, first = present.get((topic, partition), (0, None))
        missing = (high - low) - count
        if missing > 0:
            missing_total += missing
            log.warning("%s: %d offsets of topic %s partition %d in [%d, %d) were not in Kafka "
                        "any more (first offset read: %s); counted as lost",
                        BRONZE_EVENTS_KAFKA.key, missing, topic, partition, low, high, first)
    run.offsets_missing = missing_total
    if missing_total:
        run.note = f"{missing_total} Kafka offsets missing (aged out or deleted before read)"
