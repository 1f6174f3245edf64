"""Enrichment from a change flow's table of versions: ``as_of`` takes the version valid at the
row's time, without it the current version (Spark, no pipeline run)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from pyspark.sql import SparkSession

from medallion.engine.silver.compile import compile_silver
from medallion.pipeline.load import load_pipelines
from medallion.pipeline.validate import validate
from tests.change_feeds import SHOP


def _at(hour: int) -> datetime:
    return datetime(2026, 3, 1, hour, tzinfo=timezone.utc)


# Two keys' versions as an SCD type 2 table holds them: c1 moved from smb to enterprise at 3h;
# c2 was inserted at 1h and deleted at 2h (its version closed, none current).
VERSIONS = [
    ("c1", _at(1), "u", "smb", _at(1), _at(3), False),
    ("c1", _at(3), "u", "enterprise", _at(3), None, True),
    ("c2", _at(1), "c", "retail", _at(1), _at(2), False),
]
VERSION_COLUMNS = ("id STRING, changed_at TIMESTAMP, op STRING, segment STRING, "
                   "valid_from TIMESTAMP, valid_to TIMESTAMP, is_current BOOLEAN")
ORDERS = [
    ("o1", "c1", _at(0)),  # before the key's first version
    ("o2", "c1", _at(1)),  # the instant a version starts: that version
    ("o3", "c1", _at(2)),  # late: after it, c1 changed; the older version
    ("o4", "c1", _at(3)),  # the instant the next one starts: the next one
    ("o5", "c1", _at(9)),
    ("o6", "c2", datetime(2026, 3, 1, 1, 30, tzinfo=timezone.utc)),
    ("o7", "c2", _at(2)),  # the instant of the delete: no version
    ("o8", "nobody", _at(2)),
    ("o9", "c1", None),  # no time: no version
]


def _enriched(spark: SparkSession, tmp_path: Path) -> dict[str, tuple[str, str]]:
    (tmp_path / "pipelines").mkdir(exist_ok=True)
    (tmp_path / "pipelines" / "shop.yaml").write_text(SHOP, encoding="utf-8")
    (spec,) = load_pipelines(tmp_path, "local")
    validate(spec)
    silver = compile_silver(spec, next(s for s in spec.silver if s.name == "orders"))
    orders = spark.createDataFrame(ORDERS, "order_id STRING, customer_id STRING, ordered_at TIMESTAMP")
    versions = spark.createDataFrame(VERSIONS, VERSION_COLUMNS)
    rows = orders.transform(silver.enrich({"customer_then": versions,
                                           "customer_now": versions})).collect()
    assert len(rows) == len(ORDERS)  # at most one version matches a row
    return {row["order_id"]: (row["segment_then"], row["segment_now"]) for row in rows}


def test_a_row_takes_the_version_valid_at_its_time_or_the_current_one(
        spark: SparkSession, tmp_path: Path) -> None:
    assert _enriched(spark, tmp_path) == {
        "o1": ("unknown", "enterprise"), "o2": ("smb", "enterprise"), "o3": ("smb", "enterprise"),
        "o4": ("enterprise", "enterprise"), "o5": ("enterprise", "enterprise"),
        "o6": ("retail", "unknown"), "o7": ("unknown", "unknown"), "o8": ("unknown", "unknown"),
        "o9": ("unknown", "enterprise")}
