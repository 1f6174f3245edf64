"""Exactly-once under failure: a run killed with SIGKILL at any point, then run again, ends with
the tables of one uninterrupted run; a lost checkpoint fails loudly instead of reprocessing."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from medallion.config import Settings, Trigger
from medallion.errors import CheckpointError
from medallion.generate import GenerateSpec, generate_landing
from medallion.pipeline import Layer, run_pipeline
from medallion.tables import SILVER_EVENTS
from tests.conftest import REPO, make_settings
from tests.lakehouse_views import snapshot

KILL_FRACTIONS = (0.3, 0.55, 0.8)


def conf_with_small_batches(root: Path) -> Path:
    """A configuration whose streams take one file per micro-batch: many commit points to hit."""
    conf = root / "conf"
    conf.mkdir()
    shutil.copy(REPO / "conf" / "base.yaml", conf / "base.yaml")
    (conf / "local.yaml").write_text(
        "spark:\n  shuffle_partitions: 1\nstreaming:\n  max_files_per_trigger: 1\n")
    return conf


def start_run(conf: Path, landing: Path, lakehouse: Path, log: Path) -> subprocess.Popen[bytes]:
    """``medallion run all`` in its own process group (the JVM is a child of it)."""
    return subprocess.Popen(
        [sys.executable, "-m", "medallion", "run", "all", "--conf-dir", str(conf),
         "--landing", str(landing), "--lakehouse", str(lakehouse)],
        stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_sigkill_at_any_point_then_rerun_equals_one_clean_run(
    spark: SparkSession, tmp_path: Path
) -> None:
    conf = conf_with_small_batches(tmp_path)
    landing = tmp_path / "landing"
    generate_landing(landing, GenerateSpec(events=800, files=4, users=30, burst="c1",
                                           seconds_between_events=3, seed=5))
    log = tmp_path / "runs.log"

    began = time.monotonic()
    clean = start_run(conf, landing, tmp_path / "clean", log)
    assert clean.wait(timeout=1200) == 0, log.read_text()[-3000:]
    clean_seconds = time.monotonic() - began

    crashed = tmp_path / "crashed"
    interrupted = 0
    for fraction in KILL_FRACTIONS:
        run = start_run(conf, landing, crashed, log)
        try:
            run.wait(timeout=clean_seconds * fraction)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
            interrupted += 1
        assert run.returncode in (0, -signal.SIGKILL), log.read_text()[-3000:]
    assert interrupted >= 2, "the kills must land while the job is running"
    final = start_run(conf, landing, crashed, log)
    assert final.wait(timeout=1200) == 0, log.read_text()[-3000:]

    expected = snapshot(spark, make_settings_at(tmp_path / "clean", landing, conf))
    actual = snapshot(spark, make_settings_at(crashed, landing, conf))
    for table in expected:
        assert actual[table] == expected[table], f"{table} differs after crashes"
    assert sum(expected["bronze/events"].values()) == 800


def make_settings_at(lakehouse: Path, landing: Path, conf: Path) -> Settings:
    from medallion.config import load_settings

    return load_settings(env="local", conf_dir=conf, landing=str(landing), lakehouse=str(lakehouse))


def test_a_lost_checkpoint_fails_loudly(spark: SparkSession, tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    generate_landing(Path(settings.paths.landing),
                     GenerateSpec(events=50, files=1, users=5, burst="k1", seed=3))
    run_pipeline(spark, settings, Layer.BRONZE, Trigger())
    run_pipeline(spark, settings, Layer.SILVER, Trigger())
    shutil.rmtree(SILVER_EVENTS.checkpoint(settings))
    with pytest.raises(CheckpointError, match="silver/events: checkpoint .* is missing"):
        run_pipeline(spark, settings, Layer.SILVER, Trigger())
