"""SCD type 1 and 2 from change rows (:mod:`medallion.engine.silver.changes`) equal the independent
model (``tests/reference_cdc.py``) on random histories: inserts, updates, deletes, re-deliveries
(some conflicting), late changes, one or two sequence columns, tracked columns or all. Applied
changes kept in Delta batch by batch end the same, carried columns included, whatever order the
deliveries arrive in."""

from __future__ import annotations

import random
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from medallion.engine.silver.changes import (
    IS_CURRENT,
    VALID_FROM,
    VALID_TO,
    ChangeShape,
    distinct_changes,
    expired_deletes,
    fresh_changes,
    scd1_rows,
    scd2_versions,
)
from medallion.io.sinks.delta import upsert_batch
from tests.reference_cdc import Change, Version, counted, scd1, scd2

SCHEMA = "id STRING, seq_major INT, seq_minor INT, deleted BOOLEAN, segment STRING, name STRING"
VALUES = ("name", "segment")


def history(rng: random.Random, keys: int, changes: int, two_part: bool) -> list[Change]:
    """Random changes of ``keys`` keys in random order, about one in eight re-delivered (a third
    of those with other values: a conflicting re-delivery)."""
    made: list[Change] = []
    for _ in range(changes):
        key = (f"k{rng.randrange(keys)}",)
        sequence = (rng.randrange(6), rng.randrange(3)) if two_part else (rng.randrange(20), 0)
        delete = rng.random() < 0.2
        values = (() if delete else
                  (("name", rng.choice(["Ann", "Bo", None])), ("segment", rng.choice(["s", "g", None]))))
        made.append(Change(key, sequence, delete, values))
    for change in rng.sample(made, len(made) // 8):
        if rng.random() < 0.33 and not change.delete:
            change = Change(change.key, change.sequence, change.delete,
                            (("name", rng.choice(["Ann", "Cy"])), ("segment", "b")))
        made.append(change)
    rng.shuffle(made)
    return made


def as_frame(spark: SparkSession, changes: list[Change]) -> DataFrame:
    rows = [(c.key[0], c.sequence[0], c.sequence[1], c.delete,
             c.row().get("segment"), c.row().get("name")) for c in changes]
    return spark.createDataFrame(rows, SCHEMA)


def shape(two_part: bool, tracked: tuple[str, ...] | None = None) -> ChangeShape:
    return ChangeShape(keys=("id",), sequence=("seq_major", "seq_minor") if two_part else ("seq_major",),
                       delete="deleted", values=VALUES, tracked=tracked)


def position(value: Any, two_part: bool) -> tuple[Any, ...]:
    return (value["seq_major"], value["seq_minor"]) if two_part else (value, 0)


@pytest.mark.parametrize("seed", range(3))
def test_scd1_rows_equal_the_model(spark: SparkSession, seed: int) -> None:
    rng = random.Random(seed)
    two_part = seed % 2 == 1
    changes = history(rng, keys=30, changes=120, two_part=two_part)
    got = {(row["id"],): {"name": row["name"], "segment": row["segment"]}
           for row in scd1_rows(as_frame(spark, changes), shape(two_part)).collect()}
    expected = scd1(changes)
    assert got == expected
    assert 0 < len(expected) < len({c.key for c in changes})  # some keys deleted, some kept


@pytest.mark.parametrize(("seed", "tracked"), [(0, None), (1, None), (2, ("segment",)),
                                               (3, ("segment",))])
def test_scd2_versions_equal_the_model(spark: SparkSession, seed: int,
                                       tracked: tuple[str, ...] | None) -> None:
    rng = random.Random(100 + seed)
    two_part = seed % 2 == 1
    changes = history(rng, keys=10, changes=120, two_part=two_part)
    rows = scd2_versions(as_frame(spark, changes), shape(two_part, tracked)).collect()
    got = {Version((row["id"],), (("name", row["name"]), ("segment", row["segment"])),
                   position(row[VALID_FROM], two_part),
                   None if row[VALID_TO] is None else position(row[VALID_TO], two_part))
           for row in rows}
    expected = scd2(changes, tracked=list(tracked) if tracked else None)
    assert got == expected
    assert len(rows) == len(got)  # no version twice
    assert all(row[IS_CURRENT] == (row[VALID_TO] is None) for row in rows)
    assert any(v.valid_to is not None for v in expected) and any(v.is_current for v in expected)


@pytest.mark.parametrize("seed", range(2))
def test_applied_changes_do_not_depend_on_the_order_deliveries_arrive_in(
        spark: SparkSession, tmp_path: Path, seed: int) -> None:
    """Each change delivered in one to three files, a few with other values; the deliveries cut
    into batches in two random orders and applied as a change flow applies them (one per key
    and sequence in a batch, then those new or counting instead of the one held, by MERGE).
    Both end with the changes the model counts, each with the file the model says."""
    rng = random.Random(300 + seed)
    deliveries: list[tuple[Change, str]] = []
    for change in history(rng, keys=8, changes=40, two_part=False):
        for source in rng.sample(["f1", "f2", "f3"], rng.randint(1, 3)):
            deliveries.append((change, f"file:/landing/{source}.json"))
    carried = shape(False)
    carried = ChangeShape(keys=carried.keys, sequence=carried.sequence, delete=carried.delete,
                          values=carried.values, carried=("ingested_at", "source_file"))
    expected = {(c.key, c.sequence[0], c.delete, c.row().get("name"), c.row().get("segment"), source)
                for (c, source) in counted(deliveries).values()}
    assert len({d[0].key + d[0].sequence for d in deliveries}) < len(deliveries)
    for order in range(2):
        arrived = rng.sample(deliveries, len(deliveries))
        path = str(tmp_path / f"applied-{order}")
        empty = spark.createDataFrame([], f"{SCHEMA}, source_file STRING, ingested_at TIMESTAMP")
        empty.drop("seq_minor").write.format("delta").save(path)
        cuts = sorted(rng.sample(range(1, len(arrived)), 6))
        for batch_id, (a, b) in enumerate(zip([0, *cuts], [*cuts, len(arrived)], strict=True)):
            batch = spark.createDataFrame(
                [(c.key[0], c.sequence[0], c.delete, c.row().get("segment"), c.row().get("name"),
                  source, f"2026-01-0{batch_id + 1} 00:00:00") for c, source in arrived[a:b]],
                "id STRING, seq_major INT, deleted BOOLEAN, segment STRING, name STRING, "
                "source_file STRING, ingested_at STRING",
            ).withColumn("ingested_at", F.to_timestamp("ingested_at"))
            held = spark.read.format("delta").load(path)
            rows = fresh_changes(distinct_changes(batch, carried), held, carried)
            upsert_batch(rows, path, ("id", "seq_major"), f"order-{order}", batch_id,
                         replace_if=carried.supersedes)
        got = {((r["id"],), r["seq_major"], r["deleted"], r["name"], r["segment"], r["source_file"])
               for r in spark.read.format("delta").load(path).collect()}
        assert got == expected, f"arrival order {order}"


def test_a_deleted_keys_delete_expires_once_ingested_before_the_time_given(spark: SparkSession) -> None:
    """Only a key's latest change, a delete, ingested before the time given: not an older delete
    of a key changed since, nor a delete ingested at or after that time."""
    rows = [("k1", 1, False, "a", "2026-01-01 00:00:00"), ("k1", 2, True, None, "2026-01-01 00:00:00"),
            ("k2", 1, True, None, "2026-01-01 00:00:00"), ("k2", 2, False, "b", "2026-01-01 00:00:00"),
            ("k3", 5, True, None, "2026-01-02 00:00:00"), ("k4", 3, True, None, "2026-01-01 12:00:00")]
    applied = spark.createDataFrame(rows, "id STRING, seq_major INT, deleted BOOLEAN, name STRING, "
                                          "ingested_at STRING").withColumn("ingested_at",
                                                                           F.to_timestamp("ingested_at"))
    flow = ChangeShape(keys=("id",), sequence=("seq_major",), delete="deleted", values=("name",),
                       carried=("ingested_at",))
    before = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
    assert sorted(tuple(r) for r in expired_deletes(applied, flow, before).collect()) == [("k1", 2)]
