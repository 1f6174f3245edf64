"""Writers to Delta tables that stay exactly-once when a micro-batch is replayed.

A streaming Delta sink is idempotent by itself (it records the query id and batch id in the
table's log). Writes made inside ``foreachBatch`` are made idempotent with Delta's transaction
identifiers: ``txnAppId`` (derived from the query id kept in the checkpoint) and ``txnVersion``
(the batch id). Delta skips a write whose (app id, version) it has already committed, so a batch
replayed after a crash changes no table twice.

Delta answers that check from the table's whole state, rebuilt for each new version: a few Spark
jobs before every such write. A batch writes its table (and records the transaction id there)
with the check; its other appends (metrics, quarantine, quality results) go through
:class:`BatchAppends`, which checks nothing on a batch's first attempt, the usual case, and on
the replay of a batch looks for the mark its earlier attempt left in each commit.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import reduce
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter

from medallion.config.model import S3Settings, Trigger, TriggerKind
from medallion.errors import CheckpointError
from medallion.io.catalog import clear_stale_entry, documented_schema, table_comment
from medallion.io.checkpoints import (
    CheckpointState,
    check_not_behind,
    check_state,
    inspect_checkpoint,
)
from medallion.io.failures import failing_as
from medallion.io.hadoopfs import delete_path, hadoop_path, path_exists, read_text
from medallion.io.sinks.rows import (
    NotAppended,
    append_with_delta_rs,
    delta_rs_can_write,
    location_for_writing,
)
from medallion.io.sources.delta import newest_table_version
from medallion.io.tables import TableSpec
from medallion.pipeline.model import TableDoc

log = logging.getLogger(__name__)

_TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
_TXN_VERSION = "spark.databricks.delta.write.txnVersion"
DELETION_VECTORS = "delta.enableDeletionVectors"


def with_trigger(writer: DataStreamWriter, trigger: Trigger) -> DataStreamWriter:
    """Apply the run's trigger to a stream writer."""
    if trigger.kind is TriggerKind.AVAILABLE_NOW:
        return writer.trigger(availableNow=True)
    if trigger.kind is TriggerKind.ONCE:
        return writer.trigger(once=True)
    return writer.trigger(processingTime=trigger.interval or "1 minute")


def ensure_table(spark: SparkSession, spec: TableSpec, path: str,
                 doc: TableDoc | None = None) -> None:
    """Create the Delta table if it does not exist, and register it as ``<layer>.<name>``.

    ``doc`` (the table's declaration in its pipeline) gives the table and column comments it is
    created with, so the first run already commits them with the table. A table that exists is
    left alone, without a Spark job or a catalog call (the catalog's preparation keeps existing
    tables registered). A table whose creation was killed before its first commit (a log folder
    without a commit) is created again. A spec with ``deletion_vectors`` makes the table with them.
    """
    if committed_table_at(spark, path):
        return
    # One Delta operation commits the table and registers it (an external table at ``path``),
    # without the catalog round trips and DESCRIBE DETAIL of registering it afterwards. Any entry
    # of that name is stale, since no table is at ``path``: it would turn the creation into a no-op.
    clear_stale_entry(spark, spec)
    builder = (
        DeltaTable.createIfNotExists(spark)
        .tableName(spec.qualified_name)
        .location(path)
        .addColumns(documented_schema(spec, doc))
        .comment(table_comment(spec, doc))
    )
    if spec.deletion_vectors:
        builder = builder.property(DELETION_VECTORS, "true")
    builder.execute()


TableToMake = tuple[TableSpec, str, TableDoc | None]  # a table, its path, its declaration


