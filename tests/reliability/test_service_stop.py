"""A service (`medallion run all --trigger processing-time=...`) picks up what lands while it runs, a
source whose first files come after it started included, and SIGTERM sent to its whole process
group (what a scheduler's stop and `kill -- -PGID` send, the JVM included) stops it as a run ends:
the batches under way commit, every table's outcome and every batch's progress row are recorded,
the summary is printed, and the status is 0. The next run finds nothing left to do.

A source whose landing folder did not exist when the service started is ingested while it runs.
While it runs, `medallion sql` answers beside it with the rows it has committed.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime, timezone
from functools import partial
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from medallion.config.model import Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.io.tables import QUERY_PROGRESS, RUN_OUTCOMES
from medallion.project import Settings
from medallion.samples.generate import GenerateSpec, generate_landing
from tests.conftest import REPO
from tests.lakehouse_views import csv_lines, snapshot, table_rows
from tests.reliability.test_crash_recovery import (
    conf_with_small_batches,
    make_settings_at,
    shuffle_partitions_of,
    start_run,
)
from tests.reliability.test_interrupt import _children, _gone
from tests.reliability.test_kill_anywhere import failure, finish_here
from tests.reliability.test_kill_orders import _order_files
from tests.reliability.test_kill_orders import _snapshot as orders_snapshot

SERVICE = "processing-time=2 seconds"
EVENTS = 200  # lines per burst, broken and re-delivered ones included


def _burst(landing: Path, name: str, start: datetime) -> None:
    """A day's events, re-delivered and broken ones included, none late: a service's batches
    follow the clock, so which late rows fall behind a watermark (and are dropped by the windows
    and the join) differs from an available-now run's batches, and the two could not be compared
    table for table."""
    generate_landing(landing, GenerateSpec(events=EVENTS, files=2, users=20, burst=name,
                                           start=start, seconds_between_events=3, late_rate=0.0,
                                           seed=11))


def _tables(settings: Settings) -> dict[str, Counter]:
    """Both pipelines' tables, as the kill tests compare them; of the orders, those before gold.
    Their gold tables' windows take the lines of three exports landed together, and which of
    them reach a window after its watermark passed depends on how the batches split them: by the
    clock in a service, by file in an available-now run."""
    orders = {f"orders {name}": rows for name, rows in orders_snapshot(settings).items()
              if not name.startswith("gold/")}
    return {**snapshot(settings), **orders}


def _orders_land(landing: Path, staging: Path) -> None:
    """The orders' first exports, each moved into the landing folder whole."""
    _order_files(staging, 0)
    (landing / "orders").mkdir(exist_ok=True)
    for exported in sorted((staging / "orders").iterdir()):
        exported.rename(landing / "orders" / exported.name)


def _killed_if_running(run: subprocess.Popen[bytes]) -> None:
    """A failed test leaves no service behind (it would serve its folders until killed)."""
    if run.poll() is None:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()


def _snapshot_or_none(settings: Settings) -> dict[str, Counter] | None:
    try:
        return _tables(settings)
    except Exception:  # noqa: BLE001 - a table the service has not made yet
        return None


def _served(settings: Settings, expected: dict[str, Counter], run_log: Path,
            run: subprocess.Popen[bytes], seconds: float) -> None:
    """Wait until the service's tables equal ``expected`` (an available-now run's), reading them
    again only when a table has a new commit (reading every table takes the service's CPU)."""
    deadline = time.monotonic() + seconds
    seen = None
    while True:
        commits = _commits(settings)
        if commits != seen:
            seen = commits
            if _snapshot_or_none(settings) == expected:
                return
        assert run.poll() is None, failure(run_log)
        if time.monotonic() > deadline:
            actual = _snapshot_or_none(settings) or {}
            differs = [table for table in expected if actual.get(table) != expected[table]]
            raise AssertionError(f"the service did not reach the run's tables: {differs}\n"
                                 + failure(run_log))
        time.sleep(1)


def _commits(settings: Settings) -> set[str]:
    """Every commit file of every table of the lakehouse."""
    return {str(path) for path in Path(settings.paths.lakehouse).glob("*/*/_delta_log/*.json")}


