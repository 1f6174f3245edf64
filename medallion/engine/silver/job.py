"""The silver job: one streaming query per declared silver table, of every pipeline.

Each silver table of ``conf/pipelines/<name>.yaml`` is compiled (:mod:`medallion.engine.silver.compile`)
and fed by a stream of its bronze input. Each micro-batch is split into valid rows and
quarantined ones, deduplicated against itself and against what the table already holds (scope
``table``: a re-delivered row is removed however late it comes, and counted), enriched with the
dimensions as they stand, gated, and written so that a replayed batch changes nothing twice: the
batch's metrics row first, then the quarantine (marked appends, see
:class:`medallion.io.sinks.delta.BatchAppends`), the table last, with a Delta transaction id.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import partial

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from medallion.config.model import Trigger
from medallion.engine.idle import DeltaInput, skippable
from medallion.engine.layer import PlannedQuery, idle, start_layer
from medallion.engine.silver.changes import (
    EXPORT_IN_BATCH,
    EXPORT_ORDINAL,
    EXPORT_TARGET,
    export_contents,
    export_marks,
    export_nodes,
    fresh_changes,
    held_on,
    is_hold,
    is_mark,
    scd1_rows,
    scd2_versions,
    snapshot_changes,
)
from medallion.engine.silver.compile import (
    BatchTimes,
    SilverTransforms,
    batch_counts,
    compile_silver,
    latest_rows,
)
from medallion.engine.silver.parse import REASONS
from medallion.engine.streaming import RunningQuery, TableRun, cache_batch
from medallion.io.sinks.delta import (
    BatchAppends,
    TableToMake,
    append_batch,
    committed_txn_version,
    ensure_table,
    guard_checkpoint,
    query_id_of,
    replace_batch,
    txn_app_id,
    upsert_batch,
    with_trigger,
)
from medallion.io.sinks.evolution import keep_change_definition
from medallion.io.sources.delta import newest_table_version, read_table, read_table_stream
from medallion.io.tables import QUALITY_RESULTS, SILVER_BATCH_METRICS, TableSpec
from medallion.pipeline.evolution import change_definition
from medallion.pipeline.graph import stages
from medallion.pipeline.kinds import Layer
from medallion.pipeline.model import DELETED, DimensionSpec, ExpectationSpec, SilverSpec, TableDoc
from medallion.pipeline.spec import PipelineSpec
from medallion.project import Settings
from medallion.quality.gate import QualityGate

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SilverFlow:
    """A declared silver table: the bronze table it reads, the dimensions it looks up, where its
    rows and rejects go, and its compiled transforms."""

    pipeline: PipelineSpec
    silver: SilverSpec
    spec: TableSpec
    quarantine: TableSpec
    input: TableSpec  # the bronze table read: the declared one, or the alternative that runs
    dimensions: tuple[tuple[DimensionSpec, TableSpec], ...]
    transforms: SilverTransforms
    docs: Mapping[str, TableDoc]  # the declared comments of the tables it reads and writes
    expectations: tuple[ExpectationSpec, ...]  # its gate's (none when the gates are off)
    changes: TableSpec | None = None  # a change flow's applied changes

    @property
    def input_columns(self) -> tuple[str, ...]:
        """What the query reads of its input: the raw record and the kept columns."""
        return tuple(dict.fromkeys((*self.transforms.record, *self.silver.keep)))


def silver_flow(settings: Settings, pipeline: PipelineSpec, silver: SilverSpec) -> SilverFlow:
    """The flow of one declared silver table (no Spark needed until a transform runs)."""
    input_key = settings.input_of(pipeline, silver.input)
    input_decl = pipeline.table(input_key)
    dimensions = tuple(
        (pipeline.dimension(e.dimension),
         TableSpec.from_decl(pipeline.table(pipeline.dimension_input(pipeline.dimension(e.dimension)))))
        for e in silver.enrichments)
    declared = pipeline.table(silver.key)
    changes = silver.changes_key if silver.changes is not None else None
    read_and_written = (input_key, *(looked_up.key for _, looked_up in dimensions), silver.key,
                        silver.quarantine_key, *((changes,) if changes else ()))
    return SilverFlow(
        pipeline, silver,
        TableSpec.from_decl(declared),
        TableSpec.from_decl(pipeline.table(silver.quarantine_key)),
        TableSpec.from_decl(input_decl),
        dimensions,
        compile_silver(pipeline, silver, input_decl),
        {key: pipeline.table(key).doc for key in read_and_written},
        declared.doc.expectations if settings.quality.enabled else (),
        TableSpec.from_decl(pipeline.table(changes)) if changes else None,
    )


def silver_flows(settings: Settings) -> tuple[SilverFlow, ...]:
    """Every declared silver table of every pipeline, in declaration order."""
    return tuple(silver_flow(settings, pipeline, silver)
                 for pipeline in settings.pipelines for silver in pipeline.silver)


@dataclass
class SilverBatchWriter:
    """The ``foreachBatch`` function of one silver query; keeps what it did for the run summary."""

    settings: Settings
    flow: SilverFlow
    checkpoint: str
    quarantined: int = 0
    duplicates_removed: int = 0
    rows_out: int = 0
    gate: QualityGate | None = None  # the data-quality gate between bronze and silver
    appends: BatchAppends = field(default_factory=BatchAppends)  # metrics, quarantine, results
    _query_id: str | None = field(default=None, repr=False)

    def query_id(self, spark: SparkSession) -> str:
        """The query id kept in the checkpoint: stable across restarts, new with a new checkpoint."""
        if self._query_id is None:
            self._query_id = query_id_of(spark, self.checkpoint)
        return self._query_id

    def _dimensions(self, spark: SparkSession) -> dict[str, DataFrame]:
        """Each dimension the table is enriched from as it stands: the latest rows of a source's,
        the rows of a change flow's table."""
        return {dimension.name: (read_table(spark, looked_up.path(self.settings))
                                 if dimension.table is not None else
                                 latest_rows(dimension)(read_table(spark, looked_up.path(self.settings))))
                for dimension, looked_up in self.flow.dimensions}

    def _record_metrics(self, spark: SparkSession, query_id: str, batch_id: int, app_id: str,
                        counts: tuple[int, int, int, int]) -> None:
        """The batch's row of the silver batch metrics: rows in, quarantined, duplicates
        removed, rows out (a marked append: a replay writes it once)."""
        rows_in, quarantined, duplicates, rows_out = counts
        metrics = {"table": self.flow.spec.key, "query_id": query_id, "batch_id": batch_id,
                   "rows_in": rows_in, "quarantined": quarantined,
                   "duplicates_removed": duplicates, "rows_out": rows_out,
                   "recorded_at": datetime.now(timezone.utc)}
        self.appends.append_rows(spark, SILVER_BATCH_METRICS, SILVER_BATCH_METRICS.path(self.settings),
                                 [metrics], app_id, batch_id)

    def _new_rows(self, spark: SparkSession, parsed: DataFrame,
                  reach: BatchTimes | None) -> DataFrame:
        """The batch's valid rows that silver does not hold yet, one per key, enriched; ``reach``
        is where the batch lies in event time, for the dedup scopes that bound the lookup."""
        flow, compiled, settings = self.flow, self.flow.transforms, self.settings
        valid = parsed.transform(compiled.valid).transform(compiled.deduplicate)
        known = compiled.known_rows(read_table(spark, flow.spec.path(settings)), reach)
        return (valid.transform(compiled.remove_known(known))
                .transform(compiled.enrich(self._dimensions(spark)))
                .transform(compiled.finish))

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        settings, flow, compiled = self.settings, self.flow, self.flow.transforms
        table = flow.spec
        app_id = txn_app_id(table.key, self.query_id(spark))
        if (batch_id == self.appends.replayed
                and committed_txn_version(spark, table.path(settings), app_id) >= batch_id):
            # The table's write is the batch's last, so the batch is all written and only its
            # commit in the checkpoint was lost. Recomputing it would find every row already known
            # and count them all as duplicates in the run summary; Delta would skip the writes anyway.
            log.warning("%s batch %d: already written (its commit in the checkpoint was lost); "
                        "skipped", table.key, batch_id)
            return
        parsed = cache_batch(batch.transform(compiled.parse))
        try:
            # The counts and the valid rows' event times in one pass, which fills the cache.
            counts = batch_counts(parsed, flow.silver.event_time if compiled.bounded_lookup else None)
            rows_in, quarantined = counts.rows_in, counts.quarantined
            if rows_in == 0:
                return
            if compiled.changes is not None:
                self._apply_changes(spark, parsed, rows_in, quarantined, batch_id, app_id)
                return
            new_rows = cache_batch(self._new_rows(spark, parsed, counts.reach))
            try:
                query_id = self.query_id(spark)
                to_table, to_quarantine = new_rows, parsed.transform(compiled.quarantined)
                rows_out = new_rows.count()  # fills the cache the gate and the writes read
                duplicates = rows_in - quarantined - rows_out
                if self.gate is not None:
                    # Before anything is written: a failed `fail` expectation raises here.
                    outcome = self.gate.check(new_rows, batch_id, app_id, query_id, self.appends)
                    rows_out -= outcome.dropped_count
                    quarantined += outcome.dropped_count
                    to_table = outcome.kept()
                    rejected = outcome.dropped()
                    if rejected is not None:
                        to_quarantine = to_quarantine.unionByName(
                            rejected.transform(compiled.rejected_to_quarantine(parsed)))
                # The metrics row goes first: on a replay, the table is unchanged until its own
                # write commits, so recomputed counts are the same, and a committed write is skipped.
                self._record_metrics(spark, query_id, batch_id, app_id,
                                     (rows_in, quarantined, duplicates, rows_out))
                self.appends.append(to_quarantine, flow.quarantine.path(settings), app_id, batch_id)
                append_batch(to_table, table.path(settings), app_id, batch_id)
            finally:
                new_rows.unpersist()
        finally:
            parsed.unpersist()
        self.quarantined += quarantined
        self.duplicates_removed += duplicates
        self.rows_out += rows_out
        log.info("%s batch %d: %d in, %d quarantined, %d duplicates, %d written",
                 table.key, batch_id, rows_in, quarantined, duplicates, rows_out)

    def _apply_changes(self, spark: SparkSession, parsed: DataFrame, rows_in: int, quarantined: int,
                       batch_id: int, app_id: str) -> None:
        """A change flow's batch: its changes new to the table's applied changes are added there
        (one MERGE, once), then the rows of every key the batch names are made again from all of
        that key's applied changes and replace the table's (one MERGE, once). A replay after the
        first MERGE finds the changes applied and makes the same rows.

        A snapshot flow's batch replaces the changes of its exports and of the export after each
        with what each changes from the export before it (:meth:`_export_changes`)."""
        settings, flow, compiled = self.settings, self.flow, self.flow.transforms
        shape, applied = compiled.changes, flow.changes
        declared = flow.silver.changes
        assert shape is not None and applied is not None and declared is not None
        changes = cache_batch(parsed.transform(compiled.valid).transform(compiled.deduplicate)
                              .transform(compiled.enrich(self._dimensions(spark)))
                              .transform(compiled.finish))
        cached: list[DataFrame] = []
        try:
            query_id = self.query_id(spark)
            to_quarantine, kept = parsed.transform(compiled.quarantined), changes
            distinct = changes.count()  # fills the cache the gate and the writes read
            identity = (*shape.keys, *shape.sequence)
            unread = parsed.where(F.size(REASONS) > 0).select(*identity)
            if self.gate is not None:
                outcome = self.gate.check(changes, batch_id, app_id, query_id, self.appends)
                quarantined += outcome.dropped_count
                kept = outcome.kept()
                rejected = outcome.dropped()
                if rejected is not None:
                    unread = unread.unionByName(rejected.select(*identity))
                    to_quarantine = to_quarantine.unionByName(rejected.drop(DELETED).transform(
                        compiled.rejected_to_quarantine(parsed)))
            log_path = applied.path(settings)
            held = read_table(spark, log_path)
            if declared.snapshot:
                # A refused row whose key and export were read keeps its key as it was.
                rows, region, touched = self._export_changes(
                    kept, held, unread.dropna(subset=list(identity)), cached)
                rows_out = fresh_changes(rows.where(~is_mark(shape) & ~is_hold(shape)), held,
                                         shape).count()
                duplicates = rows_in - quarantined - distinct  # a key twice in one export
            else:
                rows = fresh_changes(kept, held, shape)
                region, touched = None, kept.select(*shape.keys).distinct()
                rows_out = rows.count()
                duplicates = rows_in - quarantined - rows_out
            self._record_metrics(spark, query_id, batch_id, app_id,
                                 (rows_in, quarantined, duplicates, rows_out))
            self.appends.append(to_quarantine, flow.quarantine.path(settings), app_id, batch_id)
            applied_id = txn_app_id(applied.key, query_id)
            if region is None:
                upsert_batch(rows, log_path, identity, applied_id, batch_id, replace_if=shape.supersedes)
            else:
                replace_batch(rows, region, log_path, identity, applied_id, batch_id)
            if distinct:
                self._replace_rows(spark, touched, app_id, batch_id)
        finally:
            changes.unpersist()
            for frame in cached:
                frame.unpersist()
        self.quarantined += quarantined
        self.duplicates_removed += duplicates
        self.rows_out += rows_out
        log.info("%s batch %d: %d in, %d quarantined, %d re-delivered, %d changes applied",
                 flow.spec.key, batch_id, rows_in, quarantined, duplicates, rows_out)

    def _export_changes(self, exports: DataFrame, held: DataFrame, unread: DataFrame,
                        cached: list[DataFrame]) -> tuple[DataFrame, DataFrame, DataFrame]:
        """A snapshot flow's batch of ``exports``, given the applied changes ``held``: the
        applied changes that replace the ``region`` of them (keys and positions) its exports
        and the export after each have, and the keys whose rows are made again.

        Each is what an export changes from the one before it, by position, whatever order they
        arrived in; an export taken before holds what its applied changes say. Nothing here
        depends on whether the batch's own changes are applied yet, so a replay makes the same."""
        shape = self.flow.transforms.changes
        assert shape is not None
        # Each step materialized: the steps read one another several times, and their plans
        # together grew past what the driver plans in its heap.
        nodes = export_nodes(exports, held, shape).localCheckpoint(eager=True)
        beyond = held_on(held, nodes, shape).localCheckpoint(eager=True)
        contents = export_contents(exports, held, nodes, shape, unread, beyond).localCheckpoint(eager=True)
        cached += [nodes, beyond, contents]
        marks = export_marks(nodes, shape, dict(held.dtypes))
        rows = (snapshot_changes(contents, nodes, shape, beyond).unionByName(marks)
                .localCheckpoint(eager=True))
        cached.append(rows)
        (position,) = shape.sequence
        at = nodes.select(position, EXPORT_ORDINAL)
        changes = held.where(~is_mark(shape))
        region = (changes.join(nodes.where(F.col(EXPORT_TARGET)).select(position), position, "left_semi")
                  .unionByName(changes.join(beyond.join(at, EXPORT_ORDINAL).drop(EXPORT_ORDINAL),
                                            [*shape.keys, position], "left_semi"))
                  .unionByName(held.where(is_mark(shape))
                               .join(nodes.where(F.col(EXPORT_IN_BATCH)).select(position), position,
                                     "left_semi"))
                  .select(*shape.keys, position).localCheckpoint(eager=True))
        cached.append(region)
        touched = contents.select(*shape.keys).distinct()
        return rows, region, touched

    def _replace_rows(self, spark: SparkSession, touched: DataFrame, app_id: str, batch_id: int) -> None:
        """The table's rows of the ``touched`` keys made again from all their applied changes
        (one MERGE, once)."""
        settings, flow, compiled = self.settings, self.flow, self.flow.transforms
        shape, table, applied, declared = compiled.changes, flow.spec, flow.changes, flow.silver.changes
        assert shape is not None and applied is not None and declared is not None
        held = (read_table(spark, applied.path(settings)).where(~is_hold(shape))
                .join(touched, list(shape.keys), "left_semi"))
        rows = (scd1_rows(held, shape) if declared.scd == 1
                else scd2_versions(held, shape)).select(*table.column_names)
        merge_keys = compiled.table.merge_keys
        region = (read_table(spark, table.path(settings))
                  .join(touched, list(shape.keys), "left_semi").select(*merge_keys))
        replace_batch(rows, region, table.path(settings), merge_keys, app_id, batch_id)

    def add_to(self, run: TableRun) -> None:
        """Copy the batch counters into the run summary."""
        run.quarantined = self.quarantined
        run.duplicates_removed = self.duplicates_removed
        run.gate_seconds = self.gate.seconds if self.gate else 0.0


