"""What of a changed declaration a table, or its query's state, can carry on from: the rules,
pure (the run applies them in :mod:`medallion.io.sinks.evolution`, ``medallion plan`` and
``medallion status`` to what the Delta logs and checkpoints hold, without Spark).

* **A table's columns** (:func:`schema_changes`): columns the declaration added, and fields it
  added to struct columns, can be added in place (Delta's ``ADD COLUMNS``); a column or field
  declared with a wider type (:func:`widens`: INT to BIGINT, a DECIMAL's precision raised, FLOAT
  to DOUBLE, ...) can be widened in place (Delta's type widening); a column or field the
  declaration no longer has, or whose type changed otherwise, cannot.
* **A stateful query's definition** (:func:`state_definition`): a gold table's windows, groups
  and aggregates (or its join), and the types its state holds them in, live in its query's
  state, and a change to them cannot carry on from it (:func:`differences` names each).

Schemas are :class:`~medallion.pipeline.types.SqlType` structs: the declared columns, or what
:func:`~medallion.pipeline.types.from_schema_json` reads from a table's JSON schema.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from medallion.pipeline.kinds import AggregateFunction, OutputMode
from medallion.pipeline.model import GoldSpec, SilverSpec
from medallion.pipeline.spec import TableDecl
from medallion.pipeline.types import SqlType

# Beside the state in a gold query's checkpoint: the declaration the state was written with.
DECLARATION_FILE = "medallion-declaration.json"


def recompute_advice(table: str) -> str:
    """What to do about a declaration the lakehouse cannot carry on from."""
    return ("Put the declaration back as it was, or recompute the table and everything "
            f"downstream of it from their inputs: `medallion backfill {table} --full-refresh`.")


def quoted(name: str) -> str:
    """A name in backticks, as DDL takes any name."""
    return "`" + name.replace("`", "``") + "`"


def ddl_type(of: SqlType) -> str:
    """A type as DDL, every struct field name quoted."""
    if of.name == "STRUCT":
        return "STRUCT<" + ", ".join(f"{quoted(name)}: {ddl_type(kind)}"
                                     for name, kind in zip(of.fields, of.args, strict=True)) + ">"
    if of.name == "ARRAY":
        return f"ARRAY<{ddl_type(of.args[0])}>"
    if of.name == "MAP":
        return f"MAP<{ddl_type(of.args[0])}, {ddl_type(of.args[1])}>"
    return str(of)


@dataclass(frozen=True)
class AddedColumn:
    """A column the declaration has and the table lacks: at the top level, or a field of a struct
    column (``parent``: the path to that struct, as Delta's DDL names it, e.g. ``device`` or
    ``items.element``), after the field before it in the declaration (None: first)."""

    parent: tuple[str, ...]
    field: str
    type: SqlType
    after: str | None

    @property
    def name(self) -> str:
        return ".".join((*self.parent, self.field))

    def ddl(self, comment: str | None = None) -> str:
        """The column as ``ALTER TABLE ... ADD COLUMNS`` takes it, with its comment and place."""
        path = ".".join(quoted(part) for part in (*self.parent, self.field))
        text = f"{path} {ddl_type(self.type)}"
        if comment:
            text += " COMMENT '" + comment.replace("\\", "\\\\").replace("'", "\\'") + "'"
        return text + (f" AFTER {quoted(self.after)}" if self.after else " FIRST")


# Of each integral type: the digits it can hold, which a DECIMAL widened to must keep before
# its point (Delta's rule).
_INTEGRAL_DIGITS = {"TINYINT": 3, "SMALLINT": 5, "INT": 10, "BIGINT": 20}


def widens(held: SqlType, declared: SqlType) -> bool:
    """Whether a column of type ``held`` can take ``declared`` in place: one of the type changes
    Delta's type widening makes without rewriting a file, every value kept exactly (an integral
    type to a larger one, to DOUBLE (not BIGINT) or to a DECIMAL with as many digits before its
    point; FLOAT to DOUBLE; a DECIMAL to one with as many digits before the point and at least
    its scale; DATE to TIMESTAMP_NTZ)."""
    if held == declared:
        return False
    old, new = held.name, declared.name
    if old in _INTEGRAL_DIGITS:
        if new in _INTEGRAL_DIGITS:
            return _INTEGRAL_DIGITS[new] > _INTEGRAL_DIGITS[old]
        if new == "DOUBLE":
            return old != "BIGINT"
        if new == "DECIMAL":
            assert declared.precision is not None and declared.scale is not None
            return declared.precision - declared.scale >= _INTEGRAL_DIGITS[old]
        return False
    if old == "DECIMAL" and new == "DECIMAL":
        assert held.precision is not None and held.scale is not None
        assert declared.precision is not None and declared.scale is not None
        return (declared.scale >= held.scale
                and declared.precision - declared.scale >= held.precision - held.scale)
    return (old, new) in {("FLOAT", "DOUBLE"), ("DATE", "TIMESTAMP_NTZ")}


@dataclass(frozen=True)
class WidenedColumn:
    """A column (or a struct's field, an array's element, a map's value: ``path`` as Delta's DDL
    names it, e.g. ``device.version`` or ``items.element.qty``) whose declared type is wider than
    the table's."""

    path: tuple[str, ...]
    held: SqlType
    declared: SqlType

    @property
    def name(self) -> str:
        return ".".join(self.path)

    def ddl(self) -> str:
        """The column as ``ALTER TABLE ... ALTER COLUMN`` takes it, with its new type."""
        return f"{'.'.join(quoted(part) for part in self.path)} TYPE {ddl_type(self.declared)}"