def ensure_tables(spark: SparkSession, tables: Iterable[TableToMake]) -> None:
    """:func:`ensure_table` for each of ``tables``, those not yet committed side by side.

    A layer's start (:func:`medallion.engine.layer.start_layer`) makes the tables of its queries with
    work before starting them: on a new lakehouse, two in bronze, four in silver and five in gold
    for the default pipeline. Each creation is
    a Delta commit, a catalog entry and a small Spark job: 0.2-0.9 s of mostly waiting driver
    work, which threads overlap. A table is made once however often it is named; an error names
    its table.
    """
    pending: dict[str, TableToMake] = {}
    for spec, path, doc in tables:
        if path not in pending and not committed_table_at(spark, path):
            pending[path] = (spec, path, doc)

    def make(table: TableToMake) -> None:
        with failing_as(table[0].key):
            ensure_table(spark, *table)

    if len(pending) < 2:
        for table in pending.values():
            make(table)
        return
    with ThreadPoolExecutor(max_workers=min(len(pending), 4),
                            thread_name_prefix="medallion-create") as pool:
        for _ in pool.map(make, pending.values()):
            pass


def committed_table_at(spark: SparkSession, path: str) -> bool:
    """Whether a committed Delta table is at ``path``; a folder whose Delta log holds no commit
    is removed first (and then there is no table).

    A process killed while creating a table (Delta stages the commit under
    ``_delta_log/_staged_commits`` first) leaves a log folder without version 0. Delta then takes
    the folder for a table and fails to read it, on every later run. Nothing was ever committed
    there, so nothing can be lost by starting the creation over.
    """
    fs, log_path = hadoop_path(spark, f"{path}/_delta_log")
    first, last_checkpoint = (hadoop_path(spark, f"{path}/_delta_log/{name}")[1]
                              for name in ("0" * 20 + ".json", "_last_checkpoint"))
    if fs.exists(first) or fs.exists(last_checkpoint):
        return True  # the usual case, without listing a long log
    if not fs.exists(log_path):
        return False
    for status in fs.listStatus(log_path):
        name = status.getPath().getName()
        if name[:20].isdigit() and (name.endswith(".json") or ".checkpoint" in name):
            return True  # a committed table (a commit or a checkpoint)
    log.warning("%s: a table creation was interrupted before its first commit; creating it again",
                path)
    delete_path(spark, path)
    return False


def query_id_of(spark: SparkSession, checkpoint: str) -> str:
    """The streaming query id recorded in a checkpoint's ``metadata`` file."""
    return str(json.loads(read_text(spark, f"{checkpoint}/metadata"))["id"])


def txn_app_id(table: str, query_id: str) -> str:
    """The ``txnAppId`` a ``foreachBatch`` writer of ``table`` commits its MERGEs and appends with.

    (The streaming Delta sink, and the writers that carry on a table it wrote, use the query id
    itself.)
    """
    return f"medallion-{table}-{query_id}"


def guard_checkpoint(spark: SparkSession, table_path: str, checkpoint: str, table: str, *,
                     app_id: Callable[[str], str] | None = None,
                     stateful: bool = False) -> CheckpointState | None:
    """Refuse to start a query whose checkpoint would silently reprocess, skip or lose data.

    A table that a stream has written to, whose checkpoint is gone, would get every input again
    if the query simply started over. A checkpoint that is damaged, lost a stateful query's
    state, or is older than the table (see ``medallion.io.checkpoints``) fails the same way, loudly.
    ``app_id`` maps the checkpoint's query id to the transaction id the query's writer commits
    ``table_path`` with (None: the streaming Delta sink's, the query id).
    Returns what the checkpoint holds (None: there is none yet).
    """
    if not path_exists(spark, f"{checkpoint}/offsets"):
        if newest_table_version(spark, table_path) > 0:
            raise CheckpointError(
                table,
                f"checkpoint {checkpoint} is missing but the table at {table_path} already "
                "holds streamed data; starting over would process every input again. Restore the "
                "checkpoint, or rebuild the table and everything downstream of it.",
            )
        return None
    state = inspect_checkpoint(spark, table, checkpoint)
    if stateful:
        check_state(spark, table, checkpoint, state)
    if state.query_id:
        written = committed_txn_version(spark, table_path, (app_id or str)(state.query_id))
        check_not_behind(table, checkpoint, table_path, state, written)
    return state


