"""The results of the gates, written to ``<lakehouse>/quality/results`` by the jobs
(delta-rs, from the driver: :func:`medallion.io.sinks.delta.append_rows`).

One row per expectation per checked micro-batch: run, batch, table, expectation, severity,
success, unexpected count, observed value, the GX result as JSON, and when. Analysts query it as
``quality.results``; ``medallion quality`` summarises it without Spark
(:mod:`medallion.quality.summary`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession

from medallion.io.sinks.delta import BatchAppends
from medallion.io.tables import QUALITY_RESULTS

if TYPE_CHECKING:
    from medallion.quality.evaluate import CheckResult

log = logging.getLogger(__name__)

def record_results(spark: SparkSession, path: str, results: Sequence[CheckResult], *, table: str,
                   run_id: str, query_id: str, batch_id: int, app_id: str,
                   appends: BatchAppends) -> None:
    """Append one row per result, once per (``app_id``, ``batch_id``)."""
    validated_at = datetime.now(timezone.utc)
    rows = [
        {"run_id": run_id, "query_id": query_id, "batch_id": batch_id, "table": table,
         "expectation": r.spec.name, "expectation_type": r.spec.expectation_type,
         "severity": r.spec.severity.value, "success": r.success,
         "unexpected_count": r.unexpected_count, "element_count": r.element_count,
         "observed_value": r.observed,
         "result_json": json.dumps(r.result_json, default=str, sort_keys=True),
         "validated_at": validated_at}
        for r in results
    ]
    appends.append_rows(spark, QUALITY_RESULTS, path, rows, app_id, batch_id)
