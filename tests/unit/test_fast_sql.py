"""``medallion sql`` without a JVM: Spark SQL translated for DuckDB, results printed as Spark
prints them, and queries over Delta tables delta-rs wrote here (latest version, time travel,
declared views, refusals), in this process."""

from __future__ import annotations

import io
import time
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

from medallion.cli.main import main
from medallion.project import Settings
from medallion.serving.grid import cell, java_double
from medallion.serving.lakehouse import Lakehouse, QueryError, connect
from medallion.serving.output import json_line, python_rows, write_rows
from medallion.serving.shell import complete, run_shell
from medallion.serving.translate import Refused, Travel, translate, translate_view
from tests.conftest import make_settings
from tests.events_tables import GOLD_EVENT_COUNTS_5M

SCHEMAS = ("bronze", "silver", "gold", "monitoring", "quality")
T0 = datetime(2025, 1, 27, 10, 0, tzinfo=timezone.utc)
UTC_US = pa.timestamp("us", tz="UTC")


# --- translation (pure) ---------------------------------------------------------------------

def test_a_spark_cast_stays_strict_and_try_cast_stays_lenient() -> None:
    sql = translate("SELECT CAST(a AS INT) AS x, try_cast(b AS INT) AS y FROM gold.t", SCHEMAS).sql
    assert "TRY_CAST(b AS INT)" in sql
    assert "TRY_CAST(a" not in sql and "CAST(a AS INT)" in sql


def test_the_tables_a_query_reads_leave_out_its_own_with_names() -> None:
    translated = translate("WITH gold_x AS (SELECT * FROM silver.events) "
                           "SELECT * FROM gold_x JOIN gold.user_sessions s ON true", SCHEMAS)
    assert translated.tables == ("gold.user_sessions", "silver.events")
    assert translated.travels == ()


def test_version_and_timestamp_as_of_read_a_registered_version_under_the_table_name() -> None:
    translated = translate("SELECT event_counts_5m.event_type, o.n FROM gold.event_counts_5m "
                           "VERSION AS OF 3 JOIN gold.other TIMESTAMP AS OF "
                           "'2025-01-27 10:00:00' AS o ON true", SCHEMAS)
    version = Travel("gold.event_counts_5m", version=3)
    instant = Travel("gold.other", timestamp=T0)
    assert translated.travels == (version, instant)
    assert f'"{version.alias}" AS event_counts_5m' in translated.sql
    assert f'"{instant.alias}" AS o' in translated.sql
    assert translated.tables == ()


@pytest.mark.parametrize(("statement", "said"), [
    ("INSERT INTO gold.t VALUES (1)", "INSERT writes"),
    ("DELETE FROM gold.t", "DELETE writes"),
    ("DROP TABLE gold.t", "DROP writes"),
    ("CREATE VIEW gold.v AS SELECT 1", "CREATE writes"),
    ("OPTIMIZE gold.t", "OPTIMIZE writes"),
    ("DESCRIBE HISTORY gold.t", "needs the catalog"),
    ("SHOW TABLES IN gold", "needs the catalog"),
    ("SELECT FROM WHERE", "cannot read it as Spark SQL"),
    ("SELECT * FROM gold.t VERSION AS OF 'x'", "a version is a whole number"),
])
def test_what_the_fast_path_does_not_run_is_refused_in_one_line_naming_spark(
        statement: str, said: str) -> None:
    with pytest.raises(Refused) as refused:
        translate(statement, SCHEMAS)
    message = str(refused.value)
    assert said in message
    assert "\n" not in message
    if "whole number" not in said:
        assert "--engine spark" in message


def test_a_declared_view_is_translated_with_its_spark_functions() -> None:
    sql = translate_view("SELECT to_date(window_start) AS day, CAST(sum(n) AS BIGINT) AS n "
                         "FROM gold.t GROUP BY to_date(window_start)")
    assert "CAST(window_start AS DATE)" in sql.replace("TRY_CAST", "CAST")
    assert "CAST(SUM(n) AS BIGINT)" in sql and "TRY_CAST(SUM" not in sql


def test_the_shell_runs_a_statement_once_its_semicolon_is_typed() -> None:
    assert not complete("SELECT 1")
    assert not complete("SELECT ';")  # inside a string
    assert not complete("SELECT 1 -- ;")
    assert complete("SELECT 1;\n")
    assert complete("SELECT ';' AS s;")


