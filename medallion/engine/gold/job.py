"""The gold job: one streaming aggregation per declared gold table, of every pipeline.

Each gold table of ``conf/pipelines/<name>.yaml`` is compiled into a pure transform
(:mod:`medallion.engine.gold.compile`) that reads the table's declared input. Tables whose open windows
analysts need (mode update) are kept by update-mode aggregation, each micro-batch's updated
windows MERGEd into the table on the declaration's keys with Delta transaction ids (a replayed
batch is skipped); a join's batches are computed from its inputs' tables
(:mod:`medallion.engine.gold.joinbatch`) and MERGEd the same way; the quarantine and quality results are
marked appends
(:class:`medallion.io.sinks.delta.BatchAppends`). Closed windows (mode append, the only one Spark
allows for sessions) are appended, also inside ``foreachBatch`` (where the quality gate runs),
with the transaction id the streaming Delta sink itself used (query id, batch id), so a checkpoint
written by the sink carries on exactly once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from medallion.config.model import Trigger, TriggerKind
from medallion.engine.gold.compile import (
    JoinTransform,
    Transform,
    compile_gold,
    compile_join,
    latest_per_key,
)
from medallion.engine.gold.joinbatch import JoinBatches, join_stream, retire_join_state
from medallion.engine.gold.recompute import RecomputeBatches, start_over, start_over_reason
from medallion.engine.idle import DeltaInput, skippable
from medallion.engine.layer import PlannedQuery, idle, start_layer
from medallion.engine.streaming import RunningQuery, TableRun, cache_batch
from medallion.io.checkpoints import plan_watermark_batch
from medallion.io.hadoopfs import path_exists
from medallion.io.sinks.delta import (
    BatchAppends,
    TableToMake,
    append_batch,
    batch_range,
    ensure_table,
    guard_checkpoint,
    never_written,
    query_id_of,
    replace_batch,
    txn_app_id,
    upsert_batch,
    with_trigger,
)
from medallion.io.sinks.evolution import check_declared_state, keep_declared_state
from medallion.io.sources.delta import ALL_FILES, newest_table_version, read_table_stream
from medallion.io.tables import QUALITY_RESULTS, TableSpec, quarantine_of
from medallion.pipeline.evolution import state_definition
from medallion.pipeline.graph import stages
from medallion.pipeline.kinds import Layer
from medallion.pipeline.model import ExpectationSpec, GoldSpec, TableDoc
from medallion.pipeline.spec import PipelineSpec
from medallion.project import Settings
from medallion.quality.gate import QualityGate, with_quarantine_time

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GoldFlow:
    """A declared gold table, its inputs, the transform that feeds it, and how it is written.

    ``merge_keys`` set (mode update): update-mode aggregation, MERGE on those keys (open windows
    kept up to date). ``merge_keys`` empty (mode append): closed windows only, appended. A join
    has two inputs (its transform takes a stream of each, in order).
    """

    pipeline: PipelineSpec
    gold: GoldSpec
    spec: TableSpec
    inputs: tuple[TableSpec, ...]
    transform: Transform | JoinTransform
    doc: TableDoc
    expectations: tuple[ExpectationSpec, ...]  # its gate's (none when the gates are off)

    @property
    def input(self) -> TableSpec:
        """The first (for a join, the left) input."""
        return self.inputs[0]

    @property
    def merge_keys(self) -> tuple[str, ...]:
        """The MERGE keys the declaration derives (window bounds and grouping columns)."""
        return self.gold.merge_keys

    @property
    def state_definition(self) -> dict[str, Any]:
        """What its query's state is made of (``pipeline.evolution.state_definition``)."""
        return state_definition(self.gold, self.pipeline.table(self.gold.input),
                                self.pipeline.watermark_of(self.gold))


def gold_flow(pipeline: PipelineSpec, gold: GoldSpec, gated: bool = True) -> GoldFlow:
    """The flow of one declared gold table (no Spark needed until the transform runs); with
    ``gated``, its declared expectations gate it."""
    inputs = (gold.input,) if gold.join is None else (gold.input, gold.join.input)
    transform = compile_join(pipeline, gold) if gold.join else compile_gold(pipeline, gold)
    declared = pipeline.table(gold.key)
    return GoldFlow(pipeline, gold, TableSpec.from_decl(declared),
                    tuple(TableSpec.from_decl(pipeline.table(key)) for key in inputs), transform,
                    declared.doc, declared.doc.expectations if gated else ())


