"""A table whose batch fails does not stop the other tables of its layer: they finish what they
were given, and the run then fails naming the table that failed (the next layer does not run)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from medallion.config.model import Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.errors import JobError
from medallion.io.tables import RUN_OUTCOMES
from medallion.project import load_settings
from medallion.samples.generate import GenerateSpec, generate_landing
from tests.conf_support import copy_base_conf

NOTES = """
sources:
  notes: {format: json_lines, path: notes, bronze: {table: notes}}
silver:
  notes:
    input: bronze/notes
    parse: json
    columns:
      note_id: {type: STRING, required: true}
    dedup: {key: [note_id]}
"""
FILES, LINES = 12, 5


def test_a_failing_table_leaves_the_other_tables_of_its_layer_to_finish(
        spark: SparkSession, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """A table's failure lets the layer's other queries finish: ``silver/notes`` (one file per
    batch) gets all its files, and the output is one line, not the thousand a JVM prints when an
    interrupted Python batch overflows its thread's stack."""
    conf = copy_base_conf(tmp_path / "conf")
    (conf / "local.yaml").write_text("spark:\n  master: local[2]\nstreaming:\n  max_files_per_trigger: 1\n",
                                     encoding="utf-8")
    (conf / "pipelines" / "orders.yaml").unlink()
    (conf / "pipelines" / "events.local.yaml").write_text(
        "silver:\n  events:\n    python: tests.unit.pipeline_steps:fails_at_run_time\n", encoding="utf-8")
    (conf / "pipelines" / "notes.yaml").write_text(NOTES, encoding="utf-8")
    landing = tmp_path / "landing"
    generate_landing(landing, GenerateSpec(events=40, files=1, users=5, burst="f", seed=5))
    (landing / "notes").mkdir()
    for number in range(FILES):
        (landing / "notes" / f"n{number:02}.json").write_text(
            "".join(f'{{"note_id": "n{number}-{line}"}}\n' for line in range(LINES)), encoding="utf-8")
    settings = load_settings(env="local", conf_dir=conf, landing=str(landing),
                             lakehouse=str(tmp_path / "lakehouse"))
    shared = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        with pytest.raises(JobError, match=r"silver/events: .*a bug in the step"):
            run_pipeline(spark, settings, RunTarget.ALL, Trigger())
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", shared)
    notes = spark.read.format("delta").load(settings.table_path("silver", "notes"))
    assert notes.count() == FILES * LINES
    outcomes = {r["table"]: r["succeeded"] for r in spark.read.format("delta")
                .load(RUN_OUTCOMES.path(settings)).collect()}
    assert (outcomes["silver/events"], outcomes["silver/notes"]) == (False, True)
    assert "gold/event_counts_5m" not in outcomes  # the layer after a failure does not run
    assert "Exception in thread" not in capfd.readouterr().err
