"""The bronze job: landing files into append-only Delta tables, exactly once."""

from __future__ import annotations

import fnmatch
import json
import logging
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TypeVar

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from medallion.config.model import Trigger, TriggerKind
from medallion.engine.bronze.transforms import shape_bronze, shape_bronze_kafka
from medallion.engine.idle import (
    FolderInput,
    FolderLook,
    ListedFile,
    file_source_log_batch,
    location,
    skippable,
)
from medallion.engine.layer import PlannedQuery, start_layer
from medallion.engine.streaming import RunningQuery, TableRun
from medallion.errors import InputRefused
from medallion.io.checkpoints import CheckpointState
from medallion.io.hadoopfs import FileHeads, make_folder
from medallion.io.sinks.delta import (
    TableToMake,
    committed_txn_version,
    ensure_table,
    guard_checkpoint,
    rows_written_since,
    with_trigger,
)
from medallion.io.sources.delta import newest_table_version
from medallion.io.sources.files import (
    csv_charset,
    csv_header,
    declared_schema,
    header_differs,
    parquet_misfits,
    read_landing,
    shown_header,
)
from medallion.io.sources.kafka import read_kafka_stream
from medallion.io.tables import TableSpec
from medallion.pipeline.kinds import SourceFormat
from medallion.pipeline.model import SourceSpec
from medallion.pipeline.spec import PipelineSpec
from medallion.project import Settings

log = logging.getLogger(__name__)
T = TypeVar("T")
_READERS = 8  # threads reading new files' first lines or footers


def landing_folder(settings: Settings, source: SourceSpec) -> str:
    """The folder a file source reads: ``<landing>/<path>``; the engine setting
    ``sources.<name>`` (conf/<env>.yaml) moves it."""
    return settings.landing_path(settings.source_folder(source))


def bronze_spec(pipeline: PipelineSpec, source: SourceSpec) -> TableSpec:
    """The bronze table a source lands in."""
    return TableSpec.from_decl(pipeline.table(source.bronze_key))


def files_not_read(look: FolderLook, glob: str) -> tuple[list[str], list[str]]:
    """The files under the folder ``look`` saw (by their paths from it) that a source reading
    ``glob`` there will not read: those whose names do not match (hidden ones aside: ``.`` or
    ``_`` first, which Spark's reader skips by design), and those changed since the source read
    them (it reads a path once)."""
    unmatched = sorted(f.path for f in look.listed or ()
                       if not f.hidden and not fnmatch.fnmatch(f.name, glob))
    matched = [f for f in look.listed or () if f.read_by(glob)]
    read = look.logged() if matched else {}
    changed = sorted(f.path for f in matched
                     if f.modified_ms > read.get(f.location, f.modified_ms))
    return unmatched, changed


def files_gone_before_read(spark: SparkSession, look: FolderLook, checkpoint: str,
                           state: CheckpointState, written: int) -> list[str]:
    """The files that the batch a run planned and did not commit (``state.replayed``; killed or
    failed in it) was to read, when that batch's write did not land (``written``: the newest batch
    the table holds from the query) and the files are no longer under the folder. The batch's
    replay reads the rest of its files and is committed: Spark's reader passes over a listed file
    that is gone, without a word."""
    if state.replayed is None or written >= state.replayed:
        return []
    before = look.logged(file_source_log_batch(spark, checkpoint, state.last_committed))
    planned = look.logged(file_source_log_batch(spark, checkpoint, state.replayed))
    present = {listed.location for listed in look.listed or ()}
    folder = location(look.folder)[1].rstrip("/") + "/"
    return sorted(path.removeprefix(folder) for bucket, path in planned.keys() - before.keys()
                  if (bucket, path) not in present)


def _shown(names: list[str], separator: str = ", ") -> str:
    return separator.join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _warn_of_files_not_read(spec: TableSpec, look: FolderLook, pipeline: PipelineSpec,
                            source: SourceSpec) -> None:
    unmatched, changed = files_not_read(look, source.file_glob)
    folder = look.folder
    if unmatched:
        log.warning("%s: %d file(s) in %s are not read, since their names do not match %r: %s "
                    "(rename them, or declare %s)", spec.key, len(unmatched), folder,
                    source.file_glob, _shown(unmatched),
                    pipeline.declared_at(f"sources.{source.name}.glob"))
    if changed:
        log.warning("%s: %d file(s) in %s changed after bronze read them, and are not read again: "
                    "%s (a file is read once by its name: land a corrected file under a new name)",
                    spec.key, len(changed), folder, _shown(changed))


