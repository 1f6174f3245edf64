"""A damaged checkpoint never lies (DESIGN I4): each damage, injected into a real lakehouse after
real runs, either ends exactly right (every table equals the undamaged lakehouse's) or fails
loudly naming the table, the checkpoint and what to do, with no table changed by the failed run.

Each test starts from a copy of one lakehouse that ran over the first two landing files, adds
damage, and runs over all three. The expected tables are those of an undamaged copy given the same
run: gold's watermark makes its results depend on where runs and micro-batches end, so the
reference must end its runs where the damaged lakehouse does.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from medallion.config.model import Trigger
from medallion.engine.gold.job import gold_flows
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.engine.streaming import TableRun
from medallion.errors import CheckpointError
from medallion.io.tables import SILVER_BATCH_METRICS
from medallion.ops.maintenance import delete_old_state, maintain
from medallion.project import Settings
from medallion.samples.generate import GenerateSpec, generate_landing
from tests.lakehouse_views import purchase_attribution, rows, snapshot
from tests.reliability.test_crash_recovery import conf_with_small_batches, make_settings_at

pytestmark = pytest.mark.slow

BURST = "ck"
SILVER = "silver/events"
GOLD_TABLES = ("gold/event_counts_5m", "gold/user_activity_sliding", "gold/user_sessions",
               "gold/segment_revenue_1h")


@dataclass(frozen=True)
class Runs:
    """The shared starting point and what an undamaged lakehouse holds after the next run."""

    conf: Path
    landing: Path
    after_run_1: Path  # a lakehouse after a run over the first two files; copied by each test
    expected: dict[str, Counter]  # every table after a second run over all three files
    expected_silver: TableRun  # what that second run wrote to silver


def run_all(spark: SparkSession, settings: Settings) -> dict[str, TableRun]:
    """One ``medallion run all`` in this process; what it did, per table.

    Without monitoring: its record is not compared here, and it costs commits per layer.
    """
    return {run.table: run for run in run_pipeline(spark, settings, RunTarget.ALL, Trigger(),
                                                   monitor=False)}


def land(staging: Path, landing: Path, parts: list[int]) -> None:
    """Copy generated event files (and the customers file) into the landing zone."""
    for folder in ("events", "customers"):
        (landing / folder).mkdir(parents=True, exist_ok=True)
    shutil.copy(staging / "customers" / f"customers-{BURST}.csv", landing / "customers")
    for part in parts:
        shutil.copy(staging / "events" / f"{BURST}-{part:04d}.json", landing / "events")


@pytest.fixture(scope="module")
def runs(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """Run 1 over two files, then the undamaged reference of run 2 over all three."""
    root = tmp_path_factory.mktemp("checkpoint_damage")
    conf = conf_with_small_batches(root)
    staging, landing = root / "staging", root / "landing"
    # 50 minutes of events over 30 users: sessions close behind the watermark within the data,
    # so gold/user_sessions has rows to lose or double.
    generate_landing(staging, GenerateSpec(events=300, files=3, users=30, burst=BURST,
                                           seconds_between_events=10, seed=5))
    land(staging, landing, [0, 1])
    after_run_1 = root / "after_run_1"
    run_all(spark, make_settings_at(after_run_1, landing, conf))
    land(staging, landing, [2])
    reference = make_settings_at(root / "reference", landing, conf)
    shutil.copytree(after_run_1, reference.paths.lakehouse)
    summary = run_all(spark, reference)
    return Runs(conf, landing, after_run_1, snapshot(reference), summary[SILVER])


@pytest.fixture(scope="module", autouse=True)
def configured_shuffle_partitions(spark: SparkSession) -> Iterator[None]:
    """The configuration's shuffle partitions on the shared session for this module's runs: they
    decide how many files a silver batch writes, so how gold's one-file batches fall."""
    shared = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    yield None
    spark.conf.set("spark.sql.shuffle.partitions", shared)


def copy_of_run_1(runs: Runs, tmp_path: Path) -> Settings:
    """A lakehouse of this test's own, as it was after run 1."""
    settings = make_settings_at(tmp_path / "lakehouse", runs.landing, runs.conf)
    shutil.copytree(runs.after_run_1, settings.paths.lakehouse)
    return settings


def newest(folder: Path) -> Path:
    """The newest batch file of an ``offsets`` or ``commits`` folder."""
    return max((p for p in folder.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))


def assert_tables(actual: dict[str, Counter], expected: dict[str, Counter],
                  tables: tuple[str, ...] | None = None) -> None:
    """Whole tables equal (all of them unless ``tables`` names some)."""
    for table in tables or tuple(expected):
        assert actual[table] == expected[table], f"{table} differs"


