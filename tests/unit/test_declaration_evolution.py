"""What of a changed declaration a table or its query's state carries on from (without Spark; the
runs are in tests/integration/test_declaration_changes.py)."""

from __future__ import annotations

import dataclasses

import pytest

from medallion.pipeline.evolution import (
    differences,
    schema_changes,
    state_changes,
    state_definition,
    widens,
)
from medallion.pipeline.kinds import (
    AggregateFunction,
    Layer,
    OutputMode,
    Refresh,
    TableRole,
    WindowKind,
)
from medallion.pipeline.load import load_pipelines
from medallion.pipeline.model import (
    AggregateSpec,
    Field,
    GoldSpec,
    JoinSpec,
    TableDoc,
    WindowSpec,
)
from medallion.pipeline.spec import TableDecl
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
    counts = dataclasses.replace(_gold("event_counts_5m"), refresh=Refresh.STATEFUL)
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


def test_a_recomputed_table_names_what_changes_its_rows_too() -> None:
    counts = _gold("event_counts_5m")  # mode update: recomputed unless declared otherwise
    assert counts.recomputed
    assert _changed(counts, dataclasses.replace(
        counts, filter="event_type <> 'view'", watermark="1 hour", doc=TableDoc(comment="x"),
        aggregates=tuple(dataclasses.replace(a, default=7) for a in counts.aggregates))) == [
        'filter: null -> "event_type <> \'view\'"', "defaults.total_amount: 0 -> 7",
        "defaults.event_count added (7)"]
    assert _changed(counts, dataclasses.replace(counts, refresh=Refresh.STATEFUL)) == [
        'refresh removed (was "recompute")', "filter removed (was null)",
        'defaults removed (was {"total_amount": 0})']


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
    changes = schema_changes(declared, held)  # 'Price' is 'price': Delta's names
    added = changes.added
    assert changes.refused == [] and changes.widened == []
    assert [(c.ddl(), c.name) for c in added] == [
        ("`note` STRING AFTER `id`", "note"), ("`cents` BIGINT AFTER `price`", "cents")]
    assert added[0].ddl("the buyer's note") == "`note` STRING COMMENT 'the buyer\\'s note' AFTER `id`"
    retyped = columns("id STRING, qty SMALLINT")
    assert schema_changes(retyped, held).refused == [
        "column qty is INT in the table and SMALLINT in the declaration, which is not a wider "
        "type of it",
        "the table has column Price, which the declaration no longer has"]


def test_a_field_added_to_a_struct_is_added_in_place_at_any_depth() -> None:
    held = columns("id STRING, device STRUCT<os: STRING, version: STRING>, "
                   "items ARRAY<STRUCT<sku: STRING>>, tags MAP<STRING, STRUCT<a: INT>>")
    declared = columns("id STRING, device STRUCT<OS: STRING, model: STRING, version: STRING>, "
                       "items ARRAY<STRUCT<qty: INT, sku: STRING, box: STRUCT<w: INT>>>, "
                       "tags MAP<STRING, STRUCT<a: INT, b: STRING>>")
    changes = schema_changes(declared, held)
    added = changes.added
    assert changes.refused == []
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
                       "items ARRAY<STRUCT<sku: STRING, qty: STRING>>, tags MAP<INT, INT>")
    changes = schema_changes(declared, held)
    assert changes.refused == [
        "the table has column device.version, which the declaration no longer has",
        "column items.element.qty is INT in the table and STRING in the declaration, which is "
        "not a wider type of it",
        "column tags is MAP<STRING, INT> in the table and MAP<INT, INT> in the declaration, "
        "which is not a wider type of it"]
    # refused with the rest: nothing is added
    assert [c.name for c in changes.added] == ["device.build"]


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
        {"type": "struct", "fields": [{"name": "x", "type": "void"}]})).refused == [
        "column x is VOID in the table and STRING in the declaration, which is not a wider type "
        "of it"]


@pytest.mark.parametrize(("held", "declared"), [
    ("TINYINT", "SMALLINT"), ("TINYINT", "BIGINT"), ("SMALLINT", "INT"), ("INT", "BIGINT"),
    ("TINYINT", "DOUBLE"), ("INT", "DOUBLE"), ("FLOAT", "DOUBLE"),
    ("TINYINT", "DECIMAL(3,0)"), ("SMALLINT", "DECIMAL(7,2)"), ("INT", "DECIMAL(10,0)"),
    ("INT", "DECIMAL(12,2)"), ("BIGINT", "DECIMAL(20,0)"), ("BIGINT", "DECIMAL(38,18)"),
    ("DECIMAL(10,2)", "DECIMAL(12,2)"), ("DECIMAL(10,1)", "DECIMAL(12,3)"),
    ("DECIMAL(10,2)", "DECIMAL(11,2)"), ("DATE", "TIMESTAMP_NTZ"),
])
def test_a_type_widens_to_one_that_holds_every_value_exactly(held: str, declared: str) -> None:
    assert widens(parse_type(held), parse_type(declared))


