"""The ``medallion`` command as users call it: generate, run, and how it reports failure."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from medallion.cli.main import main


def test_generate_then_run_bronze_prints_a_summary(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = ["--landing", str(tmp_path / "landing"), "--lakehouse", str(tmp_path / "lake")]
    assert main(["generate", "--events", "30", "--files", "2", "--burst", "t", *paths]) == 0
    assert sorted(p.name for p in (tmp_path / "landing" / "events").iterdir()) == [
        "t-0000.json", "t-0001.json"]
    assert main(["run", "bronze", *paths]) == 0
    out = capsys.readouterr().out
    bronze_line = next(line for line in out.splitlines() if line.startswith("bronze/events"))
    # table, batches, rows in, rows out, ...
    assert bronze_line.split()[1:4] == ["1", "30", "30"]
    lines = spark.read.format("delta").load(str(tmp_path / "lake" / "bronze" / "events")).count()
    assert lines == 30


def test_a_failing_table_is_named_and_exits_non_zero(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lake, events = tmp_path / "lake", tmp_path / "landing" / "events"
    events.mkdir(parents=True)
    (events / "e.json").write_text('{"event_id": "e1"}\n')  # bronze has data for silver to read
    (lake / "silver").mkdir(parents=True)
    (lake / "silver" / "events").write_text("not a Delta table, not a folder")
    status = main(["run", "all", "--landing", str(tmp_path / "landing"),
                   "--lakehouse", str(lake)])
    assert status == 1
    err = capsys.readouterr().err
    assert "medallion: failed: silver/events:" in err


def test_an_unknown_trigger_is_refused_before_spark_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "all", "--trigger", "continuous", "--lakehouse", str(tmp_path)]) == 2
    assert "trigger" in capsys.readouterr().err
