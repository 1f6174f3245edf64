"""Python steps the pipeline fixtures and tests name (``module:function``)."""

from __future__ import annotations

from typing import Any

NOT_CALLABLE = 42


def passthrough(frame: Any) -> Any:
    """A DataFrame -> DataFrame step that changes nothing."""
    return frame


def daily_buyers(frame: Any) -> Any:
    """A gold step: distinct buyers per UTC day, as INT (the declaration makes it BIGINT)."""
    from pyspark.sql import functions as F

    return (frame.groupBy(F.to_date("timestamp").alias("day"))
            .agg(F.size(F.collect_set("user_id")).alias("buyers")))


def fails_at_run_time(frame: Any) -> Any:
    """A silver step whose batch fails when Spark computes it (a bug in a team's step)."""
    from pyspark.sql import functions as F

    return frame.withColumn("event_id", F.expr("CAST(raise_error('a bug in the step') AS STRING)"))