def _queried_while_serving(spark: SparkSession, conf: Path, landing: Path, clean: Settings,
                           served: Settings) -> None:
    """``medallion sql`` beside the running service (which holds the embedded catalog): it
    answers at once, with the rows the service has committed, the same as Spark reads from the
    available-now run's tables."""
    # silver's columns but when each row was ingested, which differs between the two lakehouses
    silver = "event_id, user_id, event_type, timestamp, amount, customer_name, segment"
    for table, columns in (("gold.event_counts_5m", "*"), ("silver.events", silver)):
        asked = subprocess.run(
            [sys.executable, "-m", "medallion.cli.main", "--conf-dir", str(conf), "--landing",
             str(landing), "--lakehouse", served.paths.lakehouse, "sql", "--format", "csv",
             "--limit", "0", f"SELECT {columns} FROM {table}"],
            cwd=REPO, capture_output=True, text=True, timeout=120)
        assert asked.returncode == 0, asked.stderr[-2000:]
        header, *lines = asked.stdout.splitlines()
        layer, _, name = table.partition(".")
        frame = spark.read.format("delta").load(clean.table_path(layer, name))
        assert (header, sorted(lines)) == csv_lines(frame.selectExpr(*columns.split(", "))), table


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_service_serves_what_lands_and_sigterm_stops_it_with_everything_recorded(
        spark: SparkSession, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    conf = conf_with_small_batches(tmp_path)
    landing = tmp_path / "landing"
    clean = make_settings_at(tmp_path / "clean", landing, conf)
    served = make_settings_at(tmp_path / "served", landing, conf)
    with shuffle_partitions_of(spark, clean):
        _burst(landing, "s1", datetime(2025, 1, 27, 10, 0, tzinfo=timezone.utc))
        for dimension in ("products", "stores"):  # the orders' dimensions; no orders yet
            shutil.copytree(REPO / "samples" / "landing" / dimension, landing / dimension)
        run_pipeline(spark, clean, RunTarget.ALL, Trigger())
        first = _tables(clean)
        assert not (landing / "orders").exists()

        run_log = tmp_path / "service.log"
        run = start_run(conf, landing, Path(served.paths.lakehouse), run_log, "--trigger", SERVICE)
        request.addfinalizer(partial(_killed_if_running, run))
        _served(served, first, run_log, run, 600)
        _queried_while_serving(spark, conf, landing, clean, served)

        # the next day's files land while it runs, and the first orders: each layer picks up
        # what the one before commits
        _burst(landing, "s2", datetime(2025, 1, 28, 10, 0, tzinfo=timezone.utc))
        _orders_land(landing, tmp_path / "staging")
        run_pipeline(spark, clean, RunTarget.ALL, Trigger())
        both = _tables(clean)
        assert both["silver/events"] != first["silver/events"]
        assert both["orders silver/order_lines"]
        _served(served, both, run_log, run, 300)

    jvms = _children(run.pid)
    assert jvms, "the service's JVM"
    sent = time.monotonic()
    os.killpg(run.pid, signal.SIGTERM)
    assert run.wait(timeout=120) == 0, failure(run_log)
    stopped_in = time.monotonic() - sent
    said = run_log.read_text(errors="replace")
    assert ("medallion: SIGTERM: the service stops once its batches under way have committed "
            "(SIGTERM again stops it at once)") in said
    assert "Traceback" not in said and "InterruptedException" not in said, failure(run_log)
    assert "bronze/events" in said.rsplit("SIGTERM", 1)[1]  # the summary, after the signal
    assert all(_gone(pid, 30) for pid in jvms), "a JVM outlived the service"

    # every table's outcome: succeeded, with what it read over the service's life
    outcomes = {row[1]: row for row in table_rows(RUN_OUTCOMES.path(served), (
        "trigger", "table", "succeeded", "rows_in", "error"))}
    assert {row[0] for row in outcomes.values()} == {SERVICE}
    written = {name.removeprefix("orders ") for name in first
               if not name.endswith(("duplicates_removed", "_quarantine"))}  # (silver's query's)
    written |= {"gold/store_sessions", "gold/category_revenue_1h"}
    assert written <= set(outcomes), outcomes
    assert all(row[2] and row[4] is None for row in outcomes.values()), outcomes
    assert outcomes["bronze/events"][3] == 2 * EVENTS, outcomes["bronze/events"]
    assert outcomes["silver/events"][3] == 2 * EVENTS, outcomes["silver/events"]
    assert outcomes["bronze/orders"][3] == sum(both["orders bronze/orders"].values())
    # every batch's progress row, the ones since the last minute's write included
    progress = table_rows(QUERY_PROGRESS.path(served), ("query_name", "num_input_rows"))
    read = Counter()
    for (name, rows), times in progress.items():
        read[name] += rows * times
    assert read["bronze/events"] == read["silver/events"] == 2 * EVENTS, read

    finish_here(spark, served)
    assert _tables(served) == both  # nothing was left half done, nothing is done twice
    print(f"\nstopped {stopped_in:.1f} s after SIGTERM")