# --- printing (pure) ------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "java"), [
    (0.0, "0.0"), (-0.0, "-0.0"), (1.0, "1.0"), (0.001, "0.001"), (123.456, "123.456"),
    (1234567.0, "1234567.0"), (1e7, "1.0E7"), (12345678.9, "1.23456789E7"), (1e-4, "1.0E-4"),
    (-2.5e-5, "-2.5E-5"), (1e21, "1.0E21"), (float("nan"), "NaN"), (float("inf"), "Infinity"),
])
def test_doubles_print_as_java_prints_them(value: float, java: str) -> None:
    assert java_double(value) == java


def test_floats_print_with_the_fewest_digits_of_a_four_byte_float() -> None:
    assert java_double(0.10000000149011612, single=True) == "0.1"
    assert java_double(16777216.0, single=True) == "1.6777216E7"


def test_a_row_prints_as_spark_writes_csv_and_json() -> None:
    row = {"window_start": T0, "day": T0.date(), "n": 3, "amount": Decimal("19.7500"),
           "rate": 0.5, "tags": ["a", None], "pair": {"k": 1, "v": None}, "none": None,
           "flag": True, "text": 'say "hi"'}
    csv_out = io.StringIO()
    write_rows(list(row), [row], "csv", csv_out)
    assert csv_out.getvalue().splitlines()[1] == (
        '2025-01-27 10:00:00,2025-01-27,3,19.7500,0.5,"[a, null]","{1, null}",,true,'
        '"say ""hi"""')
    assert json_line(row) == (
        '{"window_start":"2025-01-27T10:00:00.000Z","day":"2025-01-27","n":3,'
        '"amount":19.7500,"rate":0.5,"tags":["a",null],"pair":{"k":1,"v":null},"none":null,'
        '"flag":true,"text":"say \\"hi\\""}')
    assert cell(T0 + timedelta(microseconds=500000)) == "2025-01-27 10:00:00.5"


# --- queries over Delta tables delta-rs wrote (no JVM) ---------------------------------------

def _counts(rows: list[tuple[datetime, str, int, str]]) -> pa.Table:
    return pa.table({
        "window_start": pa.array([r[0] for r in rows], UTC_US),
        "window_end": pa.array([r[0] + timedelta(minutes=5) for r in rows], UTC_US),
        "event_type": [r[1] for r in rows],
        "event_count": pa.array([r[2] for r in rows], pa.int64()),
        "total_amount": pa.array([Decimal(r[3]) for r in rows], pa.decimal128(28, 4)),
    })


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    settings = make_settings(tmp_path)
    path = GOLD_EVENT_COUNTS_5M.path(settings)
    write_deltalake(path, _counts([(T0, "view", 2, "0"), (T0, "purchase", 1, "12.5")]))  # v0
    write_deltalake(path, _counts([(T0 + timedelta(minutes=5), "view", 1, "0"),  # v1
                                   (T0 + timedelta(days=1), "purchase", 2, "7.25")]),
                    mode="append")
    return settings


def _rows(house: Lakehouse, statement: str) -> list[dict]:
    return python_rows(house.query(statement).table)


def test_a_query_reads_the_latest_version_and_a_declared_view_rolls_it_up(
        settings: Settings) -> None:
    house = Lakehouse(settings)
    assert _rows(house, "SELECT count(*) AS n FROM gold.event_counts_5m") == [{"n": 4}]
    daily = _rows(house, "SELECT * FROM gold.event_counts_daily ORDER BY day, event_type")
    assert daily == [
        {"day": T0.date(), "event_type": "purchase", "event_count": 1,
         "total_amount": Decimal("12.5000")},
        {"day": T0.date(), "event_type": "view", "event_count": 3,
         "total_amount": Decimal("0.0000")},
        {"day": (T0 + timedelta(days=1)).date(), "event_type": "purchase", "event_count": 2,
         "total_amount": Decimal("7.2500")},
    ]


def test_time_travel_reads_the_earlier_version(settings: Settings) -> None:
    house = Lakehouse(settings)
    assert _rows(house, "SELECT count(*) AS n FROM gold.event_counts_5m VERSION AS OF 0") == \
        [{"n": 2}]
    assert _rows(Lakehouse(settings, as_of=0),
                 "SELECT sum(event_count) AS n FROM gold.event_counts_5m") == [{"n": 3}]
    with pytest.raises(QueryError, match="has no version at version 7"):
        house.query("SELECT * FROM gold.event_counts_5m VERSION AS OF 7")


