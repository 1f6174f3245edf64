"""The ``medallion`` command as users call it: generate, run, and how it reports failure."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from medallion.cli.main import main
from tests.conf_support import copy_base_conf
from tests.conftest import REPO


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


def test_a_session_spark_cannot_start_ends_in_one_line_not_a_traceback(tmp_path: Path) -> None:
    """A setting only the JVM judges (here a heap size it cannot read): medallion's one line, exit
    status 1, no Python traceback through PySpark's gateway; the traceback with -v."""
    conf = copy_base_conf(tmp_path / "conf")
    (conf / "local.yaml").write_text("spark:\n  conf:\n    spark.driver.memory: lots\n",
                                     encoding="utf-8")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    for verbose in ((), ("-v",)):
        done = subprocess.run(
            [sys.executable, "-m", "medallion", *verbose, "run", "bronze", "--conf-dir", str(conf),
             "--landing", str(tmp_path / "landing"), "--lakehouse", str(tmp_path / "lake")],
            capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
        assert done.returncode == 1, done.stderr
        assert ("medallion: failed: run: [JAVA_GATEWAY_EXITED] Java gateway process exited "
                "before sending its port number.") in done.stderr.splitlines(), done.stderr
        assert ("Traceback" in done.stderr) == bool(verbose), done.stderr
