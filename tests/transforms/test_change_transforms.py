"""SCD type 1 and 2 from change rows (:mod:`medallion.engine.silver.changes`) equal the independent
model (``tests/reference_cdc.py``) on random histories: inserts, updates, deletes, re-deliveries
(some conflicting), late changes, one or two sequence columns, tracked columns or all."""

from __future__ import annotations

import random
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from medallion.engine.silver.changes import (
    IS_CURRENT,
    VALID_FROM,
    VALID_TO,
    ChangeShape,
    scd1_rows,
    scd2_versions,
)
from tests.reference_cdc import Change, Version, scd1, scd2

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
