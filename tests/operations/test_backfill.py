"""``medallion backfill``: a range of gold recomputed from silver, and a full refresh."""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from medallion.cli.main import main
from medallion.config.model import Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.project import Settings
from medallion.samples.generate import GenerateSpec, generate_landing, write_atomically
from tests.conftest import REPO
from tests.events_tables import GOLD_EVENT_COUNTS_5M, GOLD_USER_ACTIVITY_SLIDING, SILVER_EVENTS
from tests.lakehouse_views import assert_matches_model, rows, snapshot
from tests.reference import Lakehouse, read_lines, read_segments

START = datetime(2025, 1, 27, 10, 0, tzinfo=timezone.utc)
FIVE = timedelta(minutes=5)


def cli(settings: Settings, *args: str) -> int:
    return main([*args, "--conf-dir", str(REPO / "conf"), "--landing", settings.paths.landing,
                 "--lakehouse", settings.paths.lakehouse])


def floor5(instant: datetime) -> datetime:
    return instant - timedelta(minutes=instant.minute % 5, seconds=instant.second,
                               microseconds=instant.microsecond)


def _n(value: object) -> object:
    return value.normalize() if isinstance(value, Decimal) else value


def expected_counts(silver: list[tuple], start: datetime, end: datetime) -> set[tuple]:
    """Tumbling 5-minute windows per event type starting in [start, end), in plain Python."""
    groups: dict[tuple, list] = defaultdict(list)
    for _, _, kind, ts, amount in silver:
        if start <= floor5(ts) < end:
            groups[(floor5(ts), kind)].append(amount or Decimal(0))
    return {(w, w + FIVE, kind, len(a), _n(sum(a, Decimal(0)))) for (w, kind), a in groups.items()}


def expected_sliding(silver: list[tuple], start: datetime, end: datetime) -> set[tuple]:
    """10-minute windows sliding by 5 per user starting in [start, end), in plain Python."""
    counts: Counter = Counter()
    for _, user, _, ts, _ in silver:
        for window in (floor5(ts), floor5(ts) - FIVE):
            if start <= window < end:
                counts[(window, user)] += 1
    return {(w, w + 2 * FIVE, user, n) for (w, user), n in counts.items()}


def in_range(table: list[tuple], start: datetime, end: datetime) -> set[tuple]:
    return {tuple(_n(v) for v in row) for row in table if start <= row[0] < end}


def out_of_range(table: list[tuple], start: datetime, end: datetime) -> set[tuple]:
    return {tuple(_n(v) for v in row) for row in table if not start <= row[0] < end}


@pytest.mark.timeout(1800)  # whole pipeline runs on a small shared machine
def test_backfill_of_a_range_leaves_gold_equal_to_a_recomputation_from_silver(
        spark: SparkSession, settings: Settings) -> None:
    landing = Path(settings.paths.landing)
    generate_landing(landing, GenerateSpec(events=120, files=2, users=6, burst="k1", start=START,
                                           seconds_between_events=10, seed=21))
    run_pipeline(spark, settings, RunTarget.ALL, Trigger())
    start = START.replace(tzinfo=None)  # PySpark hands back naive UTC datetimes (TZ=UTC here)
    end = start + 2 * FIVE
    # Gold goes wrong in the range (as after a bug, or a lost batch): counts doubled, a row lost.
    gold = DeltaTable.forPath(spark, GOLD_EVENT_COUNTS_5M.path(settings))
    gold.update(f"window_start = TIMESTAMP'{start}'", {"event_count": "event_count * 2"})
    gold.delete(f"window_start = TIMESTAMP'{start + FIVE}' AND event_type = 'view'")

    columns = ("event_id", "user_id", "event_type", "timestamp", "amount")
    silver = rows(spark, settings, SILVER_EVENTS, *columns)
    counts_before = rows(spark, settings, GOLD_EVENT_COUNTS_5M)
    assert in_range(counts_before, start, end) != expected_counts(silver, start, end)  # wrong

    for _ in range(2):  # a second run of the same backfill changes nothing
        assert cli(settings, "backfill", "gold", "--from", start.isoformat(),
                   "--to", end.isoformat()) == 0
        counts = rows(spark, settings, GOLD_EVENT_COUNTS_5M)
        assert in_range(counts, start, end) == expected_counts(silver, start, end)
        assert out_of_range(counts, start, end) == out_of_range(counts_before, start, end)
        assert len(counts) == len(set(counts))
        sliding = rows(spark, settings, GOLD_USER_ACTIVITY_SLIDING)
        assert in_range(sliding, start, end) == expected_sliding(silver, start, end)

    # Refused before anything runs: an empty range, a layer that has no range backfill.
    assert cli(settings, "backfill", "gold", "--from", end.isoformat(), "--to", start.isoformat()) == 2
    assert cli(settings, "backfill", "silver/events", "--from", "2025-01-27", "--to", "2025-01-28") == 2