def silver_waves(settings: Settings) -> list[tuple[SilverFlow, ...]]:
    """The silver flows in the order a run that drains its inputs brings them up to date: a change
    flow's table that a dimension is kept from in a wave before the tables enriched from it, so
    that one run enriches with the changes it applied; the flows of a wave side by side. Without
    such dimensions, one wave of every flow."""
    by_key = {flow.spec.key: flow for flow in silver_flows(settings)}
    return [tuple(by_key[table] for table in stage)
            for stage in stages(settings.graphs, Layer.SILVER)]


def start_silver(spark: SparkSession, settings: Settings, trigger: Trigger,
                 flows: Sequence[SilverFlow] | None = None) -> list[RunningQuery]:
    """Start processing what is new in bronze into every declared silver table and its quarantine
    (or those of ``flows``).

    The tables of the queries with work are made first, side by side
    (:func:`~medallion.engine.layer.start_layer`); each query's start then finds them.
    """
    return start_layer(spark, [
        PlannedQuery(flow.spec.key, due=partial(flow_due, spark, settings, trigger, flow),
                     tables=partial(flow_tables, settings, flow),
                     start=partial(start_flow, spark, settings, trigger, flow),
                     check=partial(check_definition, spark, settings, flow))
        for flow in (silver_flows(settings) if flows is None else flows)])