def _new_files(look: FolderLook, source: SourceSpec) -> list[ListedFile]:
    """The files under the folder that the source reads and has not read yet, by path."""
    read = look.logged()
    return sorted((listed for listed in look.listed or ()
                   if listed.read_by(source.file_glob) and listed.location not in read),
                  key=lambda listed: listed.path)


def _each(files: list[ListedFile], read: Callable[[ListedFile], T]) -> list[T]:
    """``read`` of each file, by a few threads at once: the reads wait on the bridge and, on S3,
    on the store, not on the processor."""
    if len(files) < 2:
        return [read(listed) for listed in files]
    pool = ThreadPoolExecutor(max_workers=_READERS, thread_name_prefix="file-heads")
    try:
        return list(pool.map(read, files))
    finally:  # a failure or Ctrl-C: the reads not started yet are dropped, not waited for
        pool.shutdown(cancel_futures=True)


def files_with_other_headers(spark: SparkSession, look: FolderLook, source: SourceSpec
                             ) -> list[str]:
    """The CSV files the source has not read yet whose header is not the declared one, each
    said with the header it has (only each new file's first line is read)."""
    new = _new_files(look, source)
    if not new:
        return []
    charset = csv_charset(source)
    heads = FileHeads(spark, look.folder)
    differing = []
    for listed, line in zip(new, _each(new, lambda f: heads.first_line(f.uri, charset)),
                            strict=True):
        found = csv_header(line, source) if line is not None else []
        if line is not None and header_differs(found, source):
            differing.append(f"{listed.path} has {shown_header(found)}")
    return differing


def parquet_files_that_do_not_fit(spark: SparkSession, look: FolderLook, source: SourceSpec
                                  ) -> tuple[list[str], list[str]]:
    """The Parquet files the source has not read yet that its reader cannot read as the declared
    columns (not Parquet, or a column of another kind), and those lacking declared columns
    (read as null), each said with why (only each new file's footer is read). Empty files are
    not looked at: Spark's reader skips them."""
    new = [listed for listed in _new_files(look, source) if listed.size > 0]
    if not new:
        return [], []
    declared = declared_schema(source)
    heads = FileHeads(spark, look.folder)

    def schema_or_why(listed: ListedFile) -> StructType | str:
        try:
            return heads.parquet_schema(listed.uri)
        except ValueError as exc:
            return f"its footer cannot be read ({exc})"

    unreadable, lacking = [], []
    for listed, found in zip(new, _each(new, schema_or_why), strict=True):
        if isinstance(found, str):
            unreadable.append(f"{listed.path}: {found}")
            continue
        missing, misfits = parquet_misfits(found, declared)
        if misfits:
            unreadable.append(f"{listed.path}: {', '.join(misfits)}")
        if missing:
            lacking.append(f"{listed.path} lacks {', '.join(missing)}")
    return unreadable, lacking


def _refuse_files_that_do_not_fit(spark: SparkSession, spec: TableSpec, look: FolderLook,
                                  pipeline: PipelineSpec, source: SourceSpec) -> None:
    """Refuse the source's new files, before any is read, when one of them its reader cannot read
    as declared (:class:`~medallion.errors.InputRefused`: this source is not run, the others
    are). A CSV file whose header is not the declared one: the reader takes columns by position,
    so a file with two columns swapped would fill each with the other's values, in every layer,
    without a word. A Parquet file that is not Parquet or has a column of another kind: its batch
    would fail, and every run after it, with the good files of the batch unread."""
    if source.format is SourceFormat.CSV:
        refused = files_with_other_headers(spark, look, source)
        what = (f"have a header other than the declared {','.join(source.header)} "
                f"({pipeline.declared_at(f'sources.{source.name}.header')}), and their columns "
                "would be read by position into other fields")
    elif source.format is SourceFormat.PARQUET:
        refused, lacking = parquet_files_that_do_not_fit(spark, look, source)
        declared = pipeline.declared_at(f"sources.{source.name}.schema")
        if lacking:
            log.warning("%s: %d file(s) in %s lack columns that %s declares, and are read with "
                        "them null: %s", spec.key, len(lacking), look.folder, declared,
                        _shown(lacking, "; "))
        what = f"cannot be read as the columns that {declared} declares"
    else:
        return
    if refused:
        raise InputRefused(spec.key, (
            f"{len(refused)} landing file(s) in {look.folder} {what}: {_shown(refused, '; ')}. "
            f"Nothing was ingested into {spec.key} (the run's other tables went on): move the "
            "file(s) out of the folder (or rename them so the source's glob does not match), and "
            "land them again with the declared columns under a new name"))


