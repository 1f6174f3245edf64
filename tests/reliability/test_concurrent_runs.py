"""Two runs started together on one lakehouse: the second waits for the first, and the tables
hold everything once; neither fails inside the JVM on Derby's metastore, which is one process's."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from medallion.config.model import Paths, Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.io.tables import lakehouse_tables
from medallion.project import Settings
from medallion.samples.generate import GenerateSpec, generate_landing
from tests.conf_support import copy_base_conf
from tests.conftest import REPO, make_settings
from tests.events_tables import BRONZE_EVENTS
from tests.lakehouse_views import snapshot

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


def _tagged_conf(folder: Path, tag: str) -> Path:
    """The repo's configuration, with every Delta commit of the process tagged ``tag``."""
    copy_base_conf(folder)
    (folder / "local.yaml").write_text(
        "spark:\n  master: local[2]\n  conf:\n"
        f"    spark.databricks.delta.commitInfo.userMetadata: {tag}\n", encoding="utf-8")
    return folder


def _commits_since(settings: Settings, start_ms: int) -> list[tuple[int, str]]:
    """``(time in ms, userMetadata)`` of every commit since ``start_ms`` to every table."""
    found = []
    for spec in lakehouse_tables(settings):
        path = spec.path(settings)
        if Path(path, "_delta_log").is_dir():
            found += [(int(c["timestamp"]), str(c.get("userMetadata") or ""))
                      for c in DeltaTable(path).history() if int(c["timestamp"]) >= start_ms]
    return found


@pytest.mark.slow
def test_a_scheduled_run_and_a_maintenance_started_together_never_write_at_once(
        spark: SparkSession, tmp_path: Path) -> None:
    """``run all --maintain`` (the shipped schedule) and ``maintain`` (by hand) on one lakehouse
    at the same moment: one waits for the other's locks, no commit of one falls among the
    other's, and the tables end as two runs without any maintenance leave them."""
    settings = make_settings(tmp_path)
    landing = Path(settings.paths.landing)
    bursts = [GenerateSpec(events=300, files=2, users=20, burst=f"m{i}", seed=20 + i,
                           start=datetime(2025, 1, 27, 10 + i, 0, tzinfo=timezone.utc))
              for i in (1, 2)]
    # the same landing into a second lakehouse, two runs, no maintenance: what the rows must be
    alone = dataclasses.replace(settings, paths=Paths(settings.paths.landing,
                                                      str(tmp_path / "alone")))
    generate_landing(landing, bursts[0])
    run_pipeline(spark, settings, RunTarget.ALL, Trigger())  # tables to maintain
    # the same run's result (nothing in tables or checkpoints names the lakehouse's folder)
    shutil.copytree(settings.paths.lakehouse, alone.paths.lakehouse)
    generate_landing(landing, bursts[1])

    def start(tag: str, *command: str) -> subprocess.Popen[str]:
        conf = _tagged_conf(tmp_path / f"conf-{tag}", tag)
        return subprocess.Popen(
            [sys.executable, "-m", "medallion", *command, "--conf-dir", str(conf),
             "--landing", settings.paths.landing, "--lakehouse", settings.paths.lakehouse,
             "--wait", "900"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    started_ms = int(time.time() * 1000)
    jobs = {"run": start("run", "run", "all", "--maintain"),
            "maintain": start("maintain", "maintain", "--table", "silver/events")}
    outputs = {tag: job.communicate(timeout=1500)[0] for tag, job in jobs.items()}
    assert [job.returncode for job in jobs.values()] == [0, 0], outputs
    assert sum("waiting up to" in output for output in outputs.values()) == 1, outputs
    # the run maintained, in its own job, the tables never maintained before (gold's at least,
    # whichever job went first)
    lines = outputs["run"].splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("table  ")
                  and "files before" in line)
    maintained = {line.split()[0] for line in lines[header + 2:] if line.strip()}
    assert "gold/event_counts_5m" in maintained, outputs["run"]

    # The maintenance process's commits carry its tag; the run's are its batches' (tagged by the
    # engine for exactly-once), its monitoring appends and its own maintenance (tagged "run").
    commits = _commits_since(settings, started_ms)
    by_job = {"maintain": [t for t, tag in commits if tag == "maintain"],
              "run": [t for t, tag in commits if tag != "maintain"]}
    assert all(by_job.values()), by_job  # both wrote
    first, second = sorted(by_job.values(), key=min)
    assert max(first) < min(second), "a commit of one job fell among the other's"

    run_pipeline(spark, alone, RunTarget.ALL, Trigger())
    assert snapshot(settings) == snapshot(alone)
