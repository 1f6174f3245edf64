"""The silver job: a stream of bronze events, written per micro-batch to silver and quarantine.

Each micro-batch is split into valid events and quarantined lines, deduplicated against itself
and against what silver already holds (so a re-delivered event is removed however late it comes,
and counted), enriched with the customers dimension as it stands, and written with Delta
transaction ids so that a replayed batch changes nothing twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from medallion.config import EventsKind, Settings, Trigger
from medallion.idle import DeltaInput, skippable
from medallion.quality.gate import QualityGate
from medallion.silver.transforms import (
    deduplicate_in_batch,
    enrich_with_customers,
    latest_customers,
    parse_events,
    quarantine_rejected,
    remove_known,
    select_quarantined,
    select_valid,
)
from medallion.sinks.delta import (
    append_batch,
    committed_txn_version,
    ensure_table,
    guard_checkpoint,
    query_id_of,
    txn_app_id,
    with_trigger,
)
from medallion.sources.delta import read_table, read_table_stream
from medallion.streaming import RunningQuery, TableRun, failing_as
from medallion.tables import (
    BRONZE_CUSTOMERS,
    BRONZE_EVENTS,
    BRONZE_EVENTS_KAFKA,
    QUALITY_RESULTS,
    SILVER_BATCH_METRICS,
    SILVER_EVENTS,
    SILVER_QUARANTINE,
    TableSpec,
)

log = logging.getLogger(__name__)


@dataclass
class SilverBatchWriter:
    """The ``foreachBatch`` function of the silver query; keeps what it did for the run summary."""

    settings: Settings
    checkpoint: str
    quarantined: int = 0
    duplicates_removed: int = 0
    rows_out: int = 0
    gate: QualityGate | None = None  # the data-quality gate between bronze and silver
    _query_id: str | None = field(default=None, repr=False)

    def query_id(self, spark: SparkSession) -> str:
        """The query id kept in the checkpoint: stable across restarts, new with a new checkpoint."""
        if self._query_id is None:
            self._query_id = query_id_of(spark, self.checkpoint)
        return self._query_id

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        settings = self.settings
        app_id = txn_app_id(SILVER_EVENTS.key, self.query_id(spark))
        if committed_txn_version(spark, SILVER_EVENTS.path(settings), app_id) >= batch_id:
            # Silver's write is the batch's last, so the batch is all written and only its commit
            # in the checkpoint was lost. Recomputing it would find every event already known and
            # count them all as duplicates in the run summary; Delta would skip the writes anyway.
            log.warning("silver/events batch %d: already written (its commit in the checkpoint "
                        "was lost); skipped", batch_id)
            return
        parsed = batch.transform(parse_events).persist()
        try:
            counts = parsed.agg(
                F.count(F.lit(1)).alias("rows_in"),
                F.count_if(F.size("reasons") > 0).alias("quarantined"),
            ).first()
            rows_in, quarantined = int(counts["rows_in"]), int(counts["quarantined"])  # type: ignore[index]
            if rows_in == 0:
                return
            known = read_table(spark, SILVER_EVENTS.path(settings))
            customers = latest_customers(read_table(spark, BRONZE_CUSTOMERS.path(settings)))
            new_events = (
                parsed.transform(select_valid)
                .transform(deduplicate_in_batch)
                .transform(remove_known(known))
                .transform(enrich_with_customers(customers))
                .persist()
            )
            try:
                query_id = self.query_id(spark)
                to_silver, to_quarantine = new_events, parsed.transform(select_quarantined)
                rows_out = new_events.count()  # fills the cache the gate and the writes read
                duplicates = rows_in - quarantined - rows_out
                if self.gate is not None:
                    # Before anything is written: a failed `fail` expectation raises here.
                    outcome = self.gate.check(new_events, batch_id, app_id, query_id)
                    rows_out -= outcome.dropped_count
                    quarantined += outcome.dropped_count
                    to_silver = outcome.kept()
                    rejected = outcome.dropped()
                    if rejected is not None:
                        to_quarantine = to_quarantine.unionByName(
                            rejected.transform(quarantine_rejected(parsed)))
                # The metrics row goes first: on a replay, silver is unchanged until its own write
                # commits, so recomputed counts are the same, and a committed write is skipped.
                metrics = spark.createDataFrame(
                    [(SILVER_EVENTS.key, query_id, batch_id, rows_in, quarantined, duplicates, rows_out)],
                    "table STRING, query_id STRING, batch_id BIGINT, rows_in BIGINT, "
                    "quarantined BIGINT, duplicates_removed BIGINT, rows_out BIGINT",
                ).withColumn("recorded_at", F.current_timestamp())
                append_batch(metrics, SILVER_BATCH_METRICS.path(settings), app_id, batch_id)
                append_batch(to_quarantine, SILVER_QUARANTINE.path(settings), app_id, batch_id)
                append_batch(to_silver, SILVER_EVENTS.path(settings), app_id, batch_id)
            finally:
                new_events.unpersist()
        finally:
            parsed.unpersist()
        self.quarantined += quarantined
        self.duplicates_removed += duplicates
        self.rows_out += rows_out
        log.info("silver/events batch %d: %d in, %d quarantined, %d duplicates, %d written",
                 batch_id, rows_in, quarantined, duplicates, rows_out)

    def add_to(self, run: TableRun) -> None:
        """Copy the batch counters into the run summary."""
        run.quarantined = self.quarantined
        run.duplicates_removed = self.duplicates_removed
        run.gate_seconds = self.gate.seconds if self.gate else 0.0


def bronze_events_of(settings: Settings) -> TableSpec:
    """The bronze table silver reads events from: bronze/events, or bronze/events_kafka.

    Both hold ``raw, source_file, ingested_at``, which is all silver reads. Switching an existing
    lakehouse from one to the other fails loudly: silver's checkpoint names its source table.
    """
    return BRONZE_EVENTS_KAFKA if settings.events_kind is EventsKind.KAFKA else BRONZE_EVENTS


def start_silver(spark: SparkSession, settings: Settings, trigger: Trigger) -> list[RunningQuery]:
    """Start processing what is new in bronze events into silver/events and its quarantine."""
    with failing_as(SILVER_EVENTS.key):
        return [_start_silver(spark, settings, trigger)]


def _start_silver(spark: SparkSession, settings: Settings, trigger: Trigger) -> RunningQuery:
    bronze = bronze_events_of(settings)
    checkpoint = SILVER_EVENTS.checkpoint(settings)
    if skippable(spark, trigger, SILVER_EVENTS.path(settings), checkpoint,
                 DeltaInput(bronze.path(settings))):
        return RunningQuery(SILVER_EVENTS.key, None, idle=True)  # nothing in bronze it has not seen
    for spec in (bronze, BRONZE_CUSTOMERS, SILVER_EVENTS, SILVER_QUARANTINE,
                 SILVER_BATCH_METRICS, QUALITY_RESULTS):
        ensure_table(spark, spec, spec.path(settings),
                     settings.table_doc(spec.key))
    # Silver's own write is the batch's last, so silver's transaction id says how far it got.
    guard_checkpoint(spark, SILVER_EVENTS.path(settings), checkpoint, SILVER_EVENTS.key,
                     app_id=lambda query_id: txn_app_id(SILVER_EVENTS.key, query_id))
    expectations = settings.expectations_of(SILVER_EVENTS.key)
    gate = QualityGate(SILVER_EVENTS, expectations,
                       QUALITY_RESULTS.path(settings)) if expectations else None
    writer = SilverBatchWriter(settings, checkpoint, gate=gate)
    stream = read_table_stream(spark, bronze.path(settings),
                               settings.streaming.max_files_per_trigger
                               ).select("raw", "source_file", "ingested_at")
    query = with_trigger(
        stream.writeStream.queryName(SILVER_EVENTS.key)
        .option("checkpointLocation", checkpoint)
        .foreachBatch(writer),
        trigger,
    ).start()
    return RunningQuery(SILVER_EVENTS.key, query, rows_out=lambda: writer.rows_out,
                        extra=writer.add_to, cause=lambda: gate.failure if gate else None)