def committed_txn_version(spark: SparkSession, path: str, app_id: str) -> int:
    """The newest ``txnVersion`` the Delta table at ``path`` committed for ``app_id`` (-1: none).

    Delta keeps these (per app id, the newest version) in the table's snapshot to skip replayed
    writes; it has no public API for them, so this reads the snapshot through the JVM
    (``DeltaLog.update(stalenessAcceptable, checkIfUpdatedSinceTs, catalogTable)``, the same
    from delta-spark 4.0 to 4.4).
    """
    if not DeltaTable.isDeltaTable(spark, path):
        return -1
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
    none = jvm.scala.Option.empty()
    found = delta_log.update(False, none, none).transactions().get(app_id)
    return int(found.get()) if found.isDefined() else -1


def rows_written_since(spark: SparkSession, path: str, version: int) -> int:
    """Rows that commits after ``version`` added to the table (from their operation metrics,
    read from those commits' files alone)."""
    total = 0
    for newer, info in _commits_newest_first(spark, path):
        if newer <= version:
            break
        metrics = info.get("operationMetrics") or {}
        total += int(metrics.get("numOutputRows", metrics.get("numTargetRowsInserted", 0)))
    return total


@contextmanager
def _transaction(spark: SparkSession, app_id: str, version: int) -> Iterator[None]:
    spark.conf.set(_TXN_APP_ID, app_id)
    spark.conf.set(_TXN_VERSION, str(version))
    try:
        yield
    finally:
        spark.conf.unset(_TXN_APP_ID)
        spark.conf.unset(_TXN_VERSION)


# Rows of a file of a table written in order of a column (:func:`append_batch`'s ``sorted_by``).
SORTED_FILE_ROWS = 250_000


def append_batch(df: DataFrame, path: str, app_id: str, batch_id: int,
                 sorted_by: str | None = None) -> None:
    """Append a micro-batch once: a replay of the same (app id, batch id) is skipped by Delta.

    With ``sorted_by``, each task writes its rows in that column's order, in files of at most
    :data:`SORTED_FILE_ROWS` rows: each file then holds a narrow range of it, and a read bounded
    by it (a few windows' starts) skips the other files by their statistics."""
    writer = (df.sortWithinPartitions(sorted_by) if sorted_by else df).write.format("delta")
    if sorted_by:
        writer = writer.option("maxRecordsPerFile", SORTED_FILE_ROWS)
    (
        writer.mode("append")
        .option("txnAppId", app_id)
        .option("txnVersion", batch_id)
        .save(path)
    )


def never_written(spark: SparkSession, path: str) -> bool:
    """Whether the Delta table at ``path`` is as its creation left it: one commit (version 0)
    that adds no file. Read from the log's files, without a Spark job; False when unsure."""
    if newest_table_version(spark, path) != 0:
        return False
    try:
        first = read_text(spark, f"{path}/_delta_log/{0:020d}.json")
    except Exception:  # noqa: BLE001 - unreadable: not known to be empty
        return False
    return not any("add" in json.loads(line) for line in first.splitlines() if line.strip())


def append_marked(df: DataFrame, path: str, marker: str) -> None:
    """Append ``df`` with ``marker`` as the commit's ``userMetadata``, a blind append.

    Unlike :func:`append_batch`, Delta checks no transaction id here, and so does not rebuild the
    table's state (every file it holds) before committing: the append costs the same however many
    files the table has. A writer whose retries must not duplicate a commit that did land looks for
    its marker with :func:`marked_since` before appending again.
    """
    df.write.format("delta").mode("append").option("userMetadata", marker).save(path)


# Tables delta-rs found a feature in that it cannot write: this process appends to them with Spark.
_SPARK_WRITES: set[str] = set()


