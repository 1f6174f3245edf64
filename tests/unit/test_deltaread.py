"""Reading Delta tables without Spark (delta-rs): locations, log facts, unreadable tables, and
the read-only commands on tables delta-rs wrote, in this process (no JVM)."""

from __future__ import annotations

import json
import re
import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from medallion.cli.main import main
from medallion.config.model import S3Settings
from medallion.io.deltaread import (
    DeltaReader,
    DeltaReadError,
    delta_location,
    sorted_head,
    table_facts,
)
from medallion.io.tables import QUERY_PROGRESS, RUN_OUTCOMES, undeclared_tables
from medallion.ops.status import behind, collect_status, format_status, state_bytes
from medallion.project import Settings
from medallion.quality.summary import summarise
from medallion.serving.grid import show_string
from tests.conftest import REPO, make_settings
from tests.events_tables import GOLD_EVENT_COUNTS_5M

T0 = datetime(2025, 1, 27, 10, 0, tzinfo=timezone.utc)
UTC_US = pa.timestamp("us", tz="UTC")


def test_s3a_paths_map_to_delta_rs_with_the_configured_endpoint_and_no_printed_secret() -> None:
    s3 = S3Settings(endpoint="http://127.0.0.1:9000", path_style_access=True)
    where = delta_location("s3a://lake/house/gold/x", s3, {"AWS_SECRET_ACCESS_KEY": "sekrit"})
    assert where.uri == "s3://lake/house/gold/x"
    assert where.options["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9000"
    assert where.options["AWS_ALLOW_HTTP"] == "true"  # the configured endpoint is http
    assert where.options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] == "false"
    assert where.options["AWS_REGION"] == "us-east-1"  # S3A's default for a compatible store
    assert "sekrit" not in repr(where)

    hosted = delta_location("s3a://lake/t", S3Settings(endpoint="https://s3.example.com",
                                                        region="eu-west-1"))
    assert hosted.options["AWS_ENDPOINT_URL"] == "https://lake.s3.example.com"
    assert "AWS_ALLOW_HTTP" not in hosted.options
    assert hosted.options["AWS_REGION"] == "eu-west-1"
    aws = delta_location("s3://lake/t", S3Settings(region="eu-west-1"))
    assert "AWS_ENDPOINT_URL" not in aws.options
    assert aws.options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] == "true"
    assert delta_location("/data/lake/t", s3).uri == "/data/lake/t"
    assert delta_location("file:/data/lake/t", s3).uri == "/data/lake/t"


def _write_counts(settings: Settings, rows: list[tuple[datetime, str, int]]) -> None:
    table = pa.table({
        "window_start": pa.array([r[0] for r in rows], UTC_US),
        "window_end": pa.array([r[0] + timedelta(minutes=5) for r in rows], UTC_US),
        "event_type": [r[1] for r in rows],
        "event_count": pa.array([r[2] for r in rows], pa.int64()),
        "total_amount": pa.array([Decimal("1.5000")] * len(rows), pa.decimal128(28, 4)),
    })
    write_deltalake(GOLD_EVENT_COUNTS_5M.path(settings), table, mode="append")


def _write_runs(settings: Settings, succeeded: bool, error: str | None) -> None:
    write_deltalake(RUN_OUTCOMES.path(settings), pa.table({
        "pipeline_run": ["r1"], "table": ["gold/event_counts_5m"], "trigger": ["available-now"],
        "started_at": pa.array([T0], UTC_US), "finished_at": pa.array([T0], UTC_US),
        "succeeded": [succeeded], "rows_in": pa.array([3], pa.int64()),
        "rows_out": pa.array([3], pa.int64()), "error": pa.array([error], pa.string())}),
        mode="append")