def _ingestion_due(spark: SparkSession, settings: Settings, trigger: Trigger,
                   pipeline: PipelineSpec, source: SourceSpec) -> bool:
    """Whether a file source has work: a landing folder with files not in bronze yet (or a
    trigger that keeps it running). Files there that the source never reads are warned of."""
    spec = bronze_spec(pipeline, source)
    folder, checkpoint = landing_folder(settings, source), spec.checkpoint(settings)
    # One listing, one log read, for every check.
    look = FolderLook(spark, folder, checkpoint, settings.s3)
    _warn_of_files_not_read(spec, look, pipeline, source)
    _refuse_files_that_do_not_fit(spark, spec, look, pipeline, source)
    if skippable(spark, trigger, spec.path(settings), checkpoint,
                 FolderInput(look, source.file_glob)):
        return False  # every landed file is in bronze already
    if look.listed is None:
        if trigger.kind is TriggerKind.PROCESSING_TIME and _landing_zone_exists(settings):
            # A service runs on, and the source's first files may land while it does; Spark's
            # file source needs its folder to exist when it starts.
            make_folder(spark, folder)
            log.info("%s: landing folder %s made; the service ingests what lands there",
                     spec.key, folder)
            return True
        # Nothing landed yet: no table is made for it (nor, downstream, from it). Said with -v
        # only: a pipeline whose data has not come yet is not a fault of this run.
        log.info("%s: landing folder %s does not exist; nothing to ingest", spec.key, folder)
        return False
    return True


def _landing_zone_exists(settings: Settings) -> bool:
    """Whether the landing zone exists: a local one missing is likely a path given wrong (its
    warning is said once per run), and no folder is made under it. A bucket's is taken as there."""
    landing = settings.paths.landing
    return "://" in landing or os.path.isdir(landing)


def _table_of(settings: Settings, pipeline: PipelineSpec, source: SourceSpec) -> list[TableToMake]:
    spec = bronze_spec(pipeline, source)
    return [(spec, spec.path(settings), source.bronze.doc)]


def _start_ingestion(spark: SparkSession, settings: Settings, trigger: Trigger,
                     pipeline: PipelineSpec, source: SourceSpec, due: bool) -> RunningQuery:
    spec = bronze_spec(pipeline, source)
    if not due:
        return RunningQuery(spec.key, None, idle=True)
    path, folder = spec.path(settings), landing_folder(settings, source)
    ensure_table(spark, spec, path, source.bronze.doc)
    checkpoint = spec.checkpoint(settings)
    state = guard_checkpoint(spark, path, checkpoint, spec.key)
    if state is not None and state.replayed is not None:  # a run stopped in a batch
        look = FolderLook(spark, folder, checkpoint, settings.s3)
        gone = files_gone_before_read(spark, look, checkpoint, state,
                                      committed_txn_version(spark, path, state.query_id))
        if gone:
            log.warning("%s: %d file(s) that batch %d, which a run stopped in, was to read are no "
                        "longer in %s, and their records are not ingested: %s (to ingest them, "
                        "land them again under new names)", spec.key, len(gone), state.replayed,
                        folder, _shown(gone))
    stream = read_landing(spark, source, folder, settings.streaming.max_files_per_trigger
                          ).transform(shape_bronze(source))
    writer = (
        stream.writeStream.format("delta")
        .outputMode("append")
        .queryName(spec.key)
        .option("checkpointLocation", checkpoint)
    )
    log.info("%s: ingesting %s", spec.key, folder)
    before = newest_table_version(spark, path)
    query = with_trigger(writer, trigger).start(path)
    return RunningQuery(spec.key, query, rows_out=lambda: rows_written_since(spark, path, before))


