"""What of a changed declaration a table or its query's state carries on from (without Spark; the
runs are in tests/integration/test_declaration_changes.py)."""

from __future__ import annotations

import dataclasses

from medallion.pipeline.evolution import differences, schema_changes, state_definition
from medallion.pipeline.load import load_pipelines
from medallion.pipeline.model import GoldSpec, JoinSpec, TableDoc, WindowSpec
from medallion.pipeline.types import SqlType, from_schema_json, parse_type
from tests.conftest import REPO


def columns(ddl: str) -> SqlType:
    """A table's columns, written as a STRUCT's fields: ``a BIGINT, b STRING``."""
    return parse_type(f"STRUCT<{ddl}>")


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
    held = columns("id STRING, qty INT, Price DECIMAL(10,2)")
    declared = columns("id STRING, note STRING, qty INT, price DECIMAL(10,2), cents BIGINT")
    added, refused = schema_changes(declared, held)  # 'Price' is 'price': Delta's names
    assert refused == []
    assert [(c.ddl(), c.name) for c in added] == [
        ("`note` STRING AFTER `id`", "note"), ("`cents` BIGINT AFTER `price`", "cents")]
    assert added[0].ddl("the buyer's note") == "`note` STRING COMMENT 'the buyer\\'s note' AFTER `id`"
    retyped = columns("id STRING, qty BIGINT")
    assert schema_changes(retyped, held) == ([], [
        "column qty is INT in the table and BIGINT in the declaration",
        "the table has column Price, which the declaration no longer has"])


def test_a_field_added_to_a_struct_is_added_in_place_at_any_depth() -> None:
    held = columns("id STRING, device STRUCT<os: STRING, version: STRING>, "
                   "items ARRAY<STRUCT<sku: STRING>>, tags MAP<STRING, STRUCT<a: INT>>")
    declared = columns("id STRING, device STRUCT<OS: STRING, model: STRING, version: STRING>, "
                       "items ARRAY<STRUCT<qty: INT, sku: STRING, box: STRUCT<w: INT>>>, "
                       "tags MAP<STRING, STRUCT<a: INT, b: STRING>>")
    added, refused = schema_changes(declared, held)
    assert refused == []
    assert [c.ddl() for c in added] == [
        "`device`.`model` STRING AFTER `OS`",
        "`items`.`element`.`qty` INT FIRST",
        "`items`.`element`.`box` STRUCT<`w`: INT> AFTER `sku`",
        "`tags`.`value`.`b` STRING AFTER `a`"]
    assert [c.name for c in added] == ["device.model", "items.element.qty", "items.element.box",
                                       "tags.value.b"]


def test_a_field_dropped_or_retyped_inside_a_struct_is_refused_by_its_path() -> None:
    held = columns("device STRUCT<os: STRING, version: STRING>, "
                   "items ARRAY<STRUCT<sku: STRING, qty: INT>>, tags MAP<STRING, INT>")
    declared = columns("device STRUCT<os: STRING, build: BIGINT>, "
                       "items ARRAY<STRUCT<sku: STRING, qty: BIGINT>>, tags MAP<INT, INT>")
    added, refused = schema_changes(declared, held)
    assert refused == [
        "the table has column device.version, which the declaration no longer has",
        "column items.element.qty is INT in the table and BIGINT in the declaration",
        "column tags is MAP<STRING, INT> in the table and MAP<INT, INT> in the declaration"]
    assert [c.name for c in added] == ["device.build"]  # refused with the rest: nothing is added


def test_a_schema_spark_or_delta_writes_as_json_reads_as_the_declared_types() -> None:
    """What a Delta log (or Spark's ``jsonValue``) holds compares equal to the declaration that
    made it, nested types and decimals included; a type no declaration names does not."""
    logged = {"type": "struct", "fields": [
        {"name": "id", "type": "string", "nullable": True, "metadata": {}},
        {"name": "n", "type": "long", "nullable": True, "metadata": {"comment": "x"}},
        {"name": "at", "type": "timestamp_ntz", "nullable": True, "metadata": {}},
        {"name": "amount", "type": "decimal(18,4)", "nullable": True, "metadata": {}},
        {"name": "tags", "type": {"type": "map", "keyType": "string", "valueType": {
            "type": "array", "elementType": "integer", "containsNull": True},
            "valueContainsNull": True}, "nullable": True, "metadata": {}},
        {"name": "pos", "type": {"type": "struct", "fields": [
            {"name": "lon-e", "type": "double", "nullable": True, "metadata": {}},
            {"name": "ok", "type": "boolean", "nullable": False, "metadata": {}}]},
         "nullable": True, "metadata": {}}]}
    assert from_schema_json(logged) == columns(
        "id STRING, n BIGINT, at TIMESTAMP_NTZ, amount DECIMAL(18,4), tags MAP<STRING, ARRAY<INT>>, "
        "pos STRUCT<`lon-e`: DOUBLE, ok BOOLEAN>")
    assert from_schema_json("void") != parse_type("STRING")
    assert schema_changes(columns("x STRING"), from_schema_json(
        {"type": "struct", "fields": [{"name": "x", "type": "void"}]}))[1] == [
        "column x is VOID in the table and STRING in the declaration"]
