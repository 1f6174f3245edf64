"""``medallion plan``'s verdicts, decided without Spark from a table's schema and the definition
its state was written with; and the command on tables delta-rs wrote, in this process."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from medallion.cli.main import main
from medallion.ops.plan import Verdict, verdict
from medallion.pipeline.evolution import DECLARATION_FILE
from medallion.pipeline.types import SqlType, parse_type
from tests.conftest import REPO, make_settings


def columns(ddl: str) -> SqlType:
    """A table's columns, written as a STRUCT's fields: ``a BIGINT, b STRING``."""
    return parse_type(f"STRUCT<{ddl}>")


HELD = columns("window_start TIMESTAMP, category STRING, lines BIGINT")
STATE = {"input": "silver/order_lines", "mode": "update",
         "window": {"kind": "sliding", "column": "ordered_at", "size": "1 hour",
                    "slide": "30 minutes"},
         "group_by": ["category"], "aggregates": {"lines": "count(*)"}}


def test_a_table_not_made_yet_is_new_and_the_same_schema_is_unchanged() -> None:
    assert verdict("gold/x", HELD, None, None, None).verdict is Verdict.NEW
    assert verdict("gold/x", HELD, HELD, STATE, STATE).verdict is Verdict.UNCHANGED


def test_a_recomputed_table_whose_definition_changed_or_checkpoint_is_gone_is_recomputed() -> None:
    recomputed = {**STATE, "refresh": "recompute", "filter": None, "defaults": {}}
    filtered = {**recomputed, "filter": "category <> 'toys'"}
    plan = verdict("gold/x", HELD, HELD, recomputed, filtered, recomputed=True)
    assert (plan.verdict, plan.changes, plan.command) == (
        Verdict.RECOMPUTED, ('definition: filter: null -> "category <> \'toys\'"',), None)
    assert verdict("gold/x", HELD, HELD, None, filtered, recomputed=True).changes == (
        "no checkpoint to carry on from",)
    assert verdict("gold/x", HELD, HELD, filtered, filtered, recomputed=True).verdict is \
        Verdict.UNCHANGED
    # A stateful table with the same change cannot carry on; a column dropped is refused for both.
    assert verdict("gold/x", HELD, HELD, recomputed, filtered).verdict is Verdict.NEEDS_REFRESH
    fewer = columns("window_start TIMESTAMP, category STRING")
    assert verdict("gold/x", fewer, HELD, filtered, filtered, recomputed=True).verdict is \
        Verdict.NEEDS_REFRESH


def test_an_added_column_carries_on_and_says_so() -> None:
    declared = columns("window_start TIMESTAMP, category STRING, lines BIGINT, unit_cents BIGINT")
    plan = verdict("silver/x", declared, HELD, None, None)
    assert plan.verdict is Verdict.CARRIES_ON
    assert plan.changes == ("column unit_cents added (rows written before hold null)",)


def test_a_widened_column_carries_on_unless_the_state_holds_it_in_another_type() -> None:
    declared = columns("window_start TIMESTAMP, category STRING, lines DECIMAL(22,2)")
    plan = verdict("silver/x", declared, HELD, None, None)
    assert plan.verdict is Verdict.CARRIES_ON
    assert plan.changes == ("column lines widened from BIGINT to DECIMAL(22,2) (in place)",)
    typed = {**STATE, "types": {"category": "STRING"}}
    plan = verdict("gold/x", declared, HELD, typed, {**STATE, "types": {"category": "BIGINT"}})
    assert plan.verdict is Verdict.NEEDS_REFRESH
    assert plan.changes == ('state: types.category: "STRING" -> "BIGINT"',)
    # A state recorded without its types is compared on what it says.
    assert verdict("gold/x", HELD, HELD, STATE, typed).verdict is Verdict.UNCHANGED


@pytest.mark.parametrize(("declared", "state", "said"), [
    (columns("window_start TIMESTAMP, category STRING, lines INT"), STATE,
     "column lines is BIGINT in the table and INT in the declaration, which is not a wider type "
     "of it"),
    (columns("window_start TIMESTAMP, category STRING"), STATE,
     "the table has column lines, which the declaration no longer has"),
    (HELD, {**STATE, "window": {**STATE["window"], "size": "2 hours"}},
     'state: window.size: "1 hour" -> "2 hours"'),
    (columns("window_start TIMESTAMP, category STRING, lines BIGINT, top DECIMAL(10,2)"),
     {**STATE, "aggregates": {"lines": "count(*)", "top": "max(unit_price)"}},
     'state: aggregates.top added ("max(unit_price)")'),
])
def test_what_the_run_refuses_needs_a_full_refresh_with_its_command(
        declared: SqlType, state: dict, said: str) -> None:
    plan = verdict("gold/x", declared, HELD, STATE, state, ["gold/y"])
    assert plan.verdict is Verdict.NEEDS_REFRESH
    assert said in plan.changes
    assert plan.command == "medallion backfill gold/x --full-refresh"
    assert plan.rebuilds == ("gold/y",)


def test_the_command_reads_the_lakehouse_without_spark_and_exits_4_for_a_refresh(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = make_settings(tmp_path)
    # gold/user_sessions as declared (stateful: mode append), but its state written with a
    # 10-minute gap
    write_deltalake(settings.table_path("gold", "user_sessions"), pa.table({
        "user_id": pa.array([], pa.string()),
        "session_start": pa.array([], pa.timestamp("us", tz="UTC")),
        "session_end": pa.array([], pa.timestamp("us", tz="UTC")),
        "event_count": pa.array([], pa.int64()),
        "total_amount": pa.array([], pa.decimal128(28, 4))}))
    checkpoint = Path(settings.checkpoint_path("gold/user_sessions"))
    checkpoint.mkdir(parents=True)
    (checkpoint / DECLARATION_FILE).write_text(json.dumps({
        "input": "silver/events", "mode": "append",
        "window": {"kind": "session", "column": "timestamp", "gap": "10 minutes"},
        "group_by": ["user_id"],
        "aggregates": {"event_count": "count(*)", "total_amount": "sum(amount)"}}))
    # silver/events without its last declared column
    write_deltalake(settings.table_path("silver", "events"), pa.table({
        "event_id": pa.array([], pa.string())}))
    paths = ["--conf-dir", str(REPO / "conf"), "--landing", settings.paths.landing,
             "--lakehouse", settings.paths.lakehouse]
    assert main(["plan", *paths]) == 4
    out = capsys.readouterr().out
    assert 'gold/user_sessions' in out and 'state: window.gap: "10 minutes" -> "5 minutes"' in out
    assert "run: medallion backfill gold/user_sessions --full-refresh" in out
    assert "silver/events" in out and "column user_id added (rows written before hold null)" in out
    assert out.splitlines()[-1].startswith("plan: ")
    assert main(["plan", "--format", "json", *paths]) == 4
    document = json.loads(capsys.readouterr().out)
    by_table = {t["table"]: t for t in document["tables"]}
    assert by_table["gold/user_sessions"]["verdict"] == "needs a full refresh"
    assert by_table["silver/events"]["verdict"] == "carries on"
    assert by_table["gold/event_counts_5m"]["verdict"] == "new"
    assert document["needs_refresh"] is True
    # status says so too, and exits 1 as for a failed run
    assert main(["status", *paths]) == 1
    status = capsys.readouterr().out
    line = next(row for row in status.splitlines() if row.startswith("gold/user_sessions "))
    assert line.split()[-1] == "REFRESH"
    assert ('needs a full refresh: gold/user_sessions: state: window.gap: "10 minutes" -> '
            '"5 minutes"; run: medallion backfill gold/user_sessions --full-refresh') in status
    silver_line = next(row for row in status.splitlines() if row.startswith("silver/events "))
    assert silver_line.split()[-1] == "-"  # carries on: nothing to do
