"""Kill anywhere: `medallion run all` SIGKILLed at random instants drawn over the whole run (JVM
start-up, table creation and the first commits included), on a new lakehouse and on one with
history, then run to the end: the tables equal those of uninterrupted runs over the same input.
On the lakehouse with history, four more kills land at planned points first: mid-batch in
bronze, in silver, in a change flow (SCD type 2, of a second pipeline that keeps a change feed
as type 1 and 2) and in gold (the recomputed copy of the sessions; the pipeline also keeps a
stateful copy of the tumbling table, so both kinds of gold table are killed in).

``make test`` runs one sample (6 kills: 4 planned, 2 at random; one seed). ``make soak``
runs the long one: ``MEDALLION_SOAK_SEEDS`` (comma-separated) and ``MEDALLION_SOAK_KILLS`` (random
kills per phase and seed); it prints where the kills landed.
"""

from __future__ import annotations

import contextlib
import copy
import os
import random
import re
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
from pyspark.sql import SparkSession

from medallion.config.model import Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.io.tables import QUERY_PROGRESS
from medallion.project import Settings
from medallion.samples.generate import GenerateSpec, generate_landing
from tests.change_feeds import EXPORTS, export_lines, history, line
from tests.change_feeds import PIPELINE as CHANGE_FLOWS
from tests.lakehouse_views import snapshot
from tests.reliability.test_crash_recovery import (
    KILL_POINTS,
    conf_with_small_batches,
    make_settings_at,
    shuffle_partitions_of,
    spark_scratch,
    start_run,
    wait_then_kill,
)

SEEDS = [int(s) for s in os.environ.get("MEDALLION_SOAK_SEEDS", "1").split(",") if s.strip()]
KILLS_PER_PHASE = int(os.environ.get("MEDALLION_SOAK_KILLS", "1"))
# What a subprocess run spends before the work an in-process run times: its session start (3.6 s
# in `make bench`'s run with nothing new). A horizon longer than the killed run wastes whole runs
# that finish first; the runs after a kill resume the work, so later stages are reached anyway.
JVM_START_SECONDS = 5.0


# Beside the shipped gold tables (the tumbling, sliding and hourly ones recomputed, the sessions
# stateful): a stateful copy of the tumbling table and a recomputed copy of the sessions (mode
# update), so the kills land in both kinds of each; and where the planned gold kill lands.
EXTRA_GOLD = {"event_counts_stateful": ("event_counts_5m", {"refresh": "stateful"}),
              "sessions_recomputed": ("user_sessions", {"refresh": "recompute", "mode": "update"})}
POINTS = (*KILL_POINTS[:2], ("gold/sessions_recomputed", 0.0))
# The change flow's, in a run of its pipeline alone (in a run of all, silver/events' planned kill
# would find the flow done, or the flow's would find silver/events done).
CHANGE_POINT = (("silver/customers_history", 1.0),)
ALSO = ("customers", "exports")  # the pipelines compared besides events


def with_extra_gold_tables(conf: Path) -> Path:
    """``conf`` whose events pipeline also keeps the tables of :data:`EXTRA_GOLD`, beside a
    pipeline of change flows (:data:`tests.change_feeds.PIPELINE`) and one of full exports
    (:data:`tests.change_feeds.EXPORTS`)."""
    (conf / "pipelines" / "customers.yaml").write_text(CHANGE_FLOWS, encoding="utf-8")
    (conf / "pipelines" / "exports.yaml").write_text(EXPORTS, encoding="utf-8")
    events = conf / "pipelines" / "events.yaml"
    tree = yaml.safe_load(events.read_text(encoding="utf-8"))
    for name, (like, changed) in EXTRA_GOLD.items():
        tree["gold"][name] = {**copy.deepcopy(tree["gold"][like]), **changed}
    events.write_text(yaml.safe_dump(tree, sort_keys=False), encoding="utf-8")
    return conf