def check_definition(spark: SparkSession, settings: Settings, flow: SilverFlow) -> None:
    """A change flow's: refuse to carry on from a table and applied changes another declaration
    made; record the declaration they start with."""
    if flow.silver.changes is not None:
        keep_change_definition(spark, flow.spec.key, flow.spec.checkpoint(settings),
                               change_definition(flow.silver))


def flow_due(spark: SparkSession, settings: Settings, trigger: Trigger, flow: SilverFlow) -> bool:
    """Whether a silver query has work: its bronze table written, with rows it has not seen (or a
    trigger that keeps it running)."""
    if newest_table_version(spark, flow.input.path(settings)) < 0:
        return False  # its source has landed nothing yet
    if skippable(spark, trigger, flow.spec.path(settings), flow.spec.checkpoint(settings),
                 DeltaInput(flow.input.path(settings))):
        # Nothing new, but a changes declaration the table cannot carry on from is refused at
        # this run, not at the next one that has data (the other queries go on).
        check_definition(spark, settings, flow)
        return False
    return True


def flow_tables(settings: Settings, flow: SilverFlow) -> list[TableToMake]:
    """The tables a silver query reads and writes: its bronze input and dimensions (a dimension
    not landed yet is read as an empty table), its table, quarantine, metrics and gate results."""
    return [(spec, spec.path(settings), flow.docs.get(spec.key))
            for spec in (flow.input, *(looked_up for _, looked_up in flow.dimensions), flow.spec,
                         flow.quarantine, *((flow.changes,) if flow.changes else ()),
                         SILVER_BATCH_METRICS, QUALITY_RESULTS)]


