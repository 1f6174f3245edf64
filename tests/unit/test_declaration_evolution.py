"""What of a changed declaration a table or its query's state carries on from (without Spark; the
runs are in tests/integration/test_declaration_changes.py)."""

from __future__ import annotations

import dataclasses

from pyspark.sql.types import (
    ArrayType,
    DecimalType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from medallion.io.sinks.evolution import differences, schema_changes, state_definition
from medallion.pipeline.load import load_pipelines
from medallion.pipeline.model import GoldSpec, JoinSpec, TableDoc, WindowSpec
from tests.conftest import REPO


def _gold(name: str) -> GoldSpec:
    events = next(p for p in load_pipelines(REPO / "conf", "local") if p.name == "events")
    return next(g for g in events.gold if g.name == name)


def _changed(before: GoldSpec, after: GoldSpec) -> list[str]:
    return differences(state_definition(before), state_definition(after))


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
    added, refused = schema_changes(declared, held)  # 'Price' is 'price': Delta's names
    assert refused == []
    assert [(c.ddl(), c.name) for c in added] == [
        ("`note` STRING AFTER `id`", "note"), ("`cents` BIGINT AFTER `price`", "cents")]
    retyped = StructType([StructField("id", StringType()), StructField("qty", LongType())])
    assert schema_changes(retyped, held) == ([], [
        "column qty is INT in the table and BIGINT in the declaration",
        "the table has column Price, which the declaration no longer has"])


def _struct(*fields: tuple[str, object]) -> StructType:
    return StructType([StructField(name, kind) for name, kind in fields])  # type: ignore[arg-type]


def test_a_field_added_to_a_struct_is_added_in_place_at_any_depth() -> None:
    held = _struct(("id", StringType()),
                   ("device", _struct(("os", StringType()), ("version", StringType()))),
                   ("items", ArrayType(_struct(("sku", StringType())))),
                   ("tags", MapType(StringType(), _struct(("a", IntegerType())))))
    model = StructField("model", StringType(), metadata={"comment": "the maker's name"})
    declared = _struct(("id", StringType()),
                       ("device", StructType([StructField("OS", StringType()), model,
                                              StructField("version", StringType())])),
                       ("items", ArrayType(_struct(("qty", IntegerType()), ("sku", StringType()),
                                                   ("box", _struct(("w", IntegerType())))))),
                       ("tags", MapType(StringType(), _struct(("a", IntegerType()),
                                                              ("b", StringType())))))
    added, refused = schema_changes(declared, held)
    assert refused == []
    assert [c.ddl() for c in added] == [
        "`device`.`model` STRING COMMENT 'the maker\\'s name' AFTER `OS`",
        "`items`.`element`.`qty` INT FIRST",
        "`items`.`element`.`box` STRUCT<`w`: INT> AFTER `sku`",
        "`tags`.`value`.`b` STRING AFTER `a`"]
    assert [c.name for c in added] == ["device.model", "items.element.qty", "items.element.box",
                                       "tags.value.b"]


def test_a_field_dropped_or_retyped_inside_a_struct_is_refused_by_its_path() -> None:
    held = _struct(("device", _struct(("os", StringType()), ("version", StringType()))),
                   ("items", ArrayType(_struct(("sku", StringType()), ("qty", IntegerType())))),
                   ("tags", MapType(StringType(), IntegerType())))
    declared = _struct(("device", _struct(("os", StringType()), ("build", LongType()))),
                       ("items", ArrayType(_struct(("sku", StringType()), ("qty", LongType())))),
                       ("tags", MapType(IntegerType(), IntegerType())))
    added, refused = schema_changes(declared, held)
    assert refused == [
        "the table has column device.version, which the declaration no longer has",
        "column items.element.qty is INT in the table and BIGINT in the declaration",
        "column tags is MAP<STRING, INT> in the table and MAP<INT, INT> in the declaration"]
    assert [c.name for c in added] == ["device.build"]  # refused with the rest: nothing is added