def test_as_of_an_instant_reads_every_table_and_view_as_it_was_then(
        settings: Settings, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    path = GOLD_EVENT_COUNTS_5M.path(settings)
    between = datetime.now(timezone.utc)
    time.sleep(0.05)
    write_deltalake(path, _counts([(T0, "click", 5, "0")]), mode="append")  # v2, after it
    then = Lakehouse(settings, as_of=between)
    assert _rows(then, "SELECT sum(event_count) AS n FROM gold.event_counts_5m") == [{"n": 6}]
    assert _rows(then, "SELECT sum(event_count) AS n FROM gold.event_counts_daily") == [{"n": 6}]
    assert _rows(Lakehouse(settings), "SELECT sum(event_count) AS n FROM gold.event_counts_5m") \
        == [{"n": 11}]
    monkeypatch.setattr("medallion.cli.main._settings", lambda args: settings)
    assert main(["sql", "--format", "csv", "--as-of", between.isoformat(),
                 "SELECT sum(event_count) AS n FROM gold.event_counts_5m"]) == 0
    assert capsys.readouterr().out == "n\n6\n"
    assert main(["sql", "--as-of", "1", "SELECT * FROM gold.event_counts_daily "
                 "JOIN gold.event_counts_5m ON true"]) == 1
    assert "--as-of 1 is a version of one table" in capsys.readouterr().err


def test_an_unknown_or_missing_table_and_a_spark_only_function_are_told_in_one_line(
        settings: Settings) -> None:
    house = Lakehouse(settings)
    with pytest.raises(QueryError, match=r"no table or view gold\.nope in the lakehouse"):
        house.query("SELECT * FROM gold.nope")
    with pytest.raises(QueryError, match=r"gold\.user_sessions is not created yet"):
        house.query("SELECT * FROM gold.user_sessions")
    with pytest.raises(QueryError) as spark_only:
        house.query("SELECT input_file_name() FROM gold.event_counts_5m")
    assert "--engine spark" in str(spark_only.value) and "\n" not in str(spark_only.value)


def test_the_connection_reads_no_file_of_its_own(settings: Settings, tmp_path: Path) -> None:
    house = Lakehouse(settings)
    house.query("SELECT 1 AS one")
    secret = tmp_path / "secret.csv"
    secret.write_text("a\n1\n")
    with pytest.raises(QueryError, match="disabled"):
        house.query(f"SELECT * FROM read_csv('{secret}')")
    with pytest.raises(Refused, match="SET needs the catalog"):
        house.query("SET enable_external_access = true")
    with pytest.raises(duckdb.InvalidInputException, match="configuration has been locked"):
        house.connection.execute("SET enable_external_access = true")


def test_the_cli_answers_as_csv_json_and_parquet_without_spark(
        settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("medallion.cli.main._settings", lambda args: settings)
    query = "SELECT event_type, sum(event_count) AS n FROM gold.event_counts_5m GROUP BY 1 ORDER BY 1"
    assert main(["sql", "--format", "csv", query]) == 0
    assert capsys.readouterr().out == "event_type,n\npurchase,3\nview,3\n"
    assert main(["sql", "--format", "json", "--limit", "1", query]) == 0
    assert capsys.readouterr().out == '{"event_type":"purchase","n":3}\n'
    target = tmp_path / "out.parquet"
    assert main(["sql", "--output", str(target), query]) == 0
    assert pq.read_table(target).to_pylist() == [{"event_type": "purchase", "n": 3},
                                                  {"event_type": "view", "n": 3}]
    assert main(["sql", "SELECT 1 AS a; DROP TABLE gold.event_counts_5m"]) == 1
    captured = capsys.readouterr()
    assert captured.err.strip() == (
        "medallion: failed: statement 2 of 2 (those before it were run): DROP writes, and the "
        "fast path only reads the lakehouse; --engine spark runs it with Spark (the catalog "
        "allowing)")


def test_the_shell_answers_statements_over_several_lines(settings: Settings) -> None:
    typed = io.StringIO(".tables\nSELECT count(*)\n AS n FROM gold.event_counts_5m;\n"
                        "SELECT nope();\n.quit\n")
    out = io.StringIO()
    assert run_shell(settings, read=typed, out=out) == 0
    text = out.getvalue()
    assert "gold.event_counts_5m\n" in text and "gold.event_counts_daily\n" in text
    assert "|n  |\n+---+\n|4  |\n" in text
    assert "error: " in text and "--engine spark" in text


def test_a_notebook_connection_has_every_table_and_view(settings: Settings,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("medallion.project.load_settings", lambda *a, **k: settings)
    db = connect()
    frame = db.sql("SELECT event_type, sum(event_count) AS n FROM gold.event_counts_daily "
                   "GROUP BY 1 ORDER BY 1").fetchall()
    assert frame == [("purchase", 3), ("view", 3)]
    assert db.sql("SELECT current_setting('TimeZone') AS zone").fetchall() == [("UTC",)]
