"""Analysts' access to gold: the persistent catalog, ``medallion sql``, time travel, the Thrift
server (HiveServer2) with real clients, and Spark-free reads with delta-rs.

The lakehouse is built once for the module from hand-written events, in two runs; every way of
reading gold must return the rows written out by hand below.

Clients: PyHive (HiveServer2's Thrift protocol with SASL PLAIN, from PyPI) is what a Python
notebook uses; beeline drives the Hive JDBC driver that pyspark ships, the driver DBeaver and
other JDBC tools load.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pyspark
import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from medallion.config.model import Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.project import Settings
from medallion.serving import thrift
from tests.conftest import REPO, make_settings
from tests.events_tables import GOLD_EVENT_COUNTS_5M
from tests.lakehouse_views import assert_engines_agree, fast_csv_lines
from tests.spark_free import run_without_spark

Row5m = tuple[str, str, str, int, Decimal]

# gold.event_counts_5m after each run, worked out by hand from the events below.
AFTER_RUN_1: set[Row5m] = {
    ("2025-01-27 10:00:00", "2025-01-27 10:05:00", "view", 2, Decimal("0.0000")),
    ("2025-01-27 10:05:00", "2025-01-27 10:10:00", "click", 1, Decimal("0.0000")),
    ("2025-01-27 10:05:00", "2025-01-27 10:10:00", "purchase", 1, Decimal("12.5000")),
}
AFTER_RUN_2: set[Row5m] = {
    ("2025-01-27 10:00:00", "2025-01-27 10:05:00", "view", 3, Decimal("0.0000")),
    ("2025-01-27 10:05:00", "2025-01-27 10:10:00", "click", 1, Decimal("0.0000")),
    ("2025-01-27 10:05:00", "2025-01-27 10:10:00", "purchase", 2, Decimal("19.7500")),
}
DAILY_AFTER_RUN_2 = {
    ("2025-01-27", "view", 3, Decimal("0.0000")),
    ("2025-01-27", "click", 1, Decimal("0.0000")),
    ("2025-01-27", "purchase", 2, Decimal("19.7500")),
}

RUN_1_EVENTS = [
    {"event_id": "e1", "user_id": "u1", "event_type": "view", "timestamp": "2025-01-27T10:00:01Z"},
    {"event_id": "e2", "user_id": "u1", "event_type": "view", "timestamp": "2025-01-27T10:03:00Z",
     "amount": None},
    {"event_id": "e3", "user_id": "u2", "event_type": "click", "timestamp": "2025-01-27T10:07:00Z"},
    {"event_id": "e4", "user_id": "u1", "event_type": "purchase",
     "timestamp": "2025-01-27T10:08:00Z", "amount": 12.5},
]
RUN_2_EVENTS = [
    {"event_id": "e5", "user_id": "u2", "event_type": "view", "timestamp": "2025-01-27T10:04:00Z"},
    {"event_id": "e6", "user_id": "u2", "event_type": "purchase",
     "timestamp": "2025-01-27T10:09:00Z", "amount": 7.25},
    RUN_1_EVENTS[0],  # delivered again: removed as a duplicate
]

ORDER = "ORDER BY window_start, event_type"
BEELINE = Path(pyspark.__file__).parent / "bin" / "beeline"


def _land(folder: Path, name: str, lines: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    hidden = folder / f".{name}.tmp"
    hidden.write_text("\n".join(lines) + "\n", encoding="utf-8")
    hidden.rename(folder / name)  # the file source must never see a half-written file


def _ts(text: str) -> str:
    """Any timestamp text a client returns (ISO with Z, or Spark's) as 'YYYY-MM-DD HH:MM:SS'."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).strftime("%Y-%m-%d %H:%M:%S")


def _row(start: object, end: object, event_type: object, count: object, total: object) -> Row5m:
    return (_ts(str(start)), _ts(str(end)), str(event_type), int(str(count)),
            Decimal(str(total)).quantize(Decimal("0.0001")))


class Lakehouse:
    """The module's lakehouse, with what the runs left to check time travel against."""

    def __init__(self, settings: Settings, root: Path) -> None:
        self.settings = settings
        self.root = root
        self.version_after_run_1 = -1
        self.timestamp_after_run_1 = ""


@pytest.fixture(scope="module")
def lakehouse(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Lakehouse:
    """Two pipeline runs over hand-written events; the second changes gold's rows."""
    root = tmp_path_factory.mktemp("analysts")
    settings = make_settings(root)
    house = Lakehouse(settings, root)
    landing = Path(settings.paths.landing)
    _land(landing / "customers", "customers.csv",
          ["customer_id,customer_name,segment", "u1,Ada,consumer", "u2,Bob,smb"])
    _land(landing / "events", "run1.json", [json.dumps(e) for e in RUN_1_EVENTS])
    run_pipeline(spark, settings, RunTarget.ALL, Trigger())
    history = DeltaTable.forPath(spark, GOLD_EVENT_COUNTS_5M.path(settings)).history(1)
    first = history.selectExpr("version", "CAST(timestamp AS STRING) AS ts").first()
    assert first is not None
    house.version_after_run_1, house.timestamp_after_run_1 = int(first["version"]), first["ts"]
    _land(landing / "events", "run2.json", [json.dumps(e) for e in RUN_2_EVENTS])
    run_pipeline(spark, settings, RunTarget.ALL, Trigger())
    return house


def _spark_rows(spark: SparkSession, query: str) -> set[Row5m]:
    return {_row(*r) for r in spark.sql(
        f"SELECT CAST(window_start AS STRING), CAST(window_end AS STRING), event_type, "
        f"event_count, total_amount FROM {query}").collect()}


def test_time_travel_returns_the_earlier_version_after_a_later_run_changed_it(
        spark: SparkSession, lakehouse: Lakehouse) -> None:
    version, timestamp = lakehouse.version_after_run_1, lakehouse.timestamp_after_run_1
    assert _spark_rows(spark, "gold.event_counts_5m") == AFTER_RUN_2
    assert _spark_rows(spark, f"gold.event_counts_5m VERSION AS OF {version}") == AFTER_RUN_1
    assert _spark_rows(spark, f"gold.event_counts_5m TIMESTAMP AS OF '{timestamp}'") == AFTER_RUN_1

    history = spark.sql("DESCRIBE HISTORY gold.event_counts_5m").collect()
    operations = {int(h["version"]): h["operation"] for h in history}
    later = [v for v in operations if v > version]
    # Run 2 changed existing windows in place: one MERGE, after run 1's version.
    assert [operations[v] for v in sorted(later)] == ["MERGE"]
    assert operations[0] == "CREATE TABLE"


def test_comments_from_configuration_reach_the_catalog_and_the_delta_log(
        spark: SparkSession, lakehouse: Lakehouse) -> None:
    described = {r["col_name"]: r["comment"]
                 for r in spark.sql("DESCRIBE TABLE gold.event_counts_5m").collect()}
    assert described["window_start"] == "Start of the 5-minute window, inclusive (UTC)"
    assert described["event_count"] == "Valid, deduplicated events in the window"
    detail = spark.sql("DESCRIBE DETAIL gold.event_counts_5m").first()
    assert detail is not None
    assert detail["description"] == (
        "Events and amount per event type in tumbling 5-minute windows (UTC); "
        "open windows are updated in place.")

    from deltalake import DeltaTable as RsDeltaTable

    fields = {f.name: f.metadata for f in
              RsDeltaTable(GOLD_EVENT_COUNTS_5M.path(lakehouse.settings)).schema().fields}
    assert fields["window_end"]["comment"] == "End of the 5-minute window, exclusive (UTC)"


def test_gold_view_rolls_the_5_minute_counts_up_per_day(
        spark: SparkSession, lakehouse: Lakehouse) -> None:
    from medallion.io.catalog import prepare_catalog

    prepare_catalog(spark, lakehouse.settings)
    rows = spark.sql("SELECT CAST(day AS STRING), event_type, event_count, total_amount "
                     "FROM gold.event_counts_daily").collect()
    assert {(r[0], r[1], r[2], r[3]) for r in rows} == DAILY_AFTER_RUN_2


def test_every_gold_table_and_view_gives_the_same_rows_through_both_engines(
        spark: SparkSession, lakehouse: Lakehouse) -> None:
    """Spark through the catalog and the fast path (DuckDB over delta-rs, no JVM) print the same
    CSV for every gold table the runs made, every declared view over them (translated from
    Spark SQL), silver, and earlier versions read by time travel."""
    from medallion.io.catalog import prepare_catalog
    from medallion.io.tables import lakehouse_tables

    settings = lakehouse.settings
    prepare_catalog(spark, settings)
    gold = [spec.qualified_name for spec in lakehouse_tables(settings) if spec.layer == "gold"
            and DeltaTable.isDeltaTable(spark, spec.path(settings))]
    views = [view.name for view in settings.views]
    assert {"gold.event_counts_5m", "gold.user_sessions", "gold.segment_revenue_1h"} <= set(gold)
    assert "gold.event_counts_daily" in views
    counts = {name: assert_engines_agree(spark, settings, f"SELECT * FROM {name}")
              for name in [*gold, *views, "silver.events"]}
    assert counts["gold.event_counts_5m"] == len(AFTER_RUN_2)
    assert counts["gold.event_counts_daily"] == len(DAILY_AFTER_RUN_2)
    assert counts["silver.events"] == 6
    version, timestamp = lakehouse.version_after_run_1, lakehouse.timestamp_after_run_1
    for travel in (f"VERSION AS OF {version}", f"TIMESTAMP AS OF '{timestamp}'"):
        statement = f"SELECT * FROM gold.event_counts_5m {travel}"
        assert_engines_agree(spark, settings, statement)
        assert {_row(*line.split(",")) for line in fast_csv_lines(settings, statement)[1]} == \
            AFTER_RUN_1
    assert assert_engines_agree(
        spark, settings,
        "SELECT c.segment, count(*) AS events, sum(e.amount) AS amount, "
        "avg(length(e.event_id)) AS mean_id_length, max(e.timestamp) AS last_at, min(to_date(e.timestamp)) "
        "AS first_day FROM silver.events e JOIN bronze.customers c ON e.user_id = c.customer_id "
        "GROUP BY c.segment") == 2


def test_the_notebook_examples_of_the_analysts_guide_run_as_written(
        lakehouse: Lakehouse, tmp_path: Path) -> None:
    """docs/analysts.md's Python examples (the project's connection into pandas and Polars, and
    Polars and delta-rs on their own), each in a fresh process from a folder whose
    ``data/lakehouse`` is the module's lakehouse: no JVM starts."""
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "docs" / "analysts.md").read_text(), re.S)
    assert len(blocks) == 2
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "lakehouse").symlink_to(lakehouse.settings.paths.lakehouse)
    env = {**os.environ, "MEDALLION_LAKEHOUSE": "data/lakehouse", "JAVA_HOME": "/nonexistent"}
    env.pop("MEDALLION_CONF_DIR", None)
    outputs = []
    for block in blocks:
        done = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (block, done.stderr[-3000:])
        outputs.append(done.stdout)
    connected, direct = outputs
    # the daily view through pandas and through Polars, then purchases per segment
    assert connected.count("purchase") >= 2 and "view" in connected
    assert "[('consumer', 1, Decimal('12.5000')), ('smb', 1, Decimal('7.2500'))]" in connected
    # the 5-minute counts summed per event type by Polars, and version 0 of the table
    assert "purchase" in direct and direct.strip().endswith("MERGE")


