"""``medallion maintain``: compact the tables (OPTIMIZE, Z-ORDER or liquid clustering) and delete
unneeded files (VACUUM).

Streaming appends leave many small files; OPTIMIZE rewrites them into few large ones (ordered by
the declared ``zorder`` columns, or clustered by the declared ``cluster_by`` columns, so filters
skip files), and VACUUM deletes the files no table
version within the retention period needs. A retention shorter than 7 days is refused unless the
caller says so explicitly: a reader or a streaming query still on an older version, or a restart
of a stream that is behind, would find its files gone.

With VACUUM go the state versions a stateful query's checkpoint no longer needs. Spark deletes
them from a maintenance thread that first runs a minute after a query starts
(``spark.sql.streaming.stateStore.maintenanceInterval``), which an available-now run rarely
lives to see: without this, every batch of every run leaves its RocksDB snapshot and SST files
in the checkpoint for good. The same Spark code deletes them here, with the same rule (keep the
newest ``spark.sql.streaming.minBatchesToRetain`` versions).

A table declared with ``cluster_by`` is clustered with Delta's liquid clustering: maintenance sets
its clustering columns when they differ from the declared ones (``ALTER TABLE ... CLUSTER BY``, a
change of metadata only: the streams reading the table carry on), and its OPTIMIZE clusters the
files written since the last one (all of them, ``OPTIMIZE ... FULL``, when the columns changed).
Z-ordering instead rewrites the whole table by its columns at each OPTIMIZE.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from medallion.config.durations import parse_duration_seconds
from medallion.config.model import DEFAULT_VACUUM_RETENTION_HOURS, TriggerKind
from medallion.engine.silver.changes import ChangeShape, expired_deletes, superseded_changes
from medallion.engine.silver.job import silver_flow
from medallion.io.hadoopfs import hadoop_path, path_exists, read_text, write_text
from medallion.io.tables import TableSpec, lakehouse_tables
from medallion.pipeline.evolution import quoted
from medallion.project import Settings

log = logging.getLogger(__name__)

_RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"


class RetentionError(ValueError):
    """A VACUUM retention shorter than the safe minimum was asked for without the explicit flag."""


@dataclass(frozen=True)
class FileStats:
    """The data files of a table's current version."""

    files: int
    small_files: int
    bytes: int


@dataclass(frozen=True)
class TableMaintenance:
    """What maintenance did to one table."""

    table: str
    before: FileStats
    after: FileStats
    zorder: tuple[str, ...]
    files_removed_by_optimize: int
    files_deleted_by_vacuum: int
    state_files_deleted: int = 0  # of its query's checkpoint (old state versions)
    cluster_by: tuple[str, ...] = ()
    changes_removed: int = 0  # a type-1 change flow's applied changes below their key's latest

    @property
    def layout(self) -> str:
        """``z-order a,b``, ``cluster by a,b``, or ``-`` (compaction only)."""
        if self.cluster_by:
            return "cluster by " + ",".join(self.cluster_by)
        return "z-order " + ",".join(self.zorder) if self.zorder else "-"


def check_retention(hours: int, allow_short: bool) -> None:
    """Refuse a VACUUM retention under 7 days unless ``allow_short`` (the explicit flag)."""
    if hours < 0:
        raise RetentionError(f"VACUUM retention must not be negative, got {hours} hours")
    if hours < DEFAULT_VACUUM_RETENTION_HOURS and not allow_short:
        raise RetentionError(
            f"VACUUM retention of {hours} hours is shorter than the safe minimum of "
            f"{DEFAULT_VACUUM_RETENTION_HOURS} hours (7 days): readers and streams still on older "
            "versions would lose their files. Pass --allow-short-retention if no query runs on "
            "these tables and none is behind.")


