"""The gold job: one streaming aggregation of silver per gold table.

Tables whose open windows analysts need are kept by update-mode aggregation, each micro-batch's
updated windows MERGEd into the table with Delta transaction ids (a replayed batch is skipped).
Session windows can only be emitted in append mode, so closed sessions are appended by the
streaming Delta sink, which is exactly-once by itself.
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
from medallion.sinks.delta import (
    ensure_table,
    guard_checkpoint,
    query_id_of,
    rows_written_since,
    table_version,
    upsert_batch,
    with_trigger,
)
from medallion.sources.delta import read_table_stream
from medallion.streaming import RunningQuery
from medallion.tables import (
    GOLD_EVENT_COUNTS_5M,
    GOLD_SEGMENT_REVENUE_1H,
    GOLD_USER_ACTIVITY_SLIDING,
    GOLD_USER_SESSIONS,
    SILVER_EVENTS,
    TableSpec,
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
    """``foreachBatch`` function that MERGEs a batch's updated windows into a gold table once."""

    table: TableSpec
    path: str
    keys: tuple[str, ...]
    checkpoint: str
    rows_out: int = 0
    _app_id: str | None = field(default=None, repr=False)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        if self._app_id is None:
            self._app_id = f"medallion-{self.table.key}-{query_id_of(spark, self.checkpoint)}"
        # Persisted so the stateful aggregation runs once for the count and the MERGE.
        updated = batch.persist()
        try:
            rows = updated.count()
            if rows:
                upsert_batch(updated, self.path, self.keys, self._app_id, batch_id)
        finally:
            updated.unpersist()
        self.rows_out += rows
        log.info("%s batch %d: %d windows updated", self.table.key, batch_id, rows)


def _start(spark: SparkSession, settings: Settings, trigger: Trigger,
           gold: GoldAggregate) -> RunningQuery:
    spec, path, checkpoint = gold.spec, gold.spec.path(settings), gold.spec.checkpoint(settings)
    ensure_table(spark, spec, path, settings.catalog.tables.get(spec.qualified_name))
    guard_checkpoint(spark, path, checkpoint, spec.key)
    aggregated = read_table_stream(
        spark, SILVER_EVENTS.path(settings), settings.streaming.max_files_per_trigger
    ).transform(gold.aggregate(settings.streaming.watermark))
    writer = aggregated.writeStream.queryName(spec.key).option("checkpointLocation", checkpoint)
    if gold.merge_keys:
        upsert = UpsertWriter(spec, path, gold.merge_keys, checkpoint)
        query = with_trigger(writer.outputMode("update").foreachBatch(upsert), trigger).start()
        return RunningQuery(spec.key, query, rows_out=lambda: upsert.rows_out)
    before = table_version(spark, path)
    query = with_trigger(writer.format("delta").outputMode("append"), trigger).start(path)
    return RunningQuery(spec.key, query, rows_out=lambda: rows_written_since(spark, path, before))


def start_gold(spark: SparkSession, settings: Settings, trigger: Trigger) -> list[RunningQuery]:
    """Start bringing every gold table up to date with what is new in silver/events."""
    ensure_table(spark, SILVER_EVENTS, SILVER_EVENTS.path(settings),
                 settings.catalog.tables.get(SILVER_EVENTS.qualified_name))
    return [_start(spark, settings, trigger, gold) for gold in GOLD_AGGREGATES]