def test_gold_tables_use_only_table_features_delta_rs_reads(lakehouse: Lakehouse) -> None:
    from deltalake import DeltaTable as RsDeltaTable

    from tests.events_tables import ALL_TABLES

    for spec in ALL_TABLES:
        if spec.layer != "gold":
            continue
        protocol = RsDeltaTable(spec.path(lakehouse.settings)).protocol()
        # Reader version 1: no deletion vectors, column mapping or other reader features.
        assert protocol.min_reader_version == 1, (spec.key, protocol)


def test_read_only_commands_answer_without_spark(lakehouse: Lakehouse) -> None:
    """status, show, quality and report on the module's pipeline-written lakehouse, each in a
    process of its own with no Java to start: no PySpark imported, no child process."""
    settings = lakehouse.settings
    paths = ["--conf-dir", str(REPO / "conf"), "--landing", settings.paths.landing,
             "--lakehouse", settings.paths.lakehouse]
    report = lakehouse.root / "read-only" / "report.html"
    ran = {command: run_without_spark([command, *extra, *paths], lakehouse.root)
           for command, extra in (("status", []), ("show", ["--limit", "2"]), ("quality", []),
                                  ("report", ["--output", str(report)]))}
    for command, done in ran.items():
        assert done.returncode == 0, (command, done.stderr[-3000:])
        assert done.spark_modules == [] and done.children == [], (command, done)
        assert "Traceback" not in done.stderr, (command, done.stderr)

    status = {line.split()[0]: line.split() for line in ran["status"].stdout.splitlines()}
    # table, version, date, time, rows, files, size, lag, state rows, state size, last run
    assert status["silver/events"][4] == "6" and status["silver/events"][-1] == "ok"
    assert status["gold/event_counts_5m"][4] == str(len(AFTER_RUN_2))
    assert status["bronze/events_kafka"][-2:] == ["not", "created"]

    shown = ran["show"].stdout.split("== gold.")
    counts = next(part for part in shown if part.startswith("event_counts_5m"))
    grid = [[c.strip() for c in line.strip("|").split("|")] for line in counts.splitlines()
            if line.startswith("|")]
    assert grid[0] == ["window_start", "window_end", "event_type", "event_count", "total_amount"]
    assert {_row(*r) for r in grid[1:]} == set(sorted(AFTER_RUN_2)[:2])  # ordered, limited
    assert counts.rstrip().endswith("only showing top 2 rows")

    assert "== silver/events (last checked" in ran["quality"].stdout
    assert "event_id_unique" in ran["quality"].stdout
    assert ran["report"].stdout.strip() == f"wrote {report}"
    page = report.read_text()
    # four monitoring charts, then one per windowed (non-session) gold table that exists: the
    # events pipeline's event_counts_5m, user_activity_sliding and segment_revenue_1h
    assert page.count("<svg") == 7
    assert list(dict.fromkeys(re.findall(r"(gold/\w+): \w+ per ", page))) == [
        "gold/event_counts_5m", "gold/user_activity_sliding", "gold/segment_revenue_1h"]