def start_bronze(spark: SparkSession, settings: Settings, trigger: Trigger) -> list[RunningQuery]:
    """Start landing what is new of every source that runs, of every pipeline, in its bronze
    table; a missing landing folder is skipped. The tables of the sources with work are made
    first, side by side (:func:`~medallion.engine.layer.start_layer`)."""
    sources = [(pipeline, source) for pipeline in settings.pipelines
               for source in settings.active_sources(pipeline)]
    if not _landing_zone_exists(settings) and any(
            source.format is not SourceFormat.KAFKA for _, source in sources):
        # One source's folder may not exist before its data first comes (said with -v only);
        # the whole zone missing is more likely a path given wrong.
        log.warning("the landing zone %s does not exist: the file sources have nothing to ingest "
                    "(paths.landing in %s/<env>.yaml, --landing or $MEDALLION_LANDING)",
                    settings.paths.landing, settings.conf_dir)
    return start_layer(spark, [_planned(spark, settings, trigger, pipeline, source)
                               for pipeline, source in sources])


def _planned(spark: SparkSession, settings: Settings, trigger: Trigger, pipeline: PipelineSpec,
             source: SourceSpec) -> PlannedQuery:
    args = (spark, settings, trigger, pipeline, source)
    tables = partial(_table_of, settings, pipeline, source)
    if source.format is SourceFormat.KAFKA:
        # Always started: only the broker knows whether its topics hold anything new.
        return PlannedQuery(source.bronze_key, due=lambda: True, tables=tables,
                            start=lambda _due: start_bronze_kafka(*args))
    return PlannedQuery(source.bronze_key, due=partial(_ingestion_due, *args), tables=tables,
                        start=partial(_start_ingestion, *args))


def start_bronze_kafka(spark: SparkSession, settings: Settings, trigger: Trigger,
                       pipeline: PipelineSpec, source: SourceSpec) -> RunningQuery:
    """Start ingesting a Kafka source's topics into its bronze table, exactly once.

    The streaming Delta sink records each batch's id in the table's log and the checkpoint keeps
    the Kafka offsets of each batch, so a restarted query re-reads a batch that did not commit
    and skips one that did. Offsets missing from Kafka are counted at the end of the run.
    """
    spec = bronze_spec(pipeline, source)
    path, checkpoint = spec.path(settings), spec.checkpoint(settings)
    ensure_table(spark, spec, path, source.bronze.doc)
    guard_checkpoint(spark, path, checkpoint, spec.key)
    stream = read_kafka_stream(spark, settings.kafka, source.topics).transform(shape_bronze_kafka(source))
    writer = (
        stream.writeStream.format("delta")
        .outputMode("append")
        .queryName(spec.key)
        .option("checkpointLocation", checkpoint)
    )
    before = newest_table_version(spark, path)
    query = with_trigger(writer, trigger).start(path)
    running = RunningQuery(spec.key, query, rows_out=lambda: rows_written_since(spark, path, before))
    running.extra = lambda run: _count_missing_offsets(spark, spec.key, path, running, run)
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


def _count_missing_offsets(spark: SparkSession, table: str, path: str, running: RunningQuery,
                           run: TableRun) -> None:
    """Count offsets this run was asked to read that never reached bronze, and log each gap.

    With ``failOnDataLoss=false`` Kafka's aged-out (or deleted) records are skipped by the
    connector; here they are counted. Transaction markers of transactional producers also take
    offsets without being records, and are counted too: the log line tells which is which.
    """
    ranges = _offset_ranges(running)
    if not ranges:
        return
    rows = spark.read.format("delta").load(path)
    condition = " OR ".join(
        f"(topic = '{topic}' AND partition = {partition} AND offset >= {low} AND offset < {high})"
        for (topic, partition), (low, high) in ranges.items()
    )
    present = {
        (row["topic"], row["partition"]): (row["n"], row["first"])
        for row in rows.where(condition).groupBy("topic", "partition")
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
                        table, missing, topic, partition, low, high, first)
    run.offsets_missing = missing_total
    if missing_total:
        run.note = f"{missing_total} Kafka offsets missing (aged out or deleted before read)"
