"""Creating a table commits it and registers it in one Delta operation: the entry points at the
new table, carries its declared comments, and a stale entry of the same name (a lakehouse moved,
or its table deleted) is replaced, its data left alone."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from medallion.engine.layer import PlannedQuery, start_layer
from medallion.engine.streaming import RunningQuery
from medallion.errors import JobError
from medallion.io.catalog import register_table
from medallion.io.sinks.delta import ensure_table, ensure_tables
from medallion.io.sources.delta import newest_table_version
from medallion.io.tables import QUALITY_RESULTS, TableSpec
from tests.conftest import make_settings


def _entry(spark: SparkSession, name: str) -> tuple[str, str]:
    row = spark.sql(f"DESCRIBE DETAIL {name}").first()
    assert row is not None
    return str(row["location"]).removeprefix("file:").rstrip("/"), str(row["description"])


def test_a_new_table_is_registered_with_its_comment_and_a_stale_entry_is_replaced(
        spark: SparkSession, tmp_path: Path) -> None:
    spec, name = QUALITY_RESULTS, QUALITY_RESULTS.qualified_name
    first, moved = make_settings(tmp_path / "first"), make_settings(tmp_path / "moved")

    ensure_table(spark, spec, spec.path(first))
    assert _entry(spark, name) == (spec.path(first), spec.comment)
    assert spark.table(name).schema.simpleString() == spec.schema.simpleString()

    # The same name for a lakehouse elsewhere: the entry follows the new table.
    ensure_table(spark, spec, spec.path(moved))
    assert _entry(spark, name) == (spec.path(moved), spec.comment)
    assert DeltaTable.isDeltaTable(spark, spec.path(first))  # dropping the entry kept the data

    # A table that exists is left alone: no second commit.
    ensure_table(spark, spec, spec.path(moved))
    assert newest_table_version(spark, spec.path(moved)) == 0

    # Its folder deleted while this session had the table open (a table rebuilt by hand, the
    # benchmark timing the join alone): Delta then fails to resolve the entry instead of
    # answering whether it exists. The entry is stale all the same: replaced, the table created.
    spark.read.format("delta").load(spec.path(moved)).count()
    shutil.rmtree(spec.path(moved))
    ensure_table(spark, spec, spec.path(moved))
    assert _entry(spark, name) == (spec.path(moved), spec.comment)
    assert newest_table_version(spark, spec.path(moved)) == 0


def test_registering_a_table_replaces_an_entry_whose_table_was_deleted(
        spark: SparkSession, tmp_path: Path) -> None:
    """The catalog's preparation registers a table that exists at its path; an entry of that name
    whose own folder was deleted (Delta cannot resolve it) is replaced, not a failure."""
    spec, name = QUALITY_RESULTS, QUALITY_RESULTS.qualified_name
    old, new = make_settings(tmp_path / "old"), make_settings(tmp_path / "new")
    ensure_table(spark, spec, spec.path(old))
    spark.read.format("delta").load(spec.path(old)).count()
    shutil.rmtree(spec.path(old))
    spark.createDataFrame([], spec.schema).write.format("delta").save(spec.path(new))

    detail = register_table(spark, spec, spec.path(new))
    assert str(detail["location"]).removeprefix("file:").rstrip("/") == spec.path(new)
    assert _entry(spark, name)[0] == spec.path(new)


def test_a_layers_tables_are_created_side_by_side_each_once_and_an_error_names_its_table(
        spark: SparkSession, tmp_path: Path) -> None:
    """``ensure_tables``: what a silver layer's start asks for (tables two queries share named
    twice, one left half-created by a killed run, one already there) ends with every table
    committed once and registered; a table that cannot be created fails naming it."""
    settings = make_settings(tmp_path)
    specs = [TableSpec.from_decl(decl) for decl in settings.pipeline("events").tables()
             if decl.key.startswith(("silver/", "gold/"))]
    existing, interrupted = specs[0], specs[1]
    ensure_table(spark, existing, existing.path(settings))
    Path(interrupted.path(settings), "_delta_log", "_staged_commits").mkdir(parents=True)
    asked = [(spec, spec.path(settings), settings.table_doc(spec.key)) for spec in specs]

    ensure_tables(spark, [*asked, *asked, (QUALITY_RESULTS, QUALITY_RESULTS.path(settings), None)])

    for spec in (*specs, QUALITY_RESULTS):
        assert sorted(p.name for p in Path(spec.path(settings), "_delta_log").glob("*.json")) \
            == ["0" * 20 + ".json"], spec.key  # one commit: created once, none twice
        assert _entry(spark, spec.qualified_name)[0] == spec.path(settings), spec.key

    blocked = specs[2]
    elsewhere = make_settings(tmp_path / "elsewhere")
    Path(elsewhere.paths.lakehouse).mkdir(parents=True)
    Path(blocked.path(elsewhere)).parent.mkdir(parents=True)
    Path(blocked.path(elsewhere)).write_text("a file where the table's folder should be")
    with pytest.raises(JobError, match=f"^{blocked.key}: "):
        ensure_tables(spark, [(spec, spec.path(elsewhere), None) for spec in specs[2:5]])


def test_a_layer_decides_every_querys_work_then_makes_the_tables_of_those_with_work_then_starts(
        spark: SparkSession, tmp_path: Path) -> None:
    """``start_layer``: each query is asked once whether it has work, before any table is made;
    the tables of the queries with work and the shared ones are made before any query starts;
    an idle query's tables are not made, and it is started with what it answered (idle). An error
    while deciding names the query's table."""
    settings = make_settings(tmp_path)
    specs = [TableSpec.from_decl(decl) for decl in settings.pipeline("events").tables()
             if decl.key.startswith("gold/")][:3]
    busy, idle, other = specs
    events: list[str] = []

    def planned(spec: TableSpec, has_work: bool) -> PlannedQuery:
        def due() -> bool:
            events.append(f"due {spec.key}")
            return has_work

        def start(given: bool) -> RunningQuery:
            made = {s.key for s in specs if Path(s.path(settings), "_delta_log").is_dir()}
            events.append(f"start {spec.key} {given} {sorted(made)}")
            return RunningQuery(spec.key, None, idle=not given)

        return PlannedQuery(spec.key, due=due, start=start,
                            tables=lambda: [(spec, spec.path(settings), None)])

    started = start_layer(spark, [planned(busy, True), planned(idle, False)],
                          shared=[(other, other.path(settings), None)])

    made = sorted({busy.key, other.key})
    assert events == [f"due {busy.key}", f"due {idle.key}",
                      f"start {busy.key} True {made}", f"start {idle.key} False {made}"]
    assert [(run.table, run.idle) for run in started] == [(busy.key, False), (idle.key, True)]
    assert not Path(idle.path(settings)).exists()
    assert newest_table_version(spark, busy.path(settings)) == 0

    def failing() -> bool:
        raise OSError("the landing folder cannot be listed")

    with pytest.raises(JobError, match=f"^{idle.key}: .*cannot be listed"):
        start_layer(spark, [planned(busy, True),
                            PlannedQuery(idle.key, due=failing, tables=list,
                                         start=lambda _: RunningQuery(idle.key, None))])