def _cli(lakehouse: Lakehouse, *args: str) -> subprocess.CompletedProcess[str]:
    """``medallion`` in a process of its own, from a working directory it must leave clean."""
    settings = lakehouse.settings
    env = {**os.environ, "MEDALLION_CONF_DIR": str(REPO / "conf"), "SPARK_LOCAL_IP": "127.0.0.1"}
    return subprocess.run(
        [sys.executable, "-m", "medallion.cli.main", *args, "--landing", settings.paths.landing,
         "--lakehouse", settings.paths.lakehouse],
        cwd=lakehouse.root, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def thrift_server(lakehouse: Lakehouse) -> Iterator[thrift.ThriftServer]:
    """A Spark Thrift Server on the module's lakehouse (after the CLI test has used it)."""
    server = thrift.start(lakehouse.settings)
    yield server
    thrift.stop(lakehouse.settings)


def test_every_client_returns_the_same_gold_rows(lakehouse: Lakehouse) -> None:
    """``medallion sql`` (two processes, one catalog), the Thrift server through PyHive and
    through JDBC (beeline), and delta-rs into pandas, all return the rows written by hand."""
    settings = lakehouse.settings

    # 1. medallion sql, twice: a view made by one process is there for the next one. A file of
    # several statements runs each in order (Spark would refuse the script as one statement).
    script = lakehouse.root / "views.sql"
    script.write_text("-- made once; a ';' in a comment or 'text;' does not split\n"
                      "CREATE OR REPLACE VIEW gold.analyst_counts AS SELECT * FROM "
                      "gold.event_counts_5m WHERE event_type <> ';';\n\n"
                      "SELECT count(*) AS n FROM gold.analyst_counts;\n", encoding="utf-8")
    made = _cli(lakehouse, "sql", "--engine", "spark", "--format", "json", "-f", str(script))
    assert made.returncode == 0, made.stderr[-3000:]
    assert made.stdout == f'{{"n":{len(AFTER_RUN_2)}}}\n'
    # The first statement Spark refuses is said once, in one line: no Python traceback, no JSON
    # line with the JVM's stack trace. What came before it was printed.
    queried = _cli(lakehouse, "sql", "--engine", "spark", "--format", "json",
                   f"SELECT * FROM gold.analyst_counts {ORDER}; SELECT * FROM gold.event_counts_5min")
    assert queried.returncode == 1
    records = [json.loads(line, parse_float=Decimal) for line in queried.stdout.splitlines()]
    assert {_row(*r.values()) for r in records} == AFTER_RUN_2
    assert ("medallion: failed: statement 2 of 2 (those before it were run): "
            "[TABLE_OR_VIEW_NOT_FOUND] The table or view `gold`.`event_counts_5min` cannot be "
            "found.") in queried.stderr, queried.stderr[-3000:]
    assert "Traceback" not in queried.stderr and '"level": "ERROR"' not in queried.stderr, \
        queried.stderr
    assert (Path(settings.catalog_dir()) / "metastore_db").is_dir()
    assert (Path(settings.catalog_dir()) / "derby.log").is_file()
    assert not (lakehouse.root / "metastore_db").exists()  # nothing in the working directory
    assert not (lakehouse.root / "derby.log").exists()

    # 2. delta-rs, no Spark: the documented notebook path.
    from deltalake import DeltaTable as RsDeltaTable

    frame = RsDeltaTable(GOLD_EVENT_COUNTS_5M.path(settings)).to_pandas()
    assert {_row(*r) for r in frame[["window_start", "window_end", "event_type", "event_count",
                                     "total_amount"]].itertuples(index=False)} == AFTER_RUN_2


def settings_catalog(lakehouse: Lakehouse) -> str:
    return lakehouse.settings.catalog_dir()


def test_thrift_server_serves_the_catalog_to_hiveserver2_and_jdbc_clients(
        lakehouse: Lakehouse, thrift_server: thrift.ThriftServer) -> None:
    from pyhive import hive

    assert thrift_server.host == "127.0.0.1"
    connection = hive.connect(host=thrift_server.host, port=thrift_server.port,
                              username="analyst", auth="NONE")
    try:
        cursor = connection.cursor()
        cursor.execute(f"SELECT * FROM gold.event_counts_5m {ORDER}")
        assert {_row(*r) for r in cursor.fetchall()} == AFTER_RUN_2
        # The view another process created earlier is in the persistent catalog.
        cursor.execute(f"SELECT * FROM gold.analyst_counts {ORDER}")
        assert {_row(*r) for r in cursor.fetchall()} == AFTER_RUN_2
        cursor.execute("SELECT * FROM gold.event_counts_daily")
        assert {(str(d), t, int(c), Decimal(a)) for d, t, c, a in cursor.fetchall()} == \
            DAILY_AFTER_RUN_2
        cursor.execute(f"SELECT * FROM gold.event_counts_5m VERSION AS OF "
                       f"{lakehouse.version_after_run_1}")
        assert {_row(*r) for r in cursor.fetchall()} == AFTER_RUN_1
    finally:
        connection.close()

    beeline = subprocess.run(
        [str(BEELINE), "-u", thrift_server.jdbc_url, "-n", "analyst", "--silent=true",
         "--outputformat=csv2", "-e", f"SELECT * FROM gold.event_counts_5m {ORDER};"],
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert beeline.returncode == 0, beeline.stdout[-2000:] + beeline.stderr[-2000:]
    lines = [line for line in beeline.stdout.splitlines() if line.startswith("2025-")]
    assert {_row(*r) for r in csv.reader(lines)} == AFTER_RUN_2

    # Derby allows one process at a time: a second one is told why, before its JVM starts.
    busy = _cli(lakehouse, "sql", "--engine", "spark", "SELECT 1")
    assert busy.returncode == 3
    assert busy.stderr.strip().splitlines()[-1].startswith(
        f"medallion: busy: the embedded metastore {settings_catalog(lakehouse)}/metastore_db is in "
        f"use by pid {thrift_server.pid}"), busy.stderr[-2000:]
