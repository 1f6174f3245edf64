"""The gate a writer runs on each micro-batch before it commits anything downstream.

``QualityGate.check`` evaluates the table's expectations on the batch (one pass), records every
outcome in ``<lakehouse>/quality/results``, then applies the severities: a failed ``fail`` raises
:class:`QualityGateFailure` (so the writer commits nothing, the query stops and its checkpoint does
not advance: after the data or the rule is fixed the same batch runs again); ``drop`` expectations
split the batch into the rows that move on and the rows for the table's quarantine; ``warn`` is
recorded only.

Results are appended marked with the writer's app id and the batch id
(:class:`medallion.io.sinks.delta.BatchAppends`), so a replay after a crash records nothing twice; a
batch that fails is recorded under an app id of its own run, so each failed attempt is visible
once, beside the eventual pass.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from medallion.io.sinks.delta import BatchAppends
from medallion.io.tables import TableSpec
from medallion.quality.evaluate import BatchEvaluation, evaluate_batch, load_great_expectations
from medallion.quality.results import record_results
from medallion.quality.spec import ExpectationSpec

log = logging.getLogger(__name__)


class QualityGateFailure(RuntimeError):
    """A ``fail`` expectation failed; the message names the table, expectation and observation."""

    def __init__(self, table: str, batch_id: int, failed: list[str]) -> None:
        super().__init__(f"quality gate failed on batch {batch_id}: " + "; ".join(failed))
        self.table = table
        self.batch_id = batch_id


def new_run_id() -> str:
    """An id for one run of a job: when it started, and a random suffix."""
    return f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"


@dataclass
class GateOutcome:
    """What the gate decided for one batch."""

    frame: DataFrame
    evaluation: BatchEvaluation

    @property
    def row_count(self) -> int:
        """Rows of the batch as it reached the gate."""
        return self.evaluation.row_count

    @property
    def dropped_count(self) -> int:
        """Rows rejected by at least one ``drop`` expectation."""
        return self.evaluation.dropped_count

    def kept(self) -> DataFrame:
        """The rows that move on."""
        mask = self.evaluation.drop_mask
        if mask is None or self.dropped_count == 0:
            return self.frame
        return self.frame.where(~mask)

    def dropped(self) -> DataFrame | None:
        """The rejected rows with ``reasons`` (the failed drop expectations' names), or None."""
        mask, reasons = self.evaluation.drop_mask, self.evaluation.drop_reasons
        if mask is None or reasons is None or self.dropped_count == 0:
            return None
        return self.frame.where(mask).withColumn("reasons", reasons)


@dataclass
class QualityGate:
    """The expectations of one table, checked per micro-batch by that table's writer."""

    table: TableSpec
    expectations: tuple[ExpectationSpec, ...]
    results_path: str
    run_id: str = field(default_factory=new_run_id)
    failure: str | None = None  # set when a fail expectation stopped the job
    seconds: float = 0.0  # time spent checking, for the benchmark and the logs

    def __post_init__(self) -> None:
        # Here, on the thread that starts the queries, not first in a batch's thread beside others.
        load_great_expectations()

    def check(self, frame: DataFrame, batch_id: int, app_id: str, query_id: str,
              appends: BatchAppends) -> GateOutcome:
        """Evaluate, record, and enforce the expectations on ``frame`` (best persisted)."""
        started = time.monotonic()
        evaluation = evaluate_batch(frame, self.expectations)
        failures = evaluation.failures
        # A failed batch is recorded under its run's own app id: each failed attempt shows once,
        # and the pass that follows the fix is still recorded under the writer's app id.
        results_app_id = f"{app_id}-failed-{self.run_id}" if failures else app_id
        record_results(frame.sparkSession, self.results_path, evaluation.results,
                       table=self.table.key, run_id=self.run_id, query_id=query_id,
                       batch_id=batch_id, app_id=results_app_id, appends=appends)
        self.seconds += time.monotonic() - started
        for result in evaluation.results:
            if not result.success:
                log.warning("%s batch %d: expectation %s (%s) failed: %s", self.table.key, batch_id,
                            result.spec.name, result.spec.severity.value, result.observed)
        if failures:
            described = [f"expectation {r.spec.name!r} ({r.spec.expectation_type}) failed: "
                         f"{r.observed}" for r in failures]
            error = QualityGateFailure(self.table.key, batch_id, described)
            self.failure = str(error)
            raise error
        log.info("%s batch %d: %d expectations checked, %d rows dropped", self.table.key,
                 batch_id, len(evaluation.results), evaluation.dropped_count)
        return GateOutcome(frame, evaluation)


def with_quarantine_time(rows: DataFrame) -> DataFrame:
    """Rows for a gold quarantine: the dropped rows with when they were quarantined."""
    return rows.withColumn("quarantined_at", F.current_timestamp())