def gold_flows(settings: Settings) -> tuple[GoldFlow, ...]:
    """Every declared gold table of every pipeline, in declaration order."""
    return tuple(gold_flow(pipeline, gold, settings.quality.enabled)
                 for pipeline, gold in settings.gold_specs())


@dataclass
class UpsertWriter:
    """``foreachBatch`` function that writes a batch of a gold table once, behind its gate.

    With ``keys`` the batch's updated windows are MERGEd on them; without, the batch (closed
    windows) is appended. Rows a ``drop`` expectation rejects go to ``<layer>/<name>_quarantine``.
    """

    table: TableSpec
    path: str
    keys: tuple[str, ...]
    checkpoint: str
    rows_out: int = 0
    gate: QualityGate | None = None
    quarantine_path: str | None = None
    latest_by: tuple[str, ...] = ()  # of several rows per key in a batch or the table, the greatest
    prune_by: str | None = None  # the key whose batch range bounds the MERGE's scan (window start)
    # What the micro-batch becomes before it is written (a join's rows, from its inputs' tables).
    compute: Callable[[DataFrame, int], DataFrame] | None = None
    appends: BatchAppends = field(default_factory=BatchAppends)  # quarantine, quality results
    # Recomputed windows instead of the batch's (``refresh: recompute``): they replace a region
    recompute: RecomputeBatches | None = None
    _query_id: str | None = field(default=None, repr=False)
    _written: bool = field(default=False, repr=False)  # the table is known to hold rows

    @property
    def _sorted_by(self) -> str | None:
        """A recomputed table's rows are written in order of their window's (or session's)
        start: a later batch reads the few windows it recomputes, and skips the files of others
        (a first batch's whole table would otherwise be in files that each span all of time)."""
        return self.recompute.start_column if self.recompute is not None else None

    def _never_written(self, spark: SparkSession) -> bool:
        """Whether the table is as its creation left it, read from its log until it is known to
        hold rows (then no batch of this query asks again)."""
        if not self._written:
            self._written = not never_written(spark, self.path)
        return not self._written

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        if self._query_id is None:
            self._query_id = query_id_of(spark, self.checkpoint)
        # The streaming Delta sink's own transaction id for appends, so that a table it wrote
        # goes on exactly once; a named one for MERGEs.
        app_id = txn_app_id(self.table.key, self._query_id) if self.keys else self._query_id
        recomputed = self.recompute(batch, batch_id) if self.recompute is not None else None
        if self.recompute is not None and recomputed is None:
            log.info("%s batch %d: no window to recompute", self.table.key, batch_id)
            return
        # Persisted so the stateful aggregation runs once for the count, the gate and the write.
        rows_of_batch = (recomputed.rows if recomputed is not None
                         else self.compute(batch, batch_id) if self.compute is not None else batch)
        updated = cache_batch(latest_per_key(rows_of_batch, self.keys, self.latest_by))
        try:
            # The count and the MERGE's window range in one pass.
            measured = batch_range(updated, self.prune_by if self.keys else None)
            rows = measured.rows
            to_write = updated
            if rows and self.gate is not None:
                outcome = self.gate.check(updated, batch_id, app_id, self._query_id, self.appends)
                rejected = outcome.dropped()
                if rejected is not None and self.quarantine_path:
                    self.appends.append(rejected.transform(with_quarantine_time),
                                        self.quarantine_path, app_id, batch_id)
                to_write, rows = outcome.kept(), rows - outcome.dropped_count
            if recomputed is not None and self.keys and not self._never_written(spark):
                # Rows the recomputation no longer has (a merged session, a dropped window) go too,
                # in the same commit: so a batch that writes no row may still delete some.
                deleted = replace_batch(to_write, recomputed.region, self.path, self.keys, app_id,
                                        batch_id, self.prune_by, recomputed.low, recomputed.high)
                if deleted:
                    log.info("%s batch %d: %d rows replaced by the recomputation deleted",
                             self.table.key, batch_id, deleted)
            elif rows and self.keys and self._never_written(spark):
                # The table's first rows: a MERGE into an empty table inserts every row (one per
                # key), as an append does, but plans a join and a rewrite against it first. The
                # same transaction id keeps a replay skipped once either has committed.
                append_batch(to_write, self.path, app_id, batch_id, self._sorted_by)
                self._written = True
            elif rows and self.keys:
                upsert_batch(to_write, self.path, self.keys, app_id, batch_id, self.latest_by,
                             self.prune_by, within=measured)
            elif rows:
                append_batch(to_write, self.path, app_id, batch_id, self._sorted_by)
        finally:
            updated.unpersist()
            if recomputed is not None:
                recomputed.release()
        self.rows_out += rows
        log.info("%s batch %d: %d rows written", self.table.key, batch_id, rows)


