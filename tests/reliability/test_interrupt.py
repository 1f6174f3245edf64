"""Ctrl-C on `medallion run all`, as a terminal sends it (to the command and its JVM): the command
stops at once with one line and status 130, leaves no JVM behind, and the next run ends with the
tables of an uninterrupted run: no traceback, and the run does not carry on as if nothing had
been pressed.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from medallion.config.model import Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.samples.generate import GenerateSpec, generate_landing
from tests.lakehouse_views import snapshot
from tests.reliability.test_crash_recovery import (
    conf_with_small_batches,
    make_settings_at,
    shuffle_partitions_of,
    start_run,
)
from tests.reliability.test_kill_anywhere import failure, finish_here


def _children(pid: int) -> list[int]:
    return [int(child) for child in
            Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_ctrl_c_stops_a_run_at_once_and_the_next_run_carries_on(
        spark: SparkSession, tmp_path: Path) -> None:
    conf = conf_with_small_batches(tmp_path)
    landing = tmp_path / "landing"
    generate_landing(landing, GenerateSpec(events=200, files=1, users=20, burst="c1",
                                           seconds_between_events=3, seed=5))
    clean = make_settings_at(tmp_path / "clean", landing, conf)
    stopped = make_settings_at(tmp_path / "stopped", landing, conf)
    with shuffle_partitions_of(spark, clean):
        run_pipeline(spark, clean, RunTarget.ALL, Trigger())

    log = tmp_path / "interrupted.log"
    run = start_run(conf, landing, Path(stopped.paths.lakehouse), log)
    deadline = time.monotonic() + 600
    while "running silver" not in log.read_text(errors="replace"):  # bronze has committed
        assert run.poll() is None and time.monotonic() < deadline, failure(log)
        time.sleep(0.05)
    jvms = _children(run.pid)
    assert jvms, "the run's JVM"
    pressed = time.monotonic()
    os.killpg(run.pid, signal.SIGINT)
    assert run.wait(timeout=60) == 130, failure(log)
    assert time.monotonic() - pressed < 10
    said = log.read_text(errors="replace")
    assert said.rstrip().endswith(
        "medallion: interrupted; what was committed stays, and the next run carries on from there")
    assert "Traceback" not in said
    assert all(_gone(pid, 30) for pid in jvms), "a JVM outlived the interrupted run"

    finish_here(spark, stopped)
    expected, actual = snapshot(clean), snapshot(stopped)
    for table in expected:
        assert actual[table] == expected[table], f"{table} differs after the interruption"
