"""A team changes its pipeline's declaration after the tables were made, as teams do.

A column added to a silver table is added to the table (rows written before hold null there); a
column widened (INT to BIGINT) is widened in place, and the gold tables streaming from it carry
on unless their state holds the column in another type; a recomputed one (no state) then
recomputes itself. A stateful gold table whose windows or aggregates changed is refused, naming
what changed, since its state was made by the declaration before; the other gold tables run, a
range backfill of it is refused as the run is, and a full refresh of it gives what a fresh
lakehouse gives. A silver column dropped or
narrowed is refused before anything of the batch is read, and the declaration put back carries on
with nothing lost. A gold table taken out of the declaration is warned of at each run. None of it
ends in Delta's "A schema mismatch detected", in Spark's STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE,
or in a table that holds windows of two sizes side by side.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from medallion.cli.main import main
from medallion.config.model import Trigger
from medallion.engine.runner import RunIncomplete, RunTarget, run_pipeline
from medallion.project import Settings, load_settings
from tests.conf_support import copy_base_conf
from tests.conftest import REPO
from tests.lakehouse_views import assert_engines_agree

SAMPLES = REPO / "samples" / "landing"
HEADER = "order_id,line_no,store_id,sku,quantity,unit_price,order_date,order_time\n"


def _settings(conf: Path, landing: Path, lakehouse: Path) -> Settings:
    settings = load_settings(env="local", conf_dir=conf, landing=str(landing),
                             lakehouse=str(lakehouse))
    return dataclasses.replace(settings, pipelines=(settings.pipeline("orders"),))


def _orders_lakehouse(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The orders pipeline alone (its own copy of the configuration), the samples landed, and
    where its lakehouse goes: ``conf``, ``landing``, ``lakehouse``."""
    conf = copy_base_conf(tmp_path / "conf")
    (conf / "pipelines" / "events.yaml").unlink()
    (conf / "local.yaml").write_text("catalog:\n  metastore: in-memory\n", encoding="utf-8")
    landing, lakehouse = tmp_path / "landing", tmp_path / "lakehouse"
    shutil.copytree(SAMPLES, landing)
    return conf, landing, lakehouse


def _rows(spark: SparkSession, settings: Settings, key: str, *columns: str) -> list[tuple]:
    path = f"{settings.paths.lakehouse}/{key}"
    return sorted(tuple(row) for row in spark.read.format("delta").load(path)
                  .select(*columns).collect())


def _land(landing: Path, name: str, *lines: str) -> None:
    (landing / "orders" / name).write_text(HEADER + "".join(f"{line}\n" for line in lines),
                                           encoding="utf-8")


def _edit(pipeline: Path, *changes: tuple[str, str]) -> None:
    text = pipeline.read_text(encoding="utf-8")
    for old, new in changes:
        assert old in text, old
        text = text.replace(old, new, 1)
    pipeline.write_text(text, encoding="utf-8")


UNIT_CENTS = ("      line_total:\n",
              "      unit_cents:\n        type: BIGINT\n"
              "        expr: try_cast(unit_price AS DECIMAL(10,2)) * 100\n      line_total:\n")
STATEFUL = ("    mode: update                    # open windows kept up to date, late lines counted\n",
            "    mode: update\n    refresh: stateful\n")
TWO_HOURS = ("size: 1 hour, slide: 30 minutes", "size: 2 hours, slide: 30 minutes")
TOP_PRICE = ("      revenue: {function: sum, column: line_total, default: 0}\n    mode: update",
             "      revenue: {function: sum, column: line_total, default: 0}\n"
             "      top_price: {function: max, column: unit_price}\n    mode: update")


@pytest.mark.timeout(900)
def _words(text: str) -> str:
    """``text`` with each run of spaces and line breaks as one space: plan pads its table names
    to the longest of every pipeline's."""
    return " ".join(text.split())


