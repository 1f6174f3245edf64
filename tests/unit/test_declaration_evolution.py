"""What of a changed declaration a table or its query's state carries on from (without Spark; the
runs are in tests/integration/test_declaration_changes.py)."""

from __future__ import annotations

import dataclasses

from pyspark.sql.types import (
    DecimalType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from medallion.pipeline.load import load_pipelines
from medallion.pipeline.model import GoldSpec, JoinSpec, TableDoc, WindowSpec
from medallion.sinks.evolution import _differences, schema_changes, state_definition
from tests.conftest import REPO


def _gold(name: str) -> GoldSpec:
    events = next(p for p in load_pipelines(REPO / "conf", "local") if p.name == "events")
    return next(g for g in events.gold if g.name == name)


def _changed(before: GoldSpec, after: GoldSpec) -> list[str]:
    return _differences(state_definition(before), state_definition(after))


def test_a_window_group_or_aggregate_change_is_named_and_what_applies_to_new_rows_is_not() -> None:
    counts = _gold("event_counts_5m")
    assert counts.window is not None and counts.aggregates
    assert _changed(counts, dataclasses.replace(
        counts, filter="event_type <> 'view'", watermark="1 hour", doc=TableDoc(comment="x"),
        aggregates=tuple(dataclasses.replace(a, default=7) for a in counts.aggregates))) == []
    wider = dataclasses.replace(counts, window=dataclasses.replace(counts.window, size="10 minutes"))
    assert _changed(counts, wider) == ['window.size: "5 minutes" -> "10 minutes"']
    regrouped = dataclasses.replace(counts, group_by=(), aggregates=counts.aggregates[:1])
    assert _changed(counts, regrouped) == [
        'group_by: ["event_type"] -> []', 'aggregates.total_amount removed (was "sum(amount)")']
    sessions = dataclasses.replace(counts, window=WindowSpec(
        kind=type(counts.window.kind)("session"), column=counts.window.column, gap="5 minutes"))
    assert _changed(counts, sessions) == [
        'window.kind: "tumbling" -> "session"', 'window.size removed (was "5 minutes")',
        'window.gap added ("5 minutes")']


def test_a_join_change_is_named_but_not_its_right_filter() -> None:
    attribution = _gold("purchase_attribution")
    join = attribution.join
    assert isinstance(join, JoinSpec)
    assert _changed(attribution, dataclasses.replace(
        attribution, join=dataclasses.replace(join, filter="event_type = 'click'"))) == []
    assert _changed(attribution, dataclasses.replace(
        attribution, join=dataclasses.replace(join, within="1 hour"))) == [
        'join.within: "30 minutes" -> "1 hour"']


def test_added_columns_are_placed_and_dropped_or_retyped_ones_refused() -> None:
    held = StructType([StructField("id", StringType()), StructField("qty", IntegerType()),
                       StructField("Price", DecimalType(10, 2))])
    declared = StructType([StructField("id", StringType()), StructField("note", StringType()),
                           StructField("qty", IntegerType()), StructField("price", DecimalType(10, 2)),
                           StructField("cents", LongType())])
    assert schema_changes(declared, held) == ([1, 4], [])  # 'Price' is 'price': Delta's names
    retyped = StructType([StructField("id", StringType()), StructField("qty", LongType())])
    assert schema_changes(retyped, held) == ([], [
        "column qty is INT in the table and BIGINT in the declaration",
        "the table has column Price, which the declaration no longer has"])