def put_back(backup: Path, checkpoint: Path) -> None:
    """Replace a checkpoint with a copy of it (what the error tells the user to do)."""
    shutil.rmtree(checkpoint)
    shutil.copytree(backup, checkpoint)


# With its checksum the damage is seen as a mismatch; without (object stores keep none), as a
# file that does not parse (the parser's words depend on where the cut falls).
@pytest.mark.parametrize(("table", "checksum", "why"), [
    (SILVER, True, "its content does not match its checksum"),
    ("gold/user_sessions", False, ""),
])
def test_truncated_newest_offsets_fails_loudly_and_a_copy_recovers(
        spark: SparkSession, runs: Runs, tmp_path: Path, table: str, checksum: bool,
        why: str) -> None:
    settings = copy_of_run_1(runs, tmp_path)
    checkpoint = Path(settings.checkpoint_path(table))
    backup = shutil.copytree(checkpoint, tmp_path / "backup")
    damaged = newest(checkpoint / "offsets")
    assert int(damaged.name) >= 1, "the run should have left several batches"
    data = damaged.read_bytes()
    damaged.write_bytes(data[: len(data) // 2])
    if not checksum:
        (damaged.parent / f".{damaged.name}.crc").unlink()
    before = snapshot(settings)

    with pytest.raises(CheckpointError) as failure:
        run_all(spark, settings)
    message = str(failure.value)
    assert message.startswith(f"{table}: checkpoint file {damaged.as_posix()} is damaged ({why}"), \
        message
    assert checksum == ("checksum" in message), message
    assert f"medallion backfill {table} --full-refresh" in message
    # Nothing from the table's layer on was written by the failed run; upstream layers ran.
    downstream = GOLD_TABLES if table.startswith("gold/") else (
        "silver/events", "silver/events_quarantine", "duplicates_removed", *GOLD_TABLES)
    assert_tables(snapshot(settings), before, downstream)

    put_back(backup, checkpoint)
    run_all(spark, settings)
    assert_tables(snapshot(settings), runs.expected)


def test_deleted_metadata_fails_loudly_and_a_copy_recovers(
        spark: SparkSession, runs: Runs, tmp_path: Path) -> None:
    # Without its id Spark would start the query under a new one, and Delta's transaction ids
    # derived from it would no longer recognise a replayed batch's writes.
    settings = copy_of_run_1(runs, tmp_path)
    checkpoint = Path(settings.checkpoint_path(SILVER))
    backup = shutil.copytree(checkpoint, tmp_path / "backup")
    (checkpoint / "metadata").unlink()
    before = snapshot(settings)

    with pytest.raises(CheckpointError) as failure:
        run_all(spark, settings)
    message = str(failure.value)
    assert message.startswith(
        f"{SILVER}: checkpoint file {checkpoint.as_posix()}/metadata is missing"), message
    assert f"medallion backfill {SILVER} --full-refresh" in message
    assert_tables(snapshot(settings), before,
                  ("silver/events", "silver/events_quarantine", "duplicates_removed", *GOLD_TABLES))

    put_back(backup, checkpoint)
    run_all(spark, settings)
    assert_tables(snapshot(settings), runs.expected)


def test_a_failed_start_stops_the_queries_started_before_it(
        spark: SparkSession, runs: Runs, tmp_path: Path) -> None:
    # Gold's queries start one after the other; the last one's damaged checkpoint fails the layer
    # after the others are running. Left running, they would keep their checkpoints busy: this
    # process's next run could not start them ("already active").
    settings = copy_of_run_1(runs, tmp_path)
    # The last of events' gold queries (orders' have no data here: they never start).
    last = [flow for flow in gold_flows(settings) if flow.pipeline.name == "events"][-1].spec.key
    checkpoint = Path(settings.checkpoint_path(last))
    backup = shutil.copytree(checkpoint, tmp_path / "backup")
    (checkpoint / "metadata").unlink()

    with pytest.raises(CheckpointError, match=f"^{last}: checkpoint file"):
        run_all(spark, settings)
    assert [query.name for query in spark.streams.active] == []

    put_back(backup, checkpoint)
    run_all(spark, settings)
    assert_tables(snapshot(settings), runs.expected)


NO_DATA_BATCHES = "spark.sql.streaming.noDataMicroBatches.enabled"


def test_windows_owed_by_a_query_stopped_after_a_commit_are_closed_on_restart(
        spark: SparkSession, runs: Runs, tmp_path: Path) -> None:
    # After a batch that moves the watermark on, Spark closes the windows it passed in a batch
    # without data, decided from the plan it holds in memory: a query stopped or killed between
    # the commit and that batch does not run it when started again. A run with those batches
    # turned off leaves every gold checkpoint in exactly that state.
    settings = copy_of_run_1(runs, tmp_path)
    spark.conf.set(NO_DATA_BATCHES, "false")
    try:
        run_all(spark, settings)
    finally:
        spark.conf.unset(NO_DATA_BATCHES)
    checkpoint = Path(settings.checkpoint_path("gold/user_sessions"))
    batch = newest(checkpoint / "commits").name
    planned = json.loads((checkpoint / "offsets" / batch).read_text().splitlines()[1])
    committed = json.loads((checkpoint / "commits" / batch).read_text().splitlines()[1])
    assert committed["nextBatchWatermarkMs"] > planned["batchWatermarkMs"], "no window owed"
    assert snapshot(settings)["gold/user_sessions"] != runs.expected["gold/user_sessions"]

    run_all(spark, settings)
    assert_tables(snapshot(settings), runs.expected)


@pytest.mark.parametrize("table", [SILVER, "gold/user_sessions"])
def test_deleted_newest_commit_replays_the_batch_without_a_second_write(
        spark: SparkSession, runs: Runs, tmp_path: Path, table: str) -> None:
    settings = copy_of_run_1(runs, tmp_path)
    checkpoint = Path(settings.checkpoint_path(table))
    deleted = newest(checkpoint / "commits")
    deleted.unlink()  # as `rm` would: Hadoop's .crc beside it stays

    summary = run_all(spark, settings)

    assert deleted.exists(), "the batch was replayed and committed again"
    actual = snapshot(settings)
    assert_tables(actual, runs.expected)
    # I1 accounting: every bronze row is in silver, in quarantine or a counted duplicate.
    assert (sum(actual["bronze/events"].values())
            == sum(actual["silver/events"].values())
            + sum(actual["silver/events_quarantine"].values())
            + actual["duplicates_removed"]["total"])
    metrics = sorted(row[0] for row in rows(spark, settings, SILVER_BATCH_METRICS, "batch_id"))
    assert metrics == [0, 1, 2], "one metrics row per silver batch"
    # The run reports what it wrote: the replayed batch adds no rows and no duplicates.
    silver, expected = summary[SILVER], runs.expected_silver
    assert ((silver.rows_out, silver.quarantined, silver.duplicates_removed)
            == (expected.rows_out, expected.quarantined, expected.duplicates_removed))


def test_deleted_state_fails_loudly_and_a_copy_recovers(
        spark: SparkSession, runs: Runs, tmp_path: Path) -> None:
    # Session windows: the state that holds the most (open sessions per user). The check that
    # sees the loss is the same for every stateful query (medallion.io.checkpoints).
    table = "gold/user_sessions"
    settings = copy_of_run_1(runs, tmp_path)
    checkpoint = Path(settings.checkpoint_path(table))
    backup = shutil.copytree(checkpoint, tmp_path / "backup")
    shutil.rmtree(checkpoint / "state")
    before = snapshot(settings)

    with pytest.raises(CheckpointError) as failure:
        run_all(spark, settings)
    message = str(failure.value)
    assert message.startswith(
        f"{table}: checkpoint {checkpoint.as_posix()}: {checkpoint.as_posix()}/state/0 is "
        "missing"), message
    assert f"medallion backfill {table} --full-refresh" in message
    assert_tables(snapshot(settings), before, GOLD_TABLES)

    put_back(backup, checkpoint)
    run_all(spark, settings)
    assert_tables(snapshot(settings), runs.expected)


def state_versions(checkpoint: Path) -> dict[Path, set[int]]:
    """Per RocksDB store folder of a checkpoint, the versions it holds a snapshot of."""
    return {folder: {int(z.name.split(".")[0].split("_")[0]) for z in folder.glob("*.zip")}
            for folder in {z.parent for z in (checkpoint / "state").rglob("*.zip")}}


def test_old_state_versions_deleted_by_maintenance_are_not_needed_by_the_next_run(
        spark: SparkSession, runs: Runs, tmp_path: Path) -> None:
    # What Spark's state maintenance thread deletes when a query lives long enough, which the
    # short runs here (like most available-now runs) do not: `medallion maintain` deletes it.
    settings = copy_of_run_1(runs, tmp_path)
    checkpoints = {flow.spec.key: Path(flow.spec.checkpoint(settings))
                   for flow in gold_flows(settings)
                   if Path(flow.spec.checkpoint(settings), "state").is_dir()}  # events' (orders': no data)
    # The sessions' aggregation (the recomputed windows and the join keep no state).
    assert set(checkpoints) == {"gold/user_sessions"}
    before = {key: state_versions(checkpoint) for key, checkpoint in checkpoints.items()}
    # Every stateful query ran several batches, each leaving a version in its stores.
    assert all(len(versions) > 1 for stores in before.values() for versions in stores.values())

    sessions = "gold/user_sessions"
    retained = spark.conf.get("spark.sql.streaming.minBatchesToRetain")
    spark.conf.set("spark.sql.streaming.minBatchesToRetain", "1")
    try:
        # The command for one table, which keeps Spark's setting; the other checkpoints directly
        # (the command's VACUUM of each table would add half a minute per table to the suite).
        report, = maintain(spark, settings, [sessions], optimize=False)
    finally:
        spark.conf.set("spark.sql.streaming.minBatchesToRetain", retained or "100")
    deleted = {report.table: report.state_files_deleted}
    deleted |= {key: delete_old_state(spark, str(checkpoint), retain=1)
                for key, checkpoint in checkpoints.items() if key != sessions}

    for key, checkpoint in checkpoints.items():
        assert state_versions(checkpoint) == {
            folder: {max(versions)} for folder, versions in before[key].items()}, key
    assert {key: files > 0 for key, files in deleted.items()} == dict.fromkeys(checkpoints, True)
    run_all(spark, settings)
    assert_tables(snapshot(settings), runs.expected)


def test_checkpoint_restored_from_an_older_copy_fails_loudly(
        spark: SparkSession, runs: Runs, tmp_path: Path) -> None:
    table = "gold/purchase_attribution"
    settings = copy_of_run_1(runs, tmp_path)
    checkpoint = Path(settings.checkpoint_path(table))
    older = shutil.copytree(checkpoint, tmp_path / "after_run_1")
    run_all(spark, settings)  # run 2, on the third file
    assert_tables(snapshot(settings), runs.expected)
    newer = shutil.copytree(checkpoint, tmp_path / "after_run_2")
    planned = int(newest(older / "offsets").name)
    newest_run_2 = int(newest(newer / "offsets").name)
    assert newest_run_2 > planned, "run 2 should have added batches"
    put_back(older, checkpoint)

    with pytest.raises(CheckpointError) as failure:
        run_all(spark, settings)  # run 3
    message = str(failure.value)
    # The batch named is the newest that wrote rows (a batch that only moved the watermark has
    # nothing to MERGE): one of run 2's.
    found = re.match(
        rf"{table}: checkpoint {re.escape(checkpoint.as_posix())} is older than the table at "
        rf"{re.escape(purchase_attribution(settings).path(settings))}: the table holds batch "
        rf"(\d+) of this query but the checkpoint's newest batch is {planned}\.", message)
    assert found and planned < int(found.group(1)) <= newest_run_2, message
    assert f"medallion backfill {table} --full-refresh" in message
    assert_tables(snapshot(settings), runs.expected)

    put_back(newer, checkpoint)
    run_all(spark, settings)
    assert_tables(snapshot(settings), runs.expected)


def test_a_recomputed_table_with_a_damaged_or_older_checkpoint_is_recomputed(
        spark: SparkSession, runs: Runs, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    # No state to lose: the run says why and recomputes the table from silver, which gives what
    # the undamaged lakehouse holds whatever its batches were.
    settings = copy_of_run_1(runs, tmp_path)
    counts = Path(settings.checkpoint_path("gold/event_counts_5m"))
    damaged = newest(counts / "offsets")
    damaged.write_bytes(damaged.read_bytes()[:20])
    (damaged.parent / f".{damaged.name}.crc").unlink()
    sliding = Path(settings.checkpoint_path("gold/user_activity_sliding"))
    older = shutil.copytree(sliding, tmp_path / "sliding_after_run_1")
    with caplog.at_level(logging.WARNING, logger="medallion.engine.gold.recompute"):
        run_all(spark, settings)
    said = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("gold/event_counts_5m: its checkpoint cannot be carried on from")
               for m in said), said
    assert_tables(snapshot(settings), runs.expected)

    put_back(older, sliding)  # a copy from before run 2: behind the table
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="medallion.engine.gold.recompute"):
        run_all(spark, settings)
    said = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("gold/user_activity_sliding: its checkpoint cannot be carried on from")
               and "the table is recomputed from silver/events" in m for m in said), said
    assert_tables(snapshot(settings), runs.expected)
