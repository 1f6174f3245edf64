"""A table whose creation was killed before its first commit is created again, not a trap."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from medallion.config.model import Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.io.tables import TableSpec
from medallion.project import Settings
from medallion.samples.generate import GenerateSpec, generate_landing
from tests.events_tables import BRONZE_EVENTS, SILVER_EVENTS, SILVER_QUARANTINE


def test_a_log_folder_without_a_commit_is_started_over(spark: SparkSession,
                                                        settings: Settings) -> None:
    generate_landing(Path(settings.paths.landing),
                     GenerateSpec(events=40, files=1, users=4, burst="h1", seed=2))
    # What a SIGKILL during DeltaTable.createIfNotExists leaves: the staged commit's folder only.
    for spec in (BRONZE_EVENTS, SILVER_EVENTS):
        (Path(spec.path(settings)) / "_delta_log" / "_staged_commits").mkdir(parents=True)
    runs = run_pipeline(spark, settings, RunTarget.BRONZE, Trigger())
    runs += run_pipeline(spark, settings, RunTarget.SILVER, Trigger())
    assert {r.table: r.rows_in for r in runs}["bronze/events"] == 40
    def rows(spec: TableSpec) -> int:
        return spark.read.format("delta").load(spec.path(settings)).count()

    duplicates = sum(r.duplicates_removed for r in runs)
    assert rows(BRONZE_EVENTS) == 40
    assert rows(SILVER_EVENTS) + rows(SILVER_QUARANTINE) + duplicates == 40  # nothing lost