@dataclass(frozen=True)
class SchemaChanges:
    """How declared columns differ from a table's: what can be added, what widened (both in
    place), and, each as a sentence, what cannot change in place."""

    added: list[AddedColumn]
    widened: list[WidenedColumn]
    refused: list[str]


def schema_changes(declared: SqlType, held: SqlType) -> SchemaChanges:
    """How the ``declared`` columns (a STRUCT) differ from the ``held`` ones of a table: the
    columns it lacks (fields of struct columns too, at any depth, in arrays' elements and maps'
    values as well), in the order they can be added; the columns and fields declared with a
    wider type (:func:`widens`); and, each as a sentence, what cannot be changed in place (a
    column or field the declaration dropped, or one whose type differs otherwise). Names match
    without case, as Delta's do."""
    changes = SchemaChanges([], [], [])
    _struct_changes(declared, held, (), changes)
    return changes


def _struct_changes(declared: SqlType, held: SqlType, parent: tuple[str, ...],
                    changes: SchemaChanges) -> None:
    held_by_name = {name.lower(): (name, kind) for name, kind in zip(held.fields, held.args,
                                                                      strict=True)}
    declared_names = {name.lower() for name in declared.fields}
    for position, (name, kind) in enumerate(zip(declared.fields, declared.args, strict=True)):
        had = held_by_name.get(name.lower())
        if had is None:
            changes.added.append(AddedColumn(parent, name, kind,
                                             declared.fields[position - 1] if position else None))
        else:
            _type_changes(kind, had[1], (*parent, had[0]), changes)
    changes.refused.extend(
        f"the table has column {'.'.join((*parent, name))}, which the declaration no longer has"
        for name in held.fields if name.lower() not in declared_names)


def _type_changes(declared: SqlType, held: SqlType, path: tuple[str, ...],
                  changes: SchemaChanges) -> None:
    """A column both have: a struct (also as an array's element or a map's value) may gain
    fields, a type may widen; any other difference is a new type."""
    if declared.name == held.name == "STRUCT":
        _struct_changes(declared, held, path, changes)
    elif declared.name == held.name == "ARRAY":
        _type_changes(declared.args[0], held.args[0], (*path, "element"), changes)
    elif declared.name == held.name == "MAP" and declared.args[0] == held.args[0]:
        _type_changes(declared.args[1], held.args[1], (*path, "value"), changes)
    elif widens(held, declared):
        changes.widened.append(WidenedColumn(path, held, declared))
    elif held != declared:
        changes.refused.append(
            f"column {'.'.join(path)} is {ddl_type(held)} in the table and {ddl_type(declared)} "
            "in the declaration, which is not a wider type of it")