@pytest.mark.timeout(1800)
def test_full_refresh_equals_a_fresh_run(spark: SparkSession, settings: Settings,
                                         tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    generate_landing(Path(settings.paths.landing),
                     GenerateSpec(events=100, files=2, users=6, burst="f1", start=START,
                                  seconds_between_events=10, seed=31))
    run_pipeline(spark, settings, RunTarget.ALL, Trigger())
    before = snapshot(settings)
    silver_log = Path(SILVER_EVENTS.path(settings)) / "_delta_log"
    commits = sorted(silver_log.glob("*.json"))
    first_commit = commits[0].stat().st_mtime_ns

    # A dry run and an unconfirmed run change nothing.
    capsys.readouterr()
    assert cli(settings, "backfill", "silver/events", "--full-refresh", "--dry-run") == 0
    # It lists what it would delete: the gold tables, not their quarantines, which no gate made.
    listed = capsys.readouterr().out.splitlines()
    assert {"  silver/events", "  gold/event_counts_5m", "  gold/user_sessions"} <= set(listed)
    lakehouse = Path(settings.paths.lakehouse)
    assert not list(lakehouse.glob("gold/*_quarantine")), "the run's gates dropped rows"
    made = ["  silver/events_quarantine"] if (lakehouse / "silver/events_quarantine").exists() else []
    assert [line for line in listed if line.endswith("_quarantine")] == made
    assert cli(settings, "backfill", "silver/events", "--full-refresh") == 2  # stdin is no tty
    assert sorted(silver_log.glob("*.json")) == commits

    assert cli(settings, "backfill", "silver/events", "--full-refresh", "--yes") == 0
    assert commits[0].stat().st_mtime_ns != first_commit  # a new table, from version 0
    refreshed = snapshot(settings)

    # The first run was a fresh run on the same landing files: the rebuild equals it exactly.
    assert refreshed == before


@pytest.mark.timeout(1800)
def test_bronze_backfill_ingests_a_redelivered_file_once_and_silver_removes_what_it_had(
        spark: SparkSession, settings: Settings) -> None:
    """A producer re-delivers a corrected file under the same name: the file source has seen the
    name and skips it; a bronze backfill of the range it landed in ingests it again, and the
    lakehouse ends as the independent model says one run per delivery gives."""
    landing = Path(settings.paths.landing)
    written = generate_landing(landing, GenerateSpec(events=160, files=2, users=8, burst="r1",
                                                     start=START, seconds_between_events=5, seed=41,
                                                     broken_rate=0.05))
    events = [p for p in written if p.suffix == ".json"]
    landed = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc).timestamp()
    for path in events:  # both delivered at noon
        os.utime(path, (landed, landed))
    run_pipeline(spark, settings, RunTarget.ALL, Trigger())
    model = Lakehouse()
    model.run(read_lines(events), read_segments(p for p in written if p.suffix == ".csv"))
    assert model.quarantined > 0 and model.duplicates > 0  # broken and duplicated lines in it
    assert_matches_model(spark, settings, model)

    # The second file comes again at 15:00 with its lines plus events that were missing from it.
    redelivered = events[1]
    extra = [json.dumps({"event_id": f"fix-{i}", "user_id": "u0001", "event_type": "purchase",
                         "timestamp": (START + timedelta(minutes=15, seconds=i)).isoformat(),
                         "amount": 2.5 + i}) for i in range(4)]
    write_atomically(redelivered, [*read_lines([redelivered]), *extra])
    again = datetime(2025, 3, 1, 15, 0, tzinfo=timezone.utc).timestamp()
    os.utime(redelivered, (again, again))
    run_pipeline(spark, settings, RunTarget.ALL, Trigger())
    assert_matches_model(spark, settings, model)  # the stream does not read a name twice

    window = ("--from", "2025-03-01T14:00:00Z", "--to", "2025-03-01T16:00:00Z")
    assert cli(settings, "backfill", "bronze/events", *window, "--dry-run") == 0
    assert_matches_model(spark, settings, model)
    assert cli(settings, "backfill", "bronze/events", *window) == 0
    model.run(read_lines([redelivered]), {})  # the whole file again; only the new ids are new
    assert_matches_model(spark, settings, model)
    assert {e for e in model.silver if e.startswith("fix-")} == {f"fix-{i}" for i in range(4)}

    # The same backfill again (a retry after a crash, say) and a scheduled run: nothing changes.
    assert cli(settings, "backfill", "bronze/events", *window) == 0
    run_pipeline(spark, settings, RunTarget.ALL, Trigger())
    assert_matches_model(spark, settings, model)
    # A range with no landing file in it is refused.
    assert cli(settings, "backfill", "bronze/events", "--from", "2025-03-02",
               "--to", "2025-03-03") == 2