def append_rows(spark: SparkSession, s3: S3Settings, spec: TableSpec, path: str,
                rows: Sequence[Mapping[str, Any]], marker: str) -> None:
    """Append ``rows`` the driver holds (dicts by column name) to the Delta table ``spec`` at
    ``path`` in one commit with ``marker`` as its ``userMetadata``, a blind append like
    :func:`append_marked`.

    delta-rs writes it when it can (:mod:`medallion.io.sinks.rows`), Spark otherwise: for a table
    delta-rs cannot write, and after a failed attempt whose commit did not land (one that did is
    found by its mark, and not written again).
    """
    schema = spec.schema
    unknown = sorted({name for row in rows for name in row} - set(schema.fieldNames()))
    if unknown:
        raise ValueError(f"{spec.key}: no column {', '.join(unknown)} to append to")
    if path not in _SPARK_WRITES and delta_rs_can_write(path, s3):
        try:
            append_with_delta_rs(location_for_writing(path, s3), rows, marker)
            return
        except NotAppended as failed:
            if failed.unsupported:
                _SPARK_WRITES.add(path)
            log.info("%s: delta-rs did not append (%s); appending with Spark", path, failed)
            if failed.before is not None and marked_since(spark, path, marker, failed.before):
                return  # the commit landed before the error
    append_marked(spark.createDataFrame(list(rows), schema).coalesce(1), path, marker)