def flow_due(spark: SparkSession, settings: Settings, trigger: Trigger, gold: GoldFlow) -> bool:
    """Whether a gold query has work: every input written, and something in them it has not seen
    (or a trigger that keeps it running)."""
    if any(newest_table_version(spark, table.path(settings)) < 0 for table in gold.inputs):
        return False  # an input has never been written
    inputs = tuple(DeltaInput(table.path(settings)) for table in gold.inputs)
    checkpoint = gold.spec.checkpoint(settings)
    if skippable(spark, trigger, gold.spec.path(settings), checkpoint, inputs):
        if gold.gold.recomputed_in_place:  # nothing new; a changed declaration recomputes it
            return recompute_reason(spark, settings, gold) is not None
        # Nothing new, but a declaration its state cannot carry on from is refused at this run,
        # not at the next one that has data (DeclarationChanged: the other queries go on).
        check_declared_state(spark, gold.spec.key, checkpoint, gold.state_definition)
        return False
    return True


def flow_tables(settings: Settings, gold: GoldFlow) -> list[TableToMake]:
    """The tables a gold query writes: its own, and its quarantine if an expectation drops."""
    spec = gold.spec
    tables: list[TableToMake] = [(spec, spec.path(settings), gold.doc)]
    if any(e.severity.value == "drop" for e in gold.expectations):
        quarantine = quarantine_of(spec)
        tables.append((quarantine, quarantine.path(settings), _declared_doc(gold.pipeline,
                                                                            quarantine.key)))
    return tables


def _declared_doc(pipeline: PipelineSpec, key: str) -> TableDoc | None:
    try:
        return pipeline.table(key).doc
    except KeyError:
        return None


def recompute_reason(spark: SparkSession, settings: Settings, gold: GoldFlow) -> str | None:
    """Why a recomputed table starts over from a new checkpoint (None: it carries on)."""
    spec = gold.spec
    path, checkpoint = spec.path(settings), spec.checkpoint(settings)
    return start_over_reason(
        spark, spec.key, path, checkpoint, gold.state_definition,
        lambda: guard_checkpoint(spark, path, checkpoint, spec.key,
                                 app_id=lambda query_id: txn_app_id(spec.key, query_id)))


def check_definition(spark: SparkSession, settings: Settings, gold: GoldFlow) -> None:
    """Refuse to carry on from a state another declaration of the table wrote; record the
    declaration a new state is written with (:func:`~medallion.io.sinks.evolution.keep_declared_state`).
    A recomputed table has no state: whatever its checkpoint cannot carry on from, it starts over
    from a new one (announced), and its first batch recomputes the table."""
    checkpoint = gold.spec.checkpoint(settings)
    if gold.gold.recomputed_in_place:
        reason = recompute_reason(spark, settings, gold)
        if reason is not None:
            start_over(spark, gold.spec.key, checkpoint, gold.state_definition, reason,
                       gold.gold.input)
        elif not path_exists(spark, f"{checkpoint}/offsets"):
            keep_declared_state(spark, gold.spec.key, checkpoint, gold.state_definition,
                                resumed=False)
        return
    keep_declared_state(spark, gold.spec.key, checkpoint, gold.state_definition,
                        resumed=path_exists(spark, f"{checkpoint}/offsets"))