def test_facts_come_from_the_log_statistics_or_else_from_the_files(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    _write_counts(settings, [(T0, "view", 2), (T0 + timedelta(minutes=5), "click", 1)])
    _write_counts(settings, [(T0 + timedelta(minutes=10), "view", 4)])
    path = GOLD_EVENT_COUNTS_5M.path(settings)
    facts = table_facts(DeltaTable(path), "window_end")
    assert (facts.version, facts.files, facts.rows) == (1, 2, 3)
    assert facts.newest == T0 + timedelta(minutes=15)
    assert facts.size_bytes == sum(p.stat().st_size for p in Path(path).glob("*.parquet"))
    assert facts.committed_at is not None and facts.committed_at.tzinfo is not None

    # The same table with no statistics in its log: rows and newest value read from the files.
    log = Path(path) / "_delta_log"
    for commit in log.glob("*.json"):
        actions = [json.loads(line) for line in commit.read_text().splitlines()]
        for action in actions:
            action.get("add", {}).pop("stats", None)
        commit.write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    assert table_facts(DeltaTable(path), "window_end") == facts


def test_status_reads_a_lakehouse_without_spark(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    settings = make_settings(tmp_path)
    _write_counts(settings, [(T0, "view", 2), (T0 + timedelta(minutes=5), "click", 1)])
    _write_runs(settings, True, None)
    now = T0 + timedelta(hours=2)
    status = {s.table: s for s in collect_status(settings, now=now)}
    counts = status["gold/event_counts_5m"]
    assert (counts.exists, counts.version, counts.rows, counts.files) == (True, 0, 2, 1)
    assert counts.lag_seconds == (now - (T0 + timedelta(minutes=10))).total_seconds()
    assert counts.last_run_succeeded is True
    assert not status["silver/events"].exists
    text = format_status(list(status.values()))
    assert "not created" in text and "1.8h" in text

    _write_runs(settings, False, "boom: the disk is full")
    args = ["status", "--conf-dir", str(REPO / "conf"), "--landing", settings.paths.landing,
            "--lakehouse", settings.paths.lakehouse]
    assert main(args) == 1  # a table whose last run failed
    out = capsys.readouterr().out
    assert "error: gold/event_counts_5m: boom: the disk is full" in out


def test_status_lists_the_tables_no_pipeline_declares_any_more(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A gold table taken out of its declaration (or renamed in it) keeps its data, checkpoint
    and catalog entry, and no run updates it: before, ``status`` showed nothing of it, and runs
    said nothing (each run now warns of it; tests/integration/test_declaration_changes.py)."""
    settings = make_settings(tmp_path)
    _write_counts(settings, [(T0, "view", 2)])
    lakehouse = Path(settings.paths.lakehouse)
    write_deltalake(str(lakehouse / "gold" / "event_counts_1m"),
                    pa.table({"event_type": ["view", "click", "view"]}))
    write_deltalake(str(lakehouse / "silver" / "clicks"), pa.table({"n": [1]}))
    (lakehouse / "gold" / "notes").mkdir()  # a folder with no Delta log is no table
    assert undeclared_tables(settings) == ["silver/clicks", "gold/event_counts_1m"]
    # narrowed to one pipeline (`run --pipeline orders`), the other's tables are still declared
    assert undeclared_tables(settings.only(["orders"])) == ["silver/clicks", "gold/event_counts_1m"]

    status = {s.table: s for s in collect_status(settings)}
    old = status["gold/event_counts_1m"]
    assert (old.declared, old.exists, old.version, old.rows) == (False, True, 0, 3)
    assert status["gold/event_counts_5m"].declared and "gold/notes" not in status
    assert main(["status", "--conf-dir", str(REPO / "conf"), "--landing", settings.paths.landing,
                 "--lakehouse", settings.paths.lakehouse]) == 0
    line = next(row for row in capsys.readouterr().out.splitlines()
                if row.startswith("gold/event_counts_1m "))
    assert line.split()[1] == "0" and line.split()[4] == "3" and line.endswith("not declared")


def _write_progress(settings: Settings, batches: list[tuple[str, datetime, int | None, dict]]) -> None:
    write_deltalake(QUERY_PROGRESS.path(settings), pa.table({
        "query_name": [b[0] for b in batches],
        "batch_timestamp": pa.array([b[1] for b in batches], UTC_US),
        "state_rows": pa.array([b[2] for b in batches], pa.int64()),
        "progress_json": [json.dumps(b[3]) for b in batches],
        "recorded_at": pa.array([b[1] for b in batches], UTC_US)}), mode="append")


def _rocksdb(sst_bytes: int) -> dict:
    # As Spark 4.0 reports a RocksDB store: no memory figure, the SST files' size among its own.
    return {"operatorName": "stateStoreSave", "numRowsTotal": 0, "memoryUsedBytes": 0,
            "customMetrics": {"rocksdbSstFileSize": sst_bytes, "rocksdbPinnedBlocksMemoryUsage": 551648}}


def test_status_gives_each_querys_state_size_after_its_last_batch(tmp_path: Path) -> None:
    """RocksDB stores report no memory: their state size is their SST files'; a query without
    state shows none, not 0, and only the last batch of each query counts."""
    settings = make_settings(tmp_path)
    _write_counts(settings, [(T0, "view", 2)])
    write_deltalake(settings.table_path("silver", "events"),
                    pa.table({"event_id": ["e1"], "timestamp": pa.array([T0], UTC_US)}))
    # An older file: the first batches of the gold query and of silver.
    _write_progress(settings, [
        ("gold/event_counts_5m", T0, None, {"stateOperators": [_rocksdb(999)]}),
        ("silver/events", T0, 0, {"stateOperators": []})])
    # The last batches. The gold query's is the oldest of them, so the read starts there.
    _write_progress(settings, [
        ("silver/events", T0 + timedelta(minutes=3), 0, {"stateOperators": []}),
        ("gold/event_counts_5m", T0 + timedelta(minutes=2), None,
         {"stateOperators": [_rocksdb(1500), _rocksdb(2596)]}),
        ("gold/event_counts_5m", T0 + timedelta(minutes=1), None,
         {"stateOperators": [_rocksdb(1000)]})])

    status = {s.table: s for s in collect_status(settings, now=T0 + timedelta(hours=1))}
    assert (status["gold/event_counts_5m"].state_rows, status["gold/event_counts_5m"].state_bytes) \
        == (None, 4096)
    # Spark's HDFS-backed store reports the memory its map takes.
    assert state_bytes({"stateOperators": [{"operatorName": "sessionWindowStateStoreSaveExec",
                                            "numRowsTotal": 7, "memoryUsedBytes": 5120,
                                            "customMetrics": {}}]}) == 5120
    assert (status["silver/events"].state_rows, status["silver/events"].state_bytes) == (None, None)
    line = next(row for row in format_status(list(status.values())).splitlines()
                if row.startswith("gold/event_counts_5m "))
    assert line.split()[-3:] == ["-", "4.0KiB", "-"]  # state rows unknown, 4 KiB, no run recorded


def test_a_table_delta_rs_cannot_read_fails_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = make_settings(tmp_path)
    _write_counts(settings, [(T0, "view", 2)])
    log = Path(GOLD_EVENT_COUNTS_5M.path(settings)) / "_delta_log"
    (log / f"{1:020d}.json").write_text(json.dumps({"protocol": {
        "minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["teleportation"],
        "writerFeatures": ["teleportation"]}}) + "\n")
    with pytest.raises(DeltaReadError, match="gold/event_counts_5m: delta-rs cannot read"):
        DeltaReader(settings).open(GOLD_EVENT_COUNTS_5M.path(settings), GOLD_EVENT_COUNTS_5M.key)
    for command in ("status", "show", "report"):
        assert main([command, "--conf-dir", str(REPO / "conf"), "--landing",
                     settings.paths.landing, "--lakehouse", settings.paths.lakehouse,
                     *(["--output", str(tmp_path / "r.html")] if command == "report" else [])]) == 1
        err = capsys.readouterr().err
        assert err.startswith("medallion: failed: gold/event_counts_5m: delta-rs cannot read"), err
        assert err.count("\n") == 1 and "Traceback" not in err, err


def test_show_prints_the_grid_spark_prints() -> None:
    rows = [[T0, None, Decimal("0.5000"), 3],
            [T0 + timedelta(microseconds=500000), "click", Decimal("12.0000"), 10]]
    assert show_string(["window_start", "event_type", "total", "n"], rows, more=True) == (
        "+---------------------+----------+-------+---+\n"
        "|window_start         |event_type|total  |n  |\n"
        "+---------------------+----------+-------+---+\n"
        "|2025-01-27 10:00:00  |NULL      |0.5000 |3  |\n"
        "|2025-01-27 10:00:00.5|click     |12.0000|10 |\n"
        "+---------------------+----------+-------+---+\n"
        "only showing top 2 rows")
    assert show_string(["a"], []) == "+---+\n|a  |\n+---+\n+---+\n"


def test_quality_summary_keeps_each_tables_most_recent_checks() -> None:
    def result(batch: int, expectation: str, success: bool, unexpected: int) -> dict:
        return {"table": "silver/events", "run_id": "r", "batch_id": batch,
                "validated_at": T0 + timedelta(minutes=batch), "expectation": expectation,
                "severity": "fail", "success": success, "unexpected_count": unexpected,
                "observed_value": f"{unexpected} unexpected"}

    rows = [result(0, "a", False, 5), result(0, "b", True, 0),
            result(1, "a", True, 0), result(1, "b", True, 0),
            result(2, "a", True, 0), result(2, "b", False, 2)]
    everything = {e["expectation"]: e for e in summarise(rows, batches=20)}
    assert (everything["a"]["checks"], everything["a"]["failed"],
            everything["a"]["unexpected"]) == (3, 1, 5)
    assert everything["b"]["last"] == "FAIL" and everything["b"]["batch"] == "r#2"
    recent = {e["expectation"]: e for e in summarise(rows, batches=2)}
    assert (recent["a"]["checks"], recent["a"]["failed"], recent["a"]["last"]) == (2, 0, "pass")
    assert recent["b"]["when"] == T0 + timedelta(minutes=2)
    assert summarise(rows, table="gold/x") == []


def test_an_unreachable_s3_endpoint_is_one_line_not_an_empty_lakehouse(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-a-real-secret")
    base = make_settings(tmp_path)
    settings = replace(base, paths=replace(base.paths, lakehouse="s3a://lake-bucket/house"),
                       s3=S3Settings(endpoint="http://127.0.0.1:1", path_style_access=True))
    with pytest.raises(DeltaReadError) as raised:
        collect_status(settings)
    message = str(raised.value)
    assert re.match(r"[a-z_]+/[a-z_]+: cannot read the Delta log: .*Connection refused", message)
    assert "127.0.0.1:1" in message and "\n" not in message
    assert "not-a-real-secret" not in message


def test_the_first_rows_of_a_table_with_a_struct_among_its_first_columns(tmp_path: Path) -> None:
    """`medallion show` orders by a gold table's first three columns: one grouped by a struct
    (a declared STRUCT column) crashed, since Arrow can neither sort by a struct nor take rows of
    the string views delta-rs hands out inside it."""
    place = pa.struct([("site", pa.string()), ("floor", pa.int32())])
    write_deltalake(str(tmp_path / "t"), pa.Table.from_pydict({
        "day": [3, 1, 2], "place": pa.array([{"site": "B", "floor": 1}, {"site": "A", "floor": 2},
                                             None], place),
        "tags": [["x"], [], None], "n": [30, 10, 20]}))
    rows, more = sorted_head(DeltaTable(str(tmp_path / "t")), ["day", "place", "tags", "n"],
                             ["place", "tags", "n"], 2)
    assert (rows, more) == ([{"day": 1, "place": {"site": "A", "floor": 2}, "tags": [], "n": 10},
                             {"day": 2, "place": None, "tags": None, "n": 20}], True)


def test_behind_is_how_long_the_oldest_input_commit_since_catching_up_has_waited() -> None:
    now = T0 + timedelta(hours=1)
    commits = [T0 + timedelta(minutes=m) for m in (5, 20, 40)]
    assert behind(commits, T0 + timedelta(minutes=10), now) == 40 * 60  # the 20-minute commit
    assert behind(commits, T0 + timedelta(minutes=45), now) == 0.0  # caught up
    assert behind(commits, None, now) is None  # never took its input in


def test_status_separates_processing_lag_from_data_age(tmp_path: Path) -> None:
    """Old data (event times of 2025) processed just now is not a pipeline behind: ``behind``
    says how long new input has waited for each table, ``data age`` how old its newest event is."""
    settings = make_settings(tmp_path)
    started = datetime.now(timezone.utc) - timedelta(seconds=1)
    _write_counts(settings, [(T0, "view", 2)])
    write_deltalake(RUN_OUTCOMES.path(settings), pa.table({
        "pipeline_run": ["r1"], "table": ["gold/event_counts_5m"], "trigger": ["available-now"],
        "started_at": pa.array([started], UTC_US), "finished_at": pa.array([started], UTC_US),
        "succeeded": [True], "rows_in": pa.array([1], pa.int64()),
        "rows_out": pa.array([1], pa.int64()), "error": pa.array([None], pa.string())}))
    silver = settings.table_path("silver", "events")
    write_deltalake(silver, pa.table({"event_id": ["e1"], "timestamp": pa.array([T0], UTC_US)}))
    now = datetime.now(timezone.utc) + timedelta(minutes=10)
    waiting = {s.table: s for s in collect_status(settings, now=now)}["gold/event_counts_5m"]
    assert 10 * 60 <= waiting.behind_seconds <= 10 * 60 + 30  # silver committed after its run
    assert waiting.lag_seconds > 300 * 86400  # and its data is old either way

    time.sleep(0.01)
    later = datetime.now(timezone.utc)
    _write_progress(settings, [("gold/event_counts_5m", later, None, {"stateOperators": []})])
    caught = {s.table: s for s in collect_status(settings, now=now)}["gold/event_counts_5m"]
    assert caught.behind_seconds == 0.0  # a batch after silver's commit took it in
    line = next(row for row in format_status([caught]).splitlines()
                if row.startswith("gold/event_counts_5m "))
    assert line.split()[7] == "0s"
    assert format_status([caught]).splitlines()[0].split()[7:9] == ["behind", "data"]
