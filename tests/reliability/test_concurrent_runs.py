"""Two runs started together on one lakehouse: the second waits for the first, and the tables
hold everything once; neither fails inside the JVM on Derby's metastore, which is one process's."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from medallion.samples.generate import GenerateSpec, generate_landing
from tests.conftest import REPO, make_settings
from tests.events_tables import BRONZE_EVENTS

# What a run without -v may print: medallion's own warnings and errors, and the summary table. (Not
# the line the JVM itself writes when it starts with the incubator module Spark 4 asks for, nor
# Spark's notes about the host: those are for -vv.)
_SAID = re.compile(r"\d{4}-\d\d-\d\d [\d:,]+ (WARNING|ERROR) medallion[.\w]*: |medallion: |"
                   r"table +batches|-{10}|[a-z_]+/[a-z_0-9]+ +\d")


def _noise(output: str) -> list[str]:
    """The lines of ``output`` that are neither medallion's nor expected from the JVM."""
    return [line for line in output.splitlines() if line.strip() and not _SAID.match(line)]


@pytest.mark.slow
def test_two_runs_started_together_one_waits_and_nothing_is_doubled(
        spark: SparkSession, tmp_path: Path) -> None:
    settings = make_settings(tmp_path)  # the embedded Derby catalog, as a user has by default
    generate_landing(Path(settings.paths.landing),
                     GenerateSpec(events=400, files=2, users=20, burst="t1", seed=11))
    # bronze alone: the same locks and catalog as `run all`, in a fraction of the time
    command = [sys.executable, "-m", "medallion", "run", "bronze", "--conf-dir", str(REPO / "conf"),
               "--landing", settings.paths.landing, "--lakehouse", settings.paths.lakehouse,
               "--wait", "600"]
    # As a user's shell has it, without SPARK_LOCAL_IP: on a machine whose host name resolves to
    # a loopback address (many VMs and containers), Spark notes that while it starts (for -vv).
    env = {name: value for name, value in os.environ.items() if name != "SPARK_LOCAL_IP"}
    runs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=env) for _ in range(2)]
    outputs = [run.communicate(timeout=900)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], "\n".join(o[-2000:] for o in outputs)
    waited = [o for o in outputs if "waiting up to" in o]
    assert len(waited) == 1, "exactly one of the two waited for the other"
    assert "Traceback" not in "".join(outputs)
    # No Ivy settings line, no log4j banner, no JVM warnings: a run says what the user needs.
    assert [_noise(output) for output in outputs] == [[], []]

    bronze = spark.read.format("delta").load(BRONZE_EVENTS.path(settings))
    assert bronze.count() == 400  # every landing line once
    assert bronze.select("source_file").distinct().count() == 2