def file_stats(spark: SparkSession, path: str, small_bytes: int) -> FileStats:
    """Count the current version's data files, those under ``small_bytes``, and their total size."""
    files = spark.read.format("delta").load(path).inputFiles()
    sizes = []
    for file in files:
        fs, target = hadoop_path(spark, file)
        sizes.append(int(fs.getFileStatus(target).getLen()))
    return FileStats(files=len(sizes), small_files=sum(1 for s in sizes if s < small_bytes),
                     bytes=sum(sizes))


class UnknownTableError(ValueError):
    """A ``--table`` that is not a table of the lakehouse (checked before Spark starts)."""


def maintained_tables(settings: Settings, names: Sequence[str] | None) -> list[TableSpec]:
    """The tables ``names`` (``layer/name`` or ``layer.name``) designate; every table when none."""
    every = lakehouse_tables(settings)
    if not names:
        return list(every)
    wanted = {name.replace(".", "/") for name in names}
    unknown = wanted - {spec.key for spec in every}
    if unknown:
        raise UnknownTableError(f"no table {', '.join(sorted(unknown))} in this lakehouse "
                                f"(tables: {', '.join(s.key for s in every)})")
    return [spec for spec in every if spec.key in wanted]


def maintain_problem(job: str, settings: Settings) -> str | None:
    """Why maintenance cannot follow the layers of ``job`` (``run --maintain``), or None."""
    if job != "all":
        return (f"maintenance goes with `all` (not {job}): it rewrites tables of every layer, and "
                "the job must hold every layer's lock")
    if settings.streaming.trigger.kind is TriggerKind.PROCESSING_TIME:
        return ("a processing-time run does not end; maintenance follows runs that do "
                "(available-now, once)")
    hours = settings.maintenance.vacuum_retention_hours
    if hours < DEFAULT_VACUUM_RETENTION_HOURS:
        return (f"maintenance.vacuum_retention is {hours} hours: a scheduled VACUUM keeps at least "
                "7 days (a shorter one is for `medallion maintain --allow-short-retention` by hand, "
                "with no query running)")
    return None


def maintained_at_path(settings: Settings, key: str) -> str:
    """Where the end of a table's last maintenance is recorded (beside the monitoring tables)."""
    return f"{settings.paths.lakehouse}/_monitoring/maintained/{key}.json"


def last_maintained(spark: SparkSession, settings: Settings, key: str) -> datetime | None:
    """When the table's last maintenance ended (None: never, or a record that cannot be read:
    a record cut short by a kill counts as none, and the table is maintained again)."""
    path = maintained_at_path(settings, key)
    if not path_exists(spark, path):
        return None
    try:
        return datetime.fromisoformat(json.loads(read_text(spark, path))["finished_at"])
    except (ValueError, KeyError, TypeError):
        return None


def due(last: Mapping[str, datetime | None], now: datetime, every: timedelta) -> list[str]:
    """The tables whose maintenance is due at ``now``: never maintained, or ``every`` or more
    since their last maintenance ended (in ``last``'s order)."""
    return [key for key, when in last.items() if when is None or now - when >= every]


def tables_due(spark: SparkSession, settings: Settings, now: datetime) -> list[str]:
    """The tables of the lakehouse that exist and whose maintenance is due at ``now``."""
    existing = [spec for spec in lakehouse_tables(settings)
                if DeltaTable.isDeltaTable(spark, spec.path(settings))]
    return due({spec.key: last_maintained(spark, settings, spec.key) for spec in existing}, now,
               timedelta(seconds=settings.maintenance.every_seconds))


def _sql_path(path: str) -> str:
    return "delta.`" + path.replace("`", "``") + "`"


def clustering_columns(spark: SparkSession, path: str) -> tuple[str, ...]:
    """The columns the Delta table at ``path`` is clustered by, as its log records them (none:
    not clustered)."""
    row = spark.sql(f"DESCRIBE DETAIL {_sql_path(path)}").select("clusteringColumns").first()
    return tuple(row[0] or ()) if row is not None else ()


