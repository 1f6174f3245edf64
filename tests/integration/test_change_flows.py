"""Declared change flows (``changes:``) through the engine: random change histories, cut into
landing files, runs and batches at random, give after every run the SCD type 1 and 2 tables the
independent model (``tests/reference_cdc.py``) gives over every change landed so far; change rows
without a key, a sequence or an operation are quarantined with their reasons."""

from __future__ import annotations

import dataclasses
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from medallion.cli.main import main
from medallion.config.model import Trigger
from medallion.engine.runner import RunIncomplete, RunTarget, run_pipeline
from medallion.ops.maintenance import maintain
from medallion.ops.plan import Verdict, collect_plan
from medallion.project import Settings
from tests.change_feeds import PIPELINE, WITH_DEBEZIUM, change_settings, debezium_event, history, line
from tests.reference_cdc import Change, Version, scd1, scd2


def table(spark: SparkSession, settings: Settings, name: str) -> list[Any]:
    return spark.read.format("delta").load(f"{settings.paths.lakehouse}/silver/{name}").collect()


def history_versions(spark: SparkSession, settings: Settings) -> set[Version]:
    return {Version((r["id"],), (("name", r["name"]), ("segment", r["segment"])),
                    (r["valid_from"],), None if r["valid_to"] is None else (r["valid_to"],))
            for r in table(spark, settings, "customers_history")}


def test_random_histories_in_random_batches_give_the_model_tables(
        spark: SparkSession, tmp_path: Path) -> None:
    rng = random.Random(7)
    settings = change_settings(tmp_path, WITH_DEBEZIUM)
    changes = history(rng, keys=25, count=240)
    broken = ['{"seq": 5, "op": "u", "name": "NoKey"}', '{"id": "c1", "op": "u"}',
              '{"id": "c2", "seq": 9}', 'not json']
    lines = [line(c) for c in changes]
    cuts = sorted(rng.sample(range(1, len(lines)), 7))
    files = [lines[a:b] for a, b in zip([0, *cuts], [*cuts, len(lines)], strict=True)]
    files[2] = files[2] + broken
    runs = sorted(rng.sample(range(1, len(files)), 2))
    events = [[debezium_event(rng, c) for c in changes[a:b]]
              for a, b in zip([0, *cuts], [*cuts, len(lines)], strict=True)]
    events[4] = events[4] + ['{"op": "t", "source": {"lsn": 7}}', '{"op": "u", "after": {"id": "c3"}}',
                             '{"op": "c", "source": {"lsn": 8}, "after": {"name": "NoKey"}}']
    folder, cdc = (Path(settings.paths.landing) / name for name in ("customer_changes", "customer_cdc"))
    folder.mkdir(parents=True)
    cdc.mkdir()
    for a, b in zip([0, *runs], [*runs, len(files)], strict=True):
        for index in range(a, b):
            (folder / f"part-{index:03d}.json").write_text("\n".join(files[index]) + "\n")
            (cdc / f"part-{index:03d}.json").write_text("\n".join(events[index]) + "\n")
        landed = changes[:[*cuts, len(lines)][b - 1]]
        run_pipeline(spark, dataclasses.replace(settings, streaming=dataclasses.replace(
            settings.streaming, max_files_per_trigger=rng.randint(1, 3))), RunTarget.ALL, Trigger())
        latest = {(r["id"],): {"name": r["name"], "segment": r["segment"]}
                  for r in table(spark, settings, "customers")}
        assert latest == scd1(landed)
        assert {(r["id"],): {"name": r["name"], "segment": r["segment"]}
                for r in table(spark, settings, "customers_cdc")} == latest
        rows = table(spark, settings, "customers_history")
        versions = history_versions(spark, settings)
        assert versions == scd2(landed, tracked=["segment"])
        assert len(rows) == len(versions)
        assert all(r["is_current"] == (r["valid_to"] is None) for r in rows)
    assert landed == changes
    quarantined = {tuple(r["reasons"]) for r in table(spark, settings, "customers_quarantine")}
    assert quarantined == {("missing_id",), ("missing_seq",), ("delete_when_unknown",),
                           ("invalid_json",)}
    assert sorted(tuple(r["reasons"]) for r in table(spark, settings, "customers_cdc_quarantine")) == [
        ("missing_id",), ("missing_lsn",), ("not_a_row_change",)]


