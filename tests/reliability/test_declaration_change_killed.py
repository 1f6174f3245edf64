"""The first run after a declaration added two columns, SIGKILLed between the two columns'
additions, then run to the end: the lakehouse equals the one an uninterrupted run with the new
declaration leaves (the same columns in the same order, the same rows). (A kill in the batch after
them is a batch's replay, which the kill tests cover.)"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from medallion.config.model import Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.project import Settings
from tests.conftest import REPO
from tests.integration.test_declaration_changes import HEADER, _edit
from tests.reliability.test_crash_recovery import (
    conf_with_small_batches,
    make_settings_at,
    shuffle_partitions_of,
    start_run,
    wait_then_kill,
)
from tests.reliability.test_kill_anywhere import failure, finish_here

TWO_COLUMNS = ("      line_total:\n",
               "      unit_cents:\n        type: BIGINT\n"
               "        expr: try_cast(unit_price AS DECIMAL(10,2)) * 100\n"
               "      ordered_on: {type: STRING, expr: order_date}\n      line_total:\n")
TABLES = ("silver/order_lines", "silver/order_lines_quarantine", "gold/category_revenue_1h",
          "gold/store_sessions")


def _state(spark: SparkSession, settings: Settings) -> dict[str, tuple[list[str], list[str]]]:
    """Each table's columns in order, and its rows as text, without the times a run stamps."""
    state = {}
    for key in TABLES:
        table = spark.read.format("delta").load(f"{settings.paths.lakehouse}/{key}")
        kept = [c for c in table.columns if c not in ("ingested_at", "quarantined_at")]
        state[key] = (table.columns, sorted(str(tuple(row)) for row in table.select(*kept).collect()))
    return state


@pytest.mark.timeout(1200)
def test_a_run_adding_columns_killed_between_them_then_finished_equals_an_uninterrupted_one(
        spark: SparkSession, tmp_path: Path) -> None:
    conf = conf_with_small_batches(tmp_path)
    (conf / "pipelines" / "events.yaml").unlink()
    landing = tmp_path / "landing"
    shutil.copytree(REPO / "samples" / "landing", landing)
    clean = make_settings_at(tmp_path / "clean", landing, conf)
    crashed = make_settings_at(tmp_path / "crashed", landing, conf)
    with shuffle_partitions_of(spark, clean):
        run_pipeline(spark, clean, RunTarget.ALL, Trigger(), monitor=False)
        # the same history (nothing in tables or checkpoints names the lakehouse's folder)
        shutil.copytree(clean.paths.lakehouse, crashed.paths.lakehouse)
        _edit(conf / "pipelines" / "orders.yaml", TWO_COLUMNS)
        for day in ("03", "04"):
            (landing / "orders" / f"2026-03-{day}.csv").write_text(
                HEADER + f"o{day},1,s1,p1,2,10.00,2026-03-{day},09:00:00\n"
                f"o{day},2,s2,p2,1,5.50,2026-03-{day},09:05:00\n", encoding="utf-8")
        clean = make_settings_at(tmp_path / "clean", landing, conf)
        run_pipeline(spark, clean, RunTarget.ALL, Trigger(), monitor=False)

        silver_log = tmp_path / "crashed" / "silver" / "order_lines" / "_delta_log"
        before = max(int(p.stem) for p in silver_log.glob("*.json"))
        log = tmp_path / "killed.log"
        # Once the first column's commit is there, before the second's.
        run = start_run(conf, landing, tmp_path / "crashed", log)
        assert wait_then_kill(run, silver_log / f"{before + 1:020d}.json", 0), failure(log)
        versions = max(int(p.stem) for p in silver_log.glob("*.json"))
        assert versions == before + 1, f"killed after {versions - before} commits, not between"
        crashed = make_settings_at(tmp_path / "crashed", landing, conf)  # the edited declaration
        finish_here(spark, crashed)
        expected, actual = _state(spark, clean), _state(spark, crashed)
        assert "unit_cents" in expected["silver/order_lines"][0]
        for key in TABLES:
            assert actual[key] == expected[key], key