def seen_version(spark: SparkSession, path: str) -> int:
    """A version of the Delta table at ``path`` that is not newer than its newest (-1: none yet):
    the one this session last read, without listing the table's log when it has read it before.
    Taken before an append, every commit the append can make is newer."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    snapshot = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(
        spark._jsparkSession, path).unsafeVolatileSnapshot()
    return -1 if snapshot is None else int(snapshot.version())


def _commits_newest_first(spark: SparkSession, path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """The ``commitInfo`` of each commit of the Delta table at ``path``, newest first, read from
    its commit files (no snapshot is built); ends at the first commit no longer kept."""
    for version in range(newest_table_version(spark, path), -1, -1):
        file = f"{path}/_delta_log/{version:020d}.json"
        if not path_exists(spark, file):
            return  # cleaned up with the log's old entries
        info: dict[str, Any] = {}
        for line in read_text(spark, file).splitlines():
            if line.startswith('{"commitInfo"'):
                info = json.loads(line)["commitInfo"]
                break
        yield version, info


def marked_since(spark: SparkSession, path: str, marker: str, version: int) -> bool:
    """Whether a commit newer than ``version`` of the Delta table at ``path`` has ``marker`` as
    its ``userMetadata`` (reads only the commits after ``version``)."""
    for newer, info in _commits_newest_first(spark, path):
        if newer <= version:
            return False
        if info.get("userMetadata") == marker:
            return True
    return False


# How far before a batch's planning its replay looks for its earlier attempt's commits: the writer
# that made them may have run on another host than the one that planned the batch (clock skew).
_CLOCK_SKEW_MS = 10 * 60 * 1000


def marked_after(spark: SparkSession, path: str, marker: str, since_ms: int) -> bool:
    """Whether a commit of the Delta table at ``path`` made at ``since_ms`` or later has
    ``marker`` as its ``userMetadata``.

    Reads the table's commits from the newest back to the first one older than ``since_ms``
    (by its ``commitInfo.timestamp``, the writing driver's clock) or one no longer kept: the
    search costs the commits made since then, not the table's history.
    """
    for _, info in _commits_newest_first(spark, path):
        if info.get("userMetadata") == marker:
            return True
        if int(info.get("timestamp", 0)) < since_ms:
            return False
    return False


@dataclass(frozen=True)
class BatchAppends:
    """How a ``foreachBatch`` writer appends a batch to tables other than its own, once.

    Each such append is a blind one (no transaction id for Delta to check), marked with the
    writer's app id and the batch id in the commit's ``userMetadata``. Only the batch the
    checkpoint planned and did not commit (``replayed``: Spark runs it first when the query
    starts) can have been written before, by a run that died; its appends first look for their
    mark among the commits made since the batch was planned (``planned_ms``, less a margin for
    clock skew), and skip a table that has it. Any later batch is a first attempt.
    """

    replayed: int | None = None
    planned_ms: int = 0
    s3: S3Settings = field(default_factory=S3Settings)  # how rows the driver holds reach S3

    @classmethod
    def after(cls, state: CheckpointState | None, s3: S3Settings) -> BatchAppends:
        """For a query starting from the checkpoint ``state`` (None: a new checkpoint)."""
        if state is None or state.replayed is None:
            return cls(s3=s3)
        return cls(state.replayed, state.last_planned_ms, s3)

    def append(self, df: DataFrame, path: str, app_id: str, batch_id: int) -> bool:
        """Append ``df`` to the Delta table at ``path`` for batch ``batch_id`` of the writer
        ``app_id`` unless that batch's earlier attempt did; whether it appended."""
        marker = self._marker(df.sparkSession, path, app_id, batch_id)
        if marker is not None:
            append_marked(df, path, marker)
        return marker is not None

    def append_rows(self, spark: SparkSession, spec: TableSpec, path: str,
                    rows: Sequence[Mapping[str, Any]], app_id: str, batch_id: int) -> bool:
        """:meth:`append` for rows the driver holds (dicts by column name), through
        :func:`append_rows`."""
        marker = self._marker(spark, path, app_id, batch_id)
        if marker is not None:
            append_rows(spark, self.s3, spec, path, rows, marker)
        return marker is not None

    def _marker(self, spark: SparkSession, path: str, app_id: str, batch_id: int) -> str | None:
        """The mark of the batch's append to ``path``; None if its earlier attempt made it."""
        marker = f"medallion-batch {app_id} {batch_id}"
        if batch_id == self.replayed and marked_after(spark, path, marker,
                                                       self.planned_ms - _CLOCK_SKEW_MS):
            log.info("%s: batch %d of %s was appended before the run that wrote it died; "
                     "not again", path, batch_id, app_id)
            return None
        return marker


def greater_than(columns: Sequence[str]) -> str:
    """SQL: the source row ``s`` is greater than the target ``t`` by ``columns`` (nulls lowest)."""
    return ranks_above([(column, True) for column in columns])


def ranks_above(order: Sequence[tuple[str, bool]]) -> str:
    """SQL: the source row ``s`` comes before the target ``t`` in ``order``, column by column:
    ``(column, True)`` puts the greatest first (nulls last), ``(column, False)`` the least
    first (nulls last)."""
    (column, greatest), rest = order[0], order[1:]
    first = f"`{column}`"
    before = (f"(s.{first} {'>' if greatest else '<'} t.{first} "
              f"OR (t.{first} IS NULL AND s.{first} IS NOT NULL))")
    if not rest:
        return before
    return f"({before} OR (s.{first} <=> t.{first} AND {ranks_above(rest)}))"


@dataclass(frozen=True)
class BatchRange:
    """A batch's row count and, for one column, its least and greatest value and whether any row
    has none (``low`` None: no column, or no value)."""

    rows: int
    low: Any = None
    high: Any = None
    nulls: bool = False


def batch_range(df: DataFrame, column: str | None) -> BatchRange:
    """Count ``df`` and take ``column``'s range in the same pass (one Spark job)."""
    if column is None:
        return BatchRange(df.count())
    value = F.col(f"`{column}`")
    rows, low, high, nulls = df.agg(F.count(F.lit(1)), F.min(value),  # type: ignore[misc]
                                    F.max(value), F.count_if(value.isNull())).first()
    return BatchRange(int(rows), low, high, bool(nulls))


def upsert_batch(
    df: DataFrame, path: str, keys: Sequence[str], app_id: str, batch_id: int,
    latest_by: Sequence[str] = (), prune_by: str | None = None, within: BatchRange | None = None,
    replace_if: str | None = None,
) -> None:
    """MERGE a micro-batch on ``keys`` (update the matched rows, insert the rest), once.

    Keys compare null-safe (``<=>``): a group whose key is null (a declared grouping column with
    no value) is one row, updated in place, not a new row at every update. With ``latest_by`` a
    matched row is replaced only by a greater one (by those columns in order, nulls lowest);
    with ``replace_if`` (SQL over ``s`` and ``t``), only where that holds.

    ``prune_by``, one of the keys (a window's start): the condition also bounds the target's
    column to the batch's range of it, as literals, so that Delta skips every file of the table
    outside that range (its min/max statistics) instead of scanning the whole table. A matched row
    has the batch's value, so the bound changes no match: the MERGE costs what the batch's windows
    reach, not what the table's history holds. ``within``: that range, when the caller measured it
    already (of these rows or of more); else it is measured here.
    """
    condition = F.expr(" AND ".join(f"t.`{key}` <=> s.`{key}`" for key in keys))
    if prune_by is not None:
        bounds = within if within is not None else batch_range(df, prune_by)
        if bounds.low is not None:
            column = F.col(f"t.`{prune_by}`")
            inside = (column >= F.lit(bounds.low)) & (column <= F.lit(bounds.high))
            # A batch row whose value is null matches a target row whose value is null.
            condition = condition & ((inside | column.isNull()) if bounds.nulls else inside)
    spark = df.sparkSession
    with _transaction(spark, app_id, batch_id):
        (
            DeltaTable.forPath(spark, path).alias("t")
            .merge(df.alias("s"), condition)
            .whenMatchedUpdateAll(condition=replace_if or (greater_than(latest_by) if latest_by else None))
            .whenNotMatchedInsertAll()
            .execute()
        )


STALE = "__stale"  # a source row of :func:`replace_batch` that deletes its target row


def replace_batch(rows: DataFrame, region: DataFrame | None, path: str, keys: Sequence[str],
                  app_id: str, batch_id: int, prune_by: str | None = None, low: Any = None,
                  high: Any = None) -> int:
    """Replace a region of the table with ``rows`` in one MERGE on ``keys``, once: matched rows
    updated, new ones inserted, and the rows of ``region`` (their keys, read from the table
    before) that ``rows`` do not hold deleted. ``prune_by`` with ``low`` and ``high``: every row
    of both lies in that range of the column, which bounds the MERGE's scan of the table as in
    :func:`upsert_batch`. Returns the rows deleted.

    A region the table holds nothing of (every row new, as when a batch reaches only windows or
    keys not seen before) is written by an append with the same transaction id: what the MERGE
    would write, without its joins against the table."""
    spark = rows.sparkSession
    stale = held = None
    if region is not None:
        # Materialized before the MERGE, which changes the table the region was read from (a
        # checkpoint, not a cache: Delta plans a cached read of a table again after writing it).
        held = region.select(*keys).localCheckpoint(eager=True)
    try:
        if held is not None and held.isEmpty():
            append_batch(rows, path, app_id, batch_id)
            return 0
        if held is not None:
            same = reduce(lambda a, b: a & b, (F.col(f"r.`{k}`").eqNullSafe(F.col(f"n.`{k}`"))
                                               for k in keys))
            stale = (held.alias("r")
                     .join(rows.select(*keys).alias("n"), same, "left_anti")
                     .select(*(F.col(f"r.`{k}`").alias(k) for k in keys)).persist())
        deleted = stale.count() if stale is not None else 0
        columns = rows.columns
        source = rows.withColumn(STALE, F.lit(False))
        if deleted:
            assert stale is not None
            source = source.unionByName(stale.withColumn(STALE, F.lit(True)),
                                        allowMissingColumns=True)
        condition = F.expr(" AND ".join(f"t.`{key}` <=> s.`{key}`" for key in keys))
        if prune_by is not None and low is not None and high is not None:
            column = F.col(f"t.`{prune_by}`")
            condition = condition & (column >= F.lit(low)) & (column <= F.lit(high))
        values: dict[str, str | Column] = {c: F.col(f"s.`{c}`") for c in columns}
        with _transaction(spark, app_id, batch_id):
            (
                DeltaTable.forPath(spark, path).alias("t")
                .merge(source.alias("s"), condition)
                .whenMatchedDelete(condition=F.col(f"s.{STALE}"))
                .whenMatchedUpdate(set=values)
                .whenNotMatchedInsert(condition=~F.col(f"s.{STALE}"), values=values)
                .execute()
            )
        return deleted
    finally:
        for frame in (stale, held):
            if frame is not None:
                frame.unpersist()