def test_a_changed_history_declaration_is_refused_and_a_full_refresh_rebuilds_it(
        spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = change_settings(tmp_path)
    changes = history(random.Random(11), keys=8, count=60)
    folder = Path(settings.paths.landing) / "customer_changes"
    folder.mkdir(parents=True)
    (folder / "all.json").write_text("\n".join(line(c) for c in changes) + "\n")
    run_pipeline(spark, settings, RunTarget.ALL, Trigger())
    assert history_versions(spark, settings) == scd2(changes, tracked=["segment"])

    both = PIPELINE.replace("track_history_columns: [segment]", "track_history_columns: [segment, name]")
    changed = change_settings(tmp_path, both, "conf2")
    plans = {p.table: p for p in collect_plan(changed)}
    assert plans["silver/customers_history"].verdict is Verdict.NEEDS_REFRESH
    assert plans["silver/customers"].verdict is Verdict.UNCHANGED
    assert any("track_history_columns" in c for c in plans["silver/customers_history"].changes)
    more = history(random.Random(12), keys=8, count=20)
    (folder / "more.json").write_text("\n".join(line(c) for c in more) + "\n")
    changes += more
    with pytest.raises(RunIncomplete) as refused:
        run_pipeline(spark, changed, RunTarget.ALL, Trigger(), monitor=False)
    assert refused.value.table == "silver/customers_history"
    assert "--full-refresh" in str(refused.value)

    paths = ["--env", "local", "--conf-dir", str(tmp_path / "conf2"), "--landing",
             changed.paths.landing, "--lakehouse", changed.paths.lakehouse]
    assert main(["backfill", "silver/customers_history", "--full-refresh", "--yes", *paths]) == 0
    capsys.readouterr()
    assert history_versions(spark, changed) == scd2(changes, tracked=["segment", "name"])
    assert len(table(spark, changed, "customers_history_changes")) == len(
        {(c.key, c.sequence) for c in changes})


def test_a_batch_marks_the_rows_it_replaces_and_sql_reads_without_them(
        spark: SparkSession, tmp_path: Path) -> None:
    """A change flow's tables have deletion vectors: a later batch's MERGE marks the rows it
    replaces instead of rewriting the files holding them, and ``medallion sql`` (delta-rs and
    DuckDB, no JVM) reads the tables without the marked rows."""
    from deltalake import DeltaTable as RsDeltaTable

    from medallion.io.deltaread import table_facts
    from medallion.serving.lakehouse import Lakehouse

    settings = change_settings(tmp_path)
    changes = history(random.Random(21), keys=40, count=300)
    folder = Path(settings.paths.landing) / "customer_changes"
    folder.mkdir(parents=True)
    (folder / "a.json").write_text("\n".join(line(c) for c in changes[:290]) + "\n")
    run_pipeline(spark, settings, RunTarget.ALL, Trigger())
    (folder / "b.json").write_text("\n".join(line(c) for c in changes[290:]) + "\n")
    run_pipeline(spark, settings, RunTarget.ALL, Trigger())

    lakehouse = f"{settings.paths.lakehouse}/silver"
    for name in ("customers", "customers_history", "customers_changes", "customers_history_changes"):
        assert "deletionVectors" in (RsDeltaTable(f"{lakehouse}/{name}").protocol().reader_features
                                     or ()), name
    assert "deletionVectors" not in (RsDeltaTable(f"{lakehouse}/customers_quarantine").protocol()
                                     .reader_features or ())
    merge = next(c for c in RsDeltaTable(f"{lakehouse}/customers_history").history()
                 if c["operation"] == "MERGE")  # the newest: the second run's
    metrics = merge["operationMetrics"]
    assert int(metrics["numTargetDeletionVectorsAdded"]) > 0, metrics
    assert int(metrics["numTargetFilesRemoved"]) == 0, metrics

    sql = Lakehouse(settings)
    current = sql.query("SELECT id, name, segment FROM silver.customers").table.to_pylist()
    assert {(r["id"],): {"name": r["name"], "segment": r["segment"]} for r in current} == scd1(changes)
    versions = sql.query("SELECT id, name, segment, valid_from, valid_to "
                         "FROM silver.customers_history").table.to_pylist()
    assert {Version((r["id"],), (("name", r["name"]), ("segment", r["segment"])), (r["valid_from"],),
                    None if r["valid_to"] is None else (r["valid_to"],)) for r in versions} == scd2(
        changes, tracked=["segment"])
    assert len(versions) == len(scd2(changes, tracked=["segment"]))
    # status counts the rows without the marked ones
    facts = table_facts(RsDeltaTable(f"{lakehouse}/customers_history"), "ingested_at")
    assert facts.rows == len(versions)


def test_maintenance_keeps_a_type_one_flows_latest_changes_alone(
        spark: SparkSession, tmp_path: Path) -> None:
    settings = change_settings(tmp_path)
    changes = history(random.Random(5), keys=10, count=120)
    first, later = changes[:80], changes[80:]  # later: late changes and re-deliveries among them
    folder = Path(settings.paths.landing) / "customer_changes"
    folder.mkdir(parents=True)
    (folder / "first.json").write_text("\n".join(line(c) for c in first) + "\n")
    run_pipeline(spark, settings, RunTarget.ALL, Trigger())

    done = maintain(spark, settings, ["silver/customers_changes", "silver/customers_history_changes"])
    newest: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for change in first:
        newest[change.key] = max(newest.get(change.key, change.sequence), change.sequence)
    kept = sorted(((r["id"],), (r["seq"],)) for r in table(spark, settings, "customers_changes"))
    assert kept == sorted(newest.items())
    applied = len({(c.key, c.sequence) for c in first})
    assert {r.table: r.changes_removed for r in done} == {
        "silver/customers_changes": applied - len(newest), "silver/customers_history_changes": 0}
    assert len(table(spark, settings, "customers_history_changes")) == applied

    (folder / "later.json").write_text("\n".join(line(c) for c in later) + "\n")
    run_pipeline(spark, settings, RunTarget.ALL, Trigger())
    assert {(r["id"],): {"name": r["name"], "segment": r["segment"]}
            for r in table(spark, settings, "customers")} == scd1(changes)
    assert history_versions(spark, settings) == scd2(changes, tracked=["segment"])


def test_a_deleted_keys_delete_is_kept_its_declared_time_then_forgotten(
        spark: SparkSession, tmp_path: Path) -> None:
    """``keep_deletes_for``: maintenance keeps a deleted key's delete, which refuses the key's
    older changes, until it was ingested that long ago; then removes it, and a late change of
    the key older than the delete is applied as the key's first."""
    pipeline = PIPELINE.replace("      delete_when: op = 'd'\n  customers_history:",
                                "      delete_when: op = 'd'\n      keep_deletes_for: 1 hour\n"
                                "  customers_history:")
    assert "keep_deletes_for" in pipeline
    settings = change_settings(tmp_path, pipeline)
    upsert = {"name": "Ann", "segment": "s"}
    first = [Change(("c1",), (10,), False, tuple(upsert.items())), Change(("c1",), (20,), True),
             Change(("c2",), (10,), False, tuple(upsert.items())), Change(("c2",), (30,), True),
             Change(("c2",), (40,), False, tuple(upsert.items())),
             Change(("c3",), (10,), False, tuple(upsert.items()))]
    folder = Path(settings.paths.landing) / "customer_changes"
    folder.mkdir(parents=True)
    (folder / "first.json").write_text("\n".join(line(c) for c in first) + "\n")
    run_pipeline(spark, settings, RunTarget.ALL, Trigger())

    def applied() -> list[tuple[str, int, bool]]:
        return sorted((r["id"], r["seq"], r["_deleted"]) for r in table(spark, settings, "customers_changes"))

    def removed(now: datetime) -> int:
        done = maintain(spark, settings, ["silver/customers_changes"], now=now)
        return done[0].changes_removed

    ingested = max(r["ingested_at"] for r in table(spark, settings, "customers_changes"))
    ingested = ingested.replace(tzinfo=timezone.utc)
    # Within the hour: only what is below each key's latest goes; c1's delete stays.
    assert removed(ingested + timedelta(minutes=59)) == 3
    assert applied() == [("c1", 20, True), ("c2", 40, False), ("c3", 10, False)]
    late = Change(("c1",), (15,), False, (("name", "Bo"), ("segment", "g")))
    (folder / "late.json").write_text(line(late) + "\n")
    run_pipeline(spark, settings, RunTarget.ALL, Trigger())
    assert "c1" not in {r["id"] for r in table(spark, settings, "customers")}  # refused: older

    # An hour after: c1's delete goes too (with the late change below it); a change of c1
    # older than the delete now makes its row.
    assert removed(ingested + timedelta(hours=1, seconds=1)) == 2
    assert applied() == [("c2", 40, False), ("c3", 10, False)]
    (folder / "later.json").write_text(line(Change(("c1",), (12,), False, (("name", "Cy"),
                                                                             ("segment", "b")))) + "\n")
    run_pipeline(spark, settings, RunTarget.ALL, Trigger())
    rows = {r["id"]: (r["seq"], r["name"], r["segment"]) for r in table(spark, settings, "customers")}
    assert rows == {"c1": (12, "Cy", "b"), "c2": (40, "Ann", "s"), "c3": (10, "Ann", "s")}
