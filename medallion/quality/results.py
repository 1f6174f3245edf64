"""The results of the gates, written to ``<lakehouse>/quality/results`` by the jobs (Spark).

One row per expectation per checked micro-batch: run, batch, table, expectation, severity,
success, unexpected count, observed value, the GX result as JSON, and when. Analysts query it as
``quality.results``; ``medallion quality`` summarises it without Spark
(:mod:`medallion.quality.summary`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from medallion.sinks.delta import BatchAppends

if TYPE_CHECKING:
    from medallion.quality.evaluate import CheckResult

log = logging.getLogger(__name__)

_ROW_SCHEMA = (
    "run_id STRING, query_id STRING, batch_id BIGINT, table STRING, expectation STRING, "
    "expectation_type STRING, severity STRING, success BOOLEAN, unexpected_count BIGINT, "
    "element_count BIGINT, observed_value STRING, result_json STRING"
)


def record_results(spark: SparkSession, path: str, results: Sequence[CheckResult], *, table: str,
                   run_id: str, query_id: str, batch_id: int, app_id: str,
                   appends: BatchAppends) -> None:
    """Append one row per result, once per (``app_id``, ``batch_id``)."""
    rows = [
        (run_id, query_id, batch_id, table, r.spec.name, r.spec.expectation_type,
         r.spec.severity.value, r.success, r.unexpected_count, r.element_count, r.observed,
         json.dumps(r.result_json, default=str, sort_keys=True))
        for r in results
    ]
    frame = spark.createDataFrame(rows, _ROW_SCHEMA).withColumn("validated_at",
                                                                F.current_timestamp())
    appends.append(frame, path, app_id, batch_id)
