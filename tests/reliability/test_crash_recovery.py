"""Exactly-once under failure: helpers for killing runs (the kills themselves are in
test_kill_anywhere.py), and a lost checkpoint fails loudly instead of reprocessing."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from pyspark.sql import SparkSession

from medallion.config.model import Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.errors import CheckpointError
from medallion.project import Settings
from medallion.samples.generate import GenerateSpec, generate_landing
from tests.conf_support import copy_base_conf
from tests.conftest import make_settings
from tests.events_tables import SILVER_EVENTS

# Where the runs are killed: as soon as the query's checkpoint has planned its second batch
# (offsets/1 written, commits/1 not yet), and for silver a moment later, while that batch writes.
# Each run resumes from the previous one's checkpoints, so the three kills land in bronze, in
# silver and in gold of one pipeline's work.
KILL_POINTS = (("bronze/events", 0.0), ("silver/events", 1.0), ("gold/event_counts_5m", 0.0))


def conf_with_small_batches(root: Path) -> Path:
    """A configuration whose streams take one file per micro-batch: many commit points to hit."""
    conf = root / "conf"
    copy_base_conf(conf)
    # Spark's in-memory catalog: the runs here do not need Derby's, which takes seconds to boot.
    (conf / "local.yaml").write_text(
        "spark:\n  shuffle_partitions: 1\nstreaming:\n  max_files_per_trigger: 1\n"
        "catalog:\n  metastore: in-memory\n")
    return conf


@contextmanager
def shuffle_partitions_of(spark: SparkSession, settings: Settings) -> Iterator[None]:
    """The shared session with the shuffle partitions of ``settings`` (as its runs in processes
    of their own have them), put back afterwards."""
    shared = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(settings.spark.shuffle_partitions))
    try:
        yield
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", shared)


def spark_scratch(lakehouse: Path) -> Path:
    """Where the runs of ``lakehouse`` keep Spark's scratch folders (``SPARK_LOCAL_DIRS``)."""
    return lakehouse.parent / f"{lakehouse.name}-spark-scratch"


def start_run(conf: Path, landing: Path, lakehouse: Path, log: Path,
              *options: str) -> subprocess.Popen[bytes]:
    """``medallion run all [options]`` in its own process group (the JVM is a child of it)."""
    return subprocess.Popen(
        [sys.executable, "-m", "medallion", "-v", "run", "all", "--conf-dir", str(conf),
         "--landing", str(landing), "--lakehouse", str(lakehouse), *options],
        stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True,
        # Spark's scratch folders (spark-*) in one place per test, to see what kills leave behind
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1",
             "SPARK_LOCAL_DIRS": str(spark_scratch(lakehouse))},
    )


def wait_then_kill(run: subprocess.Popen[bytes], planned: Path, delay: float) -> bool:
    """Kill the run's process group ``delay`` seconds after ``planned`` appears; whether it was
    still running then (False: it finished first)."""
    deadline = time.monotonic() + 900
    while not planned.exists() and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(delay)
    if run.poll() is not None:
        return False
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    return True


def make_settings_at(lakehouse: Path, landing: Path, conf: Path) -> Settings:
    from medallion.project import load_settings

    return load_settings(env="local", conf_dir=conf, landing=str(landing), lakehouse=str(lakehouse))


def test_a_lost_checkpoint_fails_loudly(spark: SparkSession, tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    generate_landing(Path(settings.paths.landing),
                     GenerateSpec(events=50, files=1, users=5, burst="k1", seed=3))
    run_pipeline(spark, settings, RunTarget.BRONZE, Trigger())
    run_pipeline(spark, settings, RunTarget.SILVER, Trigger())
    shutil.rmtree(SILVER_EVENTS.checkpoint(settings))
    with pytest.raises(CheckpointError, match="silver/events: checkpoint .* is missing"):
        run_pipeline(spark, settings, RunTarget.SILVER, Trigger())


def test_a_file_gone_before_the_killed_batch_that_planned_it_is_replayed_is_warned_of(
        spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A run killed in a bronze batch, then the landing folder cleaned (a retention job, a file
    taken back): the replay reads what is left of the batch and commits it, and names the file that has gone,
    whose records it could not read (Spark's reader passes over it without a word). A batch whose
    write had landed before the kill lost nothing, and is not warned of."""
    conf = conf_with_small_batches(tmp_path)
    landing, lakehouse = tmp_path / "landing", tmp_path / "lakehouse"
    settings = make_settings_at(lakehouse, landing, conf)
    generate_landing(landing, GenerateSpec(events=40, files=1, users=5, burst="a", seed=1))
    run_pipeline(spark, settings, RunTarget.BRONZE, Trigger())
    generate_landing(landing, GenerateSpec(events=40, files=2, users=5, burst="b", seed=2))
    checkpoint = tmp_path / "lakehouse" / "_checkpoints" / "bronze" / "events"
    run = start_run(conf, landing, lakehouse, tmp_path / "killed.log")
    assert wait_then_kill(run, checkpoint / "offsets" / "1", 0.0), "the run ended first"
    assert not (checkpoint / "commits" / "1").exists()
    # The batch's one file: Spark orders new files by modification time, which the two share.
    planned = json.loads((checkpoint / "sources" / "0" / "1").read_text().splitlines()[1])["path"]
    gone = Path(unquote(urlparse(planned).path))
    events = landing / "events"
    kept = ({"b-0000.json", "b-0001.json"} - {gone.name}).pop()
    gone.unlink()

    def warnings() -> list[str]:
        caplog.clear()
        with caplog.at_level("WARNING", logger="medallion.engine.bronze.job"):
            run_pipeline(spark, settings, RunTarget.BRONZE, Trigger())
        return [r.getMessage() for r in caplog.records if "no longer" in r.getMessage()]

    assert warnings() == [
        f"bronze/events: 1 file(s) that batch 1, which a run stopped in, was to read are no "
        f"longer in {events}, and their records are not ingested: {gone.name} (to ingest them, "
        "land them again under new names)"]
    bronze = spark.read.format("delta").load(str(lakehouse / "bronze" / "events"))
    files = sorted((Path(r[0]).name, r[1]) for r in bronze.groupBy("source_file").count().collect())
    assert files == [("a-0000.json", 40), (kept, 20)]

    # Killed after its write landed (the commit file lost instead): nothing is missing.
    newest = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    (checkpoint / "commits" / str(newest)).unlink()
    (events / kept).unlink()
    assert warnings() == []
    assert bronze.count() == 60