def apply_clustering(spark: SparkSession, key: str, path: str,
                     declared: Sequence[str]) -> bool:
    """Make the table's clustering columns the declared ones (Delta's ``ALTER TABLE ... CLUSTER
    BY``; ``NONE`` when the declaration no longer clusters it); whether they changed."""
    held = clustering_columns(spark, path)
    if held == tuple(declared):
        return False
    columns = "(" + ", ".join(quoted(c) for c in declared) + ")" if declared else "NONE"
    spark.sql(f"ALTER TABLE {_sql_path(path)} CLUSTER BY {columns}")
    log.info("%s: clustered by %s (was %s)", key, ", ".join(declared) or "nothing",
             ", ".join(held) or "not clustered")
    return True


def maintain(spark: SparkSession, settings: Settings, tables: Sequence[str] | None = None,
             retention_hours: int | None = None, allow_short_retention: bool = False,
             optimize: bool = True, vacuum: bool = True,
             now: datetime | None = None) -> list[TableMaintenance]:
    """OPTIMIZE (Z-ordered or clustered where declared) then VACUUM each existing table; report
    file counts. A type-1 change flow's applied changes lose the changes its table no longer
    needs (:func:`remove_superseded`, which counts a delete's time kept to ``now``)."""
    hours = settings.maintenance.vacuum_retention_hours if retention_hours is None else retention_hours
    check_retention(hours, allow_short_retention)
    small = settings.maintenance.small_file_mb * 1024 * 1024
    type_one = type_one_changes(settings)
    results = []
    for spec in maintained_tables(settings, tables):
        path = spec.path(settings)
        if not DeltaTable.isDeltaTable(spark, path):
            log.info("%s: no table at %s; skipped", spec.key, path)
            continue
        table = DeltaTable.forPath(spark, path)
        before = file_stats(spark, path, small)
        zorder = settings.maintenance.zorder.get(spec.key, ())
        cluster_by = settings.maintenance.cluster_by.get(spec.key, ())
        reclustered = apply_clustering(spark, spec.key, path, cluster_by)
        superseded = (remove_superseded(spark, path, type_one[spec.key], now)
                      if optimize and spec.key in type_one else 0)
        removed = 0
        if optimize:
            if cluster_by:  # OPTIMIZE clusters a clustered table; FULL rewrites it all by new keys
                report = spark.sql(f"OPTIMIZE {_sql_path(path)}{' FULL' if reclustered else ''}")
            else:
                builder = table.optimize()
                report = builder.executeZOrderBy(*zorder) if zorder else builder.executeCompaction()
            row = report.select("metrics.numFilesRemoved").first()
            removed = int(row[0] or 0) if row is not None else 0
        deleted = state_deleted = 0
        if vacuum:
            deleted = _vacuum(spark, table, hours)
            state_deleted = delete_old_state(spark, spec.checkpoint(settings),
                                             state_versions_to_retain(spark))
        after = file_stats(spark, path, small)
        done = TableMaintenance(spec.key, before, after, zorder, removed, deleted, state_deleted,
                                cluster_by, superseded)
        results.append(done)
        if optimize and vacuum:  # a whole maintenance: what `run --maintain` counts from
            write_text(spark, maintained_at_path(settings, spec.key), json.dumps({
                "table": spec.key, "finished_at": datetime.now(timezone.utc).isoformat(),
                "files_before": before.files, "files_after": after.files}) + "\n")
        log.info("%s: %d files (%d small) -> %d files (%d small); vacuum deleted %d, "
                 "old state %d, superseded changes %d", spec.key, before.files, before.small_files,
                 after.files, after.small_files, deleted, state_deleted, superseded)
    return results


@dataclass(frozen=True)
class TypeOneChanges:
    """A type-1 flow's applied changes: the ``shape`` of its changes, and for how many seconds
    after its ingestion a deleted key's delete is kept (None: for good)."""

    shape: ChangeShape
    keep_deletes_seconds: int | None = None


