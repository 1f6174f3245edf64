"""The gold job: one streaming aggregation of silver per gold table.

Tables whose open windows analysts need are kept by update-mode aggregation, each micro-batch's
updated windows MERGEd into the table with Delta transaction ids (a replayed batch is skipped).
Session windows can only be emitted in append mode, so closed sessions are appended, also inside
``foreachBatch`` (where the quality gate runs), with the transaction id the streaming Delta sink
itself used (query id, batch id), so a checkpoint written by the sink carries on exactly once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession

from medallion.config import Settings, Trigger
from medallion.gold.transforms import (
    Transform,
    aggregate_event_counts_5m,
    aggregate_segment_revenue_1h,
    aggregate_user_activity_sliding,
    aggregate_user_sessions,
)
from medallion.quality.gate import QualityGate, with_quarantine_time
from medallion.sinks.delta import (
    append_batch,
    ensure_table,
    guard_checkpoint,
    query_id_of,
    txn_app_id,
    upsert_batch,
    with_trigger,
)
from medallion.sources.delta import read_table_stream
from medallion.streaming import RunningQuery, failing_as
from medallion.tables import (
    GOLD_EVENT_COUNTS_5M,
    GOLD_SEGMENT_REVENUE_1H,
    GOLD_USER_ACTIVITY_SLIDING,
    GOLD_USER_SESSIONS,
    QUALITY_RESULTS,
    SILVER_EVENTS,
    TableSpec,
    quarantine_of,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GoldAggregate:
    """A gold table, the aggregation that feeds it, and how it is written.

    ``merge_keys`` set: update mode, MERGE on those keys (open windows kept up to date).
    ``merge_keys`` empty: append mode, closed windows only.
    """

    spec: TableSpec
    aggregate: Callable[[str], Transform]
    merge_keys: tuple[str, ...] = ()


GOLD_AGGREGATES: tuple[GoldAggregate, ...] = (
    GoldAggregate(GOLD_EVENT_COUNTS_5M, aggregate_event_counts_5m, ("window_start", "event_type")),
    GoldAggregate(GOLD_USER_ACTIVITY_SLIDING, aggregate_user_activity_sliding,
                  ("window_start", "user_id")),
    GoldAggregate(GOLD_USER_SESSIONS, aggregate_user_sessions),
    GoldAggregate(GOLD_SEGMENT_REVENUE_1H, aggregate_segment_revenue_1h, ("window_start", "segment")),
)


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
    _query_id: str | None = field(default=None, repr=False)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        if self._query_id is None:
            self._query_id = query_id_of(spark, self.checkpoint)
        # The streaming Delta sink's own transaction id for appends, so that a table it wrote
        # goes on exactly once; a named one for MERGEs.
        app_id = txn_app_id(self.table.key, self._query_id) if self.keys else self._query_id
        # Persisted so the stateful aggregation runs once for the count, the gate and the write.
        updated = batch.persist()
        try:
            rows = updated.count()
            to_write = updated
            if rows and self.gate is not None:
                outcome = self.gate.check(updated, batch_id, app_id, self._query_id)
                rejected = outcome.dropped()
                if rejected is not None and self.quarantine_path:
                    append_batch(rejected.transform(with_quarantine_time), self.quarantine_path,
                                 app_id, batch_id)
                to_write, rows = outcome.kept(), rows - outcome.dropped_count
            if rows and self.keys:
                upsert_batch(to_write, self.path, self.keys, app_id, batch_id)
            elif rows:
                append_batch(to_write, self.path, app_id, batch_id)
        finally:
            updated.unpersist()
        self.rows_out += rows
        log.info("%s batch %d: %d rows written", self.table.key, batch_id, rows)


def _start(spark: SparkSession, settings: Settings, trigger: Trigger,
           gold: GoldAggregate) -> RunningQuery:
    spec, path, checkpoint = gold.spec, gold.spec.path(settings), gold.spec.checkpoint(settings)
    ensure_table(spark, spec, path, settings.catalog.tables.get(spec.qualified_name))
    # Every gold aggregation keeps windows or sessions in its state store.
    guard_checkpoint(spark, path, checkpoint, spec.key, stateful=True,
                     app_id=(lambda query_id: txn_app_id(spec.key, query_id))
                     if gold.merge_keys else None)
    expectations = settings.quality.for_table(spec.key)
    gate = QualityGate(spec, expectations, QUALITY_RESULTS.path(settings)) if expectations else None
    quarantine = quarantine_of(spec)
    if any(e.severity.value == "drop" for e in expectations):
        ensure_table(spark, quarantine, quarantine.path(settings))
    aggregated = read_table_stream(
        spark, SILVER_EVENTS.path(settings), settings.streaming.max_files_per_trigger
    ).transform(gold.aggregate(settings.streaming.watermark))
    writer = aggregated.writeStream.queryName(spec.key).option("checkpointLocation", checkpoint)
    batch_writer = UpsertWriter(spec, path, gold.merge_keys, checkpoint, gate=gate,
                                quarantine_path=quarantine.path(settings))
    mode = "update" if gold.merge_keys else "append"
    query = with_trigger(writer.outputMode(mode).foreachBatch(batch_writer), trigger).start()
    return RunningQuery(spec.key, query, rows_out=lambda: batch_writer.rows_out,
                        cause=lambda: gate.failure if gate else None)


def start_gold(spark: SparkSession, settings: Settings, trigger: Trigger) -> list[RunningQuery]:
    """Start bringing every gold table up to date with what is new in silver/events."""
    with failing_as(SILVER_EVENTS.key):
        for table in (SILVER_EVENTS, QUALITY_RESULTS):
            ensure_table(spark, table, table.path(settings),
                         settings.catalog.tables.get(table.qualified_name))
    started = []
    for gold in GOLD_AGGREGATES:
        with failing_as(gold.spec.key):
            started.append(_start(spark, settings, trigger, gold))
    return started
