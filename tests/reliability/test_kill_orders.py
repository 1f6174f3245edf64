"""The second shipped pipeline (orders: CSV, a composite deduplication key, two dimensions, a
sliding and a session aggregate) under SIGKILL: `medallion run all --pipeline orders` killed at
planned points, mid-batch in bronze, silver and gold, on a lakehouse with history; then
run to the end, its tables equal those of uninterrupted runs over the same files.

The kills go through the same engine code as the events pipeline's (test_kill_anywhere.py); this
shows that nothing of exactly-once depends on what the declaration says.
"""

from __future__ import annotations

import shutil
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from medallion.config.model import Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.io.tables import SILVER_BATCH_METRICS, TableSpec
from medallion.project import Settings
from tests.conftest import REPO
from tests.lakehouse_views import table_rows
from tests.reliability.test_crash_recovery import (
    conf_with_small_batches,
    make_settings_at,
    shuffle_partitions_of,
)
from tests.reliability.test_kill_anywhere import finish_here, planned_kills

HEADER = "order_id,line_no,store_id,sku,quantity,unit_price,order_date,order_time"
ORDERS = ("--pipeline", "orders")
# Mid-batch: as soon as the query has planned its second batch of the run (silver a moment
# later, while that batch writes), in each layer. In gold, the session table (state kept across
# batches, rows appended once closed); the sliding one runs beside it and is cut wherever it is.
POINTS = (("bronze/orders", 0.0), ("silver/order_lines", 1.0), ("gold/store_sessions", 0.0))
# Columns that differ between two runs over the same files: when a row was ingested or
# quarantined, and (past bronze) which file a re-exported line's kept copy came from.
RUN_DEPENDENT = {"ingested_at", "quarantined_at"}


def _order_files(landing: Path, phase: int, files: int = 2) -> None:
    """``files`` CSV exports: six lines each over two stores and three products, every file after
    the first re-exporting a line of the one before, one line with quantity 0 (quarantined) and one
    broken row (a column too many)."""
    folder = landing / "orders"
    folder.mkdir(parents=True, exist_ok=True)
    previous: list[str] = []
    for f in range(files):
        base = (phase * files + f) * 25  # minutes after 09:00 local time
        lines = []
        for i in range(6):
            minute = base + i * 4
            quantity = 0 if (f, i) == (1, 2) else 1 + (i + f) % 3
            lines.append(f"p{phase}f{f}o{i // 2},{i % 2 + 1},s{1 + i % 2},p{1 + (i + f) % 3},"
                         f"{quantity},{Decimal('2.50') * (1 + i % 3):.2f},2026-03-02,"
                         f"{9 + minute // 60:02d}:{minute % 60:02d}:00")
        if previous:
            lines.append(previous[0])  # a till exports a line again
        if f == files - 1:
            lines.append("broken,1,s1,p1,1,1.00,2026-03-02,10:00:00,extra")
        (folder / f"phase{phase}-{f}.csv").write_text("\n".join([HEADER, *lines]) + "\n")
        previous = lines


def _landing(root: Path) -> Path:
    landing = root / "landing"
    for dimension in ("products", "stores"):
        shutil.copytree(REPO / "samples" / "landing" / dimension, landing / dimension)
    return landing


def _snapshot(settings: Settings) -> dict[str, Counter]:
    """Every table of the orders pipeline as a multiset of rows, without the run-dependent
    columns; and how many re-exported lines silver removed."""
    views: dict[str, Counter] = {}
    for decl in settings.pipeline("orders").tables():
        spec = TableSpec.from_decl(decl)
        path = Path(spec.path(settings))
        if not path.exists():
            views[spec.key] = Counter()
            continue
        dropped = RUN_DEPENDENT | ({"source_file"} if spec.layer != "bronze" else set())
        views[spec.key] = table_rows(str(path), [c for c in spec.column_names if c not in dropped])
    metrics = table_rows(SILVER_BATCH_METRICS.path(settings), ("table", "duplicates_removed"))
    views["duplicates_removed"] = Counter({"total": sum(
        removed * times for (table, removed), times in metrics.items()
        if table == "silver/order_lines")})
    return views


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_orders_killed_mid_batch_in_every_layer_ends_equal_to_uninterrupted_runs(
        spark: SparkSession, tmp_path: Path) -> None:
    conf = conf_with_small_batches(tmp_path)
    landing = _landing(tmp_path)
    clean = make_settings_at(tmp_path / "clean", landing, conf).only(["orders"])
    crashed = make_settings_at(tmp_path / "crashed", landing, conf).only(["orders"])
    crashed_lakehouse = Path(crashed.paths.lakehouse)
    with shuffle_partitions_of(spark, clean):
        # The history: the first files run once, and the lakehouse copied (nothing in its tables
        # or checkpoints names its own folder; the landing zone is the same).
        _order_files(landing, 0)
        run_pipeline(spark, clean, RunTarget.ALL, Trigger())
        shutil.copytree(clean.paths.lakehouse, crashed_lakehouse)
        # The next files, where the kills land; then a run to the end.
        _order_files(landing, 1)
        run_pipeline(spark, clean, RunTarget.ALL, Trigger())
        landed = planned_kills(conf, landing, crashed_lakehouse, tmp_path / "planned.log",
                               crashed_lakehouse / "_checkpoints", POINTS, *ORDERS)
        assert landed == ["bronze", "silver", "gold"], landed
        finish_here(spark, crashed)  # crashed runs the orders pipeline only
        expected, actual = _snapshot(clean), _snapshot(crashed)
        assert expected["silver/order_lines"], "the orders reached silver"
        assert expected["duplicates_removed"]["total"] > 0, "re-exported lines were removed"
        assert expected["silver/order_lines_quarantine"], "the zero quantity was quarantined"
        for table in expected:
            assert actual[table] == expected[table], f"{table} differs after kills"
    # Nothing of the events pipeline ran: --pipeline narrowed every run to orders.
    assert not (crashed_lakehouse / "bronze" / "events").exists()