def type_one_changes(settings: Settings) -> dict[str, TypeOneChanges]:
    """The applied changes of every change flow kept as SCD type 1, by table key. A snapshot
    flow's are kept whole: an export that comes after later ones is compared with the exports
    around it, which its applied changes say."""
    found = {}
    for pipeline in settings.pipelines:
        for silver in pipeline.silver:
            changes = silver.changes
            if changes is not None and changes.scd == 1 and not changes.snapshot:
                shape = silver_flow(settings, pipeline, silver).transforms.changes
                assert shape is not None
                key = f"silver.{silver.name}.changes.keep_deletes_for"
                kept = (None if changes.keep_deletes_for is None else parse_duration_seconds(
                    changes.keep_deletes_for, key, pipeline.source_of(key)))
                found[silver.changes_key] = TypeOneChanges(shape, kept)
    return found


def remove_superseded(spark: SparkSession, path: str, flow: TypeOneChanges,
                      now: datetime | None = None) -> int:
    """Delete the applied changes of a type-1 flow below their key's latest (one MERGE on the key
    and sequence), and each deleted key's delete once kept its declared time; return how many.
    The table's rows stay the same, and so does what a later change does, but for a change of a
    key whose delete was removed: older than the delete, it is applied as the key's first.
    ``now``: what the time kept counts to (the clock's time by default)."""
    shape = flow.shape
    applied = DeltaTable.forPath(spark, path).toDF()
    stale = superseded_changes(applied, shape)
    if flow.keep_deletes_seconds is not None:
        before = (now or datetime.now(timezone.utc)) - timedelta(seconds=flow.keep_deletes_seconds)
        stale = stale.unionByName(expired_deletes(applied, shape, before))
    stale = stale.persist()
    try:
        count = stale.count()  # read before the MERGE changes the table it is read from
        if count:
            identity = (*shape.keys, *shape.sequence)
            condition = " AND ".join(f"t.`{c}` <=> s.`{c}`" for c in identity)
            (DeltaTable.forPath(spark, path).alias("t").merge(stale.alias("s"), condition)
             .whenMatchedDelete().execute())
        return count
    finally:
        stale.unpersist()


_MIN_BATCHES_TO_RETAIN = "spark.sql.streaming.minBatchesToRetain"
# A state store's version files: RocksDB snapshots (``<version>.zip``, or with a unique id
# ``<version>_<id>.zip``) and changelogs.
_STATE_VERSION_FILE = re.compile(r"^\d+(_[0-9a-fA-F-]+)?\.(zip|changelog)$")


def state_versions_to_retain(spark: SparkSession) -> int:
    """How many of the newest state versions a checkpoint keeps: Spark's own setting (100)."""
    return int(spark.conf.get(_MIN_BATCHES_TO_RETAIN, "100") or 100)


def delete_old_state(spark: SparkSession, checkpoint: str, retain: int) -> int:
    """Delete the state versions of ``checkpoint``'s RocksDB stores older than the newest
    ``retain``, and the SST files only they used; how many files went.

    Each store (per operator, partition and store name) is cleaned by Spark's own
    ``RocksDBFileManager.deleteOldVersions``, what its maintenance thread calls, with the
    session's state store settings (codec, the checksum files Spark 4.1+ writes beside each
    state file). A checkpoint without state, or with another provider's state, is left as it is.
    """
    if retain < 1:
        raise ValueError(f"at least the newest state version must be kept, got {retain}")
    if not path_exists(spark, f"{checkpoint}/state"):
        return 0
    local = tempfile.mkdtemp(prefix="medallion-state-")  # where the manager unzips metadata
    deleted = 0
    try:
        for store in _rocksdb_stores(spark, f"{checkpoint}/state"):
            before = _count_files(spark, store)
            # every version past the newest ``retain``, with no cap per call, none required
            _state_file_manager(spark, store, local).deleteOldVersions(retain, -1, 0)
            deleted += before - _count_files(spark, store)
    finally:
        shutil.rmtree(local, ignore_errors=True)
    return deleted