def test_a_changed_declaration_adds_columns_and_refuses_what_its_tables_cannot_carry_on_from(
        spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    conf, landing, lakehouse = _orders_lakehouse(tmp_path)
    pipeline = conf / "pipelines" / "orders.yaml"
    _edit(pipeline, STATEFUL)  # in a state store: what it cannot carry on from is refused
    settings = _settings(conf, landing, lakehouse)
    run_pipeline(spark, settings, RunTarget.ALL, Trigger(), monitor=False)
    hourly_before = _rows(spark, settings, "gold/category_revenue_1h", "*")
    first_lines = _rows(spark, settings, "silver/order_lines", "order_id", "line_no")
    assert hourly_before and first_lines

    # A new column in silver, and the hourly table's windows and aggregates changed.
    _edit(pipeline, UNIT_CENTS, TWO_HOURS, TOP_PRICE)
    # With no new data at all, the run refuses the changed gold table all the same, at once.
    with pytest.raises(RunIncomplete) as idle:
        run_pipeline(spark, _settings(conf, landing, lakehouse), RunTarget.ALL, Trigger(),
                     monitor=False)
    assert idle.value.table == "gold/category_revenue_1h", str(idle.value)
    assert 'window.size: "1 hour" -> "2 hours"' in str(idle.value)
    assert {run.table: run.note for run in idle.value.runs}["gold/category_revenue_1h"] == \
        "not run: its declaration changed"
    _land(landing, "2026-03-03.csv", "o20,1,s1,p1,2,10.00,2026-03-03,09:00:00",
          "o20,2,s1,p2,1,5.50,2026-03-03,09:10:00")
    changed = _settings(conf, landing, lakehouse)
    # `medallion plan` says it before any run, from the logs and checkpoints (no Spark session).
    paths = ["--conf-dir", str(conf), "--landing", str(landing), "--lakehouse", str(lakehouse)]
    capsys.readouterr()
    assert main(["plan", *paths]) == 4
    planned = capsys.readouterr().out
    for said in ("silver/order_lines carries on",
                 "column unit_cents added (rows written before hold null)",
                 "gold/category_revenue_1h needs a full refresh",
                 'state: window.size: "1 hour" -> "2 hours"',
                 'state: aggregates.top_price added ("max(unit_price)")',
                 "run: medallion backfill gold/category_revenue_1h --full-refresh",
                 "gold/store_sessions unchanged"):
        assert _words(said) in _words(planned), planned
    with pytest.raises(RunIncomplete) as refused:
        run_pipeline(spark, changed, RunTarget.ALL, Trigger(), monitor=False)
    message = str(refused.value)
    assert refused.value.table == "gold/category_revenue_1h", message
    for said in ('window.size: "1 hour" -> "2 hours"', 'aggregates.top_price added',
                 "medallion backfill gold/category_revenue_1h --full-refresh"):
        assert said in message, message
    outcomes = {run.table: run for run in refused.value.runs}
    assert outcomes["gold/category_revenue_1h"].note == "not run: its declaration changed"
    assert outcomes["gold/store_sessions"].batches >= 1  # the other gold table ran
    assert _rows(spark, changed, "gold/category_revenue_1h", "*") == hourly_before  # untouched
    cents = dict(((order, line), value) for order, line, value in _rows(
        spark, changed, "silver/order_lines", "order_id", "line_no", "unit_cents"))
    assert cents == {**{key: None for key in first_lines}, ("o20", 1): 1000, ("o20", 2): 550}

    # `show` prints every gold table as it is, the one whose declaration is ahead of it too.
    capsys.readouterr()
    assert main(["show", *paths]) == 0
    shown = capsys.readouterr()
    assert "== gold.category_revenue_1h\n+" in shown.out and "== gold.store_sessions\n+" in shown.out
    assert "top_price" not in shown.out and shown.err == "", shown.err

    # A range recomputed with the new definition would not fit beside the rest: refused too.
    assert main(["backfill", "gold/category_revenue_1h", "--from", "2026-03-02",
                 "--to", "2026-03-03", *paths]) == 1
    assert "window.size" in capsys.readouterr().err
    assert _rows(spark, changed, "gold/category_revenue_1h", "*") == hourly_before

    # The advice, followed, gives what a fresh lakehouse gives with the new declaration.
    assert main(["backfill", "gold/category_revenue_1h", "--full-refresh", "--yes", *paths]) == 0
    fresh = _settings(conf, landing, tmp_path / "fresh")
    run_pipeline(spark, fresh, RunTarget.ALL, Trigger(), monitor=False)
    refreshed = _rows(spark, changed, "gold/category_revenue_1h", "*")
    assert refreshed == _rows(spark, fresh, "gold/category_revenue_1h", "*")
    assert {end - start for start, end, *_ in refreshed} == {timedelta(hours=2)}
    # Both engines read the changed tables alike: the new aggregate, the new silver column
    # (null in the rows written before it).
    for key in ("gold/category_revenue_1h", "silver/order_lines"):
        frame = spark.read.format("delta").load(f"{lakehouse}/{key}")
        assert assert_engines_agree(spark, changed, f"SELECT * FROM {key.replace('/', '.')}",
                                    frame) > 0, key

    # A silver column retyped, then one dropped: refused before the batch is read.
    _land(landing, "2026-03-04.csv", "o30,1,s2,p3,1,2.00,2026-03-04,09:00:00")
    original = pipeline.read_text(encoding="utf-8")
    for change, said in (
            (("      line_no: {type: INT, required: true}",
              "      line_no: {type: SMALLINT, required: true}"),
             "column line_no is INT in the table and SMALLINT in the declaration, which is not a "
             "wider type of it"),
            (UNIT_CENTS[::-1], "the table has column unit_cents, which the declaration no "
                               "longer has")):
        _edit(pipeline, change)
        with pytest.raises(RunIncomplete) as refused:
            run_pipeline(spark, _settings(conf, landing, lakehouse), RunTarget.ALL, Trigger(),
                         monitor=False)
        assert refused.value.table == "silver/order_lines", str(refused.value)
        assert said in str(refused.value) and "--full-refresh" in str(refused.value)
        pipeline.write_text(original, encoding="utf-8")
    assert ("o30", 1) not in _rows(spark, changed, "silver/order_lines", "order_id", "line_no")
    run_pipeline(spark, _settings(conf, landing, lakehouse), RunTarget.ALL, Trigger(), monitor=False)
    assert ("o30", 1) in _rows(spark, changed, "silver/order_lines", "order_id", "line_no")

    # A gold table taken out of the declaration: its table stays, and each run says so (else
    # analysts would read it as if it were kept up to date).
    pipeline.write_text(original[:original.index("  store_sessions:\n")], encoding="utf-8")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="medallion.engine.runner"):
        runs = run_pipeline(spark, _settings(conf, landing, lakehouse), RunTarget.ALL, Trigger(),
                            monitor=False)
    assert "gold/store_sessions" not in {run.table for run in runs}
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("gold/store_sessions")]
    assert said == [f"gold/store_sessions: a Delta table at {lakehouse}/gold/store_sessions that no "
                    "pipeline declares: no run updates it, and the catalog may still offer it as "
                    "gold.store_sessions (to remove it: DROP TABLE gold.store_sessions with "
                    f"medallion sql --engine spark, then delete {lakehouse}/gold/store_sessions, and "
                    f"{lakehouse}/_checkpoints/gold/store_sessions where it is there)"], said