def state_types(gold: GoldSpec, source: TableDecl) -> dict[str, str]:
    """The types a windowed aggregation's state holds, by the declarations: each grouping
    column's, and each aggregate's (a sum's, a min's, ... result type; a distinct count's set of
    its column's values). A column of the input widened under the aggregation changes them, and
    a state of other types cannot be carried on from."""
    types: dict[str, str] = {}
    for column in gold.group_by:
        kind = source.column_type(column)
        types[column] = str(kind) if kind is not None else "?"
    for aggregate in gold.aggregates:
        of = source.column_type(aggregate.column) if aggregate.column else None
        if aggregate.function is AggregateFunction.COUNT_DISTINCT:
            types[aggregate.name] = f"ARRAY<{of}>"
        elif aggregate.function not in (AggregateFunction.COUNT,
                                        AggregateFunction.APPROX_COUNT_DISTINCT):
            types[aggregate.name] = str(aggregate.result_type(of))
    return types


def state_definition(gold: GoldSpec, source: TableDecl | None = None,
                     watermark: str | None = None) -> dict[str, Any]:
    """What a gold query's state is made of, by its declaration (``source``: its input's, for
    the types the state holds, :func:`state_types`): what carrying on from the state needs
    unchanged. Left out, since they apply to what comes next: the filter, the watermark, an
    aggregate's default, the expectations and the comments; but a recomputed table's rows are
    made by its filter and defaults, and an append-mode one's by the ``watermark`` in force too
    (which windows are final, and so appended, is the watermark's)."""
    definition: dict[str, Any] = {"input": gold.input, "mode": gold.mode.value}
    if gold.window is not None:
        window = gold.window
        definition["window"] = {key: value for key, value in (
            ("kind", window.kind.value), ("column", window.column), ("size", window.size),
            ("slide", window.slide), ("gap", window.gap)) if value is not None}
        definition["group_by"] = list(gold.group_by)
        definition["aggregates"] = {a.name: f"{a.function.value}({a.column or '*'})"
                                    for a in gold.aggregates}
        if source is not None:
            definition["types"] = state_types(gold, source)
        if gold.recomputed:  # no state: what changes its rows recomputes the table
            definition["refresh"] = gold.refresh.value
            definition["filter"] = gold.filter
            definition["defaults"] = {a.name: a.default for a in gold.aggregates
                                      if a.default is not None}
            if gold.mode is OutputMode.APPEND:
                definition["watermark"] = watermark
    if gold.join is not None:
        join = gold.join
        definition["join"] = {"input": join.input, "equal": list(join.equal),
                              "within": join.within, "kind": join.kind.value}
        definition["select"] = {s.name: s.expr for s in gold.select}
    if gold.python is not None:
        definition["python"] = gold.python
        definition["columns"] = {f.name: str(f.type) for f in gold.columns}
    if gold.keys:
        definition["keys"] = list(gold.keys)
    return definition


def change_definition(silver: SilverSpec) -> dict[str, Any]:
    """What a change flow's table and applied changes are made by: what carrying on from them
    needs unchanged (another key, order, delete rule or history would mix two in the table)."""
    changes = silver.changes
    assert changes is not None
    return {"keys": list(changes.keys), "sequence_by": list(changes.sequence_by),
            "delete_when": changes.delete_when, "scd": changes.scd,
            "track_history_columns": None if changes.track_history is None else list(changes.track_history),
            "track_history_except_columns": list(changes.track_history_except),
            **({"snapshot": True} if changes.snapshot else {})}


def differences(before: Any, now: Any, where: str = "") -> list[str]:
    """Each place two definitions differ, as ``key: before -> now``."""
    if isinstance(before, dict) and isinstance(now, dict):
        found = []
        for key in [*before, *(k for k in now if k not in before)]:
            inner = f"{where}.{key}" if where else key
            if key not in now:
                found.append(f"{inner} removed (was {json.dumps(before[key])})")
            elif key not in before:
                found.append(f"{inner} added ({json.dumps(now[key])})")
            else:
                found += differences(before[key], now[key], inner)
        return found
    return [] if before == now else [f"{where}: {json.dumps(before)} -> {json.dumps(now)}"]


def state_changes(recorded: dict[str, Any], declared: dict[str, Any]) -> list[str]:
    """:func:`differences` between the definition a state was recorded with and the declared
    one. A recorded definition without the state's types is compared without them: it says
    nothing about them."""
    if "types" not in recorded:
        declared = {key: value for key, value in declared.items() if key != "types"}
    return differences(recorded, declared)