def start_flow(spark: SparkSession, settings: Settings, trigger: Trigger, flow: SilverFlow,
               due: bool | None = None) -> RunningQuery:
    """Start the query of one silver table; idle without work (``due``: already decided)."""
    table, checkpoint = flow.spec, flow.spec.checkpoint(settings)
    if not (flow_due(spark, settings, trigger, flow) if due is None else due):
        return idle(spark, table.key, [(flow.input.key, flow.input.path(settings))])
    for made in flow_tables(settings, flow):
        ensure_table(spark, *made)
    # The table's own write is the batch's last, so its transaction id says how far it got.
    state = guard_checkpoint(spark, table.path(settings), checkpoint, table.key,
                             app_id=lambda query_id: txn_app_id(table.key, query_id))
    expectations = flow.expectations
    gate = QualityGate(table, expectations,
                       QUALITY_RESULTS.path(settings)) if expectations else None
    writer = SilverBatchWriter(settings, flow, checkpoint, gate=gate,
                               appends=BatchAppends.after(state, settings.s3))
    stream = read_table_stream(spark, flow.input.path(settings),
                               settings.streaming.max_files_per_trigger
                               ).select(*flow.input_columns)
    query = with_trigger(
        stream.writeStream.queryName(table.key)
        .option("checkpointLocation", checkpoint)
        .foreachBatch(writer),
        trigger,
    ).start()
    return RunningQuery(table.key, query, rows_out=lambda: writer.rows_out,
                        extra=writer.add_to, cause=lambda: gate.failure if gate else None)
