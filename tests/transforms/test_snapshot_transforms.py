"""A snapshot flow's changes (:func:`medallion.engine.silver.changes.snapshot_changes`) equal the
independent model's (``tests/reference_cdc.py``) on random series of full exports: keys that
come, change, go and come back, rows refused in an export, the series cut anywhere into what was
applied before and what a batch brings."""

from __future__ import annotations

import random
from typing import Any

from pyspark.sql import SparkSession

from medallion.engine.silver.changes import (
    EXPORT_IN_BATCH,
    EXPORT_TARGET,
    ChangeShape,
    export_contents,
    export_marks,
    export_nodes,
    held_on,
    is_mark,
    snapshot_changes,
)
from tests.reference_cdc import Export
from tests.reference_cdc import snapshot_changes as model_changes

SHAPE = ChangeShape(keys=("id",), sequence=("day",), delete="deleted", values=("name", "segment"),
                    carried=("file",))
SCHEMA = "id STRING, day INT, deleted BOOLEAN, name STRING, segment STRING, file STRING"


def exports(rng: random.Random, count: int, keys: int, refusing: float = 0.08) -> list[Export]:
    """Exports at positions 1..count of a table of up to ``keys`` keys: each key kept, changed,
    left out or brought (back) at random; now and then a row refused."""
    made, held = [], {}
    for day in range(1, count + 1):
        rows: dict[tuple[Any, ...], dict[str, Any]] = {}
        refused = set()
        for k in range(keys):
            key, chance = (f"k{k}",), rng.random()
            if chance < 0.15:
                continue  # left out: deleted if it was there
            row = held.get(key) if chance < 0.6 and key in held else {
                "name": rng.choice(["Ann", "Bo", None]), "segment": rng.choice(["s", "g"])}
            if rng.random() < refusing:
                refused.add(key)
            else:
                rows[key] = row
        made.append(Export(day, rows, frozenset(refused)))
        held = rows
    return made


def export_rows(export: Export) -> list[tuple[Any, ...]]:
    return [(key[0], export.position, False, row["name"], row["segment"], f"f{export.position}-{key[0]}")
            for key, row in export.rows.items()]


def applied_rows(exports: list[Export]) -> list[tuple[Any, ...]]:
    """What a snapshot flow holds after taking ``exports`` (in any order): the model's changes,
    each with its export's least file, a mark per export, and a change with no delete flag for
    each refused row's key."""
    least = {e.position: min(f"f{e.position}-{k[0]}" for k in e.rows) for e in exports}
    return ([(c.key[0], c.sequence[0], c.delete, c.row().get("name"), c.row().get("segment"),
              least[c.sequence[0]]) for c in model_changes(exports)]
            + [(None, e.position, True, None, None, least[e.position]) for e in exports]
            + [(k[0], e.position, None, None, None, least[e.position]) for e in exports for k in e.refused])


def statements(rows: list[Any]) -> set[tuple[Any, ...]]:
    return {(r[0], r[1], r[2], r[3], r[4]) for r in rows if r[0] is not None}


def test_a_batch_of_exports_in_any_order_leaves_the_model_changes_of_every_export(
        spark: SparkSession) -> None:
    held_on_beyond = 0
    for seed in range(4):
        held_on_beyond += batch_after(spark, random.Random(seed))
    assert held_on_beyond  # some key was held in exports after one the batch changed


def batch_after(spark: SparkSession, rng: random.Random) -> int:
    """Exports taken in a random order, then a batch of a few more: the applied changes after
    the batch are the model's over all of them. Returns how many keys were held on beyond the
    batch's exports and the export after each."""
    series = exports(rng, count=8, keys=10, refusing=0.3)
    order = rng.sample(series, len(series))
    cut = rng.randrange(1, len(series))
    taken, batch = order[:cut], order[cut:cut + rng.randint(1, 3)]
    held = spark.createDataFrame(applied_rows(taken), SCHEMA)
    rows = spark.createDataFrame([r for e in batch for r in export_rows(e)], SCHEMA)
    unread = spark.createDataFrame([(k[0], e.position) for e in batch for k in e.refused]
                                   or [("none", -1)], "id STRING, day INT")
    # Each step materialized, as the engine does: the steps read one another several times.
    nodes = export_nodes(rows, held, SHAPE).localCheckpoint()
    beyond = held_on(held, nodes, SHAPE).localCheckpoint()
    contents = export_contents(rows, held, nodes, SHAPE, unread, beyond).localCheckpoint()
    made = (snapshot_changes(contents, nodes, SHAPE, beyond)
            .unionByName(export_marks(nodes, SHAPE, dict(held.dtypes))))
    # The batch's exports and the export after each are made again, and the keys held on beyond
    # them; marks of the batch's exports added.
    replaced = {r["day"] for r in nodes.where(EXPORT_TARGET).collect()}
    days = {r["__ordinal"]: r["day"] for r in nodes.collect()}
    held_keys = {(r["id"], days[r["__ordinal"]]) for r in beyond.collect()}
    assert {r["day"] for r in nodes.where(EXPORT_IN_BATCH).collect()} == {e.position for e in batch}
    kept = [tuple(r) for r in held.collect()
            if (r["id"] is None and r["day"] not in {e.position for e in batch})
            or (r["id"] is not None and r["day"] not in replaced and (r["id"], r["day"]) not in held_keys)]
    after = kept + [tuple(r) for r in made.collect()]
    everything = taken + batch
    assert statements(after) == statements(applied_rows(everything))
    # Marks, and each change's export's least file, whatever order the exports came in.
    assert sorted(after, key=str) == sorted(applied_rows(everything), key=str)
    assert held.where(is_mark(SHAPE)).count() == len(taken)
    return len(held_keys)