def _sessions(events: list[tuple[str, datetime]], gap: timedelta) -> list[list[datetime]]:
    """Each user's sessions as the lists of their events' times, in plain Python: an event at or
    before the session's end (its last event plus the gap) joins it, as Spark's do."""
    by_user: dict[str, list[datetime]] = defaultdict(list)
    for user, ts in events:
        by_user[user].append(ts)
    sessions = []
    for times in by_user.values():
        times.sort()
        current = [times[0]]
        for ts in times[1:]:
            if ts <= current[-1] + gap:
                current.append(ts)
            else:
                sessions.append(current)
                current = [ts]
        sessions.append(current)
    return sessions


def test_a_range_cutting_through_sessions_leaves_them_whole_and_open_ones_to_the_stream(
        spark: SparkSession, settings: Settings) -> None:
    """Spark pushed the range's filter on session_start below the merging of sessions: a range
    starting inside a session recomputed its events after the cut as a session of their own.
    And the recomputation wrote sessions the stream had not closed yet, which it appends later."""
    generate_landing(settings.paths.landing, GenerateSpec(
        events=200, files=1, users=10, seconds_between_events=20, late_rate=0))
    run_pipeline(spark, settings, RunTarget.ALL, Trigger())
    table = settings.table_path("gold", "user_sessions")

    def written() -> list[tuple]:
        return sorted((r["user_id"], r["session_start"], r["session_end"], r["event_count"])
                      for r in spark.read.format("delta").load(table).collect())

    before = written()
    events = [(r["user_id"], r["timestamp"].replace(tzinfo=timezone.utc)) for r in
              spark.read.format("delta").load(settings.table_path("silver", "events")).collect()]
    # a session the stream closed, of several events: the range starts between its first two
    closed_by = max(end for _, _, end, _ in before).replace(tzinfo=timezone.utc)
    longest = max((s for s in _sessions(events, FIVE) if s[-1] + FIVE <= closed_by),
                  key=len)
    assert len(longest) >= 3
    cut = longest[0] + (longest[1] - longest[0]) / 2

    assert cli(settings, "backfill", "gold/user_sessions", "--from", cut.isoformat(),
               "--to", (START + timedelta(days=1)).isoformat()) == 0

    assert written() == before  # nothing late, so each closed session recomputes as it was
    generate_landing(settings.paths.landing, GenerateSpec(
        events=50, files=1, users=10, start=START + timedelta(hours=3), late_rate=0, burst="b2"))
    run_pipeline(spark, settings, RunTarget.ALL, Trigger())
    after = [(user, start) for user, start, _, _ in written()]
    assert len(after) == len(set(after)) > len(before)  # the open ones, closed since: once each
