"""Orders enriched from a customers change feed kept as SCD type 2, through the engine: as of the
order's time, and as the customer is now. Each run applies its changes before it enriches its
orders, so an order takes the version a change of the same run made; a late order takes the
version valid when it was placed; a late change splits a version and the orders after it take it."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from pyspark.sql import SparkSession

from medallion.config.model import Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from tests.change_feeds import SHOP, change_settings


def _at(hour: int, minute: int = 0) -> str:
    return datetime(2026, 3, 1, hour, minute, tzinfo=timezone.utc).isoformat()


def _land(folder: Path, name: str, rows: list[dict[str, str]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_orders_take_the_version_valid_when_placed(spark: SparkSession, tmp_path: Path) -> None:
    settings = change_settings(tmp_path, SHOP, pipeline_name="shop")
    changes, orders = (Path(settings.paths.landing) / name for name in ("customer_changes", "orders"))

    def run(number: int, changed: list[tuple[str, str, str, str]],
            ordered: list[tuple[str, str, str]]) -> dict[str, tuple[str, str]]:
        _land(changes, f"run{number}.json", [{"id": i, "changed_at": at, "op": op, "segment": s}
                                             for i, at, op, s in changed])
        _land(orders, f"run{number}.json", [{"order_id": o, "customer_id": c, "ordered_at": at}
                                            for o, c, at in ordered])
        run_pipeline(spark, settings, RunTarget.ALL, Trigger())
        rows = spark.read.format("delta").load(f"{settings.paths.lakehouse}/silver/orders").collect()
        return {r["order_id"]: (r["segment_then"], r["segment_now"]) for r in rows}

    assert run(1, [("c1", _at(1), "c", "smb"), ("c2", _at(1), "c", "retail")],
               [("o1", "c1", _at(2)), ("o2", "c2", _at(2))]) == {
        "o1": ("smb", "smb"), "o2": ("retail", "retail")}

    # c1 moves up at 3h, c2 is deleted at 4h; the orders of the run come after those changes.
    second = run(2, [("c1", _at(3), "u", "enterprise"), ("c2", _at(4), "d", "retail")],
                 [("o3", "c1", _at(1, 30)),  # late: placed before c1 moved up
                  ("o4", "c1", _at(5)),
                  ("o5", "c2", _at(3)),  # before c2's delete: the version it closed
                  ("o6", "c2", _at(5))])  # after it: none
    assert second == {"o1": ("smb", "smb"), "o2": ("retail", "retail"),  # kept as enriched
                      "o3": ("smb", "enterprise"), "o4": ("enterprise", "enterprise"),
                      "o5": ("retail", "unknown"), "o6": ("unknown", "unknown")}

    # A late change splits c1's first version at 1:45; the run's orders after it take it.
    third = run(3, [("c1", _at(1, 45), "u", "vip")],
                [("o7", "c1", _at(1, 50)), ("o8", "c1", _at(1, 40)), ("o9", "c3", _at(1))])
    assert {k: third[k] for k in ("o7", "o8", "o9")} == {
        "o7": ("vip", "enterprise"), "o8": ("smb", "enterprise"), "o9": ("unknown", "unknown")}
    versions = spark.read.format("delta").load(
        f"{settings.paths.lakehouse}/silver/customers_history").where("id = 'c1'").collect()
    assert sorted((r["segment"], r["valid_to"] is None) for r in versions) == [
        ("enterprise", True), ("smb", False), ("vip", False)]
