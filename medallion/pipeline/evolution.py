"""What of a changed declaration a table, or its query's state, can carry on from: the rules,
pure (the run applies them in :mod:`medallion.io.sinks.evolution`, ``medallion plan`` and
``medallion status`` to what the Delta logs and checkpoints hold, without Spark).

* **A table's columns** (:func:`schema_changes`): columns the declaration added, and fields it
  added to struct columns, can be added in place (Delta's ``ADD COLUMNS``); a column or field the
  declaration no longer has, or whose type changed, cannot.
* **A stateful query's definition** (:func:`state_definition`): a gold table's windows, groups
  and aggregates (or its join) live in its query's state, and a change to them cannot carry on
  from it (:func:`differences` names each).

Schemas are :class:`~medallion.pipeline.types.SqlType` structs: the declared columns, or what
:func:`~medallion.pipeline.types.from_schema_json` reads from a table's JSON schema.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from medallion.pipeline.model import GoldSpec
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


def schema_changes(declared: SqlType, held: SqlType) -> tuple[list[AddedColumn], list[str]]:
    """How the ``declared`` columns (a STRUCT) differ from the ``held`` ones of a table: the
    columns it lacks (fields of struct columns too, at any depth, in arrays' elements and maps'
    values as well), in the order they can be added, and, each as a sentence, what cannot be
    changed in place (a column or field the declaration dropped, or one whose type differs).
    Names match without case, as Delta's do."""
    added: list[AddedColumn] = []
    refused: list[str] = []
    _struct_changes(declared, held, (), added, refused)
    return added, refused


def _struct_changes(declared: SqlType, held: SqlType, parent: tuple[str, ...],
                    added: list[AddedColumn], refused: list[str]) -> None:
    held_by_name = {name.lower(): (name, kind) for name, kind in zip(held.fields, held.args,
                                                                      strict=True)}
    declared_names = {name.lower() for name in declared.fields}
    for position, (name, kind) in enumerate(zip(declared.fields, declared.args, strict=True)):
        had = held_by_name.get(name.lower())
        if had is None:
            added.append(AddedColumn(parent, name, kind,
                                     declared.fields[position - 1] if position else None))
        else:
            _type_changes(kind, had[1], (*parent, had[0]), added, refused)
    refused += [f"the table has column {'.'.join((*parent, name))}, which the declaration no "
                "longer has" for name in held.fields if name.lower() not in declared_names]


def _type_changes(declared: SqlType, held: SqlType, path: tuple[str, ...],
                  added: list[AddedColumn], refused: list[str]) -> None:
    """A column both have: a struct (also as an array's element or a map's value) may gain
    fields; any other difference is a new type."""
    if declared.name == held.name == "STRUCT":
        _struct_changes(declared, held, path, added, refused)
    elif declared.name == held.name == "ARRAY":
        _type_changes(declared.args[0], held.args[0], (*path, "element"), added, refused)
    elif declared.name == held.name == "MAP" and declared.args[0] == held.args[0]:
        _type_changes(declared.args[1], held.args[1], (*path, "value"), added, refused)
    elif held != declared:
        refused.append(f"column {'.'.join(path)} is {ddl_type(held)} in the table and "
                       f"{ddl_type(declared)} in the declaration")


def state_definition(gold: GoldSpec) -> dict[str, Any]:
    """What a gold query's state is made of, by its declaration: what carrying on from the state
    needs unchanged. Left out, since they apply to what comes next: the filter, the watermark,
    an aggregate's default, the expectations and the comments."""
    definition: dict[str, Any] = {"input": gold.input, "mode": gold.mode.value}
    if gold.window is not None:
        window = gold.window
        definition["window"] = {key: value for key, value in (
            ("kind", window.kind.value), ("column", window.column), ("size", window.size),
            ("slide", window.slide), ("gap", window.gap)) if value is not None}
        definition["group_by"] = list(gold.group_by)
        definition["aggregates"] = {a.name: f"{a.function.value}({a.column or '*'})"
                                    for a in gold.aggregates}
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