def _state_file_manager(spark: SparkSession, store: str, local: str) -> Any:
    """Spark's ``RocksDBFileManager`` for the store folder ``store``, made as a RocksDB state
    store of this session makes it (Spark 4.2: with the store's settings and whether state
    files carry checksum files)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    state = jvm.org.apache.spark.sql.execution.streaming.state
    conf = state.StateStoreConf.apply(spark._jsparkSession.sessionState().conf())
    return state.RocksDBFileManager(
        store, jvm.java.io.File(local), spark.sparkContext._jsc.hadoopConfiguration(),
        conf.compressionCodec(), "medallion maintain", conf,
        conf.checkpointFileChecksumEnabled(),
        jvm.scala.Some(conf.fileChecksumThreadPoolSize()))


def _rocksdb_stores(spark: SparkSession, folder: str, depth: int = 0) -> Iterator[str]:
    """The RocksDB store folders under a checkpoint's ``state``: ``<operator>/<partition>``, and
    ``<operator>/<partition>/<store>`` for an operator with several stores (a join)."""
    fs, path = hadoop_path(spark, folder)
    entries = fs.listStatus(path)
    if any(e.isFile() and _STATE_VERSION_FILE.match(e.getPath().getName()) for e in entries):
        yield folder
        return
    if depth < 3:
        for entry in entries:
            name = entry.getPath().getName()
            if entry.isDirectory() and not name.startswith(("_", ".")) and name != "SSTs":
                yield from _rocksdb_stores(spark, f"{folder}/{name}", depth + 1)


def _count_files(spark: SparkSession, folder: str) -> int:
    """Files under ``folder`` (checksum files aside)."""
    fs, path = hadoop_path(spark, folder)
    files, found = fs.listFiles(path, True), 0
    while files.hasNext():
        found += not files.next().getPath().getName().endswith(".crc")
    return found


def _vacuum(spark: SparkSession, table: DeltaTable, hours: int) -> int:
    """VACUUM ``table``; Delta's own safety check is lifted only for an allowed short retention."""
    short = hours < DEFAULT_VACUUM_RETENTION_HOURS
    previous = spark.conf.get(_RETENTION_CHECK, "true")
    if short:
        spark.conf.set(_RETENTION_CHECK, "false")
    try:
        before = table.history(1).select("version").first()
        table.vacuum(float(hours))
        # VACUUM END commits numDeletedFiles in its operation metrics.
        ends = (table.history().where(f"version > {before[0] if before else -1}")
                .where("operation = 'VACUUM END'").select("operationMetrics").collect())
        return sum(int((row[0] or {}).get("numDeletedFiles", 0)) for row in ends)
    finally:
        if short:
            spark.conf.set(_RETENTION_CHECK, previous or "true")


_COLUMNS = ("table", "files before", "small before", "files after", "small after", "vacuumed",
            "old state", "superseded", "layout")


def format_maintenance(results: Sequence[TableMaintenance]) -> str:
    """A fixed-width table of file counts before and after, one line per table."""
    rows = [(r.table, str(r.before.files), str(r.before.small_files), str(r.after.files),
             str(r.after.small_files), str(r.files_deleted_by_vacuum), str(r.state_files_deleted),
             str(r.changes_removed), r.layout)
            for r in results]
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c)
              for i, c in enumerate(_COLUMNS)]
    lines = ["  ".join(c.ljust(w) if i in (0, 8) else c.rjust(w)
                       for i, (c, w) in enumerate(zip(_COLUMNS, widths, strict=True)))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) if i in (0, 8) else v.rjust(w)
                        for i, (v, w) in enumerate(zip(row, widths, strict=True))) for row in rows]
    return "\n".join(lines)