QUANTITY_BIGINT = ("      quantity:\n        type: INT\n", "      quantity:\n        type: BIGINT\n")
TOTAL_OF_BIGINT = ("expr: try_cast(quantity AS INT)", "expr: try_cast(quantity AS BIGINT)")
LINE_TOTAL_WIDER = ("        type: DECIMAL(18,2)\n        expr: try_cast(quantity",
                    "        type: DECIMAL(20,2)\n        expr: try_cast(quantity")


def _type_of(spark: SparkSession, settings: Settings, key: str, column: str) -> str:
    schema = spark.read.format("delta").load(f"{settings.paths.lakehouse}/{key}").schema
    return str(schema[column].dataType.simpleString())


@pytest.mark.timeout(900)
def test_a_widened_silver_column_carries_on_in_place_and_gold_streams_on_from_it(
        spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf, landing, lakehouse = _orders_lakehouse(tmp_path)
    pipeline = conf / "pipelines" / "orders.yaml"
    run_pipeline(spark, _settings(conf, landing, lakehouse), RunTarget.ALL, Trigger(),
                 monitor=False)
    before = _rows(spark, _settings(conf, landing, lakehouse), "silver/order_lines", "*")

    # quantity INT -> BIGINT, and a line no INT holds (it would be quarantined as out of range).
    _edit(pipeline, QUANTITY_BIGINT, TOTAL_OF_BIGINT)
    _land(landing, "2026-03-03.csv", "o40,1,s1,p1,3000000000,0.01,2026-03-03,09:00:00",
          "o40,2,s1,p2,2,5.50,2026-03-03,09:10:00")
    paths = ["--conf-dir", str(conf), "--landing", str(landing), "--lakehouse", str(lakehouse)]
    capsys.readouterr()
    assert main(["plan", *paths]) == 0
    planned = capsys.readouterr().out
    for said in ("silver/order_lines carries on",
                 "column quantity widened from INT to BIGINT (in place)",
                 "gold/category_revenue_1h unchanged",  # sum(INT) and sum(BIGINT): BIGINT
                 "gold/store_sessions unchanged"):
        assert _words(said) in _words(planned), planned
    widened = _settings(conf, landing, lakehouse)
    runs = {run.table: run for run in run_pipeline(spark, widened, RunTarget.ALL, Trigger(),
                                                   monitor=False)}
    assert runs["gold/category_revenue_1h"].batches >= 1, runs
    assert _type_of(spark, widened, "silver/order_lines", "quantity") == "bigint"
    after = _rows(spark, widened, "silver/order_lines", "*")
    assert [row for row in after if row[0] != "o40"] == before  # rows before read as they were
    assert ("o40", 1, 3000000000) in _rows(spark, widened, "silver/order_lines", "order_id",
                                           "line_no", "quantity")
    # Gold carried on from its state: what a fresh lakehouse with the new declaration gives.
    fresh = _settings(conf, landing, tmp_path / "fresh")
    run_pipeline(spark, fresh, RunTarget.ALL, Trigger(), monitor=False)
    typed = ("order_id", "line_no", "quantity", "unit_price", "line_total", "ordered_at", "city")
    assert _rows(spark, widened, "silver/order_lines", *typed) == \
        _rows(spark, fresh, "silver/order_lines", *typed)
    for key in ("gold/category_revenue_1h", "gold/store_sessions"):
        assert _rows(spark, widened, key, "*") == _rows(spark, fresh, key, "*"), key
    assert max(units for *_, units in _rows(spark, widened, "gold/category_revenue_1h",
                                            "window_start", "units")) >= 3000000000
    # The fast path (delta-rs, DuckDB) reads the widened table (files written with INT, and with
    # BIGINT) as Spark does, and analysts' `medallion sql` answers from it.
    frame = spark.read.format("delta").load(f"{lakehouse}/silver/order_lines")
    assert assert_engines_agree(spark, widened, "SELECT * FROM silver.order_lines", frame) > 0
    capsys.readouterr()
    assert main(["sql", "SELECT sum(quantity) AS units FROM silver.order_lines", "--format",
                 "csv", *paths]) == 0
    assert capsys.readouterr().out.split() == [
        "units", str(sum(row[1] for row in _rows(spark, widened, "silver/order_lines",
                                                  "order_id", "quantity")))]

    # line_total DECIMAL(18,2) -> (20,2): silver widens. The sessions' state holds its sum as
    # DECIMAL(28,2): that query cannot carry on from it. The hourly table keeps no state: its
    # column widens in place and the run recomputes it from silver.
    _edit(pipeline, LINE_TOTAL_WIDER)
    capsys.readouterr()
    assert main(["plan", *paths]) == 4
    planned = capsys.readouterr().out
    for said in ("column line_total widened from DECIMAL(18,2) to DECIMAL(20,2) (in place)",
                 "gold/category_revenue_1h recomputed",
                 'definition: types.revenue: "DECIMAL(28,2)" -> "DECIMAL(30,2)"',
                 "gold/store_sessions needs a full refresh",
                 'state: types.revenue: "DECIMAL(28,2)" -> "DECIMAL(30,2)"'):
        assert _words(said) in _words(planned), planned
    _land(landing, "2026-03-04.csv", "o41,1,s2,p3,1,2.00,2026-03-04,09:00:00")
    with pytest.raises(RunIncomplete) as refused:
        run_pipeline(spark, _settings(conf, landing, lakehouse), RunTarget.ALL, Trigger(),
                     monitor=False)
    assert refused.value.table == "gold/store_sessions", str(refused.value)
    assert 'types.revenue: "DECIMAL(28,2)" -> "DECIMAL(30,2)"' in str(refused.value)
    assert _type_of(spark, widened, "silver/order_lines", "line_total") == "decimal(20,2)"
    assert _type_of(spark, widened, "gold/category_revenue_1h", "revenue") == "decimal(30,2)"
    fresh = _settings(conf, landing, tmp_path / "fresh-wider")
    run_pipeline(spark, fresh, RunTarget.ALL, Trigger(), monitor=False)
    assert _rows(spark, widened, "gold/category_revenue_1h", "*") == \
        _rows(spark, fresh, "gold/category_revenue_1h", "*")
