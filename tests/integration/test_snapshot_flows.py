"""Change flows fed full exports (``changes.snapshot_by``) through the engine: random series of
daily exports, landed over several runs (some days after later ones) and cut into batches at
random, give after every run the SCD type 1 and 2 tables the independent model
(``tests/reference_cdc.py``) gives over the exports landed so far, in order of their day. A
refused row keeps its key as it was; an export landed again changes nothing."""

from __future__ import annotations

import dataclasses
import random
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from medallion.config.model import Trigger
from medallion.engine.runner import RunTarget, run_pipeline
from medallion.project import Settings
from tests.change_feeds import EXPORTS, change_settings
from tests.reference_cdc import Export, Version, scd1, scd2, snapshot_changes

FIRST = date(2026, 1, 1)


def series(rng: random.Random, days: int, keys: int) -> tuple[list[Export], list[list[str]]]:
    """Daily exports of up to ``keys`` customers (each kept, changed, left out or brought back at
    random; now and then a row refused for its segment, or without a key) and their CSV lines."""
    exports, files, held = [], [], {}
    for day in range(days):
        rows, refused, lines = {}, set(), ["id,name,segment"]
        for k in range(keys):
            key, chance = (f"c{k}",), rng.random()
            if chance < 0.15:
                continue
            row = held[key] if chance < 0.6 and key in held else {
                "name": rng.choice(["Ann", "Bo", "Cy"]), "segment": rng.choice(["s", "g", "b"])}
            if rng.random() < 0.07:
                refused.add(key)
                lines.append(f"{key[0]},{row['name']},platinum")
            else:
                rows[key] = row
                lines.append(f"{key[0]},{row['name']},{row['segment']}")
        if rng.random() < 0.3:
            lines.append(",Nobody,s")  # no key: quarantined, no key to keep
        lines[1:] = rng.sample(lines[1:], len(lines) - 1)
        exports.append(Export(FIRST + timedelta(days=day), rows, frozenset(refused)))
        files.append(lines)
        held = rows
    return exports, files


def rows_of(spark: SparkSession, settings: Settings, name: str) -> list[Any]:
    return spark.read.format("delta").load(f"{settings.paths.lakehouse}/silver/{name}").collect()


def tables(spark: SparkSession, settings: Settings) -> tuple[dict[Any, Any], set[Version]]:
    latest = {(r["id"],): {"name": r["name"], "segment": r["segment"]}
              for r in rows_of(spark, settings, "exported_customers")}
    history = rows_of(spark, settings, "exported_customers_history")
    assert all(r["is_current"] == (r["valid_to"] is None) for r in history)
    versions = {Version((r["id"],), (("name", r["name"]), ("segment", r["segment"])),
                        (r["valid_from"],), None if r["valid_to"] is None else (r["valid_to"],))
                for r in history}
    assert len(versions) == len(history)
    return latest, versions


def test_daily_exports_in_random_batches_give_the_model_tables(
        spark: SparkSession, tmp_path: Path) -> None:
    rng = random.Random(3)
    settings = change_settings(tmp_path, EXPORTS)
    exports, files = series(rng, days=10, keys=30)
    folder = Path(settings.paths.landing) / "customer_exports"
    folder.mkdir(parents=True)
    # Landed a few at a time, some days held back and landed runs later, after later days.
    late = set(rng.sample(range(1, len(files) - 1), 2))
    runs = sorted(rng.sample(range(1, len(files)), 3))
    landed: list[Export] = []
    for a, b in zip([0, *runs], [*runs, len(files) + 1], strict=True):
        due = [i for i in range(a, min(b, len(files))) if i not in late]
        if b > len(files):
            due += sorted(late)
        elif late and min(late) < a and rng.random() < 0.7:
            due.append(min(late))
            late.discard(min(late))
        for index in due:
            (folder / f"customers_{exports[index].position}.csv").write_text("\n".join(files[index]) + "\n")
            landed.append(exports[index])
        changes = snapshot_changes(landed)
        run_pipeline(spark, dataclasses.replace(settings, streaming=dataclasses.replace(
            settings.streaming, max_files_per_trigger=rng.randint(1, 3))), RunTarget.ALL, Trigger())
        assert tables(spark, settings) == (scd1(changes), scd2(changes))
    assert sorted(e.position for e in landed) == [e.position for e in exports]
    # Some came late.
    assert any(a.position > b.position for a, b in zip(landed, landed[1:], strict=False))
    reasons = sorted(tuple(r["reasons"]) for r in rows_of(spark, settings, "exported_customers_quarantine"))
    assert set(reasons) == {("missing_id",), ("known_segment",)}
    assert reasons.count(("known_segment",)) == sum(len(e.refused) for e in exports)

    # An export landed again under another file's name changes nothing.
    applied = sorted(map(str, rows_of(spark, settings, "exported_customers_history_changes")))
    again = rng.randrange(len(files))
    (folder / f"customers_{exports[again].position}_again.csv").write_text("\n".join(files[again]) + "\n")
    run_pipeline(spark, settings, RunTarget.ALL, Trigger())
    assert tables(spark, settings) == (scd1(changes), scd2(changes))
    assert sorted(map(str, rows_of(spark, settings, "exported_customers_history_changes"))) == applied