def _burst(landing: Path, name: str, seed: int) -> None:
    # Two files: with one file per micro-batch, two batches per layer and run, the fewest that
    # give the planned kills a batch after the first to land in.
    generate_landing(landing, GenerateSpec(events=200, files=2, users=20, burst=name,
                                           seconds_between_events=3, seed=seed))
    changes = [line(change) for change in history(random.Random(seed), keys=15, count=80)]
    (landing / "customer_changes").mkdir(exist_ok=True)
    for part, start in enumerate(range(0, len(changes), len(changes) // 2)):
        (landing / "customer_changes" / f"{name}-{part}.json").write_text(
            "\n".join(changes[start:start + len(changes) // 2]) + "\n", encoding="utf-8")
    # Two full exports of days drawn once for both bursts (seed * 10 + burst), so that no two
    # share a day and a later burst's may come before an earlier one's.
    rng = random.Random(seed)
    days = random.Random(seed // 10).sample(range(1, 29), 4)
    (landing / "customer_exports").mkdir(exist_ok=True)
    for part in range(2):
        day = f"2026-01-{days[2 * (seed % 10) + part]:02d}"
        (landing / "customer_exports" / f"customers_{day}_{name}-{part}.csv").write_text(
            "\n".join(export_lines(rng, keys=15)) + "\n", encoding="utf-8")


def failure(log: Path) -> str:
    """What a failed run said: its medallion and error lines first (the JVM's shutdown noise
    after them can fill a tail), then the end of its log."""
    text = log.read_text(errors="replace")
    said = [line for line in text.splitlines()
            if line.startswith("medallion") or re.search(r"(Error|Exception)\b.*:", line)
            and not line.lstrip().startswith("at ")]
    return "\n".join(said[:40]) + "\n...\n" + text[-2000:]


def _where(log_text: str) -> str:
    """The stage a killed run had reached, from its log."""
    layers = re.findall(r"running (bronze|silver|gold|publish) with trigger", log_text)
    return layers[-1] if layers else "start-up"


def _kill_chain(conf: Path, landing: Path, lakehouse: Path, log_dir: Path, rng: random.Random,
                kills: int, horizon: float, tag: str) -> list[str]:
    """``kills`` runs each SIGKILLed after a delay drawn from [0, ``horizon``), every one resuming
    what the previous left; returns where each kill landed (a run that ended first is not one)."""
    landed: list[str] = []
    attempt = 0
    while len(landed) < kills and attempt < kills * 4:
        attempt += 1
        log = log_dir / f"{tag}-{attempt}.log"
        started = time.monotonic()
        run = start_run(conf, landing, lakehouse, log)
        deadline = started + rng.uniform(0.0, horizon)
        while run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if run.poll() is not None:  # it finished first: later runs are shorter, draw within that
            assert run.returncode == 0, failure(log)
            horizon = time.monotonic() - started
            continue
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
        landed.append(_where(log.read_text(errors="replace")))
    return landed


def _bytes_under(folder: Path) -> int:
    """The size of the files under ``folder``. What vanishes meanwhile counts nothing: the last
    run's JVM deletes its own scratch folder as it exits, which can be after the command has
    returned (PySpark's JVM stops when it sees its Python process gone)."""
    total = 0
    for root, _, files in os.walk(folder):  # a folder removed under the walk is skipped
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                total += (Path(root) / name).stat().st_size
    return total


def _newest_batch(checkpoint: Path) -> int:
    offsets = checkpoint / "offsets"
    return max((int(p.name) for p in offsets.iterdir() if p.name.isdigit()), default=-1) \
        if offsets.is_dir() else -1


def planned_kills(conf: Path, landing: Path, lakehouse: Path, log: Path, checkpoints: Path,
                  points: tuple[tuple[str, float], ...] = KILL_POINTS,
                  *options: str) -> list[str]:
    """Kills at planned points: as soon as a query has planned the second batch of this run (for
    silver a moment later, while that batch writes), in bronze, then silver, then gold; each run
    resumes the previous one's work, so the kills land in the layer they mean to hit."""
    landed = []
    for table, delay in points:
        checkpoint = checkpoints / table
        second = _newest_batch(checkpoint) + 2
        run = start_run(conf, landing, lakehouse, log, *options)
        assert wait_then_kill(run, checkpoint / "offsets" / str(second), delay), \
            f"the run ended before {table}'s kill point"
        if delay == 0:  # killed between planning the batch and committing it
            assert not (checkpoint / "commits" / str(second)).exists(), table
        landed.append(table.split("/")[0])
    return landed


def finish(conf: Path, landing: Path, lakehouse: Path, log: Path, *options: str) -> None:
    """``medallion run all`` to the end, in a process of its own."""
    final = start_run(conf, landing, lakehouse, log, *options)
    assert final.wait(timeout=1200) == 0, failure(log)


def finish_here(spark: SparkSession, settings: Settings) -> None:
    """A run of everything to the end on the shared session, with the shuffle partitions of
    ``settings``: the same engine as a process of its own would run over the checkpoints and
    logs the kills left, without a cold JVM's minute (a run after a kill, in a process of its own,
    is what the kill chains and the planned kills already start)."""
    with shuffle_partitions_of(spark, settings):
        run_pipeline(spark, settings, RunTarget.ALL, Trigger())


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("seed", SEEDS)
def test_sigkill_at_random_instants_then_a_clean_finish_equals_uninterrupted_runs(
        spark: SparkSession, tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    conf = with_extra_gold_tables(conf_with_small_batches(tmp_path))
    landing = tmp_path / "landing"
    clean = make_settings_at(tmp_path / "clean", landing, conf)
    crashed = make_settings_at(tmp_path / "crashed", landing, conf)
    crashed_lakehouse = Path(crashed.paths.lakehouse)
    landed: Counter[str] = Counter()
    with shuffle_partitions_of(spark, clean):
        for phase, burst in enumerate(("k1", "k2")):  # a new lakehouse, then one with history
            _burst(landing, burst, seed * 10 + phase)
            started = time.monotonic()
            run_pipeline(spark, clean, RunTarget.ALL, Trigger())  # the uninterrupted run of this burst
            horizon = time.monotonic() - started + JVM_START_SECONDS
            if phase == 1 and seed == SEEDS[0]:  # planned points, where the history is
                checkpoints = crashed_lakehouse / "_checkpoints"
                landed.update(planned_kills(conf, landing, crashed_lakehouse,
                                             tmp_path / "planned.log", checkpoints, CHANGE_POINT,
                                             "--pipeline", "customers"))
                landed.update(planned_kills(conf, landing, crashed_lakehouse,
                                             tmp_path / "planned.log", checkpoints, POINTS))
                # each layer's monitoring rows are written when the layer ends: the runs killed
                # in silver and in gold left the record of the batches they completed
                recorded = {row[0] for row in spark.read.format("delta")
                            .load(QUERY_PROGRESS.path(crashed)).select("query_name").collect()}
                assert {"bronze/events", "silver/events"} <= recorded, recorded
            landed.update(_kill_chain(conf, landing, crashed_lakehouse, tmp_path, rng,
                                      KILLS_PER_PHASE, horizon, f"{burst}-seed{seed}"))
            if phase == 0:  # the new lakehouse's kills: a process of its own finishes
                finish(conf, landing, crashed_lakehouse, tmp_path / f"{burst}-final.log")
            else:
                finish_here(spark, crashed)
            expected, actual = snapshot(clean, ALSO), snapshot(crashed, ALSO)
            for table in expected:
                assert actual[table] == expected[table], f"{table} differs after kills ({burst})"
    print(f"\nseed {seed}: {sum(landed.values())} kills landed in: "
          + ", ".join(f"{stage} {n}" for stage, n in sorted(landed.items())))
    planned = len(POINTS) + len(CHANGE_POINT) if seed == SEEDS[0] else 0
    assert sum(landed.values()) == 2 * KILLS_PER_PHASE + planned, landed  # every kill hit a run
    # A killed JVM cannot remove its scratch folder. It must stay small: a local session that
    # copied its jars there (Spark's way with spark.jars) left 600 MB per kill and filled disks.
    left = _bytes_under(spark_scratch(crashed_lakehouse))
    assert left < 20 * 2**20 * sum(landed.values()), f"{left / 2**20:.0f} MB left by the kills"