@pytest.mark.parametrize(("held", "declared"), [
    ("BIGINT", "INT"), ("INT", "INT"), ("SMALLINT", "TINYINT"), ("DOUBLE", "FLOAT"),
    ("BIGINT", "DOUBLE"),                 # 2^53 + 1 is not a DOUBLE
    ("INT", "DECIMAL(9,0)"), ("INT", "DECIMAL(12,3)"), ("BIGINT", "DECIMAL(19,0)"),
    ("DECIMAL(10,2)", "DECIMAL(10,3)"),  # one digit fewer before the point
    ("DECIMAL(10,2)", "DECIMAL(12,1)"),  # a place after it lost
    ("DECIMAL(12,2)", "DECIMAL(10,2)"), ("DECIMAL(10,0)", "BIGINT"), ("FLOAT", "DECIMAL(38,10)"),
    ("DATE", "TIMESTAMP"), ("TIMESTAMP_NTZ", "DATE"), ("INT", "STRING"), ("STRING", "BINARY"),
    ("TIMESTAMP", "TIMESTAMP_NTZ"),
])
def test_a_narrower_or_other_kind_of_type_does_not_widen(held: str, declared: str) -> None:
    assert not widens(parse_type(held), parse_type(declared))


def test_widened_columns_are_named_by_their_path_and_altered_in_place() -> None:
    held = columns("id STRING, qty INT, price DECIMAL(10,2), device STRUCT<build: SMALLINT>, "
                   "items ARRAY<STRUCT<w: FLOAT>>, tags MAP<STRING, INT>")
    declared = columns("id STRING, qty BIGINT, price DECIMAL(14,4), "
                       "device STRUCT<build: INT, os: STRING>, items ARRAY<STRUCT<w: DOUBLE>>, "
                       "tags MAP<STRING, BIGINT>")
    changes = schema_changes(declared, held)
    assert changes.refused == []
    assert [(w.name, str(w.held), str(w.declared)) for w in changes.widened] == [
        ("qty", "INT", "BIGINT"), ("price", "DECIMAL(10,2)", "DECIMAL(14,4)"),
        ("device.build", "SMALLINT", "INT"), ("items.element.w", "FLOAT", "DOUBLE"),
        ("tags.value", "INT", "BIGINT")]
    assert [w.ddl() for w in changes.widened] == [
        "`qty` TYPE BIGINT", "`price` TYPE DECIMAL(14,4)", "`device`.`build` TYPE INT",
        "`items`.`element`.`w` TYPE DOUBLE", "`tags`.`value` TYPE BIGINT"]
    assert [c.name for c in changes.added] == ["device.os"]


def _typed_gold(**columns: str) -> tuple[GoldSpec, TableDecl]:
    source = TableDecl(Layer.SILVER, "events", TableRole.SILVER, tuple(
        Field(name, parse_type(kind)) for name, kind in columns.items()))
    gold = GoldSpec(
        name="g", input="silver/events", mode=OutputMode.UPDATE,
        window=WindowSpec(kind=WindowKind.TUMBLING, column="at", size="5 minutes"),
        group_by=("kind",), aggregates=(
            AggregateSpec("n", AggregateFunction.COUNT),
            AggregateSpec("total", AggregateFunction.SUM, "qty"),
            AggregateSpec("users", AggregateFunction.COUNT_DISTINCT, "user"),
            AggregateSpec("seen", AggregateFunction.APPROX_COUNT_DISTINCT, "price")))
    return gold, source


def test_the_state_types_change_only_when_what_the_state_holds_changes() -> None:
    gold, source = _typed_gold(at="TIMESTAMP", kind="STRING", qty="INT", user="STRING",
                               price="DECIMAL(10,2)")
    assert state_definition(gold, source)["types"] == {
        "kind": "STRING", "total": "BIGINT", "users": "ARRAY<STRING>"}
    before = state_definition(gold, source)
    # A sum of INT and of BIGINT are both BIGINT; an approximate count's sketch has one shape.
    assert state_changes(before, state_definition(*_typed_gold(
        at="TIMESTAMP", kind="STRING", qty="BIGINT", user="STRING", price="DECIMAL(20,2)"))) == []
    assert state_changes(before, state_definition(*_typed_gold(
        at="TIMESTAMP", kind="STRING", qty="DECIMAL(12,2)", user="STRING",
        price="DECIMAL(10,2)"))) == ['types.total: "BIGINT" -> "DECIMAL(22,2)"']
    assert state_changes(before, state_definition(*_typed_gold(
        at="TIMESTAMP", kind="STRING", qty="INT", user="BIGINT", price="DECIMAL(10,2)"))) == [
        'types.users: "ARRAY<STRING>" -> "ARRAY<BIGINT>"']
    # Recorded without types: compared on the rest.
    untyped = {key: value for key, value in before.items() if key != "types"}
    assert state_changes(untyped, before) == []
    assert state_changes(before, untyped) == ['types removed (was {"kind": "STRING", "total": '
                                              '"BIGINT", "users": "ARRAY<STRING>"})']