def start_flow(spark: SparkSession, settings: Settings, trigger: Trigger, gold: GoldFlow,
               due: bool | None = None) -> RunningQuery:
    """Start the query of one gold table; idle without work (``due``: already decided)."""
    spec, path, checkpoint = gold.spec, gold.spec.path(settings), gold.spec.checkpoint(settings)
    if not (flow_due(spark, settings, trigger, gold) if due is None else due):
        return idle(spark, spec.key, [(t.key, t.path(settings)) for t in gold.inputs])
    for table in flow_tables(settings, gold):
        ensure_table(spark, *table)
    join, recomputed = gold.gold.join, gold.gold.recomputed
    # A stateful aggregation keeps windows or sessions in its state store; a join keeps none, nor
    # does a recomputed aggregation (in mode update, whose checkpoint, when it cannot carry on, the
    # check before its start replaced; in mode append, guarded as any other).
    state = (None if gold.gold.recomputed_in_place
             and not path_exists(spark, f"{checkpoint}/offsets") else
             guard_checkpoint(spark, path, checkpoint, spec.key,
                              stateful=join is None and not recomputed,
                              app_id=(lambda query_id: txn_app_id(spec.key, query_id))
                              if gold.merge_keys else None))
    if state is not None and join is not None:
        retire_join_state(spark, spec.key, checkpoint)
    if state is not None and join is None and not recomputed \
            and trigger.kind is not TriggerKind.ONCE:
        # Windows a stopped run still owes (trigger once runs one batch: it owes none, and a
        # planned batch without data would take the place of its batch of new data).
        plan_watermark_batch(spark, spec.key, checkpoint, state)
    expectations = gold.expectations
    gate = QualityGate(spec, expectations, QUALITY_RESULTS.path(settings)) if expectations else None
    quarantine = quarantine_of(spec)
    # An append-mode recomputed table's batches end between versions of its input (no file
    # limit): a row is late by the watermark of the versions before its own.
    files = (ALL_FILES if recomputed and not gold.merge_keys
             else settings.streaming.max_files_per_trigger)
    streams = [read_table_stream(spark, table.path(settings), files) for table in gold.inputs]
    joined = (JoinBatches(spark, spec.key, checkpoint,
                          (gold.inputs[0].path(settings), gold.inputs[-1].path(settings)),
                          gold.pipeline, gold.gold) if join is not None else None)
    recompute = (RecomputeBatches(gold.pipeline, gold.gold, checkpoint, gold.input.path(settings),
                                  path) if recomputed else None)
    streamed = (join_stream(gold.pipeline, gold.gold, *streams) if joined is not None
                else recompute.located(streams[0]) if recompute is not None
                else gold.transform(*streams))
    writer = streamed.writeStream.queryName(spec.key).option("checkpointLocation", checkpoint)
    batch_writer = UpsertWriter(spec, path, gold.merge_keys, checkpoint, gate=gate,
                                quarantine_path=quarantine.path(settings),
                                latest_by=gold.gold.latest_by, prune_by=gold.gold.prune_by,
                                compute=joined, appends=BatchAppends.after(state, settings.s3),
                                recompute=recompute)
    # A join streams event times and computes its rows in the batch; its MERGE keeps the latest
    # per key. An aggregation MERGEs the windows each batch updated.
    mode = "update" if gold.merge_keys and join is None and not recomputed else "append"
    query = with_trigger(writer.outputMode(mode).foreachBatch(batch_writer), trigger).start()

    def late_rows(run: TableRun) -> None:
        if joined is not None:
            run.late_rows_dropped += joined.late_dropped
        if recompute is not None:
            run.late_rows_dropped += recompute.late_dropped
        if recompute is not None and recompute.first_batch_rows:
            # The first batch recomputes from the input table, not from the rows it streamed.
            run.rows_in += recompute.first_batch_rows
            run.batches += 1

    return RunningQuery(spec.key, query, rows_out=lambda: batch_writer.rows_out,
                        extra=late_rows, cause=lambda: gate.failure if gate else None)


def gold_waves(settings: Settings) -> list[tuple[GoldFlow, ...]]:
    """The gold flows in the order a run that drains its inputs brings them up to date: a gold
    table another gold table reads (an append-mode table can be an input) in a wave before its
    reader's, so that one run carries new rows down the chain; the flows of a wave side by side.
    Without such chains, one wave of every flow."""
    by_key = {flow.spec.key: flow for flow in gold_flows(settings)}
    return [tuple(by_key[table] for table in stage)
            for stage in stages(settings.graphs, Layer.GOLD)]


def start_gold(spark: SparkSession, settings: Settings, trigger: Trigger,
               flows: Sequence[GoldFlow] | None = None) -> list[RunningQuery]:
    """Start bringing every declared gold table (or those of ``flows``) up to date with what is
    new in its input.

    The tables of the queries with work are made first, side by side (on a new lakehouse, each
    query's table is created there); each query's start then finds them.
    """
    return start_layer(spark, [
        PlannedQuery(gold.spec.key, due=partial(flow_due, spark, settings, trigger, gold),
                     tables=partial(flow_tables, settings, gold),
                     start=partial(start_flow, spark, settings, trigger, gold),
                     check=partial(check_definition, spark, settings, gold))
        for gold in (gold_flows(settings) if flows is None else flows)],
        shared=[(QUALITY_RESULTS, QUALITY_RESULTS.path(settings), None)])
